"""One log segment: ``<base>.log`` plus its ``.index`` and ``.timeindex``.

File names are the segment's base offset as 20 zero-padded digits
(``00000000000000000000.log``), exactly as Apache Kafka names them. The
``.log`` file is a concatenation of RecordBatch v2 entries (see
:mod:`broker.records.view`); the indexes are described in :mod:`broker.log.index`.

Invariant: every batch in the segment has ``base_offset >= segment.base_offset``
and ``last_offset - segment.base_offset <= 2**31 - 1`` (index entries are int32).

Thread-safety: one writer at a time (the owning :class:`~broker.log.log.Log`
holds its lock for append/truncate/roll/close); readers (``read_slice``,
``find_offset_by_timestamp``) may run concurrently with an append: they only
look at ``size`` (read once) and at data below it, which never changes.
Inactive segments load their indexes lazily, on first lookup, under a small
per-segment lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from broker.log.index import OffsetIndex, TimeIndex
from broker.log.scan import INT32_MAX, ScanResult, index_step, read_header, scan_file
from broker.log.txn_index import txn_index_path

logger = logging.getLogger(__name__)

_IOV_MAX = 1024  # buffers per pwritev (Linux UIO_MAXIOV)
# Bytes per pwritev (a larger batch goes alone). Single writes of several MiB were often
# 3-8x slower per byte than 1 MiB ones on Linux 6.x ext4 (measured: benchmarks/log_bench.py,
# 1 MiB batches, 21% of raw with a 4 MiB cap against 91-98% with 1 MiB); 1 MiB still
# amortises the per-call cost over 64 batches of 16 KiB.
_MAX_WRITE = 1 << 20

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """``00000000000000000042.log`` for base offset 42."""
    return f"{base_offset:020d}{suffix}"


def roll_reason(size: int, rolling_timestamp: int | None, created_ms: int, indexes_full: bool, base_offset: int,
                *, first_offset: int, incoming_bytes: int, incoming_max_timestamp: int, last_offset: int,
                now_ms: int, segment_bytes: int, segment_ms: int) -> str | None:
    """Kafka's roll rule (LogSegment.shouldRoll): why batches ``first_offset..last_offset`` of
    ``incoming_bytes`` must go to a new segment rather than one in the given state (None = they fit).

    A segment with data rolls when the bytes would pass ``segment.bytes``, when
    ``segment.ms`` has passed (measured from its first batch's max timestamp to
    the incoming max timestamp, or from its creation when it has no timestamp),
    when an index is full, or when the last offset is beyond int32 of its base.
    An empty segment rolls only when its base is too far below them (a follower
    or a compacted log can jump ahead); appending to it would overflow the index.
    The log's single appends and its batched runs (where ``size`` and
    ``rolling_timestamp`` include the entries not yet written) both ask here.
    """
    if size == 0:
        if first_offset != base_offset and last_offset - base_offset > INT32_MAX:
            return "offset overflow"
        return None
    if size > segment_bytes - incoming_bytes:
        return "segment.bytes"
    t = rolling_timestamp
    waited = incoming_max_timestamp - t if t is not None and t >= 0 else now_ms - created_ms
    if waited > segment_ms:
        return "segment.ms"
    if indexes_full:
        return "index full"
    if last_offset - base_offset > INT32_MAX:
        return "offset overflow"
    return None


class LogSegment:
    """A segment and its two indexes (see the module docstring for thread-safety)."""

    def __init__(self, dir: Path, base_offset: int, *, index_interval_bytes: int, max_index_bytes: int,
                 suffix: str = "") -> None:
        self.dir = Path(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_bytes = max_index_bytes
        self.log_path = self.dir / (segment_file_name(base_offset, LOG_SUFFIX) + suffix)
        self.index = OffsetIndex(self.dir / (segment_file_name(base_offset, INDEX_SUFFIX) + suffix),
                                 base_offset, max_index_bytes)
        self.time_index = TimeIndex(self.dir / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + suffix),
                                    base_offset, max_index_bytes)
        self.file = None  # io.FileIO, opened lazily for inactive segments
        self.fileno = -1  # self.file's descriptor while it is open (the append path reads it directly)
        self.size = 0
        self.next_offset: int | None = None  # last offset + 1; None when empty or not yet known
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.rolling_based_timestamp: int | None = None  # max timestamp of the first batch
        self.created_ms = int(time.time() * 1000)
        self.bytes_since_last_index_entry = 0
        # True when either index has no room left: the next append must roll. Kept up to date by
        # every change to the index entries of a segment open for append (see _update_indexes_full).
        self.indexes_full = False
        self._indexes_loaded = False
        self._load_lock = threading.RLock()
        self.deleted = False

    # -- construction -----------------------------------------------------
    @classmethod
    def create(cls, dir: Path, base_offset: int, *, index_interval_bytes: int, max_index_bytes: int,
               now_ms: int, preallocate_bytes: int = 0, suffix: str = "") -> "LogSegment":
        seg = cls(dir, base_offset, index_interval_bytes=index_interval_bytes, max_index_bytes=max_index_bytes,
                  suffix=suffix)
        seg.file = open(seg.log_path, "w+b", buffering=0)
        try:
            seg.fileno = seg.file.fileno()
            if preallocate_bytes:
                try:
                    os.posix_fallocate(seg.file.fileno(), 0, preallocate_bytes)
                    os.ftruncate(seg.file.fileno(), 0)  # keep size == valid bytes; blocks stay allocated
                except OSError:  # pragma: no cover - filesystem dependent
                    pass
            seg.created_ms = now_ms
            seg.index.reset()
            seg.time_index.reset()
            seg._indexes_loaded = True
            seg.open_indexes_for_append()
        except BaseException:  # e.g. no space for the index files: leave no half-made segment behind
            seg.delete_files()
            raise
        return seg

    @classmethod
    def open_existing(cls, dir: Path, base_offset: int, *, index_interval_bytes: int,
                      max_index_bytes: int) -> "LogSegment":
        """Attach to existing files without reading them (indexes load lazily)."""
        seg = cls(dir, base_offset, index_interval_bytes=index_interval_bytes, max_index_bytes=max_index_bytes)
        st = seg.log_path.stat()
        seg.size = st.st_size
        seg.created_ms = int(st.st_mtime * 1000)
        return seg

    def _ensure_open(self):
        f = self.file
        if f is None:
            with self._load_lock:
                if self.file is None:
                    self.file = open(self.log_path, "r+b", buffering=0)
                    self.fileno = self.file.fileno()
                f = self.file
        return f

    @property
    def fd(self) -> int:
        return self._ensure_open().fileno()

    # -- recovery and index loading ----------------------------------------
    def recover(self, *, expected_offset: int | None) -> ScanResult:
        """Verify every batch (CRC and all) and rebuild both indexes from the valid prefix.

        Does not truncate; the caller decides (``truncate_to_position``).
        """
        res = scan_file(self.fd, self.base_offset, verify=True, expected_offset=expected_offset,
                        index_interval_bytes=self.index_interval_bytes)
        self._apply_scan(res)
        return res

    def _apply_scan(self, res: ScanResult) -> None:
        # the scan built the index columns exactly as the files hold them (relative offsets)
        self.index.relative_offsets = res.index_relative_offsets
        self.index.positions = res.index_positions
        self.time_index.timestamps = res.time_timestamps
        self.time_index.relative_offsets = res.time_relative_offsets
        for index in (self.index, self.time_index):
            try:
                index.write_all()
            except OSError as exc:  # indexes are derived data: serve from memory, rebuild on a later open
                logger.warning("could not write the rebuilt index %s (%s); it is kept in memory", index.path, exc)
        self.next_offset = res.next_offset if res.batches else None
        self.max_timestamp = res.max_timestamp
        self.offset_of_max_timestamp = res.offset_of_max_timestamp
        self.rolling_based_timestamp = res.first_batch_timestamp
        self.bytes_since_last_index_entry = res.bytes_since_last_index_entry
        self._update_indexes_full()
        self._indexes_loaded = True

    def load_indexes(self) -> bool:
        """Load both indexes, rebuilding them from the log if missing or failing sanity checks.

        Returns True when a rebuild was needed. Safe to call from readers.
        """
        if self._indexes_loaded:
            return False
        with self._load_lock:
            if self._indexes_loaded:
                return False
            ok = self.index.load(self.size)
            last_rel = INT32_MAX
            ok = self.time_index.load(last_rel) and ok
            if ok and self.index.entries and self.index.positions[-1] >= self.size:
                ok = False
            if not ok:
                res = scan_file(self.fd, self.base_offset, verify=False,
                                index_interval_bytes=self.index_interval_bytes)
                self._apply_scan(res)
                return True
            if self.time_index.entries:
                self.max_timestamp = self.time_index.timestamps[-1]
                self.offset_of_max_timestamp = self.base_offset + self.time_index.relative_offsets[-1]
            self._update_indexes_full()
            self._indexes_loaded = True
            return False

    def load_tail(self) -> None:
        """Find ``next_offset`` and the max timestamp of a cleanly closed segment without a CRC scan."""
        self.load_indexes()
        if self.next_offset is not None or self.size == 0:
            return
        _off, pos = self.index.lookup(self.base_offset + INT32_MAX)
        res = scan_file(self.fd, self.base_offset, start=pos, verify=False)
        self.next_offset = res.next_offset
        if res.max_timestamp > self.max_timestamp:
            self.max_timestamp = res.max_timestamp
            self.offset_of_max_timestamp = res.offset_of_max_timestamp
        if self.rolling_based_timestamp is None:
            h = read_header(self.fd, 0)
            self.rolling_based_timestamp = h[3] if h else None

    # -- writing ------------------------------------------------------------
    def open_indexes_for_append(self) -> None:
        self.index.open_for_append(self.max_index_bytes)
        self.time_index.open_for_append(self.max_index_bytes)
        self._update_indexes_full()

    def _update_indexes_full(self) -> None:
        # index.is_full or time_index.is_full, without four property calls (runs on the append path)
        index, time_index = self.index, self.time_index
        self.indexes_full = (len(index.relative_offsets) >= index.max_entries
                             or len(time_index.timestamps) >= time_index.max_entries)

    def append(self, data, *, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int,
               first_batch_max_timestamp: int) -> None:
        """Write ``data`` (whole batches) at the end; add index entries as Kafka does."""
        position = self.size
        n = len(data)
        _write_at(self.fd, [data], position, n)
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = first_batch_max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        due, self.bytes_since_last_index_entry = index_step(self.bytes_since_last_index_entry,
                                                            self.index_interval_bytes, n)
        if due:
            self.index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._update_indexes_full()
        self.next_offset = last_offset + 1
        self.size = position + n

    def index_room(self) -> int:
        """How many more entries both indexes take before one is full (an append adds at most one)."""
        index, time_index = self.index, self.time_index
        return min(index.max_entries - len(index.relative_offsets),
                   time_index.max_entries - len(time_index.timestamps))

    def append_run(self, run) -> None:
        """Write single-batch entries back to back (``pwritev``, up to 1 MiB a call); index them as :meth:`append` does.

        ``run`` holds ``(data, head, last_offset, max_timestamp)`` per entry:
        ``data`` is the whole entry; with ``head`` the file gets ``head``
        followed by ``data[len(head):]`` (the log uses this to write a patched
        baseOffset/partitionLeaderEpoch for a read-only buffer without copying
        the batch). For one batch the offset of the max timestamp is its last
        offset. The caller keeps a run smaller than :meth:`index_room`. Nothing
        of the segment's state changes unless every byte was written; a failed
        write raises ``OSError`` and leaves ``size`` as it was.
        """
        position = pos = self.size
        since = self.bytes_since_last_index_entry
        interval = self.index_interval_bytes
        rbt = self.rolling_based_timestamp
        max_ts = self.max_timestamp
        off_max = self.offset_of_max_timestamp
        buffers: list = []
        add = buffers.append
        entries = []  # index entries: (last offset, position, max timestamp so far, its offset)
        for data, head, last, mts in run:
            if head is None:
                add(data)
            else:
                add(head)
                add(data[len(head):])
            if rbt is None:
                rbt = mts
            if mts > max_ts:
                max_ts, off_max = mts, last
            n = len(data)
            due, since = index_step(since, interval, n)
            if due:
                entries.append((last, pos, max_ts, off_max))
            pos += n
        fd = self.fileno
        if fd < 0:
            fd = self.fd
        _write_at(fd, buffers, position, pos - position)
        if entries:
            index_append, time_append = self.index.append, self.time_index.maybe_append
            for last, at, ts, om in entries:
                index_append(last, at)
                time_append(ts, om)
            self._update_indexes_full()
        self.rolling_based_timestamp = rbt
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = off_max
        self.bytes_since_last_index_entry = since
        self.next_offset = run[-1][2] + 1
        self.size = pos

    def should_roll(self, *, first_offset: int, incoming_bytes: int, incoming_max_timestamp: int,
                    last_offset: int, now_ms: int, segment_bytes: int, segment_ms: int) -> str | None:
        """Why the next append must go to a new segment (None = it fits here): :func:`roll_reason` of this segment."""
        return roll_reason(self.size, self.rolling_based_timestamp, self.created_ms, self.indexes_full,
                           self.base_offset, first_offset=first_offset, incoming_bytes=incoming_bytes,
                           incoming_max_timestamp=incoming_max_timestamp, last_offset=last_offset, now_ms=now_ms,
                           segment_bytes=segment_bytes, segment_ms=segment_ms)

    def on_become_inactive(self) -> None:
        """On roll: final time-index entry, trim both index files to their entries."""
        if self.max_timestamp >= 0:
            ti = self.time_index
            if not ti.timestamps or self.max_timestamp > ti.timestamps[-1]:
                ti.max_entries += 1  # Kafka skips the full check for this last entry
                ti.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        """fsync the log file and both indexes.

        Runs in the flusher thread without the log's writer lock, so the log's
        writers may roll, truncate or delete this segment meanwhile; a handle closed under us
        is skipped (what it held is deleted, or was made durable by whoever closed it).
        """
        f = self.file
        if f is not None:
            try:
                os.fsync(f.fileno())
            except ValueError:  # closed by another thread since we read self.file
                pass
        self.index.flush()
        self.time_index.flush()

    def truncate_to_position(self, position: int) -> int:
        """Cut the log file at ``position``; returns bytes removed. Caller fixes indexes/state."""
        removed = self.size - position
        if removed > 0:
            os.ftruncate(self.fd, position)
            self.size = position
        return max(0, removed)

    def truncate_to_offset(self, offset: int) -> int:
        """Remove every batch whose last offset >= ``offset``; returns bytes removed."""
        self.load_indexes()
        loc = self.find_batch(offset)
        if loc is None:
            return 0
        removed = self.truncate_to_position(loc[0])
        self.index.truncate_to_offset(offset)
        self.time_index.truncate_to_offset(offset)
        res = scan_file(self.fd, self.base_offset, verify=False, index_interval_bytes=self.index_interval_bytes)
        self._apply_scan(res)
        return removed

    # -- reading --------------------------------------------------------------
    def find_batch(self, offset: int, size: int | None = None) -> tuple[int, int, int, int, int] | None:
        """(position, base_offset, last_offset, entry_size, max_timestamp) of the first batch whose
        last offset is >= ``offset``, or None when there is none below ``size``."""
        self.load_indexes()
        size = self.size if size is None else size
        fd = self.fileno
        if fd < 0:
            fd = self.fd
        _o, pos = self.index.lookup(offset)
        while pos < size:
            h = read_header(fd, pos)
            if h is None:
                return None
            bo, entry, last, mts = h
            if last >= offset:
                return pos, bo, last, entry, mts
            pos += entry
        return None

    def slice_end(self, start: int, first_entry: int, max_bytes: int, size: int) -> int:
        """End of the last whole batch that ends at or before ``start + max_bytes`` (>= ``start``).

        ``size`` must be a batch boundary (the segment size a reader snapshotted, or
        the start of a batch): when everything up to it fits, it is the answer
        without reading a header.
        """
        if start + max_bytes >= size:
            return size if size > start else start
        limit = start + max_bytes
        if start + first_entry > limit:
            return start
        # Jump to the last indexed batch start <= limit (never before start), then walk headers.
        _o, pos = self.index.lookup_position(limit)
        pos = max(pos, start)
        fd = self.fd
        end = pos
        while pos < limit:
            h = read_header(fd, pos)
            if h is None or pos + h[1] > limit:
                break
            pos += h[1]
            end = pos
        return end

    def close(self) -> None:
        """Trim both indexes to their entries, then close every handle (even when trimming fails)."""
        try:
            self.index.trim()
            self.time_index.trim()
        finally:
            self.close_handles()

    def close_handles(self) -> None:
        self.index.close()
        self.time_index.close()
        if self.file is not None:
            self.fileno = -1
            self.file.close()
            self.file = None

    def rename_suffix(self, old: str, new: str) -> None:
        """Rename all four files from suffix ``old`` to ``new`` (e.g. "" -> ".deleted")."""
        txn_index = txn_index_path(self.log_path)
        for attr_path, setter in ((self.log_path, "log_path"),):
            target = Path(str(attr_path)[: len(str(attr_path)) - len(old)] + new) if old else Path(str(attr_path) + new)
            os.replace(attr_path, target)
            setattr(self, setter, target)
        for idx in (self.index, self.time_index):
            p = str(idx.path)
            target = Path(p[: len(p) - len(old)] + new) if old else Path(p + new)
            if idx.path.exists():
                os.replace(idx.path, target)
            idx.path = target
        if txn_index.exists():
            os.replace(txn_index, txn_index_path(self.log_path))

    def delete_files(self) -> None:
        self.close_handles()
        for p in (self.log_path, self.index.path, self.time_index.path, txn_index_path(self.log_path)):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"


def _write_rest(fd: int, buffers: list, position: int, written: int) -> None:
    """Write ``buffers`` back to back from ``position`` on, the first ``written`` bytes being there already.

    Handles short writes, and splits the rest into ``pwritev`` calls of at most
    ``_IOV_MAX`` buffers and about ``_MAX_WRITE`` bytes (a buffer larger than
    that goes alone).
    """
    i, n = 0, len(buffers)
    pos = position + written
    while i < n and written >= len(buffers[i]):
        written -= len(buffers[i])
        i += 1
    if written:
        buffers = buffers[:i] + [memoryview(buffers[i])[written:]] + buffers[i + 1:]
    while i < n:
        j, size = i, 0
        while j < n and j - i < _IOV_MAX and (j == i or size + len(buffers[j]) <= _MAX_WRITE):
            size += len(buffers[j])
            j += 1
        chunk = buffers[i:j]
        done = os.pwritev(fd, chunk, pos)
        if done <= 0:  # pragma: no cover - a regular file reports errors, not zero
            raise OSError(f"pwritev wrote {done} bytes")
        pos += done
        for b in chunk:
            if done < len(b):
                break
            done -= len(b)
            i += 1
        if done:
            buffers[i] = memoryview(buffers[i])[done:]


def _write_at(fd: int, buffers: list, position: int, total: int) -> None:
    """Write ``buffers`` (``total`` bytes) back to back at ``position``, all or nothing.

    One ``pwritev`` when they fit ``_IOV_MAX`` and ``_MAX_WRITE``, else
    :func:`_write_rest`. On ``OSError`` the file is cut back to ``position``
    (best effort: on a failing disk that may fail too, and recovery then finds
    whatever whole batches made it, written but never acknowledged), so bytes
    that were never published cannot come back after a restart.
    """
    try:
        if total <= _MAX_WRITE and len(buffers) <= _IOV_MAX:
            written = os.pwritev(fd, buffers, position)
            if written < total:
                _write_rest(fd, buffers, position, written)
        else:
            _write_rest(fd, buffers, position, 0)
    except OSError:
        try:
            os.ftruncate(fd, position)
        except OSError:
            pass
        raise
