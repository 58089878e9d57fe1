"""Fetch from the closest replica (KIP-392) on three brokers in racks a, b and c.

The brokers run Kafka's ``RackAwareReplicaSelector``; a partition led by the
broker in rack a has followers in racks b and c. A librdkafka consumer with
``client.rack=b`` reads every record, and the bytes come from the follower in
rack b (its ``kafkapy_bytes_out_total`` for the topic; a follower serves no
other replica, so that counter is consumers' reads only), none from the one in
rack c. When that follower dies, the consumer falls back to the leader and
reads on. Our own client (``client_rack``) does the same.
"""

from __future__ import annotations

import re
import urllib.request

from confluent_kafka import Consumer, KafkaError, TopicPartition

from broker.client import Consumer as OurConsumer
from broker.client import TopicPartition as OurTopicPartition
from tests.cluster.conftest import wait_until
from tests.cluster.test_replication import produce

RACKS = {1: "a", 2: "b", 3: "c"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def bytes_out(broker, topic: str) -> float:
    with urllib.request.urlopen(broker.metrics_url, timeout=30) as response:
        text = response.read().decode()
    match = re.search(r'^kafkapy_bytes_out_total\{topic="%s"\} (\S+)$' % re.escape(topic), text, re.M)
    return float(match.group(1)) if match else 0.0


def consume(consumer: Consumer, into: list, until: int) -> None:
    def more():
        for msg in consumer.consume(500, 0.5):
            if msg.error() is None:
                into.append((msg.offset(), msg.value()))
            elif msg.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"consumer error {msg.error()}")
        return len(into) >= until
    wait_until(more, f"{until} records read", limit=90)


def consume_ours(consumer: OurConsumer, into: list, until: int) -> None:
    def more():
        into.extend((r.offset, r.value) for r in consumer.poll(500))
        return len(into) >= until
    wait_until(more, f"{until} records read by our consumer", limit=90)


def test_a_consumer_reads_from_the_follower_in_its_rack_and_falls_back_to_the_leader(cluster_factory):
    cluster = cluster_factory(3, props={"replica.selector.class": SELECTOR},
                              per_broker={b: {"broker.rack": r} for b, r in RACKS.items()})
    cluster.create_topic("near", assignment={0: [1, 2, 3]})
    cluster.wait_for_isr("near", 0)
    first = [b"first-%04d" % i for i in range(1000)]
    acked, failed = produce(cluster, "near", first)
    assert not failed and len(acked) == len(first)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "near-reader", "client.rack": "b",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition("near", 0, 0)])
    read: list = []
    try:
        consume(consumer, read, len(first))
        assert [v for _o, v in read] == first
        assert [o for o, _v in read] == list(range(len(first)))
        served = bytes_out(cluster.broker(2), "near")
        assert served >= sum(len(v) for v in first), f"rack b's follower sent only {served} bytes"
        assert bytes_out(cluster.broker(3), "near") == 0
        ours = OurConsumer(bootstrap_servers=cluster.bootstrap, client_rack="b", enable_auto_commit=False)
        ours.assign([OurTopicPartition("near", 0)])
        ours.seek(OurTopicPartition("near", 0), 0)
        ours_read: list = []
        consume_ours(ours, ours_read, len(first))
        assert [v for _o, v in ours_read] == first
        assert bytes_out(cluster.broker(2), "near") >= served + sum(len(v) for v in first)
        assert bytes_out(cluster.broker(3), "near") == 0
        # rack b's follower dies: the consumer goes back to the leader and reads on
        cluster.kill(2)
        then = [b"then-%04d" % i for i in range(200)]
        acked, failed = produce(cluster, "near", then)
        assert not failed and len(acked) == len(then)
        consume(consumer, read, len(first) + len(then))
        assert [v for _o, v in read] == first + then
        consume_ours(ours, ours_read, len(first) + len(then))
        assert [v for _o, v in ours_read] == first + then
        assert bytes_out(cluster.broker(3), "near") == 0
        ours.close()
    finally:
        consumer.close()
