"""DescribeClientQuotas (48) and AlterClientQuotas (49), versions 0-1 (KIP-546; v1 flexible), as Kafka
2.7's AdminManager serves them. The quotas and where they live: :mod:`broker.server.quotas`.

An entity is a list of components, each an ``entity_type`` (``user``,
``client-id`` or ``ip``) and an ``entity_name`` (null: the default entity of that
type). An ``ip`` entity (Kafka 2.8) stands alone, names an IP address (stored in
its canonical form: ``::ffff:10.0.0.7`` is ``10.0.0.7``; a host name is refused, as
each broker could resolve it differently) or the default, and takes only
``connection_creation_rate`` (a whole number of connections per second), which no
other entity takes.

DescribeClientQuotas takes a filter: one component per entity type, each
matching an exact name (``match_type`` 0), the default entity (1, ``match``
null) or any name (2); a type without a component matches any entity, or, with
``strict``, only entities without that type. It answers every stored entity
that matches and has quotas, with its quota keys and values. A repeated or
empty entity type, or an ``ip`` component beside a user or client id one, is
INVALID_REQUEST; another type UNSUPPORTED_VERSION.

AlterClientQuotas sets (``value``) or removes (``remove``) quota keys of each
entity, one result per entry; ``validate_only`` checks without writing.
Refused with INVALID_REQUEST, that entity unchanged: an unknown entity type, a
type given twice, no component, an unknown key, a byte rate that is not a whole
number, a value that is not positive (a quota of 0 would stop the client for
good; remove the key instead), an empty name, the name ``<default>`` (how the
default entity is stored; Kafka 3 refuses it too). The entity's node is written with the other keys
it holds (a user's SCRAM credentials) and every broker told.

With an authorizer (:mod:`broker.acl`) Describe needs DESCRIBE_CONFIGS and
Alter ALTER_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import ipaddress
import math

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.apis.cluster import QUOTA_MATCH_DEFAULT, QUOTA_MATCH_EXACT, QUOTA_MATCH_SPECIFIED
from broker.server.context import RequestContext
from broker.server.connection_quotas import client_address
from broker.server.quotas import (DEFAULT, IP_CONNECTION_RATE, QUOTA_KEYS, entity_path, parse_entity_path,
                                  parse_ip_path, quota_values)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
INT_MAX = 2**31 - 1


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _components(entity: list[dict]) -> tuple[str | None, str | None, str | None]:
    """The (user, client id, IP address) of an entity's components; DEFAULT for a null name."""
    user = client = ip = None
    seen = set()
    for c in entity:
        kind = c["entity_type"]
        if kind in seen:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Duplicate {kind} entity type")
        seen.add(kind)
        name = c["entity_name"]
        if name == "":
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Empty {kind} not supported")
        if name == DEFAULT:  # Kafka's name for the default entity, in storage
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Entity name '{DEFAULT}' is reserved")
        name = DEFAULT if name is None else name
        if kind == USER:
            user = name
        elif kind == CLIENT_ID:
            client = name
        elif kind == IP:
            ip = name if name == DEFAULT else _address(name)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}")
    if user is None and client is None and ip is None:
        raise _Refused(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    if ip is not None and (user is not None or client is not None):
        raise _Refused(ErrorCode.INVALID_REQUEST,
                       "Invalid quota entity combination, IP entity should not be combined with User or ClientId")
    return user, client, ip


def _address(name: str) -> str:
    try:
        ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"{name} is not a valid IP address") from None
    return client_address(name)


def _storage_path(user: str | None, client: str | None, ip: str | None) -> str:
    return f"ips/{ip}" if ip is not None else entity_path((user, client))


def _entity_out(user: str | None, client: str | None, ip: str | None = None) -> list[dict]:
    out = []
    if user is not None:
        out.append({"entity_type": USER, "entity_name": None if user == DEFAULT else user})
    if client is not None:
        out.append({"entity_type": CLIENT_ID, "entity_name": None if client == DEFAULT else client})
    if ip is not None:
        out.append({"entity_type": IP, "entity_name": None if ip == DEFAULT else ip})
    return out


def _filter(components: list[dict]) -> dict[str, dict]:
    by_type: dict[str, dict] = {}
    for c in components:
        kind = c["entity_type"]
        if not kind:
            raise _Refused(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID, IP):
            raise _Refused(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported")
        if kind in by_type:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Duplicate {kind} filter component entity type")
        if c["match_type"] == QUOTA_MATCH_EXACT and c["match"] is None:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"The {kind} filter matches an exact name but gives none")
        if c["match_type"] not in (QUOTA_MATCH_EXACT, QUOTA_MATCH_DEFAULT, QUOTA_MATCH_SPECIFIED):
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown match type {c['match_type']} for {kind}")
        by_type[kind] = c
    if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
        raise _Refused(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                       "component should not be used with User or clientId filter component.")
    return by_type


def _matches(component: dict | None, name: str | None, strict: bool) -> bool:
    if component is None:
        return name is None or not strict
    if name is None:
        return False
    kind = component["match_type"]
    if kind == QUOTA_MATCH_EXACT:
        return name == component["match"] and name != DEFAULT  # (a name cannot be the default's)
    if kind == QUOTA_MATCH_DEFAULT:
        return name == DEFAULT
    return True  # any name, the default included (Kafka's ofEntityType)


async def describe(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Cluster authorization failed.", "entries": None}
    try:
        by_type = _filter(request["components"])
    except _Refused as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": str(exc), "entries": None}
    strict = request["strict"]
    stored = await ctx.broker.run_blocking(ctx.broker.metadata.quota_entity_configs)
    entries = []
    for path, config in stored:
        ip = parse_ip_path(path)
        if ip is not None:
            user = client = None
            values = _ip_values(config)
        else:
            entity = parse_entity_path(path)
            values = quota_values(config) if entity is not None else {}
            user, client = entity if entity is not None else (None, None)
        if not values:
            continue
        if (_matches(by_type.get(USER), user, strict) and _matches(by_type.get(CLIENT_ID), client, strict)
                and _matches(by_type.get(IP), ip, strict)):
            entries.append({"entity": _entity_out(user, client, ip), "values": [
                {"key": key, "value": value} for key, value in sorted(values.items())]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


def _ip_values(config: dict[str, str]) -> dict[str, float]:
    try:
        value = int(config.get(IP_CONNECTION_RATE, "0"))
    except ValueError:
        return {}
    return {IP_CONNECTION_RATE: float(value)} if value > 0 else {}


def _check_ops(ops: list[dict], ip: bool = False) -> dict[str, float | None]:
    """The changes of one entry: key -> new value (None: remove); ``ip``: of an IP address entity."""
    changes: dict[str, float | None] = {}
    keys = {IP_CONNECTION_RATE: True} if ip else QUOTA_KEYS
    for op in ops:
        key = op["key"]
        if key not in keys:
            if key == IP_CONNECTION_RATE or (ip and key in QUOTA_KEYS):
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Configuration {key} is not valid for "
                               f"{'an IP' if ip else 'a user or client id'} entity")
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
        if key in changes:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Configuration {key} is changed twice in one entry")
        if op["remove"]:
            changes[key] = None
            continue
        value = op["value"]
        if not math.isfinite(value) or value <= 0:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a positive number, not "
                           f"{value!r} (remove the quota to lift it)")
        if keys[key]:
            whole = round(value)
            if abs(whole - value) > 1e-6 or (ip and whole > INT_MAX):
                raise _Refused(ErrorCode.INVALID_REQUEST,
                               f"Configuration {key} must be {'an Int' if ip else 'a Long'} value")
            value = float(whole)
        changes[key] = value
    return changes


def _text(value: float, whole: bool) -> str:
    return str(int(value)) if whole else repr(float(value))


async def alter(ctx: RequestContext, request: dict) -> dict:
    allowed = ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
    metadata = ctx.broker.metadata
    validate_only = request["validate_only"]
    planned: list[tuple[dict, str | None, dict | None, tuple[int, str] | None]] = []
    for entry in request["entries"]:
        if not allowed:
            planned.append((entry, None, None, (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                "Cluster authorization failed.")))
            continue
        try:
            user, client, ip = _components(entry["entity"])
            path = _storage_path(user, client, ip)
            changes = _check_ops(entry["ops"], ip=ip is not None)
        except _Refused as exc:
            planned.append((entry, None, None, (exc.code, str(exc))))
            continue
        planned.append((entry, path, changes, None))

    def write() -> list[tuple[int, str] | None]:
        outcome = []
        for _entry, path, changes, error in planned:
            if error is not None or validate_only:
                outcome.append(error)
                continue
            config = metadata.quota_entity_config(path)
            for key, value in changes.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = _text(value, key == IP_CONNECTION_RATE or QUOTA_KEYS[key])
            metadata.set_quota_entity_config(path, config)
            outcome.append(None)
        return outcome

    outcome = await ctx.broker.run_blocking(write)
    entries = []
    for (entry, _path, _changes, _error), result in zip(planned, outcome):
        code, message = result if result is not None else (ErrorCode.NONE, None)
        entries.append({"error_code": code, "error_message": message, "entity": entry["entity"]})
    return {"throttle_time_ms": 0, "entries": entries}


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, describe)
    registry.register(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, alter)
