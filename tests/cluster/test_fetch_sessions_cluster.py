"""Followers fetch through incremental fetch sessions (KIP-227): each follower fetcher keeps one session with
each leader it follows, and replication goes on through a broker's restart, which loses its sessions (its
followers open new ones once it leads again), with no acknowledged record lost. (A fetcher told that its
session is gone is tested against a real broker in ``tests/client/test_fetch_sessions_client.py``.)
"""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.cluster.conftest import WAIT_S, wait_until
from tests.server.test_quotas import scrape

pytestmark = pytest.mark.clients


def gauge(broker, name: str) -> float:
    found = re.search(rf"^{name} ([\d.e+]+)$", scrape(broker), re.M)
    return float(found.group(1)) if found else 0.0


def test_followers_replicate_through_fetch_sessions_across_a_leader_restart(cluster):
    cluster.create_topic("sessions", partitions=6, replication_factor=3)
    conf = {"bootstrap.servers": cluster.bootstrap, "log_level": 0}
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    sent = _produce(cluster, producer, b"before")
    # every broker leads some partitions; each of the two others follows them with one fetcher and one session
    for broker_id in cluster.ids:
        broker = cluster.broker(broker_id)
        wait_until(lambda: gauge(broker, "kafkapy_fetch_sessions") == 2, f"broker {broker_id}'s two sessions")
        assert gauge(broker, "kafkapy_fetch_session_partitions") >= 2

    restarted = cluster.leader("sessions", 0)
    cluster.restart(restarted)  # a clean restart: its sessions are gone; leadership moved away meanwhile
    for p in range(6):
        cluster.wait_for_isr("sessions", p, [1, 2, 3])
    # back to the preferred leaders: the restarted broker leads again, and its followers open new sessions
    admin = AdminClient(conf)
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("sessions", p) for p in range(6)]).result(WAIT_S)
    broker = cluster.broker(restarted)
    wait_until(lambda: gauge(broker, "kafkapy_fetch_sessions") == 2, "the followers' new sessions")
    more = _produce(cluster, producer, b"after")
    assert sorted(_read(conf, range(6), len(sent) + len(more))) == sorted(sent + more)
    # the followers have every record: partition 0 read again from a new leader after its leader's SIGKILL
    leader = cluster.leader("sessions", 0)
    cluster.kill(leader)
    cluster.wait_for_leader("sessions", 0, not_in=(leader,))
    expected = [v for i, v in enumerate(sent) if i % 6 == 0] + [v for i, v in enumerate(more) if i % 6 == 0]
    assert _read(conf, [0], len(expected)) == expected


def _produce(cluster, producer, prefix: bytes, count: int = 1200) -> list[bytes]:
    """``count`` records round the six partitions, acknowledged by all, and every ISR full again."""
    values = [b"%s-%d" % (prefix, i) for i in range(count)]
    for i, value in enumerate(values):
        producer.produce("sessions", value, partition=i % 6)
    assert producer.flush(60) == 0
    for p in range(6):
        cluster.wait_for_isr("sessions", p, [1, 2, 3])
    return values


def _read(conf: dict, partitions, count: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": "sessions-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition("sessions", p, OFFSET_BEGINNING) for p in partitions])
    got: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got
