"""Static members and join phases that end with nobody to lead, in-process over a real
broker's logs: what Kafka's updateStaticMemberAndRebalance and onCompleteJoin do."""

from __future__ import annotations

import asyncio
import time

from broker.coordinator.group import GroupState
from broker.protocol import ErrorCode
from tests.coordinator.inproc import PROTOCOLS, join, join_new, run, until

E, S = ErrorCode, GroupState


async def stable_static(c, instance="i", **kw):
    r = await join(c, instance=instance, **kw)
    assert r["error_code"] == E.NONE and r["leader"] == r["member_id"]
    code, _, _ = await c.sync_group("g", r["generation_id"], r["member_id"], instance, None, None,
                                    {r["member_id"]: b"mine"})
    assert code == E.NONE and c.groups["g"].state is S.STABLE
    return r


def test_rejoin_that_changes_the_selected_protocol_rebalances(tmp_path):
    async def body(broker, c):
        first = await stable_static(c)
        again = await join(c, instance="i", protocols=[("roundrobin", b"rr")] + PROTOCOLS)
        assert again["generation_id"] == first["generation_id"] + 1 and again["protocol_name"] == "roundrobin"
        assert again["leader"] == again["member_id"] != first["member_id"]
    run(tmp_path, body)


def test_rejoin_takes_the_requests_timeouts_and_restarts_the_session(tmp_path):
    async def body(broker, c):
        first = await stable_static(c, session=6000, rebalance=2000)
        again = await join(c, instance="i", session=400, rebalance=9000)
        assert again["generation_id"] == first["generation_id"] and again["leader"] == first["member_id"]
        member = c.groups["g"].members[again["member_id"]]
        assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (400, 9000)
        # nobody heartbeats for the new id: its new 400 ms session expires, not the old 6 s one
        await until(lambda: c.groups["g"].state is not S.STABLE, limit=3.0)
    run(tmp_path, body, group_min_session_timeout_ms=100)


def test_join_phase_with_no_member_back_waits_another_rebalance_timeout(tmp_path):
    rebalance_s, session_s = 0.3, 2.5

    async def body(broker, c):
        gone = await stable_static(c, session=int(session_s * 1000), rebalance=int(rebalance_s * 1000))
        last_heartbeat = time.monotonic()
        assert c.heartbeat("g", 1, gone["member_id"], "i") == E.NONE
        # a dynamic member joins and leaves again: a join phase the static member never answers
        other = asyncio.ensure_future(join_new(c, rebalance=int(rebalance_s * 1000)))
        await until(lambda: len(c.groups["g"].members) == 2)
        dynamic = next(m for m in c.groups["g"].members if m != gone["member_id"])
        assert c.leave_group("g", [(dynamic, None)]) == (E.NONE, [E.NONE])
        assert (await other)["error_code"] == E.UNKNOWN_MEMBER_ID
        # several rebalance timeouts pass: no generation with an absent leader
        await asyncio.sleep(4 * rebalance_s)
        group = c.groups["g"]
        assert (group.state, group.generation_id) == (S.PREPARING_REBALANCE, 1)
        # the session expiry removes the member; the group ends Empty, not before the session ran out
        await until(lambda: group.state is S.EMPTY, limit=session_s + 10)
        assert time.monotonic() - last_heartbeat >= session_s - 0.1
        assert group.generation_id == 2 and not group.members
    run(tmp_path, body, group_min_session_timeout_ms=100)


def test_static_member_back_during_the_wait_leads_the_next_generation(tmp_path):
    async def body(broker, c):
        gone = await stable_static(c, session=30000, rebalance=200)
        other = asyncio.ensure_future(join_new(c, rebalance=200))
        await until(lambda: len(c.groups["g"].members) == 2)
        dynamic = next(m for m in c.groups["g"].members if m != gone["member_id"])
        c.leave_group("g", [(dynamic, None)])
        await other
        await asyncio.sleep(0.6)  # three rebalance timeouts with nobody back
        assert c.groups["g"].state is S.PREPARING_REBALANCE
        back = await asyncio.wait_for(join(c, instance="i", rebalance=200), timeout=5)
        assert back["generation_id"] == 2 and back["leader"] == back["member_id"] != gone["member_id"]
        assert [m["member_id"] for m in back["members"]] == [back["member_id"]]
        assert c.groups["g"].state is S.COMPLETING_REBALANCE
    run(tmp_path, body)
