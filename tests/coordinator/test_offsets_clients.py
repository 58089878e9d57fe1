"""Committed offsets with real clients: resume after a broker restart, topic vs queue
semantics with several groups, and a compacted __consumer_offsets after many commits."""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.log import LogConfig, LogManager
from tests.coordinator.helpers import WAIT_LIMIT_S, wait_stable

LONG = os.environ.get("KAFKAPY_LONG") == "1"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result()


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 1000, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "fetch.queue.backoff.ms": 10, **extra})


def poll_values(consumers: list[Consumer], count: int) -> list[tuple[int, bytes]]:
    """Poll until ``count`` records arrived in total; returns (consumer index, value)."""
    got = []
    deadline = time.monotonic() + WAIT_LIMIT_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records arrived"
        for i, c in enumerate(consumers):
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                got.append((i, msg.value()))
    return got


def test_commit_restart_resume(broker_factory):
    broker = broker_factory(offsets_topic_num_partitions=3)
    create_topic(broker.bootstrap, "events", 2)
    values = [b"%03d" % i for i in range(100)]
    produce(broker.bootstrap, "events", values, 2)

    c = consumer(broker.bootstrap, "resume")
    c.subscribe(["events"])
    seen = []
    deadline = time.monotonic() + WAIT_LIMIT_S
    while len(seen) < 60:
        assert time.monotonic() < deadline
        msg = c.poll(0.1)
        if msg is None or msg.error():
            continue
        seen.append(msg.value())
        if len(seen) <= 50:
            c.commit(message=msg, asynchronous=False)  # the first 50 are committed, 10 more are not
    c.close()
    committed = seen[:50]
    tail = seen[50:]

    broker.restart()
    c = consumer(broker.bootstrap, "resume")
    c.subscribe(["events"])
    rest = [v for _, v in poll_values([c], 100 - 50)]
    c.close()
    assert sorted(committed + rest) == values  # nothing skipped, nothing committed seen twice
    assert set(rest) & set(seen) == set(tail)  # repeats: exactly the uncommitted tail


def test_two_groups_get_everything_one_group_shares(broker_factory):
    broker = broker_factory(offsets_topic_num_partitions=3)
    create_topic(broker.bootstrap, "feed", 4)
    queue = [consumer(broker.bootstrap, "queue") for _ in range(4)]
    for q in queue:
        q.subscribe(["feed"])
    deadline = time.monotonic() + WAIT_LIMIT_S
    while len([q for q in queue if q.assignment()]) < 4:  # poll until all four hold partitions
        assert time.monotonic() < deadline
        for q in queue:
            q.poll(0.05)
    wait_stable(broker.bootstrap, "queue", 4, 4)
    values = [b"v%d" % i for i in range(40)]
    produce(broker.bootstrap, "feed", values, 4)

    topic_a, topic_b = consumer(broker.bootstrap, "topic-a"), consumer(broker.bootstrap, "topic-b")
    topic_a.subscribe(["feed"])
    topic_b.subscribe(["feed"])
    got = poll_values([topic_a, topic_b], 80)
    assert sorted(v for i, v in got if i == 0) == sorted(values)
    assert sorted(v for i, v in got if i == 1) == sorted(values)

    shared = poll_values(queue, 40)
    assert sorted(v for _, v in shared) == sorted(values)  # each record to exactly one member
    assert len({i for i, _ in shared}) == 4
    for c in queue + [topic_a, topic_b]:
        c.close()


def test_consumer_offsets_is_compacted_after_many_commits(broker_factory):
    commits = 100_000 if LONG else 5_000
    segment_bytes = 64 * 1024
    broker = broker_factory(offsets_topic_num_partitions=1, offsets_topic_segment_bytes=segment_bytes)
    create_topic(broker.bootstrap, "hot", 3)
    c = consumer(broker.bootstrap, "committer")
    for i in range(commits):
        c.commit(offsets=[TopicPartition("hot", i % 3, i)], asynchronous=False)
    final = [TopicPartition("hot", p, commits + p) for p in range(3)]
    c.commit(offsets=final, asynchronous=False)
    c.close()
    assert broker.stop() == 0

    pdir = broker.data_dir / "__consumer_offsets-0"
    before = sum(f.stat().st_size for f in pdir.glob("*.log"))
    assert before > 4 * segment_bytes
    # One deterministic cleaner pass over the stopped broker's files (the cleaner thread
    # of a running broker does the same on its own schedule).
    compact = LogConfig(cleanup_policy="compact", segment_bytes=segment_bytes)
    manager = LogManager([broker.data_dir], LogConfig(),
                         topic_config=lambda t: compact if t == "__consumer_offsets" else None)
    manager.startup()
    assert manager.clean_logs() >= 1
    manager.shutdown()
    after = sum(f.stat().st_size for f in pdir.glob("*.log"))
    # bounded: the cleaned head holds one record per key, plus at most the uncleaned active segment
    assert after <= 2 * segment_bytes, (before, after)

    broker.start()
    c = consumer(broker.bootstrap, "committer")
    deadline = time.monotonic() + WAIT_LIMIT_S
    while True:
        got = c.committed([TopicPartition("hot", p) for p in range(3)], timeout=10)
        if all(tp.error is None for tp in got):
            break
        assert time.monotonic() < deadline
    assert [tp.offset for tp in got] == [commits + p for p in range(3)]
    c.close()
