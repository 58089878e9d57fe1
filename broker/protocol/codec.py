"""The one generic codec: compiles a schema's fields at one version into read/write functions.

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

import struct
import uuid
from functools import lru_cache

from .schema import Field
from .types import _I16, _I32, array_codec, encode_uvarint, primitive_codec, read_uvarint, Truncated

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


_FIXED_FORMATS = {"int8": "b", "int16": "h", "int32": "i", "int64": "q",
                  "uint16": "H", "uint32": "I", "float64": "d"}


@lru_cache(maxsize=None)
def struct_codec(fields: tuple[Field, ...], version: int, flexible: bool):
    """Compile ``fields`` at ``version`` into ``(read, write)``; see the module docstring.

    Both are generated as straight-line Python (one function per struct, no loop over
    fields): a run of consecutive fixed-width fields is read or written with one
    ``struct`` call, every other field through its compiled codec. On the produce path
    this parses a request in a third of the time of a loop over per-field codecs.
    """
    regular = []      # (field, read, write)
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
            regular.append((fld, r, w))
    tag_order = tuple(sorted(tagged.items()))
    env: dict = {}
    read_lines, write_lines, entries = [], ["    get = body.get"], []
    i = 0
    while i < len(regular):
        fld, r, w = regular[i]
        fmt = _FIXED_FORMATS.get(fld.type)
        if fmt is None:
            env[f"_d{i}"] = fld.default_value()
            read_lines += _inline_read(fld, version, flexible, i, env, r)
            write_lines += _inline_write(fld, version, flexible, i, env, w)
            entries.append(f"{fld.name!r}: v{i}")
            i += 1
            continue
        run = [i]
        while run[-1] + 1 < len(regular) and regular[run[-1] + 1][0].type in _FIXED_FORMATS:
            run.append(run[-1] + 1)
        st = struct.Struct(">" + "".join(_FIXED_FORMATS[regular[j][0].type] for j in run))
        env[f"_u{i}"], env[f"_p{i}"] = st.unpack_from, st.pack
        names = [f"v{j}" for j in run]
        read_lines += [f"    {', '.join(names)}, = _u{i}(buf, pos)", f"    pos += {st.size}"]
        args = []
        for j in run:
            env[f"_d{j}"] = regular[j][0].default_value()
            args.append(f"get({regular[j][0].name!r}, _d{j})")
            entries.append(f"{regular[j][0].name!r}: v{j}")
        write_lines.append(f"    out.append(_p{i}({', '.join(args)}))")
        i = run[-1] + 1
    for k, (name, make) in enumerate(absent):
        entries.append(_default_entry(env, f"_a{k}", name, make))
    for tag, (name, _r, _w, _default, make) in tag_order:  # defaults, replaced by the tags sent
        entries.append(_default_entry(env, f"_t{tag}", name, make))
    read_lines.append(f"    out = {{{', '.join(entries)}}}")
    if flexible:
        env["_read_tags"], env["_write_tags"] = _tags_codec(tag_order)
        env["Truncated"] = Truncated
        # Nearly every tagged section is empty (one zero byte): that case is read inline.
        read_lines += ["    try:", "        n = buf[pos]", "    except IndexError:",
                       "        raise Truncated('buffer ends before a tagged-field section') from None",
                       "    if n:", "        pos = _read_tags(buf, pos, out)", "    else:", "        pos += 1"]
        write_lines.append("    _write_tags(out, get)" if tag_order else "    out.append(b'\\x00')")
    read_lines.append("    return out, pos")
    source = "\n".join(["def read(buf, pos):", *read_lines, "", "def write(out, body):", *write_lines, ""])
    exec(compile(source, f"<codec v{version} {' '.join(f.name for f in fields)[:60]}>", "exec"), env)
    return env["read"], env["write"]


def _default_entry(env: dict, key: str, name: str, make) -> str:
    """The dict-literal entry giving field ``name`` its default: a constant, or a call of ``make``
    for a mutable default (each decoded struct gets its own list)."""
    value = make()
    if isinstance(value, _IMMUTABLE):
        env[key] = value
        return f"{name!r}: {key}"
    env[key] = make
    return f"{name!r}: {key}()"


# An unsigned varint read into ``n`` (moving ``pos``), its one-byte form (lengths under 127, nearly
# all) inline; generated code only.
_INLINE_UVARINT_READ = [
    "    try:",
    "        n = buf[pos]",
    "    except IndexError:",
    "        raise Truncated('buffer ends inside a varint') from None",
    "    if n < 0x80:",
    "        pos += 1",
    "    else:",
    "        n, pos = _uvarint(buf, pos)",
]
_SMALL_UVARINTS = tuple(bytes((i,)) for i in range(128))  # the encoding of 0..127: one byte each


def _tags_codec(tag_order: tuple):
    """(read, write) of a flexible struct's tagged-field section, for :func:`struct_codec`.

    ``read`` only stores the tagged fields sent: the struct's reader put every
    tagged field's default in ``out`` before."""
    tagged = dict(tag_order)

    def read(buf, pos, out):
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
        return pos

    def write(out, get):
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


def _inline_read(fld: Field, version: int, flexible: bool, i: int, env: dict, read) -> list[str]:
    """Source lines that read field ``i`` into ``v{i}`` and move ``pos``, for :func:`struct_codec`.

    Strings, bytes, records and arrays of structs are read inline (the length, its
    checks, the value), as their codecs in :mod:`.types` do; any other field calls
    its codec ``read`` (as ``_r{i}``).
    """
    nullable = version in fld.nullable
    kind = fld.type
    if kind in ("string", "bytes", "records") or fld.is_struct_array:
        what = {"string": "string", "bytes": "bytes", "records": "bytes"}.get(kind, "array")
        if flexible:
            env["_uvarint"] = read_uvarint
            lines = _INLINE_UVARINT_READ + ["    n -= 1"]
        else:
            env["_I16"], env["_I32"] = _I16.unpack_from, _I32.unpack_from
            width = 2 if kind == "string" else 4
            lines = [f"    n, = _I{8 * width}(buf, pos)", f"    pos += {width}"]
        env["Truncated"] = Truncated
        if nullable:
            lines += ["    if n == -1:", f"        v{i} = None", "    elif n < 0:"]
        else:
            lines += ["    if n < 0:"]
        lines.append(f"        raise ValueError(f'{what} has illegal length {{n}}')")
        if fld.is_struct_array:
            env[f"_er{i}"] = struct_codec(fld.fields, version, flexible)[0]
            return lines + [
                "    elif n > len(buf) - pos:",
                "        raise Truncated('array count exceeds the bytes left')",
                "    else:",
                f"        v{i} = []",
                "        for _ in range(n):",
                f"            item, pos = _er{i}(buf, pos)",
                f"            v{i}.append(item)",
            ]
        value = {"string": "str(buf[pos:end], 'utf-8')", "bytes": "bytes(buf[pos:end])",
                 "records": "buf[pos:end]"}[kind]
        return lines + [
            "    else:",
            "        end = pos + n",
            "        if end > len(buf):",
            f"            raise Truncated('buffer ends inside a {what}')",
            f"        v{i} = {value}",
            "        pos = end",
        ]
    env[f"_r{i}"] = read
    return [f"    v{i}, pos = _r{i}(buf, pos)"]


def _inline_write(fld: Field, version: int, flexible: bool, i: int, env: dict, write) -> list[str]:
    """Source lines that write field ``i`` (from ``body``) to ``out``, for :func:`struct_codec`.

    Strings and arrays of structs are written inline, as their codecs in :mod:`.types`
    do; any other field calls its codec ``write`` (as ``_w{i}``).
    """
    nullable = version in fld.nullable
    lines = [f"    x = get({fld.name!r}, _d{i})"]
    if fld.type == "string" or fld.is_struct_array:
        what = "string" if fld.type == "string" else "array"
        null = b"\x00" if flexible else (b"\xff\xff" if what == "string" else b"\xff\xff\xff\xff")
        if nullable:
            lines += ["    if x is None:", f"        out.append({null!r})"]
        else:
            lines += ["    if x is None:", f"        raise ValueError('null in a non-nullable {what}')"]
        if flexible:
            env["_uvarint_bytes"], env["_SMALL"] = encode_uvarint, _SMALL_UVARINTS
            size = "_SMALL[len({0}) + 1] if len({0}) < 127 else _uvarint_bytes(len({0}) + 1)"
        else:
            env["_P16"], env["_P32"] = _I16.pack, _I32.pack
            size = ("_P16" if what == "string" else "_P32") + "(len({}))"
        if what == "string":
            lines += ["    else:", "        raw = x.encode('utf-8')"]
            if not flexible:
                lines += ["        if len(raw) > 0x7FFF:", "            raise ValueError('string longer than 32767 bytes')"]
            return lines + [f"        out.append({size.format('raw')})", "        out.append(raw)"]
        env[f"_ew{i}"] = struct_codec(fld.fields, version, flexible)[1]
        return lines + ["    else:", f"        out.append({size.format('x')})", "        for item in x:",
                        f"            _ew{i}(out, item)"]
    env[f"_w{i}"] = write
    return lines + [f"    _w{i}(out, x)"]
