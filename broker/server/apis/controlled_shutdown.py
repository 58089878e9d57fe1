"""ControlledShutdown (key 7), versions 0-3 (Apache Kafka 2.7's range): a broker about to stop asks the controller.

Served by the controller only (any other broker answers NOT_CONTROLLER, as
Kafka's does): the controller moves the asking broker's leaderships to other
in-sync replicas and takes it out of the ISRs
(:meth:`~broker.cluster.controller_leaders.LeaderMoves.controlled_shutdown`),
waits a moment for the new leaders to hear it, and answers with the partitions
the broker still leads that could have moved (empty: done). A broker that is
not registered gets BROKER_NOT_AVAILABLE, one whose ``broker_epoch`` is older
than its registration's STALE_BROKER_EPOCH (KIP-380).

Versions: v0 has a non-standard request header (no client id), handled by the
codec; v2 adds ``broker_epoch`` (-1 unknown, accepted; v0-1 send none); v3 is flexible.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
CLUSTER_ACTION on the cluster, checked first (before NOT_CONTROLLER); otherwise
CLUSTER_AUTHORIZATION_FAILED with no partitions, nothing moved, and a WARNING
(see :func:`broker.server.apis.leader_and_isr.cluster_action_allowed`).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.apis.leader_and_isr import cluster_action_allowed
from broker.server.context import RequestContext


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not cluster_action_allowed(ctx, "ControlledShutdown"):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    controller = ctx.broker.controller
    if not controller.is_active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    error, remaining = await controller.controlled_shutdown(request["broker_id"], request.get("broker_epoch", -1))
    return {"error_code": error,
            "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}


def register(registry) -> None:
    registry.register(ApiKey.CONTROLLED_SHUTDOWN, 0, 3, handle)
