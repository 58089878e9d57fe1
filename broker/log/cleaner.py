"""Log compaction (``cleanup.policy=compact`` and ``compact,delete``).

A pass over one log:

1. The *dirty* section runs from the first dirty offset (checkpointed by the
   LogManager in ``cleaner-offset-checkpoint``) to the start of the active
   segment, bounded by the high watermark and ``min.compaction.lag.ms``. The
   active segment is never read for keys nor rewritten.
2. An offset map ``blake2b-128(key) -> last offset`` is built over the dirty
   section, segment by segment, until it holds ``offset_map_bytes / 24``
   entries; the rest waits for the next pass (bounded memory).
3. Every segment from the log start up to the end of the mapped section is
   rewritten, in groups whose total size fits ``segment.bytes`` (small
   segments merge), into ``<base>.log.cleaned`` and swapped in atomically
   (``.cleaned`` -> ``.swap`` -> final name; see ``Log.replace_segments``).

Per record: kept when its offset is >= the map's offset for its key (or its
key is not in the map, or it has no key); a kept tombstone (value ``None``) is
dropped once its segment's largest timestamp is older than
``delete.retention.ms`` (Kafka 2.7 measures that age by segment modification
time; record timestamps make it deterministic). Control batches are kept.

Per batch: an untouched batch is copied byte for byte; otherwise it is
re-encoded with the same base offset, lastOffsetDelta, producer id/epoch,
base sequence, attributes and codec (firstTimestamp becomes the first kept
record's, as Kafka does). A batch with no record left is kept as an *empty*
batch when it is its producer's last batch in the log, so the producer state
(last sequence) survives a reload (Kafka 2.7 documentation, §5.3.1).

Thread-safety: run one pass per log at a time (the LogManager's cleaner
thread); appends and reads continue during a pass, only the swap takes the
log's writer lock.
"""

from __future__ import annotations

import hashlib
import mmap
from dataclasses import dataclass

from broker.log.log import Log
from broker.log.records_adapter import RecordBatch, decode_batch, encode_batch
from broker.log.segment import CLEANED_SUFFIX, LogSegment
from broker.records.view import CONTROL_MASK, LOG_OVERHEAD, iter_batch_views

MAP_ENTRY_BYTES = 24  # 16-byte hash + 8-byte offset, the unit of offset_map_bytes


@dataclass(frozen=True, slots=True)
class CleanResult:
    next_dirty_offset: int
    segments_before: int
    segments_after: int
    records_removed: int
    bytes_before: int
    bytes_after: int


def key_hash(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


def _iter_views(seg: LogSegment):
    size = seg.size
    if size == 0:
        return
    mm = mmap.mmap(seg.fd, size, access=mmap.ACCESS_READ)
    try:
        mv = memoryview(mm)
        try:
            for v in iter_batch_views(mv, 0, size):
                yield v
        finally:
            mv.release()
    finally:
        mm.close()


def dirty_ratio(log: Log, first_dirty_offset: int) -> float:
    segs = log.segments[:-1]
    total = sum(s.size for s in segs)
    dirty = sum(s.size for i, s in enumerate(segs)
                if (log.segments[i + 1].base_offset > first_dirty_offset))
    return dirty / total if total else 0.0


def clean_log(log: Log, now_ms: int, *, first_dirty_offset: int, high_watermark: int,
              offset_map_bytes: int = 64 << 20, force: bool = False) -> CleanResult | None:
    """One compaction pass (see the module docstring). None when there was nothing to clean.

    Only segments wholly below ``high_watermark`` are cleaned (Kafka never
    compacts what consumers cannot read yet).
    """
    cfg = log.config
    segs = log.segments
    if len(segs) < 2:
        return None
    end_limit = min(segs[-1].base_offset, high_watermark)
    cleanable: list[LogSegment] = []
    for i, seg in enumerate(segs[:-1]):
        if segs[i + 1].base_offset > end_limit:
            break
        seg.load_indexes()
        if cfg.min_compaction_lag_ms and seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
            break
        cleanable.append(seg)
    if not cleanable:
        return None
    next_base = {id(s): segs[i + 1].base_offset for i, s in enumerate(segs[:-1])}
    dirty = [s for s in cleanable if next_base[id(s)] > first_dirty_offset]
    if not dirty:
        return None
    if not force:
        total = sum(s.size for s in cleanable)
        if total == 0 or sum(s.size for s in dirty) / total < cfg.min_cleanable_dirty_ratio:
            return None

    # 2. offset map over the dirty section, whole segments at a time
    max_entries = max(1, offset_map_bytes // MAP_ENTRY_BYTES)
    offset_map: dict[bytes, int] = {}
    mapped_end = first_dirty_offset
    for seg in dirty:
        for v in _iter_views(seg):
            if v.last_offset < first_dirty_offset or v.attributes & CONTROL_MASK:
                continue
            batch = decode_batch(v.buffer())
            for r in batch.records:
                if r.key is not None:
                    offset_map[key_hash(r.key)] = batch.offset_of(r)
        mapped_end = next_base[id(seg)]
        if len(offset_map) >= max_entries:
            break

    # the last batch of every producer id anywhere in the log (headers only)
    last_of_producer: dict[int, int] = {}
    for seg in segs:
        for v in _iter_views(seg):
            pid = v.producer_id
            if pid >= 0:
                last_of_producer[pid] = v.base_offset

    to_clean = [s for s in cleanable if next_base[id(s)] <= mapped_end]
    groups = _group_segments(to_clean, next_base, cfg.segment_bytes, cfg.segment_index_bytes)
    horizon = now_ms - cfg.delete_retention_ms
    removed = 0
    bytes_before = sum(s.size for s in to_clean)
    bytes_after = 0
    for group in groups:
        new = LogSegment.create(log.dir, group[0].base_offset, index_interval_bytes=cfg.index_interval_bytes,
                                max_index_bytes=cfg.segment_index_bytes, now_ms=now_ms, suffix=CLEANED_SUFFIX)
        try:
            for seg in group:
                drop_tombstones = seg.max_timestamp < horizon
                for v in _iter_views(seg):
                    out, n = _clean_batch(v, offset_map, drop_tombstones, last_of_producer)
                    removed += n
                    if out is None:
                        continue
                    new.append(out, last_offset=v.last_offset, max_timestamp=_max_ts(out),
                               offset_of_max_timestamp=v.last_offset, first_batch_max_timestamp=_max_ts(out))
            new.on_become_inactive()
            new.flush()
            new.index.close()
            new.time_index.close()
        except BaseException:
            new.delete_files()
            raise
        bytes_after += new.size
        if not log.replace_segments(new, group):
            return None
    return CleanResult(mapped_end, len(to_clean), len(groups), removed, bytes_before, bytes_after)


def _max_ts(entry) -> int:
    return int.from_bytes(bytes(entry[35:43]), "big", signed=True)


def _group_segments(segs: list[LogSegment], next_base: dict[int, int], max_size: int,
                    max_index_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for seg in segs:
        g = groups[-1] if groups else None
        if (g is not None and sum(s.size for s in g) + seg.size <= max_size
                and sum(s.index.entries for s in g) + seg.index.entries < max_index_bytes // 8
                and next_base[id(seg)] - 1 - g[0].base_offset <= (1 << 31) - 1):
            g.append(seg)
        else:
            groups.append([seg])
    return groups


def _clean_batch(v, offset_map: dict[bytes, int], drop_tombstones: bool,
                 last_of_producer: dict[int, int]):
    """(bytes to write or None, records removed) for the batch view ``v``."""
    entry = v.buffer()
    if v.attributes & CONTROL_MASK:
        return bytes(entry), 0
    batch = decode_batch(entry)
    kept = []
    for r in batch.records:
        off = batch.offset_of(r)
        if r.key is not None:
            latest = offset_map.get(key_hash(r.key))
            if latest is not None and off < latest:
                continue
            if r.value is None and drop_tombstones:
                continue
        kept.append(r)
    removed = len(batch.records) - len(kept)
    if removed == 0:
        return bytes(entry), 0
    if not kept:
        if batch.producer_id >= 0 and last_of_producer.get(batch.producer_id) == batch.base_offset:
            empty = RecordBatch(
                base_offset=batch.base_offset, partition_leader_epoch=batch.partition_leader_epoch,
                compression=batch.compression, timestamp_type=batch.timestamp_type,
                is_transactional=batch.is_transactional, base_timestamp=batch.base_timestamp,
                max_timestamp=batch.max_timestamp, last_offset_delta=batch.last_offset_delta,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence, records=[])
            return encode_batch(empty), removed
        return None, removed
    first_ts = batch.timestamp_of(kept[0]) if batch.timestamp_type == 0 else batch.base_timestamp
    for r in kept:
        r.timestamp_delta = batch.base_timestamp + r.timestamp_delta - first_ts
    max_ts = batch.max_timestamp if batch.timestamp_type == 1 else max(first_ts + r.timestamp_delta for r in kept)
    rebuilt = RecordBatch(
        base_offset=batch.base_offset, partition_leader_epoch=batch.partition_leader_epoch,
        compression=batch.compression, timestamp_type=batch.timestamp_type,
        is_transactional=batch.is_transactional, base_timestamp=first_ts, max_timestamp=max_ts,
        last_offset_delta=batch.last_offset_delta, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence, records=kept)
    return encode_batch(rebuilt), removed


__all__ = ["CleanResult", "clean_log", "dirty_ratio", "key_hash", "LOG_OVERHEAD"]
