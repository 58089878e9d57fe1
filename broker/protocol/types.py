"""Primitive Kafka wire types: readers and writers the schema codec is assembled from.

All integers are big-endian two's complement unless said otherwise.

    int8 int16 int32 int64    1, 2, 4, 8 bytes, signed
    uint16 uint32             2, 4 bytes, unsigned
    float64                   8 bytes, IEEE 754 double
    bool                      1 byte, 0 = false, anything else = true
    uuid                      16 bytes
    unsigned varint           7 bits a byte, least significant group first, high bit = "more"
    varint / varlong          zig-zag ((n << 1) ^ (n >> 63)) then unsigned varint
    string                    int16 length N, then N bytes UTF-8; nullable: N = -1 is null
    compact string            unsigned varint N+1, then N bytes; 0 is null
    bytes                     int32 length N, then N bytes; nullable: N = -1 is null
    compact bytes             unsigned varint N+1, then N bytes; 0 is null
    records                   nullable bytes (compact in flexible versions) holding record batches
    array                     int32 count N (-1 = null), then N elements
    compact array             unsigned varint N+1 (0 = null), then N elements
    tagged fields             unsigned varint count, then per field: unsigned varint tag,
                              unsigned varint size, size bytes of value; tags ascending

A reader is ``read(buf: memoryview, pos: int) -> (value, new_pos)``; it raises
:class:`Truncated` or ``struct.error`` when the buffer ends early and ``ValueError`` on an
illegal value. A writer is ``write(out: list, value)``: it appends bytes-like parts to ``out``.
A ``records`` writer appends a value that is not bytes-like (an object with an int ``length``,
such as a log file slice) to ``out`` untouched, after its length prefix.
"""

from __future__ import annotations

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

MAX_UVARINT_BYTES = 10


class Truncated(ValueError):
    """The buffer ended before the value did."""


# ---------------------------------------------------------------- varints

def read_uvarint(buf, pos: int):
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise Truncated("buffer ends inside a varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 7 * MAX_UVARINT_BYTES:
            raise ValueError("varint is too long")


def encode_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf, pos: int):
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varint(value: int) -> bytes:
    """Zig-zag varint/varlong (Kafka's varint and varlong differ only in range)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong cannot hold {value}")
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# ---------------------------------------------------------------- fixed width

def _fixed(st: struct.Struct):
    size = st.size
    unpack_from = st.unpack_from
    pack = st.pack

    def read(buf, pos):
        return unpack_from(buf, pos)[0], pos + size

    def write(out, value):
        out.append(pack(value))

    return read, write


def _read_bool(buf, pos):
    if pos >= len(buf):
        raise Truncated("buffer ends inside a bool")
    return buf[pos] != 0, pos + 1


def _write_bool(out, value):
    out.append(b"\x01" if value else b"\x00")


def _read_uuid(buf, pos):
    end = pos + 16
    if end > len(buf):
        raise Truncated("buffer ends inside a uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _write_uuid(out, value):
    if isinstance(value, uuid.UUID):
        out.append(value.bytes)
    else:
        raw = bytes(value)
        if len(raw) != 16:
            raise ValueError("a uuid is 16 bytes")
        out.append(raw)


FIXED = {
    "int8": _fixed(_I8), "int16": _fixed(_I16), "int32": _fixed(_I32), "int64": _fixed(_I64),
    "uint16": _fixed(_U16), "uint32": _fixed(_U32), "float64": _fixed(_F64),
    "bool": (_read_bool, _write_bool), "uuid": (_read_uuid, _write_uuid),
}


# ---------------------------------------------------------------- lengths

def length_codec(flexible: bool, wide: bool):
    """Reader/writer of a length that may be -1 (null).

    Non-flexible: int16 (``wide`` False, strings) or int32 (bytes, arrays). Flexible: unsigned
    varint of length + 1.
    """
    if flexible:
        def read(buf, pos):
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos

        def write(out, n):
            out.append(encode_uvarint(n + 1))
        return read, write
    return FIXED["int32" if wide else "int16"]


def _check_length(buf, pos, n, nullable, what):
    if n < 0:
        if n == -1 and nullable:
            return None
        raise ValueError(f"{what} has illegal length {n}")
    if pos + n > len(buf):
        raise Truncated(f"buffer ends inside a {what}")
    return n


# ---------------------------------------------------------------- strings, bytes, records

def string_codec(flexible: bool, nullable: bool):
    read_len, write_len = length_codec(flexible, wide=False)

    def read(buf, pos):
        n, pos = read_len(buf, pos)
        if _check_length(buf, pos, n, nullable, "string") is None:
            return None, pos
        end = pos + n
        return str(buf[pos:end], "utf-8"), end

    def write(out, value):
        if value is None:
            if not nullable:
                raise ValueError("null in a non-nullable string")
            write_len(out, -1)
            return
        raw = value.encode("utf-8")
        if not flexible and len(raw) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        write_len(out, len(raw))
        out.append(raw)

    return read, write


def bytes_codec(flexible: bool, nullable: bool, zero_copy: bool = False):
    """bytes, or with ``zero_copy`` the records type: decodes to a memoryview slice of the
    buffer, and encodes objects that are not bytes-like (int attribute ``length``) as parts
    of their own."""
    read_len, write_len = length_codec(flexible, wide=True)

    def read(buf, pos):
        n, pos = read_len(buf, pos)
        if _check_length(buf, pos, n, nullable, "bytes") is None:
            return None, pos
        end = pos + n
        return (buf[pos:end] if zero_copy else bytes(buf[pos:end])), end

    def write(out, value):
        if value is None:
            if not nullable:
                raise ValueError("null in non-nullable bytes")
            write_len(out, -1)
            return
        if isinstance(value, (bytes, bytearray, memoryview)):
            n = value.nbytes if isinstance(value, memoryview) else len(value)
        elif zero_copy and isinstance(getattr(value, "length", None), int):
            n = value.length
        else:
            raise TypeError(f"cannot encode {type(value).__name__} as bytes")
        write_len(out, n)
        out.append(value)

    return read, write


def primitive_codec(type_name: str, flexible: bool, nullable: bool):
    """(read, write) for one primitive type name of :mod:`broker.protocol.schema`."""
    if type_name in FIXED:
        return FIXED[type_name]
    if type_name == "string":
        return string_codec(flexible, nullable)
    if type_name == "bytes":
        return bytes_codec(flexible, nullable)
    if type_name == "records":
        return bytes_codec(flexible, nullable, zero_copy=True)
    raise ValueError(f"unknown primitive type {type_name!r}")


def array_codec(read_elem, write_elem, flexible: bool, nullable: bool):
    """(read, write) for an array (compact in flexible versions) of elements."""
    read_len, write_len = length_codec(flexible, wide=True)

    def read(buf, pos):
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise ValueError(f"array has illegal length {n}")
        if n > len(buf) - pos:  # every element takes at least one byte
            raise Truncated("array count exceeds the bytes left")
        items = []
        append = items.append
        for _ in range(n):
            item, pos = read_elem(buf, pos)
            append(item)
        return items, pos

    def write(out, value):
        if value is None:
            if not nullable:
                raise ValueError("null in a non-nullable array")
            write_len(out, -1)
            return
        write_len(out, len(value))
        for item in value:
            write_elem(out, item)

    return read, write
