"""The exit-code contract (kafkactl.errors, README): every cluster command says
"cannot reach the cluster" and exits 3 exactly when no connection could be made;
names that do not exist are bad input (2); refusals are 1; a directory without
segments is bad input for ``log dump``."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.kafkactl.conftest import Ctl, one_line_error

CLUSTER_COMMANDS = [
    ("cluster", "describe"),
    ("topics", "list"), ("topics", "describe", "t"), ("topics", "create", "t"),
    ("topics", "alter", "t", "--partitions", "2"), ("topics", "delete", "t"),
    ("configs", "get", "topic", "t"), ("configs", "get", "broker", "0"),
    ("configs", "set", "topic", "t", "retention.ms=1"),
    ("groups", "list"), ("groups", "describe", "g"), ("groups", "delete", "g"),
    ("groups", "reset-offsets", "g", "--all-topics", "--to-earliest"),
    ("groups", "delete-offsets", "g", "--topic", "t"),
    ("produce", "t"), ("consume", "t"),
    ("perf", "produce", "t", "--num-records", "1"), ("perf", "consume", "t", "--messages", "1"),
    ("transactions", "list"), ("transactions", "describe", "x"), ("transactions", "describe-producers", "t", "0"),
    ("transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "0"),
]


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args", CLUSTER_COMMANDS, ids=" ".join)
def test_unreachable_cluster_is_exit_3(args, closed_port: int) -> None:
    line = one_line_error(Ctl(f"127.0.0.1:{closed_port}")(*args, input="x\n"), 3)
    assert line.startswith(f"kafkactl: cannot reach the cluster at 127.0.0.1:{closed_port}: ")


def test_names_that_do_not_exist_are_bad_input(ctl: Ctl) -> None:
    for args in (("configs", "get", "broker", "7"), ("configs", "set", "broker", "7", "log.retention.ms=1")):
        assert one_line_error(ctl(*args), 2) == "kafkactl: broker 7 is not in the cluster (brokers: 0)"
    assert "GROUP_ID_NOT_FOUND" in one_line_error(ctl("groups", "delete", "ghost"), 2)
    assert "unknown topic: ghost" in one_line_error(ctl("perf", "consume", "ghost", "--messages", "1"), 2)


def test_log_dump_without_segments_is_bad_input(tmp_path: Path) -> None:
    offline = Ctl(None)
    empty = tmp_path / "orders-0"
    empty.mkdir()
    line = one_line_error(offline("log", "dump", str(empty)), 2)
    assert line == f"kafkactl: no log segments in {empty} (give a partition dir <topic>-<partition> or a segment file)"
    # a log dir is not a partition dir: nothing to dump directly in it
    assert "no log segments in" in one_line_error(offline("log", "dump", str(tmp_path), "-o", "json"), 2)
