"""Helpers for the log tests: real batches from broker.records' encoder."""

from __future__ import annotations

from broker.log import Log, LogConfig
from broker.records.batch import BatchBuilder, iter_batches, iter_records


def make_batch(n: int = 1, *, ts: int = 1000, key: bytes | None = b"k", value: bytes | None = b"v",
               size: int = 0, producer_id: int = -1, compression: int = 0) -> bytes:
    """An uncompressed (by default) v2 batch of ``n`` records with timestamps ts, ts+1, ..."""
    b = BatchBuilder(compression=compression, producer_id=producer_id,
                     producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1)
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
