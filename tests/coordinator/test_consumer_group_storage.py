"""Consumer groups of the consumer protocol (KIP-848) in the coordinator, in-process over a real broker's logs:
what a reload finds after topics changed while nobody coordinated the group, after an append failed, after a
rolling restart of static members between protocols, and after a batch LeaveGroup that ends the consumer protocol's
last member."""

from __future__ import annotations

import asyncio
import uuid

from broker.coordinator.records import partition_for
from broker.coordinator.storage import StorageError
from broker.protocol import ErrorCode as E
from tests.coordinator.inproc import join, run

SUBSCRIPTION_T = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"  # ConsumerProtocol v0: [t]


def hb(group: str, member_id: str, epoch: int, names=None, owned=None, instance=None) -> dict:
    return {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": instance,
            "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1, "subscribed_topic_names": names,
            "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": ([] if epoch == 0 else None) if owned is None else owned}


def partitions(response) -> set[int]:
    return {p for tp in response["assignment"]["topic_partitions"] for p in tp["partitions"]}


async def reload(c, group: str) -> None:
    """The coordinator resigns the group's partition and becomes its leader again (it reads the log back)."""
    part = partition_for(group, c.num_partitions)
    epoch = c.owned[part]
    c._resign(part, epoch)
    c._become_leader(part, epoch + 1)
    await c.wait_loaded()


def test_partitions_added_while_the_group_was_not_coordinated_are_assigned_after_a_reload(tmp_path):
    async def body(broker, c):
        await c.serving_error("g")
        await c.wait_loaded()
        r = await c.consumer_group_heartbeat(hb("g", "a", 0, names=["t"]), 1, "x", "/h")
        assert partitions(r) == {0, 1}
        part = partition_for("g", c.num_partitions)
        c._resign(part, c.owned[part])
        await broker.topics.create_partitions("t", 4)
        for _ in range(100):
            if c.topic_source()["t"][1] == 4:
                break
            await asyncio.sleep(0.05)
        c._become_leader(part, 99)
        await c.wait_loaded()
        r = await c.consumer_group_heartbeat(hb("g", "a", r["member_epoch"], owned=r["assignment"]["topic_partitions"]),
                                             1, "x", "/h")
        assert r["error_code"] == E.NONE and partitions(r) == {0, 1, 2, 3}

    run(tmp_path, body)


def test_a_leave_whose_write_failed_is_written_with_the_next_change(tmp_path):
    async def body(broker, c):
        await c.serving_error("g")
        await c.wait_loaded()
        a = await c.consumer_group_heartbeat(hb("g", "a", 0, names=["t"]), 1, "x", "/h")
        b = await c.consumer_group_heartbeat(hb("g", "b", 0, names=["t"]), 1, "x", "/h")
        real = c._append
        failures = [1]

        def flaky(group_id, records):
            if failures and failures.pop():
                async def refused():
                    raise StorageError(E.NOT_ENOUGH_REPLICAS, "refused for the test")
                return refused()
            return real(group_id, records)

        c._append = flaky
        r = await c.consumer_group_heartbeat(hb("g", "a", -1), 1, "x", "/h")
        assert r["error_code"] == E.NONE  # the leave stands; its records wait for the next write
        epoch = b["member_epoch"]
        for _ in range(3):
            b = await c.consumer_group_heartbeat(hb("g", "b", epoch), 1, "x", "/h")
            epoch = b["member_epoch"]
        assert c.groups["g"].modern.members["b"].assigned and len(c.groups["g"].modern.members) == 1
        await reload(c, "g")
        state = c.groups["g"].modern
        assert set(state.members) == {"b"}
        assert {p for ps in state.members["b"].assigned.values() for p in ps} == {0, 1}
        assert a["member_epoch"] >= 1

    run(tmp_path, body)


def test_static_members_move_between_protocols_in_a_rolling_restart(tmp_path):
    async def body(broker, c):
        # a classic static member; a consumer-protocol member upgrades the group
        j = await join(c, "g", instance="s1", protocols=[("range", SUBSCRIPTION_T)])
        assert j["error_code"] == E.NONE
        sync = await c.sync_group("g", j["generation_id"], j["member_id"], "s1", "consumer", "range",
                                  {j["member_id"]: b""})
        assert sync[0] == E.NONE
        m = await c.consumer_group_heartbeat(hb("g", "m", 0, names=["t"]), 1, "x", "/h")
        assert m["error_code"] == E.NONE and c.groups["g"].modern is not None
        # the classic static member restarts as a classic member (new id): it keeps its place
        j2 = await join(c, "g", instance="s1", protocols=[("range", SUBSCRIPTION_T)])
        assert j2["error_code"] == E.NONE and j2["member_id"] != j["member_id"]
        code, _assignment, _group = await c.sync_group("g", j2["generation_id"], j2["member_id"], "s1", "consumer",
                                                       "range", {})
        assert code in (E.NONE, E.REBALANCE_IN_PROGRESS)
        assert c.heartbeat("g", j2["generation_id"], j2["member_id"], "s1") in (E.NONE, E.REBALANCE_IN_PROGRESS)
        # then restarts with the consumer protocol: the classic static member is replaced, no refusal
        s = await c.consumer_group_heartbeat(hb("g", "s-new", 0, names=["t"], instance="s1"), 1, "x", "/h")
        assert s["error_code"] == E.NONE
        state = c.groups["g"].modern
        assert state.static_members == {"s1": "s-new"} and set(state.members) == {"m", "s-new"}
        assert all(member.classic is None for member in state.members.values())
        await reload(c, "g")
        assert set(c.groups["g"].modern.members) == {"m", "s-new"}

    run(tmp_path, body)


def test_a_batch_leave_that_ends_the_consumer_protocol_removes_every_member_named(tmp_path):
    async def body(broker, c):
        j = await join(c, "g", protocols=[("range", SUBSCRIPTION_T)])
        j = await join(c, "g", member_id=j["member_id"], protocols=[("range", SUBSCRIPTION_T)])
        await c.sync_group("g", j["generation_id"], j["member_id"], None, "consumer", "range", {j["member_id"]: b""})
        m = await c.consumer_group_heartbeat(hb("g", "m", 0, names=["t"]), 1, "x", "/h")
        assert m["error_code"] == E.NONE
        other = await join(c, "g", protocols=[("range", SUBSCRIPTION_T)])  # a second classic member
        other = await join(c, "g", member_id=other["member_id"], protocols=[("range", SUBSCRIPTION_T)])
        assert other["error_code"] == E.NONE
        top, errors = c.leave_group("g", [("m", None), (other["member_id"], None)])
        assert (top, errors) == (E.NONE, [E.NONE, E.NONE])
        group = c.groups["g"]
        assert group.modern is None and set(group.members) == {j["member_id"]}  # classic, with the one left

    run(tmp_path, body)


def test_regexes_are_matched_in_linear_time(tmp_path):
    """A pattern that makes a backtracking engine take exponential time is answered at once (RE2, as Kafka's RE2J)."""
    async def body(broker, c):
        await broker.topics.create_topic("a" * 60, num_partitions=1)
        await c.serving_error("g")
        await c.wait_loaded()
        request = hb("g", str(uuid.uuid4()), 0)
        request["subscribed_topic_regex"] = r"(\w|\w)*-"
        loop = asyncio.get_running_loop()
        started = loop.time()
        r = await c.consumer_group_heartbeat(request, 1, "x", "/h")
        assert r["error_code"] == E.NONE and loop.time() - started < 5  # a hang guard, not a timing assertion

    run(tmp_path, body)
