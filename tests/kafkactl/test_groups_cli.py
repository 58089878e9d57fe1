"""``kafkactl groups`` end to end: list, describe (lag), delete, and reset-offsets
with every strategy, checked by a later ``groups describe`` and by consuming;
a group kept active by a running confluent-kafka consumer is refused."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer

from broker.client import Admin, TopicPartition
from tests.kafkactl.conftest import Ctl, one_line_error

BASE_TS = 1_600_000_000_000  # record i of each partition has timestamp BASE_TS + i * 1000


START = {0: 4, 1: 6}


def set_offsets(broker, offsets: dict[int, int], group: str = "app") -> None:
    """Commit offsets in-process with our client (fast setup; the CLI path is what is under test)."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_group_offsets(group, {TopicPartition("clicks", p): o for p, o in offsets.items()})


@pytest.fixture
def loaded(ctl: Ctl, broker) -> str:
    """Topic "clicks" with 2 partitions of 10 records each, and group "app" committed at 4 and 6."""
    assert ctl("topics", "create", "clicks", "--partitions", "2").returncode == 0
    producer = CKProducer({"bootstrap.servers": broker.bootstrap})
    for p in (0, 1):
        for i in range(10):
            producer.produce("clicks", f"p{p}-{i}".encode(), partition=p, timestamp=BASE_TS + i * 1000)
    assert producer.flush(30) == 0
    set_offsets(broker, START)
    return "clicks"


def committed(ctl: Ctl, group: str = "app") -> dict[int, int | None]:
    [g] = ctl.json("groups", "describe", group)
    return {o["partition"]: o["current_offset"] for o in g["offsets"]}


def test_list_and_describe(ctl: Ctl, loaded: str) -> None:
    # offsets committed without a member: a "simple" group with no protocol type, as in Kafka
    assert ctl.json("groups", "list") == [{"group_id": "app", "protocol_type": "", "state": "Empty", "type": "classic"}]
    [g] = ctl.json("groups", "describe", "app")
    assert g["state"] == "Empty" and g["members"] == [] and g["total_lag"] == 10
    assert [(o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"]) for o in g["offsets"]] \
        == [("clicks", 0, 4, 10, 6), ("clicks", 1, 6, 10, 4)]
    table = ctl("groups", "describe", "app").stdout.splitlines()
    assert table[0].startswith("group app: state Empty")
    assert table[1].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT_OFFSET", "LOG_END_OFFSET", "LAG"]
    assert table[2].split()[:6] == ["app", "clicks", "0", "4", "10", "6"]
    assert "GROUP_ID_NOT_FOUND" in one_line_error(ctl("groups", "describe", "ghost"), 2)


def test_reset_plans_without_execute(ctl: Ctl, loaded: str) -> None:
    res = ctl("groups", "reset-offsets", "app", "--all-topics", "--to-earliest")
    assert res.returncode == 0, res.stderr
    assert "dry run" in res.stderr
    assert [line.split() for line in res.stdout.splitlines()[1:]] == [["app", "clicks", "0", "4", "0"],
                                                                      ["app", "clicks", "1", "6", "0"]]
    assert committed(ctl) == {0: 4, 1: 6}


STRATEGIES = [
    (["--to-earliest"], {0: 0, 1: 0}),
    (["--to-latest"], {0: 10, 1: 10}),
    (["--to-offset", "7"], {0: 7, 1: 7}),
    (["--to-offset", "99"], {0: 10, 1: 10}),  # clamped to the log end offset
    (["--shift-by", "-5"], {0: 0, 1: 1}),  # clamped to the log start offset
    (["--shift-by", "2"], {0: 6, 1: 8}),
    (["--to-datetime", datetime.fromtimestamp((BASE_TS + 3000) / 1000, timezone.utc).isoformat()], {0: 3, 1: 3}),
    (["--to-datetime", str(BASE_TS + 8500)], {0: 9, 1: 9}),
    (["--by-duration", "PT1H"], {0: 10, 1: 10}),  # every record is older than an hour: the end
]


def test_reset_strategies_execute(ctl: Ctl, loaded: str, broker) -> None:
    for args, expected in STRATEGIES:
        set_offsets(broker, START)
        plan = ctl.json("groups", "reset-offsets", "app", "--all-topics", *args, "--execute")
        assert plan["executed"] is True, args
        assert {p["partition"]: p["current_offset"] for p in plan["offsets"]} == START, args
        assert {p["partition"]: p["new_offset"] for p in plan["offsets"]} == expected, args
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            now = {tp.partition: om.offset for tp, om in admin.list_group_offsets("app").items()}
        assert now == expected, args
    assert committed(ctl) == STRATEGIES[-1][1]  # and `groups describe` shows the last one


def test_reset_then_consume_resumes_there(ctl: Ctl, loaded: str) -> None:
    ctl("groups", "reset-offsets", "app", "--topic", "clicks", "--to-offset", "8", "--execute")
    ctl("groups", "reset-offsets", "app", "--topic", "clicks:1", "--shift-by", "1", "--execute")
    records = ctl.lines("consume", "clicks", "--group", "app", "--max-messages", "3")
    assert sorted(r["value"] for r in records) == ["p0-8", "p0-9", "p1-9"]
    assert committed(ctl) == {0: 10, 1: 10}


def test_reset_refused_while_group_is_active(ctl: Ctl, loaded: str, broker) -> None:
    consumer = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "app", "session.timeout.ms": 6000,
                           "enable.auto.commit": False})
    consumer.subscribe(["clicks"])
    try:
        for _ in range(100):  # join the group; a guard, not a timing assertion
            consumer.poll(0.2)
            if consumer.assignment():
                break
        assert consumer.assignment()
        [g] = ctl.json("groups", "describe", "app")
        assert g["state"] == "Stable" and len(g["members"]) == 1
        assert {(a["topic"], a["partition"]) for a in g["members"][0]["assignment"]} == {("clicks", 0), ("clicks", 1)}
        assert {o["member_id"] for o in g["offsets"]} == {g["members"][0]["member_id"]}
        for extra in ([], ["--execute"]):
            line = one_line_error(ctl("groups", "reset-offsets", "app", "--all-topics", "--to-earliest", *extra), 1)
            assert "group app is active (state Stable, 1 member(s))" in line
        assert "NON_EMPTY_GROUP (68)" in one_line_error(ctl("groups", "delete", "app"), 1)  # refused
    finally:
        consumer.close()
    assert committed(ctl) == {0: 4, 1: 6}
    assert ctl.json("groups", "reset-offsets", "app", "--all-topics", "--to-earliest", "--execute")["executed"]
    assert committed(ctl) == {0: 0, 1: 0}


def test_delete_group(ctl: Ctl, loaded: str) -> None:
    assert ctl.json("groups", "delete", "app") == {"deleted": ["app"]}
    assert ctl.json("groups", "list") == []
    assert "GROUP_ID_NOT_FOUND (69)" in one_line_error(ctl("groups", "delete", "app"), 2)


def test_reset_errors(ctl: Ctl, loaded: str) -> None:
    cases = [
        (["--all-topics"], "give exactly one of"),
        (["--all-topics", "--to-earliest", "--to-latest"], "give exactly one of"),
        (["--to-earliest"], "give --topic"),
        (["--all-topics", "--topic", "clicks", "--to-earliest"], "give --topic"),
        (["--all-topics", "--to-datetime", "last tuesday"], "bad datetime 'last tuesday'"),
        (["--all-topics", "--by-duration", "10 minutes"], "bad duration '10 minutes'"),
        (["--topic", "clicks:x", "--to-earliest"], "bad topic spec 'clicks:x'"),
    ]
    for args, message in cases:
        assert message in one_line_error(ctl("groups", "reset-offsets", "app", *args), 2)
    assert "unknown topic: nope" in one_line_error(
        ctl("groups", "reset-offsets", "app", "--topic", "nope", "--to-earliest"), 2)
    assert "has no partition 5" in one_line_error(
        ctl("groups", "reset-offsets", "app", "--topic", "clicks:5", "--to-earliest"), 2)
    assert "no committed offsets" in one_line_error(
        ctl("groups", "reset-offsets", "fresh", "--all-topics", "--to-earliest"), 2)
    assert "no committed offset to shift" in one_line_error(
        ctl("groups", "reset-offsets", "fresh", "--topic", "clicks", "--shift-by", "1"), 1)
    # a new group may be given offsets by topic (as Kafka's tool allows)
    assert ctl.json("groups", "reset-offsets", "fresh", "--topic", "clicks:1", "--to-latest", "--execute")["executed"]
    assert committed(ctl, "fresh") == {1: 10}
