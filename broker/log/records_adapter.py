"""The log's only door into record decoding and encoding (:mod:`broker.records.batch`).

The hot path (append, read, recovery) never decodes records; only lookups by
timestamp and the cleaner do, through these functions.
"""

from __future__ import annotations

from broker.records.batch import RecordBatch, decode_batch, encode_batch, set_log_append_time

__all__ = ["RecordBatch", "decode_batch", "encode_batch", "set_log_append_time", "record_offsets_and_timestamps"]


def record_offsets_and_timestamps(entry: bytes | memoryview) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of the v2 batch ``entry`` (decompressing if needed)."""
    batch = decode_batch(entry)
    return [(batch.offset_of(r), batch.timestamp_of(r)) for r in batch.records]
