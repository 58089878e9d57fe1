"""A cluster whose brokers authenticate to each other with SASL/SCRAM (``inter.broker.listener.name`` a
SASL_PLAINTEXT listener, ``sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512``), and clients that reach it
with SASL.

Each broker has a PLAINTEXT listener (the harness's) and ``INTERNAL``, a SASL_PLAINTEXT listener that is
also the inter-broker one. The brokers' own SCRAM user is written into ZooKeeper before they start, where
Kafka's ``kafka-configs.sh --zookeeper`` writes it; a follower that could not authenticate to its leader
would never join the ISR.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kazoo.client import KazooClient

from broker.sasl import ScramCredential
from tests.cluster.conftest import WAIT_S, failover_keeps_every_record, wait_until
from tests.cluster.test_tls_cluster import _established_ports
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="broker" password="broker-secret";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret";')


def _write_user(zk_connect: str, user: str, password: str, mechanism: str) -> None:
    """What ``kafka-configs.sh --zookeeper ... --alter --add-config 'SCRAM-SHA-512=[password=...]'
    --entity-type users --entity-name USER`` writes."""
    credential = ScramCredential.from_password(mechanism, password, 4096)
    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=30)
    try:
        zk.create(f"/config/users/{user}", json.dumps({"version": 1, "config": {mechanism: credential.encode()}}).encode(),
                  makepath=True)
    finally:
        zk.stop()
        zk.close()


def test_replication_and_failover_with_scram_between_brokers(cluster_factory, zk_connect):
    _write_user(zk_connect, "broker", "broker-secret", "SCRAM-SHA-512")
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    cluster = cluster_factory(3, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
        "min.insync.replicas": 2,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port}"}
                   for b, port in ports.items()})
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    admin_conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.username": "admin", "sasl.password": "admin-secret", "log_level": 0}
    admin = AdminClient(admin_conf)
    metadata = admin.list_topics(timeout=10)
    assert sorted((b.id, b.port) for b in metadata.brokers.values()) == sorted(ports.items())
    # a SCRAM user made through one broker is known to every broker at once (the store is shared)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "writer", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"writer-secret")])
    futures["writer"].result(timeout=WAIT_S)
    for port in ports.values():
        one = {**admin_conf, "bootstrap.servers": f"127.0.0.1:{port}", "sasl.mechanism": "SCRAM-SHA-512",
               "sasl.username": "writer", "sasl.password": "writer-secret"}
        assert AdminClient(one).list_topics(timeout=10).brokers
    writer = {**admin_conf, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "writer",
              "sasl.password": "writer-secret"}

    admin.create_topics([NewTopic("sasl-replicated", 1, 3)], request_timeout=30)["sasl-replicated"].result(WAIT_S)
    cluster.wait_for_leader("sasl-replicated", 0)
    cluster.wait_for_isr("sasl-replicated", 0, [1, 2, 3])  # both followers authenticated to the leader
    leader = cluster.leader("sasl-replicated", 0)
    for follower in set(ports) - {leader}:
        # waited for: a fetcher between a failed request and its reconnect has no connection for its backoff
        def connected(pid=cluster.broker(follower).pid):
            found = _established_ports(pid)
            return found if ports[leader] in found else None

        peers = wait_until(connected, f"broker {follower}'s fetch connection to the leader's INTERNAL port")
        assert cluster.broker(leader).port not in peers, peers

    leader = failover_keeps_every_record(cluster, "sasl-replicated", writer)
    cluster.start(leader)
    cluster.wait_for_isr("sasl-replicated", 0, [1, 2, 3])  # the restarted broker authenticates and catches up
    for broker_id in ports:
        assert "SASL authentication failed" not in cluster.broker(broker_id).stderr_text()


def test_a_broker_with_the_wrong_inter_broker_password_stays_out_of_the_isr(cluster_factory, zk_connect):
    _write_user(zk_connect, "broker", "broker-secret", "SCRAM-SHA-512")
    ports = {broker_id: free_port() for broker_id in (1, 2)}
    common = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "replica.lag.time.max.ms": 2000,
    }
    wrong = SCRAM_JAAS.replace("broker-secret", "not-it")
    cluster = cluster_factory(2, props=common, per_broker={
        1: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{ports[1]}"},
        2: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{ports[2]}",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": wrong}})
    assert cluster.controller_id() == 1  # the first to start; it reaches broker 2 with the right password
    cluster.create_topic("guarded", assignment={0: [1, 2]}, replication_factor=None)
    cluster.wait_for_leader("guarded", 0)
    # broker 2's fetcher is refused: the leader takes it out of the ISR once replica.lag.time.max.ms passes
    cluster.wait_for_isr("guarded", 0, [1])
    time.sleep(3)
    assert cluster.partition_state("guarded", 0)["isr"] == [1]
    assert "SASL authentication failed (SCRAM-SHA-512)" in cluster.broker(1).stderr_text()
    assert "not-it" not in cluster.broker(1).stderr_text() + cluster.broker(2).stderr_text()
    # clients of broker 1 are served all the same
    producer = Producer({"bootstrap.servers": cluster.broker(1).bootstrap, "acks": 1})
    producer.produce("guarded", b"x")
    assert producer.flush(30) == 0
