"""Opening a partition directory: leftovers of interrupted work, then the check of its tail.

Called by :meth:`broker.log.log.Log.open` before the log is shared with anyone
(not thread-safe; nothing else may touch the directory meanwhile). In order:

1. :func:`remove_stray_files`: ``*.deleted``, ``*.cleaned`` and ``*.tmp`` files go
   (segments already dropped, an unfinished cleaner output, an unfinished
   checkpoint or index rewrite). A ``<base>.log.swap`` means a compaction swap was
   cut short after its crash-safe point: it replaces every segment whose base
   offset lies in ``[base, its next offset)``, and its ``.swap`` files lose their
   suffix (with their indexes). Any other ``.swap`` file, and an index without a
   ``.log``, is removed.
2. :func:`recover_segments`: every ``<base>.log`` is opened; from the segment
   holding the recovery point on (none after a clean shutdown) each batch is
   verified (sizes, CRC-32C, offsets increasing across segments) and both indexes
   are rebuilt. The first invalid byte and everything after it is cut, later
   segments included, and each cut is reported (:class:`~broker.log.info.RecoveryCut`).
"""

from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path
from typing import Callable

from broker.log.config import LogConfig
from broker.log.info import LogRecoveryReport, RecoveryCut
from broker.log.scan import scan_file
from broker.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from broker.log.txn_index import TXN_INDEX_SUFFIX


def remove_stray_files(dir: Path) -> None:
    """Step 1 of the module docstring."""
    for name in os.listdir(dir):
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
            (dir / name).unlink(missing_ok=True)
    for name in sorted(os.listdir(dir)):
        if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            _finish_swap(dir, int(name[:20]))
    for name in os.listdir(dir):
        if name.endswith(SWAP_SUFFIX):
            (dir / name).unlink(missing_ok=True)
        elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and name[:20].isdigit():
            if not (dir / (name[:20] + LOG_SUFFIX)).exists():
                (dir / name).unlink(missing_ok=True)


def _finish_swap(dir: Path, base: int) -> None:
    """The swap segment at ``base`` replaces every segment it covers (a compaction cut short)."""
    fd = os.open(dir / f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}", os.O_RDONLY)
    try:
        res = scan_file(fd, base, verify=False)
    finally:
        os.close(fd)
    end = res.next_offset if res.next_offset is not None else base
    for other in os.listdir(dir):
        if other.endswith(LOG_SUFFIX) and other[:20].isdigit():
            covered = int(other[:20])
            if base <= covered < end or covered == base:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    (dir / f"{covered:020d}{suffix}").unlink(missing_ok=True)
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        src = dir / f"{base:020d}{suffix}{SWAP_SUFFIX}"
        if src.exists():
            os.replace(src, dir / f"{base:020d}{suffix}")


def recover_segments(dir: Path, config: LogConfig, recovery_point: int, clean: bool,
                     new_segment: Callable[[], LogSegment]) -> tuple[list[LogSegment], LogRecoveryReport]:
    """Step 2 of the module docstring: the log's segments, oldest first, and what was checked and cut.

    ``new_segment()`` makes the first segment of an empty directory. The last
    segment returned is open for appends.
    """
    c = config
    bases = sorted(int(n[:20]) for n in os.listdir(dir)
                   if n.endswith(LOG_SUFFIX) and len(n) == 24 and n[:20].isdigit())
    report = LogRecoveryReport(dir=str(dir), recovery_point=recovery_point)
    segments = [LogSegment.open_existing(dir, b, index_interval_bytes=c.index_interval_bytes,
                                         max_index_bytes=c.segment_index_bytes) for b in bases]
    if not segments:
        return [new_segment()], report
    start = max(0, bisect_right(bases, recovery_point) - 1)
    if clean:
        start = len(segments)
    expected = None
    for i in range(start, len(segments)):
        seg = segments[i]
        report.segments_checked.append(seg.log_path.name)
        res = seg.recover(expected_offset=expected)
        report.bytes_checked += res.valid_bytes
        report.indexes_rebuilt.append(seg.log_path.name)
        if res.cut_reason is not None:
            removed = seg.truncate_to_position(res.valid_bytes)
            report.cuts.append(RecoveryCut(seg.log_path.name, res.valid_bytes, removed, res.cut_reason))
            for later in segments[i + 1:]:
                report.cuts.append(RecoveryCut(later.log_path.name, 0, later.size,
                                               "segment after the first corruption"))
                later.delete_files()
            del segments[i + 1:]
            break
        if res.batches:
            expected = res.next_offset
    # drop empty non-active segments left at the tail by a cut (keep the first)
    while len(segments) > 1 and segments[-1].size == 0 and segments[-2].size > 0 and \
            segments[-1].base_offset < (segments[-2].next_offset or 0):
        segments.pop().delete_files()
    last = segments[-1]
    if clean or start >= len(segments):
        last.load_tail()
    last.open_indexes_for_append()
    return segments, report
