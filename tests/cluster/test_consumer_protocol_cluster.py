"""Consumer-protocol groups (KIP-848) on a 3-broker cluster: two librdkafka members with
``group.protocol=consumer`` consume and commit while the broker coordinating their group is killed (SIGKILL).
The new coordinator loads the group from ``__consumer_offsets`` (its members, epochs and assignments), the
members carry on with it at their epochs, and the history checker finds every acknowledged record read (a
record read after the last commit before the kill may be read again)."""

from __future__ import annotations

import time

from tests.cluster.conftest import WAIT_S, wait_until
from tests.cluster.history import check

FAST = {"group.consumer.min.session.timeout.ms": 6000, "group.consumer.session.timeout.ms": 6000,
        "group.consumer.min.heartbeat.interval.ms": 500, "group.consumer.heartbeat.interval.ms": 500}


def test_consumer_protocol_members_survive_the_loss_of_their_coordinator(cluster_factory):
    import confluent_kafka as ck

    cluster = cluster_factory(3, props=FAST)
    cluster.create_topic("orders", partitions=4, replication_factor=3)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    acked: list = []

    def produce(count: int, start: int) -> None:
        for i in range(start, start + count):
            producer.produce("orders", value=b"o-%d" % i, partition=i % 4,
                             on_delivery=lambda err, m: acked.append((m.partition(), m.offset(), m.value()))
                             if err is None else None)
        assert producer.flush(WAIT_S) == 0

    produce(200, 0)
    members = [ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "billing",
                            "group.protocol": "consumer", "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 10}) for _ in range(2)]
    reads: dict[str, list] = {"a": [], "b": []}

    def poll_all(until) -> None:
        deadline = time.monotonic() + WAIT_S
        while not until() and time.monotonic() < deadline:
            for name, c in zip(reads, members):
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    reads[name].append((m.partition(), m.offset(), m.value()))
                    try:
                        c.commit(message=m, asynchronous=False)
                    except ck.KafkaException:
                        pass  # the coordinator is moving: the record may be read again, never lost

    def values_read() -> set:
        return {v for rows in reads.values() for _p, _o, v in rows}

    try:
        for c in members:
            c.subscribe(["orders"])
        poll_all(lambda: len(values_read()) >= 100 and all(c.assignment() for c in members))
        assert all(c.assignment() for c in members), "the members never split the partitions"
        coordinator = wait_until(lambda: cluster.coordinator("billing") in cluster.ids
                                 and cluster.coordinator("billing"), "the group's coordinator")
        before = describe(cluster, coordinator)
        cluster.kill(coordinator)
        produce(200, 200)
        poll_all(lambda: values_read() >= {v for _p, _o, v in acked})
        held = [{tp.partition for tp in c.assignment()} for c in members]
        assert not held[0] & held[1], f"a partition held by both members: {held}"
        after = describe(cluster, wait_until(lambda: cluster.coordinator("billing") in cluster.live_ids()
                                             and cluster.coordinator("billing"), "the new coordinator"))
        # the same members at the same epochs: the new coordinator read them back and nobody joined again
        assert after["group_epoch"] == before["group_epoch"], (before, after)
        assert ({m["member_id"]: m["member_epoch"] for m in after["members"]}
                == {m["member_id"]: m["member_epoch"] for m in before["members"]})
    finally:
        for c in members:
            c.close()
    report = check(acked, reads)
    assert report.valid(allow_duplicates=True), str(report)


def describe(cluster, broker_id: int) -> dict:
    from tests.server.wire import Wire
    from broker.protocol import ApiKey

    with Wire(cluster.brokers[broker_id].bootstrap) as w:
        r = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["billing"], "include_authorized_operations": False})
    group = r["groups"][0]
    assert group["error_code"] == 0, group
    return group
