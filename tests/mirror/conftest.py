"""Mirror processes under test and helpers to fill and read clusters.

``mirror_factory(config)`` starts ``python -m mirror --config FILE`` as a
subprocess (the config dict is written as YAML) and waits for its ready line;
every process is stopped by PID at teardown, and a traceback in its log fails
the test. ``produce_records`` writes keyed records with headers and explicit
timestamps; ``read_all`` reads a topic back, every partition up to its end.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from broker.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from broker.client.errors import UnknownTopicOrPartitionError
from mirror.position import HEADER

REPO = Path(__file__).resolve().parents[2]
START_LIMIT_S = 30  # a guard against a hung start, not a performance assertion
# A dead mirror's partitions move after its session times out; short in tests.
GROUP_PROPS = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}


class MirrorProcess:
    def __init__(self, workdir: Path, config: dict) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / "mirror.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.log_path = workdir / "mirror.log"
        self.proc: subprocess.Popen | None = None
        self.metrics_port: int | None = None

    def start(self) -> "MirrorProcess":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "mirror", "--config", str(self.config_path)],
                                         stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + START_LIMIT_S
        offset = self.log_path.stat().st_size if False else 0
        while time.monotonic() < deadline:
            text = self.log_text()[offset:]
            for line in text.splitlines():
                if line.startswith("mirror ready:"):
                    where = line.rsplit("metrics=", 1)[1]
                    self.metrics_port = None if where == "off" else int(where.rsplit(":", 1)[1])
                    return self
            if self.proc.poll() is not None:
                raise AssertionError(f"mirror exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
            time.sleep(0.05)
        raise AssertionError("mirror did not print its ready line")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"mirror did not exit on signal {sig} within {timeout} s")

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)


@pytest.fixture
def mirror_factory(tmp_path):
    started: list[MirrorProcess] = []

    def make(config: dict, start: bool = True) -> MirrorProcess:
        proc = MirrorProcess(tmp_path / f"mirror{len(started)}", config)
        started.append(proc)
        return proc.start() if start else proc

    yield make
    problems = []
    for proc in started:
        if proc.running():
            code = proc.stop()
            if code != 0:
                problems.append(f"mirror in {proc.workdir} exited with {code} on SIGTERM")
        if "Traceback" in proc.log_text():
            problems.append(f"mirror in {proc.workdir} logged a traceback:\n{proc.log_text()[-4000:]}")
    assert not problems, "\n".join(problems)


def mirror_config(clusters: dict[str, str], flows: list[dict], **top) -> dict:
    return {"clusters": {name: {"bootstrap.servers": b, **GROUP_PROPS} for name, b in clusters.items()},
            "flows": flows, "sync.interval.ms": 1000, "metrics.port": 0, **top}


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, configs)])


def produce_records(bootstrap: str, topic: str, count: int, partitions: int = 1, start: int = 0,
                    prefix: str = "k") -> list[tuple]:
    """Produce ``count`` records spread over ``partitions``; returns what was sent
    as ``(partition, key, value, headers, timestamp)``."""
    sent = []
    base_ts = 1_700_000_000_000
    with Producer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        for i in range(start, start + count):
            part = i % partitions
            key = f"{prefix}{i}".encode()
            value = f"value-{topic}-{i}".encode() * 3
            headers = [("n", str(i).encode()), ("kind", b"test")]
            ts = base_ts + i * 7
            p.send(topic, value, key, partition=part, timestamp_ms=ts, headers=headers)
            sent.append((part, key, value, headers, ts))
        p.flush()
    return sent


def _topic_partitions(bootstrap: str, topic: str) -> list[TopicPartition]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return [TopicPartition(topic, p) for p in sorted(admin.describe_topics([topic])[topic].partitions)]


def read_all(bootstrap: str, topic: str, strip_mirror_header: bool = True) -> list[tuple]:
    """Every record of ``topic`` as ``(partition, key, value, headers, timestamp)`` in partition, offset order.

    Reads each partition up to the high watermark of the Fetch answers (tansu's
    ListOffsets answers less than its log holds).
    """
    tps = _topic_partitions(bootstrap, topic)
    got: dict[int, list] = {tp.partition: [] for tp in tps}
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                  fetch_max_wait_ms=50) as c:
        c.assign(tps)
        for tp in tps:
            c.seek_to_beginning(tp)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for r in c.poll(200):
                headers = [h for h in r.headers if not (strip_mirror_header and h[0] == HEADER)]
                got[r.partition].append((r.partition, r.key, r.value, headers, r.timestamp))
            if all(c.highwater(tp) is not None and c.position(tp) >= c.highwater(tp) for tp in tps):
                break
    return [rec for tp in tps for rec in got[tp.partition]]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark of each partition, from a Fetch answer."""
    tps = _topic_partitions(bootstrap, topic)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="latest", enable_auto_commit=False,
                  fetch_max_wait_ms=10) as c:
        c.assign(tps)
        deadline = time.monotonic() + 30
        while any(c.highwater(tp) is None for tp in tps) and time.monotonic() < deadline:
            c.poll(50)
        return {tp.partition: c.highwater(tp) for tp in tps}


def mirrored_count(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (sum of high watermarks); 0 while the topic does not exist yet (the mirror creates it)."""
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except UnknownTopicOrPartitionError:
        return 0


def wait_for(predicate, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
