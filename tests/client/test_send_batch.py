"""``send_batch`` (pre-encoded batches in a request of their own) and
``Consumer.highwater``, against every broker under test."""

from __future__ import annotations

import pytest

from broker.client import Producer
from broker.client.errors import KafkaError
from broker.records.batch import Header, Record, RecordBatch, encode_batch
from broker.records.compression import Compression

from .conftest import create_topic
from .test_produce_consume import consume_all


def _batch(first: int, n: int, compression=Compression.LZ4) -> bytes:
    base_ts = 1_700_000_000_000
    return encode_batch(RecordBatch(compression=compression, base_timestamp=base_ts, records=[
        Record(i, i * 5, f"k{first + i}".encode(), f"v{first + i}".encode() * 10, [Header("h", str(first + i).encode())])
        for i in range(n)]))


def test_send_batch_appends_as_encoded(kafka):
    topic = create_topic(kafka, partitions=2)
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        assert p.send_batch(topic, 1, _batch(0, 5))[0] == 0
        assert p.send_batch(topic, 1, _batch(5, 3, Compression.NONE))[0] == 5
    got = consume_all(kafka.bootstrap, topic, 2, 8)
    assert [(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (1, i, f"k{i}".encode(), f"v{i}".encode() * 10, [("h", str(i).encode())],
         1_700_000_000_000 + (i if i < 5 else i - 5) * 5) for i in range(8)]


def test_send_batch_errors_name_the_partition(kafka):
    topic = create_topic(kafka, partitions=1)
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        with pytest.raises(KafkaError, match=f"{topic}-3"):
            p.send_batch(topic, 3, _batch(0, 1))


def test_highwater_follows_fetches(kafka):
    from broker.client import Consumer, TopicPartition

    topic = create_topic(kafka, partitions=1)
    tp = TopicPartition(topic, 0)
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        p.send_batch(topic, 0, _batch(0, 4))
        p.send_batch(topic, 0, _batch(4, 4))
    with Consumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as c:
        c.assign([tp])
        assert c.highwater(tp) is None
        records = []
        while len(records) < 8:
            records.extend(c.poll(500))
        assert c.highwater(tp) == 8
