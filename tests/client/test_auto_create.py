"""The producer asks for unknown topics as Kafka's Java client does: Metadata
allowing auto topic creation, then waiting up to ``max_block_ms``."""

from __future__ import annotations

import uuid

import pytest

from broker.client import Consumer, Producer, TopicPartition
from broker.client.errors import UnknownTopicOrPartitionError


def test_producer_uses_the_brokers_auto_topic_creation(kafka):
    topic = f"auto-{uuid.uuid4().hex[:10]}"  # never created by us
    with Producer(bootstrap_servers=kafka.bootstrap, max_block_ms=30000) as producer:
        meta = producer.send(topic, b"first", partition=0).result(30)
        assert (meta.topic, meta.partition, meta.offset) == (topic, 0, 0)
    with Consumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        for _ in range(50):  # a guard, not a timing assertion
            got += consumer.poll(200)
            if got:
                break
        assert [r.value for r in got] == [b"first"]


def test_unknown_topic_without_auto_creation_is_a_clear_error(broker_factory):
    target = broker_factory(auto_create_topics_enable=False)
    with Producer(bootstrap_servers=target.bootstrap, max_block_ms=300) as producer:
        with pytest.raises(UnknownTopicOrPartitionError, match="not present in metadata after 300 ms") as info:
            producer.send("nowhere", b"x")
        assert info.value.error_code == 3
