"""TxnOffsetCommit (key 28), versions 0-3 (v3 is flexible).

A transactional producer's ``send_offsets_to_transaction``: the offsets are
written to the group's ``__consumer_offsets`` partition as a transactional
batch of the producer and held pending in the group coordinator
(:mod:`broker.coordinator.txn_offsets`) until the transaction's COMMIT marker
makes them the group's committed offsets (an ABORT drops them). The producer
must have added the group with AddOffsetsToTxn first (its client does).
Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; metadata above
``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis, in
its order): WRITE on the transactional id (else every partition
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else every
partition GROUP_AUTHORIZATION_FAILED), then READ on each topic (else its
partitions TOPIC_AUTHORIZATION_FAILED, before UNKNOWN_TOPIC_OR_PARTITION).

Version notes: v2 adds the leader epoch; v3 (KIP-447) the member id,
generation and group instance id, checked as OffsetCommit checks them.
"""

from __future__ import annotations

import time

from broker.acl import AclOperation, ResourceType
from broker.coordinator.records import OffsetAndMetadata
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext


async def handle(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    now = int(time.time() * 1000)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    results: dict[tuple[str, int], int] = {}
    denied: set[str] = set()
    if ctx.broker.authorizer is not None:
        refusal = None
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request["transactional_id"]):
            refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
            refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if refusal is not None:
            return {"throttle_time_ms": 0, "topics": [
                {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": refusal}
                                                   for p in t["partitions"]]}
                for t in request["topics"]]}
        names = {t["name"] for t in request["topics"]}
        denied = names - ctx.authorized(AclOperation.READ, ResourceType.TOPIC, names)
    for topic in request["topics"]:
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            if denied and tp[0] in denied:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if ctx.broker.topics.partition(*tp) is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"] if v >= 2 else -1,
                                            p["committed_metadata"] or "", now, -1)
    if offsets:
        results.update(await ctx.broker.coordinator.commit_txn_offsets(
            request["group_id"], request["producer_id"], request["producer_epoch"],
            request["member_id"] if v >= 3 else "", request["group_instance_id"] if v >= 3 else None,
            request["generation_id"] if v >= 3 else -1, offsets))
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": int(results[(topic["name"], p["partition_index"])])}
            for p in topic["partitions"]]}
        for topic in request["topics"]]}


def register(registry) -> None:
    registry.register(ApiKey.TXN_OFFSET_COMMIT, 0, 3, handle)
