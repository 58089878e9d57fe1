"""Unmodified Kafka clients against a broker process: librdkafka (confluent-kafka, kcat),
kafka-python and aiokafka produce and consume with keys, null values, headers, every
codec, large messages, many partitions; offsets_for_times; old fetch versions.

Consumers use explicit assign() (no groups: the group coordinator is a later issue).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest

pytestmark = pytest.mark.clients

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
POLL_LIMIT_S = 60  # guard against a hang, not a performance assertion


def _ck():
    return pytest.importorskip("confluent_kafka")


def ck_produce(bootstrap, topic, messages, **conf):
    ck = _ck()
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for m in messages:
        producer.produce(topic, on_delivery=report, **m)
    assert producer.flush(POLL_LIMIT_S) == 0
    assert errors == []


def ck_consume(bootstrap, topic, count, partitions=(0,), **conf):
    ck = _ck()
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                            "fetch.queue.backoff.ms": 10, **conf})
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
    out = []
    deadline = time.monotonic() + POLL_LIMIT_S
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append(msg)
    consumer.close()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_every_codec_keys_nulls_headers(broker, codec):
    topic = f"ck-{codec}"
    messages = [
        {"key": b"k%d" % i, "value": None if i % 7 == 3 else b"value-%d" % i,
         "headers": [("h", b"%d" % i), ("empty", None)] if i % 2 else None}
        for i in range(200)
    ]
    for m in messages:
        if m["headers"] is None:
            del m["headers"]
    ck_produce(broker.bootstrap, topic, messages, **{"compression.type": codec, "acks": "all"})
    got = ck_consume(broker.bootstrap, topic, len(messages))
    assert [(m.key(), m.value(), m.offset()) for m in got] == [
        (m["key"], m["value"], i) for i, m in enumerate(messages)]
    assert got[1].headers() == [("h", b"1"), ("empty", None)]


def test_confluent_kafka_near_message_max_bytes(broker_factory):
    b = broker_factory(message_max_bytes=200_000)
    big = b"x" * 190_000
    ck_produce(b.bootstrap, "big", [{"value": big}, {"value": b"small"}], **{"message.max.bytes": 1_000_000})
    got = ck_consume(b.bootstrap, "big", 2)
    assert [len(m.value()) for m in got] == [190_000, 5]
    ck = _ck()
    producer = ck.Producer({"bootstrap.servers": b.bootstrap, "message.max.bytes": 1_000_000})
    errors = []
    producer.produce("big", b"y" * 300_000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(POLL_LIMIT_S)
    assert errors and errors[0].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE


def test_confluent_kafka_many_partitions_and_offsets_for_times(broker_factory):
    b = broker_factory(num_partitions=24)
    ck = _ck()
    messages = [{"key": b"%d" % i, "value": b"v%d" % i, "partition": i % 24, "timestamp": 1_000_000 + i}
                for i in range(240)]
    ck_produce(b.bootstrap, "many", messages)
    got = ck_consume(b.bootstrap, "many", 240, partitions=range(24))
    assert sorted(m.value() for m in got) == sorted(m["value"] for m in messages)
    assert {m.partition() for m in got} == set(range(24))
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused"})
    found = consumer.offsets_for_times([ck.TopicPartition("many", 5, 1_000_000 + 100)], timeout=30)
    # partition 5 holds i = 5, 29, 53, ...: the first timestamp >= 1_000_100 is i = 101 at offset 4
    assert found[0].offset == 4
    low, high = consumer.get_watermark_offsets(ck.TopicPartition("many", 5), timeout=30)
    assert (low, high) == (0, 10)
    consumer.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_every_codec(broker, codec):
    kafka = pytest.importorskip("kafka")
    from kafka import TopicPartition

    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5)
    futures = [producer.send("kp", key=b"k%d" % i, value=None if i == 5 else b"v%d" % i,
                             headers=[("h", b"x")] if i % 2 else None) for i in range(50)]
    producer.flush()
    assert [f.get(timeout=30).offset for f in futures] == list(range(50))
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                   consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("kp", 0)])
    consumer.seek_to_beginning()
    got = []
    deadline = time.monotonic() + POLL_LIMIT_S
    while len(got) < 50 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    assert [(r.key, r.value) for r in got] == [(b"k%d" % i, None if i == 5 else b"v%d" % i) for i in range(50)]
    assert list(got[1].headers) == [("h", b"x")]


@pytest.mark.parametrize("api_version", [(0, 9), (0, 10)])
def test_kafka_python_old_protocol_versions_get_down_converted_data(broker, api_version):
    kafka = pytest.importorskip("kafka")
    from kafka import TopicPartition

    ck_produce(broker.bootstrap, "legacy", [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(10)],
               **{"compression.type": "gzip"})
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                                   enable_auto_commit=False)
    consumer.assign([TopicPartition("legacy", 0)])
    consumer.seek(TopicPartition("legacy", 0), 0)
    got = []
    deadline = time.monotonic() + POLL_LIMIT_S
    while len(got) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    assert [(r.offset, r.key, r.value) for r in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(10)]


def test_aiokafka_produce_and_consume(broker):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import TopicPartition

    async def run():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="lz4")
        await producer.start()
        try:
            for i in range(30):
                await producer.send_and_wait("aio", key=b"k%d" % i, value=b"v%d" % i,
                                             headers=[("n", b"%d" % i)])
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                             auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition("aio", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            while len(got) < 30:
                batch = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=500), POLL_LIMIT_S)
                got.extend(batch.get(tp, []))
            end = await consumer.end_offsets([tp])
        finally:
            await consumer.stop()
        return got, end[tp]

    got, end = asyncio.run(run())
    assert [(r.key, r.value, r.headers) for r in got] == [
        (b"k%d" % i, b"v%d" % i, (("n", b"%d" % i),)) for i in range(30)]
    assert end == 30


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_and_consume(broker, codec):
    lines = "".join(f"key{i}\tvalue {i}\n" for i in range(100))
    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", f"kc-{codec}", "-K", "\t", "-z", codec,
                    "-H", "source=kcat"], input=lines.encode(), check=True, timeout=POLL_LIMIT_S)
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", f"kc-{codec}", "-o", "beginning", "-e",
                          "-f", "%k|%s|%o|%h\n"], capture_output=True, check=True, timeout=POLL_LIMIT_S)
    got = out.stdout.decode().splitlines()
    assert got == [f"key{i}|value {i}|{i}|source=kcat" for i in range(100)]
    meta = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-t", f"kc-{codec}"], capture_output=True,
                          check=True, timeout=POLL_LIMIT_S).stdout.decode()
    assert "1 partitions" in meta and "leader 0" in meta
