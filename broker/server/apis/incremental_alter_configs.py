"""IncrementalAlterConfigs (key 44), versions 0-1 (Apache Kafka 2.7's range; v1 is flexible).

Each resource names configs with an operation on the topic's current
overrides: SET (0) to a value, DELETE (1) the override (back to the broker
default), APPEND (2) and SUBTRACT (3) items of a list config
(``cleanup.policy``, ``leader.replication.throttled.replicas``,
``follower.replication.throttled.replicas``), starting from the override or,
without one, the effective default. APPEND adds only items not there yet;
SUBTRACT may leave an empty list, which for ``cleanup.policy`` Kafka 2.7
accepts too (the log is then neither deleted nor compacted). The result is
validated as a SET of it would be. Configs not named keep their overrides,
unlike AlterConfigs.

Errors, per resource (the others carry on): a config named twice, an unknown
operation, APPEND/SUBTRACT on a non-list config or a null value for SET,
APPEND or SUBTRACT are INVALID_REQUEST; an unknown config name or a value the
log rejects is INVALID_CONFIG; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
The result is stored and applied to the logs at once, as AlterConfigs does;
``validate_only`` changes nothing. A BROKER resource (this broker's id, or
empty for the cluster-wide defaults) takes SET and DELETE of the dynamic broker
configs (:mod:`broker.server.dynamic_config`). A GROUP (32) resource (Kafka
4.1's group configs, :mod:`broker.server.group_configs`) takes SET and DELETE,
whether or not the group exists: APPEND and SUBTRACT are INVALID_REQUEST (no
group config is a list), an unknown name, a null value for SET or a value out of
its bounds INVALID_CONFIG, an empty group name INVALID_REQUEST. A CLIENT_METRICS
(16) resource (a client metrics subscription, :mod:`broker.server.client_metrics`)
takes SET and DELETE (APPEND and SUBTRACT are INVALID_CONFIG, as Kafka's
controller answers them); deleting its last config deletes the subscription.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleIncrementalAlterConfigsRequest``), shared with AlterConfigs
(:func:`~broker.server.apis.alter_configs.alter_all`): ALTER_CONFIGS on the
topic for a TOPIC resource, on the cluster for a BROKER or BROKER_LOGGER one, on
the group for a GROUP one; without it TOPIC_AUTHORIZATION_FAILED (29),
CLUSTER_AUTHORIZATION_FAILED (31) or GROUP_AUTHORIZATION_FAILED (30), and
nothing changes.
"""

from __future__ import annotations

from collections import Counter

from broker.log.config import TOPIC_CONFIGS
from broker.protocol import ApiKey, ErrorCode
from broker.server.apis.alter_configs import alter_all
from broker.server.apis.describe_configs import BROKER, CLIENT_METRICS, GROUP
from broker.server.group_configs import GROUP_CONFIGS
from broker.server.context import RequestContext
from broker.server.topics import TopicError

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {SET: "set", DELETE: "delete", APPEND: "append", SUBTRACT: "subtract"}


def _items(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def _check(configs: list[dict], rtype: int) -> None:
    """Request-shape checks that need no topic state; raise TopicError."""
    twice = sorted(name for name, n in Counter(c["name"] for c in configs).items() if n > 1)
    if twice:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"config keys named more than once: {', '.join(twice)}")
    for c in configs:
        name, op = c["name"], c["config_operation"]
        if op not in _OPERATION_NAMES:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op} for config key {name}")
        if rtype == CLIENT_METRICS:
            if op in (APPEND, SUBTRACT):  # Kafka's controller knows no list configs but topics' and brokers'
                raise TopicError(ErrorCode.INVALID_CONFIG, f"{_OPERATION_NAMES[op].upper()} is not supported for "
                                                           f"client metrics config {name}: SET the whole list")
            if op == SET and c["value"] is None:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
            continue
        if rtype == GROUP:
            if name not in GROUP_CONFIGS:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
            if op in (APPEND, SUBTRACT):
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"config value {_OPERATION_NAMES[op]} is not allowed for config key: {name}")
            if op == SET and c["value"] is None:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Null value not supported for group configs: {name}")
            continue
        if rtype == BROKER:
            if op in (APPEND, SUBTRACT):
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"config value {_OPERATION_NAMES[op]} is not allowed for config key: {name}")
        elif name not in TOPIC_CONFIGS:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"unknown topic config name: {name}")
        elif op in (APPEND, SUBTRACT) and TOPIC_CONFIGS[name].type != "LIST":
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"config value {_OPERATION_NAMES[op]} is not allowed for config key: {name}")
        if op != DELETE and c["value"] is None:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"null value not supported for config key: {name}")


def _incremental(ctx: RequestContext, resource: dict):
    """The change for one resource: apply each operation to the current overrides."""
    configs = resource["configs"]

    def change(current: dict[str, str]) -> dict[str, str]:
        _check(configs, resource["resource_type"])
        effective = None
        for c in configs:
            name, op, value = c["name"], c["config_operation"], c["value"]
            if op == SET:
                current[name] = value
            elif op == DELETE:
                current.pop(name, None)
            else:
                if name in current:
                    items = _items(current[name])
                else:
                    if effective is None:
                        effective = ctx.broker.default_log_config.to_properties()
                    items = _items(effective.get(name))
                if op == APPEND:
                    items += [v for v in _items(value) if v not in items]
                else:
                    removed = set(_items(value))
                    items = [v for v in items if v not in removed]
                current[name] = ",".join(items)
        return current
    return change


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await alter_all(ctx, request, lambda resource: _incremental(ctx, resource))


def register(registry) -> None:
    registry.register(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle)
