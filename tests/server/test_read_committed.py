"""read_committed consumers: the last stable offset, aborted transactions from ``.txnindex``, real clients.

Transactional data is produced over the wire; the COMMIT/ABORT markers are
appended to the partition's log by the same append path the transaction
coordinator uses (here with the broker stopped, on its real files), then the
broker is started again and real consumers read with both isolation levels.
"""

from __future__ import annotations

import time

from broker.log import Log, LogConfig
from broker.log.txn_index import read_entries, txn_index_path
from broker.protocol import ApiKey
from broker.records import BatchBuilder
from broker.records.control import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch

from .test_api import fetch_body, produce
from .wire import Wire

TOPIC = "txn"


def batch(pid: int, seq: int, value: bytes, transactional: bool) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=transactional)
    b.append(int(time.time() * 1000), None, value)
    return b.build()


def init_producer_id(w: Wire) -> int:
    return w.call(ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None, "transaction_timeout_ms": 60000})[
        "producer_id"]


def list_latest(w: Wire, isolation_level: int) -> int:
    body = {"replica_id": -1, "isolation_level": isolation_level,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                        "timestamp": -1, "max_num_offsets": 1}]}]}
    return w.call(ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]["offset"]


def fetch_committed(w: Wire) -> dict:
    body = fetch_body(TOPIC, 0)
    body["isolation_level"] = 1
    return w.call(ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]


def consume_confluent(broker, isolation: str) -> list[bytes]:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{isolation}",
                                  "isolation.level": isolation, "enable.auto.commit": False,
                                  "fetch.queue.backoff.ms": 10, "enable.partition.eof": True})
    c.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    out, deadline = [], time.monotonic() + 30
    while time.monotonic() < deadline:  # up to the end: the last stable offset for read_committed
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error() is None:
            out.append(m.value())
        elif m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
            break
    c.close()
    return out


def consume_kafka_python(broker) -> list[bytes]:
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                            enable_auto_commit=False, consumer_timeout_ms=3000)
    c.assign([kafka.TopicPartition(TOPIC, 0)])
    c.seek(kafka.TopicPartition(TOPIC, 0), 0)
    out = [m.value for m in c]
    c.close()
    return out


def consume_aiokafka(broker) -> list[bytes]:
    import asyncio

    import aiokafka

    async def run():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                                      enable_auto_commit=False)
        await c.start()
        try:
            tp = aiokafka.TopicPartition(TOPIC, 0)
            c.assign([tp])
            c.seek(tp, 0)
            out = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=300)).values():
                    out += [m.value for m in msgs]
            return out
        finally:
            await c.stop()

    return asyncio.run(run())


def test_read_committed_sees_committed_data_only_up_to_the_last_stable_offset(broker):
    with Wire(broker.bootstrap) as w:
        aborted, committed = init_producer_id(w), init_producer_id(w)
        assert produce(w, TOPIC, batch(aborted, 0, b"a1", True))["base_offset"] == 0
        assert produce(w, TOPIC, batch(committed, 0, b"c1", True))["base_offset"] == 1
        assert produce(w, TOPIC, batch(-1, -1, b"plain", False))["base_offset"] == 2
        assert produce(w, TOPIC, batch(aborted, 1, b"a2", True))["base_offset"] == 3
        # both transactions open: a read_committed consumer may read nothing yet
        assert (list_latest(w, 0), list_latest(w, 1)) == (4, 0)
        p = fetch_committed(w)
        assert (p["high_watermark"], p["last_stable_offset"], p["aborted_transactions"]) == (4, 0, [])
        assert p["records"] in (b"", None) or len(p["records"]) == 0
    assert consume_confluent(broker, "read_committed") == []
    assert broker.stop() == 0
    # the open transactions survive the restart (snapshot): still nothing to read
    broker.start()
    with Wire(broker.bootstrap) as w:
        assert list_latest(w, 1) == 0
    assert broker.stop() == 0
    log = Log.open(broker.data_dir / f"{TOPIC}-0", LogConfig())
    now = int(time.time() * 1000)
    log.append(build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.ABORT, 0), aborted, 0, now))
    log.append(build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 0), committed, 0, now))
    log.close()
    [entry] = read_entries(txn_index_path(log.dir / "00000000000000000000.log"))
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (aborted, 0, 4)
    broker.start()
    with Wire(broker.bootstrap) as w:
        assert list_latest(w, 1) == list_latest(w, 0) == 6
        p = fetch_committed(w)
        assert p["last_stable_offset"] == 6
        assert p["aborted_transactions"] == [{"producer_id": aborted, "first_offset": 0}]
    assert consume_confluent(broker, "read_committed") == [b"c1", b"plain"]
    assert consume_confluent(broker, "read_uncommitted") == [b"a1", b"c1", b"plain", b"a2"]
    assert consume_kafka_python(broker) == [b"c1", b"plain"]
    assert consume_aiokafka(broker) == [b"c1", b"plain"]
