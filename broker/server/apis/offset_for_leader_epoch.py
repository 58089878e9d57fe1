"""OffsetForLeaderEpoch (key 23), versions 0-4 (Apache Kafka 2.7's range): where a leader epoch ends.

For each partition the answer is the end offset of ``leader_epoch`` in this
replica's log (the start of the next larger epoch, or the log end offset for
the latest) with the largest epoch at or below it, from
``leader-epoch-checkpoint``; an epoch newer than any, or a log without epochs:
``leader_epoch`` -1 and ``end_offset`` -1. Followers truncate with it
(KIP-101/279); consumers (librdkafka) check their position with it after a
leader change (KIP-320).

Errors: a partition this broker does not hold the replica manager's
``missing_error`` (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER if the cluster
has it, else UNKNOWN_TOPIC_OR_PARTITION); a
``current_leader_epoch`` (v2+) older than ours FENCED_LEADER_EPOCH, newer
UNKNOWN_LEADER_EPOCH; a replica that is not the leader NOT_LEADER_OR_FOLLOWER
unless the request comes from ``replica_id`` -2 (debugging: any replica answers).

Versions: v1 adds ``leader_epoch`` to the answer, v2 ``current_leader_epoch``
and ``throttle_time_ms``, v3 ``replica_id`` (before v3 every caller is a
follower: leader only), v4 is flexible. The epoch cache is read under the
log's writer lock, so the lookups run in the executor.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleOffsetForLeaderEpochRequest``): CLUSTER_ACTION on the cluster (a
follower) allows every partition; without it (a consumer, KIP-320) DESCRIBE on
each topic, and the partitions of a topic without it get
TOPIC_AUTHORIZATION_FAILED (29) with ``leader_epoch`` and ``end_offset`` -1.
"""

from __future__ import annotations

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

DEBUGGING_REPLICA_ID = -2


async def _partition(ctx: RequestContext, topic: str, p: dict, leader_only: bool) -> dict:
    result = {"partition": p["partition"], "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
    partition = ctx.broker.replicas.partition(topic, p["partition"])
    if partition is None:
        result["error_code"] = ctx.broker.replicas.missing_error(topic, p["partition"])
        return result
    error = partition.check_leader(p["current_leader_epoch"], leader_only=leader_only)
    if error:
        result["error_code"] = error
        return result
    try:
        epoch, end_offset = await ctx.broker.run_blocking(partition.end_offset_for_epoch, p["leader_epoch"])
    except (OSError, ValueError):  # the log was closed (topic deleted) or its disk failed meanwhile
        result["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return result
    result.update(leader_epoch=epoch, end_offset=end_offset)
    return result


def _refused(p: dict) -> dict:
    return {"partition": p["partition"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "leader_epoch": -1,
            "end_offset": -1}


def _allowed_topics(ctx: RequestContext, request: dict) -> set[str]:
    names = {t["topic"] for t in request["topics"]}
    if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return names
    return ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)


async def handle(ctx: RequestContext, request: dict) -> dict:
    leader_only = ctx.api_version < 3 or request["replica_id"] != DEBUGGING_REPLICA_ID
    allowed = _allowed_topics(ctx, request)
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"topic": t["topic"], "partitions": [await _partition(ctx, t["topic"], p, leader_only)
                                                 if t["topic"] in allowed else _refused(p)
                                                 for p in t["partitions"]]}
            for t in request["topics"]
        ],
    }


def register(registry) -> None:
    registry.register(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4, handle)
