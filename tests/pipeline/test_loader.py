"""The loader job as users run it (``python -m pipeline load`` processes) against a
broker process: runs with production in between and one run SIGKILLed half way
leave every record exactly once in its topic/date/hour directory, read back with
pyarrow as any Hadoop tool would, and the group's offsets at the log end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.client import AclBinding, Admin, TopicPartition

from .conftest import create, produce

RUN_LIMIT_S = 300  # a guard against a hung run, not a performance assertion


def _load_cmd(kafka, topics: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", "load", "--bootstrap-server", kafka.bootstrap, "--topics", topics,
            "--output", str(out), *extra]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S)


def _loaded(out: Path) -> list[dict]:
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    return table.to_pylist()


def test_runs_and_a_sigkilled_run_load_every_record_once(kafka, topic_name, tmp_path):
    a, b = topic_name(), topic_name()
    prefix = os.path.commonprefix([a, b])
    create(kafka.bootstrap, (a, 3), (b, 1))
    out, group = tmp_path / "warehouse", f"{a}-loader"
    topics = f"{prefix}.*"
    # records spread over many hours and across midnight, UTC
    base = int(datetime(2024, 2, 28, 20, tzinfo=timezone.utc).timestamp() * 1000)
    produced = produce(kafka.bootstrap, a, 3, 300, base_ts=base, step_ms=7 * 60_000, tag="r1")
    produced += produce(kafka.bootstrap, b, 1, 50, base_ts=base, step_ms=60 * 60_000, tag="r1")
    cmd = _load_cmd(kafka, topics, out, "--group", group)

    first = _run(cmd)
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"{a}: 300 records" in first.stdout and f"{b}: 50 records" in first.stdout
    assert len(_loaded(out)) == 350

    produced += produce(kafka.bootstrap, a, 3, 90, base_ts=base + 86_400_000, step_ms=60_000, tag="r2")
    second = _run(cmd + ["--max-records-per-partition", "20"])  # a partial run: 20 of each partition's 30
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(_loaded(out)) == 410

    # a big batch, then a run killed with SIGKILL while it writes
    produced += produce(kafka.bootstrap, a, 3, 30_000, base_ts=base + 2 * 86_400_000, step_ms=1000, tag="r3")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    staging = out / "_kafkapy" / "staging"
    deadline = time.monotonic() + RUN_LIMIT_S
    while not (staging.exists() and any(staging.iterdir())) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed: " + proc.stdout.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Spark JVM
    proc.wait()
    proc.stdout.close()
    assert len(_loaded(out)) == 410  # nothing of the killed run is visible

    produced += produce(kafka.bootstrap, b, 1, 10, base_ts=base + 3 * 86_400_000, step_ms=1000, tag="r4")
    last = _run(cmd)
    assert last.returncode == 0, last.stderr[-3000:]

    rows = _loaded(out)
    counts = Counter((r["topic"], r["partition"], r["offset"]) for r in rows)
    assert max(counts.values()) == 1
    assert sorted(counts) == sorted((r["topic"], r["partition"], r["offset"]) for r in produced)
    by_key = {(r["topic"], r["partition"], r["offset"]): r for r in produced}
    for row in rows:
        want = by_key[(row["topic"], row["partition"], row["offset"])]
        assert (row["key"], row["value"]) == (want["key"], want["value"])
        when = datetime.fromtimestamp(want["timestamp_ms"] / 1000, timezone.utc)
        assert (str(row["date"]), int(row["hour"])) == (when.strftime("%Y-%m-%d"), when.hour)
    dirs = {p.relative_to(out).parts[:3] for p in out.glob("topic=*/date=*/hour=*/*.parquet")}
    assert (f"topic={b}", "date=2024-02-29", "hour=00") in dirs

    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        lag = admin.group_lag(group)
        ends = {tp: off for tp, (off, _) in admin.list_offsets(dict.fromkeys(lag, -1)).items()}
    assert set(lag) == {TopicPartition(a, p) for p in range(3)} | {TopicPartition(b, 0)}
    assert {tp: p.committed for tp, p in lag.items()} == ends


def _figures(path: Path) -> dict[str, float]:
    return {(s.name + "".join(f"/{v}" for v in s.labels.values())): s.value
            for f in text_string_to_metric_families(path.read_text()) for s in f.samples}


def test_nothing_new_is_a_successful_run_and_every_run_writes_its_figures(kafka, topic_name, tmp_path):
    t = topic_name()
    create(kafka.bootstrap, (t, 1))
    produce(kafka.bootstrap, t, 1, 5)
    figures = tmp_path / "kafkapy_loader.prom"
    cmd = _load_cmd(kafka, t, tmp_path / "out", "--format", "json", "--metrics-file", str(figures))
    before = time.time()
    assert _run(cmd).returncode == 0
    first = _figures(figures)
    assert first["kafkapy_loader_last_run_success"] == 1 and first[f"kafkapy_loader_records/{t}"] == 5
    assert before <= first["kafkapy_loader_last_success_timestamp_seconds"] == \
        first["kafkapy_loader_last_run_timestamp_seconds"] <= time.time()
    again = _run(cmd)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "nothing new" in again.stdout
    # a failed run (its output is a file, not a directory) says so and keeps the last success's time
    (tmp_path / "blocked").write_text("")
    failed = _run(_load_cmd(kafka, t, tmp_path / "blocked" / "out", "--metrics-file", str(figures)))
    assert failed.returncode == 1
    last = _figures(figures)
    assert last["kafkapy_loader_last_run_success"] == 0
    assert last["kafkapy_loader_last_run_timestamp_seconds"] > first["kafkapy_loader_last_run_timestamp_seconds"]
    assert last["kafkapy_loader_last_success_timestamp_seconds"] > first["kafkapy_loader_last_success_timestamp_seconds"]
    assert not any(name.startswith("kafkapy_loader_records/") for name in last)


@pytest.mark.parametrize("args, message", [
    (["--topics", "("], "--topics is not a valid regex"),
    (["--topics", "x", "--format", "csv"], "invalid choice: 'csv'"),
    (["--topics", "x", "--max-records-per-partition", "0"], "must be positive"),
])
def test_bad_arguments_exit_2_with_one_line(args, message, tmp_path):
    cmd = [sys.executable, "-m", "pipeline", "load", "--bootstrap-server", "127.0.0.1:1", "--output",
           str(tmp_path), *args]
    proc = _run(cmd)
    assert proc.returncode == 2
    assert message in proc.stderr.strip().splitlines()[-1]


def test_the_tasks_read_with_a_delegation_token(broker_factory, tmp_path):
    """``--delegation-token``: the driver authenticates with PLAIN (the command config), the Spark tasks with
    the token over SCRAM-SHA-512 as the same principal (the ACLs name only alice), and the token is expired
    when the run ends."""
    from tests.server.test_delegation_tokens import _grant_alice, _token_broker

    broker = _token_broker(broker_factory)
    _grant_alice(broker, "tokened", "tokened-loader")
    with Admin(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
               sasl_username="admin", sasl_password="admin-secret") as admin:
        admin.create_acls([AclBinding("cluster", "kafka-cluster", "literal", "User:alice", "*", "describe", "allow")]
                          + [AclBinding("topic", "tokened", "literal", "User:ANONYMOUS", "*", op, "allow")
                             for op in ("write", "describe")])
    produce(broker.bootstrap, "tokened", 1, 40, base_ts=int(time.time() * 1000), step_ms=1000, tag="t")
    conf = tmp_path / "alice.properties"
    conf.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
                    "sasl.password=alice-secret\n")
    scram_before = _auth_count(broker, "SCRAM-SHA-512")
    res = _run([sys.executable, "-m", "pipeline", "load", "--bootstrap-server", broker.sasl_bootstrap,
                "--topics", "tokened", "--output", str(tmp_path / "out"), "--group", "tokened-loader",
                "--command-config", str(conf), "--delegation-token"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "tokened: 40 records" in res.stdout and "delegation token " in res.stdout
    assert len(_loaded(tmp_path / "out")) == 40
    assert _auth_count(broker, "SCRAM-SHA-512") > scram_before  # the tasks' connections: the token
    with Admin(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
               sasl_username="alice", sasl_password="alice-secret") as alice:
        assert alice.describe_delegation_tokens() == []  # expired at the end of the run
    # without SASL in the command config: exit 2 before Spark starts
    res = _run([sys.executable, "-m", "pipeline", "load", "--bootstrap-server", broker.bootstrap, "--topics",
                "tokened", "--output", str(tmp_path / "out2"), "--delegation-token"])
    assert res.returncode == 2 and "--delegation-token needs SASL" in res.stderr, res.stderr


def _auth_count(broker, mechanism: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    return sum(sample.value
               for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == "kafkapy_successful_authentication_total"
               and sample.labels.get("mechanism") == mechanism)
