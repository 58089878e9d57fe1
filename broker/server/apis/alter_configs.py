"""AlterConfigs (key 33), versions 0-2 (Apache Kafka 2.7 serves 0-1; v2 is its flexible form).

Replace-all semantics: for a TOPIC (2) resource the given configs become the
topic's complete set of overrides; every config not named goes back to the
broker default. Names must be topic configs and values must parse and pass
the log's checks, else INVALID_CONFIG with the reason; a null value is
INVALID_REQUEST. The new overrides are written to the metadata store
(``/config/topics/<topic>``) and applied to the topic's logs at once
(``Log.update_config``), so ``segment.bytes``, ``retention.ms``,
``max.message.bytes``... take effect on the next append or retention pass.
``validate_only`` checks everything and changes nothing.

A BROKER (4) resource named by this broker's id (or empty, the cluster-wide
defaults) changes dynamic broker configs the same way
(:mod:`broker.server.dynamic_config`: a config that cannot change dynamically
is INVALID_REQUEST, a bad value INVALID_CONFIG; another broker's id is
INVALID_REQUEST). A GROUP (32) resource (Kafka 4.1's group configs,
:mod:`broker.server.group_configs`) replaces the group's overrides, whether or
not the group exists: an empty name is INVALID_REQUEST, a null value, an
unknown name or a value out of its bounds INVALID_CONFIG. Other resource types
get INVALID_REQUEST. A resource named twice in one request gets INVALID_REQUEST.
Each resource succeeds or fails on its own.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleAlterConfigsRequest``, and IncrementalAlterConfigs alike): ALTER_CONFIGS
on the topic for a TOPIC resource, on the cluster for a BROKER (or
BROKER_LOGGER) one, on the group for a GROUP one; without it the resource gets
TOPIC_AUTHORIZATION_FAILED (29), CLUSTER_AUTHORIZATION_FAILED (31) or
GROUP_AUTHORIZATION_FAILED (30), no message, and is left unchanged.
"""

from __future__ import annotations

from collections import Counter

from broker.acl import AclOperation
from broker.protocol import ApiKey, ErrorCode
from broker.server.apis.describe_configs import (BROKER, CLIENT_METRICS, GROUP, TOPIC, check_broker_resource,
                                                 config_authorization_error)
from broker.server.context import RequestContext
from broker.server.topics import TopicError, validate_topic_name


def duplicated_resources(resources: list[dict]) -> set[tuple[int, str]]:
    counts = Counter((r["resource_type"], r["resource_name"]) for r in resources)
    return {key for key, n in counts.items() if n > 1}


async def alter_resource(ctx: RequestContext, resource: dict, change, validate_only: bool) -> dict:
    """Apply ``change`` (current overrides -> new overrides) to one resource; the response entry."""
    rtype, name = resource["resource_type"], resource["resource_name"]
    result = resource_error(resource, ErrorCode.NONE, None)
    try:
        if rtype == TOPIC:
            validate_topic_name(name)
            await ctx.broker.topics.update_topic_config(name, change, validate_only)
        elif rtype == BROKER:
            check_broker_resource(ctx, name)
            await ctx.broker.dynamic_config.alter(name, change, validate_only)
        elif rtype == GROUP:
            await ctx.broker.group_configs.alter(name, change, validate_only)
        elif rtype == CLIENT_METRICS:
            await ctx.broker.client_metrics.alter(name, change, validate_only)
        else:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"resource type {rtype} is not supported")
    except TopicError as exc:
        result.update(error_code=exc.error_code, error_message=exc.message)
    return result


def resource_error(resource: dict, error_code: int, message: str) -> dict:
    return {"error_code": error_code, "error_message": message, "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"]}


def _replace_all(resource: dict):
    """The change for one resource: the given configs become the whole set of overrides."""
    configs = resource["configs"]

    def change(_current: dict[str, str]) -> dict[str, str]:
        nulls = sorted(c["name"] for c in configs if c["value"] is None)
        if nulls and resource["resource_type"] not in (GROUP, CLIENT_METRICS):  # INVALID_CONFIG, as Kafka's validator
            raise TopicError(ErrorCode.INVALID_REQUEST, f"null value not supported for configs: {', '.join(nulls)}")
        return {c["name"]: c["value"] for c in configs}
    return change


async def alter_all(ctx: RequestContext, request: dict, make_change) -> dict:
    """The response to an (Incremental)AlterConfigs request; ``make_change(resource)`` gives each change."""
    duplicated = duplicated_resources(request["resources"])
    responses = []
    for resource in request["resources"]:
        if (resource["resource_type"], resource["resource_name"]) in duplicated:
            responses.append(resource_error(resource, ErrorCode.INVALID_REQUEST,
                                            "resource appears more than once in the request"))
            continue
        refused = config_authorization_error(ctx, resource["resource_type"], resource["resource_name"],
                                             AclOperation.ALTER_CONFIGS)
        if refused:
            responses.append(resource_error(resource, refused, None))
            continue
        responses.append(await alter_resource(ctx, resource, make_change(resource), request["validate_only"]))
    return {"throttle_time_ms": 0, "responses": responses}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await alter_all(ctx, request, _replace_all)


def register(registry) -> None:
    registry.register(ApiKey.ALTER_CONFIGS, 0, 2, handle)
