"""A producer's next transaction meeting the previous one still completing: its AddPartitionsToTxn waits.

After EndTxn the coordinator writes the markers and then CompleteCommit; a
producer's next AddPartitionsToTxn often arrives meanwhile. It is held until the
completion is written and then answered, instead of CONCURRENT_TRANSACTIONS at
once (which costs librdkafka and Java a 20 ms backoff per transaction); a
completion that takes longer than the coordinator's bound (5 s) still gets
CONCURRENT_TRANSACTIONS, so the client retries as against Kafka.

The completion is held up with nothing made for the test, as in
test_prepare_commit_recovery: the topic's ``min.insync.replicas`` above its ISR
refuses the marker (NOT_ENOUGH_REPLICAS, retried by the coordinator) until it
is set back.
"""

from __future__ import annotations

import select
import time

import pytest

from broker.protocol import ApiKey, ErrorCode
from tests.server.wire import Wire

from .test_coordinator import find_coordinator, init
from .test_prepare_commit_recovery import set_min_isr
from .test_transactions import create_topic, describe, wait_for

pytest.importorskip("confluent_kafka")


def add_partitions(producer: dict, topic: str) -> dict:
    return {"transactional_id": producer["txn_id"], "producer_id": producer["producer_id"],
            "producer_epoch": producer["producer_epoch"], "topics": [{"name": topic, "partitions": [0]}]}


def codes(answer: dict) -> list[int]:
    return [p["error_code"] for t in answer["results"] for p in t["results"]]


def end_txn(w: Wire, producer: dict) -> int:
    return w.call(ApiKey.END_TXN, 3, {"transactional_id": producer["txn_id"], "producer_id": producer["producer_id"],
                                      "producer_epoch": producer["producer_epoch"], "committed": True})["error_code"]


def test_the_next_add_partitions_waits_for_the_previous_commit_to_complete(broker):
    create_topic(broker.bootstrap, "held")
    create_topic(broker.bootstrap, "next")
    with Wire(broker.bootstrap) as w:
        find_coordinator(w, "waiting-app")
        answer = wait_for(lambda: (a := init(w, "waiting-app"))["error_code"] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                          and a, "the coordinator to load")
        producer = {"txn_id": "waiting-app", **answer}
        assert codes(w.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(producer, "held"))) == [0]
        set_min_isr(broker.bootstrap, "held", 2)  # from now on the marker for held-0 is refused
        assert end_txn(w, producer) == ErrorCode.NONE
        assert describe(broker.bootstrap, "waiting-app")["waiting-app"]["transaction_state"] == "PrepareCommit"

        w.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(producer, "next"))
        assert select.select([w.sock], [], [], 1.0)[0] == []  # held, not answered CONCURRENT_TRANSACTIONS
        set_min_isr(broker.bootstrap, "held", 1)  # the marker goes in, then CompleteCommit
        _, answer = w.receive(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
        assert codes(answer) == [ErrorCode.NONE]
        state = describe(broker.bootstrap, "waiting-app")["waiting-app"]
        assert state["transaction_state"] == "Ongoing" and state["topics"] == [{"topic": "next", "partitions": [0]}]

        # a completion that outlasts the coordinator's bound: CONCURRENT_TRANSACTIONS, and the client retries
        set_min_isr(broker.bootstrap, "next", 2)
        assert end_txn(w, producer) == ErrorCode.NONE
        started = time.monotonic()
        answer = w.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(producer, "held"))
        assert codes(answer) == [ErrorCode.CONCURRENT_TRANSACTIONS]
        assert time.monotonic() - started >= 4.0  # it waited (the bound is 5 s) before answering
        set_min_isr(broker.bootstrap, "next", 1)
        assert codes(w.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(producer, "held"))) == [ErrorCode.NONE]
