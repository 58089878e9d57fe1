"""A task's read (pipeline.reading.read_range) against our client's consumer, on real broker data.

confluent-kafka writes each codec's batches (none, gzip, snappy, lz4, zstd) to
one of our brokers: runs of equal-sized records (the columnar decoder's stride
path), records of varying sizes with null keys, null and empty values and
headers, and transactions, one committed and one aborted, with plain records
produced between their batches. The task's Arrow rows must be the records our
``Consumer`` returns for the same partition, field for field, under
read_committed (aborted batches and control records dropped) and
read_uncommitted.
"""

from __future__ import annotations

import pytest

from broker.client import Consumer, TopicPartition
from pipeline import options as opt
from pipeline.reading import RangePartition, read_range

from .conftest import create

ck = pytest.importorskip("confluent_kafka")

T0 = 1_700_000_000_000


def _fill(bootstrap: str, topic: str, codec: str) -> None:
    common = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20}
    plain = ck.Producer(common)
    txn = ck.Producer({**common, "transactional.id": f"{topic}-txn"})
    txn.init_transactions(30)
    for i in range(300):  # equal sizes; timestamps whose deltas take one, two and three varint bytes
        plain.produce(topic, b"v" * 500, f"k{i:05d}".encode(), partition=0, timestamp=T0 + i * i)
    plain.flush(30)
    for i in range(120):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        value = None if i % 11 == 5 else (b"" if i % 13 == 4 else bytes([i % 251]) * (i * 37 % 3000))
        headers = [("n", str(i).encode()), ("nil", None)] if i % 3 == 1 else None
        plain.produce(topic, value, key, partition=0, timestamp=T0 + 10 * i, headers=headers)
    plain.flush(30)
    for outcome in ("commit", "abort"):
        txn.begin_transaction()
        for i in range(60):
            txn.produce(topic, f"{outcome}-{i}".encode() * 20, b"t", partition=0, headers=[("o", outcome.encode())])
            if i == 30:
                txn.flush(30)  # the transaction's first batch is in the log before these plain records
                for j in range(10):
                    plain.produce(topic, f"between-{outcome}-{j}".encode(), None, partition=0)
                plain.flush(30)
        txn.flush(30)  # abort_transaction would drop records not yet sent
        txn.commit_transaction(30) if outcome == "commit" else txn.abort_transaction(30)
    plain.produce(topic, b"last", b"last", partition=0)
    plain.flush(30)


def _consumed(bootstrap: str, topic: str, isolation: str, end: int) -> list[tuple]:
    tp = TopicPartition(topic, 0)
    rows = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False) as c:
        c.assign([tp])
        c.seek(tp, 0)
        while c.position(tp) < end:
            rows += [(r.key, r.value, r.offset, r.timestamp, r.timestamp_type,
                      [{"key": k, "value": v} for k, v in r.headers]) for r in c.poll(1000)]
    return rows


def _task_rows(bootstrap: str, topic: str, isolation: str, end: int) -> list[tuple]:
    options = {"kafka.bootstrap.servers": bootstrap, "kafka.isolation.level": isolation}
    part = RangePartition(opt.OffsetRange(topic, 0, 0, end), last=True)
    rows = []
    for batch in read_range(options, part, include_headers=True, commit_group=None):
        d = batch.to_pydict()
        assert set(d["topic"]) == {topic} and set(d["partition"]) == {0}
        rows += [(k, v, o, int(ts.timestamp() * 1000), tt, h) for k, v, o, ts, tt, h in zip(
            d["key"], d["value"], d["offset"], d["timestamp"], d["timestampType"], d["headers"])]
    return rows


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_task_rows_are_the_consumers_records(kafka, topic_name, codec):
    topic = topic_name()
    create(kafka.bootstrap, (topic, 1))
    _fill(kafka.bootstrap, topic, codec)
    with Consumer(bootstrap_servers=kafka.bootstrap) as c:
        end = c.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    for isolation in ("read_committed", "read_uncommitted"):
        expected = _consumed(kafka.bootstrap, topic, isolation, end)
        assert _task_rows(kafka.bootstrap, topic, isolation, end) == expected
        values = [r[1] for r in expected]
        assert None in values and b"" in values and None in [r[0] for r in expected]
        assert any(h == {"key": "nil", "value": None} for r in expected for h in r[5])
        aborted = [v for v in values if v and v.startswith(b"abort-")]
        assert len(aborted) == (0 if isolation == "read_committed" else 60)
        assert len(expected) == 300 + 120 + 60 + 20 + 1 + len(aborted)
