"""DescribeCluster (key 60), versions 0-1 (flexible from v0; Apache Kafka added it in 2.8).

Answers from the metadata cache (as Metadata does) with the cluster id, the
controller id and the live brokers with their advertised endpoints and racks.
``cluster_authorized_operations`` is reported only when asked for
(``include_cluster_authorized_operations``); with no authorizer every
operation that applies to the cluster is allowed, as in Kafka: the bit field
of CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS and
IDEMPOTENT_WRITE (AclOperation codes 5, 7-12). Otherwise it is Kafka's
"not asked" value, -2^31.

Authorization (with an authorizer, :mod:`broker.acl`): none for the request
itself; the authorized operations, when asked for, are those of the
cluster the principal is allowed, or 0 without DESCRIBE on the cluster, as
Kafka answers (:func:`cluster_authorized_operations`, which Metadata shares).

v1 adds ``endpoint_type``: 1 (brokers) is answered; 2 (controllers, a KRaft
notion) gets UNSUPPORTED_ENDPOINT_TYPE.
"""

from __future__ import annotations

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

BROKERS_ENDPOINT_TYPE = 1
NOT_REQUESTED = -(2**31)
#: AclOperation codes that apply to the cluster resource.
CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12)  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
#                                                ALTER_CONFIGS, IDEMPOTENT_WRITE
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in CLUSTER_OPERATIONS)
#: AclOperation codes that apply to a topic: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
#: ALTER_CONFIGS.
TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str, operations) -> int:
    """The bit field (1 << code) of the ``operations`` this request's principal may do on the resource
    (all of them without an authorizer), as Kafka's ``authorizedOperations``."""
    return sum(1 << op for op in operations if ctx.authorize(AclOperation(op), resource_type, name))


def cluster_authorized_operations(ctx: RequestContext) -> int:
    """The cluster operations allowed, or 0 without DESCRIBE on the cluster (Kafka's rule)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    endpoint_type = request["endpoint_type"] if ctx.api_version >= 1 else BROKERS_ENDPOINT_TYPE
    response = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "endpoint_type": endpoint_type, "cluster_id": broker.cluster_id,
                "controller_id": broker.metadata_cache.controller_id, "brokers": [],
                "cluster_authorized_operations": NOT_REQUESTED}
    if endpoint_type != BROKERS_ENDPOINT_TYPE:
        response.update(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                        error_message=f"endpoint type {endpoint_type} is not supported; only brokers (1)")
        return response
    response["brokers"] = [{"broker_id": b.id, "host": e.host, "port": e.port, "rack": b.rack}
                           for b in broker.metadata_cache.alive_brokers() if (e := b.listener(ctx.listener)) is not None]
    if request["include_cluster_authorized_operations"]:
        response["cluster_authorized_operations"] = cluster_authorized_operations(ctx)
    return response


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_CLUSTER, 0, 1, handle)
