"""Offset expiry (Kafka 2.7's rules) and the new-member join timeout.

The rules are checked on plain groups; the coordinator's use of them, the
tombstones and the timers run in-process over a real broker's logs and a real loop
(tests wait for conditions, never assert on durations)."""

from __future__ import annotations

import asyncio

from broker.coordinator.group import Event, Group, GroupState, Member
from broker.coordinator.offsets import expired_partitions
from broker.coordinator.records import OffsetAndMetadata
from broker.protocol import ErrorCode
from tests.coordinator.inproc import PROTOCOLS, join, join_new, run, until

E, S = ErrorCode, GroupState
RETENTION = 60_000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocol subscription v0 (version, topics, null user data)."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def stable_group(protocol_type: str, *subscriptions: bytes) -> Group:
    g = Group("g", state=S.PREPARING_REBALANCE)
    for i, sub in enumerate(subscriptions):
        g.add(Member(f"m{i}", None, "c", "/h", 30000, 6000, protocol_type, [("range", sub)]))
    g.init_next_generation(0)
    g.transition(Event.ASSIGNMENT_RECEIVED, 0)
    return g


def test_stable_consumer_group_expires_only_unsubscribed_topics_by_commit_time():
    g = stable_group("consumer", subscription("a"), subscription("b"))
    assert g.subscribed_topics == {"a", "b"}
    g.offsets = {("a", 0): OffsetAndMetadata(1, commit_timestamp=100), ("b", 0): OffsetAndMetadata(1, commit_timestamp=100),
                 ("gone", 0): OffsetAndMetadata(1, commit_timestamp=100),
                 ("gone", 1): OffsetAndMetadata(1, commit_timestamp=5000)}
    assert expired_partitions(g, 100 + RETENTION - 1, RETENTION) == []
    assert expired_partitions(g, 100 + RETENTION, RETENTION) == [("gone", 0)]
    assert sorted(expired_partitions(g, 10**12, RETENTION)) == [("gone", 0), ("gone", 1)]
    # the rule holds during a rebalance too (subscriptions of the last generation)
    g.transition(Event.PREPARE_REBALANCE, 1)
    assert sorted(expired_partitions(g, 10**12, RETENTION)) == [("gone", 0), ("gone", 1)]


def test_groups_whose_subscriptions_are_unknown_keep_their_offsets():
    other = stable_group("connect", subscription("a"))
    garbled = stable_group("consumer", b"\x00\x00\x00\x00\x00\x05\x00")
    assert other.subscribed_topics is None and garbled.subscribed_topics is None
    for g in (other, garbled):
        g.offsets = {("x", 0): OffsetAndMetadata(1, commit_timestamp=0)}
        assert expired_partitions(g, 10**12, RETENTION) == []
        assert g.is_subscribed_to_topic("x")


def test_empty_and_standalone_groups_and_explicit_expire_timestamps():
    empty = Group("e", protocol_type="consumer", current_state_timestamp=10_000)
    empty.offsets = {("t", 0): OffsetAndMetadata(1, commit_timestamp=0)}
    # retention counts from when the group became Empty, not from the commit
    assert expired_partitions(empty, 10_000 + RETENTION - 1, RETENTION) == []
    assert expired_partitions(empty, 10_000 + RETENTION, RETENTION) == [("t", 0)]
    standalone = Group("s")
    standalone.offsets = {("t", 0): OffsetAndMetadata(1, commit_timestamp=7),
                          ("t", 1): OffsetAndMetadata(1, commit_timestamp=7, expire_timestamp=10**13)}
    assert expired_partitions(standalone, 7 + RETENTION, RETENTION) == [("t", 0)]
    # an explicit expire timestamp (OffsetCommit v2-v4) is when it expires, unless a member subscribes to it
    stable = stable_group("consumer", subscription("t"))
    stable.offsets = {("t", 0): OffsetAndMetadata(1, commit_timestamp=0, expire_timestamp=50),
                      ("u", 0): OffsetAndMetadata(1, commit_timestamp=0, expire_timestamp=50)}
    assert expired_partitions(stable, 49, RETENTION) == []
    assert expired_partitions(stable, 50, RETENTION) == [("u", 0)]


def test_coordinator_expires_unsubscribed_offsets_of_a_stable_group_and_reload_agrees(tmp_path):
    async def body(broker, c):
        a = await join_new(c)  # PROTOCOLS subscribe to topic "t"
        await c.sync_group("g", 1, a["member_id"], None, None, None, {a["member_id"]: b""})
        assert c.groups["g"].state is S.STABLE and c.groups["g"].subscribed_topics == {"t"}
        res = await c.commit_offsets("g", a["member_id"], None, 1, {
            ("t", 0): OffsetAndMetadata(5, commit_timestamp=1000),
            ("old-topic", 0): OffsetAndMetadata(9, commit_timestamp=1000)})
        assert set(res.values()) == {E.NONE}
        assert await c.expire_offsets(1000 + c.retention_ms - 1) == 0
        assert await c.expire_offsets(1000 + c.retention_ms) == 1
        assert set(c.fetch_offsets("g", None)[1]) == {("t", 0)}
        assert c.groups["g"].state is S.STABLE

    run(tmp_path, body)

    async def reload(broker, c):
        await c.wait_loaded()
        group = c.groups["g"]
        # the tombstone is in the log; the loaded member's subscription is known again
        assert set(c.fetch_offsets("g", None)[1]) == {("t", 0)} and group.subscribed_topics == {"t"}
        assert group.state is S.STABLE and await c.expire_offsets(10**13) == 0  # "t" is still subscribed

    run(tmp_path, reload)


def test_new_member_whose_join_is_held_too_long_is_removed(tmp_path):
    async def body(broker, c):
        a = await join_new(c, session=30000, rebalance=30000)
        await c.sync_group("g", 1, a["member_id"], None, None, None, {a["member_id"]: b""})
        # b joins; the rebalance waits for a (rebalance timeout 30 s), b's join is held
        b_task = asyncio.ensure_future(join_new(c, session=30000, rebalance=30000))
        await until(lambda: len(c.groups["g"].members) == 2)
        b = await asyncio.wait_for(b_task, 20)  # the join timeout (200 ms) answers it first
        assert b["error_code"] == E.UNKNOWN_MEMBER_ID
        assert list(c.groups["g"].members) == [a["member_id"]]
        assert c.groups["g"].state is S.PREPARING_REBALANCE
        # a, not new, is kept while the rebalance waits; its rejoin completes it alone
        a2 = await join(c, member_id=a["member_id"], session=30000, rebalance=30000)
        assert a2["error_code"] == E.NONE and a2["generation_id"] == 2
        assert [m["member_id"] for m in a2["members"]] == [a["member_id"]]
        assert not c.groups["g"].members[a["member_id"]].is_new

    run(tmp_path, body, group_new_member_join_timeout_ms=200)


def test_member_id_handed_out_but_never_used_is_forgotten(tmp_path):
    async def body(broker, c):
        first = await join(c, session=100)
        assert first["error_code"] == E.MEMBER_ID_REQUIRED
        assert first["member_id"] in c.groups["g"].pending_members
        await until(lambda: not c.groups["g"].pending_members)
        late = await join(c, member_id=first["member_id"], session=100)
        assert late["error_code"] == E.UNKNOWN_MEMBER_ID

    run(tmp_path, body)


def test_default_join_timeout_keeps_a_normal_first_rebalance(tmp_path):
    async def body(broker, c):
        assert c.new_member_join_timeout_ms == 300_000
        r = await join_new(c, protocols=PROTOCOLS)
        assert r["error_code"] == E.NONE and r["generation_id"] == 1

    run(tmp_path, body)
