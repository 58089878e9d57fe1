"""A consumer group's state: the state machine as a table, members, protocol selection.

Kafka's group states and the only transitions allowed between them::

    Empty ──join──▶ PreparingRebalance ──all joined──▶ CompletingRebalance ──leader sync──▶ Stable
      ▲                 │   ▲                                  │                             │
      └──nobody joined──┘   └──── member joins/leaves/fails ───┴─────────────────────────────┘
    any state ──group deleted / offsets expired / partition unloaded──▶ Dead
    any live state ──members moved to the consumer protocol (KIP-848)──▶ Empty ──back to classic──▶ Stable

:data:`TRANSITIONS` holds every allowed ``(state, event) -> state``; :meth:`Group.transition`
is the only way to change ``Group.state`` and raises :class:`IllegalTransition` for
anything else, so a bug in the async layer shows up as an exception, not as a
silently wrong group.

This module is sans-I/O and has no timers: the async layer
(:mod:`broker.coordinator.coordinator`) keeps futures and timer handles on the
members it owns (``join_waiter``, ``sync_waiter``, ``heartbeat_timer``) and
drives the group through these methods. Not thread-safe: one event loop owns
every group.
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.records import GroupMetadataValue, MemberMetadata, OffsetAndMetadata


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Event(enum.Enum):
    #: a member joined, left, failed or changed its protocols
    PREPARE_REBALANCE = "prepare_rebalance"
    #: the join phase ended with members: a new generation, waiting for the leader's assignment
    JOIN_COMPLETE = "join_complete"
    #: the join phase ended with nobody left
    JOIN_COMPLETE_EMPTY = "join_complete_empty"
    #: the leader's SyncGroup carried the assignment
    ASSIGNMENT_RECEIVED = "assignment_received"
    #: the group was deleted, its offsets expired, or its partition was unloaded
    REMOVE = "remove"
    #: its members moved to the consumer protocol (KIP-848): the classic side of the group is left Empty
    MIGRATE = "migrate"
    #: a consumer group of classic members only became a classic group again (a rebalance follows)
    DOWNGRADED = "downgraded"


S, E = GroupState, Event

CONSUMER_PROTOCOL_TYPE = "consumer"

TRANSITIONS: dict[tuple[GroupState, Event], GroupState] = {
    (S.EMPTY, E.PREPARE_REBALANCE): S.PREPARING_REBALANCE,
    (S.STABLE, E.PREPARE_REBALANCE): S.PREPARING_REBALANCE,
    (S.COMPLETING_REBALANCE, E.PREPARE_REBALANCE): S.PREPARING_REBALANCE,
    (S.PREPARING_REBALANCE, E.JOIN_COMPLETE): S.COMPLETING_REBALANCE,
    (S.PREPARING_REBALANCE, E.JOIN_COMPLETE_EMPTY): S.EMPTY,
    (S.COMPLETING_REBALANCE, E.ASSIGNMENT_RECEIVED): S.STABLE,
    (S.EMPTY, E.REMOVE): S.DEAD,
    (S.PREPARING_REBALANCE, E.REMOVE): S.DEAD,
    (S.COMPLETING_REBALANCE, E.REMOVE): S.DEAD,
    (S.STABLE, E.REMOVE): S.DEAD,
    (S.DEAD, E.REMOVE): S.DEAD,
    (S.EMPTY, E.MIGRATE): S.EMPTY,
    (S.PREPARING_REBALANCE, E.MIGRATE): S.EMPTY,
    (S.COMPLETING_REBALANCE, E.MIGRATE): S.EMPTY,
    (S.STABLE, E.MIGRATE): S.EMPTY,
    (S.EMPTY, E.DOWNGRADED): S.STABLE,
}

#: States in which a member change starts a rebalance (Kafka's ``canRebalance``).
CAN_REBALANCE = frozenset(s for (s, e) in TRANSITIONS if e is E.PREPARE_REBALANCE)


class IllegalTransition(RuntimeError):
    """The async layer asked for a transition the table does not allow (a bug)."""


def consumer_subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a ConsumerProtocol subscription; raises ValueError if it does not parse.

    Every version starts with version 0's layout, which is all this reads::

        version:int16  topics:int32 count, then per topic  length:int16 + UTF-8 bytes
        user_data:bytes  (and, from version 1, owned partitions: not read)
    """
    try:
        count = struct.unpack_from(">i", metadata, 2)[0]
        if count < 0:
            raise ValueError("negative topic count")
        pos, topics = 6, []
        for _ in range(count):
            n = struct.unpack_from(">h", metadata, pos)[0]
            if n < 0 or pos + 2 + n > len(metadata):
                raise ValueError("bad topic name length")
            topics.append(bytes(metadata[pos + 2:pos + 2 + n]).decode("utf-8"))
            pos += 2 + n
        return topics
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a ConsumerProtocol subscription: {exc}") from None


@dataclass(slots=True, eq=False)
class Member:
    """One member of a group. ``protocols`` is the JoinGroup list of (name, metadata)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: set by the async layer while a JoinGroup / SyncGroup response is held back
    join_waiter: Any = None
    sync_waiter: Any = None
    heartbeat_timer: Any = None
    #: joined the group and has not had a JoinGroup answer yet (Kafka's ``isNew``): the
    #: async layer removes it after the new-member join timeout instead of keeping it alive
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def update(self, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
               session_timeout_ms: int) -> tuple[list[tuple[str, bytes]], int, int]:
        """Take a JoinGroup's protocols and timeouts; returns the previous ones (to undo with)."""
        before = (self.protocols, self.rebalance_timeout_ms, self.session_timeout_ms)
        self.protocols, self.rebalance_timeout_ms, self.session_timeout_ms = (
            protocols, rebalance_timeout_ms, session_timeout_ms)
        return before

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass(slots=True, eq=False)
class Group:
    """One group: state, generation, members and committed offsets (see the module docstring)."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: member ids handed out with MEMBER_ID_REQUIRED, not yet joined with them
    pending_members: set[str] = field(default_factory=set)
    #: group.instance.id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    current_state_timestamp: int = -1
    #: a member joined during the initial delayed rebalance (extends the delay)
    new_member_added: bool = False
    #: the async layer's join-phase timer, and whether it is the initial delay
    join_timer: Any = None
    join_initial: bool = False
    #: topics the members of a consumer-protocol group subscribe to, fixed at each new
    #: generation (Kafka's ``subscribedTopics``); None when unknown (another protocol
    #: type, or a subscription that does not parse), so no topic counts as unsubscribed
    subscribed_topics: set[str] | None = None
    #: a group of the consumer rebalance protocol (KIP-848): its members, epochs and assignment
    #: (:class:`broker.coordinator.consumer_group.ConsumerGroupState`); None for a classic group. Such a group
    #: has no classic members and stays Empty in the classic state machine.
    modern: Any = None

    @property
    def type_name(self) -> str:
        """ListGroups' group type: ``consumer`` (KIP-848) or ``classic``."""
        return "consumer" if self.modern is not None else "classic"

    @property
    def state_name(self) -> str:
        """The state as ListGroups names it: the consumer protocol's states for such a group."""
        return self.modern.state if self.modern is not None and not self.is_(GroupState.DEAD) else self.state.value

    @property
    def has_consumer_members(self) -> bool:
        return self.modern is not None and bool(self.modern.members)

    # -- the state machine ----------------------------------------------------------------------
    def transition(self, event: Event, now_ms: int) -> GroupState:
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise IllegalTransition(f"group {self.group_id!r}: no transition from {self.state.value} on {event.value}")
        self.state = new
        self.current_state_timestamp = now_ms
        return new

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def can_rebalance(self) -> bool:
        return self.state in CAN_REBALANCE

    # -- members --------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """A static member rejoined without its member id: it keeps its place under a new id."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def all_joined(self) -> bool:
        """Every known member has a JoinGroup waiting and nobody holds an unused member id."""
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Kafka's ``maybeElectNewJoinedLeader``: if the leader did not rejoin, make the first
        member that did the leader. False when no member rejoined (the leader stays as it was):
        a generation then has nobody to lead it."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m.member_id for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    # -- protocols ------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """May a member with these protocols join? (same type, and a protocol in common)."""
        names = {n for n, _ in protocols}
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol every member supports that gets the most first-choice votes.

        Ties go to the candidate first named by the leader (or the first member),
        so the choice is deterministic.
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id!r}: members share no protocol")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        leader = self.members.get(self.leader_id) or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def init_next_generation(self, now_ms: int) -> None:
        """End the join phase: a new generation, its protocol, and the next state."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(Event.JOIN_COMPLETE, now_ms)
        else:
            self.protocol_name = None
            self.transition(Event.JOIN_COMPLETE_EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Kafka's ``computeSubscribedTopics``: the union of the members' subscriptions."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(consumer_subscription_topics(m.metadata_for(self.protocol_name)))
        except (KeyError, ValueError):
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """True unless the group is known not to subscribe to ``topic`` (unknown counts as subscribed)."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def clear_assignments(self) -> None:
        for m in self.members.values():
            m.assignment = b""

    # -- persistence ----------------------------------------------------------------------------
    def to_value(self) -> GroupMetadataValue:
        """The group metadata record value for the current generation."""
        members = []
        for m in self.members.values():
            subscription = m.metadata_for(self.protocol_name) if self.protocol_name else b""
            members.append(MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                          m.rebalance_timeout_ms, m.session_timeout_ms, subscription, m.assignment))
        return GroupMetadataValue(self.protocol_type or "", self.generation_id, self.protocol_name, self.leader_id,
                                  self.current_state_timestamp, members)

    @classmethod
    def from_value(cls, group_id: str, value: GroupMetadataValue) -> "Group":
        """A group loaded from the log: Empty when it has no members, else Stable (as Kafka loads it)."""
        group = cls(group_id, protocol_type=value.protocol_type or None, protocol_name=value.protocol,
                    generation_id=value.generation, leader_id=value.leader,
                    current_state_timestamp=value.current_state_timestamp)
        for mm in value.members:
            member = Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host, mm.rebalance_timeout,
                            mm.session_timeout, value.protocol_type, [(value.protocol or "", mm.subscription)],
                            assignment=mm.assignment)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def describe_members(self) -> list[dict]:
        """DescribeGroups member entries: metadata and assignment only when Stable (as Kafka)."""
        stable = self.state is GroupState.STABLE and self.protocol_name is not None
        out = []
        for m in self.members.values():
            out.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(self.protocol_name) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            })
        return out
