"""A read_committed consumer drops the batches of aborted transactions, as Kafka's consumer does: from
each aborted transaction's first offset (the Fetch response's ``aborted_transactions``) the producer's
transactional batches are skipped up to its ABORT marker. The response is built by hand: the bytes a
broker sends for a partition holding aborted and committed transactions of two producers."""

from __future__ import annotations

from broker.client._config import ConsumerConfig
from broker.client._fetcher import Fetcher, SubscriptionState
from broker.client._serde import bytes_deserializer
from broker.client._types import TopicPartition
from broker.records import BatchBuilder
from broker.records.control import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch


def data(base_offset: int, producer_id: int, *values: bytes, transactional: bool = True) -> bytes:
    builder = BatchBuilder(base_offset=base_offset, producer_id=producer_id, producer_epoch=0, base_sequence=0,
                           is_transactional=transactional)
    for value in values:
        builder.append(1000, None, value)
    return builder.build()


def marker(base_offset: int, producer_id: int, commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker_batch(EndTransactionMarker(kind, 0), producer_id, 0, 1000, base_offset=base_offset)


def fetched(isolation_level: str, records: bytes, aborted: list[tuple[int, int]]) -> list[tuple[int, bytes]]:
    tp = TopicPartition("t", 0)
    subs = SubscriptionState()
    subs.assign([tp])
    subs.assignment[tp].position = 0
    fetcher = Fetcher(None, ConsumerConfig(isolation_level=isolation_level), subs, bytes_deserializer,
                      bytes_deserializer)
    fetcher._handle({"responses": [{"topic": "t", "partitions": [{
        "partition_index": 0, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
        "log_start_offset": 0, "records": records,
        "aborted_transactions": [{"producer_id": p, "first_offset": o} for p, o in aborted]}]}]}, {tp: 0})
    return [(r.offset, r.value) for r in fetcher.buffer[tp]]


LOG = b"".join([
    data(0, 5, b"p5-aborted-a", b"p5-aborted-b"), marker(2, 5, commit=False),
    data(3, 6, b"p6-committed"), marker(4, 6, commit=True),
    data(5, -1, b"plain", transactional=False),
    data(6, 5, b"p5-aborted-again"), marker(7, 5, commit=False),
    data(8, 5, b"p5-committed"), marker(9, 5, commit=True),
])


def test_read_committed_drops_aborted_transactions_and_markers():
    assert fetched("read_committed", LOG, [(5, 0), (5, 6)]) == [
        (3, b"p6-committed"), (5, b"plain"), (8, b"p5-committed")]


def test_read_uncommitted_keeps_everything_but_the_markers():
    assert [o for o, _ in fetched("read_uncommitted", LOG, [])] == [0, 1, 3, 5, 6, 8]
