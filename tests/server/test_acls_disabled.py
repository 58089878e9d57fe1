"""The ACL APIs answered as by a Kafka broker without an authorizer: SECURITY_DISABLED, not a closed connection.

Real admin clients (librdkafka's and kafka-python's) ask; the broker answers Kafka's error
(54, "No Authorizer is configured on the broker") for the whole DescribeAcls and for each
creation and deletion filter, each client reports it as it does for Kafka, and the connection
stays usable afterwards (before, the broker closed it on the unknown api key).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern
from kafka.admin import ResourceType as KPResourceType
from kafka.errors import SecurityDisabledError

WAIT_S = 30  # a guard against a hang


def _error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=WAIT_S)
    return info.value.args[0]


def test_librdkafka_admin_hears_security_disabled_for_every_acl_call(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)

    # librdkafka reads DescribeAcls's top-level error but hands the application the (empty) list only.
    assert admin.describe_acls(any_filter, request_timeout=WAIT_S).result(timeout=WAIT_S) == []

    (created,) = admin.create_acls([binding], request_timeout=WAIT_S).values()
    error = _error_of(created)
    assert error.code() == KafkaError.SECURITY_DISABLED
    assert error.str() == "No Authorizer is configured on the broker"

    (deleted,) = admin.delete_acls([any_filter], request_timeout=WAIT_S).values()
    assert _error_of(deleted).code() == KafkaError.SECURITY_DISABLED

    # The broker kept serving: metadata through the same client still works.
    assert admin.list_topics(timeout=WAIT_S).brokers


def test_kafka_python_admin_hears_security_disabled(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        pattern = ResourcePattern(KPResourceType.TOPIC, "orders")
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                          permission_type=ACLPermissionType.ANY, resource_pattern=pattern))
        result = admin.create_acls([ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
                                        permission_type=ACLPermissionType.ALLOW, resource_pattern=pattern)])
        assert not result["succeeded"]
        assert result["failed"] == [SecurityDisabledError]  # kafka-python lists the error class
        assert admin.list_topics() is not None  # the connection is still served
    finally:
        admin.close()
