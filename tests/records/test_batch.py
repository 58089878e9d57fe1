"""RecordBatch v2: encoding, decoding, validation, and in-place patching."""

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records import (
    BatchBuilder,
    BatchView,
    Compression,
    CorruptRecordError,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    decode_batch,
    encode_batch,
    iter_batch_views,
    iter_batches,
    iter_records,
    set_log_append_time,
)
from .strategies import records as record_lists


def build(rows, **kwargs):
    builder = BatchBuilder(**kwargs)
    for ts, key, value, headers in rows:
        builder.append(ts, key, value, headers)
    return builder.build()


SAMPLE = [
    (1000, b"k0", b"v0", [Header("a", b"1")]),
    (995, None, b"", [Header("null", None), Header("empty", b"")]),
    (1500, b"", None, []),
    (1001, b"k3", bytes(range(256)) * 40, [Header("ü", b"\x00")] * 3),
]


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec(codec):
    raw = build(SAMPLE, compression=codec, base_offset=42, producer_id=7, producer_epoch=3, base_sequence=11,
                partition_leader_epoch=5, is_transactional=True)
    batch = decode_batch(raw)
    assert batch.compression == codec
    assert (batch.base_offset, batch.partition_leader_epoch) == (42, 5)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 11)
    assert batch.is_transactional and not batch.is_control
    assert batch.base_timestamp == 1000 and batch.max_timestamp == 1500
    assert batch.last_offset_delta == 3 and batch.last_offset == 45 and batch.next_offset == 46
    got = [(batch.timestamp_of(r), r.key, r.value, r.headers) for r in batch.records]
    assert got == [(t, k, v, h) for t, k, v, h in SAMPLE]
    assert [batch.offset_of(r) for r in batch.records] == [42, 43, 44, 45]
    assert encode_batch(batch) == raw
    view = BatchView(raw)
    view.validate()
    assert view.records_count == 4 and view.compression == codec and view.last_offset == 45


@given(record_lists, st.sampled_from(list(Compression)), st.integers(0, 2**40))
@settings(max_examples=80, deadline=None)
def test_round_trip_property(rows, codec, base_offset):
    raw = build(rows, compression=codec, base_offset=base_offset)
    batch = decode_batch(raw)
    assert [(batch.offset_of(r), batch.timestamp_of(r), r.key, r.value, r.headers) for r in batch.records] == [
        (base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)
    ]
    assert batch.max_timestamp == max(ts for ts, *_ in rows)
    assert encode_batch(batch) == raw


@given(st.lists(st.builds(Record, st.integers(0, 2**31 - 1), st.integers(-(2**62), 2**62),
                          st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=20),
                          st.just([])), max_size=5))
def test_arbitrary_deltas_round_trip(records):
    batch = RecordBatch(base_timestamp=2**62, records=records, last_offset_delta=7, max_timestamp=-5)
    decoded = decode_batch(encode_batch(batch))
    assert decoded.records == records
    assert (decoded.last_offset_delta, decoded.max_timestamp) == (7, -5)


def test_empty_batch_keeps_its_header():
    batch = RecordBatch(base_offset=10, last_offset_delta=4, base_timestamp=77, max_timestamp=99, producer_id=3)
    decoded = decode_batch(encode_batch(batch))
    assert decoded.records == [] and decoded.next_offset == 15 and decoded.max_timestamp == 99


def test_crc_is_crc32c_over_attributes_to_end():
    raw = build(SAMPLE)
    assert struct.unpack_from(">I", raw, 17)[0] == crc32c.crc32c(raw[21:])
    assert struct.unpack_from(">i", raw, 8)[0] == len(raw) - 12
    assert raw[16] == 2


def test_patch_base_offset_and_leader_epoch_in_place_keeps_crc():
    buf = bytearray(build(SAMPLE, compression=Compression.LZ4) * 2)
    views = list(iter_batch_views(buf))
    assert len(views) == 2
    for i, view in enumerate(views):
        view.base_offset = 1000 + 10 * i
        view.partition_leader_epoch = 9
        view.validate()
    assert [b.base_offset for b in iter_batches(buf)] == [1000, 1010]
    assert decode_batch(buf).partition_leader_epoch == 9


@pytest.mark.parametrize("position", [21, 30, 40, 60, 61, 80, -1])
def test_flipped_byte_inside_crc_range_fails_validation(position):
    buf = bytearray(build(SAMPLE))
    buf[position] ^= 0x40
    with pytest.raises(CorruptRecordError):
        BatchView(buf).validate()
    with pytest.raises(CorruptRecordError):
        decode_batch(buf)


def test_set_log_append_time():
    buf = bytearray(build(SAMPLE, compression=Compression.GZIP))
    view = BatchView(buf)
    set_log_append_time(view, 123456)
    view.validate()
    batch = decode_batch(buf)
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [batch.timestamp_of(r) for r in batch.records] == [123456] * 4
    assert view.timestamp_type == 1 and view.max_timestamp == 123456


def _with_payload(raw: bytes, payload: bytes, records_count: int) -> bytes:
    """Re-frame ``raw``'s header around ``payload`` with a correct CRC."""
    head = bytearray(raw[:61])
    struct.pack_into(">i", head, 57, records_count)
    struct.pack_into(">i", head, 8, 49 + len(payload))
    body = bytes(head[21:]) + payload
    struct.pack_into(">I", head, 17, crc32c.crc32c(body))
    return bytes(head) + payload


def test_inconsistencies_inside_a_valid_crc_are_reported():
    raw = build(SAMPLE[:2])
    payload = raw[61:]
    cases = {
        "count too high": _with_payload(raw, payload, 3),
        "count too low": _with_payload(raw, payload, 1),
        "truncated record": _with_payload(raw, payload[:-3], 2),
        "truncated varint": _with_payload(raw, payload + b"\xff", 3),
        "record length past end": _with_payload(raw, b"\x7e" + payload[1:], 2),
        "negative count": _with_payload(raw, payload, -1),
    }
    for name, data in cases.items():
        with pytest.raises(CorruptRecordError):
            decode_batch(data)
            pytest.fail(name)


def test_bad_compressed_payload_is_corrupt():
    raw = build(SAMPLE, compression=Compression.ZSTD)
    broken = _with_payload(raw, raw[61:-5], 4)
    with pytest.raises(CorruptRecordError, match="ZSTD"):
        decode_batch(broken)


def test_short_buffers():
    raw = build(SAMPLE)
    for cut in (0, 1, 12, 60, 61, len(raw) - 1):
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:cut])


def test_iter_records_skips_trailing_partial_batch_fed_byte_by_byte():
    first = build(SAMPLE[:2], base_offset=0)
    second = build(SAMPLE[2:], base_offset=2, compression=Compression.SNAPPY)
    whole = first + second
    for cut in range(len(whole) + 1):
        entries = list(iter_records(whole[:cut]))
        expected = 0 if cut < len(first) else (2 if cut < len(whole) else 4)
        assert [e.offset for e in entries] == list(range(expected))
    # extra bytes after a complete buffer that do not yet form a header are ignored too
    assert len(list(iter_records(whole + b"\x00" * 11))) == 4
