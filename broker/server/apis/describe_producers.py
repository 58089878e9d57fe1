"""DescribeProducers (key 61), version 0 (flexible): KIP-664's view of a partition's producers.

For each requested partition this broker leads, every producer id its producer
state keeps (:mod:`broker.log.producer_state`): the producer epoch, the last
sequence written (-1 when it wrote no data batch), the timestamp of its last
write, the coordinator epoch of its last marker (-1 before any) and the first
offset of its ongoing transaction (-1 when none is open). Operators find a
hanging transaction by that first offset (``kafkactl transactions
describe-producers``) and abort it with a WriteTxnMarkers to this partition.

Per partition errors, as Kafka answers them: for a partition this broker does
not hold the replica manager's ``missing_error`` (KAFKA_STORAGE_ERROR offline,
NOT_LEADER_OR_FOLLOWER if the cluster has it, else UNKNOWN_TOPIC_OR_PARTITION),
and NOT_LEADER_OR_FOLLOWER where it holds a follower.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 3.0's KafkaApis):
READ on each topic, else every partition of it TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.acl import AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext


def _partition(ctx: RequestContext, topic: str, index: int) -> dict:
    out = {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None, "active_producers": []}
    partition = ctx.broker.replicas.partition(topic, index)
    if partition is None:
        out["error_code"] = ctx.broker.replicas.missing_error(topic, index)
        return out
    if not partition.is_leader:
        out["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return out
    out["active_producers"] = [
        {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch, "last_sequence": p.last_sequence,
         "last_timestamp": p.last_timestamp, "coordinator_epoch": p.coordinator_epoch,
         "current_txn_start_offset": p.current_txn_start_offset}
        for p in partition.active_producers()]
    return out


def _refused(index: int) -> dict:
    return {"partition_index": index, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "error_message": "Topic authorization failed.", "active_producers": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    denied: set[str] = set()
    if ctx.broker.authorizer is not None:
        names = {t["name"] for t in request["topics"]}
        denied = names - ctx.authorized(AclOperation.READ, ResourceType.TOPIC, names)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            _refused(i) if denied and t["name"] in denied else _partition(ctx, t["name"], i)
            for i in t["partition_indexes"]]}
        for t in request["topics"]]}


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle)
