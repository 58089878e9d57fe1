"""Log compaction (``cleanup.policy=compact`` and ``compact,delete``).

A pass over one log:

1. The *dirty* section runs from the first dirty offset (checkpointed by the
   LogManager in ``cleaner-offset-checkpoint``) to the start of the active
   segment, bounded by the high watermark, the first unstable offset (no
   transaction still undecided is cleaned, as in Kafka) and
   ``min.compaction.lag.ms``. The active segment is never read for keys nor
   rewritten.
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
time; record timestamps make it deterministic).

Transactions (Kafka 2.7's ``CleanedTransactionMetadata``): the aborted
transactions of the cleaned range come from the transaction indexes. Their
batches are left out of the offset map and removed from the log. An ABORT
marker is kept while any batch of its transaction was still read in this
pass (its entry goes into the new segment's ``.txnindex``), a COMMIT marker
while any batch of its transaction was; after that a marker is removed once
its segment is past ``delete.retention.ms``, like a tombstone (a consumer
that read the data before the pass still meets the marker).

Per batch: an untouched batch is copied byte for byte; otherwise it is
re-encoded with the same base offset, lastOffsetDelta, producer id/epoch,
base sequence, attributes and codec (firstTimestamp becomes the first kept
record's, as Kafka does). A batch with no record left is kept as an *empty*
batch when it is its producer's last data batch in the log, so the producer
state (last sequence) survives a reload (Kafka 2.7 documentation, §5.3.1); this
holds for the removed batches of an aborted transaction too.

Thread-safety: run one pass per log at a time (the LogManager's cleaner
thread); appends and reads continue during a pass, only the swap takes the
log's writer lock.
"""

from __future__ import annotations

import hashlib
import mmap
from collections import deque
from dataclasses import dataclass

from broker.log.log import Log
from broker.log.records_adapter import RecordBatch, decode_batch, encode_batch
from broker.log.segment import CLEANED_SUFFIX, LogSegment
from broker.log.txn_index import AbortedTxn
from broker.records.control import ControlRecordType, decode_control_key
from broker.records.view import CONTROL_MASK, LOG_OVERHEAD, TRANSACTIONAL_MASK, iter_batch_views

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
    unstable = log.first_unstable_offset(high_watermark, prune=False)
    if unstable is not None:
        end_limit = min(end_limit, unstable)
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

    aborted = log.collect_aborted_transactions(segs[0].base_offset, next_base[id(cleanable[-1])])

    # 2. offset map over the dirty section, whole segments at a time
    max_entries = max(1, offset_map_bytes // MAP_ENTRY_BYTES)
    offset_map: dict[bytes, int] = {}
    mapped_end = first_dirty_offset
    txns = _Transactions(aborted)
    for seg in dirty:
        for v in _iter_views(seg):
            if v.attributes & CONTROL_MASK:
                txns.on_marker(v)
                continue
            if txns.on_batch(v) or v.last_offset < first_dirty_offset:
                continue
            batch = decode_batch(v.buffer())
            for r in batch.records:
                if r.key is not None:
                    offset_map[key_hash(r.key)] = batch.offset_of(r)
        mapped_end = next_base[id(seg)]
        if len(offset_map) >= max_entries:
            break

    # the last data batch of every producer id anywhere in the log (headers only)
    last_of_producer: dict[int, int] = {}
    for seg in segs:
        for v in _iter_views(seg):
            pid = v.producer_id
            if pid >= 0 and not v.attributes & CONTROL_MASK:
                last_of_producer[pid] = v.base_offset

    to_clean = [s for s in cleanable if next_base[id(s)] <= mapped_end]
    groups = _group_segments(to_clean, next_base, cfg.segment_bytes, cfg.segment_index_bytes)
    horizon = now_ms - cfg.delete_retention_ms
    removed = 0
    bytes_before = sum(s.size for s in to_clean)
    bytes_after = 0
    txns = _Transactions(aborted)
    for group in groups:
        txns.kept_aborted = []
        new = LogSegment.create(log.dir, group[0].base_offset, index_interval_bytes=cfg.index_interval_bytes,
                                max_index_bytes=cfg.segment_index_bytes, now_ms=now_ms, suffix=CLEANED_SUFFIX)
        try:
            for seg in group:
                drop_tombstones = seg.max_timestamp < horizon
                for v in _iter_views(seg):
                    out, n = _clean_batch(v, offset_map, drop_tombstones, last_of_producer, txns)
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
        if not log.replace_segments(new, group, aborted=txns.kept_aborted):
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


class _Transactions:
    """Kafka's ``CleanedTransactionMetadata``: which batches of one pass (read in offset order)
    belong to aborted transactions, and which markers must stay."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._to_start = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._aborted: dict[int, list] = {}  # producer id -> [AbortedTxn, a batch of it was read]
        self._committed: set[int] = set()  # producers with a batch read of a transaction not aborted
        #: the aborted transactions whose ABORT marker was kept (entries of the new ``.txnindex``)
        self.kept_aborted: list[AbortedTxn] = []

    def _start_up_to(self, offset: int) -> None:
        while self._to_start and self._to_start[0].first_offset <= offset:
            txn = self._to_start.popleft()
            self._aborted[txn.producer_id] = [txn, False]

    def on_batch(self, v) -> bool:
        """Whether the data batch ``v`` belongs to an aborted transaction (and goes)."""
        self._start_up_to(v.last_offset)
        if not v.attributes & TRANSACTIONAL_MASK:
            return False
        ongoing = self._aborted.get(v.producer_id)
        if ongoing is not None:
            ongoing[1] = True
            return True
        self._committed.add(v.producer_id)
        return False

    def on_marker(self, v) -> bool:
        """Whether the control batch ``v`` may go: no batch of its transaction is left."""
        self._start_up_to(v.last_offset)
        batch = decode_batch(v.buffer())
        if not batch.records:
            return True
        _version, kind = decode_control_key(batch.records[0].key)
        pid = v.producer_id
        if kind == ControlRecordType.ABORT:
            ongoing = self._aborted.pop(pid, None)
            if ongoing is not None and ongoing[1]:
                self.kept_aborted.append(ongoing[0])
                return False
            return True
        if pid in self._committed:
            self._committed.discard(pid)
            return False
        return True


def _clean_batch(v, offset_map: dict[bytes, int], drop_tombstones: bool,
                 last_of_producer: dict[int, int], txns: _Transactions):
    """(bytes to write or None, records removed) for the batch view ``v``."""
    entry = v.buffer()
    if v.attributes & CONTROL_MASK:
        if txns.on_marker(v) and drop_tombstones:
            return None, v.records_count
        return bytes(entry), 0
    batch = decode_batch(entry)
    is_last = batch.producer_id >= 0 and last_of_producer.get(batch.producer_id) == batch.base_offset
    if txns.on_batch(v):  # an aborted transaction's
        return (_emptied(batch) if is_last else None), len(batch.records)
    kept = []
    for r in batch.records:
        if r.key is not None:
            latest = offset_map.get(key_hash(r.key))
            if latest is not None and batch.offset_of(r) < latest:
                continue
            if r.value is None and drop_tombstones:
                continue
        kept.append(r)
    removed = len(batch.records) - len(kept)
    if removed == 0:
        return bytes(entry), 0
    if not kept:
        return (_emptied(batch) if is_last else None), removed
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


def _emptied(batch: RecordBatch) -> bytes:
    """``batch`` without its records: its header keeps the producer's last sequence."""
    return encode_batch(RecordBatch(
        base_offset=batch.base_offset, partition_leader_epoch=batch.partition_leader_epoch,
        compression=batch.compression, timestamp_type=batch.timestamp_type,
        is_transactional=batch.is_transactional, base_timestamp=batch.base_timestamp,
        max_timestamp=batch.max_timestamp, last_offset_delta=batch.last_offset_delta,
        producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, records=[]))


__all__ = ["CleanResult", "clean_log", "dirty_ratio", "key_hash", "LOG_OVERHEAD"]
