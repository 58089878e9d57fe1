"""The consumer's fast path: decode a fetch response's batches into plain tuples.

:func:`iter_fetched` walks the entries of a fetch response's ``records`` (v2
batches, and legacy v0/v1 entries through :mod:`broker.records.legacy`),
validates each v2 batch (magic, CRC-32C over attributes..end, sizes, record
count), decompresses it and yields a :class:`FetchedBatch` whose records are
``(offset, timestamp, key, value, headers)`` tuples. It decodes the same
record layout as :func:`broker.records.batch.decode_record` (see that module's
docstring) and makes the same corruption checks, but in one loop with 1- and
2-byte varints inlined and no intermediate objects: this is where a consumer
spends its time per record, so the repetition below is deliberate.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c as _crc32c

from broker.records.batch import decode_headers
from broker.records.compression import CompressionError, codec_of, decompress
from broker.records.legacy import iter_legacy_entries
from broker.records.varint import decode_varint, decode_varlong
from broker.records.view import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    V2_ATTRIBUTES_OFFSET,
    V2_HEADER,
    V2_HEADER_SIZE,
    CorruptRecordError,
)


def decode_record_tuples(payload: bytes, count: int, base_offset: int, base_timestamp: int,
                         log_append_time: int | None = None, min_offset: int = 0) -> list[tuple]:
    """Decode ``count`` records of an uncompressed (or decompressed) records section.

    Returns ``(offset, timestamp, key, value, headers)`` tuples, headers a list of
    ``(str, bytes | None)``, for records whose offset is ``>= min_offset``. The
    timestamp is ``base_timestamp + timestampDelta``, or ``log_append_time``
    when given (LogAppendTime batches). Checks what :func:`decode_record` checks
    (each record spans exactly its ``length``, lengths stay inside the record,
    no trailing bytes) and raises :class:`CorruptRecordError` likewise.

    One loop with the varint decoding inlined for 1- and 2-byte varints (every
    length and delta of records up to 8 KiB): a consumer's per-record cost.
    ``payload`` should be ``bytes`` (indexing and slicing bytes is fastest).
    """
    out = []
    append = out.append
    pos = 0
    n = 0
    plen = len(payload)
    buf = payload
    try:
        while n < count:
            # length
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    length = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    length, pos = decode_varint(buf, pos)
            end = pos + length
            if length < 1 or end > plen:
                raise CorruptRecordError(f"record length {length} runs past the end of the batch", pos)
            pos += 1  # attributes (unused)
            # timestampDelta
            b = buf[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    ts_delta = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    ts_delta, pos = decode_varlong(buf, pos)
            # offsetDelta
            b = buf[pos]
            if b < 0x80:
                offset = base_offset + ((b >> 1) ^ -(b & 1))
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    offset = base_offset + ((u >> 1) ^ -(u & 1))
                    pos += 2
                else:
                    u, pos = decode_varint(buf, pos)
                    offset = base_offset + u
            # key
            b = buf[pos]
            if b < 0x80:
                kl = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    kl = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    kl, pos = decode_varint(buf, pos)
            if kl >= 0:
                key = buf[pos:pos + kl]
                pos += kl
            elif kl == -1:
                key = None
            else:
                raise CorruptRecordError(f"negative key length {kl}", pos)
            # value
            b = buf[pos]
            if b < 0x80:
                vl = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    vl = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    vl, pos = decode_varint(buf, pos)
            if vl >= 0:
                value = buf[pos:pos + vl]
                pos += vl
            elif vl == -1:
                value = None
            else:
                raise CorruptRecordError(f"negative value length {vl}", pos)
            # headers
            b = buf[pos]
            if b == 0:
                headers = []
                pos += 1
            else:
                headers, pos = decode_headers(buf, pos, end)
            if pos != end:
                raise CorruptRecordError(
                    f"record declares {length} bytes but its fields span {length + pos - end}", pos)
            n += 1
            if offset >= min_offset:
                append((offset, base_timestamp + ts_delta if log_append_time is None else log_append_time,
                        key, value, headers))
    except IndexError:
        raise CorruptRecordError(f"record {n} runs past the end of the batch", pos) from None
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"record {n}: {exc}", pos) from None
    if pos != plen:
        raise CorruptRecordError(f"{plen - pos} bytes after the {count} declared records", pos)
    return out


class FetchedBatch(NamedTuple):
    """What a consumer needs of one v2 batch (or legacy entry) of a fetch response.

    ``records`` holds ``(offset, timestamp, key, value, headers)`` tuples
    (see :func:`decode_record_tuples`); ``last_offset`` is the batch's last
    offset even when its records were skipped. ``producer_id`` and
    ``is_transactional`` let a read_committed consumer drop aborted batches.
    """

    timestamp_type: int
    is_control: bool
    last_offset: int
    records: list[tuple]
    producer_id: int = -1
    is_transactional: bool = False


def iter_fetched(buf, start: int = 0, min_offset: int = 0) -> Iterator[FetchedBatch]:
    """Every whole entry of a fetch response's records, decoded for a consumer.

    v2 batches are validated (magic, CRC-32C, sizes, record count) and
    decompressed; records below ``min_offset`` are left out (a batch may start
    before the fetch offset); a control batch comes with no records. Legacy
    v0/v1 entries are decoded through :mod:`broker.records.legacy`. A trailing
    partial entry is skipped, as a fetch response may end in one.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    pos = start
    total = len(mv)
    unpack_header = V2_HEADER.unpack_from
    while pos + MAGIC_OFFSET + 1 <= total:
        size = LOG_OVERHEAD + struct.unpack_from(">i", mv, pos + 8)[0]
        if size <= LOG_OVERHEAD:
            raise CorruptRecordError(f"entry size {size} is impossible", pos)
        if pos + size > total:
            return
        if mv[pos + MAGIC_OFFSET] != 2:
            entries = [m for _, m in iter_legacy_entries(mv[pos:pos + size])]
            yield FetchedBatch(
                entries[0].timestamp_type if entries else 0, False,
                entries[-1].offset if entries else -1,
                [(m.offset, m.timestamp, m.key, m.value, []) for m in entries if m.offset >= min_offset],
            )
            pos += size
            continue
        if size < V2_HEADER_SIZE:
            raise CorruptRecordError(f"batch of {size} bytes is smaller than its header", pos)
        (base_offset, _length, _epoch, _magic, crc, attrs, last_delta, base_ts, max_ts,
         producer_id, _pepoch, _seq, count) = unpack_header(mv, pos)
        section = mv[pos + V2_HEADER_SIZE:pos + size]
        if _crc32c.crc32c(mv[pos + V2_ATTRIBUTES_OFFSET:pos + size]) != crc:
            raise CorruptRecordError(f"CRC-32C mismatch in the batch at offset {base_offset}", pos)
        last_offset = base_offset + last_delta
        log_append = attrs & TIMESTAMP_TYPE_MASK
        if attrs & CONTROL_MASK or last_offset < min_offset:
            yield FetchedBatch(1 if log_append else 0, bool(attrs & CONTROL_MASK), last_offset, [], producer_id,
                               bool(attrs & TRANSACTIONAL_MASK))
            pos += size
            continue
        if count < 0:
            raise CorruptRecordError(f"negative record count {count}", pos)
        codec = attrs & COMPRESSION_MASK
        if codec:
            try:
                payload = bytes(decompress(codec_of(codec), section))
            except (CompressionError, ValueError) as exc:
                raise CorruptRecordError(str(exc), pos) from None
        else:
            payload = bytes(section)
        try:
            records = decode_record_tuples(payload, count, base_offset, base_ts,
                                           max_ts if log_append else None, min_offset)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"batch at offset {base_offset}: {exc}", pos) from None
        yield FetchedBatch(1 if log_append else 0, False, last_offset, records, producer_id,
                           bool(attrs & TRANSACTIONAL_MASK))
        pos += size
