"""Every codec round-trips, and every variant real clients write decodes."""

import gzip
import os
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records.compression import (
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    Compression,
    CompressionError,
    UnsupportedCompressionTypeError,
    _xxh32,
    compress,
    compress_lz4_legacy,
    decompress,
)

PAYLOADS = [b"", b"x", os.urandom(1000), b"kafka " * 20000, os.urandom(200_000)]


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("size_index", range(len(PAYLOADS)))
def test_round_trip(codec, size_index):
    data = PAYLOADS[size_index]
    assert decompress(codec, compress(codec, data)) == data


@given(st.binary(max_size=5000), st.sampled_from(list(Compression)))
@settings(max_examples=60, deadline=None)
def test_round_trip_property(data, codec):
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_writes_xerial_frames_and_reads_raw():
    data = b"abc" * XERIAL_BLOCK_SIZE  # three blocks
    framed = compress(Compression.SNAPPY, data)
    assert framed.startswith(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    first_block = struct.unpack_from(">i", framed, 16)[0]
    assert len(snappy.decompress(framed[20 : 20 + first_block])) == XERIAL_BLOCK_SIZE
    assert decompress(Compression.SNAPPY, snappy.compress(data)) == data


def test_snappy_truncated_xerial_stream_is_an_error():
    framed = compress(Compression.SNAPPY, os.urandom(5000))
    with pytest.raises(CompressionError):
        decompress(Compression.SNAPPY, framed[:-10])


def test_lz4_frame_as_the_java_client_writes_it():
    frame = compress(Compression.LZ4, b"hello" * 100)
    info = lz4.frame.get_frame_info(frame)
    assert info["block_size_id"] == 4  # 64 KiB blocks
    assert not info["block_linked"] and not info["content_checksum"] and info["content_size"] == 0


def test_lz4_legacy_checksum_is_written_and_both_are_read():
    data = os.urandom(300) * 7
    legacy = compress_lz4_legacy(data)
    standard = compress(Compression.LZ4, data)
    assert legacy[:6] == standard[:6] and legacy[7:] == standard[7:]
    assert legacy[6] == (_xxh32(legacy[0:6]) >> 8) & 0xFF  # KAFKA-3160: magic included
    assert legacy[6] != standard[6]
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(legacy)  # the library alone rejects it
    assert decompress(Compression.LZ4, legacy) == data
    assert decompress(Compression.LZ4, standard) == data


def test_lz4_with_content_size_and_checksums_is_read():
    data = os.urandom(100) * 50
    frame = lz4.frame.compress(data, store_size=True, content_checksum=True, block_checksum=True)
    assert decompress(Compression.LZ4, frame) == data


def test_xxh32_known_values():
    assert _xxh32(b"") == 0x02CC5D05
    # the header checksums lz4 itself writes are xxh32(descriptor) >> 8
    for kwargs in ({}, {"store_size": True}, {"block_size": lz4.frame.BLOCKSIZE_MAX4MB}):
        frame = lz4.frame.compress(b"data" * 100, **kwargs)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[end] == (_xxh32(frame[4:end]) >> 8) & 0xFF
    long_input = bytes(range(40))
    assert _xxh32(long_input) == _xxh32(long_input)  # 16-byte stripes path runs


def test_zstd_frames_without_content_size_and_concatenated():
    data = os.urandom(100) * 100
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(Compression.ZSTD, frame) == data
    assert decompress(Compression.ZSTD, frame + frame) == data + data
    with pytest.raises(CompressionError):
        decompress(Compression.ZSTD, frame[:-3])


def test_gzip_is_deterministic_and_standard():
    data = b"abc" * 100
    assert compress(Compression.GZIP, data) == compress(Compression.GZIP, data)
    assert gzip.decompress(compress(Compression.GZIP, data)) == data


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_garbage_raises_compression_error(codec):
    with pytest.raises(CompressionError) as info:
        decompress(codec, b"\x00garbage that is not compressed" * 3)
    assert info.value.error_code == 2


def test_unknown_codec():
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        compress(5, b"x")
    assert info.value.error_code == 76
