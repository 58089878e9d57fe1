"""``kafkactl transactions`` end to end against a broker process: a hanging transaction made on
purpose (a confluent-kafka transactional producer with a long ``transaction.timeout.ms`` writes,
then its process is SIGKILLed) is listed Ongoing and described; and every command's error paths
with their exit codes (unknown transactional id, topic or partition that does not exist, no open
transaction at the given offset, a bad value, an unreachable cluster)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.kafkactl.conftest import Ctl, one_line_error

ck = pytest.importorskip("confluent_kafka")

LIMIT_S = 60  # guards against a hang, not a timing assertion

# Begins a transaction, writes 3 records to hang-0 and waits to be killed: the transaction stays
# open for transaction.timeout.ms (10 minutes, far beyond the test) unless someone aborts it.
HANGING_PRODUCER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "stuck",
                  "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("hang", f"open-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    print("written", flush=True)
    time.sleep(600)
""")


@pytest.fixture
def hanging(ctl: Ctl, broker, tmp_path) -> str:
    """Topic "hang" (1 partition) whose offsets 0-2 belong to transactional id "stuck", left open
    by a producer killed with SIGKILL."""
    assert ctl("topics", "create", "hang").returncode == 0
    script = tmp_path / "hanging_producer.py"
    script.write_text(HANGING_PRODUCER)
    proc = subprocess.Popen([sys.executable, str(script), broker.bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(LIMIT_S)
        proc.stdout.close()
    return "stuck"


def test_a_hanging_transaction_is_listed_and_described(ctl: Ctl, hanging: str) -> None:
    [listed] = ctl.json("transactions", "list")
    assert listed["transactional_id"] == "stuck" and listed["state"] == "Ongoing"
    assert listed["coordinator"] == 0 and listed["producer_id"] >= 0
    d = ctl.json("transactions", "describe", "stuck")
    assert d["state"] == "Ongoing" and d["producer_id"] == listed["producer_id"]
    assert d["partitions"] == ["hang-0"] and d["transaction_timeout_ms"] == 600000
    assert d["transaction_start_time_ms"] > 0 and d["transaction_duration_ms"] >= 0
    table = ctl("transactions", "list")
    assert table.returncode == 0
    header, row = table.stdout.splitlines()
    assert header.split() == ["TRANSACTIONAL_ID", "COORDINATOR", "STATE", "PRODUCER_ID"]
    assert row.split() == ["stuck", "0", "Ongoing", str(listed["producer_id"])]


def test_list_without_transactions(ctl: Ctl) -> None:
    res = ctl("transactions", "list")
    assert res.returncode == 0 and res.stdout == "no transactions\n"
    assert ctl.json("transactions", "list") == []


def test_error_paths(ctl: Ctl) -> None:
    assert ctl("topics", "create", "two", "--partitions", "2").returncode == 0
    assert "TRANSACTIONAL_ID_NOT_FOUND" in one_line_error(ctl("transactions", "describe", "ghost"), 2)
    for args in (("transactions", "describe-producers", "ghost", "0"),
                 ("transactions", "abort", "--topic", "ghost", "--partition", "0", "--start-offset", "0")):
        assert "unknown topic: ghost" in one_line_error(ctl(*args), 2)
    for args in (("transactions", "describe-producers", "two", "2"),
                 ("transactions", "abort", "--topic", "two", "--partition", "2", "--start-offset", "0")):
        assert one_line_error(ctl(*args), 2) == "kafkactl: topic two has no partition 2 (it has 2)"
    for args in (("transactions", "describe-producers", "two", "-1"),
                 ("transactions", "abort", "--topic", "two", "--partition", "0", "--start-offset", "-5"),
                 ("transactions", "abort", "--topic", "two", "--partition", "0")):
        one_line_error(ctl(*args), 2)
