"""Fault tests of a three-broker cluster: real broker processes on a real ZooKeeper,
faults by signal (SIGKILL, SIGSTOP/SIGCONT, SIGTERM), every test ending with the
history checker (``tests/cluster/history.py``) over what the producers were told
and what a consumer and the replicas' segment files hold.

Each test is bounded: waits are polls with a limit (``WAIT_S``), a guard against a
hang, never a performance assertion. The session timeout is the harness's 6 s.
The soak test is marked slow: two rounds by default, ten with ``KAFKAPY_LONG=1``.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from broker.protocol import ErrorCode
from tests.cluster.conftest import wait_until
from tests.cluster.history import check
from tests.cluster.workload import LoadProducer, produce_to, read_all, replica_batches, replica_records

LONG = os.environ.get("KAFKAPY_LONG") == "1"


def replicas_agree(cluster, topic: str, partition: int, ids=None) -> list:
    """Wait until the replicas' segment files hold the same batches; returns them."""
    ids = ids or cluster.ids

    def same():
        batches = [replica_batches(cluster.broker(i).data_dir, topic, partition) for i in ids]
        return batches[0] if batches[0] and all(b == batches[0] for b in batches) else None
    return wait_until(same, f"every replica of {topic}-{partition} to hold the same batches")


def replica_reads(cluster, topic: str, partition: int, ids=None) -> dict:
    return {f"broker{i}": replica_records(cluster.broker(i).data_dir, topic, partition) for i in ids or cluster.ids}


def leader_epoch_entries(cluster, broker_id: int, topic: str, partition: int) -> list[tuple[int, int]]:
    """The ``(epoch, start_offset)`` entries of one replica's ``leader-epoch-checkpoint``."""
    path = cluster.broker(broker_id).data_dir / f"{topic}-{partition}" / "leader-epoch-checkpoint"
    lines = path.read_text().split("\n")
    return [tuple(int(x) for x in line.split()) for line in lines[2:] if line.strip()]


def produce_ok(broker, topic: str, partition: int, values: list[bytes], acks: int = -1) -> list:
    code, base = produce_to(broker, topic, partition, values, acks=acks)
    assert code == ErrorCode.NONE, f"produce to broker {broker.bootstrap}: {ErrorCode(code).name}"
    return [(partition, base + i, v) for i, v in enumerate(values)]


def test_replication_factor_3_topic_znodes_and_metadata_alike_on_every_broker(cluster):
    cluster.create_topic("orders", partitions=3, replication_factor=3)
    doc = json.loads(cluster.zk.get("/brokers/topics/orders")[0])
    assert doc["version"] == 3 and doc["adding_replicas"] == {} and doc["removing_replicas"] == {}
    assert len(doc["topic_id"]) == 22  # Kafka 2.8's layout (KIP-516)
    assignment = doc["partitions"]
    assert sorted(assignment) == ["0", "1", "2"]
    assert all(sorted(r) == [1, 2, 3] for r in assignment.values())
    assert {r[0] for r in assignment.values()} == {1, 2, 3}  # preferred leaders round-robin
    controller_epoch = int(cluster.zk.get("/controller_epoch")[0])
    for p in range(3):
        state = cluster.wait_for_isr("orders", p)
        assert state == {"version": 1, "leader": assignment[str(p)][0], "leader_epoch": 0,
                         "isr": state["isr"], "controller_epoch": controller_epoch}
        assert sorted(state["isr"]) == [1, 2, 3]

    def answers(via):
        m = cluster.metadata(["orders"], via=via)
        parts = sorted((p["partition_index"], p["leader_id"], p["leader_epoch"], p["replica_nodes"],
                        sorted(p["isr_nodes"])) for p in m["topics"][0]["partitions"])
        return (sorted((b["node_id"], b["port"]) for b in m["brokers"]), m["controller_id"], m["cluster_id"], parts)
    first = wait_until(lambda: len({repr(answers(i)) for i in cluster.ids}) == 1 and answers(1),
                       "every broker to answer the same Metadata")
    assert [b for b, _ in first[0]] == [1, 2, 3]
    assert first[1] == cluster.controller_id()
    assert [(p, leader, replicas) for p, leader, _, replicas, _ in first[3]] == [
        (p, assignment[str(p)][0], assignment[str(p)]) for p in range(3)]

    acked = []
    for p in range(3):
        acked += produce_ok(cluster.broker(cluster.leader("orders", p)), "orders", p, [b"o%d-%d" % (p, i)
                                                                                   for i in range(20)])
    for p in range(3):
        replicas_agree(cluster, "orders", p)
    reads = {"consumer": read_all(cluster.bootstrap, "orders", (0, 1, 2))}
    for p in range(3):
        for name, read in replica_reads(cluster, "orders", p).items():
            reads.setdefault(name, []).extend(read)
    report = check(acked, reads)
    assert report.valid(), str(report)


def test_leader_sigkill_under_acks_all_load_loses_no_acknowledged_record(cluster):
    cluster.create_topic("load", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    load = LoadProducer(cluster.bootstrap, "load", rate=300).start()
    try:
        load.wait_acknowledged(300)
        leader = cluster.leader("load")
        cluster.kill(leader)
        new_leader = cluster.wait_for_leader("load", not_in={leader})
        load.wait_acknowledged(300)  # acknowledged by the new leader
    finally:
        recorder = load.stop()
    read = read_all(cluster.bootstrap, "load")
    report = recorder.check(read)
    assert report.valid(allow_duplicates=True), str(report)
    print(f"leader {leader} killed, {new_leader} took over: {report}; duplicates: {len(report.duplicates)}; "
          f"errors: {dict(recorder.errors)}")

    cluster.start(leader)  # the old leader comes back as a follower with the same log
    cluster.wait_for_isr("load")
    replicas_agree(cluster, "load", 0)
    report = recorder.check({"consumer": read, **replica_reads(cluster, "load", 0)})
    assert report.valid(allow_duplicates=True), str(report)


def test_follower_sigstop_leaves_the_isr_and_rejoins_after_sigcont_min_insync_2(cluster_factory):
    cluster = cluster_factory(3, replica_lag_time_max_ms=2000)
    cluster.create_topic("isr", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    leader = cluster.leader("isr")
    one, two = [i for i in cluster.ids if i != leader]
    L = cluster.broker(leader)
    acked = produce_ok(L, "isr", 0, [b"all-3"])

    cluster.pause(one)
    cluster.wait_for_isr("isr", isr=[leader, two])
    acked += produce_ok(L, "isr", 0, [b"isr-2"])  # two in sync: min.insync.replicas=2 holds

    cluster.pause(two)
    cluster.wait_for_isr("isr", isr=[leader])
    code, _ = produce_to(L, "isr", 0, [b"refused"], acks=-1)
    assert code == ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode(code).name
    acked += produce_ok(L, "isr", 0, [b"acks-1"], acks=1)  # acks=1 still works

    cluster.resume(one)
    cluster.resume(two)
    cluster.wait_for_isr("isr")
    acked += produce_ok(L, "isr", 0, [b"all-3-again"])
    replicas_agree(cluster, "isr", 0)
    report = check(acked, {"consumer": read_all(cluster.bootstrap, "isr"), **replica_reads(cluster, "isr", 0)})
    assert report.valid(), str(report)
    assert b"refused" not in {v for _, _, v in read_all(cluster.bootstrap, "isr")}


def test_divergent_logs_the_old_leader_truncates_to_the_new_leaders_log(cluster_factory):
    cluster = cluster_factory(3, replica_lag_time_max_ms=30000, replica_fetch_wait_max_ms=500)
    cluster.create_topic("diverge", partitions=1, replication_factor=3)
    old = cluster.leader("diverge")
    followers = [i for i in cluster.ids if i != old]
    acked = produce_ok(cluster.broker(old), "diverge", 0, [b"a%d" % i for i in range(5)])
    cluster.wait_for_isr("diverge")

    # acks=1 writes only the old leader gets: its followers are frozen (for less than
    # replica.lag.time.max.ms, so they stay in the ISR), then it dies. The followers'
    # long-poll fetches end first (replica.fetch.wait.max.ms): a fetch still waiting at
    # the leader would carry the new records into the frozen follower's socket.
    for f in followers:
        cluster.pause(f)
    time.sleep(2)
    only_old = [b"x%d" % i for i in range(5)]
    produce_ok(cluster.broker(old), "diverge", 0, only_old, acks=1)
    cluster.kill(old)
    for f in followers:
        cluster.resume(f)

    new = cluster.wait_for_leader("diverge", not_in={old})
    acked += produce_ok(cluster.broker(new), "diverge", 0, [b"b%d" % i for i in range(7)])
    cluster.start(old)
    cluster.wait_for_isr("diverge")
    batches = replicas_agree(cluster, "diverge", 0)
    assert batches[-1][2] > batches[0][2]  # the new leader's batches carry its higher epoch

    reads = {"consumer": read_all(cluster.bootstrap, "diverge"), **replica_reads(cluster, "diverge", 0)}
    report = check(acked, reads, indeterminate=only_old)
    assert report.valid(), str(report)
    assert not any(v in only_old for read in reads.values() for _, _, v in read)  # truncated everywhere


def test_controller_killed_another_broker_takes_the_role_and_goes_on_electing(cluster):
    controller = wait_until(cluster.controller_id, "a controller")
    epoch = int(cluster.zk.get("/controller_epoch")[0])
    cluster.kill(controller)
    new = wait_until(lambda: cluster.controller_id() not in (None, controller) and cluster.controller_id(),
                     "another broker to become controller")
    assert int(cluster.zk.get("/controller_epoch")[0]) > epoch
    other = next(i for i in cluster.live_ids() if i != new)

    # It goes on electing: a new topic gets its leaders, and loses one to a kill.
    cluster.create_topic("after", assignment={0: [other, new]})
    assert cluster.leader("after") == other
    acked = produce_ok(cluster.broker(other), "after", 0, [b"before-kill"])
    cluster.kill(other)
    assert cluster.wait_for_leader("after", not_in={other}) == new
    acked += produce_ok(cluster.broker(new), "after", 0, [b"after-kill"])

    cluster.start(controller)
    cluster.start(other)
    wait_until(lambda: cluster.registered_ids() == [1, 2, 3], "the killed brokers to register again")
    assert cluster.controller_id() == new  # the role stays where it is
    cluster.wait_for_isr("after")
    report = check(acked, {"consumer": read_all(cluster.bootstrap, "after"),
                           **replica_reads(cluster, "after", 0, ids=[other, new])})
    assert report.valid(), str(report)


def test_leader_whose_session_expires_cannot_acknowledge_as_a_stale_leader(cluster):
    # min.insync.replicas=1: only the conditional ISR write stops the stale leader
    # from shrinking its ISR to itself and acknowledging alone.
    cluster.create_topic("stale", partitions=1, replication_factor=3)
    old = cluster.leader("stale")
    acked = produce_ok(cluster.broker(old), "stale", 0, [b"before-%d" % i for i in range(5)])
    epoch = cluster.partition_state("stale", 0)["leader_epoch"]

    cluster.pause(old)
    wait_until(lambda: old not in cluster.registered_ids(), "the frozen leader's session to expire")
    new = cluster.wait_for_leader("stale", not_in={old})
    assert cluster.partition_state("stale", 0)["leader_epoch"] > epoch
    acked += produce_ok(cluster.broker(new), "stale", 0, [b"new-leader-%d" % i for i in range(5)])
    cluster.resume(old)
    code, _ = produce_to(cluster.broker(old), "stale", 0, [b"to-stale-leader"], acks=-1, timeout_ms=3000)
    assert code != ErrorCode.NONE, "a stale leader acknowledged an acks=all write"

    wait_until(lambda: old in cluster.registered_ids(), "the old leader to register again")
    cluster.wait_for_isr("stale")
    acked += produce_ok(cluster.broker(new), "stale", 0, [b"after-rejoin"])
    replicas_agree(cluster, "stale", 0)
    report = check(acked, {"consumer": read_all(cluster.bootstrap, "stale"), **replica_reads(cluster, "stale", 0)},
                   indeterminate=[b"to-stale-leader"])
    assert report.valid(), str(report)


def test_whole_cluster_stopped_and_started_keeps_cluster_id_data_and_epochs(cluster):
    cluster.create_topic("kept", partitions=3, replication_factor=3)
    load = LoadProducer(cluster.bootstrap, "kept", partitions=(0, 1, 2), rate=300).start()
    try:
        load.wait_acknowledged(300)
    finally:
        recorder = load.stop()
    for p in range(3):
        replicas_agree(cluster, "kept", p)
    cluster_id = json.loads(cluster.zk.get("/cluster/id")[0])["id"]
    epochs = {p: cluster.partition_state("kept", p)["leader_epoch"] for p in range(3)}

    for i in cluster.ids:
        assert cluster.stop(i) == 0
    checkpoints = {(i, p): leader_epoch_entries(cluster, i, "kept", p) for i in cluster.ids for p in range(3)}
    assert all(checkpoints.values())  # a clean shutdown leaves every replica's epoch history on disk
    ends = {p: replica_batches(cluster.broker(1).data_dir, "kept", p)[-1][1] + 1 for p in range(3)}
    for i in cluster.ids:
        cluster.start(i)
    for p in range(3):
        cluster.wait_for_leader("kept", p)
        cluster.wait_for_isr("kept", p)
    assert json.loads(cluster.zk.get("/cluster/id")[0])["id"] == cluster_id
    assert cluster.metadata(via=1)["cluster_id"] == cluster_id
    for i in cluster.ids:
        assert f"cluster.id={cluster_id}" in (cluster.broker(i).data_dir / "meta.properties").read_text()

    acked = list(recorder.acknowledged)
    for p in range(3):
        state = cluster.partition_state("kept", p)
        assert state["leader_epoch"] > epochs[p]  # epochs continue, never restart at 0
        acked += produce_ok(cluster.broker(state["leader"]), "kept", p, [b"after-restart-%d" % p])
        batches = replicas_agree(cluster, "kept", p)
        assert batches[-1][2] == state["leader_epoch"]
        for i in cluster.ids:  # each replica's epoch history kept the epochs of its records and grew
            entries = leader_epoch_entries(cluster, i, "kept", p)
            # An epoch that began at the log end and wrote nothing is replaced by the next
            # one starting at the same offset, as in Kafka's epoch cache.
            assert [e for e in entries if e[1] < ends[p]] == [e for e in checkpoints[(i, p)] if e[1] < ends[p]]
            assert entries[-1][0] == state["leader_epoch"]
    reads = {"consumer": read_all(cluster.bootstrap, "kept", (0, 1, 2))}
    for p in range(3):
        for name, read in replica_reads(cluster, "kept", p).items():
            reads.setdefault(name, []).extend(read)
    report = check(acked, reads, recorder.indeterminate)
    assert report.valid(), str(report)


@pytest.mark.slow
def test_leaders_killed_again_and_again_under_load(cluster):
    """The soak form: the leader of partition 0 killed and restarted round after round
    (2 rounds, 10 with KAFKAPY_LONG=1) while three partitions take acks=all load."""
    cluster.create_topic("soak", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    load = LoadProducer(cluster.bootstrap, "soak", partitions=(0, 1, 2), rate=300).start()
    try:
        load.wait_acknowledged(300)
        for _ in range(10 if LONG else 2):
            leader = cluster.leader("soak")
            cluster.kill(leader)
            cluster.wait_for_leader("soak", not_in={leader})
            load.wait_acknowledged(300)
            cluster.start(leader)
            for p in range(3):
                cluster.wait_for_isr("soak", p)
    finally:
        recorder = load.stop()
    reads = {"consumer": read_all(cluster.bootstrap, "soak", (0, 1, 2))}
    for p in range(3):
        replicas_agree(cluster, "soak", p)
        for name, read in replica_reads(cluster, "soak", p).items():
            reads.setdefault(name, []).extend(read)
    report = recorder.check(reads)
    print(f"soak: {report}; errors {dict(recorder.errors)}")
    assert report.valid(allow_duplicates=True), str(report)
