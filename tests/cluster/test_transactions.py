"""Transactions on a three-broker cluster, with librdkafka's transactional producer.

* commit and abort across partitions led by three different brokers (with
  offsets sent to the transaction): the coordinator sends WriteTxnMarkers to
  each leader, and a read_committed consumer reads exactly the committed records;
* the coordinator's broker SIGKILLed mid-transaction: the leader of the
  ``__transaction_state`` partition moves, the new coordinator loads the open
  transaction and the producer's commit completes; the broker that took over a
  partition of the dead broker knows the open transaction (its producer state
  was rebuilt from the replicated log) and answers a retried idempotent batch as
  a duplicate with the first write's offset;
* a partition's leader stopped (SIGSTOP) before the commit, so PrepareCommit is
  written but that partition's marker cannot be, then SIGKILLed: the markers
  reach the partition's new leader and the transaction completes;
* the same stop, then the coordinator's broker SIGKILLed in PrepareCommit: the
  new coordinator loads PrepareCommit and completes the commit.

``__transaction_state`` has one partition here, so there is one coordinator to
find and kill; ``replica.lag.time.max.ms`` is short so a stopped follower leaves
the ISR of ``__transaction_state`` soon and PrepareCommit can be written.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from broker.protocol import ApiKey, ErrorCode
from broker.records import BatchBuilder

from tests.txn.reading import read_committed as read_back

from .conftest import WAIT_S, _request, wait_until

ck = pytest.importorskip("confluent_kafka")

TOPIC = "orders"
#: partition -> replicas: the first one leads, so brokers 1, 2 and 3 each lead one partition
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
PROPS = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
         "replica.lag.time.max.ms": 3000, "min.insync.replicas": 2}


def make_cluster(cluster_factory):
    cluster = cluster_factory(3, props=PROPS)
    cluster.create_topic(TOPIC, assignment=ASSIGNMENT)
    assert [cluster.leader(TOPIC, p) for p in range(3)] == [1, 2, 3]
    return cluster


def call(cluster, broker_id: int, api_key: int, body: dict, version: int) -> dict:
    b = cluster.broker(broker_id)
    return asyncio.run(_request(b.host, b.port, api_key, body, version))


def txn_coordinator(cluster, transactional_id: str, not_in=()) -> int:
    """The transaction coordinator every live broker names (FindCoordinator key type 1)."""
    def check():
        ids = {call(cluster, i, ApiKey.FIND_COORDINATOR, {"key": transactional_id, "key_type": 1}, 1)["node_id"]
               for i in cluster.live_ids()}
        return ids.pop() if len(ids) == 1 and -1 not in ids and not ids & set(not_in) else None
    return wait_until(check, f"one coordinator for {transactional_id} outside {list(not_in)}")


def txn_state(cluster, transactional_id: str) -> str:
    coordinator = txn_coordinator(cluster, transactional_id)
    answer = call(cluster, coordinator, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]}, 0)
    state = answer["transaction_states"][0]
    return state["transaction_state"] if state["error_code"] == ErrorCode.NONE else ""


def producer(cluster, transactional_id: str):
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id,
                     "linger.ms": 5, "transaction.timeout.ms": 120000})
    p.init_transactions(WAIT_S)
    return p



def produce_everywhere(p, prefix: str, per_partition: int = 3) -> list[bytes]:
    values = []
    for partition in range(3):
        for i in range(per_partition):
            value = f"{prefix}-{partition}-{i}".encode()
            p.produce(TOPIC, value, partition=partition)
            values.append(value)
    assert p.flush(WAIT_S) == 0
    return values


def test_commit_and_abort_across_partitions_led_by_three_brokers(cluster_factory):
    cluster = make_cluster(cluster_factory)
    cluster.create_topic("input")
    p = producer(cluster, "spread")
    group = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "copier"}).consumer_group_metadata()

    p.begin_transaction()
    committed = produce_everywhere(p, "first")
    p.send_offsets_to_transaction([ck.TopicPartition("input", 0, 7)], group, WAIT_S)
    p.commit_transaction(WAIT_S)
    p.begin_transaction()
    produce_everywhere(p, "aborted")
    p.abort_transaction(WAIT_S)
    p.begin_transaction()
    committed += produce_everywhere(p, "second")
    p.commit_transaction(WAIT_S)

    assert sorted(read_back(cluster.bootstrap, TOPIC, 3, len(committed), wait_s=WAIT_S)) == sorted(committed)
    assert txn_state(cluster, "spread") == "CompleteCommit"
    reader = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "copier"})
    try:  # the offsets became visible with the first commit's marker in __consumer_offsets
        assert reader.committed([ck.TopicPartition("input", 0)], timeout=WAIT_S)[0].offset == 7
    finally:
        reader.close()


def idempotent_batch(producer_id: int, epoch: int, values: list[bytes]) -> bytes:
    b = BatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=0)
    for value in values:
        b.append(int(time.time() * 1000), None, value)
    return b.build()


def produce_batch(cluster, broker_id: int, topic: str, partition: int, records: bytes) -> dict:
    answer = call(cluster, broker_id, ApiKey.PRODUCE, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}, 8)
    return answer["responses"][0]["partition_responses"][0]


def open_transactions(cluster, broker_id: int, topic: str, partition: int) -> dict[int, int]:
    """DescribeProducers at ``broker_id``: producer id -> first offset of its open transaction (-1: none)."""
    answer = call(cluster, broker_id, ApiKey.DESCRIBE_PRODUCERS,
                  {"topics": [{"name": topic, "partition_indexes": [partition]}]}, 0)
    p = answer["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return {a["producer_id"]: a["current_txn_start_offset"] for a in p["active_producers"]}


def test_the_coordinators_broker_killed_mid_transaction(cluster_factory):
    cluster = make_cluster(cluster_factory)
    p = producer(cluster, "survivor")
    coordinator = txn_coordinator(cluster, "survivor")
    p.begin_transaction()
    values = produce_everywhere(p, "open")

    # an idempotent batch in the partition the coordinator's broker leads, to be retried after the failover
    init = call(cluster, coordinator, ApiKey.INIT_PRODUCER_ID, {"transactional_id": None,
                                                                  "transaction_timeout_ms": 60000}, 2)
    probe = idempotent_batch(init["producer_id"], init["producer_epoch"], [b"once", b"only"])
    first = produce_batch(cluster, coordinator, TOPIC, coordinator - 1, probe)
    assert first["error_code"] == ErrorCode.NONE
    cluster.wait_for_isr(TOPIC, coordinator - 1)

    cluster.kill(coordinator)
    new_coordinator = txn_coordinator(cluster, "survivor", not_in=(coordinator,))
    leader = cluster.wait_for_leader(TOPIC, coordinator - 1, not_in=(coordinator,))
    # the new leader's producer state, rebuilt from the replicated log, has the transaction open ...
    started = open_transactions(cluster, leader, TOPIC, coordinator - 1)
    assert len([offset for offset in started.values() if offset >= 0]) == 1, started
    # ... and the retried batch is a duplicate: the first write's offset, nothing written
    again = produce_batch(cluster, leader, TOPIC, coordinator - 1, probe)
    assert (again["error_code"], again["base_offset"]) == (ErrorCode.NONE, first["base_offset"])

    p.commit_transaction(WAIT_S)  # librdkafka finds the new coordinator, which loaded the transaction
    assert txn_coordinator(cluster, "survivor") == new_coordinator != coordinator
    wait_until(lambda: txn_state(cluster, "survivor") == "CompleteCommit", "CompleteCommit")
    got = read_back(cluster.bootstrap, TOPIC, 3, len(values) + 2, wait_s=WAIT_S)
    assert sorted(got) == sorted(values + [b"once", b"only"])
    assert all(offset == -1 for offset in open_transactions(cluster, leader, TOPIC, coordinator - 1).values())


def test_markers_reach_the_new_leader_of_a_partition_whose_leader_died_after_prepare_commit(cluster_factory):
    cluster = make_cluster(cluster_factory)
    p = producer(cluster, "mover")
    coordinator = txn_coordinator(cluster, "mover")
    victim = next(b for b in (1, 2, 3) if b != coordinator and b != cluster.controller_id())
    p.begin_transaction()
    values = produce_everywhere(p, "moved")

    cluster.pause(victim)  # its partition can take no marker now
    outcome: list[BaseException | None] = []

    def commit():
        try:
            p.commit_transaction(WAIT_S * 2)
            outcome.append(None)
        except BaseException as exc:  # reported by the assertion below
            outcome.append(exc)
    committer = threading.Thread(target=commit)
    committer.start()
    wait_until(lambda: txn_state(cluster, "mover") == "PrepareCommit", "PrepareCommit")
    time.sleep(1.0)
    assert txn_state(cluster, "mover") == "PrepareCommit"  # the marker for the stopped leader's partition waits
    cluster.kill(victim)
    leader = cluster.wait_for_leader(TOPIC, victim - 1, not_in=(victim,))
    wait_until(lambda: txn_state(cluster, "mover") == "CompleteCommit", "CompleteCommit after the leader moved")
    committer.join(WAIT_S * 2)
    assert outcome == [None]
    assert leader != victim
    assert sorted(read_back(cluster.bootstrap, TOPIC, 3, len(values), wait_s=WAIT_S)) == sorted(values)


def test_a_new_coordinator_completes_the_commit_its_killed_predecessor_prepared(cluster_factory):
    cluster = make_cluster(cluster_factory)
    p = producer(cluster, "handover")
    coordinator = txn_coordinator(cluster, "handover")
    stopped = next(b for b in (1, 2, 3) if b != coordinator)
    p.begin_transaction()
    values = produce_everywhere(p, "handed")

    cluster.pause(stopped)  # the marker for its partition cannot be written: the commit stays prepared
    p.commit_transaction(WAIT_S)  # answered once PrepareCommit is written (the stopped broker left the ISR)
    assert txn_state(cluster, "handover") == "PrepareCommit"
    cluster.kill(coordinator)
    cluster.resume(stopped)
    new_coordinator = txn_coordinator(cluster, "handover", not_in=(coordinator,))
    # the new coordinator loaded PrepareCommit and writes the markers to the partitions' leaders now
    wait_until(lambda: txn_state(cluster, "handover") == "CompleteCommit", "CompleteCommit by the new coordinator")
    assert new_coordinator != coordinator
    assert sorted(read_back(cluster.bootstrap, TOPIC, 3, len(values), wait_s=WAIT_S)) == sorted(values)
