"""ACLs across a cluster: a change made through one broker, or written into ZooKeeper by Kafka's own
tools, is in force on every broker (each watches Kafka's change notifications)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.cluster.conftest import wait_until

pytestmark = pytest.mark.clients

EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


def _listed(broker) -> set[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    return {str(b) for b in admin.describe_acls(EVERYTHING).result(timeout=10)}


def test_acl_changes_reach_every_broker(cluster_factory):
    # the harness and the brokers talk PLAINTEXT: User:ANONYMOUS is the operator and the brokers here
    cluster = cluster_factory(2, props={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                        "super.users": "User:ANONYMOUS"})
    one, two = cluster.broker(1), cluster.broker(2)
    binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin = AdminClient({"bootstrap.servers": one.bootstrap, "log_level": 0})
    for future in admin.create_acls([binding]).values():
        future.result(timeout=15)
    assert _listed(one) == {str(binding)}  # the broker that made it, at once
    wait_until(lambda: _listed(two) == {str(binding)}, "broker 2 to see the new ACL")

    # what kafka-acls.sh --authorizer-properties zookeeper.connect=... writes: the node, then the notification
    zk = cluster.zk
    zk.create("/kafka-acl-extended/prefixed/Group/team-",
              json.dumps({"version": 1, "acls": [{"principal": "User:bob", "permissionType": "Deny",
                                                  "operation": "Read", "host": "*"}]}).encode(), makepath=True)
    zk.create("/kafka-acl-extended-changes/acl_changes_",
              json.dumps({"version": 1, "resourceType": "Group", "name": "team-", "patternType": "PREFIXED"}).encode(),
              sequence=True, makepath=True)
    external = AclBinding(ResourceType.GROUP, "team-", ResourcePatternType.PREFIXED, "User:bob", "*",
                          AclOperation.READ, AclPermissionType.DENY)
    for broker in (one, two):
        wait_until(lambda: _listed(broker) == {str(binding), str(external)}, "the brokers to see Kafka's tool's ACL")

    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)])
    assert [str(b) for b in list(deleted.values())[0].result(timeout=10)] == [str(binding)]
    wait_until(lambda: _listed(two) == {str(external)}, "broker 2 to drop the deleted ACL")
    assert zk.exists("/kafka-acl/Topic/orders") is None
