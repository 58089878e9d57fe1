"""Sparse offset and time indexes of one segment, in Apache Kafka's byte layout.

``.index`` (offset index), 8 bytes per entry, big-endian::

    relative_offset int32   offset - segment base offset (of the LAST record of an indexed append)
    position        int32   byte position in the .log of the batch that starts that append

``.timeindex`` (time index), 12 bytes per entry, big-endian::

    timestamp       int64   largest timestamp seen so far in the segment
    relative_offset int32   offset of the record with that timestamp - base offset

Invariants: in both files entries are strictly increasing (offset index: in
relative offset and position; time index: in timestamp, relative offset never
decreasing). While a segment is active its index files are preallocated to
``segment.index.bytes`` (zero filled past the entries, as Kafka does) and are
trimmed to exactly their entries when the segment is rolled or closed.

Indexes are derived data: they carry no checksum. :meth:`load` returns False
when a file is missing, misaligned or violates the invariants, and the caller
rebuilds it from the log. Entries are kept in memory in two ``array`` columns
so that lookups are a C-level ``bisect``; the file is written with ``pwrite``.

Not thread-safe for writers; the owning :class:`~broker.log.segment.LogSegment`
serialises appends. Lookups may run concurrently with an append (arrays only
grow at the end and the count is read once). New entries reach the file on
``sync`` (called by flush, trim and close): an index is derived data, and a
crash loses only entries of segments that recovery rebuilds anyway.
"""

from __future__ import annotations

import errno
import os
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

_BIG_ENDIAN_HOST = sys.byteorder == "big"


def _to_big_endian(columns: list[array], width: int) -> bytes:
    """Encode ``len(columns[0])`` entries whose fields are the host-order arrays ``columns``.

    Each column is byte-swapped to big-endian in one C call and its bytes are
    spread into the entries with strided slice assignments (one per byte of the
    field), so the cost is a few C loops rather than a ``struct.pack`` per entry.
    """
    n = len(columns[0])
    out = bytearray(width * n)
    at = 0
    for col in columns:
        col = array(col.typecode, col)
        if not _BIG_ENDIAN_HOST:
            col.byteswap()
        raw, w = col.tobytes(), col.itemsize
        for k in range(w):
            out[at + k :: width] = raw[k::w]
        at += w
    return bytes(out)


def _from_big_endian(raw: bytes, typecodes: str) -> list[array]:
    """The inverse of :func:`_to_big_endian`: split big-endian entries into host-order arrays."""
    cols = [array(t) for t in typecodes]
    width = sum(c.itemsize for c in cols)
    n = len(raw) // width
    at = 0
    for col in cols:
        w = col.itemsize
        field_bytes = bytearray(w * n)
        for k in range(w):
            field_bytes[k::w] = raw[at + k :: width]
        col.frombytes(field_bytes)
        if not _BIG_ENDIAN_HOST:
            col.byteswap()
        at += w
    return cols


def _time_columns(raw: bytes) -> tuple[array, array]:
    """Split big-endian (int64, int32) entries into two host-order arrays."""
    ts, rel = _from_big_endian(raw, "qi")
    return ts, rel


class _Index:
    entry_size = 0
    kind = ""

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self._fd: int | None = None
        self._persisted = 0  # entries already written to the file; the rest are written by sync()

    # -- file handling ----------------------------------------------------
    def open_for_append(self, preallocate_bytes: int) -> None:
        """Open the file for writing and preallocate it (zero filled) as Kafka does."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        want = max(self.entries * self.entry_size, (preallocate_bytes // self.entry_size) * self.entry_size)
        if os.fstat(self._fd).st_size != want:
            os.ftruncate(self._fd, want)

    def sync(self) -> None:
        """Write entries appended since the last sync (one ``pwrite``); no fsync."""
        n = self.entries
        if n > self._persisted:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(self._fd, self._encode(self._persisted, n), self._persisted * self.entry_size)
            self._persisted = n

    def trim(self) -> None:
        """Cut the file to exactly its entries (on roll and close)."""
        self.sync()
        size = self.entries * self.entry_size
        if self._fd is not None:
            os.ftruncate(self._fd, size)
        elif self.path.exists() and self.path.stat().st_size != size:
            os.truncate(self.path, size)

    def flush(self) -> None:
        self.sync()
        fd = self._fd
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as exc:  # closed by the writer's thread (roll, close) since we read it
                if exc.errno != errno.EBADF:
                    raise

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, path: Path) -> None:
        os.replace(self.path, path) if self.path.exists() else None
        self.path = Path(path)

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def write_all(self) -> None:
        """Rewrite the whole file from memory (after a rebuild); on ``OSError`` the old file stays.

        Then nothing counts as persisted, so a later :meth:`sync` writes every
        entry again (and :meth:`trim` cuts whatever stale tail the file has).
        """
        data = self.to_bytes()
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except OSError:
            self._persisted = 0
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._persisted = self.entries
        if self._fd is not None:
            os.close(self._fd)
            self._fd = os.open(self.path, os.O_RDWR, 0o644)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        return self._encode(0, self.entries)


class OffsetIndex(_Index):
    """Relative offset -> position, sparse (see the module docstring)."""

    entry_size = 8
    kind = "offset"

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.relative_offsets = array("i")
        self.positions = array("i")

    @property
    def entries(self) -> int:
        return len(self.relative_offsets)

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) when it is missing or fails the sanity checks."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % 8:
            return False
        both = array("i", raw)
        if not _BIG_ENDIAN_HOST:
            both.byteswap()
        rel, pos = both[0::2], both[1::2]
        # A preallocated file that was never trimmed ends in zero entries; drop them.
        n = len(rel)
        while n > 1 and rel[n - 1] == 0 and pos[n - 1] == 0:
            n -= 1
        del rel[n:], pos[n:]
        if n == 1 and rel[0] == 0 and pos[0] == 0 and log_size == 0:
            del rel[:], pos[:]  # an empty segment's preallocated index: no entry at all
            n = 0
        ok = all(0 <= p < max(log_size, 1) for p in (pos[0], pos[-1])) if n else True
        if ok and n > 1:
            ok = all(a < b for a, b in zip(rel, rel[1:])) and all(a < b for a, b in zip(pos, pos[1:]))
        if ok and n and rel[0] < 0:
            ok = False
        if not ok:
            del rel[:], pos[:]
            return False
        self.relative_offsets, self.positions = rel, pos
        self._persisted = len(rel)
        return True

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ignored unless it increases the last offset (and the index has room)."""
        rel = offset - self.base_offset
        offsets = self.relative_offsets
        if offsets and rel <= offsets[-1]:
            return
        if len(offsets) >= self.max_entries:  # is_full, without two property calls
            return
        offsets.append(rel)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``offset``: (absolute offset, position); (base, 0) if none."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[i], self.positions[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The entry with the largest position <= ``position``: (absolute offset, position)."""
        i = bisect_right(self.positions, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[i], self.positions[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset``."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset - 1)
        del self.relative_offsets[i:], self.positions[i:]
        self._persisted = min(self._persisted, self.entries)
        self._truncate_file()

    def reset(self) -> None:
        del self.relative_offsets[:], self.positions[:]
        self._persisted = 0
        self._truncate_file()

    def _truncate_file(self) -> None:
        if self._fd is not None:
            # keep preallocation, but zero the dropped tail so a crash cannot resurrect it
            size = os.fstat(self._fd).st_size
            os.ftruncate(self._fd, self.entries * 8)
            os.ftruncate(self._fd, size)
        elif self.path.exists():
            os.truncate(self.path, self.entries * 8)

    def _encode(self, start: int, end: int) -> bytes:
        return _to_big_endian([self.relative_offsets[start:end], self.positions[start:end]], 8)


class TimeIndex(_Index):
    """Timestamp -> relative offset, sparse, increasing timestamps only."""

    entry_size = 12
    kind = "time"

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    @property
    def entries(self) -> int:
        return len(self.timestamps)

    def load(self, max_relative_offset: int) -> bool:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % 12:
            return False
        ts, rel = _time_columns(raw)
        n = len(ts)
        while n > 0 and ts[n - 1] == 0 and rel[n - 1] == 0:
            n -= 1
        del ts[n:], rel[n:]
        ok = True
        if n:
            ok = 0 <= rel[0] and rel[-1] <= max_relative_offset
        if ok and n > 1:
            ok = all(a < b for a, b in zip(ts, ts[1:])) and all(a <= b for a, b in zip(rel, rel[1:]))
        if not ok:
            del ts[:], rel[:]
            return False
        self.timestamps, self.relative_offsets = ts, rel
        self._persisted = len(ts)
        return True

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        timestamps = self.timestamps
        if timestamps and timestamp <= timestamps[-1]:
            return
        if len(timestamps) >= self.max_entries or timestamp < 0:  # is_full, inlined
            return
        rel = offset - self.base_offset
        offsets = self.relative_offsets
        if offsets and rel < offsets[-1]:
            return
        timestamps.append(timestamp)
        offsets.append(rel)

    def lookup(self, timestamp: int) -> int:
        """An offset from which a scan finds the first record with timestamp >= ``timestamp``.

        That is the offset of the last entry whose timestamp is < ``timestamp``
        (its record is before the target), or the base offset when there is none.
        """
        i = bisect_right(self.timestamps, timestamp - 1) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self.relative_offsets[i]

    def truncate_to_offset(self, offset: int) -> None:
        rel = offset - self.base_offset
        n = len(self.relative_offsets)
        while n and self.relative_offsets[n - 1] >= rel:
            n -= 1
        del self.timestamps[n:], self.relative_offsets[n:]
        self._persisted = min(self._persisted, n)
        if self._fd is not None:
            size = os.fstat(self._fd).st_size
            os.ftruncate(self._fd, n * 12)
            os.ftruncate(self._fd, size)
        elif self.path.exists():
            os.truncate(self.path, n * 12)

    def reset(self) -> None:
        self.truncate_to_offset(self.base_offset)

    def _encode(self, start: int, end: int) -> bytes:
        return _to_big_endian([self.timestamps[start:end], self.relative_offsets[start:end]], 12)
