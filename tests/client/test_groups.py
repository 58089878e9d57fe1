"""Consumer groups through the broker's coordinator: rebalances, commits, patterns."""

from __future__ import annotations

import os
import threading
import time

import pytest

from broker.client import Admin, Consumer, Producer, TopicPartition
from broker.client.errors import IllegalStateError

from .conftest import create_topic

GROUP_TIMEOUTS = dict(session_timeout_ms=6000, heartbeat_interval_ms=300, max_poll_interval_ms=20000)
WAIT_S = 40  # guard against hangs; conditions are awaited, not timed


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Member:
    """One consumer polling in its own thread; tracks its assignment through the callbacks."""

    def __init__(self, bootstrap: str, group: str, topics=None, **kw) -> None:
        self.consumer = Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                 **GROUP_TIMEOUTS, **kw)
        self.assigned: set[TopicPartition] = set()
        self.events: list[tuple[str, list]] = []
        self.records = []
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self.topics = topics
        self.thread = threading.Thread(target=self._run, daemon=True)

    def on_assign(self, partitions):
        self.events.append(("assign", sorted(partitions)))
        self.assigned |= set(partitions)

    def on_revoke(self, partitions):
        self.events.append(("revoke", sorted(partitions)))
        self.assigned -= set(partitions)

    def start(self, **subscribe):
        self.consumer.subscribe(self.topics, on_assign=self.on_assign, on_revoke=self.on_revoke, **subscribe)
        self.thread.start()
        return self

    def _run(self):
        try:
            while not self.stop_flag.is_set():
                self.records.extend(self.consumer.poll(100))
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def stop(self):
        self.stop_flag.set()
        self.thread.join(WAIT_S)
        self.consumer.close()
        if self.error:
            raise self.error


ASSIGNORS = ["range", "cooperative-sticky"] + (["roundrobin"] if os.environ.get("KAFKAPY_LONG") else [])


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_two_consumers_rebalance_and_one_leaves(kafka, assignor):
    topic = create_topic(kafka, partitions=4)
    group = kafka.topic("grp")
    all_tps = {TopicPartition(topic, p) for p in range(4)}
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        for i in range(40):
            p.send(topic, b"%d" % i, partition=i % 4)
        p.flush()
    a = Member(kafka.bootstrap, group, [topic], partition_assignment_strategy=[assignor]).start()
    wait_until(lambda: a.assigned == all_tps, "the first member to own every partition")
    wait_until(lambda: len(a.records) >= 40, "the first member to read everything")
    b = Member(kafka.bootstrap, group, [topic], partition_assignment_strategy=[assignor]).start()
    try:
        wait_until(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, "partitions split 2/2")
        assert a.assigned | b.assigned == all_tps and not (a.assigned & b.assigned)
        if assignor == "cooperative-sticky":
            # incremental: the first member never gave up everything at once
            assert all(len(ps) <= 2 for kind, ps in a.events if kind == "revoke")
        with Producer(bootstrap_servers=kafka.bootstrap) as p:
            for i in range(40, 80):
                p.send(topic, b"%d" % i, partition=i % 4)
            p.flush()
        wait_until(lambda: len({r.value for r in a.records + b.records}) >= 80, "both members to read the rest")
        owners = {r.partition: "a" for r in a.records if int(r.value) >= 40}
        owners.update({r.partition: "b" for r in b.records if int(r.value) >= 40})
        assert {p for p, who in owners.items() if who == "b"} == {tp.partition for tp in b.assigned}
    finally:
        b.stop()
    wait_until(lambda: a.assigned == all_tps, "the remaining member to own every partition again")
    a.stop()
    assert {int(r.value) for r in a.records + b.records} == set(range(80))


def test_manual_commit_and_resume(kafka):
    topic = create_topic(kafka)
    group = kafka.topic("grp")
    tp = TopicPartition(topic, 0)
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        for i in range(10):
            p.send(topic, b"%d" % i)
        p.flush()
    with Consumer(bootstrap_servers=kafka.bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, **GROUP_TIMEOUTS) as c:
        c.subscribe([topic])
        got = []
        wait_until(lambda: got.extend(c.poll(200)) or len(got) >= 10, "ten records")
        c.commit({tp: 4})
        assert c.committed([tp])[tp].offset == 4
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        assert admin.list_group_offsets(group)[tp].offset == 4
    with Consumer(bootstrap_servers=kafka.bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, **GROUP_TIMEOUTS) as c:
        c.subscribe([topic])
        got = []
        wait_until(lambda: got.extend(c.poll(200)) or len(got) >= 6, "the uncommitted records")
        assert [int(r.value) for r in got] == list(range(4, 10))
        c.commit()  # current positions
        assert c.committed([tp])[tp].offset == 10


def test_auto_commit_on_close(kafka):
    topic = create_topic(kafka, partitions=2)
    group = kafka.topic("grp")
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        for i in range(10):
            p.send(topic, b"%d" % i, partition=i % 2)
        p.flush()
    with Consumer(bootstrap_servers=kafka.bootstrap, group_id=group, auto_offset_reset="earliest",
                  **GROUP_TIMEOUTS) as c:
        c.subscribe([topic])
        got = []
        wait_until(lambda: got.extend(c.poll(200)) or len(got) >= 10, "ten records")
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        offsets = admin.list_group_offsets(group)
    assert {tp: om.offset for tp, om in offsets.items()} == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5}


def test_pattern_subscription_with_exclude(kafka):
    prefix = kafka.topic("pat")
    names = {}
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        from broker.client import NewTopic

        for suffix in ("orders", "payments", "skip-me"):
            names[suffix] = f"{prefix}.{suffix}"
            admin.create_topics([NewTopic(names[suffix], 1)])
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        for name in names.values():
            p.send(name, name.encode())
        p.flush()
    m = Member(kafka.bootstrap, kafka.topic("grp"), metadata_max_age_ms=500)
    m.start(pattern=rf"{prefix}\..*", exclude=r".*skip.*")
    try:
        wait_until(lambda: len(m.records) >= 2, "records of both matching topics")
        assert {r.topic for r in m.records} == {names["orders"], names["payments"]}
        assert {tp.topic for tp in m.assigned} == {names["orders"], names["payments"]}
    finally:
        m.stop()


def test_partitions_added_to_a_subscribed_topic_are_assigned(kafka):
    kafka.skip_unless(37, "CreatePartitions")
    topic = create_topic(kafka, partitions=1)
    m = Member(kafka.bootstrap, kafka.topic("grp"), [topic], metadata_max_age_ms=500)
    m.start()
    try:
        wait_until(lambda: len(m.assigned) == 1, "the first partition")
        with Admin(bootstrap_servers=kafka.bootstrap) as admin:
            admin.create_partitions({topic: 3})
        wait_until(lambda: len(m.assigned) == 3, "the added partitions")
        with Producer(bootstrap_servers=kafka.bootstrap) as p:
            p.send(topic, b"late", partition=2)
            p.flush()
        wait_until(lambda: any(r.partition == 2 for r in m.records), "a record of an added partition")
    finally:
        m.stop()


def test_misuse_is_reported(kafka):
    with Consumer(bootstrap_servers=kafka.bootstrap) as c:
        with pytest.raises(IllegalStateError):
            c.poll(10)
        with pytest.raises(IllegalStateError):
            c.seek(TopicPartition("nope", 0), 1)
