"""``kafkactl perf produce|consume`` end to end: the reports parse and count what was
sent and read. Short by default; KAFKAPY_LONG=1 runs a million-record form."""

from __future__ import annotations

import os

import pytest

from tests.kafkactl.conftest import Ctl, one_line_error

LONG = os.environ.get("KAFKAPY_LONG") == "1"


@pytest.mark.slow
def test_perf_produce_then_consume(ctl: Ctl) -> None:
    records = 1_000_000 if LONG else 3000
    assert ctl("topics", "create", "perf", "--partitions", "3").returncode == 0
    report = ctl.json("perf", "produce", "perf", "--num-records", str(records), "--record-size", "100",
                      "--compression", "lz4", "-X", "linger.ms=2")
    assert report["records"] == records and report["errors"] == 0
    assert report["records_per_sec"] > 0 and report["mb_per_sec"] > 0
    assert 0 < report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"] <= report["p99_9_ms"] <= report["max_latency_ms"]

    table = ctl("perf", "produce", "perf", "--num-records", "200", "--record-size", "10", "--throughput", "1000")
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("200 records sent, ") and "ms 99.9th." in table.stdout

    read = ctl.json("perf", "consume", "perf", "--messages", str(records + 200))
    assert read["records"] == records + 200
    assert read["data_consumed_mb"] == round((records * 100 + 200 * 10) / 2**20, 4)
    assert read["records_per_sec"] > 0 and read["fetch_time_ms"] >= 0

    grouped = ctl.json("perf", "consume", "perf", "--messages", "100", "--group", "perf-group")
    assert grouped["records"] == 100
    [group] = ctl.json("groups", "describe", "perf-group")
    assert sum(o["current_offset"] for o in group["offsets"]) >= 100


def test_perf_errors(ctl: Ctl) -> None:
    assert ctl("topics", "create", "small").returncode == 0
    short = ctl("perf", "consume", "small", "--messages", "5", "--timeout", "0.5")
    assert "read 0 of 5 records" in one_line_error(short, 1)
    assert "unknown topic: nope" in one_line_error(ctl("perf", "produce", "nope", "--num-records", "1"), 2)
    assert "Missing option '--num-records'" in one_line_error(ctl("perf", "produce", "small"), 2)
