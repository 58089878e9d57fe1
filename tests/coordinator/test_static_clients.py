"""Consumer groups of unmodified clients as Kafka 2.7's coordinator runs them: static
members (``group.instance.id``) restarted within their session timeout, a join phase
that only absent static members are left in, and the default initial rebalance delay."""

from __future__ import annotations

import signal
import time

import pytest

from tests.coordinator.helpers import MemberOutput, describe, group_records, start_member, wait_stable
from tests.coordinator.test_group_clients import create_topic

OFFSETS_PARTITIONS = 5
TOPIC, PARTITIONS = "shared", 6
#: long enough for a killed member's replacement to start (a Python process) well within it
STATIC_SESSION_MS = 30000
#: a rebalance reaches other members at their next heartbeat (1 s apart); this is several of them
QUIET_S = 4.0


@pytest.fixture
def group_broker(broker_factory):
    broker = broker_factory(offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    return broker


def stop_all(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(30)


def settle(outputs: dict[str, MemberOutput]) -> dict[str, list[int]]:
    """Wait until every member owns partitions and none prints anything for QUIET_S; their assignments."""
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, {i: o.assignments for i, o in outputs.items()}
        if all(o.assignments and o.assignments[-1] for o in outputs.values()):
            if not any(o.read(QUIET_S / len(outputs)) for o in outputs.values()):
                return {i: o.assignments[-1] for i, o in outputs.items()}
        else:
            for o in outputs.values():
                o.read(0.2)


@pytest.mark.parametrize("lib,role", [
    ("confluent", "leader"), ("confluent", "follower"), ("kafka-python", "leader"), ("aiokafka", "leader"),
])
def test_static_member_restarted_within_its_session_keeps_its_place(group_broker, lib, role, tmp_path):
    group, bootstrap = f"static-{lib}-{role}", group_broker.bootstrap

    def member(instance: str, n: int):
        return start_member(lib, bootstrap, group, TOPIC, log_path=tmp_path / f"{instance}-{n}.log",
                            instance_id=instance, session_ms=STATIC_SESSION_MS)

    procs = {i: member(i, 0) for i in ("s0", "s1", "s2")}
    try:
        wait_stable(bootstrap, group, 3, PARTITIONS)
        outputs = {i: MemberOutput(p) for i, p in procs.items()}
        before = settle(outputs)
        records = group_records(group_broker.data_dir, group, OFFSETS_PARTITIONS)
        generation, leader = records[-1].generation, records[-1].leader
        by_instance = {m.group_instance_id: m.member_id for m in records[-1].members}
        victim = next(i for i, mid in by_instance.items() if (mid == leader) == (role == "leader"))

        procs[victim].send_signal(signal.SIGKILL)  # a crash: static members never send LeaveGroup anyway
        procs[victim].wait(30)
        others = {i: o for i, o in outputs.items() if i != victim}
        procs[victim] = member(victim, 1)
        returned = MemberOutput(procs[victim]).wait_assigned()
        assert returned == before[victim]
        # nobody else noticed: no revocation, no new assignment, the same generation
        for i, o in others.items():
            assert o.read(QUIET_S / len(others)) == [], f"{i} saw a rebalance: {o.assignments}"
        state, owned = describe(bootstrap, group)
        assert state == "Stable" and sorted(owned.values()) == sorted(before.values())
        after = group_records(group_broker.data_dir, group, OFFSETS_PARTITIONS)[len(records):]
        assert after and {g.generation for g in after} == {generation}
        current = {m.group_instance_id: m.member_id for m in after[-1].members}
        assert current[victim] != by_instance[victim]
        assert {i: current[i] for i in others} == {i: by_instance[i] for i in others}
    finally:
        stop_all(procs.values())


def test_three_consumers_started_together_form_one_generation(broker_factory, tmp_path):
    """With Kafka's default group.initial.rebalance.delay.ms (3 s), not the test brokers' 0."""
    broker = broker_factory({"group.initial.rebalance.delay.ms": None},
                            offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    procs = [start_member("confluent", broker.bootstrap, "together", TOPIC, log_path=tmp_path / f"m{i}.log")
             for i in range(3)]
    try:
        wait_stable(broker.bootstrap, "together", 3, PARTITIONS)
        outputs = {str(i): MemberOutput(p) for i, p in enumerate(procs)}
        settle(outputs)
        # each member was assigned once and never revoked: the first generation had all three
        assert all(len(o.assignments) == 1 for o in outputs.values()), {i: o.assignments for i, o in outputs.items()}
        records = group_records(broker.data_dir, "together", OFFSETS_PARTITIONS)
        assert [(g.generation, len(g.members)) for g in records] == [(1, 3)]
    finally:
        stop_all(procs)


def test_join_phase_left_to_an_absent_static_member_waits_for_its_session(group_broker, tmp_path):
    """Kafka starts no generation whose leader is not there: it waits rebalance timeout after
    rebalance timeout until the static member's session expires, then the group is Empty."""
    session_s, rebalance_s, heartbeat_s = 12.0, 2.0, 1.0
    bootstrap, group = group_broker.bootstrap, "absent-leader"
    static = start_member("kafka-python", bootstrap, group, TOPIC, log_path=tmp_path / "static.log",
                          instance_id="s", session_ms=int(session_s * 1000), max_poll_ms=int(rebalance_s * 1000))
    dynamic = start_member("kafka-python", bootstrap, group, TOPIC, log_path=tmp_path / "dynamic.log",
                           session_ms=6000, max_poll_ms=int(rebalance_s * 1000))
    try:
        wait_stable(bootstrap, group, 2, PARTITIONS)
        settle({"s": MemberOutput(static), "d": MemberOutput(dynamic)})
        static.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        static.wait(30)
        dynamic.send_signal(signal.SIGTERM)  # LeaveGroup: a join phase only the absent member is left in
        seen: list[tuple[float, str]] = []
        while time.monotonic() - killed < session_s + 20:
            seen.append((time.monotonic() - killed, describe(bootstrap, group)[0]))
            if seen[-1][1] == "Empty":
                break
            time.sleep(0.2)
        assert dynamic.wait(30) == 0
    finally:
        stop_all([static, dynamic])
    preparing = [t for t, s in seen if s == "PreparingRebalance"]
    assert preparing, seen
    # the member's last heartbeat was at most one interval before the kill: its session ends after this
    session_end = session_s - heartbeat_s - 0.5
    assert preparing[0] + 2 * rebalance_s < session_end, f"the rebalance started late: {seen}"
    assert all(s == "PreparingRebalance" for t, s in seen if preparing[0] <= t < session_end), seen
    assert seen[-1][1] == "Empty" and seen[-1][0] >= session_end, seen


def test_frozen_static_member_is_fenced_by_its_replacement(group_broker, tmp_path):
    """A static member's process stops (SIGSTOP: a long pause, not a crash) and a replacement starts
    with its group.instance.id: the replacement takes its place, and when the old process wakes
    up its next request is answered FENCED_INSTANCE_ID, which librdkafka reports as a fatal error."""
    group, bootstrap = "fenced", group_broker.bootstrap

    def member(instance: str, n: int):
        return start_member("confluent", bootstrap, group, TOPIC, log_path=tmp_path / f"{instance}-{n}.log",
                            instance_id=instance, session_ms=STATIC_SESSION_MS)

    procs = [member("s0", 0), member("s1", 0)]
    try:
        wait_stable(bootstrap, group, 2, PARTITIONS)
        old, other = MemberOutput(procs[0]), MemberOutput(procs[1])
        before = settle({"s0": old, "s1": other})
        procs[0].send_signal(signal.SIGSTOP)
        procs.append(member("s0", 1))
        assert MemberOutput(procs[2]).wait_assigned() == before["s0"]
        procs[0].send_signal(signal.SIGCONT)
        old_log = tmp_path / "s0-0.log"
        deadline = time.monotonic() + 60
        while "Static consumer fenced" not in old_log.read_text(errors="replace"):
            assert time.monotonic() < deadline, old_log.read_text(errors="replace")[-2000:]
            time.sleep(0.2)
        assert "FATAL" in old_log.read_text(errors="replace")
        assert other.read(QUIET_S) == [], f"the other member saw a rebalance: {other.assignments}"
        state, owned = describe(bootstrap, group)
        assert state == "Stable" and sorted(owned.values()) == sorted(before.values())
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
        stop_all(procs)
