"""ShareGroupHeartbeat (76) v1, ShareGroupDescribe (77) v1, ShareFetch (78) v1-2, ShareAcknowledge (79) v1-2,
DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0 and DeleteShareGroupOffsets (92) v0 (v2 of
ShareFetch and ShareAcknowledge: RENEW acknowledgements, KIP-1222, which keep records acquired with a fresh lock,
in requests that say ``IsRenewAck`` and fetch nothing; and ShareFetch's ``record_limit`` acquire mode, KIP-1206,
which acquires at most MaxRecords, splitting a batch):
share groups (KIP-932) as Kafka 4.2 serves them to librdkafka's and the Java client's share consumers.
Served while ``group.share.enable`` is true (the default); the rules are in :mod:`broker.share`.

Authorization (with an authorizer): the heartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and
DESCRIBE on each subscribed topic (TOPIC_AUTHORIZATION_FAILED); ShareGroupDescribe DESCRIBE on the group;
ShareFetch and ShareAcknowledge READ on the group (top-level GROUP_AUTHORIZATION_FAILED) and READ on each
topic (TOPIC_AUTHORIZATION_FAILED for its partitions); AlterShareGroupOffsets READ on the group and
DeleteShareGroupOffsets DELETE on it, both READ on each topic.

Partition errors, as Kafka answers them: UNKNOWN_TOPIC_ID for an id no topic has, NOT_LEADER_OR_FOLLOWER
(with the leader and its endpoint) where this broker does not lead, INVALID_REQUEST for malformed
acknowledgement batches, INVALID_RECORD_STATE for records the member does not hold (any longer).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from broker.acl import AclOperation, ResourceType
from broker.cluster.store import StoreError
from broker.protocol import ApiKey, ErrorCode
from broker.server.apis._common import LeaderHints
from broker.server.context import RequestContext
from broker.share.coordinator import HeartbeatError
from broker.share.manager import next_epoch

log = logging.getLogger("broker.share")


# -- ShareGroupHeartbeat ----------------------------------------------------------------------------
async def heartbeat(ctx: RequestContext, request: dict) -> dict:
    base = {"throttle_time_ms": 0, "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0,
            "assignment": None, "error_message": None}
    group_id = request["group_id"]
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id or ""):
        return {**base, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    names = request["subscribed_topic_names"] or []
    if names and ctx.broker.authorizer is not None:
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names) != set(names):
            return {**base, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    if group_id:
        error = await ctx.broker.coordinator.serving_error(group_id)
        if error:
            return {**base, "error_code": error}
        await ctx.broker.share_coordinator.heartbeat_gate(group_id)  # not while its offsets change
    try:
        return {**base, **ctx.broker.share_coordinator.heartbeat(ctx, request)}
    except HeartbeatError as exc:
        return {**base, "error_code": exc.code, "error_message": exc.message}


async def describe(ctx: RequestContext, request: dict) -> dict:
    groups = []
    for group_id in request["group_ids"]:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_no_group(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        error = ctx.broker.coordinator.group_error(group_id)
        if error:
            groups.append(_no_group(group_id, error))
            continue
        described = ctx.broker.share_coordinator.describe(group_id)
        if described["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:  # known here only by what it consumed?
            try:
                if await ctx.broker.run_blocking(ctx.broker.share_manager.has_stored_state, group_id):
                    described = ctx.broker.share_coordinator.describe_empty(group_id)
            except StoreError as exc:
                log.warning("share group %s: the store could not be read: %s", group_id, exc)
                described = _no_group(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        groups.append(described)
    return {"throttle_time_ms": 0, "groups": groups}


def _no_group(group_id: str, error: int) -> dict:
    return {"group_id": group_id, "error_code": error, "group_state": "", "group_epoch": -1,
            "assignment_epoch": -1, "assignor_name": "", "members": []}


# -- ShareFetch and ShareAcknowledge ------------------------------------------------------------------
def _merged(topics: list[dict]) -> dict[tuple[uuid.UUID, int], list[dict]]:
    """(topic id, partition) -> acknowledgement batches; a topic or partition named twice is merged (librdkafka
    may name a topic twice in one request)."""
    out: dict[tuple[uuid.UUID, int], list[dict]] = {}
    for t in topics:
        for p in t["partitions"]:
            out.setdefault((t["topic_id"], p["partition_index"]), []).extend(p["acknowledgement_batches"])
    return out


class _Answer:
    """Per-partition results, grouped by topic in the response."""

    def __init__(self, ctx: RequestContext) -> None:
        self.parts: dict[tuple[uuid.UUID, int], dict] = {}
        self.hints = LeaderHints(ctx)

    def entry(self, tip, **defaults) -> dict:
        entry = self.parts.get(tip)
        if entry is None:
            entry = self.parts[tip] = {"partition_index": tip[1], "error_code": ErrorCode.NONE,
                                       "current_leader": {"leader_id": -1, "leader_epoch": -1}, **defaults}
        return entry

    def error(self, tip, code: int, ctx: RequestContext, name: str | None, **defaults) -> dict:
        entry = self.entry(tip, **defaults)
        entry["error_code"] = code
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and name is not None:
            entry["current_leader"] = self.hints.current_leader(name, tip[1])
        return entry

    def responses(self) -> list[dict]:
        by_topic: dict[uuid.UUID, list[dict]] = {}
        for (topic_id, _p), entry in sorted(self.parts.items(), key=lambda i: (str(i[0][0]), i[0][1])):
            by_topic.setdefault(topic_id, []).append(entry)
        return [{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()]

    def node_endpoints(self) -> list[dict]:
        return self.hints.node_endpoints()


def _locate(ctx: RequestContext, tip, refused: set[str]) -> tuple[int, str | None, object]:
    """(error, topic name, the replica layer's partition) of a (topic id, partition) this broker should lead."""
    name = ctx.broker.metadata_cache.topic_name(tip[0])
    if name is None:
        return ErrorCode.UNKNOWN_TOPIC_ID, None, None
    if name in refused:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, None
    replicas = ctx.broker.replicas
    partition = replicas.partition(name, tip[1])
    if partition is None:
        return replicas.missing_error(name, tip[1]), name, None
    error = partition.check_leader(-1)
    return error, name, partition


def _refused_topics(ctx: RequestContext, tips) -> set[str]:
    if ctx.broker.authorizer is None:
        return set()
    names = {n for t, _p in tips if (n := ctx.broker.metadata_cache.topic_name(t)) is not None}
    return names - ctx.authorized(AclOperation.READ, ResourceType.TOPIC, names)


async def _acknowledge_all(ctx: RequestContext, group_id: str, member_id: str, acks: dict, answer: _Answer,
                           refused: set[str], field: str, defaults: dict, renew: bool = False) -> None:
    """Apply the acknowledgements (RENEW among them with ``renew``, v2); each partition's result goes in
    ``field`` of its entry once stored."""
    manager = ctx.broker.share_manager
    stored = []
    for tip, batches in acks.items():
        if not batches:
            continue
        error, name, partition = _locate(ctx, tip, refused)
        if error:
            entry = answer.error(tip, error, ctx, name, **defaults)
            entry[field] = error
            continue
        held = await manager.share_partition(group_id, tip[0], name, tip[1], partition)
        code = manager.acknowledge(held, member_id, batches, renew)
        answer.entry(tip, **defaults)[field] = code
        if code == ErrorCode.NONE:
            stored.append((tip, held))
    for tip, held in stored:
        if not await manager.persist(held):
            answer.entry(tip, **defaults)[field] = ErrorCode.KAFKA_STORAGE_ERROR


def _session_check(ctx: RequestContext, request: dict, fetch: bool):
    """(error, session) for a request's share session epoch: a ShareFetch at epoch 0 opens a session, an epoch
    N > 0 that matches moves the session to N + 1 (ShareFetch and ShareAcknowledge share the count)."""
    manager = ctx.broker.share_manager
    group_id, member_id, epoch = request["group_id"], request["member_id"], request["share_session_epoch"]
    if epoch == 0:
        if not fetch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session = manager.open_session(group_id, member_id, ctx.connection)
        return (ErrorCode.SHARE_SESSION_LIMIT_REACHED, None) if session is None else (ErrorCode.NONE, session)
    error, session = manager.session_error(group_id, member_id, epoch)
    if session is not None and epoch != -1:
        session.epoch = next_epoch(session.epoch)
    return error, session


RECORD_LIMIT = 1  # ShareFetch v2's ShareAcquireMode: 0 batch_optimized (whole batches), 1 record_limit
FETCH_DEFAULTS = {"error_message": None, "acknowledge_error_code": ErrorCode.NONE,
                  "acknowledge_error_message": None, "records": b"", "acquired_records": []}
ACK_DEFAULTS = {"error_message": None}


def _refusal(ctx: RequestContext, request: dict, base: dict) -> dict | None:
    """The answer to a ShareFetch or ShareAcknowledge without its group and member, or not allowed to READ the
    group; None when it may go on."""
    if not request["group_id"] or not request["member_id"]:
        return {**base, "error_code": ErrorCode.INVALID_REQUEST, "error_message": "a group id and a member id"}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        return {**base, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    return None


def _base() -> dict:
    return {"throttle_time_ms": 0, "error_message": None, "acquisition_lock_timeout_ms": 0, "responses": [],
            "node_endpoints": []}


async def share_fetch(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    manager = broker.share_manager
    group_id, member_id, epoch = request["group_id"], request["member_id"], request["share_session_epoch"]
    base = _base()
    denied = _refusal(ctx, request, base)
    if denied is not None:
        return denied
    wanted = _merged(request["topics"])
    acks = {tip: b for tip, b in wanted.items() if b}
    if epoch == 0 and acks:
        return {**base, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "acknowledgements in a request that opens a share session"}
    renew = ctx.api_version >= 2 and request["is_renew_ack"]
    if renew and any(request[k] for k in ("max_wait_ms", "min_bytes", "max_bytes", "max_records")):
        return {**base, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "a renewing ShareFetch fetches nothing: MaxWaitMs, MinBytes, MaxBytes and "
                                 "MaxRecords must be 0"}
    error, session = _session_check(ctx, request, fetch=True)
    if error:
        return {**base, "error_code": error}
    base["acquisition_lock_timeout_ms"] = manager.lock_duration_ms(group_id)
    answer = _Answer(ctx)
    refused = _refused_topics(ctx, set(wanted) | session.partitions)
    await _acknowledge_all(ctx, group_id, member_id, acks, answer, refused, "acknowledge_error_code", FETCH_DEFAULTS,
                           renew)
    if epoch == -1 or renew:  # acknowledgements only (and with -1 the session ends)
        if epoch == -1:
            manager.close_session(session)
        return {**base, "error_code": ErrorCode.NONE, "responses": answer.responses(),
                "node_endpoints": answer.node_endpoints()}
    added = set(wanted) - session.partitions
    session.partitions |= set(wanted)
    for t in request["forgotten_topics_data"]:
        for p in t["partitions"]:
            tip = (t["topic_id"], p)
            session.partitions.discard(tip)
            manager.release(group_id, member_id, tip)
    for tip in added:
        answer.entry(tip, **FETCH_DEFAULTS)  # a partition new to the session is answered, records or not
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request["max_wait_ms"], 0) / 1000
    while True:
        acquired, keys = await _fetch_once(ctx, request, session, answer, refused)
        remaining = deadline - loop.time()
        if acquired or remaining <= 0 or not keys or any(e["error_code"] for e in answer.parts.values()):
            break
        if not await broker.replicas.purgatory.wait(keys, remaining):
            await _fetch_once(ctx, request, session, answer, refused)
            break
    return {**base, "error_code": ErrorCode.NONE, "responses": answer.responses(),
            "node_endpoints": answer.node_endpoints()}


async def _fetch_once(ctx: RequestContext, request: dict, session, answer: _Answer, refused: set[str]):
    """One pass over the session's partitions; (records acquired, purgatory keys to wait on)."""
    manager = ctx.broker.share_manager
    budget = max(request["max_records"], 1)
    remaining_bytes = request["max_bytes"]
    acquired_total = 0
    keys = []
    # start where the previous request of the session stopped, so no partition starves
    tips = sorted(session.partitions, key=lambda tip: (str(tip[0]), tip[1]))
    if tips:
        shift = session.epoch % len(tips)
        tips = tips[shift:] + tips[:shift]
    for tip in tips:
        error, name, partition = _locate(ctx, tip, refused)
        if error:
            answer.error(tip, error, ctx, name, **FETCH_DEFAULTS)
            continue
        keys.append((name, tip[1]))
        if acquired_total >= budget or (remaining_bytes <= 0 and acquired_total):
            continue
        held = await manager.share_partition(session.group_id, tip[0], name, tip[1], partition)
        try:
            runs, data, count = await manager.acquire(held, partition, session.member_id, budget - acquired_total,
                                                      remaining_bytes, min_one=acquired_total == 0,
                                                      record_limit=ctx.api_version >= 2
                                                      and request["share_acquire_mode"] == RECORD_LIMIT)
        except OSError as exc:
            ctx.broker.log_manager.report_io_error(partition.log_dir, f"reading {name}-{tip[1]}", exc)
            answer.error(tip, ErrorCode.KAFKA_STORAGE_ERROR, ctx, name, **FETCH_DEFAULTS)
            continue
        if count:
            entry = answer.entry(tip, **FETCH_DEFAULTS)
            entry["records"] = data
            entry["acquired_records"] = runs
            acquired_total += count
            remaining_bytes -= len(data)
    return acquired_total, keys


async def share_acknowledge(ctx: RequestContext, request: dict) -> dict:
    manager = ctx.broker.share_manager
    group_id, member_id, epoch = request["group_id"], request["member_id"], request["share_session_epoch"]
    base = _base()
    denied = _refusal(ctx, request, base)
    if denied is not None:
        return denied
    error, session = _session_check(ctx, request, fetch=False)
    if error:
        return {**base, "error_code": error}
    acks = _merged(request["topics"])
    answer = _Answer(ctx)
    await _acknowledge_all(ctx, group_id, member_id, acks, answer, _refused_topics(ctx, acks), "error_code",
                           ACK_DEFAULTS, ctx.api_version >= 2 and request["is_renew_ack"])
    if epoch == -1:
        manager.close_session(session)
    return {**base, "error_code": ErrorCode.NONE, "responses": answer.responses(),
            "node_endpoints": answer.node_endpoints(),
            "acquisition_lock_timeout_ms": manager.lock_duration_ms(group_id)}  # v2


# -- DescribeShareGroupOffsets ----------------------------------------------------------------------------
async def describe_offsets(ctx: RequestContext, request: dict) -> dict:
    """Each group's start offset per partition (what it has consumed), from the metadata store; v1 adds the lag:
    the records between the start offset and the high watermark not yet acknowledged or archived (where this
    broker has the partition; -1 elsewhere). Topics null: every partition the group has consumed; a partition
    the group never consumed has start offset -1."""
    broker = ctx.broker
    groups = []
    for g in request["groups"]:
        group_id = g["group_id"]
        error = (ErrorCode.GROUP_AUTHORIZATION_FAILED if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP,
                                                                             group_id)
                 else broker.coordinator.group_error(group_id))
        if error:
            groups.append({"group_id": group_id, "topics": [], "error_code": error, "error_message": None})
            continue
        stored = await broker.run_blocking(broker.share_manager.stored_offsets, group_id)
        wanted: dict[str, list[int]] = {}
        if g["topics"] is None:
            for (topic_id, index) in stored:
                name = broker.metadata_cache.topic_name(topic_id)
                if name is not None:
                    wanted.setdefault(name, []).append(index)
        else:
            for t in g["topics"]:
                wanted.setdefault(t["topic_name"], []).extend(t["partitions"])
        refused = _refused_describe(ctx, wanted)
        topics = []
        for name, indexes in sorted(wanted.items()):
            topic_id = broker.topics.topic_id(name)
            parts = []
            for index in sorted(set(indexes)):
                entry = {"partition_index": index, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                         "error_code": ErrorCode.NONE, "error_message": None}
                meta = broker.metadata_cache.partition(name, index)
                if name in refused:
                    entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif meta is None:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif (snapshot := stored.get((topic_id, index))) is not None:
                    start = int(snapshot["start_offset"])
                    entry.update(start_offset=start, leader_epoch=meta.leader_epoch)
                    local = broker.replicas.partition(name, index)
                    if local is not None:
                        done = sum(last - first + 1 for first, last, state, _count in snapshot["state_batches"]
                                   if state in (2, 4))  # acknowledged, archived
                        entry["lag"] = max(local.high_watermark - start - done, 0)
                parts.append(entry)
            topics.append({"topic_name": name, "topic_id": topic_id, "partitions": parts})
        groups.append({"group_id": group_id, "topics": topics, "error_code": ErrorCode.NONE, "error_message": None})
    return {"throttle_time_ms": 0, "groups": groups}


# -- AlterShareGroupOffsets and DeleteShareGroupOffsets -------------------------------------------------------
def _top_error(code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": []}


async def _offsets_gate(ctx: RequestContext, operation: AclOperation, group_id: str) -> dict | None:
    """The top-level refusal of an offsets change (``operation`` on the group, then the coordinator), or None."""
    if not ctx.authorize(operation, ResourceType.GROUP, group_id or ""):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    error = await ctx.broker.coordinator.serving_error(group_id)
    return _top_error(error) if error else None


async def alter_offsets(ctx: RequestContext, request: dict) -> dict:
    """New start offsets for an empty share group (``kafka-share-groups.sh --reset-offsets``), made if unknown.
    Each named partition's state becomes its start offset with nothing in flight; what leaders held of the old
    state is dropped (here at once, elsewhere at their next write), so the group's next fetch starts there.
    Partition errors: TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition),
    INVALID_REQUEST (a negative start offset, which Kafka 4.2 takes without a check; here it is refused rather
    than stored as a position no fetch could start from); top-level: GROUP_AUTHORIZATION_FAILED, the coordinator's errors,
    GROUP_ID_NOT_FOUND (a group of another type), NON_EMPTY_GROUP (it has members)."""
    broker = ctx.broker
    group_id = request["group_id"]
    if (refused := await _offsets_gate(ctx, AclOperation.READ, group_id)) is not None:
        return refused
    names = [t["topic_name"] for t in request["topics"]]
    readable = (set(names) if broker.authorizer is None
                else ctx.authorized(AclOperation.READ, ResourceType.TOPIC, set(names)))
    responses, starts, altered = [], {}, set()
    for t in request["topics"]:
        name = t["topic_name"]
        meta = broker.metadata_cache.topic(name) if name in readable else None
        topic_id = broker.topics.topic_id(name) if meta is not None else None
        parts = []
        for p in t["partitions"]:
            index = p["partition_index"]
            if name not in readable:
                code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
            elif meta is None or topic_id is None or index not in meta.partitions:
                code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "This server does not host this topic-partition.")
            elif p["start_offset"] < 0:
                code, message = ErrorCode.INVALID_REQUEST, f"start offset {p['start_offset']} is negative"
            else:
                code, message = ErrorCode.NONE, None
                starts[(topic_id, index)] = p["start_offset"]
                altered.add(name)
            parts.append({"partition_index": index, "error_code": code, "error_message": message})
        responses.append({"topic_name": name, "topic_id": topic_id or uuid.UUID(int=0), "partitions": parts})
    async with broker.share_coordinator.offsets_lock(group_id):
        error, message = await broker.share_coordinator.offsets_change_error(group_id, create=True)
        if error:
            return _top_error(error, message)
        if starts:
            try:
                await broker.run_blocking(broker.share_manager.alter_stored_offsets, group_id, starts)
            except Exception as exc:
                log.warning("share group %s: offsets not altered: %s", group_id, exc)
                return _top_error(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                  "the metadata store did not take the offsets")
    if starts:
        broker.share_manager.forget_topics(group_id, altered)
        log.info("share group %s: start offsets altered: %s", group_id, ", ".join(
            f"{broker.metadata_cache.topic_name(t) or t}-{i}={o}" for (t, i), o in sorted(starts.items(),
                                                                                            key=lambda i: i[0][1])))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


async def delete_offsets(ctx: RequestContext, request: dict) -> dict:
    """Forget what an empty share group consumed of the named topics (``kafka-share-groups.sh --delete-offsets``):
    their partitions start again at ``share.auto.offset.reset`` at the group's next fetch. Topic errors:
    TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION (no such topic, or nothing stored of it for the
    group); top-level: GROUP_AUTHORIZATION_FAILED, the coordinator's errors, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP."""
    broker = ctx.broker
    group_id = request["group_id"]
    if (refused := await _offsets_gate(ctx, AclOperation.DELETE, group_id)) is not None:
        return refused
    names = list(dict.fromkeys(t["topic_name"] for t in request["topics"]))
    readable = (set(names) if broker.authorizer is None
                else ctx.authorized(AclOperation.READ, ResourceType.TOPIC, set(names)))
    ids = {name: broker.topics.topic_id(name) for name in names
           if name in readable and broker.metadata_cache.topic(name) is not None}
    wanted = {t for t in ids.values() if t is not None}
    async with broker.share_coordinator.offsets_lock(group_id):
        error, message = await broker.share_coordinator.offsets_change_error(group_id, create=False)
        if error:
            return _top_error(error, message)
        try:
            found = await broker.run_blocking(broker.share_manager.delete_stored_topics, group_id, wanted)
        except Exception as exc:
            log.warning("share group %s: offsets not deleted: %s", group_id, exc)
            return _top_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the metadata store did not delete the offsets")
    responses = []
    for name in names:
        topic_id = ids.get(name)
        if name not in readable:
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        elif topic_id is None:
            code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        elif topic_id not in found:
            code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."
        else:
            code, message = ErrorCode.NONE, None
        responses.append({"topic_name": name, "topic_id": topic_id or uuid.UUID(int=0), "error_code": code,
                          "error_message": message})
    deleted = {name for name in names if ids.get(name) in found}
    if deleted:
        broker.share_manager.forget_topics(group_id, deleted)
        log.info("share group %s: offsets of %s deleted", group_id, ", ".join(sorted(deleted)))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


def _refused_describe(ctx: RequestContext, wanted: dict) -> set[str]:
    if ctx.broker.authorizer is None:
        return set()
    return set(wanted) - ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, set(wanted))


def register(registry) -> None:
    registry.register(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, heartbeat)
    registry.register(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, describe)
    registry.register(ApiKey.SHARE_FETCH, 1, 2, share_fetch)
    registry.register(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, share_acknowledge)
    registry.register(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, describe_offsets)
    registry.register(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, alter_offsets)
    registry.register(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, delete_offsets)
