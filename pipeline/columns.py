"""A fetch response's records decoded straight into Arrow columns, whole batches at a time.

The source's tasks read what Spark wants as columns, so they skip the client's
per-record objects: :func:`scan` walks the entries of one partition's
``records`` (v2 batches; legacy v0/v1 entries are decoded with
:func:`broker.records.fetched.iter_fetched`), checks each batch as the consumer
does (size, magic, CRC-32C over attributes..end, record count), drops control
batches and, with ``read_committed``, the batches of aborted transactions, and
decompresses. :func:`to_record_batch` then decodes every record of those
batches at once with numpy. A v2 record is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint | key | valueLength varint | value | headerCount varint | headers

Uncompressed batches are decoded where the fetch response holds them (no
copy); decompressed ones are joined into one buffer. Only the record boundaries
are sequential (each length says where the next record starts): runs of
equal-sized records are found by stride and checked all at once, and only
records whose sizes vary are walked one by one in Python (:func:`_boundaries`).
Every other field is read for all records with vectorized varint decoding, and
the key and value columns are cut out of the buffer by one Arrow ``take`` each
(no Python ``bytes`` per record). Records with headers have them decoded with
:func:`broker.records.batch.decode_headers`.
A record whose fields do not span exactly its length, or a negative length,
raises :class:`CorruptRecordError`, as the consumer's decoder does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from broker.records.batch import decode_headers
from broker.records.compression import CompressionError, codec_of, decompress
from broker.records.fetched import iter_fetched
from broker.records.varint import decode_varint
from broker.records.view import (COMPRESSION_MASK, CONTROL_MASK, LOG_OVERHEAD, MAGIC_OFFSET, TIMESTAMP_TYPE_MASK,
                                 TRANSACTIONAL_MASK, V2_ATTRIBUTES_OFFSET, V2_HEADER, V2_HEADER_SIZE,
                                 CorruptRecordError)

_STRIDE_MIN = 8  # fewer equal-sized records than this in a row: walk one by one for a stretch
_STRETCH = 32  # records walked one by one after the first stride check that found sizes varying
_WINDOW = 256  # records checked by one stride check at first


@dataclass
class Scanned:
    """The data batches of one fetch response, ready to decode.

    ``payloads`` are the record sections: ``(begin, end)`` in ``records`` (the
    fetched bytes, not copied) for an uncompressed batch, the decompressed bytes
    of a compressed one; per batch ``counts``,
    ``base_offsets``, ``base_timestamps`` and ``append_times`` (LogAppendTime,
    else None) and ``timestamp_types``. ``next_offset`` follows the last whole
    entry (the next fetch's offset); ``legacy`` holds records of v0/v1 entries as
    ``(offset, timestamp, timestamp_type, key, value, headers)``.
    """

    payloads: list = field(default_factory=list)
    records: memoryview | None = None
    counts: list = field(default_factory=list)
    base_offsets: list = field(default_factory=list)
    base_timestamps: list = field(default_factory=list)
    append_times: list = field(default_factory=list)
    timestamp_types: list = field(default_factory=list)
    legacy: list = field(default_factory=list)
    next_offset: int | None = None


def scan(records, fetch_offset: int, aborted: list[tuple[int, int]] = ()) -> Scanned:
    """Check and decompress the entries of one partition's fetched ``records``.

    ``aborted`` is read_committed's ``(first_offset, producer_id)`` list of the
    response: a producer's transactional batches from that offset up to its
    ABORT marker are dropped, as Kafka's consumer does.
    """
    mv = records if isinstance(records, memoryview) else memoryview(records)
    out = Scanned()
    pending = sorted(aborted)
    aborting: set[int] = set()
    pos, total = 0, len(mv)
    while pos + MAGIC_OFFSET + 1 <= total:
        size = LOG_OVERHEAD + struct.unpack_from(">i", mv, pos + 8)[0]
        if size <= LOG_OVERHEAD:
            raise CorruptRecordError(f"entry size {size} is impossible", pos)
        if pos + size > total:
            break  # a fetch response may end in a partial entry
        if mv[pos + MAGIC_OFFSET] != 2:
            for fb in iter_fetched(mv[pos:pos + size], 0, fetch_offset):
                out.legacy.extend((o, ts, fb.timestamp_type, k, v, h) for o, ts, k, v, h in fb.records)
                out.next_offset = fb.last_offset + 1
            pos += size
            continue
        if size < V2_HEADER_SIZE:
            raise CorruptRecordError(f"batch of {size} bytes is smaller than its header", pos)
        (base_offset, _length, _epoch, _magic, crc, attrs, last_delta, base_ts, max_ts,
         producer_id, _pepoch, _seq, count) = V2_HEADER.unpack_from(mv, pos)
        if _crc32c.crc32c(mv[pos + V2_ATTRIBUTES_OFFSET:pos + size]) != crc:
            raise CorruptRecordError(f"CRC-32C mismatch in the batch at offset {base_offset}", pos)
        last_offset = base_offset + last_delta
        out.next_offset = last_offset + 1
        while pending and pending[0][0] <= last_offset:
            aborting.add(pending.pop(0)[1])
        section = mv[pos + V2_HEADER_SIZE:pos + size]
        pos += size
        if attrs & CONTROL_MASK:
            aborting.discard(producer_id)
            continue
        if last_offset < fetch_offset or (attrs & TRANSACTIONAL_MASK and producer_id in aborting):
            continue
        if count < 0:
            raise CorruptRecordError(f"negative record count {count}", pos - size)
        codec = attrs & COMPRESSION_MASK
        if codec:
            try:
                section = decompress(codec_of(codec), section)
            except (CompressionError, ValueError) as exc:
                raise CorruptRecordError(str(exc), pos - size) from None
        else:
            section, out.records = (pos - size + V2_HEADER_SIZE, pos), mv
        log_append = bool(attrs & TIMESTAMP_TYPE_MASK)
        out.payloads.append(section)
        out.counts.append(count)
        out.base_offsets.append(base_offset)
        out.base_timestamps.append(base_ts)
        out.append_times.append(max_ts if log_append else None)
        out.timestamp_types.append(1 if log_append else 0)
    return out


def _varint_at(data, pos: int) -> tuple[int, int]:
    """One zigzag varint (a record's length) and the position after it; one- and two-byte ones inline."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    b2 = data[pos + 1]
    if b2 < 0x80:
        u = (b & 0x7F) | (b2 << 7)
        return (u >> 1) ^ -(u & 1), pos + 2
    return decode_varint(data, pos)


def _boundaries(buf: np.ndarray, data, sections: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Where each record's body (after its length) starts and where the record ends.

    ``sections`` are ``(begin, end, count)`` of each batch's records in ``buf``
    (``data`` is the same bytes, for reading one varint). Each length says where
    the next record starts, so the walk is sequential; it goes by stride: the
    record at ``pos`` takes ``stride`` bytes, the next records at ``pos + k *
    stride`` are checked all at once (up to a window that doubles while every
    one matches) to take ``stride`` bytes too, and the run of those that do is
    exact by induction. Equal-sized records, the common case, cost a few
    vectorized checks per batch. Where sizes vary, records are walked one by one
    for a stretch (doubling each time) before the next check.
    """
    starts: list[np.ndarray] = []
    stops: list[np.ndarray] = []
    try:
        for begin, end, count in sections:
            _walk(buf, data, begin, end, count, starts, stops)
    except IndexError:  # a length varint cut by the end of the buffer
        raise CorruptRecordError("a record length runs past the end of the records", len(buf)) from None
    if not starts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(starts), np.concatenate(stops)


def _record_length(data, pos: int, end: int, index: int) -> tuple[int, int]:
    length, body = _varint_at(data, pos)
    if length < 1 or body + length > end:
        raise CorruptRecordError(f"record {index}: length {length} runs past the end of the batch", pos)
    return length, body


def _walk(buf: np.ndarray, data, pos: int, end: int, count: int, starts: list, stops: list) -> None:
    """One batch's record boundaries (see :func:`_boundaries`), appended to ``starts`` and ``stops``."""
    left, window, stretch = count, _WINDOW, _STRETCH
    while left:
        length, body = _record_length(data, pos, end, count - left)
        stride = body - pos + length
        run = min(left, window, (end - pos) // stride)
        at = pos + stride * np.arange(run, dtype=np.int64)
        lengths, bodies = _varints(buf, at, guess=True)
        same = (lengths >= 1) & (bodies >= 0) & (bodies - at + lengths == stride)
        matched = run if same.all() else int(same.argmin())  # at[0] is the record read above: >= 1
        window = 2 * window if matched == run else max(_WINDOW, 2 * matched)
        starts.append(bodies[:matched])
        stops.append(at[:matched] + stride)
        pos, left = pos + stride * matched, left - matched
        if matched < _STRIDE_MIN and left:  # sizes vary here: walk a stretch one by one
            walked_starts, walked_stops = [], []
            for _ in range(min(stretch, left)):
                length, body = _record_length(data, pos, end, count - left)
                walked_starts.append(body)
                pos = body + length
                walked_stops.append(pos)
                left -= 1
            starts.append(np.array(walked_starts, dtype=np.int64))
            stops.append(np.array(walked_stops, dtype=np.int64))
            stretch *= 2
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the {count} declared records", pos)


def _varints(buf: np.ndarray, pos: np.ndarray, guess: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints at ``pos`` (all at once) and the positions after them.

    Reads are clamped to ``buf``: a corrupt record may point past it, and the
    caller's check that fields end where their record does catches it. A varint
    longer than 10 bytes raises, unless ``guess`` (positions that may not hold a
    varint): then its position after is -1.
    """
    last = len(buf) - 1
    b = buf[np.minimum(pos, last)]
    u = (b & 0x7F).astype(np.int64)
    n = np.ones(len(pos), dtype=np.int64)
    more = b >= 0x80
    shift = 7
    while more.any():
        if shift > 63:
            if guess:
                return (u >> 1) ^ -(u & 1), np.where(more, -1, pos + n)
            raise CorruptRecordError("a varint longer than 10 bytes", int(pos[more][0]))
        b = buf[np.minimum(pos + n, last)]
        u |= np.where(more, (b & 0x7F).astype(np.int64) << shift, 0)
        n += more
        more &= b >= 0x80
        shift += 7
    return (u >> 1) ^ -(u & 1), pos + n


def _binary(data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary column of ``data[start:start+length]`` (null where the length is -1).

    The slices are in order and do not overlap, so the Arrow array whose
    elements alternate gap, slice, gap, slice... over ``data`` is valid; taking
    its odd elements copies the slices in one pass.
    """
    n = len(starts)
    bounds = np.empty(2 * n + 1, dtype=np.int32)
    bounds[0] = 0
    bounds[1::2] = starts
    bounds[2::2] = starts + np.maximum(lengths, 0)
    alternating = pa.BinaryArray.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(bounds), data])
    nulls = lengths < 0
    take = pa.array(np.arange(1, 2 * n, 2), mask=nulls if nulls.any() else None)
    return alternating.take(take)


def _constant_string(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def _records_buffer(s: Scanned) -> tuple:
    """One buffer holding every batch's records, and ``(begin, end, count)`` of each batch in it.

    Uncompressed batches are read where they were fetched; only where some
    batch was decompressed are the sections joined into a new buffer.
    """
    if all(type(p) is tuple for p in s.payloads):
        data = s.records if s.records is not None else b""
        return data, [(b, e, c) for (b, e), c in zip(s.payloads, s.counts)]
    parts = [s.records[p[0]:p[1]] if type(p) is tuple else p for p in s.payloads]
    ends = np.cumsum([len(p) for p in parts], dtype=np.int64).tolist()
    return b"".join(parts), [(e - len(p), e, c) for p, e, c in zip(parts, ends, s.counts)]


def to_record_batch(s: Scanned, topic: str, partition: int, first: int, end: int,
                    schema: pa.Schema) -> pa.RecordBatch | None:
    """The records of ``s`` with ``first <= offset < end`` in ``schema`` (Spark's Kafka source's, as Arrow)."""
    include_headers = "headers" in schema.names
    data, sections = _records_buffer(s)
    if len(data) >= 2**31:
        raise CorruptRecordError(f"{len(data)} bytes of records in one fetch: more than a binary column holds", 0)
    buf = np.frombuffer(data, dtype=np.uint8)
    starts, stops = _boundaries(buf, data, sections)
    ts_delta, pos = _varints(buf, starts + 1)  # + 1: the attributes byte
    offset_delta, pos = _varints(buf, pos)
    key_len, key_at = _varints(buf, pos)
    value_len, value_at = _varints(buf, key_at + np.maximum(key_len, 0))
    header_count, after = _varints(buf, value_at + np.maximum(value_len, 0))
    bad = (key_len < -1) | (value_len < -1) | (header_count < 0) | (after > stops) | (
        (header_count == 0) & (after != stops))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CorruptRecordError(f"record of {stops[i] - starts[i]} bytes whose fields do not span it", int(starts[i]))
    headers = None
    with_headers = np.flatnonzero(header_count)
    if len(with_headers) or (include_headers and s.legacy):
        headers = [[] for _ in range(len(starts))]
        for i in with_headers.tolist():
            hs, hpos = decode_headers(data, int(value_at[i] + max(value_len[i], 0)), int(stops[i]))
            if hpos != stops[i]:
                raise CorruptRecordError("a record's headers do not end where the record does", hpos)
            headers[i] = hs
    counts = np.array(s.counts, dtype=np.int64)
    offsets = np.repeat(np.array(s.base_offsets, dtype=np.int64), counts) + offset_delta
    base_ts = np.array([b if a is None else a for b, a in zip(s.base_timestamps, s.append_times)], dtype=np.int64)
    timestamps = np.repeat(base_ts, counts) + np.where(
        np.repeat(np.array([a is None for a in s.append_times]), counts), ts_delta, 0)
    ts_types = np.repeat(np.array(s.timestamp_types, dtype=np.int32), counts)
    keep = (offsets >= first) & (offsets < end)
    if not keep.all():
        idx = np.flatnonzero(keep)
        key_at, key_len, value_at, value_len = key_at[idx], key_len[idx], value_at[idx], value_len[idx]
        offsets, timestamps, ts_types = offsets[idx], timestamps[idx], ts_types[idx]
        headers = [headers[i] for i in idx.tolist()] if headers is not None else None
    data_buf = pa.py_buffer(data)
    keys, values = _binary(data_buf, key_at, key_len), _binary(data_buf, value_at, value_len)
    legacy = [r for r in s.legacy if first <= r[0] < end]
    if legacy:  # v0/v1 entries: only from brokers that keep old formats, appended as Python objects
        keys = pa.concat_arrays([keys, pa.array([r[3] for r in legacy], pa.binary())])
        values = pa.concat_arrays([values, pa.array([r[4] for r in legacy], pa.binary())])
        offsets = np.concatenate([offsets, np.array([r[0] for r in legacy], dtype=np.int64)])
        timestamps = np.concatenate([timestamps, np.array([r[1] for r in legacy], dtype=np.int64)])
        ts_types = np.concatenate([ts_types, np.array([r[2] for r in legacy], dtype=np.int32)])
        if headers is not None:
            headers += [r[5] for r in legacy]
    n = len(offsets)
    if n == 0:
        return None
    columns = [keys, values, _constant_string(topic, n), pa.array(np.full(n, partition, dtype=np.int32)),
               pa.array(offsets), pa.array(timestamps * 1000).cast(schema.field("timestamp").type),
               pa.array(ts_types)]
    if include_headers:
        htype = schema.field("headers").type
        if headers is None:
            columns.append(pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)),
                                                    pa.array([], type=htype.value_type), type=htype))
        else:
            columns.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], type=htype))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
