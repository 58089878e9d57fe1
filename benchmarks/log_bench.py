"""Log benchmark: append vs raw write, recovery vs raw CRC-32C, read lookup vs segment count.

Run: ``python -m benchmarks.log_bench [--short] [--reps N]``. Everything runs in
a temporary directory on the same disk; nothing is fsynced (both sides of each
comparison measure the page cache path). Prints one table.

- append (LogAppender): the broker's append path, whose figure the 80% target
  is about. Each batch is its own ``bytearray`` (as the server hands them
  over); ``LogAppender.submit`` checks each CRC-32C on this thread, and the
  appender's writer thread places the batches and writes each group of
  consecutive batches with one ``pwritev``. Raw: ``os.write`` of exactly the
  same buffers, one call per batch, to a new file.
- append (Log.append): one batch per call and one write per batch, the path
  the coordinator and the offline tools use, against ``os.write`` of the same
  bytes. Two input kinds: a writable buffer (``bytearray``, patched in place)
  and read-only ``bytes`` (the log must not modify it, so it writes a patched
  copy of the 16-byte head). No target: CRC-32C and Python's per-call work
  cost about 40% of a 16 KiB write here.
- recovery: ``Log.open`` with recovery point 0 (every batch CRC-checked, both
  indexes rebuilt) against one CRC-32C pass over the same bytes, memory-mapped.
- read() lookup: ``Log.read(offset, 1 MiB)`` at random offsets. "steady" is with
  every segment touched before (indexes loaded, file open: the cost of a read
  by itself); "first touch" is the first read in each segment, which also opens
  the segment file and loads its indexes (once per segment per process).

Each figure is the median of ``--reps`` repetitions; within a repetition the raw
measurement and the log measurement run back to back, so a noisy machine hits
both sides of a ratio alike.
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import crc32c

from broker.log import Log, LogAppender, LogConfig
from broker.records.batch import BatchBuilder

MiB = 1 << 20


def batch_of(size: int) -> bytearray:
    """One uncompressed v2 batch of about ``size`` bytes (records of 1 KiB)."""
    b = BatchBuilder()
    n = max(1, size // 1040)
    value = os.urandom(1000)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"key-%d" % i, value)
    return bytearray(b.build())


def _raw_write(root: Path, buffers: list) -> float:
    """Seconds to ``os.write`` each buffer, one call each, to a new file (removed after)."""
    raw_path = root / "raw.bin"
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    write = os.write
    t0 = time.perf_counter()
    for buf in buffers:
        write(fd, buf)
    raw = time.perf_counter() - t0
    os.close(fd)
    raw_path.unlink()
    return raw


def bench_append(root: Path, batch_size: int, total: int, *, read_only: bool = False) -> tuple[float, float]:
    """(raw MiB/s, log MiB/s) for ``Log.append`` of ``total`` bytes, one batch (and one write) per call."""
    batch = batch_of(batch_size)
    data = bytes(batch) if read_only else batch
    n = max(1, total // len(batch))
    raw = _raw_write(root, [data] * n)
    log = Log.open(root / f"append{batch_size}-0", LogConfig())
    append = log.append
    t0 = time.perf_counter()
    for _ in range(n):
        append(data)
    dt = time.perf_counter() - t0
    log.delete()
    nbytes = n * len(batch)
    return nbytes / raw / MiB, nbytes / dt / MiB


def bench_appender(root: Path, batch_size: int, total: int) -> tuple[float, float]:
    """(raw MiB/s, log MiB/s) for ``total`` bytes through a ``LogAppender``, as the broker appends.

    Each batch is its own buffer (the server hands the log one per request,
    and queued buffers are patched in place, so they cannot be shared). The
    raw side writes exactly those buffers, one ``os.write`` each. The log side
    is the broker's path: ``submit`` on this thread (which checks each CRC),
    group writes on the appender's thread, timed until the last result is in.
    """
    template = batch_of(batch_size)
    n = max(1, total // len(template))
    buffers = [bytearray(template) for _ in range(n)]
    raw = _raw_write(root, buffers)
    log = Log.open(root / f"appender{batch_size}-0", LogConfig())
    appender = LogAppender("bench")
    left = [n]
    finished = threading.Event()
    failures = []

    def done(result) -> None:
        if isinstance(result, BaseException):
            failures.append(result)
        left[0] -= 1
        if not left[0]:
            finished.set()

    submit = appender.submit
    t0 = time.perf_counter()
    for buf in buffers:
        submit(log, buf, 0, done)
    finished.wait()
    dt = time.perf_counter() - t0
    appender.close()
    assert not failures and log.log_end_offset == n * template_records(template), failures[:1]
    log.delete()
    nbytes = n * len(template)
    return nbytes / raw / MiB, nbytes / dt / MiB


def template_records(batch: bytearray) -> int:
    """The records count of a v2 batch (its last header field)."""
    return int.from_bytes(batch[57:61], "big")


def bench_recovery(root: Path, batch_size: int, total: int) -> tuple[float, float]:
    """(raw CRC-32C MiB/s, Log.open recovery MiB/s) over a partition of ``total`` bytes."""
    path = root / f"recover{batch_size}-0"
    log = Log.open(path, LogConfig())
    batch = batch_of(batch_size)
    for _ in range(max(1, total // len(batch))):
        log.append(batch)
    log.close()
    nbytes = sum(p.stat().st_size for p in path.glob("*.log"))
    t0 = time.perf_counter()
    for p in sorted(path.glob("*.log")):
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
                crc32c.crc32c(mm)
    raw = time.perf_counter() - t0
    t0 = time.perf_counter()
    log = Log.open(path, LogConfig(), recovery_point=0)
    dt = time.perf_counter() - t0
    assert not log.recovery_report.truncated
    log.delete()
    return nbytes / raw / MiB, nbytes / dt / MiB


def bench_lookup(root: Path, segments: int, lookups: int = 2000) -> tuple[float, float]:
    """(steady-state us per read, first-touch us per read) over a log of ``segments`` segments."""
    path = root / f"lookup{segments}-0"
    batch = batch_of(16 * 1024)
    cfg = LogConfig(segment_bytes=len(batch) * 4, segment_index_bytes=4096, index_interval_bytes=4096)
    log = Log.open(path, cfg)
    per_segment_batches = 4
    for _ in range(segments * per_segment_batches):
        log.append(batch)
    assert len(log.segments) >= segments
    log.close()
    log = Log.open(path, cfg, had_clean_shutdown=True)  # a reopened log: inactive segments not yet loaded
    rnd = random.Random(1)
    # one target in each of up to `lookups` distinct segments: the first read there loads the segment
    segs = log.segments[:-1]
    picked = rnd.sample(segs, min(lookups, len(segs)))
    first_targets = [s.base_offset + rnd.randrange(4) for s in picked]
    t0 = time.perf_counter()
    for t in first_targets:
        log.read(t, MiB)
    first = (time.perf_counter() - t0) / len(first_targets) * 1e6
    targets = [rnd.randrange(log.log_end_offset) for _ in range(lookups)]
    for t in targets:
        log.read(t, MiB)  # warm: every segment read below has been loaded
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        for t in targets:
            log.read(t, MiB)
        runs.append((time.perf_counter() - t0) / lookups * 1e6)
    log.delete()
    return statistics.median(runs), first


def _median_pair(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="less data: 64 MiB instead of 1 GiB for recovery, "
                    "2,000 segments instead of 10,000 for the lookup")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per figure; the median is shown (default 3)")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary dir)")
    args = ap.parse_args(argv)
    append_total = 128 * MiB if args.short else 512 * MiB
    recovery_total = 64 * MiB if args.short else 1024 * MiB
    reps = max(1, args.reps)
    root = Path(tempfile.mkdtemp(prefix="log-bench-", dir=args.dir))
    rows = []
    try:
        for size in (16 * 1024, MiB):
            raw, ours = _median_pair([bench_appender(root, size, append_total) for _ in range(reps)])
            rows.append((f"append {size // 1024} KiB batches (LogAppender)", raw, ours, "MiB/s", 80))
            for read_only in (False, True):
                raw, ours = _median_pair([bench_append(root, size, append_total, read_only=read_only)
                                          for _ in range(reps)])
                kind = "bytes" if read_only else "bytearray"
                rows.append((f"append {size // 1024} KiB batches (Log.append, {kind})", raw, ours, "MiB/s", None))
        for size in (16 * 1024, MiB):
            raw, ours = _median_pair([bench_recovery(root, size, recovery_total) for _ in range(reps)])
            rows.append((f"recovery {recovery_total // MiB} MiB, {size // 1024} KiB batches", raw, ours,
                         "MiB/s", 50))
        lookups = {n: _median_pair([bench_lookup(root, n) for _ in range(reps)])
                   for n in (10, 2_000 if args.short else 10_000)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'benchmark':48} {'raw':>10} {'log':>10} {'unit':>6} {'log/raw':>8} {'target':>7}")
    for name, raw, ours, unit, target in rows:
        goal = f"{target:>6}%" if target is not None else f"{'-':>7}"
        print(f"{name:48} {raw:10.0f} {ours:10.0f} {unit:>6} {ours / raw:8.0%} {goal}")
    for n, (steady, first) in lookups.items():
        print(f"{'read() lookup, ' + str(n) + ' segments, steady':48} {'':>10} {steady:10.1f} {'us':>6}")
        print(f"{'read() lookup, ' + str(n) + ' segments, first touch':48} {'':>10} {first:10.1f} {'us':>6}")
    print(f"(median of {reps} repetitions)")


if __name__ == "__main__":
    main()
