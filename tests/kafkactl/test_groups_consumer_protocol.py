"""``kafkactl groups`` with groups of the consumer rebalance protocol (KIP-848): real confluent-kafka
consumers with ``group.protocol=consumer`` against a real broker process. ``list`` shows their type and
state (``--type`` filters), ``describe`` their members, epochs, assignments and lag; ``reset-offsets``,
``delete-offsets`` and ``delete`` are refused while members are active and work once they have closed.
A classic group beside them is still described through DescribeGroups."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from broker.client import Admin, TopicPartition
from broker.protocol import ApiKey
from tests.kafkactl.conftest import Ctl, one_line_error

WAIT_S = 60  # a guard against a hang, not a timing assertion
TOPIC = "events"
PARTITIONS = 4
RECORDS = 10  # per partition


def consumer(broker, group: str = "modern", client_id: str = "c") -> CKConsumer:
    return CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                       "client.id": client_id, "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def poll_until(consumers: list[CKConsumer], done, what: str) -> None:
    """Poll every consumer (which drives its heartbeats) until ``done()``, or fail after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        for c in consumers:
            c.poll(0.1)


def assigned(c: CKConsumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def described(ctl: Ctl, group: str = "modern") -> dict:
    [g] = ctl.json("groups", "describe", group)
    return g


@pytest.fixture
def loaded(ctl: Ctl, broker) -> str:
    """Topic "events" with 4 partitions of 10 records each."""
    assert ctl("topics", "create", TOPIC, "--partitions", str(PARTITIONS)).returncode == 0
    producer = CKProducer({"bootstrap.servers": broker.bootstrap})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(TOPIC, f"p{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    return TOPIC


@pytest.fixture
def members(broker, loaded: str):
    """Two consumers of group "modern" that own every partition between them (the group Stable, each member
    reconciled to its target) and have committed offset 3 of each partition."""
    consumers = [consumer(broker, client_id=f"c{i}") for i in range(2)]
    for c in consumers:
        c.subscribe([loaded])
    try:
        poll_until(consumers, lambda: all(assigned(c) for c in consumers)
                   and set().union(*(assigned(c) for c in consumers)) == {(loaded, p) for p in range(PARTITIONS)}
                   and not (assigned(consumers[0]) & assigned(consumers[1])), "two members owning every partition")
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            poll_until(consumers, lambda: admin.describe_groups(["modern"])["modern"].state == "Stable",
                       "the group Stable")
        for c in consumers:
            c.commit(offsets=[CKTopicPartition(t, p, 3) for t, p in sorted(assigned(c))], asynchronous=False)
        yield consumers
    finally:
        for c in consumers:
            c.close()


def close_all(broker, consumers: list[CKConsumer]) -> None:
    """Close the consumers (each leaves the group) and wait until the group is Empty."""
    for c in consumers:
        c.close()
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        deadline = time.monotonic() + WAIT_S
        while admin.describe_groups(["modern"])["modern"].members:
            assert time.monotonic() < deadline, "the members did not leave"
            time.sleep(0.1)


def classic_group(broker, topic: str) -> None:
    """Group "legacy": offsets committed from outside a group (a classic group with no protocol type)."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_group_offsets("legacy", {TopicPartition(topic, 0): 5})


def test_list_shows_type_and_state(ctl: Ctl, broker, members) -> None:
    classic_group(broker, TOPIC)
    listed = ctl.json("groups", "list")
    assert listed == [
        {"group_id": "legacy", "protocol_type": "", "state": "Empty", "type": "classic"},
        {"group_id": "modern", "protocol_type": "consumer", "state": "Stable", "type": "consumer"},
    ]
    assert ctl.json("groups", "list", "--type", "consumer") == [listed[1]]
    assert ctl.json("groups", "list", "--type", "CLASSIC") == [listed[0]]
    assert ctl.json("groups", "list", "--type", "classic,consumer") == listed
    assert ctl.json("groups", "list", "--type", "share") == []
    table = ctl("groups", "list").stdout.splitlines()
    assert table[0].split() == ["GROUP_ID", "PROTOCOL_TYPE", "STATE", "TYPE"]
    assert table[2].split() == ["modern", "consumer", "Stable", "consumer"]
    assert "unknown group type nope" in one_line_error(ctl("groups", "list", "--type", "nope"), 2)


def test_describe_members_assignment_and_lag(ctl: Ctl, broker, members) -> None:
    g = described(ctl)
    assert (g["state"], g["type"], g["protocol_type"], g["protocol"]) == ("Stable", "consumer", "consumer", "uniform")
    assert g["group_epoch"] >= 1 and g["assignment_epoch"] == g["group_epoch"]
    owned = {}
    for m in g["members"]:
        assert m["member_epoch"] == g["assignment_epoch"]
        assert m["assignment"] == m["target_assignment"] and m["assignment"]  # reconciled
        owned.update({(a["topic"], a["partition"]): m["member_id"] for a in m["assignment"]})
    by_client = {m["client_id"]: m for m in g["members"]}
    assert set(by_client) == {"c0", "c1"}
    for i, c in enumerate(members):  # what each consumer owns is what describe says it has
        assert {(a["topic"], a["partition"]) for a in by_client[f"c{i}"]["assignment"]} == assigned(c)
    assert owned.keys() == {(TOPIC, p) for p in range(PARTITIONS)}
    assert [(o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"], o["member_id"])
            for o in g["offsets"]] == [(TOPIC, p, 3, RECORDS, RECORDS - 3, owned[(TOPIC, p)])
                                       for p in range(PARTITIONS)]
    assert g["total_lag"] == PARTITIONS * (RECORDS - 3)

    table = ctl("groups", "describe", "modern", "--members").stdout.splitlines()
    assert table[0].startswith(f"group modern: state Stable, type consumer, assignor uniform, group epoch "
                               f"{g['group_epoch']}, assignment epoch {g['assignment_epoch']}, coordinator 0, "
                               f"2 member(s), total lag {g['total_lag']}")
    assert table[1].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT_OFFSET", "LOG_END_OFFSET", "LAG"]
    assert table[2].split()[:7] == ["modern", TOPIC, "0", "3", str(RECORDS), str(RECORDS - 3), owned[(TOPIC, 0)]]
    header = table.index("") + 1  # the offsets table, a blank line, then the members
    assert table[header].split() == ["MEMBER_ID", "CLIENT_ID", "HOST", "MEMBER_EPOCH", "ASSIGNMENT",
                                     "TARGET_ASSIGNMENT"]
    rows = {line.split()[1]: line.split() for line in table[header + 1:]}
    for client, m in by_client.items():
        parts = ",".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"])
        assert rows[client] == [m["member_id"], client, m["host"], str(m["member_epoch"]), parts, parts]


def test_classic_group_still_described(ctl: Ctl, broker, loaded: str) -> None:
    classic_group(broker, loaded)
    g = described(ctl, "legacy")
    assert (g["state"], g["type"], g["group_epoch"], g["members"]) == ("Empty", "classic", None, [])
    assert [(o["partition"], o["current_offset"], o["lag"]) for o in g["offsets"]] == [(0, 5, RECORDS - 5)]
    assert ctl("groups", "describe", "legacy").stdout.startswith("group legacy: state Empty, protocol -,")
    assert "GROUP_ID_NOT_FOUND" in one_line_error(ctl("groups", "describe", "ghost"), 2)


def test_reset_and_delete_refused_while_active_then_work(ctl: Ctl, broker, members) -> None:
    for extra in ([], ["--execute"]):
        line = one_line_error(ctl("groups", "reset-offsets", "modern", "--all-topics", "--to-earliest", *extra), 1)
        assert "group modern is active (state Stable, 2 member(s))" in line
    assert "GROUP_SUBSCRIBED_TO_TOPIC" in one_line_error(
        ctl("groups", "delete-offsets", "modern", "--topic", f"{TOPIC}:0"), 1)
    assert "NON_EMPTY_GROUP (68)" in one_line_error(ctl("groups", "delete", "modern"), 1)
    assert {o["partition"]: o["current_offset"] for o in described(ctl)["offsets"]} == {
        p: 3 for p in range(PARTITIONS)}

    close_all(broker, members)
    g = described(ctl)
    assert (g["state"], g["type"], g["members"]) == ("Empty", "consumer", [])
    assert ctl.json("groups", "list") == [
        {"group_id": "modern", "protocol_type": "consumer", "state": "Empty", "type": "consumer"}]
    plan = ctl.json("groups", "reset-offsets", "modern", "--all-topics", "--to-offset", "7", "--execute")
    assert plan["executed"] and [p["new_offset"] for p in plan["offsets"]] == [7] * PARTITIONS
    assert {o["partition"]: o["current_offset"] for o in described(ctl)["offsets"]} == {
        p: 7 for p in range(PARTITIONS)}
    assert ctl.json("groups", "delete-offsets", "modern", "--topic", f"{TOPIC}:0,1") == {
        "group": "modern", "deleted": [{"topic": TOPIC, "partition": 0}, {"topic": TOPIC, "partition": 1}]}
    assert {o["partition"]: o["current_offset"] for o in described(ctl)["offsets"]} == {2: 7, 3: 7}

    # a consumer of the group starts where the reset put it
    again = consumer(broker, client_id="again")
    again.subscribe([TOPIC])
    try:
        seen: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 2 * (RECORDS - 7) + 2 * RECORDS:
            assert time.monotonic() < deadline, seen
            msg = again.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value().decode())
        assert sorted(v for v in seen if v.startswith(("p2-", "p3-"))) == [
            f"p{p}-{i}" for p in (2, 3) for i in range(7, RECORDS)]
    finally:
        again.close()
    close_all(broker, [])

    assert ctl.json("groups", "delete", "modern") == {"deleted": ["modern"]}
    assert ctl.json("groups", "list") == []
    assert "GROUP_ID_NOT_FOUND" in one_line_error(ctl("groups", "describe", "modern"), 2)
    assert "GROUP_ID_NOT_FOUND" in one_line_error(ctl("groups", "delete-offsets", "modern", "--topic", TOPIC), 2)


def test_broker_without_the_consumer_protocol(broker_factory) -> None:
    """A broker that serves no ConsumerGroupDescribe: with ``group.coordinator.rebalance.protocols: classic``
    it answers UNSUPPORTED_VERSION (as Kafka 4.x does), and a broker older than KIP-848 does not advertise it
    at all (here: the client told so). Either way describe falls back to DescribeGroups, and a classic
    member shows as before."""
    broker = broker_factory({"group.coordinator.rebalance.protocols": "classic"})
    ctl = Ctl(broker.bootstrap)
    assert ctl("topics", "create", TOPIC, "--partitions", "2").returncode == 0
    c = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "old", "client.id": "c0",
                    "session.timeout.ms": 6000, "enable.auto.commit": False})
    c.subscribe([TOPIC])
    try:
        poll_until([c], lambda: len(assigned(c)) == 2, "the classic member owning both partitions")
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            poll_until([c], lambda: admin.describe_groups(["old"])["old"].state == "Stable", "the group Stable")
            conn = admin._thread.run(admin._core._cluster.connection(0))
            assert ApiKey.CONSUMER_GROUP_DESCRIBE in conn.versions  # asked, answered UNSUPPORTED_VERSION
            del conn.versions[ApiKey.CONSUMER_GROUP_DESCRIBE]  # as if not advertised: not even asked
            old = admin.describe_groups(["old"])["old"]
            assert (old.state, old.group_type, [m.client_id for m in old.members]) == ("Stable", "classic", ["c0"])
        g = described(ctl, "old")
        assert (g["state"], g["type"], g["protocol_type"], g["group_epoch"]) == ("Stable", "classic", "consumer", None)
        [m] = g["members"]
        assert (m["client_id"], m["member_epoch"], m["target_assignment"]) == ("c0", None, None)
        assert m["assignment"] == [{"topic": TOPIC, "partition": 0}, {"topic": TOPIC, "partition": 1}]
        assert ctl.json("groups", "list") == [
            {"group_id": "old", "protocol_type": "consumer", "state": "Stable", "type": "classic"}]
        table = ctl("groups", "describe", "old", "--members").stdout.splitlines()
        assert table[0].startswith("group old: state Stable, protocol range, coordinator 0, 1 member(s)")
        assert table[table.index("") + 1].split() == ["MEMBER_ID", "CLIENT_ID", "HOST", "ASSIGNMENT"]
    finally:
        c.close()
