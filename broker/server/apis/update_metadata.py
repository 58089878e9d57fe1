"""UpdateMetadata (key 6), versions 0-7 (Apache Kafka 2.8's range: v7 names each topic's id, KIP-516): the controller feeds the metadata cache.

Sent by the controller (to its own broker without the socket) with the live
brokers and the partition states that changed; the broker applies them to its
:class:`~broker.server.metadata_cache.MetadataCache`. A request from an
older controller epoch than the newest this broker has seen is refused with
STALE_CONTROLLER_EPOCH, as Kafka does (a deposed controller cannot overwrite
what its successor said). A broker epoch (v5+, KIP-380) older than this
broker's (it registered again since) gets STALE_BROKER_EPOCH; -1 ("unknown",
and before v5) passes.

Version notes: v1 replaces the single host/port of a broker by endpoints, v2
adds the rack, v3 the listener name, v4 offline replicas, v5 groups partition
states by topic and adds the broker epoch, v6 is flexible.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
CLUSTER_ACTION on the cluster, checked first; otherwise
CLUSTER_AUTHORIZATION_FAILED, the cache untouched, and a WARNING (see
:func:`broker.server.apis.leader_and_isr.cluster_action_allowed`).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.apis.leader_and_isr import cluster_action_allowed
from broker.server.context import RequestContext


async def handle(ctx: RequestContext, request: dict) -> dict:
    cache = ctx.broker.metadata_cache
    if not cluster_action_allowed(ctx, "UpdateMetadata"):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    if ctx.broker.is_broker_epoch_stale(request["broker_epoch"]):
        return {"error_code": ErrorCode.STALE_BROKER_EPOCH}
    if request["controller_epoch"] < cache.controller_epoch:
        return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH}
    cache.update(request, ctx.api_version)
    return {"error_code": ErrorCode.NONE}


def register(registry) -> None:
    registry.register(ApiKey.UPDATE_METADATA, 0, 7, handle)
