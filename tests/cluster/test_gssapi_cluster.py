"""A cluster whose brokers authenticate to each other with Kerberos (``sasl.mechanism.inter.broker.protocol=GSSAPI``),
each broker with its own principal (``kafka/127.0.0.<id>@KAFKA.TEST``) and keytab, against a real MIT KDC
(:mod:`tests.kdc`).

Each broker has the harness's PLAINTEXT listener and ``INTERNAL``, a SASL_PLAINTEXT listener on its own
loopback address that is also the inter-broker one. The ACL authorizer is on with only ``User:kafka`` (what
every broker's principal maps to under the DEFAULT rule) and the PLAINTEXT listener's operator as super
users: a follower that did not authenticate as a broker could not fetch, and would never join the ISR.
"""

from __future__ import annotations

import subprocess

import pytest

from tests import kdc as kdc_mod
from tests.cluster.conftest import failover_keeps_every_record
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients


def _jaas(keytab, principal: str) -> str:
    return (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
            f'keyTab="{keytab}" principal="{principal}";')


@pytest.fixture
def realm(tmp_path):
    missing = kdc_mod.available()
    assert missing is None, f"the GSSAPI tests need a KDC: {missing} (./dev test installs it)"
    kdc = kdc_mod.Kdc(tmp_path / "kdc").start()
    kdc.use_here()
    yield kdc
    kdc.stop()


def _address_is_loopback(address: str) -> None:
    route = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True, timeout=10).stdout
    assert " dev lo " in route, f"{address} is not routed to the loopback device: {route!r}"


def test_replication_and_failover_with_kerberos_between_brokers(cluster_factory, realm, tmp_path):
    ids = (1, 2, 3)
    hosts = {b: f"127.0.0.{b}" for b in ids}
    for host in hosts.values():
        _address_is_loopback(host)
    ports = {b: free_port() for b in ids}
    per_broker = {}
    for b in ids:
        keytab = tmp_path / f"broker{b}.keytab"
        principal = realm.add_principal(f"kafka/{hosts[b]}", keytab)
        per_broker[b] = {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://{hosts[b]}:{ports[b]}",
                         "listener.name.internal.gssapi.sasl.jaas.config": _jaas(keytab, principal)}
    cluster = cluster_factory(3, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.mechanism.inter.broker.protocol": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:kafka;User:ANONYMOUS",
        "min.insync.replicas": 2,
    }, per_broker=per_broker)
    cluster.create_topic("krb-replicated", partitions=1, replication_factor=3)
    cluster.wait_for_leader("krb-replicated", 0)
    cluster.wait_for_isr("krb-replicated", 0, [1, 2, 3])  # both followers authenticated to the leader as User:kafka

    plaintext = {"bootstrap.servers": ",".join(cluster.broker(b).bootstrap for b in ids), "log_level": 0}
    leader = failover_keeps_every_record(cluster, "krb-replicated", plaintext)
    cluster.start(leader)
    cluster.wait_for_isr("krb-replicated", 0, [1, 2, 3])  # the restarted broker authenticates and catches up

    # a Kerberos client reaches the leader by its advertised INTERNAL address, with that broker's principal,
    # and is User:alice there: the ACL made for that principal lets it read
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    from kafka import KafkaConsumer, TopicPartition

    admin = AdminClient(plaintext)
    for op in (AclOperation.READ, AclOperation.DESCRIBE):
        binding = AclBinding(ResourceType.TOPIC, "krb-replicated", ResourcePatternType.LITERAL, "User:alice", "*", op,
                             AclPermissionType.ALLOW)
        admin.create_acls([binding])[binding].result(timeout=30)

    user_keytab = tmp_path / "alice.keytab"
    realm.add_principal("alice", user_keytab)
    realm.kinit("alice", user_keytab, tmp_path / "alice.ccache")
    realm.set_ccache_here(tmp_path / "alice.ccache")
    consumer = KafkaConsumer(bootstrap_servers=f"{hosts[1]}:{ports[1]}", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka", enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=15000)
    try:
        consumer.assign([TopicPartition("krb-replicated", 0)])
        count = sum(1 for _ in consumer)  # from the partition's leader, wherever it is now
    finally:
        consumer.close()
    assert count >= 2000
    for b in ids:
        assert "SASL authentication failed" not in cluster.broker(b).stderr_text()
