"""RecordBatch v2 (magic 2): values, encoder and decoder.

The batch header (61 bytes, big-endian) is drawn in :mod:`broker.records.view`;
the CRC-32C covers ``attributes`` through the end of the batch, so
``baseOffset`` (0), ``batchLength`` (8) and ``partitionLeaderEpoch`` (12) may be
changed without touching it. After the header come ``recordsCount`` records,
compressed as one stream when the codec in attributes bits 0-2 is not NONE::

    Record =>
      length          varint   bytes of the record after this field
      attributes      int8     unused, 0
      timestampDelta  varlong  timestamp - baseTimestamp
      offsetDelta     varint   offset - baseOffset
      keyLength       varint   -1 for a null key
      key             bytes
      valueLength     varint   -1 for a null value
      value           bytes
      headersCount    varint
      Header =>
        headerKeyLength    varint  (never null)
        headerKey          UTF-8
        headerValueLength  varint  -1 for a null value
        headerValue        bytes

Invariants written by :func:`encode_batch` and checked by :func:`decode_batch`:
``recordsCount`` equals the number of records; every record's ``length`` is
exactly the bytes it spans; the (decompressed) records section holds nothing
after the last record. Timestamps: a record's timestamp is ``baseTimestamp +
timestampDelta`` for CreateTime batches and ``maxTimestamp`` for LogAppendTime
batches. ``baseTimestamp`` is the first record's timestamp and
``maxTimestamp`` the largest, as the Java client and librdkafka write them.

Nothing here reads files or sockets. Values are plain dataclasses, not
thread-safe to mutate concurrently.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Sequence

import crc32c as _crc32c

from broker.records.compression import Compression, CompressionError, codec_of, compress, decompress
from broker.records.legacy import iter_legacy_entries
from broker.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong
from broker.records.view import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    V2_ATTRIBUTES_OFFSET,
    V2_CRC_OFFSET,
    V2_CRC_COVERED_HEAD,
    V2_HEAD_TO_CRC,
    V2_HEADER_SIZE,
    BatchView,
    CorruptRecordError,
)

NO_TIMESTAMP = -1
NO_SEQUENCE = -1
NO_PRODUCER_EPOCH = -1

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(slots=True)
class Record:
    """One record of a v2 batch; offsets and timestamps are deltas from the batch."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    attributes: int = 0


@dataclass(slots=True)
class RecordBatch:
    """A decoded v2 batch. ``None`` for the derived header fields means "compute them".

    ``last_offset_delta`` defaults to the last record's offset delta (0 for an
    empty batch); ``max_timestamp`` to ``base_timestamp`` + the largest
    timestamp delta (``base_timestamp`` for an empty batch). ``crc`` is set by
    :func:`decode_batch` and ignored by :func:`encode_batch`.
    """

    base_offset: int = 0
    partition_leader_epoch: int = -1
    compression: Compression = Compression.NONE
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    is_transactional: bool = False
    is_control: bool = False
    has_delete_horizon: bool = False
    base_timestamp: int = NO_TIMESTAMP
    max_timestamp: int | None = None
    last_offset_delta: int | None = None
    producer_id: int = -1
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    records: list[Record] = field(default_factory=list)
    crc: int | None = None

    magic = 2

    @property
    def attributes(self) -> int:
        attrs = int(self.compression) & COMPRESSION_MASK
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attrs |= TRANSACTIONAL_MASK
        if self.is_control:
            attrs |= CONTROL_MASK
        if self.has_delete_horizon:
            attrs |= DELETE_HORIZON_MASK
        return attrs

    def effective_last_offset_delta(self) -> int:
        if self.last_offset_delta is not None:
            return self.last_offset_delta
        return self.records[-1].offset_delta if self.records else 0

    def effective_max_timestamp(self) -> int:
        if self.max_timestamp is not None:
            return self.max_timestamp
        if not self.records:
            return self.base_timestamp
        return self.base_timestamp + max(r.timestamp_delta for r in self.records)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.effective_last_offset_delta()

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    def offset_of(self, record: Record) -> int:
        return self.base_offset + record.offset_delta

    def timestamp_of(self, record: Record) -> int:
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return self.effective_max_timestamp()
        return self.base_timestamp + record.timestamp_delta


# -- encoding -----------------------------------------------------------------
def _encode_bytes(value: bytes | None) -> bytes:
    if value is None:
        return b"\x01"  # zigzag(-1)
    return encode_varint(len(value)) + bytes(value)


def encode_record(record: Record) -> bytes:
    """One record including its leading length varint."""
    parts = [
        bytes((record.attributes & 0xFF,)),
        encode_varlong(record.timestamp_delta),
        encode_varint(record.offset_delta),
        _encode_bytes(record.key),
        _encode_bytes(record.value),
        encode_varint(len(record.headers)),
    ]
    for header in record.headers:
        parts.append(_encode_bytes(header.key.encode("utf-8")))
        parts.append(_encode_bytes(header.value))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def encode_batch(batch: RecordBatch) -> bytes:
    """The exact v2 bytes of ``batch``: header, CRC-32C, (compressed) records."""
    payload = b"".join(encode_record(r) for r in batch.records)
    if batch.compression != Compression.NONE:
        payload = compress(batch.compression, payload)
    tail = V2_CRC_COVERED_HEAD.pack(
        batch.attributes,
        batch.effective_last_offset_delta(),
        batch.base_timestamp,
        batch.effective_max_timestamp(),
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        len(batch.records),
    )
    crc = _crc32c.crc32c(payload, _crc32c.crc32c(tail))
    batch_length = V2_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    head = V2_HEAD_TO_CRC.pack(batch.base_offset, batch_length, batch.partition_leader_epoch, 2, crc)
    return head + tail + payload


_VARINT_1 = [bytes((u,)) for u in range(0x80)]  # one-byte unsigned varints


def _uvar(u: int) -> bytes:
    if u < 0x80:
        return _VARINT_1[u]
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_batch_tuples(records: Sequence[tuple], compression: int = Compression.NONE) -> bytes:
    """The v2 batch of ``records``, ``(timestamp, key, value, headers)`` tuples (headers a list of
    ``(str, bytes | None)``), CreateTime, offset deltas 0..n-1, no producer id.

    The same bytes :func:`encode_batch` makes of the equivalent :class:`RecordBatch`,
    without building a :class:`Record` per record: tools that copy many records
    (the mirror) spend their time here, so the varints are inlined.
    """
    base_ts = records[0][0]
    max_ts = base_ts
    parts = []
    append = parts.append
    small = _VARINT_1
    for i, (ts, key, value, headers) in enumerate(records):
        delta = ts - base_ts
        if ts > max_ts:
            max_ts = ts
        body = [b"\x00", _uvar(((delta << 1) ^ (delta >> 63)) & 0xFFFFFFFFFFFFFFFF),
                small[i << 1] if i < 64 else _uvar(i << 1)]
        if key is None:
            body.append(b"\x01")
        else:
            body.append(_uvar(len(key) << 1))
            body.append(key)
        if value is None:
            body.append(b"\x01")
        else:
            body.append(_uvar(len(value) << 1))
            body.append(value)
        body.append(_uvar(len(headers) << 1))
        for hk, hv in headers:
            hk = hk.encode()
            body.append(_uvar(len(hk) << 1))
            body.append(hk)
            if hv is None:
                body.append(b"\x01")
            else:
                body.append(_uvar(len(hv) << 1))
                body.append(hv)
        rec = b"".join(body)
        append(_uvar(len(rec) << 1))
        append(rec)
    payload = b"".join(parts)
    if compression != Compression.NONE:
        payload = compress(compression, payload)
    n = len(records)
    tail = V2_CRC_COVERED_HEAD.pack(int(compression) & COMPRESSION_MASK, n - 1, base_ts, max_ts, -1, NO_PRODUCER_EPOCH,
                      NO_SEQUENCE, n)
    crc = _crc32c.crc32c(payload, _crc32c.crc32c(tail))
    head = V2_HEAD_TO_CRC.pack(0, V2_HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2, crc)
    return head + tail + payload


class BatchBuilder:
    """Accumulates records and builds one v2 batch, as a producer would.

    The first appended timestamp becomes ``baseTimestamp``; offsets count up
    from ``base_offset`` unless given explicitly.
    """

    def __init__(
        self,
        compression: int = Compression.NONE,
        timestamp_type: int = TimestampType.CREATE_TIME,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
        producer_id: int = -1,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
    ) -> None:
        self.batch = RecordBatch(
            base_offset=base_offset,
            partition_leader_epoch=partition_leader_epoch,
            compression=codec_of(compression),
            timestamp_type=TimestampType(timestamp_type),
            is_transactional=is_transactional,
            is_control=is_control,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )

    def __len__(self) -> int:
        return len(self.batch.records)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header | tuple[str, bytes | None]] = (),
        offset: int | None = None,
    ) -> Record:
        batch = self.batch
        if not batch.records:
            batch.base_timestamp = timestamp
        if offset is None:
            offset_delta = batch.records[-1].offset_delta + 1 if batch.records else 0
        else:
            offset_delta = offset - batch.base_offset
        hdrs = [h if isinstance(h, Header) else Header(h[0], h[1]) for h in headers]
        record = Record(offset_delta, timestamp - batch.base_timestamp, key, value, hdrs)
        batch.records.append(record)
        return record

    def build(self) -> bytes:
        return encode_batch(self.batch)


# -- decoding -----------------------------------------------------------------
def _decode_bytes(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"negative {what} length {length}", pos)
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"{what} of {length} bytes runs past the end of its record", pos)
    return bytes(buf[pos : pos + length]), pos + length


def decode_headers(buf, pos: int, end: int) -> tuple[list[tuple[str, bytes | None]], int]:
    """A record's headers (varint count, then key/value pairs) as ``(key, value)`` tuples."""
    count, pos = decode_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}", pos)
    headers = []
    for _ in range(count):
        hkey, pos = _decode_bytes(buf, pos, end, "header key")
        if hkey is None:
            raise CorruptRecordError("null header key", pos)
        hvalue, pos = _decode_bytes(buf, pos, end, "header value")
        try:
            headers.append((hkey.decode("utf-8"), hvalue))
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8", pos) from None
    return headers, pos


def decode_record(buf, pos: int) -> tuple[Record, int]:
    """Decode the record starting at ``buf[pos]``; returns ``(record, next_pos)``."""
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise CorruptRecordError(f"record length {length} runs past the end of the batch", pos)
    attributes = buf[pos]
    timestamp_delta, pos = decode_varlong(buf, pos + 1)
    offset_delta, pos = decode_varint(buf, pos)
    key, pos = _decode_bytes(buf, pos, end, "key")
    value, pos = _decode_bytes(buf, pos, end, "value")
    pairs, pos = decode_headers(buf, pos, end)
    headers = [Header(k, v) for k, v in pairs]
    if pos != end:
        raise CorruptRecordError(f"record declares {length} bytes but its fields span {length + pos - end}", pos)
    return Record(offset_delta, timestamp_delta, key, value, headers, attributes), pos


def decode_batch(buf, pos: int = 0) -> RecordBatch:
    """Decode and fully validate the v2 batch at ``buf[pos]``.

    Raises :class:`CorruptRecordError` (CORRUPT_MESSAGE) on a short buffer,
    wrong magic, CRC mismatch, undecompressable records, a truncated varint, a
    length past the end, a record count that does not match, or trailing bytes.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if pos + V2_HEADER_SIZE > len(mv):
        raise CorruptRecordError("buffer shorter than a v2 batch header", pos)
    view = BatchView(mv, pos)
    view.validate()
    h = view.header()
    try:
        codec = codec_of(h.attributes & COMPRESSION_MASK)
    except ValueError as exc:
        raise CorruptRecordError(str(exc), pos) from None
    payload = view.records_buffer()
    if codec != Compression.NONE:
        try:
            payload = memoryview(decompress(codec, payload))
        except CompressionError as exc:
            raise CorruptRecordError(str(exc), pos) from None
    if h.records_count < 0:
        raise CorruptRecordError(f"negative record count {h.records_count}", pos)
    records = []
    rpos = 0
    try:
        for _ in range(h.records_count):
            record, rpos = decode_record(payload, rpos)
            records.append(record)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"record {len(records)}: {exc}", pos) from None
    if rpos != len(payload):
        raise CorruptRecordError(
            f"{len(payload) - rpos} bytes after the {h.records_count} declared records", pos
        )
    attrs = h.attributes
    return RecordBatch(
        base_offset=h.base_offset,
        partition_leader_epoch=h.partition_leader_epoch,
        compression=codec,
        timestamp_type=TimestampType(1 if attrs & TIMESTAMP_TYPE_MASK else 0),
        is_transactional=bool(attrs & TRANSACTIONAL_MASK),
        is_control=bool(attrs & CONTROL_MASK),
        has_delete_horizon=bool(attrs & DELETE_HORIZON_MASK),
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        last_offset_delta=h.last_offset_delta,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        records=records,
        crc=h.crc,
    )


def iter_batches(buf, start: int = 0) -> Iterator[RecordBatch]:
    """Decode every whole v2 batch in ``buf``; a trailing partial batch is skipped."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    pos = start
    while pos + LOG_OVERHEAD <= len(mv):
        size = LOG_OVERHEAD + struct.unpack_from(">i", mv, pos + 8)[0]
        if size < V2_HEADER_SIZE:
            raise CorruptRecordError(f"batch size {size} is smaller than the v2 header", pos)
        if pos + size > len(mv):
            return
        yield decode_batch(mv, pos)
        pos += size


class RecordEntry(NamedTuple):
    """One record with its absolute offset and timestamp, as a consumer sees it."""

    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    batch: object  # the RecordBatch (v2) or the outermost LegacyMessage (v0/v1)


def iter_records(buf, start: int = 0) -> Iterator[RecordEntry]:
    """Every record of every whole entry in ``buf``, v2 batches and legacy messages alike.

    Control batches are included (check ``entry.batch.is_control``). A
    trailing partial entry is skipped, as in a fetch response.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    pos = start
    while pos + MAGIC_OFFSET + 1 <= len(mv):
        size = LOG_OVERHEAD + struct.unpack_from(">i", mv, pos + 8)[0]
        if size <= LOG_OVERHEAD:
            raise CorruptRecordError(f"entry size {size} is impossible", pos)
        if pos + size > len(mv):
            return
        if mv[pos + MAGIC_OFFSET] == 2:
            batch = decode_batch(mv, pos)
            for r in batch.records:
                yield RecordEntry(
                    batch.offset_of(r), batch.timestamp_of(r), batch.timestamp_type,
                    r.key, r.value, r.headers, batch,
                )
        else:
            for wrapper, msg in iter_legacy_entries(mv[pos : pos + size]):
                yield RecordEntry(
                    msg.offset, msg.timestamp, TimestampType(msg.timestamp_type),
                    msg.key, msg.value, [], wrapper,
                )
        pos += size


def set_log_append_time(view: BatchView, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``maxTimestamp = timestamp``; recompute the CRC.

    The only rewrite of CRC-covered bytes a broker does
    (``log.message.timestamp.type=LogAppendTime``). Needs a writable buffer.
    """
    mv = view.buffer()
    attrs = _I16.unpack_from(mv, V2_ATTRIBUTES_OFFSET)[0]
    _I16.pack_into(mv, V2_ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(mv, 35, timestamp)
    _U32.pack_into(mv, V2_CRC_OFFSET, _crc32c.crc32c(mv[V2_ATTRIBUTES_OFFSET:]))


# -- the consumer's fast path ---------------------------------------------------------
