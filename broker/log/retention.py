"""Which segments retention deletes: Kafka's rules, oldest first, never the active segment.

1. segments that lie wholly below the log start offset (DeleteRecords moved it);
2. with ``cleanup.policy`` including ``delete`` and ``retention.ms`` >= 0: the
   oldest segments whose largest record timestamp (the file's mtime when it has
   none) is more than ``retention.ms`` before now, up to the first young one;
3. with ``delete`` and ``retention.bytes`` >= 0: then the oldest segments for as
   long as the log, without them, still holds at least ``retention.bytes``.

Rules 2 and 3 take only segments wholly below the high watermark, so nothing a
consumer has not been allowed to read yet is removed. The result is always a
prefix of the segments given. Pure policy over a snapshot: it deletes nothing
and takes no lock (it may load a segment's indexes, which is safe for readers).
"""

from __future__ import annotations

import os
from typing import Sequence

from broker.log.config import LogConfig
from broker.log.segment import LogSegment


def segments_to_delete(segs: Sequence[LogSegment], log_start_offset: int, high_watermark: int,
                       cfg: LogConfig, now_ms: int) -> list[LogSegment]:
    """The segments of ``segs`` (oldest first, the last one active) that retention removes now."""
    candidates = segs[:-1]

    def next_base(i: int) -> int:
        return segs[i + 1].base_offset

    i = 0
    while i < len(candidates) and next_base(i) <= log_start_offset:
        i += 1
    if cfg.delete:
        if cfg.retention_ms >= 0:
            j = i
            while j < len(candidates) and next_base(j) <= high_watermark:
                seg = candidates[j]
                seg.load_indexes()
                ts = seg.max_timestamp if seg.max_timestamp >= 0 else int(os.stat(seg.log_path).st_mtime * 1000)
                if now_ms - ts <= cfg.retention_ms:
                    break
                j += 1
            i = max(i, j)
        if cfg.retention_bytes >= 0:
            excess = sum(s.size for s in segs[i:]) - cfg.retention_bytes
            j = i
            while j < len(candidates) and next_base(j) <= high_watermark and excess - candidates[j].size >= 0:
                excess -= candidates[j].size
                j += 1
            i = j
    return list(candidates[:i])
