"""Connection limits in a cluster: clients that take every connection a broker allows do not stop
replication or the controller, because the inter-broker listener is exempt from ``max.connections``
(KIP-402): a broker's connection over the limit is accepted and an idle client connection is closed
to make room.

Each broker has PLAINTEXT (clients) and INTERNAL (inter-broker) listeners and ``max.connections=8``,
which counts the connections of both. Idle sockets fill every broker's client listener up to it; then a follower is SIGKILLed and restarted. Its
fetcher must connect to the leader, whose client listener is full: it rejoins the ISR, and a producer
that keeps producing with acks=all loses nothing. The ISR is read from ZooKeeper (the harness's
Metadata requests would wait at the full client listener).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.cluster.conftest import WAIT_S, wait_until
from tests.server.test_quotas import metric, scrape
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients


def _held(broker) -> float:
    """Connections the broker holds on both listeners (max.connections counts them all)."""
    text = scrape(broker)
    return sum(metric(text, "kafkapy_listener_connections", listener=name) or 0 for name in ("PLAINTEXT", "INTERNAL"))


def test_clients_at_max_connections_do_not_stop_replication(cluster_factory):
    internal = {b: free_port() for b in (1, 2, 3)}
    cluster = cluster_factory(3, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "max.connections": 8, "min.insync.replicas": 2,
        "replica.lag.time.max.ms": 10000,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port}"}
                   for b, port in internal.items()})
    cluster.create_topic("limited", 1, 3)
    cluster.wait_for_isr("limited", 0, [1, 2, 3])
    leader = cluster.leader("limited", 0)
    follower = next(b for b in cluster.ids if b != leader)

    conf = {"bootstrap.servers": cluster.broker(leader).bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "log_level": 0}
    producer = Producer(conf)
    sent, errors, stop = [], [], threading.Event()

    def keep_producing():  # a record every 20 ms: the producer's connection is never the least active
        i = 0
        while not stop.is_set():
            value = b"rec-%d" % i
            producer.produce("limited", value, partition=0,
                             on_delivery=lambda err, msg: (errors if err else sent).append(err or msg.value()))
            producer.poll(0.02)
            i += 1
        producer.flush(60)

    thread = threading.Thread(target=keep_producing)
    thread.start()
    flood = []
    try:
        wait_until(lambda: len(sent) >= 50, "the producer to be under way")
        for broker_id in cluster.ids:  # fill every client listener (more wait in the backlog)
            broker = cluster.broker(broker_id)
            for _ in range(12):
                flood.append(socket.create_connection((broker.host, broker.port), timeout=5))
            wait_until(lambda: _held(broker) >= 8, f"broker {broker_id} to be at max.connections")
        cluster.kill(follower)
        wait_until(lambda: follower not in cluster.partition_state("limited", 0)["isr"],
                   "the killed follower to leave the ISR", limit=WAIT_S)
        cluster.start(follower)
        wait_until(lambda: sorted(cluster.partition_state("limited", 0)["isr"]) == [1, 2, 3],
                   "the restarted follower to rejoin the ISR over the inter-broker listener", limit=WAIT_S)
        text = scrape(cluster.broker(leader))
        assert metric(text, "kafkapy_connections_refused_total", listener="PLAINTEXT", limit="max.connections") >= 1
        assert metric(text, "kafkapy_listener_connections", listener="PLAINTEXT") <= 8
        assert metric(text, "kafkapy_listener_connections", listener="INTERNAL") >= 1
        assert "the least recently active: the broker is over max.connections 8" in cluster.broker(leader).stderr_text()
        count = len(sent)
        wait_until(lambda: len(sent) >= count + 50, "acks=all produce to go on with the ISR full")
    finally:
        stop.set()
        thread.join(90)
        for sock in flood:
            sock.close()
    assert errors == []
    consumer = Consumer({"bootstrap.servers": cluster.broker(leader).bootstrap, "group.id": "limited-reader",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition("limited", 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == sent  # every acknowledged record, in order, none twice
