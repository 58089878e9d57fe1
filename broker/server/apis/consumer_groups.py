"""ConsumerGroupHeartbeat (68) v0-1 and ConsumerGroupDescribe (69) v0-1: the consumer rebalance protocol
(KIP-848) as Kafka 4.x serves it to librdkafka's and the Java client's ``group.protocol=consumer``. v1 of the
heartbeat adds regex subscriptions and has the client make its member id (KIP-1082); v1 of the describe
answers each member's type (KIP-1099: 1 for a member of this protocol, 0 for a classic member of a consumer
group). Served while ``group.coordinator.rebalance.protocols`` names ``consumer`` (the default); otherwise both
answer UNSUPPORTED_VERSION, as Kafka does (still advertised, so librdkafka reports a fatal error rather than
looking for another coordinator forever). The rules are in :mod:`broker.coordinator.modern` and
:mod:`broker.coordinator.mixed`.

Authorization (with an authorizer): the heartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and
DESCRIBE on each topic it subscribes to by name (TOPIC_AUTHORIZATION_FAILED). ConsumerGroupDescribe needs
DESCRIBE on each group, and reports ``authorized_operations`` when asked. Unlike Kafka 4.x, the topics a regex
subscription matches are not filtered by the subscribing member's DESCRIBE permission.
"""

from __future__ import annotations

from broker.acl import AclOperation, ResourceType
from broker.coordinator.modern import HeartbeatError
from broker.protocol import ApiKey, ErrorCode
from broker.server.apis.groups import _authorized_operations, _client_host
from broker.server.context import RequestContext


async def heartbeat(ctx: RequestContext, request: dict) -> dict:
    base = {"throttle_time_ms": 0, "error_message": None, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}
    group_id = request["group_id"]
    if not _enabled(ctx):
        return {**base, "error_code": ErrorCode.UNSUPPORTED_VERSION}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id or ""):
        return {**base, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    names = request["subscribed_topic_names"] or []
    if names and ctx.broker.authorizer is not None:
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names) != set(names):
            return {**base, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    if group_id:
        error = await ctx.broker.coordinator.serving_error(group_id)
        if error:
            return {**base, "error_code": error}
    try:
        return {**base, **await ctx.broker.coordinator.consumer_group_heartbeat(
            request, ctx.api_version, ctx.client_id or "", _client_host(ctx), _describable(ctx))}
    except HeartbeatError as exc:
        return {**base, "error_code": exc.code, "error_message": exc.message}


def _everything(names: frozenset[str]) -> frozenset[str]:
    return names


def _describable(ctx: RequestContext):
    """The filter of the topics a regex subscription may be given: those the requesting principal may DESCRIBE
    (Kafka 4.x's rule); every topic without an authorizer. Keeps the principal and host, not the request."""
    authorizer, conn = ctx.broker.authorizer, ctx.connection
    if authorizer is None or conn is None:
        return _everything
    principal, host = conn.principal, conn.host
    return lambda names: frozenset(
        n for n in names if authorizer.authorize(principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, n))


async def describe(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    with_operations = request["include_authorized_operations"]
    groups = []
    for group_id in request["group_ids"]:
        if not _enabled(ctx):
            groups.append(_error(group_id, ErrorCode.UNSUPPORTED_VERSION))
            continue
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        error = coordinator.group_error(group_id)
        if error:
            groups.append(_error(group_id, error))
            continue
        described = coordinator.consumer_group_describe(group_id, ctx.api_version)
        if with_operations and described["error_code"] == ErrorCode.NONE:
            described["authorized_operations"] = _authorized_operations(ctx, group_id)
        groups.append(described)
    return {"throttle_time_ms": 0, "groups": groups}


def _enabled(ctx: RequestContext) -> bool:
    return "consumer" in ctx.broker.config["group.coordinator.rebalance.protocols"]


def _error(group_id: str, code: int) -> dict:
    return {"error_code": code, "error_message": None, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": []}


def register(registry) -> None:
    registry.register(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, heartbeat)
    registry.register(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, describe)
