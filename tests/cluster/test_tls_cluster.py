"""A cluster whose brokers talk to each other over TLS (``inter.broker.listener.name`` an SSL
listener, with client certificates required), and clients that reach it over TLS.

Each broker has a PLAINTEXT listener (the harness's) and ``INTERNAL``, an SSL listener that is also
the inter-broker one: followers fetch, the controller sends its requests and the transaction
coordinator its markers over it. A follower that could not connect there would never rejoin the ISR.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import WAIT_S
from tests.pki import make_pki
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients


def test_replication_and_failover_over_tls_between_brokers(cluster_factory, tmp_path):
    pki = make_pki(tmp_path)
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    cluster = cluster_factory(3, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(pki["server"]),
        "ssl.truststore.location": str(pki["ca"]),
        "ssl.client.auth": "required",
        "min.insync.replicas": 2,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port}"}
                   for b, port in ports.items()})
    tls = {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports.values()), "security.protocol": "SSL",
           "ssl.ca.location": str(pki["ca"]), "ssl.certificate.location": str(pki["client_cert"]),
           "ssl.key.location": str(pki["client_key"]), "log_level": 0}

    admin = AdminClient(tls)
    metadata = admin.list_topics(timeout=10)
    assert sorted((b.id, b.port) for b in metadata.brokers.values()) == sorted(ports.items())
    admin.create_topics([NewTopic("tls-replicated", 1, 3)], request_timeout=30)["tls-replicated"].result(WAIT_S)
    cluster.wait_for_leader("tls-replicated", 0)
    cluster.wait_for_isr("tls-replicated", 0, [1, 2, 3])  # both followers fetch over TLS

    producer = Producer({**tls, "acks": "all", "enable.idempotence": True})
    values = [b"rec-%d" % i for i in range(2000)]
    for value in values:
        producer.produce("tls-replicated", value)
    assert producer.flush(60) == 0
    cluster.wait_for_isr("tls-replicated", 0, [1, 2, 3])

    leader = cluster.leader("tls-replicated", 0)
    cluster.kill(leader)
    cluster.wait_for_leader("tls-replicated", 0, not_in=(leader,))  # the controller reached the others over TLS
    # assigned, not subscribed: with one of three brokers down __consumer_offsets (replication factor 3)
    # could not be created for a group
    consumer = Consumer({**tls, "group.id": "tls-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition("tls-replicated", 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == values  # every acknowledged record, from a follower that got it over TLS

    cluster.start(leader)
    cluster.wait_for_isr("tls-replicated", 0, [1, 2, 3])  # the restarted broker catches up over TLS
