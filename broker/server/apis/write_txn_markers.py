"""WriteTxnMarkers (key 27), versions 0-1 (v1 is flexible).

Sent by a transaction coordinator to the leaders of a transaction's partitions
(:mod:`broker.txn.marker_channel`; for the partitions it leads itself, a
single node's included, the coordinator calls :func:`broker.txn.markers.write_marker`
directly, the function this handler uses). Each marker's COMMIT or
ABORT control batch is appended through the normal append path to every
listed partition this broker leads, and the answer waits until each is
replicated (acks=all, bounded by ``request.timeout.ms``-like 30 s); a marker in a
``__consumer_offsets`` partition also completes the transaction's pending offsets.
Per partition errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
REQUEST_TIMED_OUT, or the log's own code.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
CLUSTER_ACTION on the cluster; otherwise every partition of every marker gets
CLUSTER_AUTHORIZATION_FAILED, nothing is written, and a WARNING is logged (see
:func:`broker.server.apis.leader_and_isr.cluster_action_allowed`).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.apis.leader_and_isr import cluster_action_allowed
from broker.server.context import RequestContext
from broker.txn.coordinator import WRITE_TIMEOUT_S
from broker.txn.markers import write_markers


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not cluster_action_allowed(ctx, "WriteTxnMarkers"):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"markers": [
            {"producer_id": m["producer_id"], "topics": [
                {"name": t["name"], "partitions": [{"partition_index": p, "error_code": error}
                                                   for p in t["partition_indexes"]]}
                for t in m["topics"]]}
            for m in request["markers"]]}
    return {"markers": await write_markers(ctx.broker, request["markers"], WRITE_TIMEOUT_S)}


def register(registry) -> None:
    registry.register(ApiKey.WRITE_TXN_MARKERS, 0, 1, handle)
