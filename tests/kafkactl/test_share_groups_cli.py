"""``kafkactl share-groups``: share groups (KIP-932) as kafka-share-groups.sh shows and changes them (list,
describe, reset-offsets, delete-offsets, delete), against a broker process with librdkafka's ShareConsumer in the
group."""

from __future__ import annotations

import time

import confluent_kafka as ck

from tests.kafkactl.conftest import Ctl, one_line_error

LIMIT_S = 30  # guards against a hang, not a timing assertion


def test_list_and_describe_a_share_group(ctl: Ctl, broker) -> None:
    assert "no share groups" in ctl("share-groups", "list").stdout
    assert ctl("topics", "create", "jobs", "--partitions", "2").returncode == 0
    assert ctl("configs", "set", "group", "workers", "share.auto.offset.reset=earliest").returncode == 0
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("jobs", b"job-%d" % i, partition=i % 2)
    assert producer.flush(LIMIT_S) == 0
    consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "workers",
                                 "client.id": "worker-1", "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["jobs"])
    try:
        got = []
        deadline = time.monotonic() + LIMIT_S
        while len(got) < 10 and time.monotonic() < deadline:
            for msg in consumer.poll(timeout=0.2):
                if msg.error() is None:
                    got.append(msg)
                    # the first three of partition 0 accepted, the rest released at close
                    consumer.acknowledge(msg, ck.AcknowledgeType.ACCEPT if msg.partition() == 0 and msg.offset() < 3
                                         else ck.AcknowledgeType.RELEASE)
        consumer.commit_sync()
        assert ctl.json("share-groups", "list") == [{"group_id": "workers", "state": "Stable"}]
        [desc] = ctl.json("share-groups", "describe", "workers")
        assert (desc["group_id"], desc["state"], desc["coordinator"]) == ("workers", "Stable", 0)
        [member] = desc["members"]
        assert member["client_id"] == "worker-1" and member["partitions"] == "jobs-0,jobs-1"
        assert desc["partitions"] == [{"topic": "jobs", "partition": 0, "start_offset": 3, "lag": 2},
                                      {"topic": "jobs", "partition": 1, "start_offset": 0, "lag": 5}]
        table = ctl("share-groups", "describe", "workers").stdout
        assert table.startswith("group workers: Stable, epoch") and "worker-1" in table
    finally:
        consumer.close()
    assert "share group nope does not exist (GROUP_ID_NOT_FOUND, 69)" in one_line_error(
        ctl("share-groups", "describe", "nope"), 2)  # bad input, as for groups describe


def _consume(broker, group: str, topic: str, count: int) -> list[tuple[int, int]]:
    """(partition, offset) of ``count`` records, each accepted, the consumer closed."""
    consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                 "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    got = []
    try:
        deadline = time.monotonic() + LIMIT_S
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.poll(timeout=0.2):
                if msg.error() is None:
                    got.append((msg.partition(), msg.offset()))
                    consumer.acknowledge(msg, ck.AcknowledgeType.ACCEPT)
        consumer.commit_sync()
    finally:
        consumer.close()
    return sorted(got)


def test_reset_and_delete_offsets_and_delete_a_share_group(ctl: Ctl, broker) -> None:
    assert ctl("topics", "create", "tasks", "--partitions", "2").returncode == 0
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("tasks", b"task-%d" % i, partition=i % 2)
    assert producer.flush(LIMIT_S) == 0
    # a group that does not exist yet: planned from nothing, made by --execute at the log start
    plan = ctl.json("share-groups", "reset-offsets", "crew", "--topic", "tasks", "--to-earliest")
    assert plan == {"group": "crew", "executed": False, "offsets": [
        {"group": "crew", "topic": "tasks", "partition": p, "current_offset": None, "new_offset": 0} for p in (0, 1)]}
    assert "no share groups" in ctl("share-groups", "list").stdout  # a dry run changed nothing
    done = ctl("share-groups", "reset-offsets", "crew", "--topic", "tasks", "--to-earliest", "--execute")
    assert done.returncode == 0 and "dry run" not in done.stderr
    assert ctl.json("share-groups", "list") == [{"group_id": "crew", "state": "Empty"}]
    assert _consume(broker, "crew", "tasks", 10) == [(p, o) for p in (0, 1) for o in range(5)]
    # back two records on partition 1 only; --all-topics plans from what the group consumed
    assert ctl.json("share-groups", "reset-offsets", "crew", "--all-topics", "--shift-by", "-2")["offsets"] == [
        {"group": "crew", "topic": "tasks", "partition": p, "current_offset": 5, "new_offset": 3} for p in (0, 1)]
    assert ctl("share-groups", "reset-offsets", "crew", "--topic", "tasks:1", "--to-offset", "3",
               "--execute").returncode == 0
    [desc] = ctl.json("share-groups", "describe", "crew")
    assert desc["partitions"] == [{"topic": "tasks", "partition": 0, "start_offset": 5, "lag": 0},
                                  {"topic": "tasks", "partition": 1, "start_offset": 3, "lag": 2}]
    assert _consume(broker, "crew", "tasks", 2) == [(1, 3), (1, 4)]
    # refused while a member is in the group
    member = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "crew"})
    member.subscribe(["tasks"])
    try:
        deadline = time.monotonic() + LIMIT_S
        while ctl.json("share-groups", "list") != [{"group_id": "crew", "state": "Stable"}]:
            member.poll(timeout=0.2)
            assert time.monotonic() < deadline, "the member never joined"
        for args in (("reset-offsets", "crew", "--topic", "tasks", "--to-earliest", "--execute"),
                     ("delete-offsets", "crew", "--topic", "tasks")):
            assert "share group crew is not empty" in one_line_error(ctl("share-groups", *args), 1)
        assert one_line_error(ctl("share-groups", "delete", "crew"), 1)
    finally:
        member.close()
    # delete-offsets: the topic starts over (the group's share.auto.offset.reset: latest, the default)
    deadline = time.monotonic() + LIMIT_S  # the member's leave heartbeat may still be under way
    while (deleted := ctl("share-groups", "delete-offsets", "crew", "--topic", "tasks")).returncode == 1:
        assert time.monotonic() < deadline, deleted.stderr
        time.sleep(0.2)
    assert deleted.returncode == 0 and "deleted" in deleted.stdout
    [desc] = ctl.json("share-groups", "describe", "crew")
    assert desc["partitions"] == []
    assert "share group crew has no offsets of topic tasks (UNKNOWN_TOPIC_OR_PARTITION, 3)" in one_line_error(
        ctl("share-groups", "delete-offsets", "crew", "--topic", "tasks"), 2)
    assert ctl("share-groups", "delete", "crew").stdout.strip() == "deleted share group crew"
    assert "share group crew does not exist" in one_line_error(ctl("share-groups", "delete", "crew"), 2)
    # never a group of another type
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "classic", "enable.auto.commit": False})
    consumer.commit(offsets=[ck.TopicPartition("tasks", 0, 1)], asynchronous=False)
    consumer.close()
    assert "share group classic does not exist" in one_line_error(ctl("share-groups", "delete", "classic"), 2)
    assert [g["group_id"] for g in ctl.json("groups", "list")] == ["classic"]
