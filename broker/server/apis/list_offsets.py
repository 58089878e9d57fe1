"""ListOffsets (key 2), versions 0-7 (Apache Kafka 2.7 serves 0-5; v6 is the flexible form, v7
adds MAX_TIMESTAMP, KIP-734).

For each partition the ``timestamp`` field is a timestamp or a spec:

* -2 (EARLIEST): the log start offset;
* -1 (LATEST): the high watermark (what a consumer may read); with
  ``isolation_level`` 1 (read_committed, v2+) the last stable offset; for a
  follower (``replica_id`` >= 0, after OFFSET_OUT_OF_RANGE) the log end offset;
* -3 (MAX_TIMESTAMP, v7+): the first record with the largest timestamp below
  the high watermark, with that timestamp (offset -1 when the log is empty);
* a timestamp >= 0: the first offset whose record timestamp is >= it, with that
  record's timestamp, or offset -1 when no record is that late.

Any other negative value is not a timestamp: a spec this version does not
serve (-3 before v7; -4 and -5, KIP-1005's, at every version we serve) gets
UNSUPPORTED_VERSION and any other negative INVALID_REQUEST, never an offset
that looks like a result. v0 answers in ``old_style_offsets`` (a list with that
one offset, empty when none); v1+ in ``timestamp``/``offset``; v4+ adds
``leader_epoch`` and checks ``current_leader_epoch`` (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH). A partition this broker does not serve gets the replica
manager's ``missing_error`` (KAFKA_STORAGE_ERROR offline, NOT_LEADER_OR_FOLLOWER
if the cluster has it, UNKNOWN_TOPIC_OR_PARTITION only if it does not: librdkafka
gives up on that one instead of refreshing its metadata), and a replica that is
not the leader NOT_LEADER_OR_FOLLOWER unless ``replica_id`` is -2 (debugging);
other partitions carry on.

Everything is read through the replica layer (:class:`~broker.replica.Partition`,
which owns the high watermark). Lookups by timestamp and MAX_TIMESTAMP read
indexes and record headers from disk (each segment's index is loaded on first
use), so they run in the executor; EARLIEST and LATEST are answered from
memory on the loop.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleListOffsetRequest``): DESCRIBE on each topic, one decision per topic;
the partitions of a topic without it get TOPIC_AUTHORIZATION_FAILED (29) with
offset and timestamp -1 (v0: no offsets).
"""

from __future__ import annotations

from broker.acl import AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
LATER_SPECS = (-3, -4, -5)  # MAX_TIMESTAMP (v7), EARLIEST_LOCAL (v8), LATEST_TIERED (v9)
DEBUGGING_REPLICA_ID = -2


async def _partition(ctx: RequestContext, topic: str, p: dict, replica_id: int, isolation_level: int) -> dict:
    index = p["partition_index"]
    result = {"partition_index": index, "error_code": ErrorCode.NONE, "old_style_offsets": [],
              "timestamp": -1, "offset": -1, "leader_epoch": -1}
    partition = ctx.broker.replicas.partition(topic, index)
    if partition is None:
        result["error_code"] = ctx.broker.replicas.missing_error(topic, index)
        return result
    error = partition.check_leader(p["current_leader_epoch"], leader_only=replica_id != DEBUGGING_REPLICA_ID)
    if error:
        result["error_code"] = error
        return result
    timestamp = p["timestamp"]
    if timestamp == EARLIEST:
        offset, found_ts = partition.log_start_offset, -1
    elif timestamp == LATEST:
        if replica_id >= 0:
            offset = partition.log_end_offset
        elif ctx.api_version >= 2 and isolation_level == 1:  # read_committed
            offset = partition.last_stable_offset
        else:
            offset = partition.high_watermark
        found_ts = -1
    elif timestamp < 0 and not (timestamp == MAX_TIMESTAMP and ctx.api_version >= 7):
        result["error_code"] = ErrorCode.UNSUPPORTED_VERSION if timestamp in LATER_SPECS else ErrorCode.INVALID_REQUEST
        return result
    else:
        try:
            if timestamp == MAX_TIMESTAMP:
                found = await ctx.broker.run_blocking(partition.offset_of_max_timestamp)
            else:
                found = await ctx.broker.run_blocking(partition.offset_for_timestamp, timestamp)
        except (OSError, ValueError):  # the log was closed (topic deleted) or its disk failed meanwhile
            result["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
            return result
        offset, found_ts = found if found is not None else (-1, -1)
    result.update(offset=offset, timestamp=found_ts, leader_epoch=partition.leader_epoch)
    if offset >= 0 and p["max_num_offsets"] > 0:
        result["old_style_offsets"] = [offset]
    return result


def _refused(p: dict) -> dict:
    return {"partition_index": p["partition_index"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "old_style_offsets": [], "timestamp": -1, "offset": -1, "leader_epoch": -1}


async def handle(ctx: RequestContext, request: dict) -> dict:
    allowed = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, {t["name"] for t in request["topics"]})
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "partitions": [await _partition(ctx, t["name"], p, request["replica_id"],
                                                                request.get("isolation_level", 0))
                                               if t["name"] in allowed else _refused(p)
                                               for p in t["partitions"]]}
            for t in request["topics"]
        ],
    }


def register(registry) -> None:
    registry.register(ApiKey.LIST_OFFSETS, 0, 7, handle)
