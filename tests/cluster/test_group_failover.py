"""A librdkafka consumer group on the cluster loses its coordinator's broker and keeps
its committed offsets (the new leader of its ``__consumer_offsets`` partition loads
them); ends with the history checker: nothing lost, nothing read twice."""

from __future__ import annotations

import time

from tests.cluster.conftest import WAIT_S, wait_until
from tests.cluster.history import check


def test_consumer_group_survives_the_loss_of_its_coordinators_broker(cluster):
    import confluent_kafka as ck

    cluster.create_topic("orders", partitions=3, replication_factor=3)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    acked = []
    for i in range(300):
        producer.produce("orders", value=b"o-%d" % i, partition=i % 3,
                         on_delivery=lambda err, m: acked.append((m.partition(), m.offset(), m.value()))
                         if err is None else None)
    assert producer.flush(WAIT_S) == 0 and len(acked) == 300

    def member() -> ck.Consumer:
        c = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "billing", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "fetch.queue.backoff.ms": 10})
        c.subscribe(["orders"])
        return c

    first, read = member(), []
    deadline = time.monotonic() + WAIT_S
    while len(read) < 150 and time.monotonic() < deadline:
        m = first.poll(0.5)
        if m is not None and m.error() is None:
            read.append((m.partition(), m.offset(), m.value()))
    assert len(read) >= 150, f"read {len(read)} of 300 in {WAIT_S} s"
    first.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in first.committed(
        [ck.TopicPartition("orders", p) for p in range(3)], timeout=WAIT_S)}
    first.close()

    coordinator = wait_until(lambda: cluster.coordinator("billing") in cluster.ids and cluster.coordinator("billing"),
                             "the group's coordinator")
    cluster.kill(coordinator)

    second = member()  # finds the new coordinator, which loaded the group's offsets
    try:
        def resumed():
            got = second.committed([ck.TopicPartition("orders", p) for p in range(3)], timeout=10)
            return {tp.partition: tp.offset for tp in got} == committed
        wait_until(resumed, "the group's committed offsets from its new coordinator")
        deadline = time.monotonic() + WAIT_S
        while len(read) < 300 and time.monotonic() < deadline:
            m = second.poll(0.5)
            if m is not None and m.error() is None:
                read.append((m.partition(), m.offset(), m.value()))
    finally:
        second.close()
    by_partition = {p: [r for r in read if r[0] == p] for p in range(3)}
    report = check(acked, {f"p{p}": rows for p, rows in by_partition.items()})
    assert report.valid(), str(report)  # nothing lost, nothing read twice: the commits survived
