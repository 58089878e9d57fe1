"""Metadata (key 3), versions 0-12 (Apache Kafka 3.1's range: v10+ carry topic ids, KIP-516).

Answers from the metadata cache (what the controller last told this broker,
so every broker of a cluster answers alike): the cluster id (v2+), the
controller id (v1+), the live brokers with their advertised endpoints and
racks, and for each
topic asked for (all topics when the list is null, or empty at v0) its
partitions: leader, leader epoch (v7+), replicas, ISR and offline replicas
(v5+). Before the controller's first UpdateMetadata the cache is empty. An unknown topic is created with the broker defaults when
``auto.create.topics.enable`` is true and the request allows it
(``allow_auto_topic_creation``, v4+; always allowed below v4); otherwise it
gets UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for an illegal
name. Internal topics are never auto-created here.

Brokers are answered at the listener the request came in on (a broker without
it is left out), and a partition whose leader has no such listener gets leader
-1 with LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE below, and for a leader
that is not alive), as Kafka 2.7 answers.

A partition whose replica on this broker is in a failed log dir, while the
cache still names this broker its leader (the controller has not acted on the
failure yet; single node: it never finds another leader), answers as Kafka's
controller leaves it: leader -1, LEADER_NOT_AVAILABLE, this broker in
``offline_replicas``. Once the controller has moved the leadership, the
cache's answer stands: this broker must not hide the new leader from a client
it bootstraps (librdkafka takes a leader of -1 as final in
``get_watermark_offsets``: "Unknown partition").

Topic ids (KIP-516): v10+ answer each topic's id (the zero uuid for one the
controller has not named yet). v12 may ask for topics by id (name null): an
unknown id gets UNKNOWN_TOPIC_ID with a null name, and topics asked for by id
are never auto-created. v10-11 may not (INVALID_REQUEST for every topic asked
for, as Kafka answers a null name or an id there).

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleTopicMetadataRequest``): a topic needs DESCRIBE. Asked for by name,
one without it gets TOPIC_AUTHORIZATION_FAILED (29, no partitions, whether it
exists or not); when all topics are asked for, those without it are left out.
Auto-creating a topic needs CREATE on the cluster or on the topic, else the
topic gets TOPIC_AUTHORIZATION_FAILED. v8+: ``topic_authorized_operations``
(when ``include_topic_authorized_operations``) is the bit field of the topic
operations allowed, and ``cluster_authorized_operations`` (v8-10, when
``include_cluster_authorized_operations``) those of the cluster, 0 without
DESCRIBE on it; without an authorizer every operation is allowed; not asked
for, -2^31.
"""

from __future__ import annotations

import uuid

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.schema import ZERO_UUID
from broker.server.apis.describe_cluster import (NOT_REQUESTED, TOPIC_OPERATIONS, authorized_operations,
                                                 cluster_authorized_operations)
from broker.server.context import RequestContext
from broker.server.metadata_cache import INTERNAL_TOPICS
from broker.server.topics import TopicError, TopicInfo, validate_topic_name


def broker_entries(ctx: RequestContext) -> list[dict]:
    """The live brokers, each at its listener of the name the request came in on; a broker without
    that listener is left out (as Kafka does: a client reaches no broker on another listener)."""
    entries = []
    for b in ctx.broker.metadata_cache.alive_brokers():
        endpoint = b.listener(ctx.listener)
        if endpoint is not None:
            entries.append({"node_id": b.id, "host": endpoint.host, "port": endpoint.port, "rack": b.rack})
    return entries


def partition_entry(p, offline_here: bool, broker_id: int) -> dict:
    leader = -1 if offline_here and p.leader == broker_id else p.leader
    offline = list(p.offline_replicas)
    if offline_here and broker_id not in offline:
        offline.append(broker_id)
    return {
        "error_code": ErrorCode.LEADER_NOT_AVAILABLE if offline_here and leader < 0 else ErrorCode.NONE,
        "partition_index": p.partition,
        "leader_id": leader,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas),
        "isr_nodes": list(p.isr),
        "offline_replicas": offline,
    }


def topic_entry(ctx: RequestContext, info: TopicInfo) -> dict:
    replicas = ctx.broker.replicas
    broker_id = ctx.broker.broker_id
    partitions = [partition_entry(p, replicas.is_offline(info.name, p.partition), broker_id)
                  for p in sorted(info.partitions.values(), key=lambda p: p.partition)]
    cache = ctx.broker.metadata_cache
    for entry in partitions:
        leader = entry["leader_id"]
        if leader >= 0 and ((b := cache.broker(leader)) is None or b.listener(ctx.listener) is None):
            # a leader the client could not reach on this listener (Kafka 2.7's rule): no leader, and
            # LISTENER_NOT_FOUND from v6 when the broker is alive without this listener
            alive = b is not None
            entry["error_code"] = (ErrorCode.LISTENER_NOT_FOUND if alive and ctx.api_version >= 6
                                   else ErrorCode.LEADER_NOT_AVAILABLE)
            entry["leader_id"] = -1
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": ctx.broker.topics.topic_id(info.name),
        "is_internal": info.is_internal,
        "partitions": partitions,
    }


def error_entry(name: str | None, error_code: int, internal: bool | None = None,
                topic_id: uuid.UUID = ZERO_UUID) -> dict:
    return {"error_code": error_code, "name": name, "topic_id": topic_id,
            "is_internal": name in INTERNAL_TOPICS if internal is None else internal, "partitions": []}


def _by_id(ctx: RequestContext, wanted: list[dict]) -> list[dict]:
    """v12: the topics asked for by id (Kafka's rules, see the module docstring)."""
    cache = ctx.broker.metadata_cache
    entries, refused, unknown = [], [], []
    for topic_id in dict.fromkeys(item["topic_id"] for item in wanted):
        name = cache.topic_name(topic_id)
        info = None if name is None else ctx.broker.topics.get(name)
        if info is None:
            unknown.append(error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, internal=False, topic_id=topic_id))
        elif not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            refused.append(error_entry(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, internal=False, topic_id=topic_id))
        else:
            entries.append(topic_entry(ctx, info))
    return entries + unknown + refused


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    topics = broker.topics
    wanted = request["topics"]
    refused = []  # answered after the others, as Kafka orders them
    if wanted and ctx.api_version >= 10 and any(item["topic_id"] != ZERO_UUID or item["name"] is None
                                                for item in wanted):
        if ctx.api_version < 12:  # ids, or null names, are v12's
            return _response(ctx, request, [error_entry(item["name"] or "", ErrorCode.INVALID_REQUEST, internal=False)
                                            for item in wanted])
        if any(item["name"] is not None and item["topic_id"] == ZERO_UUID for item in wanted):
            return _response(ctx, request, [error_entry(item["name"], ErrorCode.INVALID_REQUEST, internal=False,
                                                        topic_id=item["topic_id"]) for item in wanted])
        entries = _by_id(ctx, wanted)
        _authorized_operations(ctx, request, entries)
        return _response(ctx, request, entries)
    if wanted is None or (ctx.api_version == 0 and not wanted):
        infos = [info for info in map(topics.get, broker.metadata_cache.topics()) if info is not None]
        if broker.authorizer is not None:  # those without DESCRIBE are left out
            allowed = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [info.name for info in infos])
            infos = [info for info in infos if info.name in allowed]
        entries = [topic_entry(ctx, info) for info in infos]
    else:
        allow_auto = broker.config.auto_create_topics_enable and (
            ctx.api_version < 4 or request["allow_auto_topic_creation"])
        names = list(dict.fromkeys(item["name"] for item in wanted))
        allowed = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        may_create_all = None  # CREATE on the cluster, asked once if some topic is to be created
        entries = []
        no_create = []
        for name in names:
            if name not in allowed:  # whether it exists or not is not told
                refused.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, internal=False))
                continue
            info = topics.get(name)
            if info is None:
                if allow_auto:
                    if may_create_all is None:
                        may_create_all = ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                    if not may_create_all and not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name):
                        no_create.append(error_entry(name or "", ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                        continue
                try:
                    validate_topic_name(name)
                    if not allow_auto or name in INTERNAL_TOPICS:
                        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic")
                    info = await topics.auto_create(name)
                except TopicError as exc:
                    entries.append(error_entry(name or "", exc.error_code))
                    continue
            entries.append(topic_entry(ctx, info))
        refused[:0] = no_create
    _authorized_operations(ctx, request, entries)
    return _response(ctx, request, entries + refused)


def _authorized_operations(ctx: RequestContext, request: dict, entries: list[dict]) -> None:
    if ctx.api_version >= 8 and request["include_topic_authorized_operations"]:
        for entry in entries:  # those allowed DESCRIBE (Kafka: also when unknown), not the refused
            if entry["name"] is not None:
                entry["topic_authorized_operations"] = authorized_operations(ctx, ResourceType.TOPIC, entry["name"],
                                                                             TOPIC_OPERATIONS)


def _response(ctx: RequestContext, request: dict, entries: list[dict]) -> dict:
    broker = ctx.broker
    cluster_operations = NOT_REQUESTED
    if 8 <= ctx.api_version <= 10 and request["include_cluster_authorized_operations"]:
        cluster_operations = cluster_authorized_operations(ctx)
    return {
        "throttle_time_ms": 0,
        "brokers": broker_entries(ctx),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.metadata_cache.controller_id,
        "topics": entries,
        "cluster_authorized_operations": cluster_operations,
    }


def register(registry) -> None:
    registry.register(ApiKey.METADATA, 0, 12, handle)
