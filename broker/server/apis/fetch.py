"""Fetch (key 1), versions 0-16 (Apache Kafka 2.7's 0-12, and Kafka 3.x's 13-16).

Reads whole batches from each partition through the replica layer
(:class:`~broker.replica.Partition`), starting at the batch that holds
``fetch_offset``, up to the high watermark for consumers (replica_id < 0) or
the log end offset for followers. A follower's fetch offset is its log end
offset: the leader records it once per request, which may move the high
watermark and bring the follower back into the ISR. Followers, and consumers
before v11, are answered by the leader only (NOT_LEADER_OR_FOLLOWER
elsewhere); from v11 a consumer may read a follower up to its high watermark
(KIP-392; the follower knows the leader's from its own fetches). With
``replica.selector.class`` set, the leader answers a v11+ consumer that sent
its ``rack_id`` with ``preferred_read_replica`` (a follower in that rack, see
:mod:`broker.replica.selector`) and no records for that partition, at once.
The record bytes are not copied: the log's ``FetchSlice`` (file, position,
length) goes into the ``records`` field and the network layer sends it with
``loop.sendfile``.

Limits: ``partition_max_bytes`` per partition and, from v3, ``max_bytes`` for
the whole response; from v3 the first batch of the first partition with data
is returned even when it is larger than both (KIP-74), so a consumer can
always make progress.

Long poll: when fewer than ``min_bytes`` are ready and no partition has an
error, the request parks in the replica layer's purgatory on its partitions for up to
``max_wait_ms`` (capped by ``fetch.purgatory.max.wait.ms``); an append to any
of them (or a move of its high watermark) wakes it (no polling). Shutdown wakes it too.

Versions: v0-3 fetchers cannot read RecordBatch v2; their data is
down-converted to message sets (magic 0 for v0-1, magic 1 for v2-3), a copy
only old clients pay for; zstd data then gets UNSUPPORTED_COMPRESSION_TYPE, and
a topic with ``message.downconversion.enable=false`` UNSUPPORTED_VERSION (as in
Kafka, only when there is data to convert: an empty answer is no error).
v4+ report ``last_stable_offset`` (LSO: the first offset of the earliest
transaction not yet decided, else the high watermark) and, with
``isolation_level`` 1 (read_committed), read only up to the LSO and list the
aborted transactions (producer id, first offset) that overlap what they
return, from the segments' ``.txnindex`` files (null for read_uncommitted);
the slice stays zero-copy, the consumer drops aborted records itself; v5+ ``log_start_offset``; v7+
incremental fetch sessions (KIP-227, :mod:`broker.server.fetch_sessions`): an incremental request is
expanded to every partition of its session, fetched as a full one, and answered with the partitions
that have something new; v9+ check ``current_leader_epoch``. v13+ name topics by id (KIP-516), in the
request, its forgotten topics and the answer: an id this broker does not know is answered UNKNOWN_TOPIC_ID
(before any authorization, as Kafka), and a session serves only requests that name topics the way the one
that made it did (FETCH_SESSION_TOPIC_ID_ERROR). v15 moves a follower's id into ``replica_state``
(KIP-903). v16 (KIP-951): a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its
``current_leader``, and the answer the ``node_endpoints`` of those leaders, so the consumer goes there
without a Metadata round trip. librdkafka 2.4+ and the Java client 3.7+ fetch at v16; our own client and
followers keep to v12.

Client quotas (:mod:`broker.server.quotas`): a consumer's fetch asks for no
more than its ``consumer_byte_rate`` allows in one window (``max_bytes`` is
lowered), and the record bytes answered (``ctx.response_bytes``) count against
it; the network layer empties a throttled answer.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleFetchRequest``): a follower (``replica_id`` >= 0) needs CLUSTER_ACTION
on the cluster, else every partition gets TOPIC_AUTHORIZATION_FAILED (29, as
Kafka answers) and its fetch offsets are not recorded (no ISR or high
watermark moves); a consumer needs READ on each topic, else that topic's
partitions get TOPIC_AUTHORIZATION_FAILED while the others are read. A refused
partition is not waited on and, as in Kafka, does not end the long poll by
itself. The cost: one attribute test per request without an authorizer; with
one, one decision per topic (per request, not per pass of the long poll),
never one per partition.
"""

from __future__ import annotations

import asyncio
import functools
import uuid

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.log import OffsetOutOfRange
from broker.protocol import ApiKey, ErrorCode, error_name
from broker.records import UnsupportedCompressionTypeError, downconvert
from broker.replica.manager import now_ms
from broker.replica.selector import NO_PREFERRED_REPLICA, preferred_read_replica
from broker.replica.quota import is_throttled
from broker.server.context import RequestContext
from broker.server.apis._common import LeaderHints
from broker.server.fetch_sessions import (INITIAL_EPOCH, INVALID_SESSION_ID, UNKNOWN_TOPIC_PREFIX, is_full,
                                          next_epoch, select_changes, unknown_topic_key)
from broker.protocol.schema import ZERO_UUID
from broker.server.quotas import who

INT32_MAX = 2**31 - 1


def _collect(ctx: RequestContext, request: dict, refused: set[str] | None,
             hints: LeaderHints | None) -> tuple[list[dict], int, list, bool, dict]:
    """One pass over the partitions: (responses, record bytes, wait keys, any error, bytes per topic).

    The topics in ``refused`` (None without an authorizer) are answered TOPIC_AUTHORIZATION_FAILED; ``hints``
    (v16+) gather the leaders of the partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH."""
    replicas = ctx.broker.replicas
    version = ctx.api_version
    replica_id = request["replica_id"]
    follower = replica_id >= 0
    # Kafka 2.7: followers and consumers before v11 (no client metadata, KIP-392) read from the leader only
    leader_only = follower or version < 11
    read_committed = not follower and version >= 4 and request["isolation_level"] == 1
    client_rack = request["rack_id"] if version >= 11 and not follower else ""
    selector = ctx.broker.config.replica_selector_class if client_rack else None
    now = now_ms()
    leader_quota = replicas.leader_quota
    remaining = request["max_bytes"] if version >= 3 else INT32_MAX
    total = 0
    keys = []
    has_error = redirected = False
    per_topic: dict[str, int] = {}
    responses = []
    by_id = version >= 13
    if hints is not None:
        hints.leaders.clear()  # this pass's answer is the one sent
    for t in request["topics"]:
        name = t["topic"]
        if by_id and name.startswith(UNKNOWN_TOPIC_PREFIX):  # an id this broker does not know
            responses.append({"topic": name, "topic_id": t.get("topic_id"), "partitions": [
                _partition_error(p["partition"], ErrorCode.UNKNOWN_TOPIC_ID) for p in t["partitions"]]})
            has_error = True
            continue
        if refused is not None and name in refused:
            responses.append({"topic": name, "topic_id": t.get("topic_id"), "partitions": [
                _partition_error(p["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t["partitions"]]})
            continue
        partitions = []
        for p in t["partitions"]:
            index = p["partition"]
            keys.append((name, index))
            out = {"partition_index": index, "error_code": ErrorCode.NONE, "high_watermark": -1,
                   "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                   "preferred_read_replica": -1, "records": b""}
            partitions.append(out)
            partition = replicas.partition(name, index)
            if partition is None:
                out["error_code"] = error = replicas.missing_error(name, index)
                if hints is not None and error in LeaderHints.ERRORS:  # no replica here: where the leader is
                    out["current_leader"] = hints.current_leader(name, index)
                has_error = True
                continue
            error = partition.check_leader(p["current_leader_epoch"], leader_only=leader_only)
            if error:
                out["error_code"] = error
                if hints is not None and error in LeaderHints.ERRORS:
                    out["current_leader"] = hints.current_leader(name, index)
                has_error = True
                continue
            hw = partition.high_watermark
            lso = partition.last_stable_offset
            out.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=partition.log_start_offset)
            if read_committed:
                out["aborted_transactions"] = []
            if not follower and p["fetch_offset"] == (lso if read_committed else hw) and selector is None:
                continue  # caught up: nothing to read (most partitions of a session, most of the time)
            if selector is not None and p["fetch_offset"] >= partition.log_start_offset:
                preferred = preferred_read_replica(selector, partition, client_rack, p["fetch_offset"],
                                                   lambda b: _rack_of(ctx.broker.metadata_cache, b), now)
                if preferred != NO_PREFERRED_REPLICA:  # no read here: the consumer goes to that replica
                    out["preferred_read_replica"] = preferred
                    redirected = True
                    continue
            # a replication throttle (broker.replica.quota): a follower outside the ISR of a throttled partition
            throttled = (follower and leader_quota.enabled and replica_id not in partition.isr
                         and is_throttled(partition.config.leader_replication_throttled_replicas,
                                          replicas.local_broker_id, index))
            if throttled and leader_quota.is_exceeded():
                continue
            limit = min(p["partition_max_bytes"], remaining) if version >= 3 else p["partition_max_bytes"]
            min_one = version >= 3 and total == 0
            if limit <= 0 and not min_one:
                continue
            try:
                piece = partition.read(p["fetch_offset"], max(limit, 0), follower=follower, min_one_batch=min_one,
                                       read_committed=read_committed)
            except OffsetOutOfRange:
                out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                has_error = True
                continue
            except OSError as exc:  # its disk failed
                ctx.broker.log_manager.report_io_error(partition.log_dir, f"reading {name}-{index}", exc)
                out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                has_error = True
                continue
            if piece.length == 0:
                continue
            if version < 4:
                if not partition.config.message_downconversion_enable:
                    out["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                    has_error = True
                    continue
                try:
                    data = downconvert(piece.read_bytes(), 0 if version <= 1 else 1)
                except UnsupportedCompressionTypeError:
                    out["error_code"] = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                    has_error = True
                    continue
                out["records"] = data
                size = len(data)
            else:
                out["records"] = piece
                size = piece.length
                if read_committed:
                    out["aborted_transactions"] = [
                        {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                        for txn in partition.aborted_transactions(p["fetch_offset"], lso)]
            total += size
            remaining -= size
            if throttled:
                leader_quota.record(size)
            per_topic[name] = per_topic.get(name, 0) + size
        responses.append({"topic": name, "topic_id": t.get("topic_id"), "partitions": partitions})
    # a redirected consumer is answered at once, as an error is (Kafka's fetchMessages)
    return responses, total, keys, has_error or redirected, per_topic


def _partition_error(index: int, code: int) -> dict:
    return {"partition_index": index, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}


def _resolve_topic_ids(broker, request: dict) -> None:
    """Fetch v13+: each topic's id (and each forgotten one's) is looked up and its name put in ``topic``, where
    the rest of the handler and the sessions read it; an unknown id gets :func:`unknown_topic_key`."""
    name_of = broker.metadata_cache.topic_name
    for t in request["topics"]:
        t["topic"] = name_of(t["topic_id"]) or unknown_topic_key(t["topic_id"])
    for t in request["forgotten_topics_data"]:
        t["topic"] = name_of(t["topic_id"]) or unknown_topic_key(t["topic_id"])


def _with_topic_ids(broker, responses: list[dict]) -> None:
    """Fetch v13+: every topic of the answer named by its id (those a session expanded carry none yet)."""
    for t in responses:
        if t.get("topic_id") is None:
            name = t["topic"]
            t["topic_id"] = (uuid.UUID(name[len(UNKNOWN_TOPIC_PREFIX):]) if name.startswith(UNKNOWN_TOPIC_PREFIX)
                             else broker.topics.topic_id(name) or ZERO_UUID)


def _unauthorized(ctx: RequestContext, request: dict) -> set[str]:
    """With an authorizer: the topics this request may not read (every one for a follower without
    CLUSTER_ACTION on the cluster, else those without READ), one decision per topic."""
    names = {t["topic"] for t in request["topics"] if not t["topic"].startswith(UNKNOWN_TOPIC_PREFIX)}
    if request["replica_id"] >= 0:
        return set() if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME) else names
    return names - ctx.authorized(AclOperation.READ, ResourceType.TOPIC, names)


def _rack_of(cache, broker_id: int) -> str | None | bool:
    broker = cache.broker(broker_id)
    return False if broker is None else broker.rack


def _record_follower_fetch(replicas, request: dict) -> None:
    """A follower's fetch offsets are its log ends: the leader records them once per request (ISR, high watermark)."""
    replica_id = request["replica_id"]
    for t in request["topics"]:
        for p in t["partitions"]:
            partition = replicas.partition(t["topic"], p["partition"])
            if (partition is not None and partition.is_leader
                    and partition.leader_epoch_error(p["current_leader_epoch"]) == ErrorCode.NONE):
                replicas.update_follower_fetch(partition, replica_id, p["fetch_offset"])


def _session_error(metrics, error: int) -> dict:
    metrics.fetch_errors.labels(error_name(error)).inc()
    return {"throttle_time_ms": 0, "error_code": error, "session_id": INVALID_SESSION_ID, "responses": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    metrics = broker.metrics
    session = None  # an incremental request's session (broker.server.fetch_sessions)
    new_session = False  # a full request that asks for one
    version = ctx.api_version
    if version >= 15:  # the follower's id moved into ReplicaState (KIP-903)
        request["replica_id"] = request["replica_state"]["replica_id"]
    if version >= 13:
        _resolve_topic_ids(broker, request)
    if version >= 7:
        cache = broker.fetch_sessions
        session_id, epoch = request["session_id"], request["session_epoch"]
        if is_full(epoch):
            if session_id != INVALID_SESSION_ID:  # a full request closes the session it names
                cache.remove(session_id)
            new_session = epoch == INITIAL_EPOCH
        else:
            session = cache.get(session_id)
            if session is None:
                return _session_error(metrics, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            if session.epoch != epoch:
                return _session_error(metrics, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            if session.topic_ids != (version >= 13):
                return _session_error(metrics, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
            if session.topic_ids:  # before the request's changes: they were resolved against today's metadata
                session.check_ids(broker.metadata_cache.topic_name, broker.metadata_cache.version)
            session.update(request["topics"], request["forgotten_topics_data"])
            if not session.partitions:  # nothing left: closed, and this request answered without one
                cache.remove(session_id)
                session = None
            else:
                cache.touch(session, now_ms())
                session.epoch = next_epoch(session.epoch)
                request["topics"] = session.as_topics()
    loop = asyncio.get_running_loop()
    max_wait = min(max(request["max_wait_ms"], 0), broker.config.fetch_purgatory_max_wait_ms) / 1000
    deadline = loop.time() + max_wait
    min_bytes = request["min_bytes"]
    refused = None  # the topics refused, with an authorizer (decided once per topic, per request)
    if broker.authorizer is not None and ctx.connection is not None:
        refused = _unauthorized(ctx, request)
    follower = request["replica_id"] >= 0
    if follower and not refused:
        _record_follower_fetch(broker.replicas, request)
    if not follower and broker.quotas.fetch.enabled:
        # never more than the client's fetch quota allows in one window (else it could never be answered
        # without a throttle; Kafka's getMaxValueInQuotaWindow)
        cap = broker.quotas.fetch.max_in_window(*who(ctx))
        if cap is not None and cap < request["max_bytes"]:
            request["max_bytes"] = max(int(cap), 1)
    hints = LeaderHints(ctx) if version >= 16 else None
    while True:
        responses, total, keys, has_error, per_topic = _collect(ctx, request, refused, hints)
        if total >= min_bytes or has_error or not keys:
            break
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        if not await broker.replicas.purgatory.wait(keys, remaining):
            responses, total, keys, has_error, per_topic = _collect(ctx, request, refused, hints)
            break
    ctx.response_bytes = -1 if follower else total  # a consumer's fetch counts against its fetch quota
    if not follower and broker.quotas.active:
        ctx.fetched = per_topic  # counted once the quotas have not emptied the answer (quotas.throttle_time)
    else:
        metrics.count_bytes_out(per_topic)
    if has_error or refused:
        for t in responses:
            for p in t["partitions"]:
                if p["error_code"]:
                    metrics.fetch_errors.labels(error_name(p["error_code"])).inc()
    if version >= 13:
        _with_topic_ids(broker, responses)
    answer = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": INVALID_SESSION_ID,
              "responses": responses}
    if hints is not None and hints.leaders:
        answer["node_endpoints"] = hints.node_endpoints()
    if session is not None:
        if session.epoch != next_epoch(epoch):  # another request of the session came first
            return {**answer, "error_code": ErrorCode.INVALID_FETCH_SESSION_EPOCH, "session_id": session.id,
                    "responses": []}
        answer["responses"], ctx.fetch_undo = select_changes(session, responses)
        answer["session_id"] = session.id
    elif new_session:
        created = broker.fetch_sessions.create(now_ms(), request["replica_id"] >= 0, request["topics"], responses,
                                               topic_ids=version >= 13,
                                               metadata_version=broker.metadata_cache.version)
        answer["session_id"] = created
        if created != INVALID_SESSION_ID:
            ctx.fetch_undo = functools.partial(_forget_session, broker.fetch_sessions, created)
    return answer


def _forget_session(cache, session_id: int, response: dict) -> None:
    """A throttled full request keeps no session (Kafka answers it without one)."""
    cache.remove(session_id)
    response["session_id"] = INVALID_SESSION_ID


def register(registry) -> None:
    registry.register(ApiKey.FETCH, 0, 16, handle)
