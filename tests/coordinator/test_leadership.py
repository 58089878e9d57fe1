"""The coordinator over its partition store alone: no broker, real logs and a real replica layer.

A ReplicaManager over a LogManager in ``tmp_path`` (writer threads, a real loop)
stands where the broker would; ``create_topic`` makes the partitions of
``__consumer_offsets`` as the topic layer does, with a second replica (broker 1)
in the ISR when asked, whose log end offset only its fetches report. So the
tests see when a commit is acknowledged (the high watermark passed it), and what
becoming leader and resigning do to the groups.
"""

from __future__ import annotations

import asyncio

from broker.config import BrokerConfig
from broker.coordinator import GroupCoordinator, ReplicaStore
from broker.coordinator.records import OffsetAndMetadata, partition_for
from broker.coordinator.storage import OFFSETS_TOPIC
from broker.log import LogConfig, LogManager
from broker.metrics import BrokerMetrics
from broker.protocol import ErrorCode as E
from broker.replica import ReplicaManager
from tests.coordinator.inproc import PROTOCOLS, join_new

LOCAL, FOLLOWER = 0, 1
PARTITIONS = 3


def coordinator_over_logs(tmp_path, body, *, isr=(LOCAL,), alive=None, **props):
    """Run ``body(coordinator, replicas, log_manager)`` with the coordinator on its own store."""
    log_manager = LogManager([tmp_path / "data"], LogConfig(segment_bytes=1 << 20))
    log_manager.startup()
    replicas = ReplicaManager()
    replicas.attach(log_manager, LOCAL)
    config = BrokerConfig({"offsets.topic.num.partitions": PARTITIONS, "offsets.topic.replication.factor": len(isr),
                           "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 50,
                           **{k.replace("_", "."): v for k, v in props.items()}})

    async def create_topic(name, partitions, factor, configs):
        assert (name, factor, configs["cleanup.policy"]) == (OFFSETS_TOPIC, len(isr), "compact")
        for p in range(partitions):
            replicas.make_leader(name, p, log_manager.create_log(name, p), leader_epoch=0, isr=list(isr),
                                 replicas=list(isr))
        return partitions

    def partition_count():
        return PARTITIONS if replicas.partition(OFFSETS_TOPIC, 0) is not None else None

    store = ReplicaStore(replicas, config, partition_count=partition_count, create_topic=create_topic,
                         alive_brokers=lambda: len(isr) if alive is None else alive)
    coordinator = GroupCoordinator(config, store, BrokerMetrics())

    async def main():
        loop = asyncio.get_running_loop()
        log_manager.append_deliver = lambda results: loop.call_soon_threadsafe(replicas.settle, results)
        await coordinator.start()
        try:
            await asyncio.wait_for(body(coordinator, replicas, log_manager), 30)
        finally:
            await coordinator.shutdown()
            replicas.close()

    try:
        asyncio.run(main())
    finally:
        log_manager.shutdown()


def commit(c, group, offset, tp=("t", 0)):
    return c.commit_offsets(group, "", None, -1, {tp: OffsetAndMetadata(offset)})


def test_a_commit_is_acknowledged_only_once_the_isr_has_it(tmp_path):
    async def body(c, replicas, log_manager):
        assert await c.serving_error("g") == E.NONE  # creates the topic, loads its (empty) partitions
        p = replicas.partition(OFFSETS_TOPIC, partition_for("g", PARTITIONS))
        pending = asyncio.ensure_future(commit(c, "g", 7))
        await asyncio.sleep(0.3)  # the append is written, but the follower has not fetched it
        assert not pending.done() and p.log_end_offset == 1 and p.high_watermark == 0
        assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is None
        replicas.update_follower_fetch(p, FOLLOWER, p.log_end_offset)
        assert await pending == {("t", 0): E.NONE}
        assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 7

    coordinator_over_logs(tmp_path, body, isr=(LOCAL, FOLLOWER))


def test_a_commit_the_isr_does_not_take_in_time_is_not_acknowledged(tmp_path):
    async def body(c, replicas, log_manager):
        # Kafka answers a commit that timed out waiting for the ISR with COORDINATOR_NOT_AVAILABLE
        assert await commit(c, "g", 7) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
        assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is None

    coordinator_over_logs(tmp_path, body, isr=(LOCAL, FOLLOWER), offsets_commit_timeout_ms=200)


def test_too_few_alive_brokers_for_the_replication_factor_is_coordinator_not_available(tmp_path):
    async def body(c, replicas, log_manager):
        assert await c.serving_error("g") == E.COORDINATOR_NOT_AVAILABLE
        assert replicas.partition(OFFSETS_TOPIC, 0) is None  # not created with fewer replicas

    coordinator_over_logs(tmp_path, body, isr=(LOCAL, FOLLOWER), alive=1)


def test_groups_load_when_this_broker_becomes_leader_and_unload_when_it_resigns(tmp_path):
    async def body(c, replicas, log_manager):
        assert await commit(c, "g", 7) == {("t", 0): E.NONE}
        a = await join_new(c, group="members")
        code, _, _ = await c.sync_group("members", a["generation_id"], a["member_id"], None, None, None,
                                        {a["member_id"]: b"x"})
        assert code == E.NONE  # generation 1 stored
        held = asyncio.ensure_future(c.join_group("members", "", None, "client", "/h", 2000, 6000, "consumer",
                                                  PROTOCOLS, False))
        await asyncio.sleep(0.05)
        ours = {partition_for("g", PARTITIONS), partition_for("members", PARTITIONS)}
        for p in ours:
            replicas.remove_partition(OFFSETS_TOPIC, p)  # the replica layer tells the coordinator
        assert (await held)["error_code"] == E.NOT_COORDINATOR  # a held JoinGroup is answered at once
        assert c.fetch_offsets("g", [("t", 0)])[0] == E.NOT_COORDINATOR
        assert c.heartbeat("members", 1, a["member_id"], None) == E.NOT_COORDINATOR
        assert await commit(c, "g", 8) == {("t", 0): E.NOT_COORDINATOR}
        assert "g" not in c.groups and "members" not in c.groups

        for p in ours:
            replicas.make_leader(OFFSETS_TOPIC, p, log_manager.get_log((OFFSETS_TOPIC, p)), leader_epoch=1,
                                 isr=[LOCAL], replicas=[LOCAL])
        assert c.fetch_offsets("g", [("t", 0)])[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        await c.wait_loaded()
        assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 7  # replayed from the log
        assert c.groups["members"].generation_id == 1 and a["member_id"] in c.groups["members"].members
        # a resignation from an older leader epoch than the load is stale: ignored
        c._on_resign(partition_for("g", PARTITIONS), 0)
        assert c.fetch_offsets("g", [("t", 0)])[0] == E.NONE

    coordinator_over_logs(tmp_path, body)
