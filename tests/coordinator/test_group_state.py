"""The group state machine table and the sans-I/O group logic."""

from __future__ import annotations

import itertools

import pytest

from broker.coordinator.group import (CAN_REBALANCE, TRANSITIONS, Event, Group, GroupState, IllegalTransition,
                                      Member)

S, E = GroupState, Event

# Kafka's valid previous states for each target state (GroupMetadata.scala's table).
KAFKA_VALID_PREVIOUS = {
    S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.EMPTY: {S.PREPARING_REBALANCE},
}


def member(mid: str, protocols=(("range", b"r"), ("roundrobin", b"rr")), instance=None) -> Member:
    return Member(mid, instance, "client", "/127.0.0.1", 30000, 6000, "consumer", list(protocols))


def test_table_allows_exactly_kafkas_transitions():
    """Kafka 2.7's table, and the two conversions of Kafka 4.x's online migration (KIP-848), where Kafka
    replaces the group object: a group whose members move to the consumer protocol leaves the classic side
    Empty from any live state, and a consumer group of classic members only comes back Stable (then rebalances)."""
    classic = {(src, dst) for (src, e), dst in TRANSITIONS.items() if e not in (E.MIGRATE, E.DOWNGRADED)}
    expected = {(src, dst) for dst, srcs in KAFKA_VALID_PREVIOUS.items() for src in srcs}
    assert classic == expected
    conversions = {(src, e, dst) for (src, e), dst in TRANSITIONS.items() if e in (E.MIGRATE, E.DOWNGRADED)}
    assert conversions == {(src, E.MIGRATE, S.EMPTY) for src in GroupState if src is not S.DEAD} | {
        (S.EMPTY, E.DOWNGRADED, S.STABLE)}


@pytest.mark.parametrize("state,event", list(itertools.product(GroupState, Event)))
def test_every_state_event_pair(state, event):
    g = Group("g", state=state)
    if (state, event) in TRANSITIONS:
        assert g.transition(event, 5) is TRANSITIONS[(state, event)]
        assert g.current_state_timestamp == 5
    else:
        with pytest.raises(IllegalTransition):
            g.transition(event, 5)
        assert g.state is state


def test_can_rebalance_states():
    assert CAN_REBALANCE == {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}


def test_first_member_is_leader_and_leadership_moves_on_remove():
    g = Group("g")
    for mid in ("a", "b", "c"):
        g.add(member(mid))
    assert g.leader_id == "a" and g.protocol_type == "consumer"
    g.remove("a")
    assert g.leader_id == "b"
    g.remove("b"), g.remove("c")
    assert g.leader_id is None and not g.members


def test_elect_joined_leader_prefers_a_member_that_rejoined():
    g = Group("g")
    for mid in ("a", "b"):
        g.add(member(mid))
    assert not g.elect_joined_leader() and g.leader_id == "a"  # nobody rejoined: nobody to elect
    g.members["b"].join_waiter = object()
    assert g.elect_joined_leader() and g.leader_id == "b"


def test_protocol_selection_by_votes_among_common_protocols():
    g = Group("g")
    g.add(member("a", [("range", b""), ("roundrobin", b"")]))
    g.add(member("b", [("roundrobin", b""), ("range", b"")]))
    g.add(member("c", [("roundrobin", b""), ("sticky", b"")]))
    assert g.candidate_protocols() == {"roundrobin"}
    assert g.select_protocol() == "roundrobin"
    g.remove("c")
    # a tie between range and roundrobin goes to the leader's preference
    assert g.select_protocol() == "range"


def test_supports_requires_same_type_and_a_common_protocol():
    g = Group("g")
    assert not g.supports("", [("range", b"")])
    assert not g.supports("consumer", [])
    assert g.supports("consumer", [("range", b"")])
    g.add(member("a", [("range", b"")]))
    assert g.supports("consumer", [("range", b""), ("x", b"")])
    assert not g.supports("consumer", [("sticky", b"")])
    assert not g.supports("connect", [("range", b"")])


def test_all_joined_counts_pending_member_ids():
    g = Group("g")
    g.add(member("a"))
    assert not g.all_joined()
    g.members["a"].join_waiter = object()
    assert g.all_joined()
    g.pending_members.add("x")
    assert not g.all_joined()


def test_static_member_replacement_keeps_place_and_leadership():
    g = Group("g")
    g.add(member("a", instance="i1"))
    g.add(member("b"))
    g.members["a"].assignment = b"A"
    replaced = g.replace_static_member("i1", "a", "a2")
    assert replaced.member_id == "a2" and replaced.assignment == b"A"
    assert g.static_member_id("i1") == "a2" and g.leader_id == "a2" and "a" not in g.members


def test_init_next_generation():
    g = Group("g", state=S.PREPARING_REBALANCE)
    g.add(member("a"))
    g.init_next_generation(1)
    assert (g.state, g.generation_id, g.protocol_name) == (S.COMPLETING_REBALANCE, 1, "range")
    g.transition(E.PREPARE_REBALANCE, 2)
    g.remove("a")
    g.init_next_generation(3)
    assert (g.state, g.generation_id, g.protocol_name) == (S.EMPTY, 2, None)


def test_value_roundtrip_loads_members_as_stable():
    g = Group("g", state=S.PREPARING_REBALANCE)
    g.add(member("a", instance="i"))
    g.add(member("b"))
    g.init_next_generation(1)
    g.members["a"].assignment = b"xa"
    g.transition(E.ASSIGNMENT_RECEIVED, 2)
    loaded = Group.from_value("g", g.to_value())
    assert loaded.state is S.STABLE and loaded.generation_id == 1 and loaded.leader_id == "a"
    assert loaded.members["a"].assignment == b"xa" and loaded.static_member_id("i") == "a"
    assert loaded.members["b"].metadata_for("range") == b"r"
    empty = Group("e", state=S.PREPARING_REBALANCE)
    empty.init_next_generation(1)
    assert Group.from_value("e", empty.to_value()).state is S.EMPTY


def test_describe_shows_metadata_only_when_stable():
    g = Group("g", state=S.PREPARING_REBALANCE)
    g.add(member("a"))
    g.init_next_generation(1)
    assert g.describe_members()[0]["member_metadata"] == b""
    g.transition(E.ASSIGNMENT_RECEIVED, 2)
    assert g.describe_members()[0]["member_metadata"] == b"r"
