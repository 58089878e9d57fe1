"""Client metrics (KIP-714): GetTelemetrySubscriptions (71) v0 and PushTelemetry (72) v0, served while
``telemetry.exporter.enable`` is true (the rules are in :mod:`broker.server.client_metrics`), and
ListConfigResources (74) v0-1, always.

GetTelemetrySubscriptions and PushTelemetry need no ACL (a client may always tell what it measures), as in
Kafka.

ListConfigResources (Kafka 3.7's ListClientMetricsResources, renamed in 4.1 when v1 listed every type) answers
the resources that have configs: v0 the client metrics subscriptions; v1 those of the asked types, all when
none is asked: groups with config overrides (32), subscriptions (16), the live brokers as BROKER_LOGGER (8) and
BROKER (4), and every topic (2), in Kafka's order. A type v1 does not know (or v0 other than 16) is
UNSUPPORTED_VERSION for the whole answer. Needs DESCRIBE_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.apis.describe_configs import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from broker.server.context import RequestContext

#: The types each version of ListConfigResources lists
_LISTED = {0: (CLIENT_METRICS,), 1: (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)}


async def get_telemetry_subscriptions(ctx: RequestContext, request: dict) -> dict:
    return ctx.broker.client_metrics.get_subscriptions(ctx, request)


async def push_telemetry(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0, "error_code": ctx.broker.client_metrics.push(ctx, request)}


async def list_config_resources(ctx: RequestContext, request: dict) -> dict:
    answer = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "config_resources": []}
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return {**answer, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    known = _LISTED[min(ctx.api_version, 1)]
    asked = request.get("resource_types") or known
    if any(t not in known for t in asked):
        return {**answer, "error_code": ErrorCode.UNSUPPORTED_VERSION}
    broker = ctx.broker
    listed = []
    for rtype in known:
        if rtype not in asked:
            continue
        if rtype == GROUP:
            names = broker.group_configs.groups()
        elif rtype == CLIENT_METRICS:
            names = broker.client_metrics.names()
        elif rtype in (BROKER_LOGGER, BROKER):
            names = [str(b) for b in sorted(broker.live_brokers() or [broker.broker_id])]
        else:
            names = sorted(broker.topics.topics)
        listed += [{"resource_name": name, "resource_type": rtype} for name in names]
    return {**answer, "config_resources": listed}


def register(registry) -> None:
    registry.register(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, get_telemetry_subscriptions)
    registry.register(ApiKey.PUSH_TELEMETRY, 0, 0, push_telemetry)
    registry.register(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, list_config_resources)
