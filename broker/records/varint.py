"""Zigzag variable-length integers, as in protobuf and Kafka's record format.

A signed value ``n`` is first zigzag-mapped to an unsigned one
(``(n << 1) ^ (n >> 63)``: 0→0, -1→1, 1→2, -2→3, …) and then written 7 bits at
a time, least significant group first, with the high bit of each byte set
when more bytes follow. A ``varint`` holds an int32 (at most 5 bytes), a
``varlong`` an int64 (at most 10 bytes).

Decoders take ``(buf, pos)`` and return ``(value, new_pos)``; they raise
:class:`~broker.records.view.CorruptRecordError` for input that ends inside a
varint or that is longer than the type allows.
"""

from __future__ import annotations

from broker.records.view import CorruptRecordError

_MAX_BYTES_VARINT = 5
_MAX_BYTES_VARLONG = 10


def _encode_unsigned(u: int) -> bytes:
    if u < 0x80:
        return bytes((u,))
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of an int32."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"{value} does not fit in an int32 varint")
    return _encode_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of an int64."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"{value} does not fit in an int64 varlong")
    return _encode_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _decode_unsigned(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("input ends inside a varint", pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes", pos)


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag int32 at ``buf[pos]``; returns ``(value, next_pos)``."""
    if pos < len(buf) and buf[pos] < 0x80:  # one-byte fast path: most lengths and deltas
        u = buf[pos]
        return (u >> 1) ^ -(u & 1), pos + 1
    u, pos = _decode_unsigned(buf, pos, _MAX_BYTES_VARINT)
    if u > 0xFFFFFFFF:
        raise CorruptRecordError("varint overflows an int32", pos)
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag int64 at ``buf[pos]``; returns ``(value, next_pos)``."""
    if pos < len(buf) and buf[pos] < 0x80:  # one-byte fast path
        u = buf[pos]
        return (u >> 1) ^ -(u & 1), pos + 1
    u, pos = _decode_unsigned(buf, pos, _MAX_BYTES_VARLONG)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError("varlong overflows an int64", pos)
    return (u >> 1) ^ -(u & 1), pos


def size_of_varint(value: int) -> int:
    return len(encode_varint(value))


def size_of_varlong(value: int) -> int:
    return len(encode_varlong(value))
