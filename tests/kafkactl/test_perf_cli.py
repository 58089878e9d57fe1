"""``kafkactl perf produce|consume|e2e`` end to end: the reports parse and count what was
sent and read, progress lines appear while they run, tiny runs state no absurd rate, a
run whose broker dies says what was acknowledged, and the end-to-end test reads back each
record it sent and stops when it reads anything else. Short by default; KAFKAPY_LONG=1 runs
a million-record form."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from kafkactl.perf import MIN_MEASURABLE_S
from tests.kafkactl.conftest import RUN_LIMIT_S, Ctl, one_line_error

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


PROGRESS = re.compile(r"^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                      r"[\d.]+ ms max latency\.$")
CONSUME_PROGRESS = re.compile(r"^\d+ records consumed \([\d.]+ MB\) in the last [\d.]+ s, [\d.]+ records/sec "
                              r"\([\d.]+ MB/sec\); \d+ in total\.$")


def test_progress_lines_while_it_runs(ctl: Ctl) -> None:
    """About 2 s of throttled sending with a 250 ms interval: several progress lines, on
    stderr, that add up to what the report says."""
    assert ctl("topics", "create", "slow").returncode == 0
    res = ctl("--output", "json", "perf", "produce", "slow", "--num-records", "400", "--throughput", "200",
              "--record-size", "10", "--reporting-interval", "250")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) >= 3, res.stderr  # 2 s / 250 ms, with a wide margin for a loaded machine
    assert all(PROGRESS.match(line) for line in lines), lines
    assert sum(int(line.split()[0]) for line in lines) <= 400
    report = json.loads(res.stdout)
    assert report["records"] == 400
    # the throttle cannot send record 385 before 385/200 s: at least 1.9 s from first send to
    # last ack, so at most 400/1.9 records/s; the lower bound leaves room for a loaded machine
    assert report["elapsed_ms"] >= 1900 and 50 <= report["records_per_sec"] <= 211

    res = ctl("perf", "consume", "slow", "--messages", "401", "--timeout", "1.5", "--reporting-interval", "250")
    assert res.returncode == 1
    progress = res.stderr.splitlines()[:-1]
    assert len(progress) >= 3 and all(CONSUME_PROGRESS.match(line) for line in progress), res.stderr
    assert progress[-1].endswith("; 400 in total.")
    assert res.stderr.splitlines()[-1] == "kafkactl: read 400 of 401 records: no record for 1.5 s"
    quiet = ctl("perf", "consume", "slow", "--messages", "400", "--reporting-interval", "0")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_tiny_runs_give_no_absurd_rates(ctl: Ctl) -> None:
    assert ctl("topics", "create", "one").returncode == 0
    report = ctl.json("perf", "produce", "one", "--num-records", "1")
    assert report["records"] == 1 and report["elapsed_ms"] > 0
    # one acknowledgement: the rate is what one round trip allows, or not stated at all
    if report["records_per_sec"] is None:
        assert report["elapsed_ms"] < 1000 * MIN_MEASURABLE_S
    else:
        # elapsed_ms is rounded to 0.1 ms, the rate to 0.1 records/s
        elapsed = report["elapsed_ms"]
        assert 1000 / (elapsed + 0.05) - 0.05 <= report["records_per_sec"] <= 1000 / (elapsed - 0.05) + 0.05
        assert report["records_per_sec"] <= 1 / MIN_MEASURABLE_S
    read = ctl.json("perf", "consume", "one", "--messages", "1")
    assert read["records"] == 1 and read["rebalance_time_ms"] == 0
    for name in ("records_per_sec", "fetch_records_per_sec"):
        assert read[name] is None or read[name] <= 1 / MIN_MEASURABLE_S, read


def test_a_failed_run_says_how_many_records_were_acknowledged(broker_factory) -> None:
    """The broker is killed mid-run: the command stops, reports what was acknowledged,
    and exits 3 (the cluster went away)."""
    broker = broker_factory()
    ctl = Ctl(broker.bootstrap)
    assert ctl("topics", "create", "doomed").returncode == 0
    argv = [sys.executable, "-m", "kafkactl", "-b", broker.bootstrap, "perf", "produce", "doomed",
            "--num-records", "1000000", "--throughput", "500", "--reporting-interval", "200",
            "-X", "delivery.timeout.ms=3000", "-X", "request.timeout.ms=1000"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        assert PROGRESS.match(first.strip()), first
        broker.kill()
        out, err = proc.communicate(timeout=RUN_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, err
    last = err.splitlines()[-1]
    match = re.match(r"kafkactl: (\d+) of 1000000 records acknowledged, (\d+) failed; first: ", last)
    assert match and int(match.group(1)) > 0 and int(match.group(2)) > 0, last
    assert out.startswith(f"{match.group(1)} records sent, ")


E2E_PROGRESS = re.compile(r"^\d+ records end to end in the last [\d.]+ s, [\d.]+ ms avg latency, [\d.]+ ms max "
                          r"latency; \d+ in total\.$")


def test_perf_e2e_reads_back_every_record_it_sends(ctl: Ctl) -> None:
    """Each record goes through the broker and comes back to the consumer before the next
    is sent: the topic ends up holding exactly the records sent, spread over its partitions,
    and the figures are ordered as a distribution's are."""
    assert ctl("topics", "create", "e2e", "--partitions", "3").returncode == 0
    res = ctl("--output", "json", "perf", "e2e", "e2e", "--num-records", "300", "--record-size", "50",
              "--reporting-interval", "20")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["records"] == 300
    assert 0 < report["p50_ms"] <= report["p99_ms"] <= report["p99_9_ms"] <= report["max_latency_ms"]
    # every record's latency includes its acknowledgement, so each quantile of the whole is at least the ack's
    assert 0 < report["ack_p50_ms"] <= report["p50_ms"] and report["ack_p99_ms"] <= report["p99_ms"]
    progress = res.stderr.splitlines()
    assert progress and all(E2E_PROGRESS.match(line) for line in progress), res.stderr
    # each line counts the records of its window, and says the running total they add up to
    windows = [int(line.split()[0]) for line in progress]
    totals = [int(line.rsplit("; ", 1)[1].split()[0]) for line in progress]
    assert totals == [sum(windows[:i + 1]) for i in range(len(windows))], progress

    [topic] = ctl.json("topics", "describe", "e2e")
    read = ctl.lines("consume", "e2e", "--from-beginning", "--max-messages", "301", "--timeout", "2")
    assert len(read) == 300 and {r["partition"] for r in read} == {0, 1, 2}, topic
    assert all(len(r["value"]) == 50 and r["value"].isupper() for r in read)

    table = ctl("perf", "e2e", "e2e", "-n", "20", "--acks", "1", "--reporting-interval", "0",
                "--consumer-property", "fetch.max.wait.ms=0")
    assert table.returncode == 0 and table.stderr == "", table.stderr
    assert re.match(r"^20 records end to end, [\d.]+ ms avg latency, .* ms 99\.9th, [\d.]+ ms max; acknowledged in "
                    r"[\d.]+ ms 50th, [\d.]+ ms 99th\.$", table.stdout.strip()), table.stdout


def test_perf_e2e_stops_at_a_record_it_did_not_send(ctl: Ctl, broker) -> None:
    """Another producer writes into the topic meanwhile: the run stops at the first poll
    that returns anything but the one record just sent, says so, and exits 1."""
    assert ctl("topics", "create", "shared").returncode == 0
    other = subprocess.Popen([sys.executable, "-m", "kafkactl", "-b", broker.bootstrap, "perf", "produce", "shared",
                              "--num-records", "100000", "--throughput", "500", "--reporting-interval", "0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        res = ctl("perf", "e2e", "shared", "--num-records", "100000", "--reporting-interval", "0")
    finally:
        other.kill()
        other.wait()
    line = one_line_error(res, 1)
    assert re.match(r"kafkactl: \d+ of 100000 records went end to end; then (\d+ records were read for one sent|the "
                    r"record read is not the one sent) \(first at shared-0 offset \d+\)$", line), line


def test_perf_e2e_refuses_what_cannot_measure_it(ctl: Ctl, tmp_path) -> None:
    assert ctl("topics", "create", "e2e-bad").returncode == 0
    unacknowledged = "kafkactl: end-to-end latency needs each send acknowledged: acks 1 or all"
    assert one_line_error(ctl("perf", "e2e", "e2e-bad", "-n", "5", "--acks", "0"), 2) == unacknowledged
    assert one_line_error(ctl("perf", "e2e", "e2e-bad", "-n", "5", "--producer-property", "acks=0"), 2) == unacknowledged
    props = tmp_path / "client.properties"
    props.write_text("acks=0\n")
    assert one_line_error(ctl("--command-config", str(props), "perf", "e2e", "e2e-bad", "-n", "5"), 2) == unacknowledged
    # a setting of the file that the command line overrides is no reason to refuse
    assert ctl("--command-config", str(props), "perf", "e2e", "e2e-bad", "-n", "5", "--acks", "1").returncode == 0
    assert "'fetch.max.wait.ms' must be an integer" in one_line_error(
        ctl("perf", "e2e", "e2e-bad", "-n", "5", "--consumer-property", "fetch.max.wait.ms=soon"), 2)
    assert "unknown topic: nope" in one_line_error(ctl("perf", "e2e", "nope", "-n", "5"), 2)
    assert "Missing option '--num-records'" in one_line_error(ctl("perf", "e2e", "e2e-bad"), 2)
    assert "--record-size" in one_line_error(ctl("perf", "e2e", "e2e-bad", "-n", "1", "-s", "0"), 2)


def test_perf_e2e_whose_broker_stops_answering_says_how_far_it_got(broker_factory) -> None:
    """The broker is stopped (SIGSTOP) mid-run: within the timeout the command says how many
    records went end to end and why it stopped, and ends without waiting for the record it
    abandoned: exit 3 when the send timed out (no answer), exit 1 when the record was
    acknowledged but not read, as a short read is for ``perf consume``."""
    broker = broker_factory()
    ctl = Ctl(broker.bootstrap)
    assert ctl("topics", "create", "frozen").returncode == 0
    argv = [sys.executable, "-m", "kafkactl", "-b", broker.bootstrap, "perf", "e2e", "frozen",
            "--num-records", "1000000", "--timeout", "2", "--reporting-interval", "200"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        assert E2E_PROGRESS.match(first.strip()), first
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            out, err = proc.communicate(timeout=RUN_LIMIT_S)
        finally:
            os.kill(broker.pid, signal.SIGCONT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    last = err.splitlines()[-1]
    match = re.match(r"kafkactl: (\d+) of 1000000 records went end to end; then (.*)$", last)
    assert match and int(match.group(1)) > 0, last
    why = match.group(2)
    if proc.returncode == 3:
        assert re.match(r"the cluster at \S+ did not answer in time: ", why), last
    else:
        assert proc.returncode == 1 and why == "the record sent was not read within 2 s", (proc.returncode, last)
    assert out == ""
