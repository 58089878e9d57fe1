"""Legacy message sets: Message v0 (magic 0, Kafka < 0.10) and v1 (magic 1, 0.10.x).

A message set is a plain concatenation of entries (big-endian)::

    offset        int64
    message_size  int32    bytes after this field
    crc           uint32   CRC-32 (zlib, not C) of magic .. end
    magic         int8     0 or 1
    attributes    int8     bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
                           bit 3 timestamp type (v1 only; 1 = LogAppendTime)
    timestamp     int64    v1 only
    key_length    int32    -1 for a null key
    key           bytes
    value_length  int32    -1 for a null value
    value         bytes

A compressed entry is a *wrapper*: null key, value = the compressed bytes of
an inner message set of uncompressed messages. Offsets inside a wrapper:

* v0: inner offsets are absolute; the wrapper carries the last one.
* v1: inner offsets are relative (0 .. n-1 for a fresh batch); the wrapper
  carries the absolute offset of the last inner message, so
  ``absolute = wrapper.offset - inner[-1].offset + inner.offset``. With
  LogAppendTime the wrapper's timestamp applies to every inner message.

LZ4 wrappers of magic 0 carry the broken frame header checksum of KAFKA-3160;
we write it for magic 0 and read either. Zstd never appears in v0/v1.
A message set read from a log or a fetch may end in a partial entry: readers
stop there silently. Nothing here does I/O.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, replace
from typing import Iterator, Sequence

from broker.records.compression import (
    Compression,
    CompressionError,
    UnsupportedCompressionTypeError,
    codec_of,
    compress,
    compress_lz4_legacy,
    decompress,
)
from broker.records.view import COMPRESSION_MASK, LOG_OVERHEAD, MAGIC_OFFSET, TIMESTAMP_TYPE_MASK, CorruptRecordError

NO_TIMESTAMP = -1
_HEAD = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
MIN_MESSAGE_SIZE = {0: 14, 1: 22}  # crc .. value_length with null key and value


@dataclass(slots=True)
class LegacyMessage:
    """One v0/v1 message. ``timestamp`` is -1 (NO_TIMESTAMP) for v0."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc: int | None = None

    @property
    def compression(self) -> Compression:
        return codec_of(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime, -1 for v0 (no timestamps)."""
        if self.magic == 0:
            return -1
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0


def _bytes_field(value: bytes | None) -> bytes:
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + bytes(value)


def encode_message(msg: LegacyMessage) -> bytes:
    """The entry (offset, size, crc, body) of one message, CRC computed here."""
    if msg.magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {msg.magic}")
    body = struct.pack(">bb", msg.magic, msg.attributes)
    if msg.magic == 1:
        body += _I64.pack(msg.timestamp)
    body += _bytes_field(msg.key) + _bytes_field(msg.value)
    return struct.pack(">qiI", msg.offset, 4 + len(body), zlib.crc32(body)) + body


def encode_message_set(
    messages: Sequence[LegacyMessage],
    magic: int,
    compression: int = Compression.NONE,
    timestamp_type: int = 0,
    log_append_time: int | None = None,
) -> bytes:
    """Encode ``messages`` (their offset, timestamp, key, value) at ``magic``.

    Uncompressed: one entry per message. Compressed: one wrapper whose value is
    the compressed inner set (offsets per the module docstring). For v1 with
    ``timestamp_type=1`` the wrapper timestamp is ``log_append_time`` (default:
    the largest inner timestamp).
    """
    codec = codec_of(compression)
    if codec == Compression.ZSTD:
        raise UnsupportedCompressionTypeError(f"zstd is not allowed in message format v{magic}")
    ts_attr = TIMESTAMP_TYPE_MASK if magic == 1 and timestamp_type == 1 else 0

    def inner(m: LegacyMessage, offset: int) -> bytes:
        ts = m.timestamp if magic == 1 else NO_TIMESTAMP
        return encode_message(LegacyMessage(offset, magic, ts_attr, ts, m.key, m.value))

    if codec == Compression.NONE:
        return b"".join(inner(m, m.offset) for m in messages)
    if not messages:
        return b""
    base = messages[0].offset
    if magic == 1:
        inner_set = b"".join(inner(m, m.offset - base) for m in messages)
    else:
        inner_set = b"".join(inner(m, m.offset) for m in messages)
    if codec == Compression.LZ4 and magic == 0:
        value = compress_lz4_legacy(inner_set)
    else:
        value = compress(codec, inner_set)
    if magic == 1:
        wrapper_ts = log_append_time if (ts_attr and log_append_time is not None) else max(
            m.timestamp for m in messages
        )
    else:
        wrapper_ts = NO_TIMESTAMP
    wrapper = LegacyMessage(messages[-1].offset, magic, ts_attr | int(codec), wrapper_ts, None, value)
    return encode_message(wrapper)


def decode_message(buf, pos: int = 0) -> tuple[LegacyMessage, int]:
    """Decode the whole entry at ``buf[pos]`` (CRC checked); returns ``(message, next_pos)``."""
    if pos + LOG_OVERHEAD + 6 > len(buf):
        raise CorruptRecordError("buffer shorter than a message header", pos)
    offset, size, crc, magic, attributes = _HEAD.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(f"expected magic 0 or 1, found {magic}", pos)
    if size < MIN_MESSAGE_SIZE[magic]:
        raise CorruptRecordError(f"message size {size} is smaller than a v{magic} message", pos)
    end = pos + LOG_OVERHEAD + size
    if end > len(buf):
        raise CorruptRecordError("message extends past the end of the buffer", pos)
    computed = zlib.crc32(buf[pos + MAGIC_OFFSET : end])
    if computed != crc:
        raise CorruptRecordError(f"CRC-32 mismatch: stored {crc:#010x}, computed {computed:#010x}", pos)
    p = pos + 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    fields = []
    for what in ("key", "value"):
        if p + 4 > end:
            raise CorruptRecordError(f"{what} length runs past the end of the message", pos)
        (n,) = _I32.unpack_from(buf, p)
        p += 4
        if n < 0:
            fields.append(None)
            continue
        if p + n > end:
            raise CorruptRecordError(f"{what} of {n} bytes runs past the end of the message", pos)
        fields.append(bytes(buf[p : p + n]))
        p += n
    if p != end:
        raise CorruptRecordError(f"{end - p} unexpected bytes at the end of the message", pos)
    return LegacyMessage(offset, magic, attributes, timestamp, fields[0], fields[1], crc), end


def flatten_wrapper(wrapper: LegacyMessage, pos: int) -> list[LegacyMessage]:
    if wrapper.value is None:
        raise CorruptRecordError("compressed wrapper message with a null value", pos)
    try:
        data = decompress(wrapper.compression, wrapper.value)
    except (CompressionError, UnsupportedCompressionTypeError) as exc:
        raise CorruptRecordError(str(exc), pos) from None
    inner = []
    p = 0
    while p < len(data):
        msg, p = decode_message(data, p)
        if msg.attributes & COMPRESSION_MASK:
            raise CorruptRecordError("nested compressed message inside a wrapper", pos)
        inner.append(msg)
    if not inner:
        raise CorruptRecordError("compressed wrapper message holds no messages", pos)
    if wrapper.magic > 0:
        base = wrapper.offset - inner[-1].offset
        log_append = wrapper.timestamp_type == 1
        inner = [
            replace(
                m,
                offset=base + m.offset,
                timestamp=wrapper.timestamp if log_append else m.timestamp,
                attributes=m.attributes | (TIMESTAMP_TYPE_MASK if log_append else 0),
            )
            for m in inner
        ]
    return inner


def iter_legacy_entries(buf, start: int = 0) -> Iterator[tuple[LegacyMessage, LegacyMessage]]:
    """Yield ``(top-level entry, message)`` for every message, wrappers flattened.

    For an uncompressed entry both items are the same message. Offsets are
    absolute. Stops silently at a trailing partial entry.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    pos = start
    while pos + LOG_OVERHEAD <= len(mv):
        size = _I32.unpack_from(mv, pos + 8)[0]
        if pos + LOG_OVERHEAD + size > len(mv) and size >= 0:
            return
        msg, next_pos = decode_message(mv, pos)
        if msg.attributes & COMPRESSION_MASK:
            for m in flatten_wrapper(msg, pos):
                yield msg, m
        else:
            yield msg, msg
        pos = next_pos


def decode_message_set(buf) -> list[LegacyMessage]:
    """All messages of a v0/v1 message set, wrappers flattened, absolute offsets."""
    return [m for _, m in iter_legacy_entries(buf)]
