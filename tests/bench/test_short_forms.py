"""Every benchmark module runs to its report in short form.

The benchmarks measure the performance targets (``benchmarks/README.md``);
a benchmark that no longer runs measures nothing, and nobody would notice
until the next time somebody runs it for figures. Each test here runs one
module as ``python -m benchmarks.NAME --short`` in a process of its own, as
``./dev bench`` does, with its real brokers, ZooKeeper, Spark and tansu,
and checks that it completed: exit status 0, the summary lines of its report
with a figure in each, and, where the module writes JSON, no failed sample
and no figure that is not a finite number.

No time or rate is asserted: the figures depend on the machine and on
whatever else runs on it (the README's Performance section says how they
are compared: ratios measured in one run). On a timeout the module gets
SIGINT, so that it stops what it started, and a minute later its whole
process group (started here, in a session of its own) gets SIGKILL.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._procs import TANSU_BINARY

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 900  # each short form takes 5-90 s on an idle 2-core machine

NUM = r"[\d,]+(?:\.\d+)?"

# module -> (extra arguments, how JSON is written: "file", "stdout" or None, report lines that must appear)
MODULES: dict[str, tuple[list[str], str | None, list[str]]] = {
    "log_bench": (["--reps", "1"], None, [  # 3 reps of its segment lookup take minutes
        rf"append 16 KiB batches \(LogAppender\)\s+{NUM}\s+{NUM}\s+MiB/s",
        rf"recovery 64 MiB, 1024 KiB batches\s+{NUM}\s+{NUM}\s+MiB/s",
        rf"read\(\) lookup, 2000 segments, first touch\s+{NUM}\s+us",
    ]),
    "client_bench": (["--json"], "stdout", []),
    "group_bench": ([], "file", [
        rf"\| Metadata round trips/s \| {NUM} \|",
        rf"\| 10-member group formed \(s\) \| {NUM} \|",
        rf"\| rebalance after one member leaves, 10 -> 9 \(s\) \| {NUM} \|",
        rf"\| 10-member group formed, consumer protocol, KIP-848 \(s\) \| {NUM} \| {NUM}x eager \|",
        rf"\| rebalance after one member leaves, consumer protocol, KIP-848 \(s\) \| {NUM} \| {NUM}x eager \|",
    ]),
    "broker_bench": ([], "file", [
        r"^Targets \(ours / tansu\):$",
        rf"^- p99 latency at 1k/s <= 1\.0x: (met|NOT met) \(worst {NUM}x",
        rf"^- 1 KB produce >= 1\.0x: (met|NOT met) \(worst {NUM}x",
    ]),
    "mirror_bench": ([], "file", [
        rf"^median: mirror {NUM} records/s, baseline {NUM} records/s",
        rf"mirror\s+at \d+/s: p50 {NUM} ms\s+p99 {NUM} ms",
    ]),
    "pipeline_bench": ([], "file", [
        rf"^read: spark local\[2\] {NUM} records/s, our client alone {NUM} records/s",
        rf"^load to Parquet: loader {NUM} records/s end to end",
    ]),
    "idempotence_bench": ([], None, [
        rf"^ours: plain {NUM} records/s, idempotent {NUM} records/s",
        rf"^tansu: plain {NUM} records/s, idempotent {NUM} records/s",
        rf"read_uncommitted {NUM} records/s, read_committed {NUM} records/s",
    ]),
    "cluster_bench": ([], "file", [
        rf"^median: cluster acks=all RF 3 {NUM} records/s, single acks=1 {NUM} records/s",
        rf"^median p99: cluster {NUM} ms, single {NUM} ms",
        rf"^failover: median {NUM} s, max {NUM} s",
    ]),
    "shutdown_bench": ([], "file", [
        rf"^median: controlled exit {NUM} s, longest leaderless {NUM} s; baseline exit {NUM} s",
    ]),
    "reassign_bench": ([], "file", [
        rf"^raw produce, RF 3 acks=all: {NUM} MB/s",
        rf"^move \[1,2,3\] -> \[2,3,4\], no throttle: {NUM} MB in {NUM} s",
        rf"^move \[2,3,4\] -> \[1,2,3\], throttle {NUM} MB/s: {NUM} MB in {NUM} s",
    ]),
    "tls_bench": ([], "file", [
        rf"^\| plaintext \| {NUM} \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^\| tls \| {NUM} \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^TLS / PLAINTEXT: produce {NUM}x, consume {NUM}x, broker CPU per GB {NUM}x",
    ]),
    "security_bench": ([], "file", [
        rf"^\| open \| {NUM} \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^\| secured \| {NUM} \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^secured / open: produce {NUM}x, consume {NUM}x, broker CPU per GB {NUM}x",
    ]),
    "quota_bench": ([], "file", [
        rf"^\| none \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^\| measured \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^measured / none: produce {NUM}x, consume {NUM}x, broker CPU per GB {NUM}x",
        rf"^held: {NUM} MB in {NUM} s, {NUM} MB/s against a quota of {NUM} MB/s \({NUM}x\)",
    ]),
    "fetch_session_bench": ([], "file", [
        rf"^\| sessions \| {NUM} \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^\| full requests \| {NUM} \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^sessions / full requests: broker CPU per Fetch {NUM}x, consumer CPU per Fetch {NUM}x",
        rf"^\| replication, sessions \| {NUM} \| {NUM} \|",
        rf"^replication: sessions / full requests: brokers' CPU {NUM}x",
    ]),
    "auth_bench": ([], "file", [
        rf"^\| GSSAPI \| {NUM} \| {NUM} \| {NUM}x \|",
        rf"^\| SCRAM-SHA-512 \| {NUM} \| {NUM} \| {NUM}x \|",
        rf"^\| delegation token \| {NUM} \| {NUM} \| {NUM}x \|",
        rf"^\| PLAIN \| {NUM} \| {NUM} \| {NUM}x \|",
    ]),
    "share_bench": ([], "file", [
        rf"^consumer\s+{NUM}\s+{NUM}x\s+{NUM}\s+{NUM}x$",
        rf"^share\s+{NUM}\s+{NUM}x\s+{NUM}\s+{NUM}x$",
    ]),
    "produce_floor": ([], None, [
        rf"^\| ours \| {NUM} ms \| {NUM} ms \| {NUM} ms \| {NUM} ms \| {NUM}x \|",
        rf"^\| tansu \| {NUM} ms \| {NUM} ms \| {NUM} ms \| {NUM} ms \| {NUM}x \|",
    ]),
}


# tansu is the baseline of these (client_bench runs its clients against it); without its binary they
# are skipped, as every test that needs tansu is (``./dev test`` fetches it).
NEED_TANSU = {"client_bench", "broker_bench", "idempotence_bench", "produce_floor"}


def test_every_module_is_covered() -> None:
    from benchmarks.__main__ import MODULES as RUN_BY_DEV_BENCH

    assert sorted(MODULES) == sorted(RUN_BY_DEV_BENCH)


def _nodes(value, path: str = "$"):
    """Every value in a JSON document, containers included, with where it is."""
    yield path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield from _nodes(v, f"{path}.{k}" if isinstance(value, dict) else f"{path}[{k}]")


def _run(name: str, args: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([sys.executable, "-m", f"benchmarks.{name}", "--short", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        # SIGINT first: the module's finally blocks stop what it started (brokers, and a ZooKeeper that
        # runs in a session of its own); then SIGKILL for whatever is left of the group started here.
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        pytest.fail(f"{name} --short did not finish in {LIMIT_S} s\n{out[-3000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_short_form_runs_to_its_report(name: str, tmp_path: Path) -> None:
    if name in NEED_TANSU and not os.access(TANSU_BINARY, os.X_OK):
        pytest.skip(f"tansu binary not found at {TANSU_BINARY}")
    extra, json_mode, lines = MODULES[name]
    json_file = tmp_path / f"{name}.json"
    args = [*extra, "--json", str(json_file)] if json_mode == "file" else list(extra)
    done = _run(name, args)
    where = f"{name} --short\n--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}"
    assert done.returncode == 0, where
    assert "Traceback (most recent call last)" not in done.stderr, where
    for pattern in lines:
        assert re.search(pattern, done.stdout, re.MULTILINE), f"no line matching {pattern!r} in {where}"

    if json_mode is None:
        return
    figures = json.loads(json_file.read_text() if json_mode == "file" else done.stdout)
    nodes = list(_nodes(figures))
    numbers = [(p, v) for p, v in nodes if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert any(v > 0 for _, v in numbers), f"{name}: no positive figure in its JSON"
    not_finite = [(p, v) for p, v in numbers if not math.isfinite(v)]
    assert not not_finite, f"{name}: figures that are not finite numbers: {not_finite[:10]}"
    # a sample that failed carries its message in a non-empty ``error`` (as broker_bench records one)
    failed = [(p, v["error"]) for p, v in nodes if isinstance(v, dict) and v.get("error")]
    assert not failed, f"{name}: failed samples: {failed[:10]}"
