"""The client rides out a broker restart: reconnects, refreshes metadata, retries."""

from __future__ import annotations

import threading
import time

import pytest

from broker.client import Admin, Consumer, NewTopic, Producer, TopicPartition


@pytest.fixture
def restartable(broker_factory):
    return broker_factory()


def test_producer_and_consumer_survive_a_broker_restart(restartable):
    bootstrap = restartable.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic("restart", 2)])
    producer = Producer(bootstrap_servers=bootstrap, retry_backoff_ms=50, delivery_timeout_ms=60000,
                        request_timeout_ms=5000, linger_ms=1)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", retry_backoff_ms=50,
                        request_timeout_ms=5000)
    try:
        first = [producer.send("restart", b"a%d" % i) for i in range(50)]
        producer.flush()
        assert all(f.result().offset >= 0 for f in first)
        restartable.stop()
        # sent while the broker is down: buffered, retried, delivered after the restart
        second = [producer.send("restart", b"b%d" % i) for i in range(50)]
        threading.Timer(0.5, restartable.start).start()
        producer.flush(60)
        assert all(f.result().offset >= 0 for f in second)
        consumer.assign([TopicPartition("restart", 0), TopicPartition("restart", 1)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            got.extend(consumer.poll(300))
        assert sorted(r.value for r in got) == sorted([b"a%d" % i for i in range(50)] + [b"b%d" % i for i in range(50)])
    finally:
        producer.close()
        consumer.close()
