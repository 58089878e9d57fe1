"""The source's columnar decoder (pipeline.columns) against the consumer's record decoder.

Fetch answers are built from real batches (every codec, nulls, headers, long
varints, LogAppendTime, control and aborted transactional batches, v0/v1
entries, a trailing partial batch) and decoded both ways; the Arrow rows must be
the consumer's records, field for field. Corrupt input must raise, as the
consumer's decoder does.
"""

from __future__ import annotations

import pytest

from broker.records.batch import BatchBuilder, TimestampType
from broker.records.compression import Compression
from broker.records.control import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch
from broker.records.convert import downconvert
from broker.records.fetched import iter_fetched
from broker.records.view import CorruptRecordError
from pipeline import columns
from pipeline.reading import arrow_schema

T0 = 1_700_000_000_000


def _batch(base_offset, records, compression=Compression.NONE, **kw) -> bytes:
    b = BatchBuilder(compression=compression, base_offset=base_offset, **kw)
    for ts, key, value, headers in records:
        b.append(ts, key, value, headers)
    return b.build()


def _records(n, start=0, headers=False):
    out = []
    for i in range(start, start + n):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        value = None if i % 11 == 5 else (b"" if i % 13 == 4 else bytes([i % 251]) * (20000 if i % 17 == 9 else i * 37 % 3000))
        hs = [("n", str(i).encode()), ("nil", None)] if headers and i % 2 else []
        out.append((T0 + (i * 7919) % 5_000_000 - 2_000_000, key, value, hs))
    return out


def _expected(records_buf, first, end, aborted=()):
    """What the consumer's decoder makes of the same bytes (aborted batches dropped as the client does)."""
    rows, dropping = [], set()
    pending = sorted(aborted)
    for fb in iter_fetched(records_buf, 0, first):
        while pending and pending[0][0] <= fb.last_offset:
            dropping.add(pending.pop(0)[1])
        if fb.is_control:
            dropping.discard(fb.producer_id)
            continue
        if fb.is_transactional and fb.producer_id in dropping:
            continue
        rows += [(k, v, o, ts, fb.timestamp_type, [{"key": hk, "value": hv} for hk, hv in h])
                 for o, ts, k, v, h in fb.records if o < end]
    return rows


def _decoded(records_buf, first, end, aborted=(), headers=True):
    s = columns.scan(records_buf, first, list(aborted))
    rb = columns.to_record_batch(s, "topic-ü", 3, first, end, arrow_schema(headers))
    if rb is None:
        return [], s
    d = rb.to_pydict()
    assert set(d["topic"]) == {"topic-ü"} and set(d["partition"]) == {3}
    rows = [(k, v, o, int(ts.timestamp() * 1000), tt, h if headers else None) for k, v, o, ts, tt, h in zip(
        d["key"], d["value"], d["offset"], d["timestamp"], d["timestampType"], d.get("headers", [None] * rb.num_rows))]
    return rows, s


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_with_nulls_headers_and_long_varints(codec):
    buf = (_batch(0, _records(50, 0, headers=True), codec) + _batch(50, _records(1, 50), codec)
           + _batch(51, _records(200, 51, headers=True), codec))
    rows, s = _decoded(buf, 0, 10**9)
    assert rows == _expected(buf, 0, 10**9) and len(rows) == 251
    assert s.next_offset == 251


def test_fetch_offset_and_range_end_cut_inside_batches_and_partial_tail_is_left():
    buf = _batch(100, _records(30)) + _batch(130, _records(30, 30), Compression.LZ4) + _batch(160, _records(5))[:-9]
    rows, s = _decoded(buf, 110, 145, headers=False)
    assert [r[2] for r in rows] == list(range(110, 145))
    assert rows == [r[:5] + (None,) for r in _expected(buf, 110, 145)]
    assert s.next_offset == 160  # the partial batch is fetched again


def test_log_append_time_takes_the_batch_timestamp():
    buf = _batch(0, _records(5), timestamp_type=TimestampType.LOG_APPEND_TIME)
    rows, _ = _decoded(buf, 0, 10)
    assert rows == _expected(buf, 0, 10) and {r[4] for r in rows} == {1}


def test_control_batches_and_aborted_transactions_are_dropped():
    abort = build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.ABORT, 0), 7, 0, T0, base_offset=5)
    commit = build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 0), 8, 0, T0, base_offset=9)
    buf = (_batch(0, _records(5), producer_id=7, producer_epoch=0, is_transactional=True) + abort
           + _batch(6, _records(3, 6), producer_id=8, producer_epoch=0, is_transactional=True) + commit
           + _batch(10, _records(2, 10)))
    rows, s = _decoded(buf, 0, 100, aborted=[(0, 7)])
    assert [r[2] for r in rows] == [6, 7, 8, 10, 11]
    assert rows == _expected(buf, 0, 100, aborted=[(0, 7)])
    assert s.next_offset == 12


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_entries(magic):
    buf = downconvert(_batch(0, _records(6)), magic)
    rows, _ = _decoded(buf, 2, 100)
    assert rows == _expected(buf, 2, 100) and [r[2] for r in rows] == [2, 3, 4, 5]


def test_nothing_to_decode_is_no_batch():
    assert _decoded(b"", 0, 10) == ([], columns.Scanned())
    buf = _batch(0, _records(3))
    assert _decoded(buf, 3, 10)[0] == []


def test_corruption_raises_as_the_consumer_does():
    good = bytearray(_batch(0, _records(4)))
    flipped = bytearray(good)
    flipped[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        columns.scan(bytes(flipped), 0)
    # a record whose fields do not span its declared length (CRC recomputed: a producer's bug, not the wire)
    b = BatchBuilder()
    b.append(T0, b"k", b"v")
    raw = bytearray(b.build())
    raw[61] += 2  # the first record's length varint: 2 bytes more than its fields
    import crc32c
    import struct
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    s = columns.scan(bytes(raw), 0)
    with pytest.raises(CorruptRecordError):
        columns.to_record_batch(s, "t", 0, 0, 10, arrow_schema(False))


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_equal_sized_runs_broken_by_other_sizes(codec):
    # 9,000 records: offset deltas of one, two and three varint bytes; every 500th record another size
    recs = [(T0 + i, b"k%05d" % i, b"x" * (100 if i % 500 else 7 + i % 3), []) for i in range(9000)]
    buf = _batch(0, recs, codec) + _batch(9000, recs[:20], codec)
    rows, s = _decoded(buf, 5, 9010)
    assert rows == _expected(buf, 5, 9010) and len(rows) == 9005


def test_a_wrong_length_inside_equal_sized_records_raises():
    import crc32c
    import struct
    raw = bytearray(_batch(0, [(T0, b"key", b"v" * 50, [])] * 40))
    at = 61 + 20 * (raw[61] // 2 + 1)  # record 20's length varint (each record: 1 length byte + body)
    raw[at] += 2
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    s = columns.scan(bytes(raw), 0)
    with pytest.raises(CorruptRecordError):
        columns.to_record_batch(s, "t", 0, 0, 100, arrow_schema(False))
