"""Static membership (KIP-345) over the wire against a broker process, as Kafka's
GroupCoordinator answers it: a static member that comes back with an empty member id
takes its old place without a rebalance; the old id is fenced; JoinGroup v9 answers a
returning leader the KIP-814 way."""

from __future__ import annotations

import pytest

from broker.protocol import ApiKey, ErrorCode
from tests.coordinator.helpers import group_records
from tests.server.wire import Wire

E = ErrorCode
OFFSETS_PARTITIONS = 3
RANGE = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"  # v0 subscription: [t]


def join_body(instance, member_id="", protocols=(("range", RANGE),), reason=None):
    return {"group_id": "g", "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": member_id,
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": n, "metadata": m} for n, m in protocols], "reason": reason}


def sync_body(generation, member_id, instance, assignments=()):
    return {"group_id": "g", "generation_id": generation, "member_id": member_id, "group_instance_id": instance,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}


def heartbeat(w, generation, member_id, instance):
    return w.call(ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": generation, "member_id": member_id,
                                        "group_instance_id": instance})["error_code"]


def state(w):
    return w.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False}
                  )["groups"][0]["group_state"]


@pytest.fixture
def group_broker(broker_factory):
    return broker_factory(offsets_topic_num_partitions=OFFSETS_PARTITIONS)


def two_static_members(bootstrap, a, b):
    """Static members "a" (leader, on ``a``) and "b" (on ``b``) in generation 2; returns their ids."""
    first = a.call(ApiKey.JOIN_GROUP, 5, join_body("a"))
    assert (first["error_code"], first["generation_id"]) == (E.NONE, 1)
    a_id = first["member_id"]
    cid = b.send(ApiKey.JOIN_GROUP, 5, join_body("b"))
    with Wire(bootstrap) as w:  # the leader learns of the rebalance and rejoins
        while heartbeat(w, 1, a_id, "a") != E.REBALANCE_IN_PROGRESS:
            pass
    lead = a.call(ApiKey.JOIN_GROUP, 5, join_body("a", a_id))
    got, follower = b.receive(ApiKey.JOIN_GROUP, 5)
    assert got == cid and lead["generation_id"] == follower["generation_id"] == 2
    assert lead["leader"] == a_id and len(lead["members"]) == 2
    return a_id, follower["member_id"]


@pytest.mark.parametrize("version", [5, 9])
def test_returning_leader_keeps_generation_and_assignment(group_broker, version):
    bootstrap = group_broker.bootstrap
    with Wire(bootstrap) as a, Wire(bootstrap) as b:
        a_id, b_id = two_static_members(bootstrap, a, b)
        cid = b.send(ApiKey.SYNC_GROUP, 5, sync_body(2, b_id, "b"))
        r = a.call(ApiKey.SYNC_GROUP, 5, sync_body(2, a_id, "a", [(a_id, b"A"), (b_id, b"B")]))
        assert (r["error_code"], bytes(r["assignment"])) == (E.NONE, b"A")
        assert bytes(b.receive(ApiKey.SYNC_GROUP, 5)[1]["assignment"]) == b"B"

    # the leader's process restarts: an empty member id with its group.instance.id, new subscription bytes
    changed = RANGE[:-4] + b"\x00\x00\x00\x02ud"
    with Wire(bootstrap) as a2, Wire(bootstrap) as w:
        r = a2.call(ApiKey.JOIN_GROUP, version, join_body("a", protocols=[("range", changed)], reason="restart"))
        new_id = r["member_id"]
        assert r["error_code"] == E.NONE and new_id not in ("", a_id) and r["generation_id"] == 2
        assert r["protocol_name"] == "range"
        if version >= 9:  # KIP-814: told it leads, with the members, and to skip its assignor
            assert r["leader"] == new_id and r["skip_assignment"] is True
            assert sorted(m["member_id"] for m in r["members"]) == sorted([new_id, b_id])
        else:  # the old leader id: the returning leader acts as a follower
            assert r["leader"] == a_id and r["members"] == []
        # whatever it sends, a Stable group hands it its stored assignment
        r = a2.call(ApiKey.SYNC_GROUP, 5, sync_body(2, new_id, "a", [(new_id, b"other")]))
        assert (r["error_code"], bytes(r["assignment"])) == (E.NONE, b"A")
        # the other member sees no rebalance; the old id is fenced
        assert heartbeat(w, 2, b_id, "b") == E.NONE
        assert heartbeat(w, 2, new_id, "a") == E.NONE
        assert heartbeat(w, 2, a_id, "a") == E.FENCED_INSTANCE_ID
        assert state(w) == "Stable"
    last = group_records(group_broker.data_dir, "g", OFFSETS_PARTITIONS)[-1]
    assert last.generation == 2 and last.leader == new_id
    stored = {m.member_id: (m.group_instance_id, m.subscription, m.assignment) for m in last.members}
    assert stored == {new_id: ("a", changed, b"A"), b_id: ("b", RANGE, b"B")}


def test_old_id_fenced_in_sync_and_in_join(group_broker):
    bootstrap = group_broker.bootstrap
    with Wire(bootstrap) as a, Wire(bootstrap) as b, Wire(bootstrap) as b2, Wire(bootstrap) as w:
        a_id, b_id = two_static_members(bootstrap, a, b)
        # CompletingRebalance: b's SyncGroup waits for the leader; b restarts meanwhile
        b.send(ApiKey.SYNC_GROUP, 5, sync_body(2, b_id, "b"))
        cid = b2.send(ApiKey.JOIN_GROUP, 5, join_body("b"))
        assert b.receive(ApiKey.SYNC_GROUP, 5)[1]["error_code"] == E.FENCED_INSTANCE_ID
        # the leader may have assigned to the old id: a rebalance, which the new id joins
        assert state(w) == "PreparingRebalance"
        lead = a.call(ApiKey.JOIN_GROUP, 5, join_body("a", a_id))
        got, r = b2.receive(ApiKey.JOIN_GROUP, 5)
        b2_id = r["member_id"]
        assert got == cid and r["generation_id"] == lead["generation_id"] == 3 and b2_id != b_id
        assert sorted(m["member_id"] for m in lead["members"]) == sorted([a_id, b2_id])
        b2.send(ApiKey.SYNC_GROUP, 5, sync_body(3, b2_id, "b"))
        a.call(ApiKey.SYNC_GROUP, 5, sync_body(3, a_id, "a", [(a_id, b"A"), (b2_id, b"B")]))
        assert bytes(b2.receive(ApiKey.SYNC_GROUP, 5)[1]["assignment"]) == b"B"

        # PreparingRebalance: b's JoinGroup is held (a has not rejoined) when b restarts again
        b2.send(ApiKey.JOIN_GROUP, 5, join_body("b", b2_id, protocols=[("range", RANGE + b"x")]))
        while state(w) != "PreparingRebalance":
            pass
        with Wire(bootstrap) as b3:
            cid = b3.send(ApiKey.JOIN_GROUP, 5, join_body("b"))
            assert b2.receive(ApiKey.JOIN_GROUP, 5)[1]["error_code"] == E.FENCED_INSTANCE_ID
            assert state(w) == "PreparingRebalance"  # the new id just took the join
            lead = a.call(ApiKey.JOIN_GROUP, 5, join_body("a", a_id))
            got, r = b3.receive(ApiKey.JOIN_GROUP, 5)
            assert got == cid and r["error_code"] == E.NONE and r["generation_id"] == lead["generation_id"] == 4
            # the fenced id stays fenced for every API
            assert heartbeat(w, 4, b2_id, "b") == E.FENCED_INSTANCE_ID
            r = w.call(ApiKey.SYNC_GROUP, 5, sync_body(4, b2_id, "b"))
            assert r["error_code"] == E.FENCED_INSTANCE_ID
            r = w.call(ApiKey.JOIN_GROUP, 5, join_body("b", b2_id))
            assert r["error_code"] == E.FENCED_INSTANCE_ID


def test_leave_group_v5_reason_and_join_v8_reason_are_logged(group_broker):
    with Wire(group_broker.bootstrap) as w:
        r = w.call(ApiKey.JOIN_GROUP, 8, join_body("a", reason="starting up"))
        assert r["error_code"] == E.NONE
        r = w.call(ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [
            {"member_id": r["member_id"], "group_instance_id": "a", "reason": "scaling down"}]})
        assert [m["error_code"] for m in r["members"]] == [E.NONE]
        assert state(w) == "Empty"
    group_broker.stop()
    log = group_broker.stderr_text()
    assert "client reason: starting up" in log and "client reason: scaling down" in log
