"""Helpers for the log tests: real batches from broker.records' encoder."""

from __future__ import annotations

import struct
from pathlib import Path

from broker.log import Log
from broker.records.batch import BatchBuilder, iter_batches, iter_records


def make_batch(n: int = 1, *, ts: int = 1000, key: bytes | None = b"k", value: bytes | None = b"v",
               size: int = 0, producer_id: int = -1, compression: int = 0, base_sequence: int = 0) -> bytes:
    """An uncompressed (by default) v2 batch of ``n`` records with timestamps ts, ts+1, ...

    With a ``producer_id`` it is an idempotent producer's batch (epoch 0) starting at ``base_sequence``.
    """
    b = BatchBuilder(compression=compression, producer_id=producer_id,
                     producer_epoch=0 if producer_id >= 0 else -1, base_sequence=base_sequence if producer_id >= 0 else -1)
    payload = value if value is None or not size else value * max(1, size // max(1, len(value)))
    for i in range(n):
        b.append(ts + i, key, payload)
    return b.build()


def read_all(log: Log, start: int | None = None) -> list:
    """Every record from ``start`` (log start) to the log end, following slices across segments."""
    out = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        s = log.read(offset, 1 << 20)
        if s.length == 0:
            break
        data = s.read_bytes()
        out.extend(e for e in iter_records(data) if e.offset >= offset)
        offset = list(iter_batches(data))[-1].next_offset
    return out


def read_batches(log: Log) -> list:
    """Every batch from the log start to the log end, following slices across segments."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        s = log.read(offset, 1 << 20)
        if s.length == 0:
            break
        out.extend(b for b in iter_batches(s.read_bytes()) if b.next_offset > offset)
        offset = out[-1].next_offset
    return out


def log_state(log: Log) -> dict:
    """Everything an append can change, for comparing two logs fed the same appends.

    Segment files are read whole (not just up to ``size``), so bytes left past the
    end by a failed write show up too.
    """
    segs = log.segments
    return {
        "bytes": [Path(s.log_path).read_bytes() for s in segs],
        "bases": [s.base_offset for s in segs],
        "sizes": [(s.size, s.next_offset) for s in segs],
        "index": [(list(s.index.relative_offsets), list(s.index.positions)) for s in segs],
        "time": [(list(s.time_index.timestamps), list(s.time_index.relative_offsets)) for s in segs],
        "max_ts": [(s.max_timestamp, s.offset_of_max_timestamp, s.rolling_based_timestamp) for s in segs],
        "since_index": [(s.bytes_since_last_index_entry, s.indexes_full) for s in segs],
        "leo": log.log_end_offset,
        "log_start_offset": log.log_start_offset,
        "epochs": list(log.leader_epoch_cache.entries),
        "unflushed": log.unflushed_messages,
    }


def dir_files(path) -> dict[str, bytes]:
    """``{file name: bytes}`` of every file in a partition directory."""
    return {p.name: p.read_bytes() for p in sorted(Path(path).iterdir()) if p.is_file()}


def with_head(batch, base_offset: int, leader_epoch: int = 0) -> bytes:
    """``batch`` with baseOffset and partitionLeaderEpoch set (both lie outside the CRC)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


def with_bad_crc(batch) -> bytes:
    """``batch`` with its last byte flipped: the CRC-32C no longer matches."""
    out = bytearray(batch)
    out[-1] ^= 0xFF
    return bytes(out)
