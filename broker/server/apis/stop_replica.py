"""StopReplica (key 5), versions 0-3 (Apache Kafka 2.7's range): stop holding partitions, maybe delete them.

The controller sends it when a topic is deleted (``delete``: the logs go) and
when a replica moves away or its broker shuts down in a controlled way (the
replica stays on disk, no longer fetched). The replica layer stops the
fetchers, wakes the partitions' waiters and tells the coordinators
(:meth:`~broker.replica.ReplicaManager.stop_replicas`).

Errors as Kafka 2.7 gives them: a broker epoch (v1+, KIP-380) older than
this broker's (it registered again since; -1 passes) gets STALE_BROKER_EPOCH
for the request and every partition, and nothing stops; a controller epoch older than the newest seen
gets STALE_CONTROLLER_EPOCH for the request; in v3, a partition whose
``leader_epoch`` is not newer than ours (other than -1, none given, and -2, sent
while a topic is deleted) gets FENCED_LEADER_EPOCH and stays. A partition
this broker does not hold is no error.

Versions: v0 lists ``ungrouped_partitions`` with one ``delete_partitions``
flag; v1-2 group them by topic (``topics``); v3 gives each partition its
leader epoch and its own ``delete_partition``. v2+ are flexible.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
CLUSTER_ACTION on the cluster, checked first; otherwise
CLUSTER_AUTHORIZATION_FAILED for the request and every partition, nothing
stopped, and a WARNING (see :func:`broker.server.apis.leader_and_isr.cluster_action_allowed`).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.replica.manager import StaleControllerEpochError
from broker.server.apis.leader_and_isr import cluster_action_allowed
from broker.server.context import RequestContext

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2


def _partitions(request: dict, version: int) -> list[tuple[str, int, int, bool]]:
    """(topic, partition, leader epoch, delete) of every partition in the request."""
    if version == 0:
        return [(p["topic_name"], p["partition_index"], NO_EPOCH, request["delete_partitions"])
                for p in request["ungrouped_partitions"]]
    if version <= 2:
        return [(t["name"], p, NO_EPOCH, request["delete_partitions"])
                for t in request["topics"] for p in t["partition_indexes"]]
    return [(t["topic_name"], p["partition_index"], p["leader_epoch"], p["delete_partition"])
            for t in request["topic_states"] for p in t["partition_states"]]


async def handle(ctx: RequestContext, request: dict) -> dict:
    replicas = ctx.broker.replicas
    partitions = _partitions(request, ctx.api_version)
    if not cluster_action_allowed(ctx, "StopReplica"):
        return _refused(partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.broker.is_broker_epoch_stale(request["broker_epoch"]):
        return _refused(partitions, ErrorCode.STALE_BROKER_EPOCH)
    try:
        replicas.check_controller_epoch(request["controller_epoch"])
    except StaleControllerEpochError:
        return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
    errors = []
    stop: dict[bool, list[tuple[str, int]]] = {True: [], False: []}
    for topic, index, leader_epoch, delete in partitions:
        partition = replicas.partition(topic, index)
        error = ErrorCode.NONE
        if (partition is not None and leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE)
                and leader_epoch <= partition.leader_epoch):
            error = ErrorCode.FENCED_LEADER_EPOCH
        else:
            stop[delete].append((topic, index))
        errors.append({"topic_name": topic, "partition_index": index, "error_code": error})
    for delete, tps in stop.items():
        if tps:
            await replicas.stop_replicas(tps, delete)
    return {"error_code": ErrorCode.NONE, "partition_errors": errors}


def _refused(partitions: list[tuple[str, int, int, bool]], error: int) -> dict:
    return {"error_code": error,
            "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": error}
                                 for t, p, _epoch, _delete in partitions]}


def register(registry) -> None:
    registry.register(ApiKey.STOP_REPLICA, 0, 3, handle)
