"""Keyed records land where Apache Kafka's Java client and librdkafka's murmur2_random put them."""

from __future__ import annotations

import random

import pytest

from broker.client import DefaultPartitioner, Producer, RoundRobinPartitioner, murmur2, murmur2_partition
from broker.client._partitioner import as_partitioner

from .conftest import create_topic


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize("key, expected", [
    # Apache Kafka's Utils.murmur2 results (signed Java ints) for these keys
    ("21", -973932308), ("foobar", -790332482), ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829), ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
])
def test_murmur2_matches_java_vectors(key, expected):
    assert _signed(murmur2(key.encode())) == expected


def random_keys(n: int, seed: int = 5) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(rnd.randint(0, 40)) for _ in range(n)]


def test_murmur2_matches_kafka_python_for_10000_keys():
    default = pytest.importorskip("kafka.partitioner.default")
    for key in random_keys(10_000):
        assert murmur2(key) == default.murmur2(key) & 0xFFFFFFFF


def test_partitions_match_librdkafka_murmur2_random(kafka):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    partitions = 7
    topic = create_topic(kafka, partitions=partitions)
    keys = [k or b"\x00" for k in random_keys(10_000, seed=11)]  # librdkafka treats b"" as a key too
    landed: dict[bytes, int] = {}
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            landed[msg.key()] = msg.partition()

    p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "partitioner": "murmur2_random",
                                  "linger.ms": 20})
    for key in keys:
        p.produce(topic, b"v", key, on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0 and not errors
    assert len(landed) == len(set(keys))
    mismatches = [k for k, part in landed.items() if murmur2_partition(k, partitions) != part]
    assert mismatches == []
    # and our producer puts every key on the same partition
    with Producer(bootstrap_servers=kafka.bootstrap, linger_ms=20) as ours:
        futures = {k: ours.send(topic, b"v", k) for k in list(landed)[:2000]}
        ours.flush()
    assert all(f.result().partition == landed[k] for k, f in futures.items())


def test_sticky_partitioner_for_null_keys():
    part = DefaultPartitioner()
    parts = list(range(5))
    first = part.partition("t", None, parts, parts)
    assert all(part.partition("t", None, parts, parts) == first for _ in range(100))
    part.on_new_batch("t", first)
    second = part.partition("t", None, parts, parts)
    assert second != first  # moved on: a record would have opened a new batch on the first
    assert part.partition("t", None, parts, [3]) in (second, 3)


def test_null_keys_sent_one_at_a_time_spread_over_the_partitions(kafka):
    """A producer that waits for each record (linger 0) opens a new batch with every record:
    each one moves the sticky partition on, as Apache Kafka's producer does (KIP-480),
    rather than keeping every record of the process on one partition."""
    topic = create_topic(kafka, partitions=4)
    with Producer(bootstrap_servers=kafka.bootstrap, linger_ms=0) as producer:
        landed = [producer.send(topic, b"v%d" % i).result(30).partition for i in range(60)]
    assert len(set(landed)) >= 3, landed
    assert all(a != b for a, b in zip(landed, landed[1:])), landed  # never the one whose batch just went


def test_null_keys_sent_in_a_burst_fill_one_batch_at_a_time(kafka):
    """A busy producer keeps to one partition while its batch there fills: 2,000 records of
    100 bytes sent without waiting land in long runs per partition, not one record each."""
    topic = create_topic(kafka, partitions=4)
    with Producer(bootstrap_servers=kafka.bootstrap, linger_ms=50) as producer:
        futures = [producer.send(topic, b"x" * 100) for _ in range(2000)]
        producer.flush()
        landed = [f.result(30).partition for f in futures]
    runs = 1 + sum(a != b for a, b in zip(landed, landed[1:]))
    assert runs <= 100, runs  # a 16 KB batch holds about 130 such records


def test_partitioners_see_each_record_once_and_each_new_batch_once(kafka):
    """Only a partitioner with ``on_new_batch`` is asked twice for a record that opens a batch:
    round robin, which has none, goes 0, 1, 2, 0 one record at a time (no partition skipped),
    and a custom one hears of each new batch on the partition it chose exactly once."""
    topic = create_topic(kafka, partitions=3)
    with Producer(bootstrap_servers=kafka.bootstrap, linger_ms=0, partitioner=RoundRobinPartitioner()) as rr:
        assert [rr.send(topic, b"v").result(30).partition for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]

    class Counting:
        def __init__(self):
            self.asked, self.new_batches, self.current = 0, [], 0

        def partition(self, topic, key, partitions, available):
            self.asked += 1
            return self.current

        def on_new_batch(self, topic, partition):
            self.new_batches.append(partition)
            self.current = (partition + 1) % 3

    counting = Counting()
    with Producer(bootstrap_servers=kafka.bootstrap, linger_ms=0, partitioner=counting) as producer:
        landed = [producer.send(topic, b"v").result(30).partition for _ in range(5)]
        explicit = producer.send(topic, b"v", partition=2).result(30).partition
    assert landed == [1, 2, 0, 1, 2] and explicit == 2
    assert counting.new_batches == [0, 1, 2, 0, 1] and counting.asked == 10  # the named partition asks nothing


def test_round_robin_and_custom_partitioners():
    rr = RoundRobinPartitioner()
    assert [rr.partition("t", b"k", [0, 1, 2], [0, 1, 2]) for _ in range(4)] == [0, 1, 2, 0]
    custom = as_partitioner(lambda topic, key, parts, avail: parts[-1])
    assert custom.partition("t", b"k", [0, 1, 2], [0, 1, 2]) == 2
