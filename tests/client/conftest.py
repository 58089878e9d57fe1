"""Brokers the client is tested against.

``kafka`` is parametrized over every broker under test:

* ``tansu``: a foreign Kafka-compatible broker (Rust, memory storage), started
  once per session on a free port. Its binary is found through ``$TANSU_BIN``,
  ``tansu`` on PATH, or ``.cache/tansu/tansu`` under the repository root;
  without it these tests are skipped.
* ``ours``: our broker (``python -m broker``), started once per session through
  ``tests/conftest.py``'s :class:`BrokerProcess`. If it does not start, every
  test that uses it fails: a broken broker must never turn the suite green.

Each yields a :class:`Target` with ``bootstrap`` and ``name``. Tests create
their own uniquely named topics, so one broker serves the whole session.
tansu holds a first JoinGroup for about half the session timeout, so group
tests use ``session_timeout_ms=6000``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess

REPO = Path(__file__).resolve().parents[2]
START_LIMIT_S = 30  # guard against a hung start, not a performance assertion


@dataclass
class Target:
    name: str
    bootstrap: str
    missing_apis: set = field(default_factory=set)  # Kafka API keys the broker does not implement

    def topic(self, prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    def skip_unless(self, api_key: int, what: str) -> None:
        if api_key in self.missing_apis:
            pytest.skip(f"{self.name} does not implement {what}")


def _tansu_binary() -> str | None:
    for cand in (os.environ.get("TANSU_BIN"), shutil.which("tansu"), str(REPO / ".cache" / "tansu" / "tansu")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen) -> bool:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory):
    binary = _tansu_binary()
    if binary is None:
        pytest.skip("tansu binary not found (set TANSU_BIN)")
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    for _ in range(3):
        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        if _wait_port(port, proc):
            break
        proc.kill()
        proc.wait()
    else:
        pytest.skip("tansu did not start")
    # tansu answers ApiVersions for DeleteRecords but panics on it; it has no
    # CreatePartitions or AlterConfigs.
    yield Target("tansu", f"127.0.0.1:{port}", missing_apis={21, 33, 37})
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def ours_broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("ours"), {})
    proc.start()
    yield Target("ours", proc.bootstrap)
    proc.stop()


@pytest.fixture(params=["tansu", "ours"])
def kafka(request) -> Target:
    """The broker under test (each test runs against every broker)."""
    return request.getfixturevalue(f"{request.param}_broker")


def create_topic(target: Target, partitions: int = 1, prefix: str = "t", **configs) -> str:
    from broker.client import Admin, NewTopic

    name = target.topic(prefix)
    with Admin(bootstrap_servers=target.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, {k.replace("_", "."): str(v) for k, v in configs.items()})])
    return name
