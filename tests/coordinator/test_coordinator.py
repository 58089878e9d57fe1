"""The coordinator in-process, over a real broker's logs (no mocks): membership,
errors, session expiry, offsets, reload and expiry. Timers run on a real loop; the
tests wait for conditions, never assert on durations."""

from __future__ import annotations

import asyncio

import pytest

from broker.coordinator.group import GroupState
from broker.coordinator.records import OffsetAndMetadata, partition_for
from broker.coordinator.storage import OFFSETS_TOPIC
from broker.protocol import ErrorCode
from tests.coordinator.inproc import join, join_new, make_broker, run, until

E = ErrorCode


def test_single_member_join_sync_heartbeat(tmp_path):
    async def body(broker, c):
        r = await join_new(c)
        assert r["error_code"] == E.NONE and r["generation_id"] == 1 and r["leader"] == r["member_id"]
        assert r["protocol_name"] == "range" and [m["member_id"] for m in r["members"]] == [r["member_id"]]
        code, assignment, _ = await c.sync_group("g", 1, r["member_id"], None, "consumer", "range",
                                                 {r["member_id"]: b"A"})
        assert (code, assignment) == (E.NONE, b"A")
        assert c.groups["g"].state is GroupState.STABLE
        assert c.heartbeat("g", 1, r["member_id"], None) == E.NONE
        assert c.heartbeat("g", 0, r["member_id"], None) == E.ILLEGAL_GENERATION
        assert c.heartbeat("g", 1, "nobody", None) == E.UNKNOWN_MEMBER_ID
        assert c.heartbeat("other", 1, r["member_id"], None) == E.UNKNOWN_MEMBER_ID
        # the group metadata is in __consumer_offsets
        partition = broker.replicas.partition(OFFSETS_TOPIC, partition_for("g", 3))
        assert partition.log_end_offset >= 1 and partition.high_watermark == partition.log_end_offset
    run(tmp_path, body)


def test_second_member_triggers_rebalance_and_follower_waits_for_leader(tmp_path):
    async def body(broker, c):
        a = await join_new(c)
        await c.sync_group("g", 1, a["member_id"], None, None, None, {a["member_id"]: b"all"})
        b_task = asyncio.ensure_future(join_new(c))
        await until(lambda: c.groups["g"].state is GroupState.PREPARING_REBALANCE)
        assert c.heartbeat("g", 1, a["member_id"], None) == E.REBALANCE_IN_PROGRESS
        a2 = await join(c, member_id=a["member_id"])
        b = await b_task
        assert a2["generation_id"] == b["generation_id"] == 2
        assert a2["leader"] == a["member_id"] and len(a2["members"]) == 2 and b["members"] == []
        follower = asyncio.ensure_future(c.sync_group("g", 2, b["member_id"], None, None, None, {}))
        await asyncio.sleep(0)
        assert not follower.done()
        code, asg, _ = await c.sync_group("g", 2, a["member_id"], None, None, None,
                                          {a["member_id"]: b"x", b["member_id"]: b"y"})
        assert (code, asg) == (E.NONE, b"x")
        assert (await follower)[:2] == (E.NONE, b"y")
        # a member that leaves moves the group to a rebalance; the other rejoins alone
        assert c.leave_group("g", [(b["member_id"], None)]) == (E.NONE, [E.NONE])
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        a3 = await join(c, member_id=a["member_id"])
        assert a3["generation_id"] == 3 and len(a3["members"]) == 1
    run(tmp_path, body)


def test_join_errors(tmp_path):
    async def body(broker, c):
        assert (await join(c, group=""))["error_code"] == E.INVALID_GROUP_ID
        assert (await join(c, session=10))["error_code"] == E.INVALID_SESSION_TIMEOUT
        assert (await join(c, member_id="ghost"))["error_code"] == E.UNKNOWN_MEMBER_ID
        a = await join_new(c)
        other = await join(c, protocols=[("sticky", b"")], version_requires_id=False)
        assert other["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        # v0-v3 joins get a member id at once
        b_task = asyncio.ensure_future(join(c, version_requires_id=False))
        await until(lambda: len(c.groups["g"].members) == 2)
        await join(c, member_id=a["member_id"])
        assert (await b_task)["error_code"] == E.NONE
        code, _, _ = await c.sync_group("g", 99, a["member_id"], None, None, None, {})
        assert code == E.ILLEGAL_GENERATION
        code, _, _ = await c.sync_group("g", 2, a["member_id"], None, "consumer", "roundrobin", {})
        assert code == E.INCONSISTENT_GROUP_PROTOCOL
        assert await c.delete_groups(["g", "missing"]) == {"g": E.NON_EMPTY_GROUP, "missing": E.GROUP_ID_NOT_FOUND}
    run(tmp_path, body)


def test_member_that_stops_heartbeating_is_removed(tmp_path):
    async def body(broker, c):
        a = await join_new(c, session=200)
        b_task = asyncio.ensure_future(join_new(c, session=200))
        await until(lambda: c.groups["g"].state is GroupState.PREPARING_REBALANCE)
        # a never rejoins or heartbeats: after its session b is alone in generation 2
        b = await b_task
        assert b["generation_id"] == 2 and [m["member_id"] for m in b["members"]] == [b["member_id"]]
        assert a["member_id"] not in c.groups["g"].members
        await c.sync_group("g", 2, b["member_id"], None, None, None, {})
        # and b, silent too, leaves the group Empty
        await until(lambda: c.groups["g"].state is GroupState.EMPTY)
        assert c.groups["g"].generation_id == 3
    run(tmp_path, body)


def test_static_member_rejoin_keeps_generation(tmp_path):
    async def body(broker, c):
        lead = await join_new(c)
        s_task = asyncio.ensure_future(join(c, instance="inst-1"))
        await until(lambda: c.groups["g"].state is GroupState.PREPARING_REBALANCE)
        await join(c, member_id=lead["member_id"])
        s = await s_task
        await c.sync_group("g", 2, lead["member_id"], None, None, None, {lead["member_id"]: b"L",
                                                                        s["member_id"]: b"S"})
        # the static member restarts: new member id, same generation and assignment, old id fenced
        again = await join(c, instance="inst-1")
        assert again["error_code"] == E.NONE and again["generation_id"] == 2 and again["member_id"] != s["member_id"]
        assert c.groups["g"].state is GroupState.STABLE
        code, asg, _ = await c.sync_group("g", 2, again["member_id"], "inst-1", None, None, {})
        assert (code, asg) == (E.NONE, b"S")
        assert c.heartbeat("g", 2, s["member_id"], "inst-1") == E.FENCED_INSTANCE_ID
        # batch leave by instance id
        assert c.leave_group("g", [("", "inst-1"), ("nobody", None)]) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    run(tmp_path, body)


def test_offsets_commit_fetch_reload_and_load_in_progress(tmp_path):
    async def first(broker, c):
        res = await c.commit_offsets("simple", "", None, -1, {("t", 0): OffsetAndMetadata(10, 1, "meta", 5),
                                                              ("t", 1): OffsetAndMetadata(20, -1, "x" * 5000, 5)})
        assert res == {("t", 0): E.NONE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE}
        assert (await c.commit_offsets("nogroup", "m", None, 3, {("t", 0): OffsetAndMetadata(1)})) == {
            ("t", 0): E.ILLEGAL_GENERATION}
        assert (await c.commit_offsets("nogroup", "m", None, 3, {("t", 0): OffsetAndMetadata(1)}, version=9)) == {
            ("t", 0): E.GROUP_ID_NOT_FOUND}  # Kafka 4.x names the missing group from v9
        a = await join_new(c)
        res = await c.commit_offsets("g", a["member_id"], None, 1, {("t", 0): OffsetAndMetadata(1)})
        assert res == {("t", 0): E.REBALANCE_IN_PROGRESS}  # CompletingRebalance: no commits until the sync
        await c.sync_group("g", 1, a["member_id"], None, None, None, {})
        res = await c.commit_offsets("g", "stranger", None, 1, {("t", 0): OffsetAndMetadata(1)})
        assert res == {("t", 0): E.UNKNOWN_MEMBER_ID}
        res = await c.commit_offsets("g", a["member_id"], None, 1, {("t", 1): OffsetAndMetadata(7, 0, "", 9)})
        assert res == {("t", 1): E.NONE}
        err, found = c.fetch_offsets("simple", [("t", 0), ("t", 1)])
        assert err == E.NONE and found[("t", 0)].offset == 10 and found[("t", 1)] is None
        assert set(c.fetch_offsets("simple", None)[1]) == {("t", 0)}

    run(tmp_path, first)

    async def second():
        broker = make_broker(tmp_path)
        await broker.run_blocking(broker._open_storage)
        await broker.run_blocking(broker._register)  # no listener: the controller gives this broker its partitions
        broker.controller.start()
        await broker._wait_for_metadata()
        await broker.coordinator.start()
        c = broker.coordinator
        try:
            assert c.group_error("simple") == E.COORDINATOR_LOAD_IN_PROGRESS
            assert c.fetch_offsets("simple", None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
            await c.wait_loaded()
            om = c.fetch_offsets("simple", [("t", 0)])[1][("t", 0)]
            assert (om.offset, om.leader_epoch, om.metadata) == (10, 1, "meta")
            assert c.fetch_offsets("g", [("t", 1)])[1][("t", 1)].offset == 7
            # the loaded member has a session timer: without heartbeats it goes and the group empties
            assert c.groups["g"].state is GroupState.STABLE
        finally:
            await broker.coordinator.shutdown()
            await broker.run_blocking(broker.log_manager.shutdown)
            await broker.run_blocking(broker.metadata.close)

    asyncio.run(second())


def test_offsets_of_empty_groups_expire_and_deleted_groups_stay_deleted(tmp_path):
    async def body(broker, c):
        await c.commit_offsets("old", "", None, -1, {("t", 0): OffsetAndMetadata(3, -1, "", 1000)})
        await c.commit_offsets("kept", "", None, -1, {("t", 0): OffsetAndMetadata(4, -1, "", 10**13)})
        await c.commit_offsets("doomed", "", None, -1, {("t", 1): OffsetAndMetadata(5, -1, "", 10**13)})
        assert await c.expire_offsets(1000 + c.retention_ms) == 1
        assert "old" not in c.groups and c.fetch_offsets("old", [("t", 0)])[1][("t", 0)] is None
        assert await c.delete_groups(["doomed"]) == {"doomed": E.NONE}
        assert await c.delete_offsets("kept", [("t", 0)]) == (E.NONE, {("t", 0): E.NONE})
        assert (await c.delete_offsets("missing", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND

    run(tmp_path, body)

    async def reload(broker, c):
        await c.wait_loaded()
        for group in ("old", "doomed", "kept"):
            assert c.fetch_offsets(group, None) == (E.NONE, {})
    run(tmp_path, reload)


@pytest.mark.parametrize("delay_ms", [0, 300])
def test_initial_rebalance_delay_gathers_members_into_one_generation(tmp_path, delay_ms):
    async def body(broker, c):
        tasks = [asyncio.ensure_future(join(c, version_requires_id=False)) for _ in range(3)]
        results = await asyncio.gather(*tasks)
        generations = {r["generation_id"] for r in results}
        if delay_ms:
            assert generations == {1} and sum(bool(r["members"]) for r in results) == 1
        else:
            assert all(r["error_code"] == E.NONE for r in results)
    run(tmp_path, body, group_initial_rebalance_delay_ms=delay_ms)
