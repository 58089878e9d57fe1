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
import ipaddress
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


def principal_of_certificate(der: bytes | None, mapper: PrincipalMapper = DEFAULT_MAPPER) -> str | None:
    """``User:`` and the subject of a peer certificate (DER, ``getpeercert(binary_form=True)``) as Java's
    ``X500Principal.getName()`` writes it, RFC 2253 (most specific first: ``CN=alice,OU=eng,O=Example,C=DE``;
    attributes Java has no keyword for as their OID and the hex of their DER value,
    ``1.2.840.113549.1.9.1=#1605...``), as ``mapper`` maps it; None without a certificate;
    :class:`NoMatchingRule` when no rule applies."""
    if not der:
        return None
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der).subject
    parts = []
    for rdn in reversed(subject.rdns):
        values = []
        for attribute in rdn:
            keyword = _JAVA_KEYWORDS.get(attribute.oid.dotted_string)
            if keyword is not None:
                values.append(f"{keyword}={_escape_dn(str(attribute.value))}")
            else:
                values.append(f"{attribute.oid.dotted_string}=#{_der_of(attribute).hex()}")
        parts.append("+".join(values))
    if not parts:
        return None
    return "User:" + mapper.map(",".join(parts))


#: The attribute keywords Java's RFC 2253 form writes (RFC 2253's table); others are written as OIDs.
_JAVA_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
                  "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
                  "0.9.2342.19200300.100.1.1": "UID"}
#: How an ASN.1 string type's value is encoded (by its universal tag); the rest are one byte a character.
_STRING_ENCODINGS = {12: "utf-8", 30: "utf-16-be", 28: "utf-32-be"}


def _der_of(attribute) -> bytes:
    """The DER of an attribute's value (tag, length, content), as Java prints it after ``#``."""
    tag = attribute._type.value  # the ASN.1 string type the certificate used
    content = str(attribute.value).encode(_STRING_ENCODINGS.get(tag, "latin-1"))
    size = len(content)
    length = bytes([size]) if size < 128 else bytes([0x80 | ((size.bit_length() + 7) // 8)]) + size.to_bytes(
        (size.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + content


def _escape_dn(value: str) -> str:
    r"""Java's RFC 2253 escaping: ``,=+<>#;"\`` anywhere, and a leading or trailing space."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',=+<>#;"\\' or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def java_host(address: str) -> str:
    """A client's IP address as Java's ``InetAddress.getHostAddress()`` writes it, which ACL hosts are
    matched against in Kafka: IPv6 in eight groups without leading zeros (``0:0:0:0:0:0:0:1``), an
    IPv4-mapped address as IPv4."""
    bare, percent, scope = address.partition("%")
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return address
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return ":".join(format(int(group, 16), "x") for group in ip.exploded.split(":")) + percent + scope


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
    "DescribeConfigs": "DESCRIBE_CONFIGS Topic, Group for a group, or Cluster for a broker or client metrics resource",
    "AlterConfigs": "ALTER_CONFIGS Topic, Group for a group, or Cluster for a broker or client metrics resource",
    "IncrementalAlterConfigs": "ALTER_CONFIGS Topic, Group for a group, or Cluster for a broker or client metrics "
                               "resource",
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
    "DescribeClientQuotas": "DESCRIBE_CONFIGS Cluster",
    "AlterClientQuotas": "ALTER_CONFIGS Cluster",
    "CreateDelegationToken": "none (a SASL or certificate principal, not a token's: broker.tokens)",
    "RenewDelegationToken": "none (the token's owner or a renewer)",
    "ExpireDelegationToken": "none (the token's owner or a renewer)",
    "DescribeDelegationToken": "DESCRIBE DelegationToken, for tokens the requester neither owns nor renews",
    "ConsumerGroupHeartbeat": "READ Group, DESCRIBE Topic (each subscribed by name; a regex gets only the "
                              "topics the principal may DESCRIBE)",
    "ConsumerGroupDescribe": "DESCRIBE Group",
    "ShareGroupHeartbeat": "READ Group, DESCRIBE Topic (each subscribed)",
    "ShareGroupDescribe": "DESCRIBE Group",
    "ShareFetch": "READ Group, READ Topic",
    "ShareAcknowledge": "READ Group, READ Topic",
    "DescribeShareGroupOffsets": "DESCRIBE Group, DESCRIBE Topic",
    "AlterShareGroupOffsets": "READ Group; READ Topic per topic",
    "DeleteShareGroupOffsets": "DELETE Group; READ Topic per topic",
    "GetTelemetrySubscriptions": "none (a client may always say what it measures, as in Kafka)",
    "PushTelemetry": "none",
    "ListConfigResources": "DESCRIBE_CONFIGS Cluster",
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


def decode_entries(data: bytes, where: str = "") -> set[Entry]:
    """A resource node's entries; a node that is not Kafka's JSON holds none (logged), as Kafka reads it:
    one bad node never stops the others being read."""
    try:
        doc = json.loads(data or b"{}")
        acls = doc.get("acls", []) if isinstance(doc, dict) else None
        if not isinstance(acls, list):
            raise ValueError("no list of acls")
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("ACL node %s is not Kafka's JSON (%s): read as holding no ACL", where or "?", exc)
        return set()
    found = set()
    for acl in acls:
        try:
            found.add(Entry(acl["principal"], acl["host"], _OPERATIONS_BY_NAME[acl["operation"]],
                            _PERMISSIONS_BY_NAME[acl["permissionType"]]))
        except (KeyError, TypeError):
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
        path = resource_path(resource)
        found = self.store.get_or_none(path)
        return set() if found is None else decode_entries(found[0], path)

    def change(self, resource: Resource, add: set[Entry] = frozenset(), remove: set[Entry] = frozenset()) -> set[Entry]:
        """Add and remove entries of one resource; the entries after (see :meth:`change_many`)."""
        return self.change_many({resource: (set(add), set(remove))})[resource]

    #: Resources written per atomic batch (a ZooKeeper multi must stay well under its 1 MB request limit).
    BATCH = 200

    def change_many(self, changes: dict[Resource, tuple[set[Entry], set[Entry]]]) -> dict[Resource, set[Entry]]:
        """Add and remove entries of several resources: each batch of :data:`BATCH` resources is written in one
        atomic ``multi`` (compare-and-set on each node, retried when another writer came between) with its
        change notifications; the entries of each resource after."""
        from broker.cluster.store import BadVersionError, Create, Delete, NodeExistsError, NoNodeError, SetData

        result: dict[Resource, set[Entry]] = {}
        items = list(changes.items())
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self.store.ensure_path(root)
        for start in range(0, len(items), self.BATCH):
            batch = items[start:start + self.BATCH]
            for parent in {resource_path(r).rsplit("/", 1)[0] for r, _ in batch}:
                self.store.ensure_path(parent)
            while True:
                ops, after = [], {}
                for resource, (add, remove) in batch:
                    path = resource_path(resource)
                    found = self.store.get_or_none(path)
                    current = set() if found is None else decode_entries(found[0], path)
                    updated = (current | add) - remove
                    after[resource] = updated
                    if updated == current:
                        continue
                    if found is None:
                        ops.append(Create(path, encode_entries(updated)))
                    elif updated:
                        ops.append(SetData(path, encode_entries(updated), found[1].version))
                    else:
                        ops.append(Delete(path, found[1].version))
                    ops.append(self._announcement(resource))
                if not ops:
                    break
                try:
                    self.store.multi(ops)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
                break
            result.update(after)
        return result

    @staticmethod
    def _announcement(resource: Resource):
        """The change notification of a resource: Kafka's format for its pattern type."""
        from broker.cluster.store import Create

        if resource.pattern == PatternType.LITERAL:
            root, data = LITERAL_CHANGES, f"{_TYPE_NAMES[resource.type]}:{resource.name}".encode()
        else:
            root = EXTENDED_CHANGES
            data = json.dumps({"version": 1, "resourceType": _TYPE_NAMES[resource.type], "name": resource.name,
                               "patternType": resource.pattern.name}, separators=(",", ":")).encode()
        return Create(f"{root}/{CHANGE_PREFIX}", data, sequence=True)

    def purge_changes(self) -> None:
        """Delete the change notifications older than :data:`CHANGE_EXPIRY_MS` (once per request that
        changed ACLs, not once per change: a request of a thousand ACLs reads the notifications once)."""
        from broker.cluster.store import NoNodeError

        oldest_kept = time.time() * 1000 - CHANGE_EXPIRY_MS
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            if self.store.exists(root) is None:
                continue
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
        # per type: the lengths of its prefixes, longest first, and prefix -> entries (a lookup costs one
        # dict probe per distinct prefix length, not one per PREFIXED ACL)
        self._prefixed: dict[ResourceType, tuple[list[int], dict[str, frozenset[Entry]]]] = {}
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
        by_prefix: dict[ResourceType, dict[str, frozenset[Entry]]] = {}
        for resource, entries in self._all.items():
            if resource.pattern == PatternType.LITERAL:
                literal[(resource.type, resource.name)] = entries
            else:
                by_prefix.setdefault(resource.type, {})[resource.name] = entries
        self._literal = literal
        self._prefixed = {rtype: (sorted({len(p) for p in prefixes}, reverse=True), prefixes)
                          for rtype, prefixes in by_prefix.items()}
        self._decisions = {}

    def update(self, resource: Resource, entries: set[Entry]) -> None:
        """One resource's entries changed here (on the loop)."""
        self.generation += 1
        self.update_many({resource: entries})

    def update_many(self, changed: dict[Resource, set[Entry]]) -> None:
        """Some resources' entries, as read from the store (on the loop)."""
        acls = dict(self._all)
        for resource, entries in changed.items():
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
        indexed = self._prefixed.get(rtype)
        if indexed is not None:
            lengths, prefixes = indexed
            for length in lengths:
                if length <= len(name):
                    entries = prefixes.get(name[:length])
                    if entries:
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
    """Keeps a broker's :class:`Authorizer` in step with the store, as Kafka's brokers do: every change
    notification (of any broker, or of Kafka's tools) newer than the last one read names a resource, and
    that resource alone is read again; a lost ZooKeeper session reads everything again. On the loop;
    blocking work runs in ``run_blocking``."""

    RETRY_S = 1.0

    def __init__(self, authorizer: Authorizer, loop, run_blocking) -> None:
        self.authorizer, self.loop, self.run_blocking = authorizer, loop, run_blocking
        self._pending = False
        self._again = False  # a notification came while a read was under way: read once more after it
        self._full = False  # the next read is of everything (a session event)
        self._seen: dict[str, int] = {}  # per change root: the newest notification read
        self._dirty: set[Resource] = set()  # resources read while a change was made here: read again
        self._retry = None
        self.stopped = False

    async def start(self) -> None:
        """Load every ACL and watch for changes (before the listeners take requests)."""
        acls = await self.run_blocking(self._read, True, set())
        self.authorizer.replace(acls)

    def _read(self, full: bool, dirty: set[Resource]) -> dict[Resource, set[Entry]]:
        """Blocking: the notifications newer than those seen (watching for more), then every ACL when
        ``full``, else the resources they (and ``dirty``) name."""
        store, acls = self.authorizer.acls.store, self.authorizer.acls
        changed = set(dirty)
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            try:
                store.create(root, b"", make_parents=True)
            except Exception:  # noqa: BLE001 - exists already (NodeExistsError)
                pass
            seen = self._seen.get(root, -1)
            for name in sorted(store.get_children(root, self._changed)):
                try:
                    sequence = int(name[len(CHANGE_PREFIX):])
                except ValueError:
                    continue
                if sequence <= seen:
                    continue
                found = None if full else store.get_or_none(f"{root}/{name}")
                resource = None if found is None else acls.changed(root, found[0])
                if resource is not None:
                    changed.add(resource)
                self._seen[root] = max(self._seen.get(root, -1), sequence)
        if full:
            return acls.load()
        return {resource: acls.read(resource) for resource in changed}

    def _changed(self, event) -> None:  # the store's thread
        full = getattr(event, "type", None) == "session"
        try:
            self.loop.call_soon_threadsafe(self._reload, full)
        except RuntimeError:  # the loop is closed: the broker is stopping
            pass

    def _reload(self, full: bool = False) -> None:
        self._full = self._full or full
        if self.stopped:
            return
        if self._pending:  # what it reads may predate this notification's change
            self._again = True
            return
        self._pending = True
        self.loop.create_task(self._do_reload())

    async def _do_reload(self) -> None:
        generation = self.authorizer.generation
        full, self._full = self._full, False
        dirty, self._dirty = self._dirty, set()
        try:
            acls = await self.run_blocking(self._read, full, dirty)
        except Exception as exc:  # noqa: BLE001 - the store unreachable: keep the ACLs we have, try again
            self._pending = self._again = False
            self._full = True  # what was missed meanwhile is not known: read everything
            if self._retry is None:  # one timer, however many notifications fail meanwhile
                log.warning("cannot read the ACLs (%s); again in %g s", exc, self.RETRY_S)
                self._retry = self.loop.call_later(self.RETRY_S, self._retry_now)
            return
        self._pending = False
        if self.stopped:
            return
        if self.authorizer.generation == generation:
            if full:
                self.authorizer.replace(acls)
            elif acls:
                self.authorizer.update_many(acls)
        else:  # a change made here meanwhile may be missing from what was read: read these again
            self._dirty |= set(acls) if not full else set()
            self._full = self._full or full
            self._again = True
        if self._again:
            self._again = False
            self._reload()

    def _retry_now(self) -> None:
        self._retry = None
        self._reload(True)


#: What a broker refused by another for want of authorization is told to do.
INTER_BROKER_HINT = ("refused for want of authorization: put this broker's inter-broker principal in super.users "
                     "(or grant it CLUSTER_ACTION on the cluster)")


class RefusalWarning:
    """WARNINGs about refusals for want of authorization, at most one per ``interval_s`` per key (a
    misconfigured cluster, or a client sending broker-only requests by the thousand, must be loud, not
    flood the log). One per link: :meth:`refused`; per host and principal: :meth:`warn` with that key."""

    MAX_KEYS = 1000

    def __init__(self, logger: logging.Logger, interval_s: float = 60.0) -> None:
        self.logger, self.interval_s = logger, interval_s
        self._last: dict = {}

    def warn(self, key, message: str, *args) -> None:
        now = time.monotonic()
        if now - self._last.get(key, float("-inf")) >= self.interval_s:
            if len(self._last) >= self.MAX_KEYS:
                self._last.clear()
            self._last[key] = now
            self.logger.warning(message, *args)

    def refused(self, what: str) -> None:
        """This broker's request was refused by another (``what`` names the link)."""
        self.warn(None, "%s %s", what, INTER_BROKER_HINT)
