"""Dev script (not imported by tests): record real client request/response frames.

Starts a Kafka-compatible broker (tansu, memory storage) on one port, a recording TCP proxy
(``tests/tcp_gate.py``) on another, and advertises the proxy's port so every client connection
goes through it. Each
scenario drives one real client library (admin create topic, produce, consume in a group, list
offsets); every frame is saved without its size prefix:

    <out>/<client>/<seq>-<ApiName>-v<version>-request.bin
    <out>/<client>/<seq>-<ApiName>-v<version>-response.bin

Only the first two exchanges of each (api key, version) are kept per client.

    python -m tests.vectors.protocol.capture --tansu PATH/TO/tansu --out tests/vectors/protocol \
        [--client confluent-kafka|kafka-python|aiokafka|kcat ...]

(from the repository's root, so that ``tests`` is importable).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from broker.protocol import ApiKey
from tests.tcp_gate import TcpGate, frames
from tests.zookeeper import free_port

TOPIC = "vectors-topic"
GROUP = "vectors-group"
KEEP_PER_VERSION = 2


class Recorder:
    """Pairs request frames with response frames by correlation id and writes them out."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.seq = 0
        self.counts: dict[tuple[int, int], int] = {}

    def request(self, frame: bytes):
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
        with self.lock:
            n = self.counts.get((api_key, version), 0)
            self.counts[(api_key, version)] = n + 1
            if n >= KEEP_PER_VERSION:
                return None
            self.seq += 1
            try:
                name = "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
            except ValueError:
                name = f"Api{api_key}"
            stem = f"{self.seq:03d}-{name}-v{version}"
            (self.folder / f"{stem}-request.bin").write_bytes(frame)
            return stem

    def response(self, stem: str, frame: bytes):
        (self.folder / f"{stem}-response.bin").write_bytes(frame)

    def tap(self):
        """The ``TcpGate`` tap for one connection: pairs its responses with its requests by correlation id."""
        pending: dict[int, str | None] = {}

        def on_request(frame: bytes) -> None:
            pending[struct.unpack_from(">i", frame, 4)[0]] = self.request(frame)

        def on_response(frame: bytes) -> None:
            stem = pending.pop(struct.unpack_from(">i", frame)[0], None)
            if stem:
                self.response(stem, frame)

        return frames(on_request), frames(on_response)


def scenario_confluent(bootstrap: str):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(5):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2,
                         headers=[("h", b"x")])
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "fetch.queue.backoff.ms": 10})
    consumer.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 20
    while got < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    consumer.commit(asynchronous=False)
    consumer.offsets_for_times([TopicPartition(TOPIC, 0, 0)], timeout=10)
    consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.close()
    _confluent_admin(admin)


def _confluent_admin(admin):
    """Admin calls beyond create; the broker may refuse some, the request is what we want."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions)
    resource = ConfigResource("topic", TOPIC)
    calls = [
        lambda: admin.describe_configs([resource]),
        lambda: admin.alter_configs([ConfigResource("topic", TOPIC,
                                                    set_config={"retention.ms": "60000"})]),
        lambda: admin.incremental_alter_configs([ConfigResource("topic", TOPIC, incremental_configs=[
            ConfigEntry("retention.ms", "120000",
                        incremental_operation=AlterConfigOpType.SET)])]),
        lambda: admin.create_partitions([NewPartitions(TOPIC, 3)]),
        lambda: admin.delete_records([TopicPartition(TOPIC, 0, 1)]),
        lambda: admin.list_consumer_groups(),
        lambda: admin.describe_consumer_groups([GROUP]),
        lambda: admin.describe_cluster(),
        lambda: admin.delete_consumer_groups([GROUP]),
        lambda: admin.delete_topics([TOPIC]),
    ]
    for call in calls:
        try:
            result = call()
            futures = result.values() if isinstance(result, dict) else [result]
            for future in futures:
                try:
                    future.result(10)
                except Exception:  # noqa: BLE001 - the broker's answer does not matter here
                    pass
        except Exception:  # noqa: BLE001
            pass


def scenario_kafka_python(bootstrap: str):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                             auto_offset_reset="earliest", session_timeout_ms=6000,
                             consumer_timeout_ms=10000)
    for i, _ in enumerate(consumer):
        if i == 4:
            break
    consumer.commit()
    consumer.offsets_for_times({TopicPartition(TOPIC, 0): 0})
    consumer.close()
    _kafka_python_admin(admin)
    admin.close()


def _kafka_python_admin(admin):
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions
    resource = ConfigResource(ConfigResourceType.TOPIC, TOPIC)
    calls = [
        lambda: admin.describe_configs([resource]),
        lambda: admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC,
                                                    configs={"retention.ms": "60000"})]),
        lambda: admin.create_partitions({TOPIC: NewPartitions(3)}),
        lambda: admin.list_consumer_groups(),
        lambda: admin.describe_consumer_groups([GROUP]),
        lambda: admin.describe_cluster(),
        lambda: admin.delete_consumer_groups([GROUP]),
        lambda: admin.delete_topics([TOPIC]),
    ]
    for call in calls:
        try:
            call()
        except Exception:  # noqa: BLE001 - the broker's answer does not matter here
            pass


def scenario_aiokafka(bootstrap: str):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])
        await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        for i in range(5):
            await producer.send_and_wait(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
        await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                                    auto_offset_reset="earliest", session_timeout_ms=6000)
        await consumer.start()
        got = 0
        while got < 5:
            batch = await consumer.getmany(timeout_ms=10000)
            got += sum(len(v) for v in batch.values())
            if not batch:
                break
        await consumer.commit()
        await consumer.offsets_for_times({TopicPartition(TOPIC, 0): 0})
        await consumer.stop()

    asyncio.run(run())


def scenario_kcat(bootstrap: str):
    # Debian's kcat (librdkafka 2.0.2) misreads tansu's ApiVersions v3 response (non-empty
    # tagged fields), so only its first request is captured: do not insist on success.
    subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", TOPIC, "-p", "0", "-K", ":"],
                   input=b"k1:v1\nk2:v2\n", timeout=30, stderr=subprocess.DEVNULL)
    subprocess.run(["kcat", "-b", bootstrap, "-L"], timeout=30,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


SCENARIOS = {"confluent-kafka": scenario_confluent, "kafka-python": scenario_kafka_python,
             "aiokafka": scenario_aiokafka, "kcat": scenario_kcat}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tansu", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--client", action="append", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    for client in args.client or sorted(SCENARIOS):
        broker_port = free_port()
        recorder = Recorder(args.out / client)
        proxy = TcpGate(broker_port, tap=recorder.tap)
        tansu = subprocess.Popen(
            [args.tansu, "broker", "--listener-url", f"tcp://127.0.0.1:{broker_port}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{proxy.port}",
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", broker_port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            SCENARIOS[client](f"127.0.0.1:{proxy.port}")
            time.sleep(0.5)
            print(f"{client}: {recorder.seq} exchanges", file=sys.stderr)
        finally:
            proxy.close()
            tansu.terminate()
            tansu.wait(10)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
