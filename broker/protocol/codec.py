"""The one generic codec: compiles a schema's fields at one version into read/write closures.

A struct (a request or response body, or a nested struct) at version v is laid out as:

    regular fields, in schema order, each present iff v is in its ``versions`` and it is not
    tagged at v
    [flexible versions only] tagged-field section: unsigned varint count, then for each present
    tagged field, ascending by tag: unsigned varint tag, unsigned varint size, value bytes

Decoding gives a dict holding EVERY field of the schema: values read from the wire, defaults for
fields absent at v or tagged fields not sent. Unknown tags are skipped. Encoding takes a dict;
missing keys take defaults, fields absent at v are ignored, tagged fields equal to their default
are omitted (as Apache Kafka does; older librdkafka misreads non-empty tagged sections).

:func:`struct_codec` caches one compiled (read, write) pair per (fields, version, flexible).
"""

from __future__ import annotations

import uuid
from functools import lru_cache

from .schema import Field
from .types import array_codec, encode_uvarint, primitive_codec, read_uvarint, Truncated

_MISSING = object()
_IMMUTABLE = (int, float, str, bytes, bool, type(None), uuid.UUID)


def _field_codec(fld: Field, version: int, flexible: bool):
    nullable = version in fld.nullable
    if fld.fields is not None:
        read_s, write_s = struct_codec(fld.fields, version, flexible)
        if fld.is_struct:
            if nullable:
                return _nullable_struct(read_s, write_s)
            return read_s, write_s
        return array_codec(read_s, write_s, flexible, nullable)
    elem = fld.element_type
    if elem is not None:
        read_e, write_e = primitive_codec(elem, flexible, False)
        return array_codec(read_e, write_e, flexible, nullable)
    return primitive_codec(fld.type, flexible, nullable)


def _nullable_struct(read_s, write_s):
    """A nullable struct is prefixed by an int8: -1 null, 1 present."""
    def read(buf, pos):
        if pos >= len(buf):
            raise Truncated("buffer ends before a struct")
        marker = buf[pos]
        if marker == 0xFF:
            return None, pos + 1
        return read_s(buf, pos + 1)

    def write(out, value):
        if value is None:
            out.append(b"\xff")
        else:
            out.append(b"\x01")
            write_s(out, value)
    return read, write


def _default_maker(fld: Field):
    value = fld.default_value()
    if isinstance(value, _IMMUTABLE):
        return lambda: value
    return fld.default_value


@lru_cache(maxsize=None)
def struct_codec(fields: tuple[Field, ...], version: int, flexible: bool):
    """Compile ``fields`` at ``version`` into ``(read, write)``; see the module docstring."""
    regular = []      # (name, read, write, make_default)
    tagged = {}       # tag -> (name, read, write, default value, make_default)
    absent = []       # (name, make_default) for fields not on the wire at this version
    for fld in fields:
        make = _default_maker(fld)
        if version not in fld.versions:
            absent.append((fld.name, make))
        elif fld.tag is not None and version in fld.tagged:
            if flexible:
                r, w = _field_codec(fld, version, flexible)
                tagged[fld.tag] = (fld.name, r, w, fld.default_value(), make)
            else:
                absent.append((fld.name, make))
        else:
            r, w = _field_codec(fld, version, flexible)
            regular.append((fld.name, r, w, make))
    regular = tuple(regular)
    absent = tuple(absent)
    tag_order = tuple(sorted(tagged.items()))

    def read(buf, pos):
        out = {}
        for name, r, _w, _m in regular:
            out[name], pos = r(buf, pos)
        if flexible:
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise Truncated("buffer ends inside a tagged field")
                entry = tagged.get(tag)
                if entry is not None:
                    value, stop = entry[1](buf[:end], pos)
                    if stop != end:
                        raise ValueError(f"tagged field {entry[0]} has size {size}, read {stop - pos}")
                    out[entry[0]] = value
                pos = end
            for _tag, (name, _r, _w, _d, make) in tag_order:
                if name not in out:
                    out[name] = make()
        for name, make in absent:
            out[name] = make()
        return out, pos

    def write(out, body):
        get = body.get
        for name, _r, w, make in regular:
            value = get(name, _MISSING)
            w(out, make() if value is _MISSING else value)
        if flexible:
            present = []
            for tag, (name, _r, w, default, _m) in tag_order:
                value = get(name, _MISSING)
                if value is _MISSING or value == default:
                    continue
                sub = []
                w(sub, value)
                data = b"".join(sub)
                present.append(encode_uvarint(tag) + encode_uvarint(len(data)) + data)
            out.append(encode_uvarint(len(present)))
            out.extend(present)

    return read, write
