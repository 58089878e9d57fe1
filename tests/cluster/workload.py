"""Load and reads for the fault tests, all recorded for the history checker.

- :class:`LoadProducer`: a librdkafka producer in a thread sending unique values
  (``b"<prefix>-000042"``) at a steady rate, round-robin over the given
  partitions; delivery reports go to a :class:`~tests.cluster.history.Recorder`.
  ``stop()`` flushes for a bounded time; values never reported count as
  indeterminate.
- :func:`read_all`: a librdkafka consumer's full read of partitions from offset
  0 to their high watermarks, as ``(partition, offset, value)``.
- :func:`replica_records` / :func:`replica_batches`: what one replica's segment
  files hold (every record, or each batch's base offset, leader epoch and CRC),
  read from its log dir, so replicas can be compared file by file.
- :func:`produce_to`: one Produce request to one chosen broker over a plain
  connection (no client-side retries or metadata), returning the partition's
  error code and base offset: how a test asks a possibly stale leader directly.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from tests.cluster.history import Recorder

WAIT_S = 60  # a guard against a hang, not a performance assertion


def _ck():
    import confluent_kafka

    return confluent_kafka


class LoadProducer:
    """Steady acks=all load from librdkafka (see the module docstring)."""

    def __init__(self, bootstrap: str, topic: str, partitions=(0,), rate: float = 500, prefix: str = "v",
                 **conf) -> None:
        self.topic, self.partitions, self.rate, self.prefix = topic, tuple(partitions), rate, prefix
        self.conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "enable.idempotence": False, "message.timeout.ms": 30000,
                     "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000, **conf}
        self.recorder = Recorder()
        self.sent: list[bytes] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"load-{topic}", daemon=True)
        self._producer = None

    def start(self) -> "LoadProducer":
        self._producer = _ck().Producer(self.conf)
        self._thread.start()
        return self

    def _run(self) -> None:
        interval = 1 / self.rate
        n = 0
        next_at = time.monotonic()
        while not self._stopping.is_set():
            value = b"%s-%06d" % (self.prefix.encode(), n)
            partition = self.partitions[n % len(self.partitions)]
            try:
                self._producer.produce(self.topic, value=value, partition=partition,
                                       on_delivery=self.recorder.on_delivery)
                self.sent.append(value)
                n += 1
            except BufferError:
                pass  # the queue is full while no leader answers: wait for it to drain
            self._producer.poll(0)
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))

    @property
    def acknowledged(self) -> int:
        return len(self.recorder.acknowledged)

    def wait_acknowledged(self, count: int, limit: float = WAIT_S) -> None:
        """Wait until ``count`` more sends than now are acknowledged."""
        target = self.acknowledged + count
        deadline = time.monotonic() + limit
        while self.acknowledged < target:
            assert time.monotonic() < deadline, f"only {self.acknowledged} of {target} acknowledged " \
                                                f"(errors {dict(self.recorder.errors)})"
            time.sleep(0.05)

    def stop(self, flush_limit: float = 40) -> Recorder:
        """Stop sending, flush for at most ``flush_limit`` s; returns the recorder, every value
        without a delivery report filed as indeterminate."""
        self._stopping.set()
        self._thread.join()
        self._producer.flush(flush_limit)
        done = {v for _, _, v in self.recorder.acknowledged} | self.recorder.indeterminate
        self.recorder.indeterminate |= {v for v in self.sent if v not in done}
        return self.recorder


def read_all(bootstrap: str, topic: str, partitions=(0,), limit: float = WAIT_S) -> list[tuple[int, int, bytes]]:
    """Every record of ``partitions`` from offset 0 to the high watermark, as a consumer reads them."""
    ck = _ck()
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "history-reader",
                            "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                            "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        out: list[tuple[int, int, bytes]] = []
        position = {p: 0 for p in partitions}
        deadline = time.monotonic() + limit
        while any(position[p] < ends[p] for p in partitions):
            assert time.monotonic() < deadline, f"read {position} of {ends} in {limit} s"
            msg = consumer.poll(0.5)
            if msg is None or (msg.error() and msg.error().code() == ck.KafkaError._PARTITION_EOF):
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.partition(), msg.offset(), msg.value()))
            position[msg.partition()] = msg.offset() + 1
        return out
    finally:
        consumer.close()


def _segments(data_dir: Path, topic: str, partition: int) -> list[Path]:
    return sorted((Path(data_dir) / f"{topic}-{partition}").glob("*.log"))


def replica_records(data_dir: Path, topic: str, partition: int) -> list[tuple[int, int, bytes]]:
    """``(partition, offset, value)`` of every data record in one replica's segment files."""
    from broker.records.batch import iter_records

    out = []
    for segment in _segments(data_dir, topic, partition):
        for entry in iter_records(segment.read_bytes()):
            if not getattr(entry.batch, "is_control", False):
                out.append((partition, entry.offset, entry.value))
    return out


def replica_batches(data_dir: Path, topic: str, partition: int) -> list[tuple[int, int, int, int]]:
    """``(base_offset, last_offset, partition_leader_epoch, crc)`` of every batch in one replica's segments."""
    from broker.records.batch import iter_batches

    return [(b.base_offset, b.last_offset, b.partition_leader_epoch, b.crc)
            for segment in _segments(data_dir, topic, partition)
            for b in iter_batches(segment.read_bytes())]


async def _produce_to(host: str, port: int, topic: str, partition: int, values: list[bytes], acks: int,
                      timeout_ms: int) -> tuple[int, int]:
    from broker.client._connection import BrokerConnection
    from broker.protocol import ApiKey
    from broker.records.batch import encode_batch_tuples

    now = int(time.time() * 1000)
    records = encode_batch_tuples([(now, None, v, []) for v in values])
    conn = BrokerConnection(host, port, request_timeout_ms=timeout_ms + 10000, connect_timeout_ms=5000)
    await conn.connect()
    try:
        resp = await conn.request(ApiKey.PRODUCE, {
            "transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
        }, version=8)
    finally:
        conn.close()
    answer = resp["responses"][0]["partition_responses"][0]
    return answer["error_code"], answer["base_offset"]


def produce_to(broker, topic: str, partition: int, values: list[bytes], acks: int = -1,
               timeout_ms: int = 5000) -> tuple[int, int]:
    """One Produce (v8) of ``values`` to ``broker`` (a BrokerProcess); ``(error_code, base_offset)``."""
    return asyncio.run(_produce_to(broker.host, broker.port, topic, partition, values, acks, timeout_ms))
