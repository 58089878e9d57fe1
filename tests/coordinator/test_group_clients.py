"""Consumer groups of unmodified clients against a broker process: partitions shared
exclusively at every generation, members that leave or are killed (SIGKILL, no
LeaveGroup) lose their partitions to the others after their session timeout."""

from __future__ import annotations

import signal

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.coordinator.helpers import describe, group_history, start_member, wait_stable

OFFSETS_PARTITIONS = 5
TOPIC, PARTITIONS = "shared", 6


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result()


@pytest.fixture
def group_broker(broker_factory):
    broker = broker_factory(offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    return broker


@pytest.mark.parametrize("lib,assignor", [
    ("confluent", ""), ("confluent", "cooperative-sticky"), ("kafka-python", ""), ("aiokafka", ""),
])
def test_three_members_share_then_leave_and_crash(group_broker, lib, assignor, tmp_path):
    group = f"g-{lib}-{assignor or 'eager'}"
    procs = [start_member(lib, group_broker.bootstrap, group, TOPIC, assignor, tmp_path / f"member{i}.log")
             for i in range(3)]
    try:
        owned = wait_stable(group_broker.bootstrap, group, 3, PARTITIONS)
        assert all(owned.values()), f"a member got nothing: {owned}"
        procs[0].send_signal(signal.SIGTERM)  # graceful: LeaveGroup
        assert procs[0].wait(30) == 0
        wait_stable(group_broker.bootstrap, group, 2, PARTITIONS)
        procs[1].send_signal(signal.SIGKILL)  # crash: only the session timeout notices
        procs[1].wait(30)
        survivor = wait_stable(group_broker.bootstrap, group, 1, PARTITIONS)
        assert list(survivor.values()) == [list(range(PARTITIONS))]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(30)
    history = group_history(group_broker.data_dir, group, OFFSETS_PARTITIONS)
    generations = [gen for gen, _ in history]
    assert generations == sorted(generations) and len(history) >= 3
    for gen, members in history:
        every = [p for ps in members.values() for p in ps]
        assert len(every) == len(set(every)), f"generation {gen}: a partition has two owners: {members}"
        if assignor != "cooperative-sticky" and members:
            # eager protocols hand out every partition in every generation (or nothing, when the
            # leader did not know the topic's partitions yet: kafka-python's first generation may)
            assert sorted(every) in ([], list(range(PARTITIONS))), f"generation {gen}: {members}"
    assert describe(group_broker.bootstrap, group)[0] == "Empty"
