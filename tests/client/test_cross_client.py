"""Records written by our client read correctly by confluent-kafka and kafka-python, and back."""

from __future__ import annotations

import time

import pytest

from broker.client import Consumer, Producer, TopicPartition

from .conftest import create_topic

N = 200
WAIT_S = 30  # guard against hangs


def expected_records():
    return [(b"k%d" % (i % 13) if i % 5 else None, b"value-%d-" % i + b"y" * (i % 40),
             [("idx", b"%d" % i)], 1_650_000_000_000 + i) for i in range(N)]


def produce_ours(bootstrap, topic, codec):
    with Producer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=10) as p:
        for key, value, headers, ts in expected_records():
            p.send(topic, value, key, headers=headers, timestamp_ms=ts)
        p.flush()


def consume_ours(bootstrap, topic, partitions):
    out = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + WAIT_S
        while len(out) < N and time.monotonic() < deadline:
            out.extend(c.poll(300))
    return [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in out]


def canonical(records):
    return sorted(records, key=lambda r: int(r[2][0][1]))


@pytest.mark.parametrize("codec", ["none", "zstd", "snappy", "lz4", "gzip"])
def test_confluent_reads_ours(kafka, codec):
    ck = pytest.importorskip("confluent_kafka")
    topic = create_topic(kafka, partitions=3)
    produce_ours(kafka.bootstrap, topic, codec)
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": kafka.topic("g"),
                     "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(3)])
    got = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < N and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            got.append((m.key(), m.value(), [(k, v) for k, v in (m.headers() or [])], m.timestamp()[1]))
    c.close()
    assert canonical(got) == canonical(expected_records())


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_kafka_python_reads_ours(kafka, codec):
    kp = pytest.importorskip("kafka")
    topic = create_topic(kafka, partitions=3)
    produce_ours(kafka.bootstrap, topic, codec)
    c = kp.KafkaConsumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                         enable_auto_commit=False, consumer_timeout_ms=WAIT_S * 1000)
    c.assign([kp.TopicPartition(topic, p) for p in range(3)])
    got = []
    for m in c:
        got.append((m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp))
        if len(got) >= N:
            break
    c.close()
    assert canonical(got) == canonical(expected_records())


@pytest.mark.parametrize("codec", ["none", "zstd", "lz4"])
def test_ours_reads_confluent(kafka, codec):
    ck = pytest.importorskip("confluent_kafka")
    topic = create_topic(kafka, partitions=3)
    p = ck.Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec, "linger.ms": 10})
    for key, value, headers, ts in expected_records():
        p.produce(topic, value, key, headers=headers, timestamp=ts)
    assert p.flush(WAIT_S) == 0
    assert canonical(consume_ours(kafka.bootstrap, topic, 3)) == canonical(expected_records())


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_ours_reads_kafka_python(kafka, codec):
    kp = pytest.importorskip("kafka")
    topic = create_topic(kafka, partitions=3)
    p = kp.KafkaProducer(bootstrap_servers=kafka.bootstrap,
                         compression_type=None if codec == "none" else codec, linger_ms=10)
    for key, value, headers, ts in expected_records():
        p.send(topic, value=value, key=key, headers=headers, timestamp_ms=ts)
    p.flush(WAIT_S)
    p.close()
    assert canonical(consume_ours(kafka.bootstrap, topic, 3)) == canonical(expected_records())


def test_our_group_offsets_are_read_by_kafka_python(kafka):
    kp = pytest.importorskip("kafka")
    topic = create_topic(kafka)
    group = kafka.topic("g")
    produce_ours(kafka.bootstrap, topic, "none")
    with Consumer(bootstrap_servers=kafka.bootstrap, group_id=group, enable_auto_commit=False,
                  auto_offset_reset="earliest", session_timeout_ms=6000) as c:
        c.assign([TopicPartition(topic, 0)])
        c.commit({TopicPartition(topic, 0): 123})
    k = kp.KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert k.committed(kp.TopicPartition(topic, 0)) == 123
    finally:
        k.close()
