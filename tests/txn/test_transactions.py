"""Transactions end to end with real transactional producers (confluent-kafka, kafka-python, aiokafka
and our own client) against a broker process: commit, abort, offsets sent to a transaction, a second
producer with the same transactional id fencing the first, a transaction past its timeout aborted by
the coordinator; read_uncommitted consumers see the data of every transaction (control batches, the
markers, skipped by the clients), and DescribeTransactions/ListTransactions report each id's state.

Which records a read_committed consumer gets is the last stable offset's business, tested with it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.client import Consumer, Producer, TopicPartition
from broker.client.errors import ProducerFencedError
from broker.protocol import ApiKey, ErrorCode
from tests.server.wire import Wire

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

LIMIT_S = 30  # guards against a hang, not a timing assertion


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([admin_mod.NewTopic(name, partitions, 1)])[name].result(LIMIT_S)


def wait_for(predicate, what: str):
    deadline = time.monotonic() + LIMIT_S
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def read_uncommitted(bootstrap: str, topic: str, end_offset: int, count: int) -> list[tuple[int, bytes]]:
    """(offset, value) of the first ``count`` records of partition 0, once its log ends at ``end_offset``."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                            "isolation.level": "read_uncommitted", "fetch.queue.backoff.ms": 10})
    try:
        wait_for(lambda: consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), LIMIT_S)[1] == end_offset,
                 f"{topic}-0 to end at {end_offset}")
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + LIMIT_S
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                out.append((msg.offset(), msg.value()))
        return out
    finally:
        consumer.close()


def describe(bootstrap: str, *ids: str) -> dict[str, dict]:
    with Wire(bootstrap) as w:
        resp = w.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": list(ids)})
    return {s["transactional_id"]: s for s in resp["transaction_states"]}


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([ck.TopicPartition(topic, 0)], timeout=LIMIT_S)[0].offset
    finally:
        consumer.close()


def test_confluent_commit_abort_and_offsets_sent_to_the_transaction(broker):
    create_topic(broker.bootstrap, "orders")
    create_topic(broker.bootstrap, "input")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-app", "linger.ms": 5})
    group = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "copier"}).consumer_group_metadata()
    producer.init_transactions(LIMIT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("orders", b"c%d" % i, partition=0)
    producer.send_offsets_to_transaction([ck.TopicPartition("input", 0, 5)], group, LIMIT_S)
    producer.commit_transaction(LIMIT_S)
    producer.begin_transaction()
    for i in range(2):
        producer.produce("orders", b"a%d" % i, partition=0)
    assert producer.flush(LIMIT_S) == 0  # written: abort_transaction drops what librdkafka has not sent yet
    producer.send_offsets_to_transaction([ck.TopicPartition("input", 0, 9)], group, LIMIT_S)
    producer.abort_transaction(LIMIT_S)

    # the COMMIT marker sits at offset 3, the ABORT marker at 6: the consumer skips both
    assert read_uncommitted(broker.bootstrap, "orders", 7, 5) == [(0, b"c0"), (1, b"c1"), (2, b"c2"), (4, b"a0"),
                                                                (5, b"a1")]
    assert wait_for(lambda: committed(broker.bootstrap, "copier", "input") == 5, "the committed offset")
    state = describe(broker.bootstrap, "ck-app", "nobody")
    assert state["nobody"]["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert (state["ck-app"]["transaction_state"], state["ck-app"]["producer_epoch"], state["ck-app"]["topics"]) == (
        "CompleteAbort", 0, [])

    broker.restart()  # the group coordinator replays the transactional commit and its marker
    assert committed(broker.bootstrap, "copier", "input") == 5


def test_a_second_producer_fences_the_first_and_aborts_what_it_left_open(broker):
    create_topic(broker.bootstrap, "payments")
    first = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "pay"})
    first.init_transactions(LIMIT_S)
    first.begin_transaction()
    first.produce("payments", b"old", partition=0)
    assert first.flush(LIMIT_S) == 0
    second = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "pay"})
    second.init_transactions(LIMIT_S)  # the coordinator aborts the open transaction first
    with pytest.raises(ck.KafkaException) as info:
        first.commit_transaction(LIMIT_S)
    assert info.value.args[0].fatal()
    second.begin_transaction()
    second.produce("payments", b"new", partition=0)
    second.commit_transaction(LIMIT_S)
    assert [v for _, v in read_uncommitted(broker.bootstrap, "payments", 4, 2)] == [b"old", b"new"]
    state = describe(broker.bootstrap, "pay")["pay"]
    assert (state["transaction_state"], state["producer_epoch"]) == ("CompleteCommit", 2)  # 0, fenced 1, 2


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(broker_factory):
    broker = broker_factory(transaction_abort_timed_out_transaction_cleanup_interval_ms=200)
    create_topic(broker.bootstrap, "slow")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "sleepy",
                            "transaction.timeout.ms": 1000, "message.timeout.ms": 1000})
    producer.init_transactions(LIMIT_S)
    producer.begin_transaction()
    producer.produce("slow", b"late", partition=0)
    assert producer.flush(LIMIT_S) == 0
    state = wait_for(lambda: describe(broker.bootstrap, "sleepy")["sleepy"]["transaction_state"] == "CompleteAbort"
                     and describe(broker.bootstrap, "sleepy")["sleepy"], "the coordinator's abort")
    assert state["producer_epoch"] == 1  # bumped: the producer is fenced
    with pytest.raises(ck.KafkaException):
        producer.commit_transaction(LIMIT_S)
    with Wire(broker.bootstrap) as w:
        listed = w.call(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": ["CompleteAbort", "Bogus"],
                                                     "producer_id_filters": []})
    assert listed["unknown_state_filters"] == ["Bogus"]
    assert [(t["transactional_id"], t["transaction_state"]) for t in listed["transaction_states"]] == [
        ("sleepy", "CompleteAbort")]


def test_kafka_python_transactional_producer(broker):
    kafka = pytest.importorskip("kafka")
    create_topic(broker.bootstrap, "kp")
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-app")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("kp", b"kept", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("kp", b"dropped", partition=0)
        producer.flush()  # kafka-python, as Java's client, drops what is unsent at an abort
        producer.abort_transaction()
    finally:
        producer.close(LIMIT_S)
    assert read_uncommitted(broker.bootstrap, "kp", 4, 2) == [(0, b"kept"), (2, b"dropped")]
    assert describe(broker.bootstrap, "kp-app")["kp-app"]["transaction_state"] == "CompleteAbort"


def test_aiokafka_transactional_producer(broker):
    aiokafka = pytest.importorskip("aiokafka")
    create_topic(broker.bootstrap, "aio")

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-app")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("aio", b"kept", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait("aio", b"dropped", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), LIMIT_S))
    assert read_uncommitted(broker.bootstrap, "aio", 4, 2) == [(0, b"kept"), (2, b"dropped")]


def test_our_transactional_producer(broker):
    create_topic(broker.bootstrap, "ours")
    create_topic(broker.bootstrap, "src")
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id="ours-app") as producer:
        with pytest.raises(Exception, match="init_transactions"):
            producer.send("ours", b"too early", partition=0)
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("ours", b"one", partition=0)
        producer.send("ours", b"two", partition=0)
        producer.send_offsets_to_transaction({TopicPartition("src", 0): 7}, "ours-group")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("ours", b"three", partition=0)
        producer.abort_transaction()
        with Producer(bootstrap_servers=broker.bootstrap, transactional_id="ours-app") as usurper:
            usurper.init_transactions()
            producer.begin_transaction()
            producer.send("ours", b"fenced", partition=0)
            with pytest.raises(ProducerFencedError):
                producer.commit_transaction()
    assert read_uncommitted(broker.bootstrap, "ours", 5, 3) == [(0, b"one"), (1, b"two"), (3, b"three")]
    assert wait_for(lambda: committed(broker.bootstrap, "ours-group", "src") == 7, "the committed offset")
    with Consumer(bootstrap_servers=broker.bootstrap, isolation_level="read_uncommitted") as consumer:
        consumer.assign([TopicPartition("ours", 0)])
        consumer.seek(TopicPartition("ours", 0), 0)
        got = []
        deadline = time.monotonic() + LIMIT_S
        while len(got) < 3 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(200)]
    assert got == [b"one", b"two", b"three"]
