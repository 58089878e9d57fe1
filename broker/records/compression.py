"""Compression codecs of Kafka record batches and legacy wrapper messages.

The codec id sits in bits 0-2 of a batch's (or a legacy message's) attributes:

    0 NONE   1 GZIP   2 SNAPPY   3 LZ4   4 ZSTD (RecordBatch v2 only)

What each codec's compressed bytes look like, as Kafka clients write them:

* GZIP: an RFC 1952 gzip member (stdlib :mod:`gzip`). We write ``mtime = 0``
  so our output is deterministic.
* SNAPPY: the Java client writes xerial's framed stream::

      0   8  magic  82 53 4e 41 50 50 59 00  ("\\x82SNAPPY\\0")
      8   4  version        int32 = 1
      12  4  compatible     int32 = 1
      16  ...  blocks: int32 compressed length, then a raw snappy block
                         (each block expands to at most 32 KiB)

  librdkafka and some older clients write one raw snappy block instead. We
  write the xerial stream and read both (the magic decides).
* LZ4: the LZ4 frame format (``04 22 4d 18`` magic, FLG, BD, optional
  content size, header checksum HC, data blocks, end mark). Kafka before
  0.10 (KAFKA-3160) computed HC over the magic *and* the descriptor instead of
  the descriptor alone; messages of magic 0 carry that broken checksum.
  :func:`compress_lz4_legacy` writes it, :func:`decompress` reads both.
* ZSTD: a zstd frame; the content size may be absent (librdkafka streams), so
  decompression never relies on it.

Codec work is done by the libraries (zlib, python-snappy, lz4, zstandard); the
only hand-written piece is the 32-bit xxHash of the few LZ4 descriptor bytes,
which none of the dependencies expose.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import lz4.frame
import snappy
import zstandard


class UnsupportedCompressionTypeError(ValueError):
    """A codec id that is unknown, or not allowed in this format (zstd before v2).

    Maps to Kafka error UNSUPPORTED_COMPRESSION_TYPE (76).
    """

    error_code = 76


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

LZ4_MAGIC = b"\x04\x22\x4d\x18"

_I32 = struct.Struct(">i")
_zstd_compressor = zstandard.ZstdCompressor(level=3)
_zstd_decompressor = zstandard.ZstdDecompressor()


def codec_of(value: int) -> Compression:
    try:
        return Compression(value)
    except ValueError:
        raise UnsupportedCompressionTypeError(f"unknown compression codec {value}") from None


# -- public API --------------------------------------------------------------
def compress(codec: int, data) -> bytes:
    """Compress ``data`` the way a Kafka client does for ``codec``."""
    codec = codec_of(codec)
    data = bytes(data)
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == Compression.SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data)
    return _zstd_compressor.compress(data)


def decompress(codec: int, data) -> bytes:
    """Decompress ``data``; accepts every variant described in the module docstring.

    Raises :class:`ValueError` (a :class:`CompressionError`) for malformed input.
    """
    codec = codec_of(codec)
    data = bytes(data)
    try:
        if codec == Compression.NONE:
            return data
        if codec == Compression.GZIP:
            return gzip.decompress(data)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return lz4.frame.decompress(_lz4_fix_header_checksum(data))
        return _zstd_decompress(data)
    except Exception as exc:  # each library has its own error classes
        raise CompressionError(f"{codec.name} decompression failed: {exc}") from exc


def decompress_bounded(codec: int, data, limit: int) -> bytes:
    """Decompress ``data`` as :func:`decompress` does, producing at most ``limit`` bytes: input that would
    expand further raises :class:`CompressionError` before the excess is made (a small compressed payload
    cannot make the broker hold gigabytes). For payloads that are not record batches, such as a client's
    pushed telemetry (KIP-714)."""
    codec = codec_of(codec)
    data = bytes(data)
    try:
        if codec == Compression.NONE:
            out = data
        elif codec == Compression.GZIP:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = inflater.decompress(data, limit + 1)
            if len(out) <= limit and not inflater.eof:
                raise CompressionError("gzip stream truncated")
        elif codec == Compression.SNAPPY:
            out = _snappy_decompress(data, limit)
        elif codec == Compression.LZ4:
            out = lz4.frame.LZ4FrameDecompressor().decompress(_lz4_fix_header_checksum(data), max_length=limit + 1)
        else:
            with _zstd_decompressor.stream_reader(data, read_across_frames=True) as reader:
                out = reader.read(limit + 1)
    except CompressionError:
        raise
    except Exception as exc:  # each library has its own error classes
        raise CompressionError(f"{codec.name} decompression failed: {exc}") from exc
    if len(out) > limit:
        raise CompressionError(f"{codec.name} data expands to more than {limit} bytes")
    return out


def compress_lz4_legacy(data) -> bytes:
    """LZ4 frame with the pre-0.10 header checksum (KAFKA-3160), for magic 0."""
    frame = bytearray(_lz4_compress(bytes(data)))
    # _lz4_compress writes no content size: the descriptor is FLG, BD; HC is byte 6.
    frame[6] = (_xxh32(bytes(frame[0:6])) >> 8) & 0xFF
    return bytes(frame)


class CompressionError(ValueError):
    """Compressed bytes that do not decompress. Maps to CORRUPT_MESSAGE (2)."""

    error_code = 2


# -- snappy -------------------------------------------------------------------
def _snappy_xerial_compress(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = snappy.compress(data[start : start + XERIAL_BLOCK_SIZE])
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes, limit: int | None = None) -> bytes:
    """A raw block or a xerial stream; with ``limit``, CompressionError before making more than that."""
    if not data.startswith(XERIAL_MAGIC):
        _snappy_check_size(data, limit)
        return snappy.decompress(data)
    if len(data) < len(XERIAL_HEADER):
        raise CompressionError("xerial snappy stream shorter than its header")
    out = []
    pos = len(XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("xerial snappy block length truncated")
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CompressionError(f"xerial snappy block of {size} bytes runs past the end")
        block = data[pos : pos + size]
        if limit is not None:
            limit -= _snappy_check_size(block, limit)
        out.append(snappy.decompress(block))
        pos += size
    return b"".join(out)


def _snappy_check_size(block: bytes, limit: int | None) -> int:
    """The size a raw snappy block expands to (its leading varint); CompressionError when over ``limit``."""
    if limit is None:
        return 0
    size = 0
    for i, byte in enumerate(block[:5]):
        size |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            break
    else:
        raise CompressionError("snappy block without a length")
    if size > limit:
        raise CompressionError(f"SNAPPY data expands to more than its limit ({size} bytes)")
    return size


# -- lz4 ----------------------------------------------------------------------
def _lz4_compress(data: bytes) -> bytes:
    # As the Java client: 64 KiB independent blocks, no checksums, no content size.
    return lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )


def _lz4_fix_header_checksum(data: bytes) -> bytes:
    """Return ``data`` with a correct frame header checksum if it had the legacy one."""
    if len(data) < 7 or data[:4] != LZ4_MAGIC:
        return data
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= end:
        return data
    correct = (_xxh32(data[4:end]) >> 8) & 0xFF
    if data[end] == correct:
        return data
    if data[end] == (_xxh32(data[0:end]) >> 8) & 0xFF:
        return data[:end] + bytes([correct]) + data[end + 1 :]
    return data


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    """32-bit xxHash (seed 0) of a short input: only ever the LZ4 frame descriptor."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# -- zstd ---------------------------------------------------------------------
def _zstd_decompress(data: bytes) -> bytes:
    # decompressobj copes with frames that do not state their content size.
    out = []
    rest = data
    while rest:
        obj = _zstd_decompressor.decompressobj()
        out.append(obj.decompress(rest))
        if not obj.eof:
            raise CompressionError("zstd frame truncated")
        rest = obj.unused_data
    return b"".join(out)


__all__ = [
    "Compression",
    "CompressionError",
    "UnsupportedCompressionTypeError",
    "compress",
    "compress_lz4_legacy",
    "decompress",
    "decompress_bounded",
    "codec_of",
]
