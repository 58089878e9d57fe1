"""Log benchmark: append vs raw write, recovery vs raw CRC-32C, read lookup vs segment count.

Run: ``python -m benchmarks.log_bench [--short]``. Everything runs in a temporary
directory on the same disk; nothing is fsynced (both sides of each comparison
measure the page cache path). Prints one table.
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import crc32c

from broker.log import Log, LogConfig
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


def bench_append(root: Path, batch_size: int, total: int) -> tuple[float, float]:
    batch = batch_of(batch_size)
    n = max(1, total // len(batch))
    raw_path = root / "raw.bin"
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(n):
        os.write(fd, batch)
    raw = time.perf_counter() - t0
    os.close(fd)
    raw_path.unlink()
    log = Log.open(root / f"append{batch_size}-0", LogConfig())
    t0 = time.perf_counter()
    for _ in range(n):
        log.append(batch)
    dt = time.perf_counter() - t0
    log.delete()
    nbytes = n * len(batch)
    return nbytes / raw / MiB, nbytes / dt / MiB


def bench_recovery(root: Path, batch_size: int, total: int) -> tuple[float, float]:
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


def bench_lookup(root: Path, segments: int, lookups: int = 2000) -> float:
    path = root / f"lookup{segments}-0"
    batch = batch_of(16 * 1024)
    cfg = LogConfig(segment_bytes=len(batch) * 4, segment_index_bytes=4096, index_interval_bytes=4096)
    log = Log.open(path, cfg)
    per_segment_batches = 4
    for _ in range(segments * per_segment_batches):
        log.append(batch)
    assert len(log.segments) >= segments
    rnd = random.Random(1)
    targets = [rnd.randrange(log.log_end_offset) for _ in range(lookups)]
    for t in targets[:100]:
        log.read(t, MiB)  # warm (lazy index loads)
    t0 = time.perf_counter()
    for t in targets:
        log.read(t, MiB)
    dt = time.perf_counter() - t0
    log.delete()
    return dt / lookups * 1e6


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="64 MiB instead of 1 GiB for recovery, less data")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary dir)")
    args = ap.parse_args(argv)
    append_total = 128 * MiB if args.short else 512 * MiB
    recovery_total = 64 * MiB if args.short else 1024 * MiB
    root = Path(tempfile.mkdtemp(prefix="log-bench-", dir=args.dir))
    rows = []
    try:
        for size in (16 * 1024, MiB):
            raw, ours = bench_append(root, size, append_total)
            rows.append((f"append {size // 1024} KiB batches", raw, ours, "MiB/s", 80))
        for size in (16 * 1024, MiB):
            raw, ours = bench_recovery(root, size, recovery_total)
            rows.append((f"recovery {recovery_total // MiB} MiB, {size // 1024} KiB batches", raw, ours,
                         "MiB/s", 50))
        lookups = {n: bench_lookup(root, n) for n in (10, 10_000)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'benchmark':44} {'raw':>10} {'log':>10} {'unit':>6} {'log/raw':>8} {'target':>7}")
    for name, raw, ours, unit, target in rows:
        print(f"{name:44} {raw:10.0f} {ours:10.0f} {unit:>6} {ours / raw:8.0%} {target:>6}%")
    for n, us in lookups.items():
        print(f"{'read() lookup, ' + str(n) + ' segments':44} {'':>10} {us:10.1f} {'us':>6}")


if __name__ == "__main__":
    main()
