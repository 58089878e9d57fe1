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
from typing import Iterable


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


def principal_of_certificate(cert: dict | None) -> str | None:
    """``User:`` and the subject of a peer certificate (``ssl.SSLSocket.getpeercert()``) in RFC 2253's
    order and escaping (most specific first: ``CN=alice,OU=eng,O=Example,C=DE``), or None without one."""
    if not cert or not cert.get("subject"):
        return None
    names = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
             "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET", "domainComponent": "DC",
             "userId": "UID", "emailAddress": "EMAILADDRESS"}
    parts = []
    for rdn in reversed(cert["subject"]):
        parts.append("+".join(f"{names.get(key, key)}={_escape_dn(value)}" for key, value in rdn))
    return "User:" + ",".join(parts)


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
    "DeleteTopics": "DELETE Topic per topic (UNKNOWN_TOPIC_OR_PARTITION without DESCRIBE)",
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
