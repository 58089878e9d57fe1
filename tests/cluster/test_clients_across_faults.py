"""Client libraries across cluster faults: kafka-python and aiokafka producing and
consuming across a leader change, ending with the history checker."""

from __future__ import annotations

import asyncio
import time

from tests.cluster.conftest import WAIT_S
from tests.cluster.history import check
from tests.cluster.workload import read_all


def kafka_python_send(bootstrap: str, topic: str, values: list[bytes]) -> tuple[list, list]:
    """Send with kafka-python (acks=all, retries); returns (acknowledged triples, failed values)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200,
                             request_timeout_ms=10000, metadata_max_age_ms=1000)
    futures = [(v, producer.send(topic, value=v, partition=0)) for v in values]
    acked, failed = [], []
    for v, f in futures:
        try:
            meta = f.get(timeout=WAIT_S)
            acked.append((meta.partition, meta.offset, v))
        except Exception:
            failed.append(v)
    producer.close(timeout=10)
    return acked, failed


async def aiokafka_send(bootstrap: str, topic: str, values: list[bytes]) -> tuple[list, list]:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10000,
                                         retry_backoff_ms=200, metadata_max_age_ms=1000)
    await producer.start()
    acked, failed = [], []
    try:
        for v in values:
            for _ in range(10):  # aiokafka gives up on a batch after one request timeout: send again
                try:
                    meta = await producer.send_and_wait(topic, value=v, partition=0)
                    acked.append((meta.partition, meta.offset, v))
                    break
                except Exception:
                    await asyncio.sleep(0.5)
            else:
                failed.append(v)
    finally:
        await producer.stop()
    return acked, failed


def kafka_python_read(bootstrap: str, topic: str, count: int) -> list:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out, deadline = [], time.monotonic() + WAIT_S
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend((r.partition, r.offset, r.value) for r in records)
    consumer.close()
    return out


async def aiokafka_read(bootstrap: str, topic: str, count: int) -> list:
    import aiokafka
    from aiokafka.structs import TopicPartition

    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                         auto_offset_reset="earliest")
    await consumer.start()
    tp = TopicPartition(topic, 0)
    out = []
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + WAIT_S
        while len(out) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=500)
            out.extend((r.partition, r.offset, r.value) for r in batch.get(tp, []))
    finally:
        await consumer.stop()
    return out


def test_kafka_python_and_aiokafka_across_a_leader_change(cluster):
    cluster.create_topic("py", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    acked, failed = kafka_python_send(cluster.bootstrap, "py", [b"kp-before-%d" % i for i in range(50)])
    more, lost = asyncio.run(aiokafka_send(cluster.bootstrap, "py", [b"aio-before-%d" % i for i in range(50)]))
    acked, failed = acked + more, failed + lost

    old = cluster.leader("py")
    cluster.kill(old)
    more, lost = kafka_python_send(cluster.bootstrap, "py", [b"kp-after-%d" % i for i in range(50)])
    acked, failed = acked + more, failed + lost
    cluster.wait_for_leader("py", not_in={old})
    more, lost = asyncio.run(aiokafka_send(cluster.bootstrap, "py", [b"aio-after-%d" % i for i in range(50)]))
    acked, failed = acked + more, failed + lost
    assert len(acked) >= 150, f"{len(acked)} acknowledged, {len(failed)} failed"

    total = len(read_all(cluster.bootstrap, "py"))
    reads = {"kafka-python": kafka_python_read(cluster.bootstrap, "py", total),
             "aiokafka": asyncio.run(aiokafka_read(cluster.bootstrap, "py", total))}
    report = check(acked, reads, indeterminate=failed)
    assert report.valid(allow_duplicates=True), str(report)
