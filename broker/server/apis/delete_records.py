"""DeleteRecords (key 21), versions 0-2 (Apache Kafka 2.7 serves 0-1; v2 is its flexible form).

For each partition, moves the log start offset up to ``offset`` (-1 means the
high watermark, which the replica layer owns and checks ``offset`` against): records below it are no longer readable, whole segments
below it are deleted, and the new log start offset survives a restart (the
``log-start-offset-checkpoint``). An offset at or below the current log start
offset changes nothing. The answer's ``low_watermark`` is the log start
offset afterwards.

Per partition (the others carry on): for a partition this broker does not
serve the replica manager's ``missing_error`` (KAFKA_STORAGE_ERROR offline,
NOT_LEADER_OR_FOLLOWER if the cluster has it, else UNKNOWN_TOPIC_OR_PARTITION),
NOT_LEADER_OR_FOLLOWER on a follower,
OFFSET_OUT_OF_RANGE for an offset above the high watermark or below -1;
``low_watermark`` is -1 on error. The answer comes once the leader's log start
has moved (``timeout_ms`` never expires); followers move theirs when their
next fetch answer brings the leader's log start offset.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleDeleteRecordsRequest``): DELETE on each topic, one decision per topic;
the partitions of a topic without it get TOPIC_AUTHORIZATION_FAILED (29) and
``low_watermark`` -1.
"""

from __future__ import annotations

from broker.acl import AclOperation, ResourceType
from broker.log.errors import LogError
from broker.protocol import ApiKey, ErrorCode
from broker.replica import HIGH_WATERMARK
from broker.server.context import RequestContext


async def _delete(ctx: RequestContext, topic: str, partition: dict) -> dict:
    index, offset = partition["partition_index"], partition["offset"]
    result = {"partition_index": index, "low_watermark": -1, "error_code": ErrorCode.NONE}
    partition = ctx.broker.replicas.partition(topic, index)
    if partition is None:
        result["error_code"] = ctx.broker.replicas.missing_error(topic, index)
        return result
    if not partition.is_leader:
        result["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return result
    if offset < HIGH_WATERMARK:
        result["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        return result
    try:
        result["low_watermark"] = await ctx.broker.run_blocking(partition.delete_records, offset)
    except LogError as exc:
        result["error_code"] = exc.error_code
    return result


def _refused(partition: dict) -> dict:
    return {"partition_index": partition["partition_index"], "low_watermark": -1,
            "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


async def handle(ctx: RequestContext, request: dict) -> dict:
    allowed = ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, {t["name"] for t in request["topics"]})
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "partitions": [await _delete(ctx, t["name"], p) if t["name"] in allowed
                                               else _refused(p) for p in t["partitions"]]}
            for t in request["topics"]
        ],
    }


def register(registry) -> None:
    registry.register(ApiKey.DELETE_RECORDS, 0, 2, handle)
