"""Committed offsets, served by :class:`broker.coordinator.GroupCoordinator`:

* OffsetCommit (8) v0-9: acknowledged only after the records are in
  ``__consumer_offsets`` and replicated to its ISR (the high watermark passed them;
  not within ``offsets.commit.timeout.ms``: COORDINATOR_NOT_AVAILABLE, as Kafka). v1 carries a per-partition commit timestamp (-1: now) and
  the generation/member; v2-v4 a retention time (-1: the broker's
  ``offsets.retention.minutes``; otherwise an expire timestamp is stored, value v1);
  v6+ the leader epoch; v7+ group.instance.id. Partitions of unknown topics get
  UNKNOWN_TOPIC_OR_PARTITION; metadata above ``offset.metadata.max.bytes`` (4096)
  OFFSET_METADATA_TOO_LARGE.
* OffsetCommit v9 (KIP-848): in a group of the consumer protocol the generation is the member epoch
  (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH; a member of that protocol must commit with
  v9+, UNSUPPORTED_VERSION below it); a commit without a member only while the group has no members.
* OffsetFetch (9) v0-9: null topics (v2+) means every partition the group has
  offsets for; missing offsets are -1 with empty metadata. Group-level errors are
  per partition at v0-1 and top-level from v2; v8 batches groups. v7+ with
  ``require_stable`` (KIP-447): a partition with a transactional offset commit
  still waiting for its marker gets UNSTABLE_OFFSET_COMMIT (the client retries). v9 (KIP-848) names the
  member and its epoch; in a group of the consumer protocol a named member must be known at that epoch
  (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); a null member id is an admin's fetch.
* OffsetDelete (47) v0: GROUP_SUBSCRIBED_TO_TOPIC for topics a non-empty
  consumer group is subscribed to, NON_EMPTY_GROUP for a non-empty group of
  another protocol type, GROUP_ID_NOT_FOUND for an unknown group.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
OffsetCommit needs READ on the group (else every partition
GROUP_AUTHORIZATION_FAILED) and READ on each topic (else its partitions
TOPIC_AUTHORIZATION_FAILED, checked before UNKNOWN_TOPIC_OR_PARTITION).
OffsetFetch needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED, where
the coordinator's group errors go) and DESCRIBE on each topic: a requested
partition of a topic without it gets TOPIC_AUTHORIZATION_FAILED (offset -1),
and a fetch of all the group's partitions leaves those topics out; v8 checks
each group on its own. OffsetDelete needs DELETE on the group (else
GROUP_AUTHORIZATION_FAILED for the request) and READ on each topic (else its
partitions TOPIC_AUTHORIZATION_FAILED, not deleted).

Version note: Apache Kafka 2.7 keeps v0 of OffsetCommit/OffsetFetch in ZooKeeper;
here every version uses ``__consumer_offsets`` (ZooKeeper offsets are legacy,
migrated by kafkactl).
"""

from __future__ import annotations

import time

from broker.acl import AclOperation, ResourceType
from broker.coordinator.records import OffsetAndMetadata
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC


def _known(ctx: RequestContext, topic: str, partition: int) -> bool:
    return ctx.broker.topics.partition(topic, partition) is not None


async def offset_commit(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    now = int(time.time() * 1000)
    retention = request["retention_time_ms"] if 2 <= v <= 4 else -1
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    results: dict[tuple[str, int], int] = {}
    denied: set[str] = set()
    if ctx.broker.authorizer is not None:
        if not ctx.authorize(READ, GROUP, request["group_id"]):
            return _every_partition(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = {t["name"] for t in request["topics"]}
        denied = names - ctx.authorized(READ, TOPIC, names)
    for topic in request["topics"]:
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            if denied and tp[0] in denied:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not _known(ctx, *tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commit_ts = p["commit_timestamp"] if v == 1 and p["commit_timestamp"] != -1 else now
            offsets[tp] = OffsetAndMetadata(
                p["committed_offset"], p["committed_leader_epoch"] if v >= 6 else -1,
                p["committed_metadata"] or "", commit_ts, now + retention if retention != -1 else -1)
    if offsets:
        results.update(await ctx.broker.coordinator.commit_offsets(
            request["group_id"], request["member_id"] if v >= 1 else "",
            request["group_instance_id"] if v >= 7 else None,
            request["generation_id_or_member_epoch"] if v >= 1 else -1, offsets, version=v))
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": results[(topic["name"], p["partition_index"])]}
            for p in topic["partitions"]]}
        for topic in request["topics"]]}


def _every_partition(request: dict, error: int) -> dict:
    """An OffsetCommit answer with ``error`` for every partition."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": error}
                                               for p in topic["partitions"]]}
        for topic in request["topics"]]}


def _fetch_group(ctx: RequestContext, group_id: str, topics: list[dict] | None, version: int,
                 require_stable: bool = False, member_id: str | None = None,
                 member_epoch: int = -1) -> tuple[int, list[dict]]:
    wanted = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    denied: set[str] = set()
    error = ErrorCode.NONE
    checked = ctx.broker.authorizer is not None
    if checked:
        if not ctx.authorize(DESCRIBE, GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif wanted is not None:
            names = {t for t, _p in wanted}
            denied = names - ctx.authorized(DESCRIBE, TOPIC, names)
    coordinator = ctx.broker.coordinator
    if error:
        found: dict = {}
    else:
        asked = wanted if not denied else [tp for tp in wanted if tp[0] not in denied]
        error, found = coordinator.fetch_offsets(group_id, asked, member_id, member_epoch)
    if error and (version >= 2 or wanted is None):
        return error, []
    if checked and wanted is None and found:
        # all partitions: clients see offsets only of topics they may DESCRIBE
        allowed = ctx.authorized(DESCRIBE, TOPIC, {t for t, _p in found})
        found = {tp: om for tp, om in found.items() if tp[0] in allowed}
    by_topic: dict[str, list[dict]] = {}
    for tp in (wanted if wanted is not None else sorted(found)):
        om = found.get(tp)
        entry = {"partition_index": tp[1], "committed_offset": -1, "committed_leader_epoch": -1,
                 "metadata": "", "error_code": error}
        if denied and not error and tp[0] in denied:
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif require_stable and coordinator.has_pending_txn_offset(group_id, tp):
            entry["error_code"] = ErrorCode.UNSTABLE_OFFSET_COMMIT
        elif om is not None:
            entry.update(committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                         metadata=om.metadata)
        by_topic.setdefault(tp[0], []).append(entry)
    return ErrorCode.NONE, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


async def offset_fetch(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    if v >= 8:
        groups = []
        for g in request["groups"]:
            error, topics = _fetch_group(ctx, g["group_id"], g["topics"], v, request["require_stable"],
                                         g["member_id"] if v >= 9 else None, g["member_epoch"] if v >= 9 else -1)
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    topics = request["topics"]
    if v < 2 and topics is None:
        topics = []
    error, out = _fetch_group(ctx, request["group_id"], topics, v, v >= 7 and request["require_stable"])
    return {"throttle_time_ms": 0, "topics": out, "error_code": error}


async def offset_delete(ctx: RequestContext, request: dict) -> dict:
    partitions = [(t["name"], p["partition_index"]) for t in request["topics"] for p in t["partitions"]]
    denied: set[str] = set()
    if ctx.broker.authorizer is not None:
        if not ctx.authorize(DELETE, GROUP, request["group_id"]):
            return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
        names = {t for t, _p in partitions}
        denied = names - ctx.authorized(READ, TOPIC, names)
        if denied:
            partitions = [tp for tp in partitions if tp[0] not in denied]
    error, results = await ctx.broker.coordinator.delete_offsets(request["group_id"], partitions)
    if error:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    if denied:
        results.update({(t["name"], p["partition_index"]): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        for t in request["topics"] if t["name"] in denied for p in t["partitions"]})
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": results[(t["name"], p["partition_index"])]}
            for p in t["partitions"]]}
        for t in request["topics"]]}


def register(registry) -> None:
    registry.register(ApiKey.OFFSET_COMMIT, 0, 9, offset_commit)
    registry.register(ApiKey.OFFSET_FETCH, 0, 9, offset_fetch)
    registry.register(ApiKey.OFFSET_DELETE, 0, 0, offset_delete)
