"""``kafkactl offsets`` end to end against a real ZooKeeper (Debian's package) and a real broker.

Legacy znodes are written here as old consumers wrote them (bare decimal text, some with a trailing
newline), next to the damage such data really has: a non-number, a partition or topic that does
not exist, an offset past the log end or before the log start. Every command's error paths end as
one line and a non-zero exit code.
"""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from broker.client import Admin, Producer, TopicPartition
from tests.kafkactl.conftest import Ctl, one_line_error

ORDERS = {0: 10, 1: 10, 2: 10}  # records per partition
EVENTS = 4


@pytest.fixture
def topics(broker) -> None:
    """"orders" (3 partitions of 10 records, the first 2 of partition 2 deleted) and "events" (1 of 4)."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([_topic("orders", 3), _topic("events", 1)])
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            for p, n in ORDERS.items():
                for i in range(n):
                    producer.send("orders", f"o{p}-{i}".encode(), partition=p)
            for i in range(EVENTS):
                producer.send("events", f"e{i}".encode(), partition=0)
            producer.flush()
        admin.delete_records({TopicPartition("orders", 2): 2})


def _topic(name, partitions):
    from broker.client import NewTopic
    return NewTopic(name, partitions, 1)


def legacy(zk: KazooClient, group: str, offsets: dict[tuple[str, str], bytes]) -> None:
    for (topic, partition), data in offsets.items():
        zk.create(f"/consumers/{group}/offsets/{topic}/{partition}", data, makepath=True)


def committed(broker, group: str) -> dict[tuple[str, int], int]:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        return {(tp.topic, tp.partition): om.offset for tp, om in admin.list_group_offsets(group).items()}


def actions(report: list, group: str) -> dict[tuple[str, str], str]:
    (g,) = [g for g in report if g["group"] == group]
    return {(r["topic"], str(r["partition"])): r["action"] for r in g["offsets"]}


MESSY = {
    ("orders", "0"): b"5",
    ("orders", "1"): b"7\n",         # a trailing newline, as shell scripts wrote them
    ("orders", "2"): b"1",           # before the log start (2)
    ("orders", "7"): b"3",           # no such partition
    ("events", "0"): b"99",          # past the log end (4)
    ("gone", "0"): b"1",             # no such topic
    ("oops", "0"): b"abc",           # not a number
}


def test_migrate_from_zookeeper_dry_run_then_execute(ctl: Ctl, broker, zk, zk_connect, topics):
    legacy(zk, "legacy", MESSY)
    zk.create("/consumers/legacy/offsets/events/x", b"1")  # a partition name that is no number
    before = {(t, p): zk.get(f"/consumers/legacy/offsets/{t}/{p}")[0] for t, p in MESSY}

    dry = ctl("-o", "json", "offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect)
    assert dry.returncode == 1, dry.stderr  # something would be skipped
    report = json.loads(dry.stdout)
    assert report[0]["executed"] is False
    assert actions(report, "legacy") == {
        ("events", "0"): "skip: past the log end offset", ("events", "x"): "skip: no such partition",
        ("gone", "0"): "skip: no such topic", ("oops", "0"): "skip: no such topic",
        ("orders", "0"): "write", ("orders", "1"): "write", ("orders", "2"): "skip: before the log start offset",
        ("orders", "7"): "skip: no such partition",
    }
    row = [r for r in report[0]["offsets"] if r["topic"] == "orders" and r["partition"] == "1"][0]
    assert (row["zookeeper_offset"], row["broker_offset"], row["log_start_offset"], row["log_end_offset"]) == \
        (7, None, 0, 10)
    assert committed(broker, "legacy") == {}  # the dry run changed nothing, anywhere
    assert {(t, p): zk.get(f"/consumers/legacy/offsets/{t}/{p}")[0] for t, p in MESSY} == before

    done = ctl("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--execute")
    assert done.returncode == 1
    assert "written" in done.stdout and "skip: past the log end offset" in done.stdout
    assert committed(broker, "legacy") == {("orders", 0): 5, ("orders", 1): 7}

    again = ctl("-o", "json", "offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--topic", "orders",
                "--group", "leg.*", "--execute")  # idempotent: a second run writes nothing
    assert again.returncode == 1
    assert actions(json.loads(again.stdout), "legacy") == {
        ("orders", "0"): "up to date", ("orders", "1"): "up to date",
        ("orders", "2"): "skip: before the log start offset", ("orders", "7"): "skip: no such partition"}


def test_a_non_number_is_skipped(ctl: Ctl, broker, zk, zk_connect, topics):
    legacy(zk, "g", {("orders", "0"): b"12x", ("orders", "1"): b"", ("orders", "2"): b" 4 \n"})
    res = ctl("-o", "json", "offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--execute")
    assert res.returncode == 1
    assert actions(json.loads(res.stdout), "g") == {
        ("orders", "0"): "skip: not a number", ("orders", "1"): "skip: not a number", ("orders", "2"): "written"}
    assert committed(broker, "g") == {("orders", 2): 4}


def test_newer_broker_offset_is_kept_unless_overwrite_newer(ctl: Ctl, broker, zk, zk_connect, topics):
    legacy(zk, "g", {("orders", "0"): b"5", ("orders", "1"): b"6"})
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_group_offsets("g", {TopicPartition("orders", 0): 8})
    res = ctl.json("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--execute")
    assert actions(res, "g") == {("orders", "0"): "keep: broker offset is newer", ("orders", "1"): "written"}
    assert committed(broker, "g") == {("orders", 0): 8, ("orders", 1): 6}
    ctl.json("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--execute", "--overwrite-newer")
    assert committed(broker, "g") == {("orders", 0): 5, ("orders", 1): 6}


def test_group_with_a_live_legacy_consumer_is_refused_even_with_force(ctl: Ctl, broker, zk, zk_connect, topics):
    legacy(zk, "busy", {("orders", "0"): b"5"})
    legacy(zk, "idle", {("orders", "0"): b"3"})
    zk.create("/consumers/busy/ids/busy_host-1-abcd", b"{}", ephemeral=True, makepath=True)
    for extra in ([], ["--force"]):
        res = ctl("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--execute", *extra)
        assert res.returncode == 1
        refusals = [line for line in res.stderr.splitlines() if "refused" in line]
        assert len(refusals) == 1 and "busy" in refusals[0] and "legacy consumer" in refusals[0]
    assert committed(broker, "busy") == {}
    assert committed(broker, "idle") == {("orders", 0): 3}  # the other group went ahead


def test_group_active_in_the_broker_is_refused_unless_force(ctl: Ctl, broker, zk, zk_connect, topics):
    from confluent_kafka import Consumer as CKConsumer

    legacy(zk, "live", {("orders", "0"): b"5"})
    member = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "live", "session.timeout.ms": 6000,
                         "enable.auto.commit": False})
    member.subscribe(["events"])
    try:
        member.poll(5)  # joined
        res = ctl("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--group", "live")
        assert res.returncode == 1
        assert "group live refused: active in the broker" in res.stderr and "--force" in res.stderr
        forced = ctl.json("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--group", "live", "--force")
        assert actions(forced, "live") == {("orders", "0"): "write"}
    finally:
        member.close()
    assert committed(broker, "live") == {}


def test_migrate_to_zookeeper_rolls_back(ctl: Ctl, broker, zk, zk_connect, topics):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_group_offsets("app", {TopicPartition("orders", 0): 4, TopicPartition("orders", 1): 9,
                                          TopicPartition("events", 0): 2})
    legacy(zk, "app", {("orders", "1"): b"9"})
    dry = ctl.json("offsets", "migrate-to-zookeeper", "--zookeeper", zk_connect, "--group", "app")
    assert actions(dry, "app") == {("events", "0"): "write", ("orders", "0"): "write", ("orders", "1"): "up to date"}
    assert not zk.exists("/consumers/app/offsets/orders/0")
    ctl.json("offsets", "migrate-to-zookeeper", "--zookeeper", zk_connect, "--group", "app", "--execute")
    assert zk.get("/consumers/app/offsets/orders/0")[0] == b"4"
    assert zk.get("/consumers/app/offsets/events/0")[0] == b"2"
    again = ctl.json("offsets", "migrate-to-zookeeper", "--zookeeper", zk_connect, "--group", "app", "--execute")
    assert set(actions(again, "app").values()) == {"up to date"}


def test_export_and_import_round_trip(ctl: Ctl, broker, zk, zk_connect, topics, tmp_path):
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_group_offsets("app", {TopicPartition("orders", 0): 4, TopicPartition("orders", 1): 9})
    exported = ctl("offsets", "export", "--group", "app")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.splitlines() == ["group,topic,partition,offset,metadata", "app,orders,0,4,", "app,orders,1,9,"]

    edited = tmp_path / "offsets.csv"
    edited.write_text(exported.stdout.replace("app,", "copy,") + "copy,orders,2,30,\"hand, edited\"\n")
    dry = ctl("-o", "json", "offsets", "import", str(edited))
    assert dry.returncode == 1  # one row would be skipped
    assert actions(json.loads(dry.stdout), "copy") == {("orders", "0"): "write", ("orders", "1"): "write",
                                    ("orders", "2"): "skip: past the log end offset"}
    assert committed(broker, "copy") == {}
    res = ctl("offsets", "import", str(edited), "--execute")
    assert res.returncode == 1  # one row skipped
    assert committed(broker, "copy") == {("orders", 0): 4, ("orders", 1): 9}

    edited.write_text("copy,orders,2,5,hand edited\n")
    ctl.json("offsets", "import", str(edited), "--execute")
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.list_group_offsets("copy")[TopicPartition("orders", 2)].metadata == "hand edited"

    zk.create("/consumers/copy/ids/copy_host-1-abcd", b"{}", ephemeral=True, makepath=True)
    refused = ctl("offsets", "import", str(edited), "--check-zookeeper", zk_connect, "--execute")
    assert refused.returncode == 1 and "legacy consumer(s) still registered" in refused.stderr
    zk.delete("/consumers/copy/ids/copy_host-1-abcd")
    ctl.json("offsets", "import", str(edited), "--zookeeper", zk_connect, "--execute")
    assert zk.get("/consumers/copy/offsets/orders/2")[0] == b"5"
    assert ctl("offsets", "export", "--group", "copy", "--zookeeper", zk_connect).stdout.splitlines()[1:] == \
        ["copy,orders,2,5,"]


@pytest.mark.parametrize("text, says", [
    ("copy,orders,1,3\ncopy,orders,0\n", "line 2: 3 fields"),
    ("copy,orders,1,3\ncopy,orders,zero,4\n", "non-negative integers"),
    ("copy,orders,1,3\ncopy,orders,0,-4\n", "non-negative integers"),
    ("copy,orders,1,3\n,orders,0,4\n", "empty group"),
    ("copy,orders,1,3\ncopy,orders,0,4\ncopy,orders,0,5\n", "appears twice"),
    ("group,topic,partition,offset,metadata\n", "no offsets"),
])
def test_malformed_csv_is_one_line_and_writes_nothing(ctl: Ctl, broker, topics, tmp_path, text, says):
    path = tmp_path / "offsets.csv"
    path.write_text(text)
    line = one_line_error(ctl("offsets", "import", str(path), "--execute"), 2)
    assert says in line
    assert committed(broker, "copy") == {}


def test_error_paths_are_one_line(ctl: Ctl, broker, zk_connect, topics, tmp_path):
    from tests.zookeeper import free_port

    nowhere = f"127.0.0.1:{free_port()}"
    good = tmp_path / "good.csv"
    good.write_text("g,orders,0,1\n")
    for args in (["migrate-from-zookeeper", "--zookeeper", nowhere],
                 ["migrate-to-zookeeper", "--zookeeper", nowhere, "--group", "g"],
                 ["export", "--group", "g", "--zookeeper", nowhere],
                 ["import", str(good), "--zookeeper", nowhere]):
        assert "cannot reach ZooKeeper" in one_line_error(ctl("offsets", *args), 3)
    assert "no group in ZooKeeper" in one_line_error(
        ctl("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--group", "nosuch"), 2)
    assert "no group in the cluster" in one_line_error(
        ctl("offsets", "migrate-to-zookeeper", "--zookeeper", zk_connect, "--group", "nosuch"), 2)
    assert "no group in the cluster" in one_line_error(ctl("offsets", "export", "--group", "nosuch"), 2)
    assert "bad group regex" in one_line_error(
        ctl("offsets", "migrate-from-zookeeper", "--zookeeper", zk_connect, "--group", "("), 2)
    assert "cannot read" in one_line_error(ctl("offsets", "import", str(tmp_path / "missing.csv")), 2)
    path = tmp_path / "ok.csv"
    path.write_text("g,orders,0,1\n")
    assert "cannot reach the cluster" in one_line_error(
        ctl("offsets", "import", str(path), bootstrap=f"127.0.0.1:{free_port()}"), 3)
