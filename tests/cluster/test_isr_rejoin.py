"""A restarted broker gets back into every ISR while producers saturate the cluster.

Kafka's rule: a follower joins the ISR again once its log end offset reaches
the leader's high watermark (not the leader's log end, which runs ahead under
load). Three brokers, a topic of three partitions with replication factor 3,
a librdkafka producer sending 1 KB records with acks=all as fast as the
cluster takes them; a broker is killed with SIGKILL and started again while
the load goes on, and must be back in the ISR of every partition (in
ZooKeeper and in every broker's Metadata) before the load stops. The short
form kills one broker once; the slow form kills each broker in turn, three
rounds (five with ``KAFKAPY_LONG=1``).
"""

from __future__ import annotations

import os
import threading

import pytest
from confluent_kafka import Producer

from tests.cluster.conftest import wait_until

PARTITIONS = 3
REJOIN_S = 60  # a guard against a hang: catching up takes seconds here, even on a loaded machine


class SaturatingProducer:
    """librdkafka sending 1 KB records round-robin over the partitions with no pause (acks=all)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "enable.idempotence": False, "message.timeout.ms": 60000,
                                  "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                                  "queue.buffering.max.messages": 20000})
        self.topic = topic
        self.acknowledged = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, _msg) -> None:
        if err is None:
            self.acknowledged += 1

    def _run(self) -> None:
        value, n = b"x" * 1024, 0
        while not self.stopping.is_set():
            try:
                self.producer.produce(self.topic, value, partition=n % PARTITIONS, on_delivery=self._on_delivery)
                n += 1
                self.producer.poll(0)
            except BufferError:  # as many in flight as the cluster takes: saturated
                self.producer.poll(0.01)

    def wait_acknowledged(self, count: int) -> None:
        target = self.acknowledged + count
        wait_until(lambda: self.acknowledged >= target, f"{count} more acknowledgements")

    def __enter__(self) -> "SaturatingProducer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join()
        self.producer.flush(30)


def _every_isr_full(cluster, topic: str) -> bool:
    for p in range(PARTITIONS):
        state = cluster.partition_state(topic, p)
        if state is None or len(state["isr"]) != 3:
            return False
        for via in cluster.live_ids():
            meta = cluster.partition_meta(topic, p, via)
            if meta is None or len(meta["isr_nodes"]) != 3:
                return False
    return True


def _isr_views(cluster, topic: str) -> str:
    """Each partition's ISR in ZooKeeper and in each live broker's Metadata (what a failure shows)."""
    views = []
    for p in range(PARTITIONS):
        state = cluster.partition_state(topic, p)
        metas = {via: (cluster.partition_meta(topic, p, via) or {}).get("isr_nodes") for via in cluster.live_ids()}
        views.append(f"{topic}-{p}: ZooKeeper {state}, Metadata {metas}")
    return "; ".join(views)


def _rounds(cluster, topic: str, victims) -> None:
    with SaturatingProducer(cluster.bootstrap, topic) as load:
        load.wait_acknowledged(2000)
        for victim in victims:
            cluster.kill(victim)
            load.wait_acknowledged(2000)  # the survivors go on (the victim leaves the ISRs)
            cluster.start(victim)
            try:
                wait_until(lambda: _every_isr_full(cluster, topic),
                           f"broker {victim} back in every ISR of {topic} under load", limit=REJOIN_S)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; {_isr_views(cluster, topic)}") from None
            load.wait_acknowledged(1000)


def test_a_restarted_broker_rejoins_every_isr_under_saturating_load(cluster_factory):
    cluster = cluster_factory(3, replica_lag_time_max_ms=10000)
    cluster.create_topic("busy", partitions=PARTITIONS, replication_factor=3)
    _rounds(cluster, "busy", [cluster.leader("busy", 0)])


@pytest.mark.slow
def test_restarted_brokers_rejoin_every_isr_round_after_round(cluster_factory):
    cluster = cluster_factory(3, replica_lag_time_max_ms=10000)
    cluster.create_topic("busy", partitions=PARTITIONS, replication_factor=3)
    rounds = 5 if os.environ.get("KAFKAPY_LONG") else 3
    _rounds(cluster, "busy", [cluster.ids[i % 3] for i in range(rounds)])
