"""Small result values the log hands to its callers (no protocol types here)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import BinaryIO, NamedTuple


class AppendInfo(NamedTuple):
    """What ``Log.append`` wrote. ``log_append_time`` is -1 for CreateTime topics.

    A named tuple rather than a frozen dataclass: it is built once per append on
    the produce hot path, and a frozen dataclass costs about 1.2 us to build
    (one ``object.__setattr__`` per field) against about 0.15 us for
    ``tuple.__new__(AppendInfo, fields)``. Still immutable and compared by value.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    num_batches: int
    num_records: int
    valid_bytes: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """A byte range of one segment file: whole batches, ready for ``os.sendfile``.

    ``file`` stays open while the slice is in use even if the segment is
    deleted meanwhile (deleted segments are closed only after
    ``file.delete.delay.ms``). ``first_offset`` is the base offset of the first
    batch (may be below the requested offset), -1 when ``length`` is 0.
    """

    file: BinaryIO
    position: int
    length: int
    first_offset: int
    segment_base_offset: int

    def read_bytes(self) -> bytes:
        """The slice's bytes (``pread``): for tests, tools and down-conversion."""
        if self.length == 0:
            return b""
        return os.pread(self.file.fileno(), self.length, self.position)


@dataclass(frozen=True, slots=True)
class RecoveryCut:
    """One thing recovery removed: bytes cut from a segment, or a whole later segment."""

    segment: str  # file name, e.g. 00000000000000000042.log
    position: int
    bytes_removed: int
    reason: str


@dataclass(slots=True)
class LogRecoveryReport:
    """What ``Log.open`` found and cut while recovering from the recovery point."""

    dir: str
    recovery_point: int
    segments_checked: list[str] = field(default_factory=list)
    cuts: list[RecoveryCut] = field(default_factory=list)
    indexes_rebuilt: list[str] = field(default_factory=list)
    log_end_offset: int = 0
    bytes_checked: int = 0

    @property
    def truncated(self) -> bool:
        return bool(self.cuts)

    @property
    def bytes_removed(self) -> int:
        return sum(c.bytes_removed for c in self.cuts)

    def summary(self) -> str:
        if not self.cuts:
            return f"{self.dir}: {len(self.segments_checked)} segment(s) clean, log end offset {self.log_end_offset}"
        parts = [f"{c.bytes_removed} bytes of {c.segment} at position {c.position} ({c.reason})" for c in self.cuts]
        return f"{self.dir}: cut " + "; ".join(parts) + f"; log end offset {self.log_end_offset}"


@dataclass(slots=True)
class LogDirStartup:
    """What loading one log dir found: how it was shut down, what recovery checked and cut."""

    dir: str
    clean_shutdown: bool
    logs: int = 0
    logs_recovered: int = 0  # logs whose segments were verified from their recovery point
    bytes_checked: int = 0
    cuts: list[tuple[str, RecoveryCut]] = field(default_factory=list)  # (partition dir name, cut)

    def describe(self) -> str:
        if self.clean_shutdown:
            before = "clean shutdown before"
        elif self.logs:
            before = "unclean shutdown before"
        else:
            before = "no clean-shutdown marker"
        text = (f"{self.dir}: {before}, {self.logs} log(s) loaded, {self.logs_recovered} recovered, "
                f"{self.bytes_checked:,} bytes checked, ")
        if not self.cuts:
            return text + "nothing cut"
        shown = [f"{c.bytes_removed:,} bytes of {name}/{c.segment} at position {c.position} ({c.reason})"
                 for name, c in self.cuts[:3]]
        more = f" and {len(self.cuts) - 3} more cut(s)" if len(self.cuts) > 3 else ""
        cut = sum(c.bytes_removed for _name, c in self.cuts)
        return text + f"cut {cut:,} bytes: " + ", ".join(shown) + more


@dataclass(slots=True)
class LogStartupReport:
    """What ``LogManager.startup`` did, per log dir; :meth:`summary` is the broker's start-up line."""

    dirs: list[LogDirStartup] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        logs = sum(d.logs for d in self.dirs)
        return f"loaded {logs} log(s) in {self.seconds:.3f} s: " + "; ".join(d.describe() for d in self.dirs)
