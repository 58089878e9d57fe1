"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), version 0 (KIP-455).

Both are answered by the active controller only; another broker answers
NOT_CONTROLLER for the whole request, as Kafka 2.7 does (clients send them to
the controller named in Metadata).

AlterPartitionReassignments starts each partition's move (a target replica
list) or cancels it (a null list) and answers once the moves have started, not
finished (see :mod:`broker.cluster.reassignment`). Per partition:
UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist,
INVALID_REPLICA_ASSIGNMENT for an empty or duplicated list or a broker that
is not alive, NO_REASSIGNMENT_IN_PROGRESS for cancelling a partition that is
not moving; each with its message.

ListPartitionReassignments lists the moves in progress, of the named
partitions or (null ``topics``) of all: the partition's replicas (original
plus target), ``adding_replicas`` and ``removing_replicas``.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's, checked
before anything else): Alter needs ALTER on the cluster, List DESCRIBE on it;
without it the answer is Kafka's error response: the top-level ``error_code``
CLUSTER_AUTHORIZATION_FAILED (31) with a message, and each partition named
(Alter: with that error; List: with empty replica lists).
"""

from __future__ import annotations

from broker.cluster.reassignment import NotControllerError
from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

NOT_CONTROLLER_MESSAGE = "this broker is not the controller"


def _not_controller(ctx: RequestContext) -> bool:
    return not ctx.broker.controller.is_active


def _refused(ctx: RequestContext, operation: AclOperation) -> str | None:
    """Kafka's message when this request's principal may not do ``operation`` on the cluster, else None."""
    if ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    principal = ctx.connection.principal if ctx.connection is not None else "?"
    return f"{principal} is not authorized to {operation.name} the cluster."


async def alter(ctx: RequestContext, request: dict) -> dict:
    message = _refused(ctx, AclOperation.ALTER)
    if message is not None:
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "responses": [{"name": t["name"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code, "error_message": message}
                    for p in t["partitions"]]} for t in request["topics"]]}
    if _not_controller(ctx):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": NOT_CONTROLLER_MESSAGE, "responses": []}
    targets = {(t["name"], p["partition_index"]): p["replicas"]
               for t in request["topics"] for p in t["partitions"]}
    controller = ctx.broker.controller
    try:
        results = await controller.call(controller.reassignments.alter, targets)
    except NotControllerError:
        return await alter(ctx, request)  # answered NOT_CONTROLLER now
    topics: dict[str, list] = {}
    for (topic, index), (code, message) in results.items():
        topics.setdefault(topic, []).append({"partition_index": index, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


async def list_reassignments(ctx: RequestContext, request: dict) -> dict:
    message = _refused(ctx, AclOperation.DESCRIBE)
    if message is not None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": message,
                "topics": [{"name": t["name"], "partitions": [
                    {"partition_index": p, "replicas": [], "adding_replicas": [], "removing_replicas": []}
                    for p in t["partition_indexes"]]} for t in request["topics"] or ()]}
    if _not_controller(ctx):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": NOT_CONTROLLER_MESSAGE, "topics": []}
    wanted = None
    if request["topics"] is not None:
        wanted = [(t["name"], p) for t in request["topics"] for p in t["partition_indexes"]]
    controller = ctx.broker.controller

    async def listing():
        return controller.reassignments.listing(wanted)
    try:
        found = await controller.call(listing)
    except NotControllerError:
        return await list_reassignments(ctx, request)  # answered NOT_CONTROLLER now
    topics: dict[str, list] = {}
    for (topic, index), (replicas, adding, removing) in found.items():
        topics.setdefault(topic, []).append({"partition_index": index, "replicas": replicas,
                                             "adding_replicas": adding, "removing_replicas": removing})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def register(registry) -> None:
    registry.register(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, alter)
    registry.register(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, list_reassignments)
