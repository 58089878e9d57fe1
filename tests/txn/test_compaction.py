"""The log cleaner and transactions on a broker process: a compacted topic written by a
transactional producer (confluent-kafka) with committed and aborted transactions, cleaned by the
broker's cleaner thread. Afterwards read_committed and read_uncommitted consumers both read the
latest committed value of every key and nothing of the aborted transactions (the cleaner removed
their records), and after a SIGKILL and a restart, whose producer state is rebuilt from the
cleaned log, the transactional producer and an idempotent one (our client's default) go on writing.
"""

from __future__ import annotations

import time

import pytest

from broker.client import Producer

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

LIMIT_S = 60  # guards against a hang, not a timing assertion
TOPIC = "table"


def read_all(bootstrap: str, isolation_level: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record of partition 0 up to its end for ``isolation_level``."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                            "isolation.level": isolation_level, "enable.partition.eof": True})
    try:
        consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
        out = []
        deadline = time.monotonic() + LIMIT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(msg.error())
            out.append((msg.key(), msg.value()))
        raise AssertionError(f"no end of {TOPIC}-0 within {LIMIT_S} s")
    finally:
        consumer.close()


def transaction(producer, pairs, commit: bool) -> None:
    producer.begin_transaction()
    for key, value in pairs:
        producer.produce(TOPIC, value, key, partition=0)
    if commit:
        producer.commit_transaction(LIMIT_S)
    else:
        producer.flush(LIMIT_S)
        producer.abort_transaction(LIMIT_S)


def test_compaction_removes_aborted_transactions_and_producers_go_on_after_a_restart(broker_factory):
    broker = broker_factory(log_cleaner_backoff_ms=100)
    admin = admin_mod.AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([admin_mod.NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0"})])[TOPIC].result(LIMIT_S)
    txn = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "table-writer", "linger.ms": 5})
    txn.init_transactions(LIMIT_S)
    keys = [b"k%d" % i for i in range(10)]
    transaction(txn, [(k, b"first " + k) for k in keys], commit=True)
    transaction(txn, [(k, b"aborted " + k) for k in keys + [b"only-aborted"]], commit=False)
    transaction(txn, [(k, b"second " + k) for k in keys[:5]], commit=True)
    transaction(txn, [(k, b"aborted again " + k) for k in keys[5:]], commit=False)
    # fill segments past all of it: the cleaner never touches the active segment
    idempotent = Producer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    assert idempotent.config.enable_idempotence
    for i in range(40):
        idempotent.send(TOPIC, b"x" * 200, b"filler", partition=0)
    idempotent.flush(LIMIT_S)

    expected = {k: (b"second " if k in keys[:5] else b"first ") + k for k in keys}

    def cleaned() -> bool:
        values = [v for _k, v in read_all(broker.bootstrap, "read_uncommitted")]
        return not any(v.startswith(b"aborted") for v in values) and values.count(b"first k0") == 0

    deadline = time.monotonic() + LIMIT_S
    while not cleaned():
        assert time.monotonic() < deadline, "the cleaner did not clean the topic"
        time.sleep(0.2)
    for level in ("read_committed", "read_uncommitted"):
        pairs = [(k, v) for k, v in read_all(broker.bootstrap, level) if k != b"filler"]
        assert dict(pairs) == expected and len(pairs) == len(expected), level

    # the producer state comes back from the cleaned log; both producers go on
    broker.kill()
    broker.start()
    transaction(txn, [(b"k0", b"third k0")], commit=True)
    idempotent.send(TOPIC, b"last", b"after-restart", partition=0).result(LIMIT_S)
    idempotent.close(LIMIT_S)
    txn.flush(LIMIT_S)
    pairs = dict(read_all(broker.bootstrap, "read_committed"))
    assert pairs[b"k0"] == b"third k0" and pairs[b"after-restart"] == b"last"
    assert not any(v.startswith(b"aborted") for v in pairs.values())
