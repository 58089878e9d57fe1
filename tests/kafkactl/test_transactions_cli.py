"""``kafkactl transactions`` end to end against a broker process: a hanging transaction made on
purpose (a confluent-kafka transactional producer with a long ``transaction.timeout.ms`` writes,
then its process is SIGKILLed) is listed Ongoing and described, its producer found by
describe-producers; it blocks a read_committed consumer at the last stable offset until
``transactions abort`` ends it, and the consumer then reads on; and every command's error paths
with their exit codes (unknown transactional id, topic or partition that does not exist, no open
transaction at the given offset, a bad value, an unreachable cluster)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.kafkactl.conftest import Ctl, one_line_error
from tests.txn.reading import read_committed

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



def test_abort_ends_a_hanging_transaction(ctl: Ctl, broker, hanging: str) -> None:
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("hang", b"after", partition=0)  # offset 3, behind the open transaction
    assert producer.flush(LIMIT_S) == 0
    [p] = ctl.json("transactions", "describe-producers", "hang", "0")
    assert p["current_txn_start_offset"] == 0 and p["last_sequence"] == 2
    assert p["producer_id"] == ctl.json("transactions", "describe", "stuck")["producer_id"]
    # the last stable offset stays at 0: a read_committed consumer gets nothing, even the later record
    # (3 s of polling; the record is there for read_uncommitted ones at once)
    assert read_committed(broker.bootstrap, "hang", 1, sys.maxsize, wait_s=3, settle_s=0) == []
    wrong = one_line_error(ctl("transactions", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "1"), 2)
    assert wrong.startswith("kafkactl: no open transaction starts at offset 1 in hang-0")
    done = ctl.json("transactions", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0")
    assert done["producer_id"] == p["producer_id"] and done["producer_epoch"] == p["producer_epoch"]
    [p] = ctl.json("transactions", "describe-producers", "hang", "0")
    assert p["current_txn_start_offset"] is None
    # the consumer reads on: the aborted records never, the later one (wait until it arrives)
    deadline = time.monotonic() + LIMIT_S
    values: list[bytes] = []
    while not values and time.monotonic() < deadline:
        values = read_committed(broker.bootstrap, "hang", 1, sys.maxsize, wait_s=2, settle_s=0)
    assert values == [b"after"]
    again = one_line_error(ctl("transactions", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0"), 2)
    assert "no open transaction starts at offset 0" in again


def test_describe_producers_table(ctl: Ctl, hanging: str) -> None:
    res = ctl("transactions", "describe-producers", "hang", "0")
    assert res.returncode == 0
    header, row = res.stdout.splitlines()
    assert header.split() == ["PRODUCER_ID", "PRODUCER_EPOCH", "COORDINATOR_EPOCH", "LAST_SEQUENCE", "LAST_TIMESTAMP",
                              "CURRENT_TXN_START_OFFSET"]
    assert row.split()[3] == "2" and row.split()[5] == "0"
    assert ctl("topics", "create", "quiet").returncode == 0
    res = ctl("transactions", "describe-producers", "quiet", "0")
    assert res.returncode == 0 and res.stdout == "no producers in quiet-0\n"
