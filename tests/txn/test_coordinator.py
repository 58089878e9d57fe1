"""The transaction coordinator over the wire: FindCoordinator(TRANSACTION), InitProducerId with a
transactional id (epoch bumps, fencing, timeouts), state kept in ``__transaction_state`` across
restarts and decoded by ``kafkactl log dump --transaction-log-decoder``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from broker.protocol import ApiKey, ErrorCode
from broker.txn.records import partition_for
from tests.server.wire import Wire

ck = pytest.importorskip("confluent_kafka")

LIMIT_S = 30  # guards against a hang, not a timing assertion
TXN = 1


def find_coordinator(w: Wire, key: str) -> dict:
    return w.call(ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": TXN})


def init(w: Wire, txn_id: str | None, timeout_ms: int = 60000, version: int = 4, producer_id: int = -1,
         producer_epoch: int = -1) -> dict:
    return w.call(ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": txn_id, "transaction_timeout_ms": timeout_ms,
                                                     "producer_id": producer_id, "producer_epoch": producer_epoch})


def test_find_coordinator_creates_the_topic_and_names_this_broker(broker):
    with Wire(broker.bootstrap) as w:
        answer = find_coordinator(w, "payments")
        assert (answer["error_code"], answer["node_id"], answer["port"]) == (0, 0, broker.port)
        batched = w.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": TXN, "coordinator_keys": ["a", "b"]})
        assert [(c["key"], c["error_code"], c["node_id"]) for c in batched["coordinators"]] == [("a", 0, 0), ("b", 0, 0)]
        metadata = w.call(ApiKey.METADATA, 9, {"topics": [{"name": "__transaction_state"}],
                                              "allow_auto_topic_creation": False})
    [topic] = metadata["topics"]
    assert topic["error_code"] == 0 and topic["is_internal"] and len(topic["partitions"]) == 50


def test_init_producer_id_bumps_the_epoch_and_survives_a_restart(broker):
    with Wire(broker.bootstrap) as w:
        find_coordinator(w, "payments")
        first = init(w, "payments")
        second = init(w, "payments")
        other = init(w, "refunds")
        idempotent = init(w, None)
    assert first["error_code"] == second["error_code"] == other["error_code"] == 0
    assert second["producer_id"] == first["producer_id"] and (first["producer_epoch"], second["producer_epoch"]) == (0, 1)
    assert len({first["producer_id"], other["producer_id"], idempotent["producer_id"]}) == 3

    broker.restart()
    with Wire(broker.bootstrap) as w:
        third = init(w, "payments")
        while third["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            third = init(w, "payments")
    assert (third["error_code"], third["producer_id"], third["producer_epoch"]) == (0, first["producer_id"], 2)


def test_init_producer_id_errors(broker_factory):
    broker = broker_factory(transaction_max_timeout_ms=60000)
    with Wire(broker.bootstrap) as w:
        assert init(w, "early")["error_code"] == ErrorCode.NOT_COORDINATOR  # no __transaction_state yet
        find_coordinator(w, "early")
        assert init(w, "")["error_code"] == ErrorCode.INVALID_REQUEST
        assert init(w, "slow", timeout_ms=60001)["error_code"] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert init(w, "slow", timeout_ms=0)["error_code"] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        current = init(w, "kip360", version=3)
        pid, epoch = current["producer_id"], current["producer_epoch"]
        # a producer that knows its id and epoch asks for a bump (KIP-360) ...
        bumped = init(w, "kip360", version=3, producer_id=pid, producer_epoch=epoch)
        assert (bumped["error_code"], bumped["producer_id"], bumped["producer_epoch"]) == (0, pid, epoch + 1)
        # ... and one that presents an older epoch is fenced (v4: PRODUCER_FENCED, before: INVALID_PRODUCER_EPOCH)
        stale = {"producer_id": pid, "producer_epoch": epoch - 1 if epoch else 7}
        assert init(w, "kip360", version=4, **stale)["error_code"] == ErrorCode.PRODUCER_FENCED
        assert init(w, "kip360", version=3, **stale)["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH


def test_confluent_init_transactions_and_the_log_decoded(broker):
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "orders-app"})
    producer.init_transactions(LIMIT_S)
    again = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "orders-app"})
    again.init_transactions(LIMIT_S)
    del producer, again

    broker.stop()
    part = broker.data_dir / f"__transaction_state-{partition_for('orders-app', 50)}"
    dump = subprocess.run([sys.executable, "-m", "kafkactl", "--output", "json", "log", "dump", str(part),
                           "--transaction-log-decoder"], capture_output=True, text=True, timeout=LIMIT_S)
    assert dump.returncode == 0, dump.stderr
    decoded = [r["decoded"] for line in dump.stdout.splitlines() for r in json.loads(line)["records"]]
    assert [(d["transactional_id"], d["value"]["state"], d["value"]["producer_epoch"]) for d in decoded] == [
        ("orders-app", "Empty", 0), ("orders-app", "Empty", 1)]
    assert decoded[0]["value"]["partitions"] == [] and decoded[0]["value"]["start_timestamp_ms"] == -1
