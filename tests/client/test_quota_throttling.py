"""Our client under a broker's client quotas (KIP-219): it reads ``throttle_time_ms`` and sends that broker
nothing more until the throttle has passed.

The throttle here (about 8 s) is longer than the producer's whole wait for an answer (its request timeout,
1.5 s, plus the 5 s it allows the broker): a client that sent on regardless would have its next request
held by the muted connection past that wait, give up on it and send it again on a new connection. A client
that waits sends it once, when the throttle is over, and has its answer at once.
"""

from __future__ import annotations

import time

import pytest

from broker.client import Consumer, Producer, TopicPartition
from tests.server.test_quotas import FAST_WINDOWS, metric, scrape, set_quota

pytestmark = pytest.mark.clients


def test_our_producer_waits_out_a_throttle_and_sends_nothing_twice(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    assert set_quota(broker, [("client-id", "paced")], producer_byte_rate=10_000)["error_code"] == 0
    tp = TopicPartition("paced", 0)
    with Producer(bootstrap_servers=broker.bootstrap, client_id="paced", linger_ms=50, batch_size=1 << 20,
                  request_timeout_ms=1500, enable_idempotence=False, retries=3) as producer:
        first = [producer.send("paced", b"a" * 1000, partition=0) for _ in range(100)]  # 100 KB in one request
        producer.flush()
        assert [f.result(10).offset for f in first] == list(range(100))
        sent = time.monotonic()
        # 100 KB against 10 KB/s over the first 2 s of windows: (50 - 10) / 10 * 2 s = 8 s
        assert producer.send("paced", b"b", partition=0).result(30).offset == 100
        waited = time.monotonic() - sent
    with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        assert consumer.end_offsets([tp]) == {tp: 101}  # nothing went twice
    text = scrape(broker)
    assert metric(text, "kafkapy_client_quota_throttled_total", quota="Produce", user="", client_id="paced") == 1
    throttle = metric(text, "kafkapy_client_quota_throttle_seconds_total", quota="Produce", user="",
                      client_id="paced")
    assert throttle > 6.5  # longer than the producer waits for an answer
    # it kept to the throttle: it sent the record once the throttle was over, and had its answer at once (a
    # client that sent it at once would have given up on the held request after 6.5 s and sent it again on a
    # new connection, before the throttle ended)
    assert waited >= throttle * 0.95, (waited, throttle)


def test_our_consumer_keeps_to_its_fetch_quota(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    values = [b"%06d" % i + b"q" * 994 for i in range(300)]  # 300 KB
    with Producer(bootstrap_servers=broker.bootstrap, client_id="loader") as producer:
        for value in values:
            producer.send("fetched", value, partition=0)
        producer.flush()
    assert set_quota(broker, [("client-id", "paced")], consumer_byte_rate=50_000)["error_code"] == 0
    got = []
    with Consumer(bootstrap_servers=broker.bootstrap, client_id="paced", request_timeout_ms=1500) as consumer:
        consumer.assign([TopicPartition("fetched", 0)])
        consumer.seek(TopicPartition("fetched", 0), 0)
        start = time.monotonic()
        while len(got) < len(values) and time.monotonic() - start < 60:
            got.extend(r.value for r in consumer.poll(timeout_ms=500, max_records=1000))
        took = time.monotonic() - start
    assert got == values
    assert took >= 2.5, took  # 300 KB at 50 KB/s, less what the first windows allow
    assert metric(scrape(broker), "kafkapy_client_quota_throttled_total", quota="Fetch", user="",
                  client_id="paced") >= 1
