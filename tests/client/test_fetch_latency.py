"""A change of assignment or position is fetched at once, not after a pending long poll.

The consumer here asks brokers to hold a Fetch for up to a minute
(``fetch_max_wait_ms``) while there is nothing to read. Each poll below must
return records within a timeout far shorter than that: possible only if the
consumer abandons the Fetch it has in flight for the old positions.
"""

from __future__ import annotations

from broker.client import Consumer, Producer, TopicPartition

from .conftest import create_topic

LONG_POLL_MS = 60_000
POLL_MS = 10_000


def _consumer(kafka) -> Consumer:
    return Consumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                    fetch_max_wait_ms=LONG_POLL_MS, request_timeout_ms=5000)


def test_new_assignment_is_fetched_while_a_long_poll_is_pending(kafka):
    empty, full = create_topic(kafka, prefix="empty"), create_topic(kafka, prefix="full")
    with Producer(bootstrap_servers=kafka.bootstrap) as producer:
        producer.send(full, b"v").result(30)
    with _consumer(kafka) as consumer:
        consumer.assign([TopicPartition(empty, 0)])
        assert consumer.poll(200) == []  # leaves a Fetch waiting in the broker
        consumer.assign([TopicPartition(full, 0)])
        assert [r.value for r in consumer.poll(POLL_MS)] == [b"v"]


def test_seek_is_fetched_while_a_long_poll_is_pending(kafka):
    topic = create_topic(kafka)
    tp = TopicPartition(topic, 0)
    with Producer(bootstrap_servers=kafka.bootstrap) as producer:
        for i in range(3):
            producer.send(topic, b"%d" % i).result(30)
    with _consumer(kafka) as consumer:
        consumer.assign([tp])
        got = []
        while len(got) < 3:
            got += consumer.poll(POLL_MS)
        assert consumer.poll(200) == []  # at the end: the next Fetch waits in the broker
        consumer.seek(tp, 1)
        assert [r.value for r in consumer.poll(POLL_MS)] == [b"1", b"2"]
