"""Legacy message sets v0/v1: round trips, wrappers, offsets, CRC, truncation."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records import (
    Compression,
    CorruptRecordError,
    LegacyMessage,
    UnsupportedCompressionTypeError,
    compress,
    decode_message,
    decode_message_set,
    encode_message,
    encode_message_set,
    iter_legacy_entries,
    iter_records,
)
from broker.records.compression import _xxh32
from .strategies import maybe_bytes

LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


def messages(base_offset=100, n=5):
    return [
        LegacyMessage(base_offset + i, 1, 0, 5000 + (i * 7) % 3, None if i == 1 else b"k%d" % i,
                      None if i == 2 else b"value %d" % i * (i + 1))
        for i in range(n)
    ]


def expected(msgs, magic):
    return [(m.offset, m.timestamp if magic == 1 else -1, m.key, m.value) for m in msgs]


def seen(decoded):
    return [(m.offset, m.timestamp, m.key, m.value) for m in decoded]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_round_trip(magic, codec):
    msgs = messages()
    data = encode_message_set(msgs, magic, codec)
    assert seen(decode_message_set(data)) == expected(msgs, magic)
    wrappers = {id(w): w for w, _ in iter_legacy_entries(data)}
    if codec != Compression.NONE:
        (wrapper,) = wrappers.values()
        assert wrapper.offset == 104 and wrapper.key is None and wrapper.compression == codec
        if magic == 1:
            assert wrapper.timestamp == max(m.timestamp for m in msgs)


@given(st.lists(st.tuples(maybe_bytes, maybe_bytes, st.integers(0, 2**42)), min_size=1, max_size=10),
       st.sampled_from([0, 1]), st.sampled_from(LEGACY_CODECS))
@settings(max_examples=60, deadline=None)
def test_round_trip_property(rows, magic, codec):
    msgs = [LegacyMessage(i, magic, 0, ts, k, v) for i, (k, v, ts) in enumerate(rows)]
    assert seen(decode_message_set(encode_message_set(msgs, magic, codec))) == expected(msgs, magic)


def test_byte_layout_v1():
    data = encode_message(LegacyMessage(7, 1, 0, 1234, b"k", b"vv"))
    offset, size, crc, magic, attrs, ts = struct.unpack_from(">qiIbbq", data)
    assert (offset, size, magic, attrs, ts) == (7, len(data) - 12, 1, 0, 1234)
    assert crc == zlib.crc32(data[16:])
    assert data[26:] == b"\x00\x00\x00\x01k\x00\x00\x00\x02vv"


def test_v1_wrapper_inner_offsets_are_relative():
    data = encode_message_set(messages(base_offset=100), 1, Compression.GZIP)
    wrapper, _ = decode_message(data)
    inner = decode_message_set(zlib.decompress(wrapper.value, 31))
    assert [m.offset for m in inner] == [0, 1, 2, 3, 4]
    # a producer's wrapper offset is not yet assigned; the broker only rewrites the wrapper
    rebased = bytearray(data)
    struct.pack_into(">q", rebased, 0, 2000)
    assert [m.offset for m in decode_message_set(bytes(rebased))] == [1996, 1997, 1998, 1999, 2000]


def test_v0_wrapper_inner_offsets_are_absolute():
    data = encode_message_set(messages(base_offset=100), 0, Compression.GZIP)
    wrapper, _ = decode_message(data)
    assert [m.offset for m in decode_message_set(zlib.decompress(wrapper.value, 31))] == [100, 101, 102, 103, 104]
    assert [m.offset for m in decode_message_set(data)] == [100, 101, 102, 103, 104]


def test_v1_log_append_time_wrapper_overrides_inner_timestamps():
    data = encode_message_set(messages(), 1, Compression.SNAPPY, timestamp_type=1, log_append_time=99999)
    decoded = decode_message_set(data)
    assert {m.timestamp for m in decoded} == {99999}
    assert all(m.timestamp_type == 1 for m in decoded)
    assert [e.timestamp for e in iter_records(data)] == [99999] * 5


def test_lz4_v0_uses_the_broken_header_checksum_and_v1_the_correct_one():
    for magic in (0, 1):
        data = encode_message_set(messages(), magic, Compression.LZ4)
        wrapper, _ = decode_message(data)
        frame = wrapper.value
        broken = (_xxh32(frame[0:6]) >> 8) & 0xFF
        correct = (_xxh32(frame[4:6]) >> 8) & 0xFF
        assert frame[6] == (broken if magic == 0 else correct)
        assert len(decode_message_set(data)) == 5


def test_v1_lz4_with_broken_checksum_is_also_read():
    inner = encode_message_set(messages(0), 1)
    from broker.records import compress_lz4_legacy

    wrapper = encode_message(LegacyMessage(4, 1, 3, 0, None, compress_lz4_legacy(inner)))
    assert [m.key for m in decode_message_set(wrapper)] == [m.key for m in messages(0)]


def test_zstd_is_refused():
    with pytest.raises(UnsupportedCompressionTypeError):
        encode_message_set(messages(), 1, Compression.ZSTD)


def test_trailing_partial_message_is_tolerated():
    data = encode_message_set(messages(), 1) + encode_message_set(messages(200), 0, Compression.GZIP)
    full = len(decode_message_set(data))
    assert full == 10
    boundaries = []
    pos = 0
    while pos < len(data):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        boundaries.append(pos)
    for cut in range(len(data)):
        complete = sum(1 for b in boundaries if b <= cut)
        expected_count = min(complete, 5) + (5 if complete == 6 else 0)
        assert len(decode_message_set(data[:cut])) == expected_count


def test_corruption_is_detected():
    data = bytearray(encode_message_set(messages(), 1))
    data[25] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC-32"):
        decode_message_set(bytes(data))
    nested = encode_message(LegacyMessage(0, 1, 1, 0, None, compress(1, encode_message_set(messages(), 1, 1))))
    with pytest.raises(CorruptRecordError, match="nested"):
        decode_message_set(nested)
    with pytest.raises(CorruptRecordError, match="null value"):
        decode_message_set(encode_message(LegacyMessage(0, 1, 1, 0, None, None)))
    bad_inner = encode_message(LegacyMessage(0, 0, 2, -1, None, compress(2, encode_message_set(messages(), 0)[:-2])))
    with pytest.raises(CorruptRecordError):
        decode_message_set(bad_inner)
