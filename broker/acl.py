"""ACLs and the authorizer, as Kafka 2.7's ``kafka.security.authorizer.AclAuthorizer`` keeps and applies them.

Enabled by ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` (the
older ``kafka.security.auth.SimpleAclAuthorizer`` names the same); empty (the
default) means no authorizer: every request is allowed and the ACL APIs answer
SECURITY_DISABLED.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an access
control entry (principal ``User:<name>`` or ``User:*``, host or ``*``,
operation, ALLOW or DENY). A request by ``principal`` from ``host`` for
``operation`` on a resource is decided, as Kafka decides it
(:meth:`Authorizer.authorize`):

1. a principal of ``super.users`` (``User:admin;User:broker``) is allowed;
2. the ACLs that apply are those on the resource's own name, on the wildcard
   name ``*`` (LITERAL), and on every PREFIXED name the resource name starts
   with;
3. any DENY among them that matches the principal (or ``User:*``), the host
   (or ``*``) and the operation (or ALL) refuses;
4. else any matching ALLOW allows, where an ALLOW of READ, WRITE, DELETE or
   ALTER also allows DESCRIBE, and ALTER_CONFIGS also allows DESCRIBE_CONFIGS;
5. else, with no ACL at all on the resource, ``allow.everyone.if.no.acl.found``
   decides (default false); otherwise refused.

Principals: ``User:<name>`` after SASL; on an SSL listener with a client
certificate, ``User:`` and the certificate's subject as RFC 2253 writes it
(``User:CN=alice,OU=eng,O=Example``, as Kafka's default principal builder);
``User:ANONYMOUS`` otherwise. Requests the broker makes to itself have no
connection and are allowed.

ACLs are stored where Kafka 2.7 stores them, so both read the same nodes:
LITERAL ones at ``/kafka-acl/<Topic|Group|Cluster|TransactionalId|DelegationToken>/<name>``,
PREFIXED ones at ``/kafka-acl-extended/prefixed/<type>/<name>``, each
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``;
a change is announced by a sequential node, ``/kafka-acl-changes/acl_changes_N``
(data ``Topic:orders``) for LITERAL, ``/kafka-acl-extended-changes/acl_changes_N``
(``{"version":1,"resourceType":"Topic","name":"orders","patternType":"PREFIXED"}``)
for PREFIXED; every broker watches both and reloads that resource. The cluster
resource is named ``kafka-cluster``.

Which operation each API needs is :data:`API_CHECKS` (Kafka's KafkaApis).
"""

from __future__ import annotations

import enum
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Iterable


log = logging.getLogger("broker.acl")


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: The one name of the CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"

#: The authorizer class names that select this authorizer.
AUTHORIZER_CLASSES = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")

#: Which operations an ALLOW of an operation also grants (Kafka's implied operations).
IMPLIED = {
    AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                            AclOperation.ALTER),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
}


class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a certificate's subject."""


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules`` (KIP-371): comma-separated rules, the first that applies wins.
    ``DEFAULT`` keeps the subject; ``RULE:<regex>/<replacement>/[L|U]`` applies when the regex matches the
    whole subject and gives the replacement (``$1`` for a group), lower- or upper-cased with ``L``/``U``.
    A subject no rule applies to is refused (the client's connection is closed)."""

    def __init__(self, rules: list[tuple]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, text: str) -> "PrincipalMapper":
        rules, pos, text = [], 0, text.strip() or "DEFAULT"
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None or match.end() == pos:
                raise ValueError(f"cannot read a rule at {text[pos:pos + 30]!r} (DEFAULT or RULE:regex/replacement/[LU])")
            pos = match.end()
            if match.group(1):
                rules.append(("DEFAULT",))
                continue
            pattern = match.group(2).replace("\\/", "/")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"RULE:{pattern}: {exc}") from None
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3).replace("\\/", "/"))
            rules.append(("RULE", compiled, replacement, match.group(4)))
        return cls(rules)

    def map(self, subject: str) -> str:
        for rule in self.rules:
            if rule[0] == "DEFAULT":
                return subject
            _kind, pattern, replacement, case = rule
            if pattern.fullmatch(subject):
                name = pattern.sub(replacement, subject)
                return name.lower() if case == "L" else name.upper() if case == "U" else name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {subject!r}")


DEFAULT_MAPPER = PrincipalMapper([("DEFAULT",)])


def principal_of_certificate(cert: dict | None, mapper: PrincipalMapper = DEFAULT_MAPPER) -> str | None:
    """``User:`` and the subject of a peer certificate (``ssl.SSLSocket.getpeercert()``) in RFC 2253's
    order and escaping (most specific first: ``CN=alice,OU=eng,O=Example,C=DE``) as ``mapper`` maps it,
    or None without one; :class:`NoMatchingRule` when no rule applies."""
    if not cert or not cert.get("subject"):
        return None
    names = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
             "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET", "domainComponent": "DC",
             "userId": "UID", "emailAddress": "EMAILADDRESS"}
    parts = []
    for rdn in reversed(cert["subject"]):
        parts.append("+".join(f"{names.get(key, key)}={_escape_dn(value)}" for key, value in rdn))
    return "User:" + mapper.map(",".join(parts))


def _escape_dn(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;=' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


#: What each API asks of the authorizer, as Kafka 2.7's KafkaApis does (error codes: TOPIC 29, GROUP 30,
#: CLUSTER 31, TRANSACTIONAL_ID 53 ``_AUTHORIZATION_FAILED``). Every API the broker serves is listed here
#: (a test holds the registry to it), so none is served unchecked.
API_CHECKS: dict[str, str] = {
    "ApiVersions": "none",
    "SaslHandshake": "none",
    "SaslAuthenticate": "none",
    "Produce": "WRITE TransactionalId when transactional (else the whole request fails); IDEMPOTENT_WRITE Cluster "
               "when idempotent (else every partition CLUSTER_AUTHORIZATION_FAILED); WRITE Topic per topic",
    "Fetch": "CLUSTER_ACTION Cluster for a follower (replica_id >= 0); READ Topic per partition for a consumer",
    "ListOffsets": "DESCRIBE Topic per partition",
    "Metadata": "DESCRIBE Topic per topic (all topics: the others left out); auto-creation needs CREATE on Cluster "
                "or the Topic",
    "OffsetCommit": "READ Group (else every partition GROUP_AUTHORIZATION_FAILED); READ Topic per partition",
    "OffsetFetch": "DESCRIBE Group; DESCRIBE Topic per partition (all partitions: the others left out)",
    "FindCoordinator": "DESCRIBE Group, or DESCRIBE TransactionalId",
    "JoinGroup": "READ Group",
    "Heartbeat": "READ Group",
    "LeaveGroup": "READ Group",
    "SyncGroup": "READ Group",
    "DescribeGroups": "DESCRIBE Group per group",
    "ListGroups": "DESCRIBE Cluster for every group, else the groups with DESCRIBE Group",
    "DeleteGroups": "DELETE Group per group",
    "OffsetDelete": "DELETE Group; READ Topic per partition",
    "CreateTopics": "CREATE Cluster, or CREATE Topic per topic",
    "DeleteTopics": "DELETE Topic per topic (TOPIC_AUTHORIZATION_FAILED without it, existing or not, as 2.7)",
    "CreatePartitions": "ALTER Topic per topic",
    "DeleteRecords": "DELETE Topic per partition",
    "DescribeConfigs": "DESCRIBE_CONFIGS Topic, or Cluster for a broker resource",
    "AlterConfigs": "ALTER_CONFIGS Topic, or Cluster for a broker resource",
    "IncrementalAlterConfigs": "ALTER_CONFIGS Topic, or Cluster for a broker resource",
    "DescribeLogDirs": "DESCRIBE Cluster (else an empty answer)",
    "AlterReplicaLogDirs": "ALTER Cluster (else every partition CLUSTER_AUTHORIZATION_FAILED)",
    "DescribeCluster": "none (DESCRIBE Cluster only for the authorized operations asked for)",
    "InitProducerId": "WRITE TransactionalId when transactional, else IDEMPOTENT_WRITE Cluster",
    "AddPartitionsToTxn": "WRITE TransactionalId; WRITE Topic per partition",
    "AddOffsetsToTxn": "WRITE TransactionalId; READ Group",
    "EndTxn": "WRITE TransactionalId",
    "TxnOffsetCommit": "WRITE TransactionalId; READ Group; READ Topic per partition",
    "DescribeTransactions": "DESCRIBE TransactionalId per id",
    "ListTransactions": "DESCRIBE TransactionalId per id listed (the others left out)",
    "DescribeProducers": "READ Topic per partition",
    "WriteTxnMarkers": "CLUSTER_ACTION Cluster",
    "LeaderAndIsr": "CLUSTER_ACTION Cluster",
    "StopReplica": "CLUSTER_ACTION Cluster",
    "UpdateMetadata": "CLUSTER_ACTION Cluster",
    "ControlledShutdown": "CLUSTER_ACTION Cluster",
    "ElectLeaders": "ALTER Cluster",
    "AlterPartitionReassignments": "ALTER Cluster",
    "ListPartitionReassignments": "DESCRIBE Cluster",
    "OffsetForLeaderEpoch": "CLUSTER_ACTION Cluster for a follower (replica_id >= 0), else DESCRIBE Topic",
    "DescribeAcls": "DESCRIBE Cluster",
    "CreateAcls": "ALTER Cluster",
    "DeleteAcls": "ALTER Cluster",
    "DescribeUserScramCredentials": "DESCRIBE Cluster",
    "AlterUserScramCredentials": "ALTER Cluster",
}


# -- ACLs and their storage ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Resource:
    """A resource pattern: type, name and LITERAL or PREFIXED."""

    type: ResourceType
    name: str
    pattern: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class Entry:
    """An access control entry of a resource pattern."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission


#: Names in the stored JSON and paths (Kafka's ``ResourceType.toString``/``AclOperation`` spellings).
_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
               ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken"}
_TYPES_BY_NAME = {v: k for k, v in _TYPE_NAMES.items()}
_OPERATION_NAMES = {AclOperation.ALL: "All", AclOperation.READ: "Read", AclOperation.WRITE: "Write",
                    AclOperation.CREATE: "Create", AclOperation.DELETE: "Delete", AclOperation.ALTER: "Alter",
                    AclOperation.DESCRIBE: "Describe", AclOperation.CLUSTER_ACTION: "ClusterAction",
                    AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs", AclOperation.ALTER_CONFIGS: "AlterConfigs",
                    AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite"}
_OPERATIONS_BY_NAME = {v: k for k, v in _OPERATION_NAMES.items()}
_PERMISSION_NAMES = {AclPermission.ALLOW: "Allow", AclPermission.DENY: "Deny"}
_PERMISSIONS_BY_NAME = {v: k for k, v in _PERMISSION_NAMES.items()}

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: Change notifications older than this are deleted when a new one is written (Kafka's 15 minutes).
CHANGE_EXPIRY_MS = 15 * 60 * 1000


def resource_path(resource: Resource) -> str:
    root = LITERAL_ROOT if resource.pattern == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{_TYPE_NAMES[resource.type]}/{resource.name}"


def encode_entries(entries: Iterable[Entry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": _PERMISSION_NAMES[e.permission],
             "operation": _OPERATION_NAMES[e.operation], "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> set[Entry]:
    found = set()
    for acl in json.loads(data or b"{}").get("acls", []):
        try:
            found.add(Entry(acl["principal"], acl["host"], _OPERATIONS_BY_NAME[acl["operation"]],
                            _PERMISSIONS_BY_NAME[acl["permissionType"]]))
        except KeyError:
            continue  # an entry of a newer Kafka we do not know: never grants anything here
    return found


def storable_name_problem(resource: Resource) -> str | None:
    """Why a resource name cannot be an ACL node (None when it can)."""
    if not resource.name:
        return "the resource name must not be empty"
    if "/" in resource.name or resource.name in (".", ".."):
        return f"the resource name {resource.name!r} cannot be stored"
    if resource.type == ResourceType.CLUSTER and resource.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    return None


class AclStore:
    """Blocking reads and writes of the ACL nodes in the metadata store (``store``: :mod:`broker.cluster.store`)."""

    def __init__(self, store) -> None:
        self.store = store

    def load(self) -> dict[Resource, set[Entry]]:
        """Every ACL."""
        acls: dict[Resource, set[Entry]] = {}
        for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            if self.store.exists(root) is None:
                continue
            for type_name in self.store.get_children(root):
                rtype = _TYPES_BY_NAME.get(type_name)
                if rtype is None:
                    continue
                for name in self.store.get_children(f"{root}/{type_name}"):
                    resource = Resource(rtype, name, pattern)
                    entries = self.read(resource)
                    if entries:
                        acls[resource] = entries
        return acls

    def read(self, resource: Resource) -> set[Entry]:
        found = self.store.get_or_none(resource_path(resource))
        return set() if found is None else decode_entries(found[0])

    def change(self, resource: Resource, add: set[Entry] = frozenset(), remove: set[Entry] = frozenset()) -> set[Entry]:
        """Add and remove entries of one resource (compare-and-set, retried), announce it; the entries after."""
        from broker.cluster.store import BadVersionError, NodeExistsError, NoNodeError

        path = resource_path(resource)
        while True:
            found = self.store.get_or_none(path)
            current = set() if found is None else decode_entries(found[0])
            updated = (current | set(add)) - set(remove)
            if updated == current:
                return current
            try:
                if found is None:
                    self.store.create(path, encode_entries(updated), make_parents=True)
                elif updated:
                    self.store.set(path, encode_entries(updated), found[1].version)
                else:
                    self.store.delete(path, found[1].version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            break
        self._announce(resource)
        return updated

    def _announce(self, resource: Resource) -> None:
        from broker.cluster.store import NoNodeError

        if resource.pattern == PatternType.LITERAL:
            root, data = LITERAL_CHANGES, f"{_TYPE_NAMES[resource.type]}:{resource.name}".encode()
        else:
            root = EXTENDED_CHANGES
            data = json.dumps({"version": 1, "resourceType": _TYPE_NAMES[resource.type], "name": resource.name,
                               "patternType": resource.pattern.name}, separators=(",", ":")).encode()
        self.store.create(f"{root}/{CHANGE_PREFIX}", data, sequence=True, make_parents=True)
        oldest_kept = time.time() * 1000 - CHANGE_EXPIRY_MS
        for name in self.store.get_children(root):
            stat = self.store.exists(f"{root}/{name}")
            if stat is not None and stat.ctime_ms < oldest_kept:
                try:
                    self.store.delete(f"{root}/{name}")
                except NoNodeError:
                    pass

    def changed(self, root: str, data: bytes) -> Resource | None:
        """The resource a change notification names."""
        try:
            if root == LITERAL_CHANGES:
                type_name, _, name = data.decode().partition(":")
                return Resource(_TYPES_BY_NAME[type_name], name, PatternType.LITERAL)
            doc = json.loads(data)
            return Resource(_TYPES_BY_NAME[doc["resourceType"]], doc["name"], PatternType[doc["patternType"]])
        except (KeyError, ValueError, UnicodeDecodeError):
            return None


# -- the authorizer ----------------------------------------------------------------------------

class Authorizer:
    """The ACLs of the cluster in memory, and the decisions made from them (see the module docstring).

    :meth:`authorize` runs on the event loop and reads memory only; the ACLs are loaded with
    :meth:`load` (blocking) and replaced whole on the loop (:meth:`replace`), so a decision never sees
    half a change. Decisions are cached per (principal, host, operation, resource) until the ACLs change.
    """

    CACHE_LIMIT = 100_000

    def __init__(self, store, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.acls = AclStore(store)
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._literal: dict[tuple[ResourceType, str], frozenset[Entry]] = {}
        self._prefixed: dict[ResourceType, list[tuple[str, frozenset[Entry]]]] = {}
        self._all: dict[Resource, frozenset[Entry]] = {}
        self._decisions: dict[tuple, bool] = {}
        #: Counts the changes made here (:meth:`update`): a reload read before one must not undo it
        self.generation = 0

    def load(self) -> dict[Resource, set[Entry]]:
        """Blocking: every stored ACL (give the result to :meth:`replace` on the loop)."""
        return self.acls.load()

    def replace(self, acls: dict[Resource, set[Entry]]) -> None:
        self._all = {r: frozenset(e) for r, e in acls.items() if e}
        literal: dict[tuple[ResourceType, str], frozenset[Entry]] = {}
        prefixed: dict[ResourceType, list[tuple[str, frozenset[Entry]]]] = {}
        for resource, entries in self._all.items():
            if resource.pattern == PatternType.LITERAL:
                literal[(resource.type, resource.name)] = entries
            else:
                prefixed.setdefault(resource.type, []).append((resource.name, entries))
        self._literal, self._prefixed = literal, prefixed
        self._decisions = {}

    def update(self, resource: Resource, entries: set[Entry]) -> None:
        """One resource's entries changed (on the loop)."""
        self.generation += 1
        acls = dict(self._all)
        if entries:
            acls[resource] = frozenset(entries)
        else:
            acls.pop(resource, None)
        self.replace(acls)

    def bindings(self) -> dict[Resource, frozenset[Entry]]:
        return self._all

    def authorize(self, principal: str, host: str, operation: AclOperation, rtype: ResourceType, name: str) -> bool:
        key = (principal, host, operation, rtype, name)
        decided = self._decisions.get(key)
        if decided is None:
            decided = self._decide(principal, host, operation, rtype, name)
            if len(self._decisions) >= self.CACHE_LIMIT:
                self._decisions = {}
            self._decisions[key] = decided
        return decided

    def _decide(self, principal: str, host: str, operation: AclOperation, rtype: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        applicable: list[Entry] = []
        for key in ((rtype, name), (rtype, WILDCARD)):
            applicable.extend(self._literal.get(key, ()))
        for prefix, entries in self._prefixed.get(rtype, ()):
            if name.startswith(prefix):
                applicable.extend(entries)
        if not applicable:
            return self.allow_if_no_acl
        principals, hosts = (principal, WILDCARD_PRINCIPAL), (host, WILDCARD)
        matching = [e for e in applicable if e.principal in principals and e.host in hosts]
        if any(e.permission == AclPermission.DENY and e.operation in (operation, AclOperation.ALL) for e in matching):
            return False
        granting = IMPLIED.get(operation, (operation,))
        return any(e.permission == AclPermission.ALLOW and (e.operation == AclOperation.ALL or e.operation in granting)
                   for e in matching)


class AclWatcher:
    """Keeps a broker's :class:`Authorizer` in step with the store: every change notification (of any
    broker, or of Kafka's tools) reloads the ACLs, on the loop. Blocking work runs in ``run_blocking``."""

    def __init__(self, authorizer: Authorizer, loop, run_blocking) -> None:
        self.authorizer, self.loop, self.run_blocking = authorizer, loop, run_blocking
        self._pending = False
        self._again = False  # a notification came while a reload was under way: reload once more after it
        self.stopped = False

    async def start(self) -> None:
        """Load every ACL and watch for changes (before the listeners take requests)."""
        self.authorizer.replace(await self.run_blocking(self._read_and_watch))

    def _read_and_watch(self) -> dict[Resource, set[Entry]]:
        store = self.authorizer.acls.store
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            try:
                store.create(root, b"", make_parents=True)
            except Exception:  # noqa: BLE001 - exists already (NodeExistsError)
                pass
            store.get_children(root, self._changed)
        return self.authorizer.load()

    def _changed(self, _event) -> None:  # the store's thread
        try:
            self.loop.call_soon_threadsafe(self._reload)
        except RuntimeError:  # the loop is closed: the broker is stopping
            pass

    def _reload(self) -> None:
        if self.stopped:
            return
        if self._pending:  # what it reads may predate this notification's change
            self._again = True
            return
        self._pending = True
        self.loop.create_task(self._do_reload())

    async def _do_reload(self) -> None:
        generation = self.authorizer.generation
        try:
            acls = await self.run_blocking(self._read_and_watch)
        except Exception as exc:  # noqa: BLE001 - the store unreachable: keep the ACLs we have, try again
            log.warning("cannot read the ACLs (%s); again in 1 s", exc)
            self._pending = self._again = False
            self.loop.call_later(1.0, self._reload)
            return
        self._pending = False
        if self.stopped:
            return
        if self.authorizer.generation == generation:  # else a change made here may be missing from the read
            self.authorizer.replace(acls)
        elif not self._again:
            self._again = True
        if self._again:  # a change announced, or made here, while this read ran: read once more
            self._again = False
            self._reload()


#: What a broker refused by another for want of authorization is told to do.
INTER_BROKER_HINT = ("refused for want of authorization: put this broker's inter-broker principal in super.users "
                     "(or grant it CLUSTER_ACTION on the cluster)")


class RefusalWarning:
    """A WARNING when another broker refuses this one's requests for want of authorization, at most one per
    ``interval_s`` per link (a misconfigured cluster must be loud, not flood the log)."""

    def __init__(self, logger: logging.Logger, interval_s: float = 60.0) -> None:
        self.logger, self.interval_s = logger, interval_s
        self._last = float("-inf")

    def refused(self, what: str) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self._last = now
            self.logger.warning("%s %s", what, INTER_BROKER_HINT)
