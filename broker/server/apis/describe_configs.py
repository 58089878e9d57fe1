"""DescribeConfigs (key 32), versions 0-4 (Apache Kafka 2.7 serves 0-3; v4 is its flexible form).

Resources: TOPIC (2), BROKER (4), CLIENT_METRICS (16, KIP-714) and GROUP (32, Kafka 4.1's group configs).
BROKER_LOGGER (8) and
other types get INVALID_REQUEST in their result; the other resources carry on.

For a topic, every topic-level config is listed with its effective value, the
overrides read from the store (as Kafka does: an alter made through another
broker shows at once, not once this broker's change notification arrives):

* ``config_source`` DYNAMIC_TOPIC_CONFIG (1) when the topic overrides it,
  STATIC_BROKER_CONFIG (4) when the broker's file sets the matching broker
  property (``log.segment.bytes`` for ``segment.bytes``...), DEFAULT_CONFIG (5)
  otherwise;
* ``synonyms`` (v1+, only when ``include_synonyms``): the topic override, then
  each broker property that feeds it (in Kafka's order of precedence, e.g.
  ``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``),
  each with the source it comes from, most specific first;
* ``read_only`` false, ``is_sensitive`` false; ``config_type`` and
  ``documentation`` (v3+, documentation only when ``include_documentation``).
* v0 has no source; it reports ``is_default`` (source is DEFAULT_CONFIG).

For a broker (resource name = this broker's id), every broker property and
the throttle rates with their values: DYNAMIC_BROKER_CONFIG (2) or
DYNAMIC_DEFAULT_BROKER_CONFIG (3) when set dynamically
(:mod:`broker.server.dynamic_config`), STATIC_BROKER_CONFIG when set in the
broker's file, else DEFAULT_CONFIG; synonyms list each layer that sets it;
``read_only`` is false only for the dynamic configs; passwords and private
keys (``ssl.key.password``, ``ssl.keystore.key``, ...) are answered with a
null value and ``is_sensitive`` true, as Kafka answers its PASSWORD configs.
An empty name describes
the cluster-wide dynamic defaults that are set. Another broker id gets
INVALID_REQUEST.

For a group (:mod:`broker.server.group_configs`), whether or not it exists, every group config: its
override, ``config_source`` GROUP_CONFIG (8), else this broker's default, DEFAULT_CONFIG (5);
``read_only`` and ``is_sensitive`` false, ``config_type`` INT or STRING, the synonyms the entry
itself. The overrides are this broker's copy, kept up to date by the change notifications, as a KRaft
broker answers from its metadata image: an alter made through another broker shows a moment later. An
empty group name is INVALID_REQUEST.

For a client metrics subscription (CLIENT_METRICS, 16; :mod:`broker.server.client_metrics`), whether or not it
exists, its three configs: set ones with ``config_source`` CLIENT_METRICS_CONFIG (7), the others at their
defaults (DEFAULT_CONFIG); ``config_type`` LIST or INT. An empty name is INVALID_REQUEST.

``configuration_keys`` null means all configs; otherwise only the named ones
(unknown names are left out, as Kafka does).

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleDescribeConfigsRequest``): DESCRIBE_CONFIGS (which ALTER_CONFIGS
implies) on the topic for a TOPIC resource, on the cluster for a BROKER or
BROKER_LOGGER or CLIENT_METRICS one, on the group for a GROUP one; without it the resource gets
TOPIC_AUTHORIZATION_FAILED (29), CLUSTER_AUTHORIZATION_FAILED (31) or
GROUP_AUTHORIZATION_FAILED (30) with Kafka's message and no configs.
"""

from __future__ import annotations

from typing import Iterable

from broker.config import CONNECTION_LISTENER_PROPERTIES, LONG_MAX, TLS_PROTOCOLS, to_property_string
from broker.config import PROPERTIES as BROKER_PROPERTIES
from broker.log import LogConfig
from broker.log.config import PROPERTY_NAMES as LOG_PROPERTY_NAMES
from broker.log.config import TOPIC_CONFIGS
from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext
from broker.server.dynamic_config import DYNAMIC, DYNAMIC_DEFAULT_BROKER_CONFIG, THROTTLE_RATES, TLS_STORES
from broker.server.group_configs import GROUP_CONFIGS
from broker.server.topics import TopicError, validate_topic_name

# ResourceType
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32  # a config resource type (Kafka 4.1), not the ACL resource type GROUP (3)

# ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
CLIENT_METRICS_CONFIG = 7
GROUP_CONFIG = 8

# ConfigType (v3+)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7
CONFIG_TYPES = {"BOOLEAN": BOOLEAN, "STRING": STRING, "INT": INT, "SHORT": SHORT, "LONG": LONG, "DOUBLE": DOUBLE,
                "LIST": LIST}


_TIMES = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000, "log.roll.hours": 3_600_000}


def _text(value) -> str | None:
    return None if value is None else to_property_string(value)


def _in_topic_units(name: str, value) -> str | None:
    """A broker property's value as its topic config states it (hours and minutes become ms)."""
    if name in _TIMES and value is not None and value >= 0:
        value = value * _TIMES[name]
    return _text(value)


def topic_config_entries(ctx: RequestContext, overrides: dict[str, str], names: Iterable[str] | None = None,
                         include_synonyms: bool = False, include_documentation: bool = False) -> list[dict]:
    """The DescribeConfigs entries of a topic with ``overrides``; see the module docstring."""
    broker = ctx.broker
    config = broker.config
    effective = broker.default_log_config.with_overrides(overrides).to_properties()
    wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    entries = []
    for name in wanted:
        kind, broker_names, doc = TOPIC_CONFIGS[name]
        kind = CONFIG_TYPES[kind]
        synonyms = []
        if name in overrides:
            synonyms.append({"name": name, "value": overrides[name], "source": DYNAMIC_TOPIC_CONFIG})
        for bname in broker_names:
            if bname in BROKER_PROPERTIES and config.is_set(bname):
                synonyms.append({"name": bname, "value": _in_topic_units(bname, config[bname]),
                                 "source": STATIC_BROKER_CONFIG})
        default_name = broker_names[-1] if broker_names else name
        default = BROKER_PROPERTIES.get(default_name)
        default_value = (_in_topic_units(default_name, default.parse(default.default)) if default is not None
                         else _text(_log_default(name)))
        synonyms.append({"name": default_name, "value": default_value, "source": DEFAULT_CONFIG})
        value = effective.get(name, str(LONG_MAX))  # flush.* absent means never
        entries.append({
            "name": name,
            "value": value,
            "read_only": False,
            "is_default": synonyms[0]["source"] == DEFAULT_CONFIG,
            "config_source": synonyms[0]["source"],
            "is_sensitive": False,
            "synonyms": synonyms if include_synonyms else [],
            "config_type": kind,
            "documentation": doc if include_documentation else None,
        })
    return entries


def _log_default(name: str):
    """Kafka's default of a topic config that no broker property feeds (never = LONG_MAX)."""
    field = {v: k for k, v in LOG_PROPERTY_NAMES.items()}[name]
    value = getattr(LogConfig(), field)
    return LONG_MAX if value is None else value


def broker_config_entries(ctx: RequestContext, names: Iterable[str] | None = None,
                          include_synonyms: bool = False, include_documentation: bool = False) -> list[dict]:
    """Every broker property (or the named ones) with the dynamic throttle rates: each entry's value comes
    from this broker's dynamic config, the dynamic default, the static config or the default, in that order;
    only the dynamic configs are writable (``read_only`` false)."""
    config = ctx.broker.config
    dynamic = ctx.broker.dynamic_config
    every = [*BROKER_PROPERTIES, *THROTTLE_RATES]
    wanted = every if names is None else [n for n in names if n in every]
    entries = []
    for name in wanted:
        prop = BROKER_PROPERTIES.get(name)
        synonyms = []
        for value, source in (dynamic.layers(name) if name in DYNAMIC else []):
            synonyms.append({"name": name, "value": value, "source": source})
        if prop is None:  # only dynamic: a throttle rate
            parser, default, doc = THROTTLE_RATES[name]
            synonyms.append({"name": name, "value": _text(default), "source": DEFAULT_CONFIG})
        else:
            default, doc = prop.default, prop.doc
            if config.is_set(name):
                # broker.id as settled at start (meta.properties or generated), as Kafka reports it
                value = _text(ctx.broker.broker_id if name == "broker.id" else config[name])
                synonyms.append({"name": name, "value": value, "source": STATIC_BROKER_CONFIG})
            parsed = prop.parse(prop.default) if prop.default is not None else None
            synonyms.append({"name": name, "value": _text(parsed), "source": DEFAULT_CONFIG})
        source = synonyms[0]["source"]
        sensitive = prop is not None and prop.sensitive
        if sensitive:  # passwords and keys are never answered, as Kafka's PASSWORD type
            for synonym in synonyms:
                synonym["value"] = None
        entries.append({
            "name": name,
            "value": synonyms[0]["value"],
            "read_only": name not in DYNAMIC,
            "is_default": source == DEFAULT_CONFIG,
            "config_source": source,
            "is_sensitive": sensitive,
            "synonyms": synonyms if include_synonyms else [],
            "config_type": _broker_type(default),
            "documentation": doc if include_documentation else None,
        })
    entries.extend(_listener_limit_entries(ctx, names, include_synonyms, include_documentation))
    return entries


def _listener_limit_entries(ctx: RequestContext, names: Iterable[str] | None, include_synonyms: bool,
                            include_documentation: bool) -> list[dict]:
    """``listener.name.<l>.max.connections`` and ``...max.connection.creation.rate`` of this broker's
    listeners, where a dynamic or static config sets them (as Kafka lists prefixed properties)."""
    config, dynamic = ctx.broker.config, ctx.broker.dynamic_config
    wanted = None if names is None else set(names)
    entries = []
    for endpoint in config.listeners:
        listener = endpoint.listener_name
        tls = config.security_protocol(listener) in TLS_PROTOCOLS
        for prop in (*CONNECTION_LISTENER_PROPERTIES, *(TLS_STORES if tls else ())):
            name = f"listener.name.{listener.lower()}.{prop}"
            if wanted is not None and name not in wanted:
                continue
            synonyms = [{"name": name, "value": value, "source": source} for value, source in dynamic.layers(name)]
            static = config.listener_overrides.get(listener, {}).get(prop)
            if static is not None:
                synonyms.append({"name": name, "value": _text(static), "source": STATIC_BROKER_CONFIG})
            if not synonyms:
                continue
            entries.append({
                "name": name, "value": synonyms[0]["value"], "read_only": False, "is_default": False,
                "config_source": synonyms[0]["source"], "is_sensitive": False,
                "synonyms": synonyms if include_synonyms else [], "config_type": STRING if prop in TLS_STORES else INT,
                "documentation": BROKER_PROPERTIES[prop].doc if include_documentation else None,
            })
    return entries


def default_broker_entries(ctx: RequestContext, names: Iterable[str] | None = None) -> list[dict]:
    """The cluster-wide dynamic defaults (``/config/brokers/<default>``): only those that are set."""
    defaults = ctx.broker.dynamic_config.defaults
    wanted = sorted(defaults) if names is None else [n for n in names if n in defaults]
    return [{"name": name, "value": defaults[name], "read_only": False, "is_default": False,
             "config_source": DYNAMIC_DEFAULT_BROKER_CONFIG, "is_sensitive": False, "synonyms": [],
             "config_type": STRING, "documentation": None} for name in wanted]


def group_config_entries(ctx: RequestContext, group_id: str, names: Iterable[str] | None = None,
                         include_synonyms: bool = False, include_documentation: bool = False) -> list[dict]:
    """Every group config (or the named ones) of ``group_id``, which need not exist: its override, else this
    broker's default."""
    overrides = ctx.broker.group_configs.get(group_id)
    defaults = ctx.broker.group_configs.defaults
    wanted = list(GROUP_CONFIGS) if names is None else [n for n in names if n in GROUP_CONFIGS]
    entries = []
    for name in wanted:
        if name in overrides:
            value, source = overrides[name], GROUP_CONFIG
        else:
            value, source = _text(defaults[name]), DEFAULT_CONFIG
        key = GROUP_CONFIGS[name]
        entries.append({
            "name": name, "value": value, "read_only": False, "is_default": source == DEFAULT_CONFIG,
            "config_source": source, "is_sensitive": False,
            "synonyms": [{"name": name, "value": value, "source": source}] if include_synonyms else [],
            "config_type": CONFIG_TYPES[key.type],
            "documentation": key.doc if include_documentation else None,
        })
    return entries


#: The client metrics configs: (type, default, documentation)
_CLIENT_METRICS_CONFIGS = {
    "metrics": (LIST, "", "Metric name prefixes the matched clients push; * for all of them, none when empty."),
    "interval.ms": (INT, "300000", "How often the matched clients push, in ms (100..3600000)."),
    "match": (LIST, "", "selector=regex pairs a client must all match (client_instance_id, client_id, "
                        "client_software_name, client_software_version, client_source_address, "
                        "client_source_port); every client when empty."),
}


def client_metrics_entries(ctx: RequestContext, name: str, names: Iterable[str] | None = None,
                           include_synonyms: bool = False, include_documentation: bool = False) -> list[dict]:
    """The configs of a client metrics subscription (or the named ones), which need not exist."""
    configs = ctx.broker.client_metrics.get(name)
    wanted = list(_CLIENT_METRICS_CONFIGS) if names is None else [n for n in names if n in _CLIENT_METRICS_CONFIGS]
    entries = []
    for key in wanted:
        config_type, default, doc = _CLIENT_METRICS_CONFIGS[key]
        value, source = (configs[key], CLIENT_METRICS_CONFIG) if key in configs else (default, DEFAULT_CONFIG)
        entries.append({
            "name": key, "value": value, "read_only": False, "is_default": source == DEFAULT_CONFIG,
            "config_source": source, "is_sensitive": False,
            "synonyms": [{"name": key, "value": value, "source": source}]
            if include_synonyms and source == CLIENT_METRICS_CONFIG else [],
            "config_type": config_type, "documentation": doc if include_documentation else None,
        })
    return entries


def _broker_type(default) -> int:
    if isinstance(default, bool):
        return BOOLEAN
    if isinstance(default, int):
        return LONG if abs(default) > 2**31 - 1 else INT
    if isinstance(default, float):
        return DOUBLE
    return STRING


def check_broker_resource(ctx: RequestContext, name: str) -> None:
    """Raise TopicError(INVALID_REQUEST) unless ``name`` is empty or this broker's id."""
    if name not in ("", str(ctx.broker.broker_id)):
        raise TopicError(ErrorCode.INVALID_REQUEST,
                         f"unexpected broker id, expected {ctx.broker.broker_id} or empty string, but received {name}")


async def _topic_overrides(ctx: RequestContext, name: str, cached: dict) -> dict:
    """The topic's overrides as stored, as Kafka reads them (its ``fetchEntityConfig``): an answer right
    after an alter made on another broker shows it, before this broker's change notification arrives."""
    try:
        return await ctx.broker.run_blocking(ctx.broker.metadata.topic_config, name)
    except Exception:  # noqa: BLE001 - the store out of reach: what this broker last applied
        return cached


def config_authorization_error(ctx: RequestContext, rtype: int, name: str, operation: AclOperation) -> int:
    """NONE if the principal may do ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on the configs of the
    resource (the topic for TOPIC, the cluster for BROKER, BROKER_LOGGER and CLIENT_METRICS, the group for
    GROUP; other types
    are left to the handler), else TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED, as Kafka's config APIs
    decide."""
    if rtype == TOPIC:
        allowed = ctx.authorize(operation, ResourceType.TOPIC, name)
        return ErrorCode.NONE if allowed else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if rtype in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        allowed = ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)
        return ErrorCode.NONE if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if rtype == GROUP:
        allowed = ctx.authorize(operation, ResourceType.GROUP, name)
        return ErrorCode.NONE if allowed else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.NONE


#: Kafka's messages of the authorization errors (its ``Errors`` enum).
AUTHORIZATION_MESSAGES = {ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                          ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
                          ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed."}


async def _describe(ctx: RequestContext, resource: dict, synonyms: bool, documentation: bool) -> dict:
    rtype, name = resource["resource_type"], resource["resource_name"]
    keys = resource["configuration_keys"]
    result = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": rtype,
              "resource_name": name, "configs": []}
    refused = config_authorization_error(ctx, rtype, name, AclOperation.DESCRIBE_CONFIGS)
    if refused:
        result.update(error_code=refused, error_message=AUTHORIZATION_MESSAGES[refused])
        return result
    try:
        if rtype == TOPIC:
            validate_topic_name(name)
            info = ctx.broker.topics.get(name)
            if info is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            overrides = await _topic_overrides(ctx, name, info.config)
            result["configs"] = topic_config_entries(ctx, overrides, keys, synonyms, documentation)
        elif rtype == BROKER:
            check_broker_resource(ctx, name)
            if name:
                result["configs"] = broker_config_entries(ctx, keys, synonyms, documentation)
            else:
                result["configs"] = default_broker_entries(ctx, keys)
        elif rtype == GROUP:
            if not name:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
            result["configs"] = group_config_entries(ctx, name, keys, synonyms, documentation)
        elif rtype == CLIENT_METRICS:
            if not name:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
            result["configs"] = client_metrics_entries(ctx, name, keys, synonyms, documentation)
        else:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"resource type {rtype} is not supported")
    except TopicError as exc:
        result.update(error_code=exc.error_code, error_message=exc.message, configs=[])
    return result


async def handle(ctx: RequestContext, request: dict) -> dict:
    synonyms = ctx.api_version >= 1 and request["include_synonyms"]
    documentation = ctx.api_version >= 3 and request["include_documentation"]
    return {"throttle_time_ms": 0,
            "results": [await _describe(ctx, r, synonyms, documentation) for r in request["resources"]]}


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_CONFIGS, 0, 4, handle)
