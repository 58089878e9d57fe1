"""A partition's log: an ordered list of segments with one writer and lock-free readers.

Directory ``<log.dir>/<topic>-<partition>/`` holds the segments (see
:mod:`broker.log.segment`) and ``leader-epoch-checkpoint``. Offsets are
assigned here: the next batch gets ``log_end_offset`` as its base offset.

Invariants:
- ``log_start_offset <= log_end_offset``. The high watermark is not the log's: the
  replica layer (:mod:`broker.replica`) owns it and passes it to what it bounds
  (retention, compaction); :meth:`delete_records` takes an offset already checked
  against it;
- segments are sorted by base offset, the last one is the active segment and the
  only one written to; offsets increase strictly across batches and segments;
- ``recovery_point <= log_end_offset``: data below it has been fsynced.

Thread-safety: writers (``append``/``append_group``, ``roll``, ``truncate_to``,
``delete_records``, retention's deletion, the cleaner's swap) serialise on
``self.lock``. Appends write under it (a group's ``pwritev``), so a caller that
must never wait on a disk (the event loop) does not take it: appends go
through a :class:`~broker.log.appender.LogAppender`, and ``update_config``
swaps the config without it. Retention chooses its segments (reading indexes)
on a snapshot first, and files are unlinked after the lock is released. Readers (``read``, ``offset_for_timestamp``, properties)
take no lock: they use the segment tuple snapshot, which writers replace
atomically (copy-on-write), so a reader racing a deletion keeps working on the
old snapshot; deleted segments' files are renamed ``*.deleted`` and only closed
and unlinked after ``file.delete.delay.ms`` (see :meth:`purge_deleted`).
``flush`` runs outside the writer lock (fsync must never stall appends) under
its own lock; a handle closed under it by a roll, a deletion or ``close`` is
skipped, and a closed log's flush does nothing.

Idempotent and transactional producers: ``producer_state`` (a
:class:`~broker.log.producer_state.ProducerStateManager`) checks each batch with
a producer id before it is placed and takes it in once placed, under ``lock``
on the writer's thread, so the checks follow append order; a retried batch
is answered with its first write's offsets (an ``AppendInfo`` with no
records) and not written. A write that fails rebuilds the state from the log.
Snapshots are written at rolls and at close, loaded at open.

Split out: opening and recovery in :mod:`broker.log.recovery`, the retention
policy in :mod:`broker.log.retention`, the producer state in
:mod:`broker.log.producer_state`.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
import time
import uuid
from bisect import bisect_right
from collections import deque
from pathlib import Path
from typing import Callable, NamedTuple

import crc32c

from broker.log.checkpoint import (LEADER_EPOCH_CHECKPOINT, LeaderEpochCache, read_partition_metadata,
                                   write_partition_metadata)
from broker.log.config import LogConfig
from broker.log.errors import (
    CorruptRecordError,
    KafkaStorageError,
    LogClosedError,
    LogError,
    OffsetOutOfRange,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from broker.log.info import AppendInfo, FetchSlice, LogRecoveryReport
from broker.log.producer_state import (CLIENT, COORDINATOR, DEFAULT_PRODUCER_ID_EXPIRATION_MS, REPLICATION,
                                       ProducerStateManager)
from broker.log.records_adapter import record_offsets_and_timestamps, set_log_append_time
from broker.log.recovery import recover_segments, remove_stray_files
from broker.log.retention import segments_to_delete
from broker.log.scan import read_header
from broker.log.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, LogSegment, roll_reason
from broker.log.txn_index import AbortedTxn, collect_aborted, truncate_from, txn_index_path
from broker.log.txn_index import read_entries as read_txn_entries
from broker.log.txn_index import write_entries as write_txn_entries
from broker.log.txn_index import append as append_aborted_txn
from broker.records.view import (LOG_OVERHEAD, V2_APPEND_FIELDS, V2_APPEND_PRODUCER_FIELDS, V2_ATTRIBUTES_OFFSET,
                                 V2_ENTRY_HEAD, V2_HEADER, V2_HEADER_SIZE, BatchView)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_crc32c = crc32c.crc32c
logger = logging.getLogger(__name__)
_new_tuple = tuple.__new__  # AppendInfo without NamedTuple.__new__'s Python-level call


def check_single_batch(records) -> bool:
    """Verify the CRC-32C of ``records`` if it is exactly one v2 batch; False if it is anything else.

    Raises :class:`CorruptRecordError` on a mismatch. True means the CRC was
    checked and holds: :meth:`Log.append_group` with ``crc_checked=True`` then
    skips it. Every buffer the log's single-batch path accepts passes the
    shape test here, so none reaches the disk unchecked.
    """
    mv = memoryview(records)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    n = len(mv)
    if n < V2_HEADER_SIZE:
        return False
    _bo, length, _ple, magic, crc, _lod, _mts, _count = V2_APPEND_FIELDS.unpack_from(mv)
    if LOG_OVERHEAD + length != n or magic != 2:
        return False
    if _crc32c(mv[V2_ATTRIBUTES_OFFSET:]) != crc:  # above 32 KiB the GIL is released meanwhile: a writer can run
        raise CorruptRecordError("CRC-32C mismatch", 0)
    return True


#: the internal topics: only the broker's coordinators write them (their batches carry no client sequences)
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def _origin(assign_offsets: bool, base_sequence: int, internal: bool) -> str:
    """Whose append it is, for the producer state's checks: a follower's, a client's (sequenced) or a
    coordinator's (a marker, an offset commit of a transaction: sequence 0 each time, as in Kafka)."""
    if not assign_offsets:
        return REPLICATION
    return CLIENT if base_sequence >= 0 and not internal else COORDINATOR


def _duplicate_info(duplicate, log_start_offset: int, log_append_time: bool = False) -> AppendInfo:
    """The answer to a retried batch: the offsets of its first write, nothing appended now."""
    return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1, duplicate.last_offset,
                      duplicate.timestamp if log_append_time else -1, 0, 0, 0, log_start_offset)


class _AppendSettings(NamedTuple):
    """The config values the append path reads, cached per (immutable) LogConfig object."""

    config: LogConfig
    max_message_bytes: int
    log_append_time: bool
    segment_bytes: int
    segment_ms: int  # segment.ms less its jitter
    flush_messages: int | None


class _BatchInfo:
    """What the general append path knows of one batch (its header, validated; offsets possibly reassigned)."""

    __slots__ = ("position", "size", "base_offset", "max_timestamp", "last_offset_delta", "records_count",
                 "partition_leader_epoch", "attributes", "producer_id", "producer_epoch", "base_sequence")

    def __init__(self, position: int, size: int, base_offset: int, max_timestamp: int, last_offset_delta: int,
                 records_count: int, partition_leader_epoch: int, attributes: int, producer_id: int,
                 producer_epoch: int, base_sequence: int) -> None:
        self.position = position
        self.size = size
        self.base_offset = base_offset
        self.max_timestamp = max_timestamp
        self.last_offset_delta = last_offset_delta
        self.records_count = records_count
        self.partition_leader_epoch = partition_leader_epoch
        self.attributes = attributes
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence


class _Run:
    """Single batches placed by a group append but not yet written, all for one segment.

    ``entries`` are :meth:`LogSegment.append_run`'s ``(data, head, last offset,
    max timestamp)``, ``items`` the indexes of their items in the group, and
    ``epochs`` the ``(leader epoch, base offset)`` they start.
    """

    __slots__ = ("entries", "items", "epochs")

    def __init__(self) -> None:
        self.entries: list = []
        self.items: list[int] = []
        self.epochs: list[tuple[int, int]] = []


class Log:
    """See the module docstring. Build with :meth:`Log.open`."""

    def __init__(self, dir: Path, config: LogConfig, clock: Callable[[], float],
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.dir = Path(dir)
        self.config = config
        self.clock = clock
        self.lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._view: tuple[tuple[int, ...], tuple[LogSegment, ...]] = ((), ())
        self._log_end_offset = 0
        self.log_start_offset = 0
        self.recovery_point = 0
        self.recovery_report: LogRecoveryReport | None = None
        self.leader_epoch_cache: LeaderEpochCache | None = None
        self.unflushed_messages = 0
        self.last_flush_ms = self._now_ms()
        self.flush_hook: Callable[["Log"], None] | None = None  # set by LogManager: wake the flusher
        # set by LogManager.appender_for: the writer thread of this log's dir (a log never leaves its dir)
        self.appender = None
        self._pending_deletes: list[tuple[float, LogSegment]] = []
        self._settings: _AppendSettings | None = None  # see _append_settings
        #: idempotent and transactional producers (see :mod:`broker.log.producer_state`); under ``lock``
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        #: a partition of an internal topic: its producer batches come from coordinators, not clients
        self.internal = self.dir.name.rpartition("-")[0] in INTERNAL_TOPICS
        #: the first offset of the earliest ongoing transaction, published after each write (read lock-free)
        self.first_undecided_offset: int | None = None
        #: (first offset, marker offset) of ended transactions, in marker order: appended by writers,
        #: dropped by :meth:`first_unstable_offset` once the high watermark passes their marker
        self._completed_txns: deque[tuple[int, int]] = deque()
        self._placed_txns: list = []  # (segment, CompletedTxn, last stable offset) placed, not yet published
        #: base offsets of the segments that may have a .txnindex (read_committed fetches open no other)
        self._txn_index_bases: set[int] = set()
        self.closed = False

    # -- the topic id (KIP-516) -------------------------------------------------
    def check_or_set_topic_id(self, topic_id: "uuid.UUID") -> bool:
        """Whether this log belongs to the topic with ``topic_id``: a log without ``partition.metadata``
        takes the id (the file is written); one whose file names another id, or an unreadable file, is
        not the topic's (Kafka's INCONSISTENT_TOPIC_ID; the file is left as it is). Blocking."""
        with self.lock:
            try:
                found = read_partition_metadata(self.dir)
            except ValueError as exc:
                logger.error("%s", exc)
                return False
            if found is None:
                write_partition_metadata(self.dir, topic_id)
                return True
            return found == topic_id

    def topic_id(self) -> "uuid.UUID | None":
        """The id ``partition.metadata`` names, None without one (or an unreadable file). Blocking."""
        try:
            return read_partition_metadata(self.dir)
        except ValueError:
            return None

    # -- opening and recovery -----------------------------------------------
    @classmethod
    def open(cls, dir: Path, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int | None = None,
             clock: Callable[[], float] = time.time, had_clean_shutdown: bool = False,
             producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> "Log":
        """Open (creating if needed) the log in ``dir`` and recover it from ``recovery_point``.

        Segments from the one holding ``recovery_point`` onward are verified batch
        by batch (CRC, sizes, offsets); the first invalid byte and everything after
        it is cut, including later segments. ``had_clean_shutdown`` skips the CRC
        check (the broker wrote a clean-shutdown marker) but still finds the tail.
        Then the producer state is loaded: the newest snapshot and the batches after it.
        """
        log = cls(dir, config, clock, producer_id_expiration_ms)
        log.dir.mkdir(parents=True, exist_ok=True)
        log._recover(recovery_point, log_start_offset, had_clean_shutdown)
        return log

    def _new_segment(self, base_offset: int) -> LogSegment:
        c = self.config
        return LogSegment.create(self.dir, base_offset, index_interval_bytes=c.index_interval_bytes,
                                 max_index_bytes=c.segment_index_bytes, now_ms=self._now_ms(),
                                 preallocate_bytes=c.segment_bytes if c.preallocate else 0)

    def _recover(self, recovery_point: int, log_start_offset: int | None, clean: bool) -> None:
        remove_stray_files(self.dir)
        segments, report = recover_segments(self.dir, self.config, recovery_point, clean,
                                            lambda: self._new_segment(log_start_offset or 0))
        last = segments[-1]
        leo = last.next_offset if last.next_offset is not None else last.base_offset
        self._set_segments(segments)
        self._log_end_offset = leo
        first_base = segments[0].base_offset
        lso = first_base if log_start_offset is None else max(log_start_offset, first_base)
        self.log_start_offset = min(lso, leo)
        self.recovery_point = min(recovery_point, leo) if not clean else leo
        self.leader_epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        report.log_end_offset = leo
        self.recovery_report = report
        self._txn_index_bases = {s.base_offset for s in segments if txn_index_path(s.log_path).exists()}
        self._reload_producer_state()  # writes no snapshot: a start that fails later must have changed nothing

    # -- snapshot helpers ------------------------------------------------------
    def _set_segments(self, segments) -> None:
        segs = tuple(segments)
        self._view = (tuple(s.base_offset for s in segs), segs)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._view[1])

    @property
    def active_segment(self) -> LogSegment:
        return self._view[1][-1]

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._view[1])

    def latest(self) -> int:
        return self._log_end_offset

    def earliest(self) -> int:
        return self.log_start_offset

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from the next append on. Takes no lock (called on the event loop).

        ``config`` is immutable and replaced in one assignment; the next group
        append reads it under the writer lock. Segments made from now on take
        its index interval; the existing ones are told here.
        """
        self.config = config
        for seg in self._view[1]:
            seg.index_interval_bytes = config.index_interval_bytes

    # -- append ------------------------------------------------------------------
    def _append_settings(self) -> _AppendSettings:
        """The :class:`_AppendSettings` of the current config (made once per LogConfig object)."""
        cfg = self.config
        settings = self._settings
        if settings is None or settings.config is not cfg:
            settings = self._settings = _AppendSettings(
                cfg, cfg.max_message_bytes, cfg.message_timestamp_type == "LogAppendTime",
                cfg.segment_bytes, cfg.segment_ms - cfg.segment_jitter_ms, cfg.flush_messages)
        return settings

    def append(self, records, *, leader_epoch: int = 0, assign_offsets: bool = True,
               append_time_ms: int | None = None) -> AppendInfo:
        """Validate and append one or more whole v2 batches; see the brief in the package docstring.

        One write per call: this is :meth:`append_group` with a single item, and
        raises the item's error instead of returning it.
        """
        result = self.append_group(((records, leader_epoch),), assign_offsets=assign_offsets,
                                   append_time_ms=append_time_ms)[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def append_group(self, items, *, assign_offsets: bool = True, append_time_ms: int | None = None,
                     crc_checked: bool = False) -> list:
        """Append several independent buffers in order, writing them together (group write).

        ``items`` is a sequence of ``(records, leader_epoch, ...)`` (further fields
        are ignored: the appender passes its queue entries); each ``records`` is
        a buffer of one or more whole v2 batches, as :meth:`append` takes. The
        result has one entry per item, in order: its :class:`AppendInfo`, or the
        error it failed with (a :class:`LogError` or :class:`CorruptRecordError`;
        :class:`KafkaStorageError` when the write itself failed). An item that
        fails changes nothing and does not affect the others.

        Effects are exactly those of calling :meth:`append` once per item, in
        order (same offsets, same segment rolls, same index entries, same
        files), but every run of consecutive single-batch items that land in
        the same segment goes to the file together (``pwritev`` calls of up
        to 1 MiB): the kernel's per-call cost is paid once per call instead of
        once per batch.

        Each item's buffer must stay untouched until this returns and must not
        appear twice in ``items``: a writable buffer is patched in place
        (``baseOffset``, ``partitionLeaderEpoch``) and written from there; a
        read-only one is written with a patched copy of its 16-byte head.

        The log end offset and the segment sizes move only after the bytes are
        written, so a reader never sees offsets whose bytes are not in the file
        yet. A leader epoch that a batch starts is checkpointed just before its
        write and forgotten again if the write fails.

        ``crc_checked`` says the caller already ran :func:`check_single_batch`
        on every item that holds exactly one v2 batch (the appender does, on
        the submitting thread, so CRC work and writes overlap); the CRC of
        other items is checked here as always.
        """
        results: list = [None] * len(items)
        with self.lock:
            if self.closed:
                return [LogClosedError(f"log {self.dir} is closed")] * len(items)
            settings = self._append_settings()
            flush_messages = settings.flush_messages
            run = _Run()
            try:
                self._place_locked(items, results, settings, assign_offsets, append_time_ms, crc_checked, run)
            except Exception as exc:  # noqa: BLE001 - the group stops; what was written stands
                if isinstance(exc, OSError):  # a write, a roll or the epoch checkpoint: the disk failed
                    error = KafkaStorageError(f"append to {self.dir} failed: {exc}")
                    error.__cause__ = exc  # the log manager tells a failed dir from a full one by it
                else:
                    logger.exception("append to %s failed", self.dir)
                    error = exc
                for i in run.items:  # placed, not written
                    results[i] = None
                self._placed_txns.clear()
                self._reload_producer_state()  # it took in what was placed but not written
                for j, r in enumerate(results):
                    if r is None:
                        results[j] = error
            if self._placed_txns:
                self._publish_txns_locked()
            self.first_undecided_offset = self.producer_state.first_undecided_offset
        if flush_messages is not None and self.flush_hook is not None and self.unflushed_messages >= flush_messages:
            self.flush_hook(self)
        return results

    def _place_locked(self, items, results: list, settings: _AppendSettings, assign_offsets: bool,
                      append_time_ms: int | None, crc_checked: bool, run: "_Run") -> None:
        """:meth:`append_group`'s work under the lock: check, place and write each item, in order.

        Fills ``results`` as items are placed; ``run`` collects the placed
        single batches until they are written (:meth:`_write_run_locked`).
        """
        _cfg, max_message_bytes, log_append_time, segment_bytes, segment_ms, _flush = settings
        nxt = self._log_end_offset
        seg = self._view[1][-1]
        size = seg.size  # the active segment's size once the run is written
        room = seg.index_room()  # a batch adds at most one index entry
        log_start = self.log_start_offset
        producer_state = self.producer_state
        now_ms = self._now_ms()  # segment.ms of a segment without timestamps, as of the group
        latest_epoch = self.leader_epoch_cache.latest_epoch
        if latest_epoch is None:
            latest_epoch = -1
        i = -1
        for item in items:
            i += 1
            epoch = item[1]
            mv = memoryview(item[0])
            if mv.ndim != 1 or mv.itemsize != 1:
                mv = mv.cast("B")
            n = len(mv)
            if not log_append_time and n >= V2_HEADER_SIZE:
                (base_offset, length, partition_leader_epoch, magic, crc, last_offset_delta, max_timestamp,
                 count) = V2_APPEND_FIELDS.unpack_from(mv)
                fast = (LOG_OVERHEAD + length == n and n <= max_message_bytes and magic == 2
                        and last_offset_delta >= 0 and count >= 0)
            else:
                fast = False
            if not fast:  # several batches, LogAppendTime or a bad header: the general path
                self._write_run_locked(seg, run, results)
                try:
                    results[i] = self._append_batches(mv, epoch, assign_offsets, append_time_ms)
                except (LogError, CorruptRecordError) as exc:
                    results[i] = exc
                nxt = self._log_end_offset
                seg = self._view[1][-1]
                size = seg.size
                room = seg.index_room()
                latest_epoch = self.leader_epoch_cache.latest_epoch
                if latest_epoch is None:
                    latest_epoch = -1
                continue
            if not crc_checked and _crc32c(mv[V2_ATTRIBUTES_OFFSET:]) != crc:
                results[i] = CorruptRecordError("CRC-32C mismatch", 0)
                continue
            attributes, producer_id, producer_epoch, base_sequence = V2_APPEND_PRODUCER_FIELDS.unpack_from(
                mv, V2_ATTRIBUTES_OFFSET)
            head = None
            if assign_offsets:
                base_offset, partition_leader_epoch = nxt, epoch
                if mv.readonly:
                    head = V2_ENTRY_HEAD.pack(base_offset, length, partition_leader_epoch)
                else:
                    V2_ENTRY_HEAD.pack_into(mv, 0, base_offset, length, partition_leader_epoch)
            elif base_offset < nxt:
                results[i] = UnexpectedAppendOffsetError(
                    f"batch base offset {base_offset} is below the expected offset {nxt}")
                continue
            if producer_id >= 0:
                try:
                    duplicate = producer_state.check(producer_id, producer_epoch, base_sequence, last_offset_delta,
                                                     attributes, mv, _origin(assign_offsets, base_sequence,
                                                                             self.internal))
                except (LogError, CorruptRecordError) as exc:
                    results[i] = exc
                    continue
                if duplicate is not None:
                    results[i] = _duplicate_info(duplicate, log_start)
                    continue
            last = base_offset + last_offset_delta
            if len(run.entries) + 1 >= room:
                # the run could fill an index: write it, so the roll check below sees the real state
                self._write_run_locked(seg, run, results)
                size = seg.size
                room = seg.index_room()
            t = seg.rolling_based_timestamp
            if t is None and run.entries:
                t = run.entries[0][3]  # what the run's first batch will set
            if roll_reason(size, t, seg.created_ms, seg.indexes_full, seg.base_offset, first_offset=base_offset,
                           incoming_bytes=n, incoming_max_timestamp=max_timestamp, last_offset=last,
                           now_ms=now_ms, segment_bytes=segment_bytes, segment_ms=segment_ms):
                self._write_run_locked(seg, run, results)  # the segment as it stands, pending entries included
                seg = self._roll_locked(base_offset)
                size = 0
                room = seg.index_room()
            if producer_id >= 0:
                completed = producer_state.update(producer_id, producer_epoch, base_sequence, base_offset,
                                                  last_offset_delta, max_timestamp, attributes, mv)
                if completed is not None:
                    self._placed_txns.append((seg, completed, producer_state.last_stable_offset(completed)))
            run.entries.append((mv, head, last, max_timestamp))
            run.items.append(i)
            if partition_leader_epoch > latest_epoch:
                run.epochs.append((partition_leader_epoch, base_offset))
                latest_epoch = partition_leader_epoch
            if max_timestamp > -1:
                results[i] = _new_tuple(AppendInfo,
                                        (base_offset, last, max_timestamp, last, -1, 1, count, n, log_start))
            else:
                results[i] = _new_tuple(AppendInfo, (base_offset, last, -1, base_offset, -1, 1, count, n, log_start))
            size += n
            nxt = last + 1
        self._write_run_locked(seg, run, results)

    def _write_with_epochs(self, epochs: list, write: Callable[[], None]) -> None:
        """Record the leader epochs that a write starts (``(epoch, base offset)``), then write.

        The checkpoint goes first: if it cannot be written, no data is; if the
        data cannot be, the epochs are forgotten again. Either way an
        ``OSError`` leaves the log as it was (a checkpoint file that still
        names them is cut to the log end on the next open).
        """
        cache = self.leader_epoch_cache
        try:
            for epoch, base in epochs:
                cache.assign(epoch, base)
            write()
        except OSError:
            if epochs:
                try:
                    cache.truncate_from_end(self._log_end_offset)
                except OSError:
                    pass
            raise

    def _write_run_locked(self, seg: LogSegment, run: "_Run", results: list) -> None:
        """Write the placed batches together (``LogSegment.append_run``), then publish them; empties the run.

        ``results`` already holds each run item's AppendInfo. A failed write
        raises ``OSError`` with nothing published (the log end offset stays
        where it was); :meth:`append_group` then answers the run's items and
        every later one with a :class:`KafkaStorageError`.
        """
        entries = run.entries
        if not entries:
            return
        self._write_with_epochs(run.epochs, lambda: seg.append_run(entries))
        self._log_end_offset = entries[-1][2] + 1
        self.unflushed_messages += sum(results[i].num_records for i in run.items)
        run.__init__()

    def _append_batches(self, mv: memoryview, leader_epoch: int, assign_offsets: bool,
                        append_time_ms: int | None) -> AppendInfo:
        """The general append: any number of batches, LogAppendTime, and every validation error."""
        _config, max_message_bytes, log_append_time, segment_bytes, segment_ms, flush_messages = \
            self._append_settings()
        if mv.readonly and (assign_offsets or log_append_time):
            mv = memoryview(bytearray(mv))
        batches = self._validate(mv, max_message_bytes)
        now = append_time_ms if append_time_ms is not None else self._now_ms()
        if log_append_time:
            for b in batches:
                set_log_append_time(BatchView(mv, b.position, b.size), now)
                b.max_timestamp = now
        with self.lock:
            if self.closed:
                raise LogClosedError(f"log {self.dir} is closed")
            nxt = self._log_end_offset
            pack_offset, pack_epoch = _I64.pack_into, _I32.pack_into
            for b in batches:
                if assign_offsets:
                    b.base_offset = nxt
                    b.partition_leader_epoch = leader_epoch
                    pack_offset(mv, b.position, nxt)
                    pack_epoch(mv, b.position + 12, leader_epoch)
                elif b.base_offset < nxt:
                    raise UnexpectedAppendOffsetError(
                        f"batch base offset {b.base_offset} is below the expected offset {nxt}")
                nxt = b.base_offset + b.last_offset_delta + 1
            producer_state = self.producer_state
            producers = [b for b in batches if b.producer_id >= 0]
            for b in producers:
                duplicate = producer_state.check(b.producer_id, b.producer_epoch, b.base_sequence, b.last_offset_delta,
                                                 b.attributes, mv[b.position:b.position + b.size],
                                                 _origin(assign_offsets, b.base_sequence, self.internal))
                if duplicate is not None:
                    return _duplicate_info(duplicate, self.log_start_offset, log_append_time)
            first = batches[0].base_offset
            last = nxt - 1
            max_ts, off_max, num_records = -1, first, 0
            for b in batches:
                if b.max_timestamp > max_ts:
                    max_ts, off_max = b.max_timestamp, b.base_offset + b.last_offset_delta
                num_records += b.records_count
            seg = self.active_segment
            if seg.should_roll(first_offset=first, incoming_bytes=len(mv), incoming_max_timestamp=max_ts,
                               last_offset=last, now_ms=now, segment_bytes=segment_bytes,
                               segment_ms=segment_ms) is not None:
                seg = self._roll_locked(first)
            epochs = []
            latest = self.leader_epoch_cache.latest_epoch
            for b in batches:
                if b.partition_leader_epoch >= 0 and (latest is None or b.partition_leader_epoch > latest):
                    epochs.append((b.partition_leader_epoch, b.base_offset))
                    latest = b.partition_leader_epoch
            self._write_with_epochs(epochs, lambda: seg.append(
                mv, last_offset=last, max_timestamp=max_ts, offset_of_max_timestamp=off_max,
                first_batch_max_timestamp=batches[0].max_timestamp))
            self._log_end_offset = last + 1
            self.unflushed_messages += num_records
            for b in producers:
                completed = producer_state.update(b.producer_id, b.producer_epoch, b.base_sequence, b.base_offset,
                                                  b.last_offset_delta, b.max_timestamp, b.attributes,
                                                  mv[b.position:b.position + b.size])
                if completed is not None:
                    self._placed_txns.append((seg, completed, producer_state.last_stable_offset(completed)))
            info = AppendInfo(first, last, max_ts, off_max, now if log_append_time else -1, len(batches),
                              num_records, len(mv), self.log_start_offset)
        hook = self.flush_hook
        if hook is not None and flush_messages is not None and self.unflushed_messages >= flush_messages:
            hook(self)
        return info

    @staticmethod
    def _validate(mv: memoryview, max_message_bytes: int) -> list[_BatchInfo]:
        """Check every entry (size, magic, CRC); one header unpack per batch, no per-record work."""
        n = len(mv)
        pos = 0
        out = []
        unpack = V2_HEADER.unpack_from
        while pos < n:
            if n - pos < V2_HEADER_SIZE:
                raise CorruptRecordError(f"{n - pos} trailing bytes are not a whole batch", pos)
            (base_offset, length, partition_leader_epoch, magic, crc, attributes, last_offset_delta, _base_timestamp,
             max_timestamp, producer_id, producer_epoch, base_sequence, count) = unpack(mv, pos)
            size = LOG_OVERHEAD + length
            if length < V2_HEADER_SIZE - LOG_OVERHEAD or size > n - pos:
                raise CorruptRecordError(f"batch length {length} does not fit the {n - pos} bytes left", pos)
            if size > max_message_bytes:
                raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes={max_message_bytes}")
            if magic != 2:
                raise CorruptRecordError(f"expected magic 2, found {magic}", pos)
            if _crc32c(mv[pos + V2_ATTRIBUTES_OFFSET:pos + size]) != crc:
                raise CorruptRecordError("CRC-32C mismatch", pos)
            if last_offset_delta < 0 or count < 0:
                raise CorruptRecordError(f"negative lastOffsetDelta {last_offset_delta} or recordsCount {count}", pos)
            out.append(_BatchInfo(pos, size, base_offset, max_timestamp, last_offset_delta, count,
                                  partition_leader_epoch, attributes, producer_id, producer_epoch, base_sequence))
            pos += size
        if not out:
            raise CorruptRecordError("no record batch to append", 0)
        return out

    # -- rolling ---------------------------------------------------------------------
    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Close the active segment to writes and start a new one at the log end offset."""
        with self.lock:
            return self._roll_locked(self._log_end_offset if new_base_offset is None else new_base_offset)

    def _roll_locked(self, base: int) -> LogSegment:
        """Make a new active segment at ``base``; if its files cannot be made (``OSError``), nothing changes."""
        bases, segs = self._view
        active = segs[-1]
        if active.size == 0 and active.base_offset == base:
            return active
        new = self._new_segment(base)
        if active.size == 0:
            # an empty active segment is replaced rather than kept as an empty file
            active.delete_files()
            segs = segs[:-1]
        else:
            active.on_become_inactive()
            active.index.close()
            active.time_index.close()
        self._set_segments(segs + (new,))
        keep_from = segs[-1].base_offset if segs else base
        try:  # a snapshot only spares a replay: failing to write one fails nothing
            self.producer_state.take_snapshot(base)
            self.producer_state.delete_snapshots(lambda offset: offset >= keep_from)
        except OSError as exc:
            logger.warning("producer snapshot of %s at %d failed: %s", self.dir, base, exc)
        return new

    # -- reading -----------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchSlice:
        """A slice of whole batches starting at the batch holding ``offset`` (see the package docs)."""
        bases, segs = self._view
        leo = self._log_end_offset
        lso = self.log_start_offset
        if offset < lso or offset > leo:
            raise OffsetOutOfRange(offset, lso, leo)
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return self._empty_slice(segs[-1])
        i = max(0, bisect_right(bases, offset) - 1)
        found = None
        while i < len(segs):
            seg = segs[i]
            size = seg.size
            found = seg.find_batch(offset, size)
            if found is not None:
                break
            i += 1
        if found is None:
            return self._empty_slice(segs[-1])
        pos, base_offset, _last, entry, _mts = found
        limit = size
        if max_offset is not None and (seg.next_offset is None or max_offset < seg.next_offset):
            loc = seg.find_batch(max_offset, size)
            if loc is not None:
                limit = loc[0]
        if limit <= pos:
            return FetchSlice(seg.file, pos, 0, -1, seg.base_offset)
        end = seg.slice_end(pos, entry, max_bytes, limit)
        if end == pos:
            if not min_one_batch:
                return FetchSlice(seg.file, pos, 0, -1, seg.base_offset)
            end = pos + entry
        return FetchSlice(seg.file, pos, end - pos, base_offset, seg.base_offset)

    @staticmethod
    def _empty_slice(seg: LogSegment) -> FetchSlice:
        return FetchSlice(seg._ensure_open(), seg.size, 0, -1, seg.base_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp >= ``timestamp_ms``; None if none."""
        segs = self._view[1]
        lso = self.log_start_offset
        for seg in segs:
            seg.load_indexes()
            if seg.max_timestamp < timestamp_ms:
                continue
            start = max(seg.time_index.lookup(timestamp_ms), lso, seg.base_offset)
            loc = seg.find_batch(start)
            if loc is None:
                continue
            pos, size, fd = loc[0], seg.size, seg.fd
            while pos < size:
                h = read_header(fd, pos)
                if h is None:
                    break
                _base_offset, entry, last, max_timestamp = h
                if max_timestamp >= timestamp_ms and last >= lso:
                    for off, ts in record_offsets_and_timestamps(os.pread(fd, entry, pos)):
                        if ts >= timestamp_ms and off >= lso:
                            return off, ts
                pos += entry
        return None

    def offset_of_max_timestamp(self, below: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp in
        ``[log_start_offset, below)`` (ListOffsets' MAX_TIMESTAMP, KIP-734); None if no record.

        Segments are visited from the largest ``max_timestamp`` down, and only
        until no later one can beat what was found; in each, batch headers give
        the batch and one decode gives the record.
        """
        lso = self.log_start_offset
        segs = list(self._view[1])
        for seg in segs:
            seg.load_indexes()
        best: tuple[int, int, int, int] | None = None  # (timestamp, fd, position, entry size)
        for seg in sorted(segs, key=lambda s: (-s.max_timestamp, s.base_offset)):
            if best is not None and seg.max_timestamp <= best[0]:
                break
            if seg.base_offset >= below:
                continue
            loc = seg.find_batch(max(lso, seg.base_offset))
            if loc is None:
                continue
            pos, size, fd = loc[0], seg.size, seg.fd
            while pos < size:
                h = read_header(fd, pos)
                if h is None or h[0] >= below:
                    break
                _bo, entry, _last, max_timestamp = h
                if best is None or max_timestamp > best[0]:
                    best = (max_timestamp, fd, pos, entry)
                pos += entry
        if best is None:
            return None
        max_timestamp, fd, pos, entry = best
        found = [(off, ts) for off, ts in record_offsets_and_timestamps(os.pread(fd, entry, pos))
                 if lso <= off < below]
        if not found:
            return None
        top = max(ts for _off, ts in found)
        return next((off, ts) for off, ts in found if ts == top)

    # -- flushing --------------------------------------------------------------------
    def flush_needed(self, now_ms: int | None = None) -> bool:
        if self.unflushed_messages == 0 and self.recovery_point >= self._log_end_offset:
            return False
        cfg = self.config
        if cfg.flush_messages is not None and self.unflushed_messages >= cfg.flush_messages:
            return True
        now_ms = self._now_ms() if now_ms is None else now_ms
        if cfg.flush_ms is not None and now_ms - self.last_flush_ms >= cfg.flush_ms:
            return True
        return False

    def next_duty(self) -> float | None:
        """When (a ``clock()`` time) the log scheduler must next look at this log; None: only when woken.

        That is the earliest removal of a deleted segment and, with ``flush.ms``
        set, when a flush falls due: for a log with unflushed data ``flush.ms``
        after the last flush, for a clean one ``flush.ms`` from now (appends do
        not wake the scheduler). ``flush.messages`` wakes it itself.
        """
        due = min((t for t, _seg in self._pending_deletes), default=None)
        flush_ms = self.config.flush_ms
        if flush_ms is not None:
            if self.unflushed_messages or self.recovery_point < self._log_end_offset:
                at = (self.last_flush_ms + flush_ms) / 1000
            else:
                at = self.clock() + flush_ms / 1000
            due = at if due is None else min(due, at)
        return due

    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding ``[recovery_point, up_to)`` and move the recovery point to ``up_to``."""
        with self._flush_lock:
            if self.closed:  # closed (and maybe deleted) since the caller looked: nothing to sync
                return
            target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
            unflushed = self.unflushed_messages
            if target <= self.recovery_point and unflushed == 0:
                return
            bases, segs = self._view
            first = max(0, bisect_right(bases, self.recovery_point) - 1)
            last = bisect_right(bases, max(target - 1, 0))
            for seg in segs[first:max(last, first + 1)]:
                if not seg.deleted:
                    seg.flush()
            self.leader_epoch_cache.flush()
            if target > self.recovery_point:
                self.recovery_point = target
            if up_to is None or target >= self._log_end_offset:
                with self.lock:  # appends add to it from the writer thread
                    self.unflushed_messages = max(0, self.unflushed_messages - unflushed)
            self.last_flush_ms = self._now_ms()

    # -- deleting ---------------------------------------------------------------------
    def _delete_segments_locked(self, doomed: list[LogSegment]) -> int:
        if not doomed:
            return 0
        ids = {id(s) for s in doomed}
        segs = [s for s in self._view[1] if id(s) not in ids]
        if not segs:
            raise AssertionError("the active segment is never deleted")
        self._set_segments(segs)
        due = self.clock() + self.config.file_delete_delay_ms / 1000
        for seg in doomed:
            seg.deleted = True
            seg.rename_suffix("", DELETED_SUFFIX)
            self._pending_deletes.append((due, seg))
        return len(doomed)  # the caller purges once it has let go of the lock

    def replace_segments(self, new: LogSegment, old: list[LogSegment], *,
                         aborted: list[AbortedTxn] | None = None) -> bool:
        """Swap the cleaner's ``new`` segment (files ``*.cleaned``) in for ``old`` (consecutive).

        ``aborted``: the transaction index of ``new`` (the aborted transactions whose
        markers it kept); None keeps the entries of ``old``.

        Crash-safe order, as Kafka's: cleaned -> ``.swap``; old -> ``.deleted``;
        ``.swap`` -> final names. Recovery on open finishes an interrupted swap.
        Returns False (and removes ``new``) when ``old`` is no longer all in the log.
        """
        with self.lock:
            segs = list(self._view[1])
            ids = [id(s) for s in segs]
            if self.closed or not old or any(id(o) not in ids for o in old) or old[-1] is segs[-1]:
                new.delete_files()
                return False
            at = ids.index(id(old[0]))
            if aborted is None:
                aborted = [e for seg in old for e in read_txn_entries(txn_index_path(seg.log_path))]
            new.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            segs[at:at + len(old)] = [new]
            self._set_segments(segs)
            due = self.clock() + self.config.file_delete_delay_ms / 1000
            for seg in old:
                seg.deleted = True
                seg.rename_suffix("", DELETED_SUFFIX)
                self._pending_deletes.append((due, seg))
            new.rename_suffix(SWAP_SUFFIX, "")
            if aborted:
                self._txn_index_bases.add(new.base_offset)
                try:
                    write_txn_entries(txn_index_path(new.log_path), aborted)
                except OSError as exc:  # derived data; a replay rebuilds it
                    logger.error("transaction index of %s: %s", new.log_path, exc)
        if self.config.file_delete_delay_ms == 0:
            self.purge_deleted()
        return True

    def purge_deleted(self, now: float | None = None) -> int:
        """Close and unlink ``*.deleted`` segments whose delay has passed (all when ``now`` is inf)."""
        if not self._pending_deletes:  # the scheduler asks every log every tick: no lock for nothing
            return 0
        now = self.clock() if now is None else now
        with self.lock:
            due = [(t, s) for t, s in self._pending_deletes if t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now]
        for _t, seg in due:
            seg.delete_files()
        return len(due)

    def _advance_log_start_offset(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.producer_state.truncate_head(offset)

    def delete_retention_segments(self, now_ms: int | None = None, *, high_watermark: int) -> int:
        """Delete old segments by retention.ms / retention.bytes / log start offset; never the active one.

        Only segments wholly below ``high_watermark`` (the replica layer's) go:
        a record no consumer could read yet is never removed by retention.

        The choice (:func:`~broker.log.retention.segments_to_delete`, which may read
        indexes from disk) is made on a snapshot without the writer lock, so
        appends never wait for it; if the segments changed meanwhile (a roll is
        fine, a cleaner swap or a truncation is not) nothing happens this round.
        """
        now_ms = self._now_ms() if now_ms is None else now_ms
        doomed = segments_to_delete(self._view[1], self.log_start_offset, high_watermark, self.config, now_ms)
        if not doomed:
            return 0
        with self.lock:
            segs = self._view[1]
            n = len(doomed)
            if len(segs) <= n or any(a is not b for a, b in zip(segs, doomed)):
                return 0
            # move the start first: a reader never sees a segment list that starts above it
            self._advance_log_start_offset(segs[n].base_offset)
            deleted = self._delete_segments_locked(doomed)
        if self.config.file_delete_delay_ms == 0:
            self.purge_deleted()
        return deleted

    def delete_records(self, new_log_start_offset: int) -> int:
        """Advance the log start offset (DeleteRecords) to ``new_log_start_offset``; returns the log start offset.

        The caller has checked it against the high watermark (the replica layer
        does); here it only has to lie in ``[0, log_end_offset]``.
        """
        with self.lock:
            target = new_log_start_offset
            if target > self._log_end_offset or target < 0:
                raise OffsetOutOfRange(target, self.log_start_offset, self._log_end_offset)
            self._advance_log_start_offset(target)
            segs = self._view[1]
            doomed = [s for i, s in enumerate(segs[:-1]) if segs[i + 1].base_offset <= self.log_start_offset]
            self._delete_segments_locked(doomed)
            log_start_offset = self.log_start_offset
        if doomed and self.config.file_delete_delay_ms == 0:
            self.purge_deleted()
        return log_start_offset

    # -- leader epochs and truncation (replication) ----------------------------------------
    @property
    def latest_epoch(self) -> int:
        """The largest leader epoch in ``leader-epoch-checkpoint`` (-1: none)."""
        latest = self.leader_epoch_cache.latest_epoch
        return -1 if latest is None else latest

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """A new leader's epoch starts at ``start_offset`` (Kafka records it when it becomes leader)."""
        with self.lock:
            self.leader_epoch_cache.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; see :meth:`LeaderEpochCache.end_offset_for`."""
        with self.lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and above ``offset`` (a batch boundary). True if anything was removed."""
        with self.lock:
            if offset >= self._log_end_offset:
                return False
            segs = self._view[1]
            if offset <= segs[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            keep = [s for s in segs if s.base_offset < offset]
            doomed = [s for s in segs if s.base_offset >= offset]
            self._set_segments(keep)
            for s in doomed:
                s.delete_files()
            seg = keep[-1]
            seg.truncate_to_offset(offset)
            seg.open_indexes_for_append()
            self._log_end_offset = seg.next_offset if seg.next_offset is not None else seg.base_offset
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            self.recovery_point = min(self.recovery_point, self._log_end_offset)
            self.log_start_offset = min(self.log_start_offset, self._log_end_offset)
            self._reload_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset``."""
        with self.lock:
            old = self._view[1]
            for s in old:
                s.delete_files()
            self._set_segments([self._new_segment(offset)])
            self._log_end_offset = offset
            self.log_start_offset = offset
            self.recovery_point = offset
            self.unflushed_messages = 0
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(offset)
            self._completed_txns.clear()
            self.first_undecided_offset = None

    # -- producer state -------------------------------------------------------------------
    def _reload_producer_state(self) -> None:
        """Rebuild the producer state from the newest snapshot and the log after it (under ``lock``).

        The transaction indexes of the replayed range are rebuilt with it.
        """
        segments = self._view[1]

        def replay_from(offset: int) -> None:
            for seg in segments:
                if seg.next_offset is None or seg.next_offset > offset:
                    truncate_from(txn_index_path(seg.log_path), offset)

        def completed(seg, txn, last_stable_offset) -> None:
            self._placed_txns.append((seg, txn, last_stable_offset))

        self._completed_txns.clear()
        self._placed_txns.clear()
        try:
            self.producer_state.load(segments, self.log_start_offset, self._log_end_offset, self._now_ms(),
                                     completed, replay_from)
            self._publish_txns_locked()
        except OSError as exc:
            logger.error("rebuilding the producer state of %s failed: %s", self.dir, exc)
        self._placed_txns.clear()
        self.first_undecided_offset = self.producer_state.first_undecided_offset

    def _publish_txns_locked(self) -> None:
        """Written markers: aborted transactions into their segment's ``.txnindex``; all for the LSO."""
        placed, self._placed_txns = self._placed_txns, []
        for seg, txn, last_stable_offset in placed:
            if txn.is_aborted:
                self._txn_index_bases.add(seg.base_offset)
                try:
                    append_aborted_txn(txn_index_path(seg.log_path),
                                       AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                  last_stable_offset))
                except OSError as exc:  # derived data: the next open rebuilds what it replays
                    logger.error("transaction index of %s: %s", seg.log_path, exc)
            self._completed_txns.append((txn.first_offset, txn.last_offset))

    def first_unstable_offset(self, high_watermark: int, *, prune: bool = True) -> int | None:
        """Kafka's first unstable offset: the first offset of the earliest transaction that is ongoing or
        whose marker is not below ``high_watermark`` yet; None when there is none. Lock-free: the
        event loop's calls prune the transactions done with; others (the cleaner) pass ``prune=False``."""
        completed = self._completed_txns
        if not completed and self.first_undecided_offset is None:  # no transactions: most logs, at once
            return None
        if prune:
            try:
                while completed and completed[0][1] < high_watermark:
                    completed.popleft()
            except IndexError:  # cleared by a writer meanwhile
                pass
        firsts = [first for first, marker in list(completed) if marker >= high_watermark]
        undecided = self.first_undecided_offset
        if undecided is not None:
            firsts.append(undecided)
        return max(min(firsts), self.log_start_offset) if firsts else None

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound)`` (read_committed fetches)."""
        bases, segs = self._view
        i = max(0, bisect_right(bases, fetch_offset) - 1)
        indexed = self._txn_index_bases
        return collect_aborted([s.log_path for s in segs[i:] if s.base_offset in indexed], fetch_offset, upper_bound)

    def active_producers(self) -> list:
        """:class:`~broker.log.producer_state.ActiveProducer` of every producer id (DescribeProducers)."""
        with self.lock:
            return self.producer_state.active_producers()

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms``; how many."""
        with self.lock:
            return self.producer_state.remove_expired_producers(self._now_ms() if now_ms is None else now_ms)

    # -- lifecycle -------------------------------------------------------------------------
    def close(self, *, snapshot: bool = True) -> None:
        """Snapshot the producer state (unless not ``snapshot``), trim indexes and close every file
        (no fsync: call flush first)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            try:
                if snapshot:
                    self.producer_state.take_snapshot(self._log_end_offset)
            except OSError as exc:  # the next open replays the log instead
                logger.warning("producer snapshot of %s at close failed: %s", self.dir, exc)
            for seg in self._view[1]:
                try:
                    seg.close()
                except OSError as exc:  # e.g. a full disk while trimming an index: indexes are rebuilt on open
                    logger.warning("closing segment %s failed: %s", seg.log_path, exc)
        self.purge_deleted(float("inf"))

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"Log({self.dir.name}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self._log_end_offset}, segments={len(self._view[1])})")
