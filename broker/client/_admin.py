"""The admin client: :class:`AsyncAdmin` (asyncio core) and :class:`Admin` (blocking).

Requests go where Kafka routes them: topic creation, deletion, partition
additions and partition reassignments to the controller; broker configs to that broker; group operations
to the group's coordinator; ListGroups to every broker; DeleteRecords and
ListOffsets to partition leaders; the transaction calls as
:mod:`._admin_transactions` says; the SCRAM credential calls (KIP-554), the delegation token calls
(KIP-48) and the client quota calls (KIP-546) to any broker, as Kafka 2.7's admin client sends them; the ACL calls
(CreateAcls, DescribeAcls, DeleteAcls) and ListConfigResources to any broker. Each method raises the first
per-item error as a :class:`~.errors.BrokerResponseError` naming the item (``context``).

Resource types (DescribeConfigs and friends): ``"topic"`` (2), ``"broker"`` (4),
``"broker_logger"`` (8), ``"client_metrics"`` (16, KIP-714's client metrics subscriptions), ``"group"`` (32).
Incremental config operations: ``"set"`` (0), ``"delete"`` (1), ``"append"`` (2), ``"subtract"`` (3).
"""

from __future__ import annotations

import asyncio
import base64
import enum
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from broker.acl import AclOperation, AclPermission, PatternType, ResourceType
from broker.protocol.apis.cluster import QUOTA_MATCH_DEFAULT, QUOTA_MATCH_EXACT, QUOTA_MATCH_SPECIFIED

from ._cluster import Cluster
from ._admin_transactions import TransactionsAdmin
from ._config import AdminConfig, build_config
from ._connection import Api
from ._sasl import scram_credential
from ._consumer_protocol import decode_assignment
from ._sync import LoopThread
from ._types import BrokerMetadata, OffsetAndMetadata, TopicMetadata, TopicPartition
from .errors import (ConfigError, CoordinatorNotAvailableError, KafkaConnectionError, KafkaTimeoutError,
                     NotCoordinatorError, ProtocolError, UnsupportedApiError, error_for_code)

REPLICA_NOT_AVAILABLE = 9  # AlterReplicaLogDirs: no replica on that broker yet
UNSUPPORTED_VERSION = 35
GROUP_ID_NOT_FOUND = 69
#: Config resource types (Kafka's ``ConfigResource.Type``; GROUP is 32 there, unlike the ACL resource type 3)
RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8, "client_metrics": 16, "group": 32}
RESOURCE_TYPE_NAMES = {code: name for name, code in RESOURCE_TYPES.items()}
CONFIG_OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}
CONFIG_SOURCES = {-1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, list[int]] | None = None


@dataclass(frozen=True)
class ConfigResource:
    """A config owner: ``ConfigResource("topic", "orders")``, ``ConfigResource("broker", "1")``,
    ``ConfigResource("group", "billing")`` (Kafka 4.1's group configs) or
    ``ConfigResource("client_metrics", "basic")`` (a client metrics subscription, KIP-714: ``metrics``,
    ``interval.ms``, ``match``)."""

    type: str
    name: str

    @property
    def type_code(self) -> int:
        try:
            return RESOURCE_TYPES[self.type]
        except KeyError:
            raise ConfigError(f"unknown resource type {self.type!r}") from None


@dataclass(frozen=True)
class ConfigResourceListing:
    """One resource with configs, as ListConfigResources lists it: ``type`` a key of :data:`RESOURCE_TYPES`
    (the number as text for a type this client does not know), ``name`` its name."""

    type: str
    name: str


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    is_sensitive: bool
    is_default: bool


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerMetadata]


@dataclass(frozen=True)
class ReplicaLogDirInfo:
    """One replica in a log dir: its size, and for a future replica (a move under way) how far behind it is."""

    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log dir of one broker (DescribeLogDirs); ``error`` is a Kafka error name, or None when online."""

    broker_id: int
    path: str
    error: str | None
    replicas: list[ReplicaLogDirInfo]


@dataclass(frozen=True)
class PartitionReassignment:
    """A move in progress (ListPartitionReassignments): all replicas now, and those coming and going."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


#: Group types (ListGroups v5's ``group_type``, KIP-848): ``classic`` (JoinGroup/SyncGroup, and groups that
#: only commit offsets), ``consumer`` (the consumer rebalance protocol) and ``share`` (KIP-932)
GROUP_TYPES = ("classic", "consumer", "share")


@dataclass(frozen=True)
class GroupListing:
    """One group as ListGroups lists it. ``state``: the classic group states (Empty, Stable, ...), those of
    a consumer-protocol group (Empty, Assigning, Reconciling, Stable) or of a share group; "" from a broker
    answering ListGroups < v4. ``group_type``: one of :data:`GROUP_TYPES`; from a broker answering
    ListGroups < v5, which has no consumer-protocol groups, ``share`` for protocol type ``share``, else
    ``classic``."""

    group_id: str
    protocol_type: str
    state: str = ""
    group_type: str = "classic"


@dataclass(frozen=True)
class MemberDescription:
    """A member of a group. ``assignment``: the partitions it owns, by topic name (for a classic group the
    assignment its leader made, decoded when the protocol type is ``consumer``). A member of a
    consumer-protocol group (KIP-848) also has its ``member_epoch``, ``target_assignment`` (the partitions
    the coordinator means it to own once it has reconciled), ``rack_id`` and subscription; for a classic
    member those are -1, None and empty."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    assignment: list[TopicPartition]
    member_epoch: int = -1
    target_assignment: list[TopicPartition] | None = None
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None

    def partitions_by_topic(self, target: bool = False) -> dict[str, list[int]]:
        """The (target) assignment as ``{topic name: [partition, ...]}``, topics and partitions sorted."""
        out: dict[str, list[int]] = {}
        for tp in sorted((self.target_assignment or []) if target else self.assignment):
            out.setdefault(tp[0], []).append(tp[1])
        return out


@dataclass(frozen=True)
class GroupDescription:
    """A group as :meth:`AsyncAdmin.describe_groups` finds it. ``group_type`` ``consumer`` (KIP-848, from
    ConsumerGroupDescribe): ``state`` is Empty, Assigning, Reconciling or Stable, ``protocol_type``
    ``consumer``, ``protocol`` and ``assignor_name`` the server assignor (``uniform``, ``range``), with the
    group and target assignment epochs. ``classic`` (from DescribeGroups): ``protocol`` is the protocol the
    group chose (the assignment strategy; "" unless Stable), the epochs -1 and ``assignor_name`` None. An
    unknown group is answered as DescribeGroups does, state ``Dead`` with no members, ``group_type`` ""."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: int
    group_type: str = "classic"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str | None = None


@dataclass(frozen=True)
class ScramCredentialInfo:
    """One SCRAM credential of a user (DescribeUserScramCredentials): its mechanism and iterations."""

    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s credential for ``mechanism`` (SCRAM-SHA-256 or SCRAM-SHA-512) from ``password``:
    the client sends a random salt and the salted password, never the password (see
    :func:`broker.client._sasl.scram_credential`). ``iterations``: 4096 (Kafka's minimum) to 16384."""

    user: str
    mechanism: str
    password: str = field(repr=False)
    iterations: int = 4096


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Remove ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: str


@dataclass(frozen=True)
class DelegationToken:
    """A delegation token (KIP-48): its id and HMAC (the secret), owner, renewers and times (epoch ms)."""

    token_id: str
    hmac: bytes = field(repr=False)
    owner: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @property
    def hmac_base64(self) -> str:
        """The HMAC as clients authenticate with it (SCRAM's password) and as Kafka's tools print it."""
        return base64.b64encode(self.hmac).decode("ascii")

    def jaas_config(self) -> str:
        """``sasl.jaas.config`` for a client to authenticate with this token (SCRAM-SHA-256 or -512), the
        Java client's form, which ours takes too."""
        return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{self.token_id}" '
                f'password="{self.hmac_base64}" tokenauth=true;')


def _principal_body(principal: str, what: str) -> dict:
    kind, sep, name = str(principal).partition(":")
    if not sep or not kind or not name:
        raise ConfigError(f"a {what} is a principal, Type:name (User:alice), not {principal!r}")
    return {"principal_type": kind, "principal_name": name}


def _principal_text(body: dict) -> str:
    """``Type:name`` of a principal in the token APIs' two fields."""
    return f"{body['principal_type']}:{body['principal_name']}"


class _QuotaEntityMatch(enum.Enum):
    """The parts of client quota entities and filters that are not names: :data:`DEFAULT_ENTITY`, :data:`ANY_ENTITY`."""

    DEFAULT_ENTITY = "<default>"
    ANY_ENTITY = "<any>"

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.value


#: A part of a :class:`ClientQuotaEntity` or :class:`ClientQuotaFilterComponent` that is the default entity of
#: its type (Kafka's null entity name; ``<default>`` in kafka-configs.sh): its quota applies to every user (client
#: id) without one of its own. The string ``"<default>"`` is not it.
DEFAULT_ENTITY = _QuotaEntityMatch.DEFAULT_ENTITY
#: A :class:`ClientQuotaFilterComponent` matching any name of its type, the default entity included.
ANY_ENTITY = _QuotaEntityMatch.ANY_ENTITY

#: The quota keys whose values are whole numbers (Kafka's LONG): describe_client_quotas gives them as ints.
WHOLE_QUOTA_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"})
QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP = "user", "client-id", "ip"


def _quota_entity_part(value, what: str, *, any_ok: bool = False):
    """``value`` checked as a part of a quota entity or filter: a non-empty name, DEFAULT_ENTITY (or ANY_ENTITY)."""
    if value is DEFAULT_ENTITY or (any_ok and value is ANY_ENTITY):
        return value
    if not isinstance(value, str) or not value:
        also = ", ANY_ENTITY" if any_ok else ""
        raise ConfigError(f"a client quota {what} is a non-empty name, DEFAULT_ENTITY{also}; not {value!r}")
    return value


def _quota_part_text(kind: str, value) -> str:
    return f"default {kind}" if value is DEFAULT_ENTITY else f"{kind} {value!r}"


@dataclass(frozen=True)
class ClientQuotaEntity:
    """Whom a client quota applies to (Kafka's ClientQuotaEntity): a user (the principal's name, ``alice`` for
    ``User:alice``), a client id, or both (that client id of that user); or, alone, a client IP address
    (Kafka 2.8: its only quota is ``connection_creation_rate``). Each part is a non-empty name,
    :data:`DEFAULT_ENTITY` (the default entity of its type), or None (the entity has no such part); at least
    one is not None. ``str()`` names it as the broker's log does: ``user 'alice', default client id``."""

    user: str | _QuotaEntityMatch | None = None
    client_id: str | _QuotaEntityMatch | None = None
    ip: str | _QuotaEntityMatch | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None and self.ip is None:
            raise ConfigError("a client quota entity names a user, a client id or both, or an IP address")
        if self.ip is not None and (self.user is not None or self.client_id is not None):
            raise ConfigError("a client quota entity names an IP address alone, with no user or client id")
        for part, what in ((self.user, "user"), (self.client_id, "client id"), (self.ip, "IP address")):
            if part is not None:
                _quota_entity_part(part, what)

    def __str__(self) -> str:
        return ", ".join(_quota_part_text(what, part) for part, what in (
            (self.user, "user"), (self.client_id, "client id"), (self.ip, "ip")) if part is not None)

    def _components(self) -> list[dict]:
        return [{"entity_type": kind, "entity_name": None if part is DEFAULT_ENTITY else part}
                for kind, part in ((QUOTA_USER, self.user), (QUOTA_CLIENT_ID, self.client_id), (QUOTA_IP, self.ip))
                if part is not None]

    def _sort_key(self) -> tuple:
        return tuple((0, "") if part is None else (1, "") if part is DEFAULT_ENTITY else (2, part)
                     for part in (self.ip, self.user, self.client_id))


def _quota_entity_of(components: list[dict]) -> ClientQuotaEntity | None:
    """The entity of a DescribeClientQuotas answer; None for one with a part of a type unknown here."""
    parts: dict[str, Any] = {}
    for c in components:
        if c["entity_type"] not in (QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP):
            return None
        parts[c["entity_type"]] = DEFAULT_ENTITY if c["entity_name"] is None else c["entity_name"]
    return ClientQuotaEntity(parts.get(QUOTA_USER), parts.get(QUOTA_CLIENT_ID), parts.get(QUOTA_IP))


@dataclass(frozen=True)
class ClientQuotaFilterComponent:
    """One part of a :meth:`AsyncAdmin.describe_client_quotas` filter (Kafka's ClientQuotaFilterComponent): the
    entities whose ``entity_type`` part (``"user"``, ``"client-id"`` or ``"ip"``; ``"client_id"`` is taken too)
    is ``match``: a name, :data:`DEFAULT_ENTITY`, or :data:`ANY_ENTITY` (any name, the default included)."""

    entity_type: str
    match: str | _QuotaEntityMatch = ANY_ENTITY

    def __post_init__(self) -> None:
        kind = self.entity_type.replace("_", "-") if isinstance(self.entity_type, str) else self.entity_type
        if kind not in (QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP):
            raise ConfigError(f"a client quota entity type is 'user', 'client-id' or 'ip', not {self.entity_type!r}")
        object.__setattr__(self, "entity_type", kind)
        _quota_entity_part(self.match, f"{kind} filter", any_ok=True)

    def _body(self) -> dict:
        if self.match is DEFAULT_ENTITY:
            return {"entity_type": self.entity_type, "match_type": QUOTA_MATCH_DEFAULT, "match": None}
        if self.match is ANY_ENTITY:
            return {"entity_type": self.entity_type, "match_type": QUOTA_MATCH_SPECIFIED, "match": None}
        return {"entity_type": self.entity_type, "match_type": QUOTA_MATCH_EXACT, "match": self.match}


SCRAM_MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_MECHANISM_NAMES = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}


def _scram_mechanism_id(mechanism: str) -> int:
    try:
        return SCRAM_MECHANISM_IDS[str(mechanism).strip().upper()]
    except KeyError:
        raise ConfigError(f"SCRAM mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, not {mechanism!r}") from None


def _acl_enum(kind, value, what: str):
    """``value`` as a member of ``kind`` (one of :mod:`broker.acl`'s enums): a member, its number, or its
    name in any case, with ``_``/``-`` or none (``"IdempotentWrite"``, ``"idempotent-write"``, ``"READ"``)."""
    if isinstance(value, kind):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return kind(value)
        except ValueError:
            pass
    elif isinstance(value, str):
        wanted = value.strip().replace("-", "").replace("_", "").lower()
        for member in kind:
            if member.name.replace("_", "").lower() == wanted:
                return member
        if kind is ResourceType and wanted == "broker":  # confluent-kafka's name of the cluster
            return ResourceType.CLUSTER
    names = ", ".join(m.name for m in kind if m.name != "UNKNOWN")
    raise ConfigError(f"unknown ACL {what} {value!r} (one of {names})")


def _acl_text(resource_type, name, pattern_type, principal, host, operation, permission_type) -> str:
    what = f"{resource_type.name} {name!r}" if name is not None else f"{resource_type.name} (any name)"
    return (f"{what} ({pattern_type.name}): {permission_type.name} {operation.name} "
            f"to {principal or 'any principal'} from {host or 'any host'}")


def _coerce_acl_fields(self) -> None:
    """An ACL binding's or filter's enum fields taken from their numbers or names (in any case)."""
    object.__setattr__(self, "resource_type", _acl_enum(ResourceType, self.resource_type, "resource type"))
    object.__setattr__(self, "pattern_type", _acl_enum(PatternType, self.pattern_type, "pattern type"))
    object.__setattr__(self, "operation", _acl_enum(AclOperation, self.operation, "operation"))
    object.__setattr__(self, "permission_type", _acl_enum(AclPermission, self.permission_type, "permission type"))


def _acl_fields_text(self) -> str:
    return _acl_text(self.resource_type, self.name, self.pattern_type, self.principal, self.host,
                     self.operation, self.permission_type)


@dataclass(frozen=True)
class AclBinding:
    """One ACL (Kafka's AclBinding): a resource pattern (type, name, LITERAL or PREFIXED) and an
    access control entry (principal ``User:<name>`` or ``User:*``, host or ``*``, operation, ALLOW
    or DENY). The enum fields take :mod:`broker.acl`'s members, their numbers or their names in any
    case (``"topic"``, ``"Read"``, ``"idempotent-write"``, ``"allow"``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermission

    __post_init__ = _coerce_acl_fields
    __str__ = _acl_fields_text

    def to_filter(self) -> "AclBindingFilter":
        """The filter matching exactly this binding."""
        return AclBindingFilter(self.resource_type, self.name, self.pattern_type, self.principal, self.host,
                                self.operation, self.permission_type)


@dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs to describe or delete (Kafka's AclBindingFilter): each field matches the ACLs with that
    value; None, ANY (the defaults) match every value, so ``AclBindingFilter()`` matches every ACL.
    ``pattern_type`` MATCH with a name matches every ACL that applies to that resource: its own LITERAL
    name, the LITERAL wildcard ``*`` and the PREFIXED names it starts with. Enum fields as in
    :class:`AclBinding`."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermission = AclPermission.ANY

    __post_init__ = _coerce_acl_fields
    __str__ = _acl_fields_text

    def _body(self) -> dict:
        return {"resource_type_filter": self.resource_type, "resource_name_filter": self.name,
                "pattern_type_filter": self.pattern_type, "principal_filter": self.principal,
                "host_filter": self.host, "operation": self.operation, "permission_type": self.permission_type}


def _binding_of(resource: dict, acl: dict, pattern_key: str = "pattern_type") -> AclBinding:
    return AclBinding(resource["resource_type"], resource["resource_name"],
                      resource.get(pattern_key, PatternType.LITERAL), acl["principal"], acl["host"], acl["operation"],
                      acl["permission_type"])


def _acl_sort_key(b: AclBinding) -> tuple:
    return (b.resource_type, b.pattern_type, b.name, b.principal, b.host, b.operation, b.permission_type)


@dataclass(frozen=True)
class PartitionLag:
    committed: int | None
    end_offset: int
    lag: int | None


class AsyncAdmin(TransactionsAdmin):
    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: AdminConfig = build_config(AdminConfig, config, kwargs)
        self._cluster = Cluster(self.config)
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self._cluster.refresh_metadata()
            self._started = True

    async def __aenter__(self) -> "AsyncAdmin":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._cluster.close()

    async def _controller(self) -> int | None:
        await self._cluster.refresh_metadata()
        cid = self._cluster.controller_id
        return cid if cid in self._cluster.brokers else None

    # -- log dirs -------------------------------------------------------------------
    async def describe_log_dirs(self, broker_ids: Iterable[int] | None = None) -> list[LogDirDescription]:
        """Every log dir of the given brokers (all live brokers when None), with the replicas in each."""
        if broker_ids is None:
            broker_ids = [b.node_id for b in (await self.describe_cluster()).brokers]
        out = []
        for broker_id in broker_ids:
            resp = await self._cluster.request(broker_id, Api.DESCRIBE_LOG_DIRS, {"topics": None})
            for r in resp["results"]:
                error = error_for_code(r["error_code"]).error_name if r["error_code"] else None
                replicas = [ReplicaLogDirInfo(t["name"], p["partition_index"], p["partition_size"], p["offset_lag"],
                                              p["is_future_key"]) for t in r["topics"] for p in t["partitions"]]
                out.append(LogDirDescription(broker_id, r["log_dir"], error,
                                             sorted(replicas, key=lambda i: (i.topic, i.partition))))
        return out

    async def alter_replica_log_dirs(self, broker_id: int, moves: Mapping[tuple[str, int], str], *,
                                     not_yet_ok: bool = False) -> list[tuple[str, int]]:
        """Move replicas of ``broker_id`` to other log dirs of it: ``{(topic, partition): dir}``.

        Returns once the moves have started (see :meth:`describe_log_dirs` for
        their progress); raises the first partition's error. With ``not_yet_ok``,
        REPLICA_NOT_AVAILABLE (the broker has no replica yet; it makes it in that
        dir when it comes) is no error: those partitions are returned.
        """
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, partition), path in moves.items():
            by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
        body = {"dirs": [{"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                         for path, topics in by_dir.items()]}
        resp = await self._cluster.request(broker_id, Api.ALTER_REPLICA_LOG_DIRS, body)
        not_yet = []
        for t in resp["results"]:
            for p in t["partitions"]:
                if p["error_code"] == REPLICA_NOT_AVAILABLE and not_yet_ok:
                    not_yet.append((t["topic_name"], p["partition_index"]))
                elif p["error_code"]:
                    raise error_for_code(p["error_code"], context=f"{t['topic_name']}-{p['partition_index']}")
        return not_yet

    # -- leader elections -----------------------------------------------------------
    async def elect_leaders(self, election_type: str, partitions: Iterable[tuple[str, int]] | None = None, *,
                            timeout_ms: int = 30000) -> dict[tuple[str, int], tuple[int, str | None]]:
        """A ``"preferred"`` or ``"unclean"`` election (ElectLeaders, at the controller) of ``partitions``
        (every partition when None): ``{(topic, partition): (error code, message)}``, 0 where elected."""
        code = {"preferred": 0, "unclean": 1}[election_type]
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [{"topic": t, "partition_id": ps} for t, ps in by_topic.items()]
        resp = await self._cluster.request(await self._controller(), Api.ELECT_LEADERS,
                                           {"election_type": code, "topic_partitions": topics,
                                            "timeout_ms": timeout_ms})
        if resp.get("error_code"):
            raise error_for_code(resp["error_code"], context="ElectLeaders")
        return {(t["topic"], p["partition_id"]): (p["error_code"], p["error_message"])
                for t in resp["replica_election_results"] for p in t["partition_result"]}

    # -- partition reassignments (KIP-455) -------------------------------------------
    async def alter_partition_reassignments(self, targets: Mapping[tuple[str, int], list[int] | None], *,
                                            timeout_ms: int = 30000) -> None:
        """Start moving each partition to its target replicas (None cancels its move); returns once started."""
        topics: dict[str, list] = {}
        for (topic, partition), replicas in targets.items():
            topics.setdefault(topic, []).append({"partition_index": partition,
                                                 "replicas": None if replicas is None else list(replicas)})
        body = {"timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        resp = await self._cluster.request(await self._controller(), Api.ALTER_PARTITION_REASSIGNMENTS, body)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], resp.get("error_message"))
        for t in resp["responses"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    raise error_for_code(p["error_code"], p.get("error_message"),
                                         context=f"{t['name']}-{p['partition_index']}")

    async def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None, *,
                                           timeout_ms: int = 30000) -> dict[tuple[str, int], PartitionReassignment]:
        """The moves in progress (of ``partitions`` only, if given)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        resp = await self._cluster.request(await self._controller(), Api.LIST_PARTITION_REASSIGNMENTS,
                                           {"timeout_ms": timeout_ms, "topics": topics})
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], resp.get("error_message"))
        return {(t["name"], p["partition_index"]): PartitionReassignment(p["replicas"], p["adding_replicas"],
                                                                          p["removing_replicas"])
                for t in resp["topics"] for p in t["partitions"]}

    # -- SCRAM credentials (KIP-554) ------------------------------------------------
    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                              ) -> dict[str, list[ScramCredentialInfo]]:
        """``{user: [ScramCredentialInfo]}`` of ``users`` (every user with a credential when None).
        A named user without any credential raises RESOURCE_NOT_FOUND (91) naming the user."""
        body = {"users": None if users is None else [{"name": u} for u in users]}
        resp = await self._cluster.request(None, Api.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], resp.get("error_message"), context="DescribeUserScramCredentials")
        out = {}
        for r in resp["results"]:
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"user {r['user']}")
            out[r["user"]] = sorted((ScramCredentialInfo(SCRAM_MECHANISM_NAMES.get(c["mechanism"], "UNKNOWN"),
                                                         c["iterations"]) for c in r["credential_infos"]),
                                    key=lambda c: c.mechanism)
        return dict(sorted(out.items()))

    async def alter_user_scram_credentials(self, upsertions: Iterable[UserScramCredentialUpsertion] = (),
                                           deletions: Iterable[UserScramCredentialDeletion] = ()) -> None:
        """Set and remove SCRAM credentials in one request (AlterUserScramCredentials); raises the first
        user's error (RESOURCE_NOT_FOUND for a credential that is not there, UNACCEPTABLE_CREDENTIAL,
        DUPLICATE_RESOURCE for one user and mechanism twice ...). A bad mechanism, iterations or password
        is a ConfigError before anything is sent."""
        items = []
        for u in upsertions:
            mechanism = SCRAM_MECHANISM_NAMES[_scram_mechanism_id(u.mechanism)]
            if not u.user:
                raise ConfigError("a SCRAM credential needs a user name")
            try:
                salt, salted = scram_credential(mechanism, u.password, u.iterations)
            except ConfigError as exc:
                raise ConfigError(f"user {u.user} {mechanism}: {exc}") from None
            items.append({"name": u.user, "mechanism": SCRAM_MECHANISM_IDS[mechanism], "iterations": u.iterations,
                          "salt": salt, "salted_password": salted})
        removals = [{"name": d.user, "mechanism": _scram_mechanism_id(d.mechanism)} for d in deletions]
        if not items and not removals:
            return
        resp = await self._cluster.request(None, Api.ALTER_USER_SCRAM_CREDENTIALS,
                                           {"deletions": removals, "upsertions": items})
        for r in resp["results"]:
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"user {r['user']}")

    # -- delegation tokens (KIP-48) -------------------------------------------------------
    async def create_delegation_token(self, renewers: Iterable[str] = (), max_lifetime_ms: int = -1
                                      ) -> DelegationToken:
        """A delegation token owned by this client's principal (CreateDelegationToken). ``renewers``:
        ``User:<name>`` principals that may renew and expire it too; ``max_lifetime_ms`` at or below 0
        takes the broker's ``delegation.token.max.lifetime.ms`` (and nothing exceeds it). Raises
        DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a connection that may not ask (PLAINTEXT, SSL without a
        client certificate, authenticated by a token), DELEGATION_TOKEN_AUTH_DISABLED on brokers without
        a master key, INVALID_PRINCIPAL_TYPE for a renewer that is not a User."""
        body = {"renewers": [_principal_body(r, "renewer") for r in renewers], "max_lifetime_ms": int(max_lifetime_ms)}
        resp = await self._cluster.request(None, Api.CREATE_DELEGATION_TOKEN, body)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], None, context="CreateDelegationToken")
        return DelegationToken(resp["token_id"], bytes(resp["hmac"]), _principal_text(resp),
                               tuple(map(_principal_text, body["renewers"])),
                               resp["issue_timestamp_ms"], resp["expiry_timestamp_ms"], resp["max_timestamp_ms"])

    async def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1) -> int:
        """Renew the token whose HMAC is ``hmac`` (its owner or a renewer); returns its new expiry (epoch ms):
        ``min(its max, now + renew_period_ms)``, -1 meaning the broker's ``delegation.token.expiry.time.ms``.
        Raises DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_OWNER_MISMATCH, DELEGATION_TOKEN_EXPIRED."""
        return await self._token_change(Api.RENEW_DELEGATION_TOKEN, "RenewDelegationToken",
                                        {"hmac": bytes(hmac), "renew_period_ms": int(renew_period_ms)})

    async def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int = -1) -> int:
        """Expire the token whose HMAC is ``hmac``: negative (the default) at once, it is removed; else its
        expiry becomes ``now + expiry_time_period_ms`` (at most its max). Returns the expiry (epoch ms)."""
        return await self._token_change(Api.EXPIRE_DELEGATION_TOKEN, "ExpireDelegationToken",
                                        {"hmac": bytes(hmac), "expiry_time_period_ms": int(expiry_time_period_ms)})

    async def _token_change(self, api: int, name: str, body: dict) -> int:
        resp = await self._cluster.request(None, api, body)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], None, context=name)
        return resp["expiry_timestamp_ms"]

    async def describe_delegation_tokens(self, owners: Iterable[str] | None = None) -> list[DelegationToken]:
        """The tokens this client may see (its own, those it renews, those it has DESCRIBE on) among those
        ``owners`` own or renew (every one when None), oldest first, each with its HMAC."""
        body = {"owners": None if owners is None else [_principal_body(o, "owner") for o in owners]}
        resp = await self._cluster.request(None, Api.DESCRIBE_DELEGATION_TOKEN, body)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], None, context="DescribeDelegationToken")
        return [DelegationToken(t["token_id"], bytes(t["hmac"]), _principal_text(t),
                                tuple(map(_principal_text, t["renewers"])),
                                t["issue_timestamp"], t["expiry_timestamp"], t["max_timestamp"])
                for t in resp["tokens"]]

    # -- client quotas (KIP-546) ----------------------------------------------------------
    async def describe_client_quotas(self, components: Iterable[ClientQuotaFilterComponent] = (),
                                     strict: bool = False) -> dict[ClientQuotaEntity, dict[str, int | float]]:
        """The quotas of every entity the filter matches (DescribeClientQuotas), ``{entity: {key: value}}``
        sorted by IP address, user, then client id (no part first, then the default entity, then names), keys
        sorted; ``producer_byte_rate``, ``consumer_byte_rate`` and ``connection_creation_rate`` are ints,
        ``request_percentage`` and ``controller_mutation_rate`` floats. An entity matches when each component matches its part of that
        type; a type without a component matches any entity, or with ``strict`` only entities without that
        part. No components: every entity with quotas (``strict``: none). Raises INVALID_REQUEST for a type
        given twice or an ``ip`` component beside another, CLUSTER_AUTHORIZATION_FAILED without
        DESCRIBE_CONFIGS on the cluster."""
        components = list(components)
        for c in components:
            if not isinstance(c, ClientQuotaFilterComponent):
                raise ConfigError(f"a client quota filter is made of ClientQuotaFilterComponents, not {c!r}")
        body = {"components": [c._body() for c in components], "strict": strict}
        resp = await self._cluster.request(None, Api.DESCRIBE_CLIENT_QUOTAS, body)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], resp.get("error_message"), context="DescribeClientQuotas")
        out = {}
        for e in resp["entries"] or ():
            entity = _quota_entity_of(e["entity"])
            if entity is not None:
                out[entity] = {v["key"]: int(v["value"]) if v["key"] in WHOLE_QUOTA_KEYS and v["value"].is_integer()
                               else v["value"] for v in sorted(e["values"], key=lambda v: v["key"])}
        return dict(sorted(out.items(), key=lambda item: item[0]._sort_key()))

    async def alter_client_quotas(self, alterations: Mapping[ClientQuotaEntity, Mapping[str, float | None]], *,
                                  validate_only: bool = False) -> None:
        """Set and remove quotas (AlterClientQuotas): ``{entity: {key: value}}``, a value None removing the
        key; keys the mapping does not name are kept. Raises the first entity's error, naming it:
        INVALID_REQUEST for an unknown key, a byte rate that is not a whole number, a value that is not
        positive (that entity is left unchanged), CLUSTER_AUTHORIZATION_FAILED without ALTER_CONFIGS on the
        cluster; the other entities are changed all the same. ``validate_only``: checked, nothing written.
        A value that is not a number is a ConfigError before anything is sent."""
        entries = []
        for entity, changes in alterations.items():
            if not isinstance(entity, ClientQuotaEntity):
                raise ConfigError(f"client quotas are altered per ClientQuotaEntity, not {entity!r}")
            ops = []
            for key, value in changes.items():
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                    raise ConfigError(f"client quota {key} of {entity}: a number or None (remove), not {value!r}")
                ops.append({"key": key, "value": 0.0 if value is None else float(value), "remove": value is None})
            entries.append({"entity": entity._components(), "ops": ops})
        if not entries:
            return
        resp = await self._cluster.request(None, Api.ALTER_CLIENT_QUOTAS,
                                           {"entries": entries, "validate_only": validate_only})
        for entity, r in zip(alterations, resp["entries"]):
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"client quotas of {entity}")

    # -- ACLs (CreateAcls, DescribeAcls, DeleteAcls) ----------------------------------
    async def _acl_request(self, api: int, body: dict, needs_patterns: bool) -> dict:
        """Send an ACL request to any broker at the highest version both sides speak (0-2);
        ``needs_patterns``: a pattern type other than LITERAL is asked for, which v0 cannot carry."""
        conn = await self._cluster.any_connection()
        theirs = conn.broker_versions.get(api)
        if theirs is None or theirs[0] > 2:
            raise UnsupportedApiError(f"broker {conn.host}:{conn.port} serves no version 0-2 of {Api(api).name}")
        version = min(2, theirs[1])
        if needs_patterns and version < 1:
            raise UnsupportedApiError(f"broker {conn.host}:{conn.port} serves {Api(api).name} v0 only, "
                                      "which knows no pattern types but LITERAL")
        try:
            return await conn.request(api, body, version=version)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._cluster.request_update()
            raise

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Create ACLs (CreateAcls); one that exists already is no error. Raises the first binding's
        error, naming it: CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, INVALID_REQUEST for
        a binding the broker will not store (ANY in a field, a pattern type but LITERAL or PREFIXED, a
        principal not ``Type:name``, a cluster not named ``kafka-cluster``), SECURITY_DISABLED ("No
        Authorizer is configured on the broker") when the broker has no authorizer. The other
        bindings of the call are created all the same."""
        bindings = list(bindings)
        if not bindings:
            return
        creations = [{"resource_type": b.resource_type, "resource_name": b.name,
                      "resource_pattern_type": b.pattern_type, "principal": b.principal, "host": b.host,
                      "operation": b.operation, "permission_type": b.permission_type} for b in bindings]
        needs = any(b.pattern_type != PatternType.LITERAL for b in bindings)
        resp = await self._acl_request(Api.CREATE_ACLS, {"creations": creations}, needs)
        for binding, r in zip(bindings, resp["results"]):
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"CreateAcls of {binding}")

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs matching ``acl_filter`` (every ACL when None), sorted by resource type, pattern type,
        name, principal, host, operation. Raises CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the
        cluster, SECURITY_DISABLED without an authorizer."""
        acl_filter = acl_filter or AclBindingFilter()
        resp = await self._acl_request(Api.DESCRIBE_ACLS, acl_filter._body(),
                                       acl_filter.pattern_type != PatternType.LITERAL)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], resp.get("error_message"), context="DescribeAcls")
        found = {_binding_of(r, a) for r in resp["resources"] for a in r["acls"]}
        return sorted(found, key=_acl_sort_key)

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every ACL each filter matches (DeleteAcls); per filter, in order, the ACLs it deleted
        (sorted as :meth:`describe_acls`). Errors as :meth:`create_acls`, the first filter's or ACL's
        raised naming it; the ACLs of the other filters are deleted all the same."""
        filters = list(filters)
        if not filters:
            return []
        needs = any(f.pattern_type != PatternType.LITERAL for f in filters)
        resp = await self._acl_request(Api.DELETE_ACLS, {"filters": [f._body() for f in filters]}, needs)
        out = []
        for acl_filter, r in zip(filters, resp["filter_results"]):
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"DeleteAcls of {acl_filter}")
            deleted = []
            for m in r["matching_acls"]:
                binding = _binding_of(m, m)
                if m["error_code"]:
                    raise error_for_code(m["error_code"], m.get("error_message"), context=f"DeleteAcls of {binding}")
                deleted.append(binding)
            out.append(sorted(set(deleted), key=_acl_sort_key))
        return out

    # -- cluster and topics -------------------------------------------------------
    async def describe_cluster(self) -> ClusterDescription:
        await self._cluster.refresh_metadata(all_topics=False)
        c = self._cluster
        return ClusterDescription(c.cluster_id, c.controller_id, sorted(c.brokers.values(), key=lambda b: b.node_id))

    async def list_topics(self, internal: bool = False) -> list[str]:
        await self._cluster.refresh_metadata(all_topics=True)
        return sorted(t for t, tm in self._cluster.topics.items()
                      if internal or not (tm.is_internal or t.startswith("__")))

    async def describe_topics(self, topics: Iterable[str] | None = None) -> dict[str, TopicMetadata]:
        """Metadata of ``topics`` (all topics when None); an unknown name raises UNKNOWN_TOPIC_OR_PARTITION."""
        if topics is None:
            await self._cluster.refresh_metadata(all_topics=True)
            return dict(self._cluster.topics)
        topics = list(topics)
        await self._cluster.refresh_metadata(topics)
        missing = [t for t in topics if t not in self._cluster.topics]
        if missing:
            raise error_for_code(3, f"unknown topic(s): {', '.join(missing)}")
        return {t: self._cluster.topics[t] for t in topics}

    async def create_topics(self, topics: Iterable[NewTopic | str], *, timeout_ms: int = 30000,
                            validate_only: bool = False) -> None:
        items = []
        for t in topics:
            t = NewTopic(t) if isinstance(t, str) else t
            assignments = [{"partition_index": p, "broker_ids": list(b)}
                           for p, b in (t.replica_assignment or {}).items()]
            items.append({
                "name": t.name,
                "num_partitions": -1 if assignments else t.num_partitions,
                "replication_factor": -1 if assignments else t.replication_factor,
                "assignments": assignments,
                "configs": [{"name": k, "value": None if v is None else str(v)} for k, v in t.configs.items()],
            })
        resp = await self._cluster.request(await self._controller(), Api.CREATE_TOPICS,
                                           {"topics": items, "timeout_ms": timeout_ms, "validate_only": validate_only},
                                           timeout=timeout_ms / 1000 + 5)
        for r in resp["topics"]:
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"topic {r['name']}")
        self._cluster.request_update()

    async def delete_topics(self, topics: Iterable[str], *, timeout_ms: int = 30000) -> None:
        names = list(topics)
        resp = await self._cluster.request(await self._controller(), Api.DELETE_TOPICS,
                                           {"topic_names": names, "timeout_ms": timeout_ms},
                                           timeout=timeout_ms / 1000 + 5)
        for r in resp["responses"]:
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"topic {r['name']}")
        self._cluster.request_update()

    async def create_partitions(self, new_totals: Mapping[str, int], *, timeout_ms: int = 30000,
                                validate_only: bool = False) -> None:
        """Grow each topic to the given total partition count."""
        body = {"topics": [{"name": t, "count": n, "assignments": None} for t, n in new_totals.items()],
                "timeout_ms": timeout_ms, "validate_only": validate_only}
        resp = await self._cluster.request(await self._controller(), Api.CREATE_PARTITIONS, body,
                                           timeout=timeout_ms / 1000 + 5)
        for r in resp["results"]:
            if r["error_code"]:
                raise error_for_code(r["error_code"], r.get("error_message"), context=f"topic {r['name']}")
        self._cluster.request_update()

    # -- configs ----------------------------------------------------------------------
    def _node_for(self, res: ConfigResource) -> int | None:
        if res.type in ("broker", "broker_logger") and res.name not in ("", None):
            return int(res.name)
        return None

    async def describe_configs(self, resources: Iterable[ConfigResource], keys: Iterable[str] | None = None, *,
                               node: int | None = None) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of each resource; ``node`` asks that broker (a topic's configs as it applies them)."""
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        for res in resources:
            body = {"resources": [{"resource_type": res.type_code, "resource_name": res.name,
                                   "configuration_keys": None if keys is None else list(keys)}],
                    "include_synonyms": False, "include_documentation": False}
            resp = await self._cluster.request(self._node_for(res) if node is None else node, Api.DESCRIBE_CONFIGS,
                                               body)
            for r in resp["results"]:
                if r["error_code"]:
                    raise error_for_code(r["error_code"], r.get("error_message"),
                                         context=f"{res.type} {res.name}")
                entries = {}
                for c in r["configs"]:
                    source = CONFIG_SOURCES.get(c.get("config_source", -1), "UNKNOWN")
                    is_default = c.get("is_default", False) or source == "DEFAULT_CONFIG"
                    entries[c["name"]] = ConfigEntry(c["name"], c["value"], source, c["read_only"],
                                                     c["is_sensitive"], is_default)
                out[res] = entries
        return out

    async def list_config_resources(self, types: Iterable[str] | None = None) -> list[ConfigResourceListing]:
        """The resources of ``types`` (keys of :data:`RESOURCE_TYPES`; None or empty: every type the broker
        lists) that have configs, sorted by type and name: ListConfigResources v1 to any broker (KIP-1142;
        ``client_metrics`` lists the client metrics subscriptions). A broker serving only v0 (Kafka 3.7-4.0's
        ListClientMetricsResources) lists client metrics alone: any other ``types`` raise UnsupportedApiError
        before anything is sent. Raises UNSUPPORTED_VERSION (35) for a type the broker does not list,
        CLUSTER_AUTHORIZATION_FAILED without DESCRIBE_CONFIGS on the cluster."""
        codes = sorted({ConfigResource(t, "").type_code for t in types or ()})
        conn = await self._cluster.any_connection()
        theirs = conn.broker_versions.get(Api.LIST_CONFIG_RESOURCES)
        if theirs is None or theirs[0] > 1:
            raise UnsupportedApiError(f"broker {conn.host}:{conn.port} serves no version 0-1 of ListConfigResources")
        version = min(1, theirs[1])
        if version == 0 and codes != [RESOURCE_TYPES["client_metrics"]]:
            raise UnsupportedApiError(f"broker {conn.host}:{conn.port} serves ListConfigResources v0 only, "
                                      "which lists client_metrics resources alone")
        try:
            resp = await conn.request(Api.LIST_CONFIG_RESOURCES, {"resource_types": codes}, version=version)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._cluster.request_update()
            raise
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], None, context="ListConfigResources")
        found = {ConfigResourceListing(RESOURCE_TYPE_NAMES.get(r["resource_type"], str(r["resource_type"])),
                                       r["resource_name"]) for r in resp["config_resources"]}
        return sorted(found, key=lambda r: (r.type, r.name))

    async def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                            validate_only: bool = False) -> None:
        """Legacy AlterConfigs: replaces the whole dynamic config of each resource."""
        for res, entries in configs.items():
            body = {"resources": [{"resource_type": res.type_code, "resource_name": res.name,
                                   "configs": [{"name": k, "value": v} for k, v in entries.items()]}],
                    "validate_only": validate_only}
            resp = await self._cluster.request(self._node_for(res), Api.ALTER_CONFIGS, body)
            for r in resp["responses"]:
                if r["error_code"]:
                    raise error_for_code(r["error_code"], r.get("error_message"), context=f"{res.type} {res.name}")

    async def incremental_alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, Any]], *,
                                        validate_only: bool = False) -> None:
        """``{resource: {name: value}}``; a value None deletes the entry, a tuple
        ``(op, value)`` picks the operation ("set", "delete", "append", "subtract")."""
        for res, entries in configs.items():
            items = []
            for name, value in entries.items():
                if isinstance(value, tuple):
                    op, value = value
                else:
                    op = "delete" if value is None else "set"
                if op not in CONFIG_OPS:
                    raise ConfigError(f"unknown config operation {op!r}")
                items.append({"name": name, "config_operation": CONFIG_OPS[op],
                              "value": None if value is None else str(value)})
            body = {"resources": [{"resource_type": res.type_code, "resource_name": res.name, "configs": items}],
                    "validate_only": validate_only}
            resp = await self._cluster.request(self._node_for(res), Api.INCREMENTAL_ALTER_CONFIGS, body)
            for r in resp["responses"]:
                if r["error_code"]:
                    raise error_for_code(r["error_code"], r.get("error_message"), context=f"{res.type} {res.name}")

    # -- offsets and records --------------------------------------------------------------
    async def list_offsets(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: timestamp | -2 (earliest) | -1 (latest)}`` -> ``{tp: (offset, timestamp)}``."""
        from ._config import ConsumerConfig
        from ._fetcher import Fetcher, SubscriptionState

        cfg = ConsumerConfig(bootstrap_servers=self.config.bootstrap_servers,
                             request_timeout_ms=self.config.request_timeout_ms)
        fetcher = Fetcher(self._cluster, cfg, SubscriptionState(), None, None)
        return await fetcher.list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()})

    async def delete_records(self, before: Mapping[TopicPartition, int], *, timeout_ms: int = 30000
                             ) -> dict[TopicPartition, int]:
        """Delete records before the given offsets (-1: up to the high watermark);
        returns each partition's new low watermark."""
        tps = {TopicPartition(*tp): off for tp, off in before.items()}
        await self._cluster.ensure_topics({tp.topic for tp in tps})
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, off in tps.items():
            by_node.setdefault(self._cluster.leader_for(tp), {})[tp] = off
        out = {}
        for node, items in by_node.items():
            topics: dict[str, list] = {}
            for tp, off in items.items():
                topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": off})
            body = {"topics": [{"name": t, "partitions": ps} for t, ps in topics.items()], "timeout_ms": timeout_ms}
            resp = await self._cluster.request(node if node >= 0 else None, Api.DELETE_RECORDS, body)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise error_for_code(p["error_code"], context=f"{t['name']}-{p['partition_index']}")
                    out[TopicPartition(t["name"], p["partition_index"])] = p["low_watermark"]
        return out

    # -- groups ---------------------------------------------------------------------------
    async def _at_coordinator(self, group_id: str, call):
        """Run ``call(node)`` against the coordinator of ``group_id``, as Kafka's admin client
        does: while the coordinator is loading, unavailable or has moved (codes 14, 15, 16,
        from FindCoordinator or from the call), find it again and retry until
        ``request.timeout.ms`` has passed; any other error is raised at once."""
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        while True:
            node = await self._cluster.find_coordinator(group_id)
            try:
                return await call(node)
            except (CoordinatorNotAvailableError, NotCoordinatorError):
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    async def list_groups(self, *, types: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group of every broker, sorted by id; with ``types`` only groups of those types (of
        :data:`GROUP_TYPES`, case-insensitive), as ``kafka-consumer-groups.sh --list --type`` filters."""
        wanted = None if types is None else {t.lower() for t in types}
        await self._cluster.refresh_metadata()
        out: dict[str, GroupListing] = {}
        for node in list(self._cluster.brokers):
            resp = await self._cluster.request(node, Api.LIST_GROUPS, {"states_filter": [], "types_filter": []})
            if resp["error_code"]:
                raise error_for_code(resp["error_code"], context=f"ListGroups on broker {node}")
            for g in resp["groups"]:
                kind = g.get("group_type") or ("share" if g["protocol_type"] == "share" else "classic")
                if wanted is None or kind.lower() in wanted:
                    out[g["group_id"]] = GroupListing(g["group_id"], g["protocol_type"], g.get("group_state", ""),
                                                      kind.lower())
        return sorted(out.values(), key=lambda g: g.group_id)

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Each group as its coordinator describes it, as librdkafka and Kafka's admin client do:
        ConsumerGroupDescribe first (a group of the consumer rebalance protocol, KIP-848), and DescribeGroups
        when that answers GROUP_ID_NOT_FOUND (a classic group, or none) or the coordinator does not serve
        ConsumerGroupDescribe (see :class:`GroupDescription`). An answer without error but with a negative
        group epoch, which no consumer group has (tansu answers so for every group), falls back too."""
        out = {}
        for gid in group_ids:
            out[gid] = await self._at_coordinator(gid, lambda node, gid=gid: self._describe_any_group(node, gid))
        return out

    async def _describe_any_group(self, node: int, gid: str) -> GroupDescription:
        described = await self._describe_consumer_group(node, gid)
        return described if described is not None else await self._describe_group(node, gid)

    async def _describe_consumer_group(self, node: int, gid: str) -> GroupDescription | None:
        """``gid`` described by ConsumerGroupDescribe; None when that is no answer (see describe_groups)."""
        try:
            resp = await self._cluster.request(node, Api.CONSUMER_GROUP_DESCRIBE,
                                               {"group_ids": [gid], "include_authorized_operations": False})
        except UnsupportedApiError:
            return None
        for g in resp["groups"]:
            if g["group_id"] != gid:
                continue
            if g["error_code"] in (GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION):
                return None
            if g["error_code"]:
                raise error_for_code(g["error_code"], g.get("error_message"), context=f"group {gid}")
            if g["group_epoch"] < 0:  # no consumer group has one: a broker (tansu) answering for any group
                return None
            members = [MemberDescription(
                m["member_id"], m["client_id"], m["client_host"], m.get("instance_id"),
                self._named_partitions(m["assignment"]), m["member_epoch"],
                self._named_partitions(m["target_assignment"]), m.get("rack_id"),
                tuple(m.get("subscribed_topic_names") or ()), m.get("subscribed_topic_regex")) for m in g["members"]]
            return GroupDescription(gid, g["group_state"], "consumer", g["assignor_name"], members, node,
                                    "consumer", g["group_epoch"], g["assignment_epoch"], g["assignor_name"])
        raise ProtocolError(f"ConsumerGroupDescribe answered without group {gid}")

    def _named_partitions(self, assignment: dict | None) -> list[TopicPartition]:
        """A ConsumerGroupDescribe assignment as sorted partitions by topic name (the id's name in our metadata,
        or the id itself, when the broker named no topic: one deleted since)."""
        if not assignment:
            return []
        by_id = {str(tm.topic_id): name for name, tm in self._cluster.topics.items() if tm.topic_id is not None}
        return sorted(TopicPartition(t.get("topic_name") or by_id.get(str(t["topic_id"]), str(t["topic_id"])), p)
                      for t in assignment["topic_partitions"] for p in t["partitions"])

    async def _describe_group(self, node: int, gid: str) -> GroupDescription:
        resp = await self._cluster.request(node, Api.DESCRIBE_GROUPS,
                                           {"groups": [gid], "include_authorized_operations": False})
        for g in resp["groups"]:
            if g["error_code"]:
                raise error_for_code(g["error_code"], context=f"group {gid}")
            members = []
            for m in g["members"]:
                assignment = []
                if g["protocol_type"] == "consumer" and m["member_assignment"]:
                    try:
                        assignment = decode_assignment(m["member_assignment"]).partitions
                    except Exception:
                        assignment = []
                members.append(MemberDescription(m["member_id"], m["client_id"], m["client_host"],
                                                 m.get("group_instance_id"), assignment))
            return GroupDescription(g["group_id"], g["group_state"], g["protocol_type"],
                                    g["protocol_data"], members, node, "" if g["group_state"] == "Dead" else "classic")
        raise ProtocolError(f"DescribeGroups answered without group {gid}")

    async def describe_share_group(self, group_id: str) -> dict:
        """A share group (KIP-932) as ShareGroupDescribe answers it: state, epochs, members and their
        assignments (topic names), plus ``coordinator``; GROUP_ID_NOT_FOUND raised for an unknown group."""
        async def call(node: int) -> dict:
            resp = await self._cluster.request(node, Api.SHARE_GROUP_DESCRIBE,
                                               {"group_ids": [group_id], "include_authorized_operations": False})
            [g] = resp["groups"]
            if g["error_code"]:
                raise error_for_code(g["error_code"], context=f"share group {group_id}")
            return {**g, "coordinator": node}
        return await self._at_coordinator(group_id, call)

    async def share_group_offsets(self, group_id: str) -> dict[TopicPartition, tuple[int, int]]:
        """What a share group has consumed: partition -> (start offset, lag; -1 where unknown)."""
        async def call(node: int) -> dict[TopicPartition, tuple[int, int]]:
            resp = await self._cluster.request(node, Api.DESCRIBE_SHARE_GROUP_OFFSETS,
                                               {"groups": [{"group_id": group_id, "topics": None}]})
            [g] = resp["groups"]
            if g["error_code"]:
                raise error_for_code(g["error_code"], context=f"share group {group_id}")
            return {TopicPartition(t["topic_name"], p["partition_index"]): (p["start_offset"], p["lag"])
                    for t in g["topics"] for p in t["partitions"] if not p["error_code"]}
        return await self._at_coordinator(group_id, call)

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """New start offsets for an empty share group (AlterShareGroupOffsets, as ``kafka-share-groups.sh
        --reset-offsets --execute`` sends them; an unknown group is made). The first error is raised, naming its
        partition; NON_EMPTY_GROUP while the group has members."""
        by_topic: dict[str, list] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp[0], []).append({"partition_index": tp[1], "start_offset": int(offset)})
        body = {"group_id": group_id, "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}

        async def call(node: int) -> None:
            resp = await self._cluster.request(node, Api.ALTER_SHARE_GROUP_OFFSETS, body)
            if resp["error_code"]:
                raise error_for_code(resp["error_code"], context=f"share group {group_id}")
            for t in resp["responses"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise error_for_code(p["error_code"], context=f"share group {group_id} "
                                             f"{t['topic_name']}-{p['partition_index']}")
        await self._at_coordinator(group_id, call)

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> dict[str, Exception | None]:
        """Forget what an empty share group consumed of ``topics`` (DeleteShareGroupOffsets): topic -> None when
        deleted, else its error (UNKNOWN_TOPIC_OR_PARTITION also when nothing was stored of it). Group errors
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) are raised."""
        body = {"group_id": group_id, "topics": [{"topic_name": t} for t in dict.fromkeys(topics)]}

        async def call(node: int) -> dict[str, Exception | None]:
            resp = await self._cluster.request(node, Api.DELETE_SHARE_GROUP_OFFSETS, body)
            if resp["error_code"]:
                raise error_for_code(resp["error_code"], context=f"share group {group_id}")
            return {t["topic_name"]: error_for_code(t["error_code"], context=f"topic {t['topic_name']}")
                    if t["error_code"] else None for t in resp["responses"]}
        return await self._at_coordinator(group_id, call)

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        for gid in group_ids:
            await self._at_coordinator(gid, lambda node, gid=gid: self._delete_group(node, gid))

    async def _delete_group(self, node: int, gid: str) -> None:
        resp = await self._cluster.request(node, Api.DELETE_GROUPS, {"groups_names": [gid]})
        for r in resp["results"]:
            if r["error_code"]:
                raise error_for_code(r["error_code"], context=f"group {r['group_id']}")

    async def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group (all its partitions when ``partitions`` is None)."""
        return await self._at_coordinator(
            group_id, lambda node: self._fetch_group_offsets(node, group_id, partitions))

    async def _fetch_group_offsets(self, node: int, group_id: str, partitions: Iterable[TopicPartition] | None
                                   ) -> dict[TopicPartition, OffsetAndMetadata]:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        try:
            resp = await self._cluster.request(node, Api.OFFSET_FETCH,
                                               {"group_id": group_id, "topics": topics, "require_stable": False})
        except ProtocolError:
            if topics is not None:
                raise
            # Some brokers answer "all partitions" (topics null) with a malformed
            # response; ask for every partition of every topic instead.
            await self._cluster.refresh_metadata(all_topics=True)
            topics = [{"name": t, "partition_indexes": sorted(tm.partitions)}
                      for t, tm in self._cluster.topics.items()]
            resp = await self._cluster.request(node, Api.OFFSET_FETCH,
                                               {"group_id": group_id, "topics": topics, "require_stable": False})
        if resp.get("error_code"):
            raise error_for_code(resp["error_code"], context=f"group {group_id}")
        out = {}
        for t in resp["topics"]:
            for p in t["partitions"]:
                if p["error_code"] and p["error_code"] != 3:
                    raise error_for_code(p["error_code"], context=f"group {group_id}")
                if p["committed_offset"] >= 0:
                    out[TopicPartition(t["name"], p["partition_index"])] = OffsetAndMetadata(
                        p["committed_offset"], p.get("metadata") or "", p.get("committed_leader_epoch", -1))
        return out

    async def group_lag(self, group_id: str) -> dict[TopicPartition, PartitionLag]:
        """Per partition with a committed offset: committed offset, end offset and lag."""
        committed = await self.list_group_offsets(group_id)
        if not committed:
            return {}
        ends = await self.list_offsets({tp: -1 for tp in committed})
        return {tp: PartitionLag(om.offset, ends[tp][0], max(ends[tp][0] - om.offset, 0))
                for tp, om in committed.items()}

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
                                  ) -> None:
        """Commit offsets (with their metadata when given as OffsetAndMetadata) for a group that
        has no active members (as kafka-consumer-groups --reset-offsets does); an active group
        answers UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS."""
        by_topic: dict[str, list] = {}
        for tp, off in offsets.items():
            om = off if isinstance(off, OffsetAndMetadata) else OffsetAndMetadata(int(off))
            by_topic.setdefault(tp[0], []).append(
                {"partition_index": tp[1], "committed_offset": om.offset, "committed_metadata": om.metadata or ""})
        body = {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        async def commit(node: int) -> None:
            resp = await self._cluster.request(node, Api.OFFSET_COMMIT, body)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise error_for_code(p["error_code"],
                                             context=f"group {group_id} {t['name']}-{p['partition_index']}")
        await self._at_coordinator(group_id, commit)

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete a group's committed offsets of ``partitions`` (OffsetDelete, as ``kafka-consumer-groups.sh
        --delete-offsets`` does). The coordinator refuses (raised, naming the partition) those of topics the
        group's members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and, for a group that has members and is not a
        consumer group, all of them (NON_EMPTY_GROUP); an unknown group is GROUP_ID_NOT_FOUND. A partition
        without a committed offset is no error."""
        by_topic: dict[str, list] = {}
        for tp in partitions:
            by_topic.setdefault(tp[0], []).append({"partition_index": tp[1]})
        body = {"group_id": group_id, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        async def delete(node: int) -> None:
            resp = await self._cluster.request(node, Api.OFFSET_DELETE, body)
            if resp["error_code"]:
                raise error_for_code(resp["error_code"], context=f"group {group_id}")
            for t in resp["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise error_for_code(p["error_code"],
                                             context=f"group {group_id} {t['name']}-{p['partition_index']}")
        await self._at_coordinator(group_id, delete)


class Admin:
    """Blocking admin client: the methods of :class:`AsyncAdmin`, without ``await``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = AsyncAdmin(config, **kwargs)
        self._thread = LoopThread("kafkapy-admin")
        try:
            self._thread.run(self._core.start())
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._core.close())
        finally:
            self._thread.stop()

    def __getattr__(self, name: str):
        attr = getattr(self._core, name)
        if name.startswith("_") or not asyncio.iscoroutinefunction(attr):
            return attr

        def call(*args, **kwargs):
            return self._thread.run(attr(*args, **kwargs))

        call.__name__ = name
        call.__doc__ = attr.__doc__
        return call
