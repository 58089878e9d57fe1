"""Committed offsets, served by :class:`broker.coordinator.GroupCoordinator`:

* OffsetCommit (8) v0-8: acknowledged only after the records are in
  ``__consumer_offsets`` and replicated to its ISR (the high watermark passed them;
  not within ``offsets.commit.timeout.ms``: COORDINATOR_NOT_AVAILABLE, as Kafka). v1 carries a per-partition commit timestamp (-1: now) and
  the generation/member; v2-v4 a retention time (-1: the broker's
  ``offsets.retention.minutes``; otherwise an expire timestamp is stored, value v1);
  v6+ the leader epoch; v7+ group.instance.id. Partitions of unknown topics get
  UNKNOWN_TOPIC_OR_PARTITION; metadata above ``offset.metadata.max.bytes`` (4096)
  OFFSET_METADATA_TOO_LARGE.
* OffsetFetch (9) v0-8: null topics (v2+) means every partition the group has
  offsets for; missing offsets are -1 with empty metadata. Group-level errors are
  per partition at v0-1 and top-level from v2; v8 batches groups. v7+ with
  ``require_stable`` (KIP-447): a partition with a transactional offset commit
  still waiting for its marker gets UNSTABLE_OFFSET_COMMIT (the client retries).
* OffsetDelete (47) v0: GROUP_SUBSCRIBED_TO_TOPIC for topics a non-empty
  consumer group is subscribed to, NON_EMPTY_GROUP for a non-empty group of
  another protocol type, GROUP_ID_NOT_FOUND for an unknown group.

Version note: Apache Kafka 2.7 keeps v0 of OffsetCommit/OffsetFetch in ZooKeeper;
here every version uses ``__consumer_offsets`` (ZooKeeper offsets are legacy,
migrated by kafkactl).
"""

from __future__ import annotations

import time

from broker.coordinator.records import OffsetAndMetadata
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext


def _known(ctx: RequestContext, topic: str, partition: int) -> bool:
    return ctx.broker.topics.partition(topic, partition) is not None


async def offset_commit(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    now = int(time.time() * 1000)
    retention = request["retention_time_ms"] if 2 <= v <= 4 else -1
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    results: dict[tuple[str, int], int] = {}
    for topic in request["topics"]:
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
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
            request["generation_id_or_member_epoch"] if v >= 1 else -1, offsets))
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": results[(topic["name"], p["partition_index"])]}
            for p in topic["partitions"]]}
        for topic in request["topics"]]}


def _fetch_group(ctx: RequestContext, group_id: str, topics: list[dict] | None, version: int,
                 require_stable: bool = False) -> tuple[int, list[dict]]:
    wanted = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    coordinator = ctx.broker.coordinator
    error, found = coordinator.fetch_offsets(group_id, wanted)
    if error and (version >= 2 or wanted is None):
        return error, []
    by_topic: dict[str, list[dict]] = {}
    for tp in (wanted if wanted is not None else sorted(found)):
        om = found.get(tp)
        entry = {"partition_index": tp[1], "committed_offset": -1, "committed_leader_epoch": -1,
                 "metadata": "", "error_code": error}
        if require_stable and coordinator.has_pending_txn_offset(group_id, tp):
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
            error, topics = _fetch_group(ctx, g["group_id"], g["topics"], v, request["require_stable"])
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    topics = request["topics"]
    if v < 2 and topics is None:
        topics = []
    error, out = _fetch_group(ctx, request["group_id"], topics, v, v >= 7 and request["require_stable"])
    return {"throttle_time_ms": 0, "topics": out, "error_code": error}


async def offset_delete(ctx: RequestContext, request: dict) -> dict:
    partitions = [(t["name"], p["partition_index"]) for t in request["topics"] for p in t["partitions"]]
    error, results = await ctx.broker.coordinator.delete_offsets(request["group_id"], partitions)
    if error:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": results[(t["name"], p["partition_index"])]}
            for p in t["partitions"]]}
        for t in request["topics"]]}


def register(registry) -> None:
    registry.register(ApiKey.OFFSET_COMMIT, 0, 8, offset_commit)
    registry.register(ApiKey.OFFSET_FETCH, 0, 8, offset_fetch)
    registry.register(ApiKey.OFFSET_DELETE, 0, 0, offset_delete)
