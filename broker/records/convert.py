"""Conversion between RecordBatch v2 and legacy message sets (v0/v1).

* :func:`upconvert_to_v2` — Produce from old clients (Produce v0-v2 carry
  message sets). Each compressed wrapper becomes one v2 batch with the same
  codec; each run of consecutive uncompressed messages with the same timestamp
  type becomes one uncompressed v2 batch. Offsets are renumbered 0..n-1 within
  a batch from the first message's offset (the broker assigns real offsets on
  append anyway). v1 timestamps are kept, v0 messages get NO_TIMESTAMP (-1),
  as Kafka does; a LogAppendTime wrapper keeps its timestamp as maxTimestamp.
  Keys and values are kept; there are no headers to keep.
* :func:`downconvert` — Fetch from old consumers (Fetch v0-v3). Each v2
  batch becomes legacy messages at its absolute offsets: an uncompressed batch
  one message per record, a compressed batch one wrapper with the same codec.
  Control batches and empty batches vanish, headers are dropped (v0/v1 have
  none), v0 loses timestamps. Zstd batches cannot be represented and raise
  UNSUPPORTED_COMPRESSION_TYPE (76), as Kafka refuses such fetches. Legacy
  entries already at or below the target magic are copied unchanged. A
  trailing partial entry in the input is dropped.

Pure functions over bytes; nothing here does I/O.
"""

from __future__ import annotations

import struct

from broker.records.batch import NO_TIMESTAMP, Record, RecordBatch, TimestampType, decode_batch, encode_batch
from broker.records.compression import Compression, UnsupportedCompressionTypeError
from broker.records.legacy import LegacyMessage, flatten_wrapper, decode_message, encode_message_set
from broker.records.view import COMPRESSION_MASK, LOG_OVERHEAD, MAGIC_OFFSET, CorruptRecordError

_I32 = struct.Struct(">i")


def _iter_entries(mv: memoryview):
    """Yield ``(pos, size, magic)`` of each whole top-level entry."""
    pos = 0
    while pos + MAGIC_OFFSET + 1 <= len(mv):
        size = LOG_OVERHEAD + _I32.unpack_from(mv, pos + 8)[0]
        if size <= LOG_OVERHEAD + 4:
            raise CorruptRecordError(f"entry size {size} is impossible", pos)
        if pos + size > len(mv):
            return
        yield pos, size, mv[pos + MAGIC_OFFSET]
        pos += size


def _v2_from_messages(
    messages: list[LegacyMessage], codec: int, timestamp_type: int, partition_leader_epoch: int,
    max_timestamp: int | None = None,
) -> bytes:
    base_ts = messages[0].timestamp
    records = [
        Record(i, m.timestamp - base_ts, m.key, m.value, []) for i, m in enumerate(messages)
    ]
    batch = RecordBatch(
        base_offset=messages[0].offset,
        partition_leader_epoch=partition_leader_epoch,
        compression=Compression(codec),
        timestamp_type=TimestampType.LOG_APPEND_TIME if timestamp_type == 1 else TimestampType.CREATE_TIME,
        base_timestamp=base_ts,
        max_timestamp=max_timestamp,
        records=records,
    )
    return encode_batch(batch)


def upconvert_to_v2(message_set: bytes, partition_leader_epoch: int = -1) -> bytes:
    """Convert a v0/v1 message set to v2 batches (see the module docstring)."""
    mv = memoryview(message_set)
    out: list[bytes] = []
    run: list[LegacyMessage] = []

    def flush_run() -> None:
        if run:
            out.append(_v2_from_messages(run, Compression.NONE, run[0].timestamp_type, partition_leader_epoch))
            run.clear()

    for pos, size, magic in _iter_entries(mv):
        if magic == 2:
            flush_run()
            decode_batch(mv, pos)  # validates
            out.append(bytes(mv[pos : pos + size]))
            continue
        msg, _ = decode_message(mv, pos)
        codec = msg.attributes & COMPRESSION_MASK
        if codec == Compression.NONE:
            if run and run[-1].timestamp_type != msg.timestamp_type:
                flush_run()
            run.append(msg)
            continue
        flush_run()
        inner = flatten_wrapper(msg, pos)
        ts_type = msg.timestamp_type
        max_ts = msg.timestamp if ts_type == 1 else None
        out.append(_v2_from_messages(inner, codec, ts_type, partition_leader_epoch, max_ts))
    flush_run()
    return b"".join(out)


def _legacy_from_batch(batch: RecordBatch, magic: int) -> bytes:
    if batch.compression == Compression.ZSTD:
        raise UnsupportedCompressionTypeError(f"a zstd batch cannot be down-converted to magic {magic}")
    messages = [
        LegacyMessage(batch.offset_of(r), magic, 0, batch.timestamp_of(r) if magic == 1 else NO_TIMESTAMP,
                      r.key, r.value)
        for r in batch.records
    ]
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    return encode_message_set(
        messages,
        magic,
        compression=batch.compression,
        timestamp_type=1 if log_append else 0,
        log_append_time=batch.effective_max_timestamp() if log_append else None,
    )


def downconvert(records: bytes, magic: int) -> bytes:
    """Convert the entries of ``records`` to a message set of ``magic`` (0 or 1)."""
    if magic not in (0, 1):
        raise ValueError(f"can only down-convert to magic 0 or 1, not {magic}")
    mv = memoryview(records)
    out: list[bytes] = []
    for pos, size, entry_magic in _iter_entries(mv):
        if entry_magic == 2:
            batch = decode_batch(mv, pos)
            if batch.is_control or not batch.records:
                continue
            out.append(_legacy_from_batch(batch, magic))
        elif entry_magic <= magic:
            decode_message(mv, pos)  # validates
            out.append(bytes(mv[pos : pos + size]))
        else:
            msg, _ = decode_message(mv, pos)
            codec = msg.attributes & COMPRESSION_MASK
            inner = flatten_wrapper(msg, pos) if codec else [msg]
            out.append(encode_message_set(inner, magic, compression=codec))
    return b"".join(out)
