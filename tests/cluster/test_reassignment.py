"""Partition reassignment (KIP-455) on four real brokers and a real ZooKeeper.

A topic on brokers {1,2,3} moves to {2,3,4} with ``kafkactl partitions
reassign`` while librdkafka produces with acks=all: the move completes, the
new replica holds the same batches as the old ones (segment files compared),
nothing acknowledged is lost (the history checker), the throttles are gone
after ``--verify``. A throttled, slow move is cancelled and the old
assignment comes back. A replica removed while its broker is stopped is
deleted when that broker starts again. The old tools' ``/admin/reassign_partitions`` znode and
a controller failover in the middle of a move are covered too.
"""

from __future__ import annotations

import json

from tests.cluster.conftest import wait_until
from tests.cluster.workload import LoadProducer, read_all, replica_batches
from tests.kafkactl.conftest import Ctl, one_line_error


def topic_znode(cluster, topic: str) -> dict:
    return json.loads(cluster.zk.get(f"/brokers/topics/{topic}")[0])


def replicas_agree(cluster, topic: str, partition: int, ids) -> list:
    def same():
        batches = [replica_batches(cluster.broker(i).data_dir, topic, partition) for i in ids]
        return batches[0] if batches[0] and all(b == batches[0] for b in batches) else None
    return wait_until(same, f"replicas {ids} of {topic}-{partition} to hold the same batches")


def write_plan(tmp_path, name: str, topic: str, replicas: dict[int, list[int]]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in replicas.items()]}))
    return str(path)


def verified(ctl: Ctl, plan: str) -> str | None:
    res = ctl("partitions", "reassign", "--verify", "--reassignment-json-file", plan)
    assert res.returncode == 0, res.stdout + res.stderr
    return None if "still in progress" in res.stdout else res.stdout


def throttles(ctl: Ctl, topic: str) -> tuple[dict, dict]:
    """The dynamic throttle rates each broker has (by id) and the topic's throttled replicas, as kafkactl shows them."""
    rates = {}
    for broker_id in (1, 2, 3, 4):
        res = ctl("--output", "json", "configs", "get", "broker", str(broker_id),
                  "--key", "leader.replication.throttled.rate")
        if res.returncode == 0:
            (entry,) = json.loads(res.stdout) or [None]
            if entry is not None and entry["source"] != "DEFAULT_CONFIG":
                rates[broker_id] = entry["value"]
    replicas = {}
    for row in ctl.json("configs", "get", "topic", topic):
        if row["name"].endswith(".replication.throttled.replicas"):
            replicas[row["name"].split(".")[0]] = row["value"]
    return rates, replicas


def produce_bytes(cluster, topic: str, partition: int, total: int, size: int = 1000) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for _ in range(total // size):
        while True:
            try:
                producer.produce(topic, value=b"x" * size, partition=partition)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def test_reassign_a_topic_to_other_brokers_under_load(cluster_factory, tmp_path):
    cluster = cluster_factory(4)
    topic = "moving"
    cluster.create_topic(topic, assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    ctl = Ctl(cluster.bootstrap)
    load = LoadProducer(cluster.bootstrap, topic, partitions=(0, 1), rate=200).start()
    load.wait_acknowledged(200)

    plan = write_plan(tmp_path, "plan.json", topic, {0: [2, 3, 4], 1: [3, 4, 2]})
    res = ctl("partitions", "reassign", "--execute", "--reassignment-json-file", plan, "--throttle", "2000000")
    assert res.returncode == 0, res.stderr
    assert throttles(ctl, topic) == ({1: "2000000", 2: "2000000", 3: "2000000", 4: "2000000"},
                                     {"leader": "0:1,0:2,0:3,1:2,1:3,1:1", "follower": "0:4,1:4"})
    rollback = json.loads(res.stdout.split("\n\n")[1])
    assert {(e["partition"], tuple(e["replicas"])) for e in rollback["partitions"]} == {(0, (1, 2, 3)),
                                                                                        (1, (2, 3, 1))}
    out = wait_until(lambda: verified(ctl, plan), "the reassignment to complete")
    assert "Reassignment of partition moving-0 is complete." in out
    assert "Reassignment of partition moving-1 is complete." in out
    assert "Clearing broker-level throttles" in out
    assert throttles(ctl, topic) == ({}, {})
    load.wait_acknowledged(200)  # the producer carries on at the new leaders
    recorder = load.stop()

    znode = topic_znode(cluster, topic)
    assert znode["partitions"] == {"0": [2, 3, 4], "1": [3, 4, 2]}
    assert znode["adding_replicas"] == {} and znode["removing_replicas"] == {}
    for p, replicas in ((0, [2, 3, 4]), (1, [3, 4, 2])):
        meta = wait_until(lambda p=p, r=replicas: (m := cluster.partition_meta(topic, p)) and
                          m["replica_nodes"] == r and sorted(m["isr_nodes"]) == sorted(r) and m,
                          f"metadata of {topic}-{p} to show the new replicas")
        assert meta["leader_id"] in replicas
        replicas_agree(cluster, topic, p, replicas)
        wait_until(lambda p=p: not (cluster.broker(1).data_dir / f"{topic}-{p}").exists(),
                   f"broker 1 to delete its replica of {topic}-{p}")
    report = recorder.check(read_all(cluster.bootstrap, topic, (0, 1)))
    # duplicates allowed: the load is not idempotent, and moving moving-0's leadership from broker 1 answers its
    # acks=all waits NOT_LEADER_OR_FOLLOWER (as Kafka does) though the records may already be on the new leader,
    # so librdkafka's retry writes them twice (as in every test here whose leadership moves under load)
    assert report.valid(allow_duplicates=True), str(report)
    res = ctl("partitions", "reassign", "--execute", "--reassignment-json-file", plan)
    assert res.returncode == 0  # moving to where it is: nothing to do


def test_reassign_error_paths(cluster_factory, tmp_path):
    cluster = cluster_factory(3)
    cluster.create_topic("t", assignment={0: [1, 2]})
    ctl = Ctl(cluster.bootstrap)

    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"version": 1, "partitions": [')
    for mode in ("--execute", "--verify", "--cancel"):
        assert "malformed reassignment JSON" in one_line_error(
            ctl("partitions", "reassign", mode, "--reassignment-json-file", str(bad_json)), 2)
    assert "unknown topic: nope" in one_line_error(ctl(
        "partitions", "reassign", "--execute", "--reassignment-json-file",
        write_plan(tmp_path, "a.json", "nope", {0: [1]})), 2)
    assert "unknown partition: t-7" in one_line_error(ctl(
        "partitions", "reassign", "--execute", "--reassignment-json-file",
        write_plan(tmp_path, "b.json", "t", {7: [1]})), 2)
    assert "broker 9 is not in the cluster" in one_line_error(ctl(
        "partitions", "reassign", "--execute", "--reassignment-json-file",
        write_plan(tmp_path, "c.json", "t", {0: [1, 9]})), 2)
    assert "duplicate replicas" in one_line_error(ctl(
        "partitions", "reassign", "--execute", "--reassignment-json-file",
        write_plan(tmp_path, "d.json", "t", {0: [1, 1]})), 2)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "t"}]}))
    assert "broker 9 is not in the cluster" in one_line_error(ctl(
        "partitions", "reassign", "--generate", "--topics-to-move-json-file", str(topics),
        "--broker-list", "1,9"), 2)
    res = ctl("partitions", "reassign", "--generate", "--topics-to-move-json-file", str(topics),
              "--broker-list", "2,3")
    assert res.returncode == 0, res.stderr
    proposed = json.loads(res.stdout.split("Proposed partition reassignment configuration\n")[1])
    assert sorted(proposed["partitions"][0]["replicas"]) == [2, 3]
    assert topic_znode(cluster, "t")["partitions"] == {"0": [1, 2]}  # --generate changes nothing
    # cancelling a partition that is not moving changes nothing either
    res = ctl("partitions", "reassign", "--cancel", "--reassignment-json-file",
              write_plan(tmp_path, "e.json", "t", {0: [2, 3]}))
    assert res.returncode == 0 and "None of the specified" in res.stdout, res.stderr
    # the same replicas in another order: complete at once, the new order kept (its preferred leader first)
    plan = write_plan(tmp_path, "f.json", "t", {0: [2, 1]})
    res = ctl("partitions", "reassign", "--execute", "--reassignment-json-file", plan)
    assert res.returncode == 0, res.stderr
    assert "is complete" in wait_until(lambda: verified(ctl, plan), "the reorder to complete")
    assert topic_znode(cluster, "t")["partitions"] == {"0": [2, 1]}
    wait_until(lambda: (m := cluster.partition_meta("t", 0)) and m["replica_nodes"] == [2, 1],
               "metadata with the new order")


def test_cancel_a_throttled_move_restores_the_old_assignment(cluster_factory, tmp_path):
    cluster = cluster_factory(4)
    topic = "slow"
    cluster.create_topic(topic, assignment={0: [1, 2, 3]})
    produce_bytes(cluster, topic, 0, 1_500_000)
    ctl = Ctl(cluster.bootstrap)
    plan = write_plan(tmp_path, "plan.json", topic, {0: [2, 3, 4]})
    # 20 kB/s: after the window's first burst (11 s of quota) the 1.5 MB take over a minute to copy
    res = ctl("partitions", "reassign", "--execute", "--reassignment-json-file", plan, "--throttle", "20000")
    assert res.returncode == 0, res.stderr
    wait_until(lambda: (cluster.broker(4).data_dir / f"{topic}-0").exists(), "broker 4 to start its replica")
    znode = topic_znode(cluster, topic)
    assert znode["partitions"] == {"0": [2, 3, 4, 1]}
    assert znode["adding_replicas"] == {"0": [4]} and znode["removing_replicas"] == {"0": [1]}
    assert verified(ctl, plan) is None  # still in progress
    copied = sum(f.stat().st_size for f in (cluster.broker(4).data_dir / f"{topic}-0").glob("*.log"))
    assert copied < 1_000_000  # bounded by the throttle (a burst of at most 11 s x 20 kB/s so far)

    res = ctl("partitions", "reassign", "--cancel", "--reassignment-json-file", plan)
    assert res.returncode == 0, res.stderr
    assert "Successfully cancelled partition reassignments for: slow-0" in res.stdout
    # the original replicas, in the order they had during the move (Kafka's: targets first)
    wait_until(lambda: (z := topic_znode(cluster, topic)) == {"version": 3, "topic_id": z["topic_id"],
                                                             "partitions": {"0": [2, 3, 1]},
                                                             "adding_replicas": {}, "removing_replicas": {}},
               "the old replicas back in ZooKeeper (the topic id kept)")
    meta = wait_until(lambda: (m := cluster.partition_meta(topic, 0)) and m["replica_nodes"] == [2, 3, 1] and m,
                      "metadata to show the old replicas")
    assert 4 not in meta["isr_nodes"]
    wait_until(lambda: not (cluster.broker(4).data_dir / f"{topic}-0").exists(), "broker 4 to delete its replica")
    assert throttles(ctl, topic) == ({}, {})
    res = ctl("partitions", "reassign", "--verify", "--reassignment-json-file", plan)
    assert res.returncode == 1 and "rather than [2, 3, 4]" in res.stdout


def test_a_move_from_the_znode_survives_a_controller_failover(cluster_factory):
    """Old tools' /admin/reassign_partitions starts a slow move; the controller is SIGKILLed; the next one
    resumes the move from the topic znode, completes it once the throttle is lifted, and empties the node."""
    cluster = cluster_factory(4)
    controller = cluster.controller_id()
    others = [b for b in cluster.ids if b != controller]
    old, new = others[:2], others[1:]
    topic = "resumed"
    # every broker knows the throttled replicas from the start (a config change reaches the others later)
    cluster.create_topic(topic, assignment={0: old}, config={"follower.replication.throttled.replicas": "*"})
    produce_bytes(cluster, topic, 0, 3_000_000)  # more than one fetch (replica.fetch.max.bytes) can carry
    ctl = Ctl(cluster.bootstrap)
    for b in cluster.ids:  # each broker's own config is set on that broker
        assert ctl("configs", "set", "broker", str(b), "follower.replication.throttled.rate=20000").returncode == 0
    cluster.zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": new}]}).encode(), makepath=True)
    wait_until(lambda: topic_znode(cluster, topic)["adding_replicas"] == {"0": [new[-1]]}, "the move to start")

    cluster.kill(controller)
    wait_until(lambda: cluster.controller_id() not in (None, controller), "another controller", 40)
    assert cluster.zk.exists("/admin/reassign_partitions")  # not complete yet
    survivor = Ctl(",".join(cluster.broker(b).bootstrap for b in others))
    for b in others:
        assert survivor("configs", "set", "broker", str(b), "--delete",
                        "follower.replication.throttled.rate").returncode == 0
    wait_until(lambda: topic_znode(cluster, topic)["partitions"] == {"0": new}, "the move to complete")
    assert topic_znode(cluster, topic)["adding_replicas"] == {}
    wait_until(lambda: not cluster.zk.exists("/admin/reassign_partitions"), "the znode to be removed")
    wait_until(lambda: not (cluster.broker(old[0]).data_dir / f"{topic}-0").exists(),
               f"broker {old[0]} to delete its replica")
    replicas_agree(cluster, topic, 0, new)


def test_a_replica_removed_while_its_broker_is_down_is_deleted_when_it_returns(cluster_factory, tmp_path):
    """Kafka's ReplicaDeletionIneligible: {1,2,3} -> {2,3,4} while broker 1 is stopped completes without
    it; its log stays on its disk until it starts again, then the controller's StopReplica deletes it."""
    cluster = cluster_factory(4)
    topic = "left-behind"
    cluster.create_topic(topic, assignment={0: [1, 2, 3]})
    # idempotent: the leader's shutdown must not be able to write a retried batch twice
    load = LoadProducer(cluster.bootstrap, topic, rate=200, **{"enable.idempotence": True}).start()
    load.wait_acknowledged(200)
    assert cluster.stop(1) == 0
    stale = cluster.broker(1).data_dir / f"{topic}-0"
    assert stale.is_dir()

    ctl = Ctl(cluster.bootstrap)
    plan = write_plan(tmp_path, "plan.json", topic, {0: [2, 3, 4]})
    res = ctl("partitions", "reassign", "--execute", "--reassignment-json-file", plan)
    assert res.returncode == 0, res.stderr
    assert "is complete" in wait_until(lambda: verified(ctl, plan), "the reassignment to complete")
    load.wait_acknowledged(200)
    assert stale.is_dir()  # nobody to tell yet

    cluster.start(1)
    wait_until(lambda: not stale.exists(), "broker 1 to delete its removed replica when it is back")
    assert topic_znode(cluster, topic)["partitions"] == {"0": [2, 3, 4]}
    load.wait_acknowledged(200)
    recorder = load.stop()
    replicas_agree(cluster, topic, 0, [2, 3, 4])
    report = recorder.check(read_all(cluster.bootstrap, topic, (0,)))
    assert report.valid(), str(report)


def test_reassignment_log_dirs_place_the_replicas(cluster_factory, tmp_path):
    """``log_dirs`` other than "any": broker 4's new replica is made in its second log dir (an empty broker
    would pick the first) and broker 2's replica moves to its other dir; ``--verify`` reports both moves.
    A dir the broker does not have is a one-line error before anything moves."""
    dirs = {b: [tmp_path / f"b{b}-first", tmp_path / f"b{b}-second"] for b in (2, 4)}
    cluster = cluster_factory(4, per_broker={b: {"log.dirs": ",".join(map(str, d))} for b, d in dirs.items()})
    topic = "placed"
    cluster.create_topic(topic, assignment={0: [1, 2, 3]})
    produce_bytes(cluster, topic, 0, 200_000)
    (was,) = [d for d in dirs[2] if (d / f"{topic}-0").is_dir()]
    (other,) = [d for d in dirs[2] if d != was]
    ctl = Ctl(cluster.bootstrap)

    def plan(name: str, log_dirs: list) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [2, 3, 4], "log_dirs": log_dirs}]}))
        return str(path)
    assert "is not a log dir of broker 4" in one_line_error(ctl(
        "partitions", "reassign", "--execute", "--reassignment-json-file",
        plan("nowhere.json", ["any", "any", str(tmp_path / "nowhere")])), 2)
    assert "neither \"any\" nor an absolute path" in one_line_error(ctl(
        "partitions", "reassign", "--execute", "--reassignment-json-file", plan("relative.json", ["x", "any", "any"])), 2)
    assert topic_znode(cluster, topic)["partitions"] == {"0": [1, 2, 3]}  # nothing started

    placed = plan("plan.json", [str(other), "any", str(dirs[4][1])])
    res = ctl("partitions", "reassign", "--execute", "--reassignment-json-file", placed)
    assert res.returncode == 0, res.stderr
    assert "Successfully started log directory moves for: placed-0-2,placed-0-4" in res.stdout
    out = wait_until(lambda: verified(ctl, placed), "the reassignment and the log dir moves to complete")
    assert "Reassignment of partition placed-0 is complete." in out
    assert "Reassignment of replica placed-0-2 completed successfully." in out
    assert "Reassignment of replica placed-0-4 completed successfully." in out
    assert not (dirs[4][0] / f"{topic}-0").exists()
    wait_until(lambda: not (was / f"{topic}-0").exists(), "broker 2's old copy to go")
    batches = replicas_agree(cluster, topic, 0, [3])
    for log_dir in (other, dirs[4][1]):
        wait_until(lambda d=log_dir: replica_batches(d, topic, 0) == batches, f"the replica in {log_dir} to agree")
