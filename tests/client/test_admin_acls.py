"""The admin client's ACL calls (``create_acls``, ``describe_acls``, ``delete_acls``) against our broker
with the ACL authorizer, a SASL PLAIN listener and super user ``admin``: round trips, PREFIXED and
MATCH, the same listing as librdkafka's, refusals as the client's error classes, and a broker without
an authorizer (SECURITY_DISABLED)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclBindingFilter as RdFilter
from confluent_kafka.admin import AclOperation as RdOp
from confluent_kafka.admin import AclPermissionType as RdPermission
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ResourcePatternType as RdPattern
from confluent_kafka.admin import ResourceType as RdType

from broker.client import (AclBinding, AclBindingFilter, AclOperation, AclPermission, Admin, PatternType,
                           ResourceType, errors)
from tests.security import acl_broker

pytestmark = pytest.mark.clients



def _admin(broker, user: str) -> Admin:
    return Admin(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                 sasl_mechanism="PLAIN", sasl_username=user, sasl_password=f"{user}-secret")


def _rd_listing(broker) -> list[tuple]:
    rd = AdminClient({"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret",
                      "log_level": 0})
    everything = RdFilter(RdType.ANY, None, RdPattern.ANY, None, None, RdOp.ANY, RdPermission.ANY)
    return sorted((b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host, b.operation.value,
                   b.permission_type.value) for b in rd.describe_acls(everything).result(timeout=15))


def _tuples(bindings) -> list[tuple]:
    return sorted((int(b.resource_type), b.name, int(b.pattern_type), b.principal, b.host, int(b.operation),
                   int(b.permission_type)) for b in bindings)


def test_acls_created_described_and_deleted(broker_factory):
    broker = acl_broker(broker_factory)
    bindings = [
        AclBinding("topic", "orders", "literal", "User:alice", "*", "Read", "allow"),
        AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:bob", "10.0.0.1", AclOperation.WRITE,
                   AclPermission.DENY),
        AclBinding("Topic", "ord", "PREFIXED", "User:*", "*", "describe", "ALLOW"),
        AclBinding("group", "billing", "literal", "User:alice", "*", "read", "allow"),
        AclBinding("cluster", "kafka-cluster", "literal", "User:alice", "*", "idempotent-write", "allow"),
        AclBinding("transactional-id", "tx-", "prefixed", "User:alice", "*", "Write", "allow"),
    ]
    with _admin(broker, "admin") as admin:
        assert admin.describe_acls() == []
        admin.create_acls(bindings)
        admin.create_acls(bindings[:2])  # again: nothing doubles
        listed = admin.describe_acls()
        assert _tuples(listed) == _tuples(bindings) == _rd_listing(broker)
        assert [b.resource_type for b in listed] == sorted(b.resource_type for b in listed)

        # filters: by principal, by pattern type, MATCH on a name
        assert _tuples(admin.describe_acls(AclBindingFilter(principal="User:alice"))) == _tuples(
            [bindings[0], bindings[3], bindings[4], bindings[5]])
        assert _tuples(admin.describe_acls(AclBindingFilter(pattern_type="prefixed"))) == _tuples(
            [bindings[2], bindings[5]])
        applies = admin.describe_acls(AclBindingFilter("topic", "orders", "match"))
        assert _tuples(applies) == _tuples(bindings[:3])
        assert admin.describe_acls(AclBindingFilter("topic", "orders", "literal", operation="alter")) == []

        # delete: per filter, what it deleted
        deleted = admin.delete_acls([AclBindingFilter("topic", "orders", "literal", principal="User:bob"),
                                     AclBindingFilter("group", None, "any"),
                                     AclBindingFilter("topic", "nothing-here", "literal")])
        assert [_tuples(d) for d in deleted] == [_tuples([bindings[1]]), _tuples([bindings[3]]), []]
        assert _tuples(admin.describe_acls()) == _tuples([bindings[0], bindings[2], bindings[4], bindings[5]])
        assert admin.delete_acls([b.to_filter() for b in bindings[4:]]) == [[bindings[4]], [bindings[5]]]
        assert _tuples(admin.describe_acls()) == _tuples([bindings[0], bindings[2]]) == _rd_listing(broker)
        assert admin.delete_acls([]) == [] and admin.create_acls([]) is None


def test_refusals_are_the_clients_error_classes(broker_factory):
    broker = acl_broker(broker_factory)
    binding = AclBinding("topic", "t", "literal", "User:alice", "*", "all", "allow")
    with _admin(broker, "alice") as alice:
        for call in (lambda: alice.create_acls([binding]), lambda: alice.describe_acls(),
                     lambda: alice.delete_acls([AclBindingFilter()])):
            with pytest.raises(errors.BrokerResponseError) as refused:
                call()
            assert refused.value.error_name == "CLUSTER_AUTHORIZATION_FAILED" and not refused.value.retriable
    with _admin(broker, "admin") as admin:
        # the broker refuses what it cannot store, naming the binding; the others are made
        bad = AclBinding("cluster", "my-cluster", "literal", "User:alice", "*", "alter", "allow")
        with pytest.raises(errors.BrokerResponseError) as refused:
            admin.create_acls([binding, bad])
        assert refused.value.error_name == "INVALID_REQUEST"
        assert "only valid name for the CLUSTER resource is kafka-cluster" in str(refused.value)
        assert "CLUSTER 'my-cluster'" in refused.value.context
        assert admin.describe_acls() == [binding]
        with pytest.raises(errors.BrokerResponseError, match="INVALID_REQUEST .*User:alice.*not Type:name|"
                                                             "INVALID_REQUEST .*alice.*not Type:name"):
            admin.create_acls([AclBinding("topic", "t", "literal", "alice", "*", "read", "allow")])
        with pytest.raises(errors.BrokerResponseError, match="INVALID_REQUEST"):
            admin.create_acls([AclBinding("topic", "t", "match", "User:alice", "*", "read", "allow")])
    # names the client does not know are ConfigErrors, before anything is sent
    with pytest.raises(errors.ConfigError, match="unknown ACL operation 'reed'"):
        AclBinding("topic", "t", "literal", "User:a", "*", "reed", "allow")
    with pytest.raises(errors.ConfigError, match="unknown ACL resource type 'queue'"):
        AclBindingFilter("queue")


def test_a_broker_without_an_authorizer_says_so(broker):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        for call in (lambda: admin.describe_acls(),
                     lambda: admin.create_acls([AclBinding("topic", "t", "literal", "User:a", "*", "read", "allow")]),
                     lambda: admin.delete_acls([AclBindingFilter()])):
            with pytest.raises(errors.BrokerResponseError) as refused:
                call()
            assert refused.value.error_name == "SECURITY_DISABLED" and refused.value.error_code == 54
            assert "No Authorizer is configured on the broker" in str(refused.value)
