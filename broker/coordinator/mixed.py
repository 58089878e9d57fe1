"""Consumer groups with members of both protocols: how a running group moves between the classic protocol and
the consumer protocol (KIP-848) without stopping, as Kafka 4.x's ``group.consumer.migration.policy`` allows:
``bidirectional`` (the default) both ways, ``upgrade`` or ``downgrade`` one way, ``disabled`` neither (a classic
member joining a consumer group is then INCONSISTENT_GROUP_PROTOCOL). A mixin of :class:`broker.coordinator.GroupCoordinator`.

* **Upgrade.** A ConsumerGroupHeartbeat joining a classic group that has members (of the ``consumer``
  protocol type) turns it into a consumer group. Each classic member becomes a member of it that still speaks
  the classic protocol: its epoch is the generation, its partitions are its last assignment (also its target),
  its subscription is its JoinGroup metadata's. Joins and syncs held at that moment are answered
  REBALANCE_IN_PROGRESS. Refused, with GROUP_ID_NOT_FOUND and Kafka's message, when the members' metadata does
  not parse or a custom assignor's user data would be lost.
* **Classic members of a consumer group** keep using JoinGroup, SyncGroup, Heartbeat and LeaveGroup (Kafka's
  ``classicGroup*ToConsumerGroup``). JoinGroup is answered at once: the coordinator assigns (the member is no
  group leader and has nothing to assign), its generation is its member epoch, and what it may hold is
  reconciled as for any member, the partitions it owns read from its subscription (ConsumerProtocol v1+).
  SyncGroup hands it its partitions in the ConsumerProtocol assignment format of its subscription's version.
  Heartbeat says REBALANCE_IN_PROGRESS while the group epoch is ahead of the member's, while it has partitions
  to revoke, or when partitions it waits for are free, so it joins again. A member that does not join again
  within its rebalance timeout after being told so, or does not sync within it after joining, is removed.
* **Downgrade.** When the last member of the consumer protocol leaves (or is removed) and classic members
  remain, the group becomes a classic group of those members at generation = the group epoch, each member's
  last assignment kept, and a rebalance starts so they join again under the classic protocol.

Committed offsets belong to the group and are never touched by either conversion. Loop-only.
"""

from __future__ import annotations

import logging
import uuid

from broker.client._consumer_protocol import Assignment as EmbeddedAssignment
from broker.client._consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from broker.client._types import TopicPartition
from broker.client.errors import ProtocolError
from broker.coordinator import consumer_group as cg
from broker.coordinator.consumer_group import ConsumerGroupState, ConsumerMember, HeartbeatError
from broker.coordinator.group import CONSUMER_PROTOCOL_TYPE, Event, Group, Member
from broker.coordinator.offsets import now_ms
from broker.coordinator.records import group_metadata_key
from broker.protocol import ErrorCode

log = logging.getLogger("broker.coordinator")


class ClassicMetadata:
    """What a member of the classic protocol inside a consumer group keeps of its JoinGroup."""

    __slots__ = ("session_timeout_ms", "protocols")

    def __init__(self, session_timeout_ms: int, protocols: list[tuple[str, bytes]]) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.protocols = protocols

    @property
    def version(self) -> int:
        """The ConsumerProtocol version of the member's subscription (its assignment is written in it)."""
        try:
            return max(0, min(decode_subscription(self.protocols[0][1]).version, 3))
        except (ProtocolError, IndexError):
            return 0


class ClassicMembersMixin:
    """See the module docstring. Uses the coordinator's ``groups``, timers, ``topic_source`` and the consumer
    protocol's steps (:class:`broker.coordinator.modern.ConsumerGroupsMixin`)."""

    # -- names <-> ids ---------------------------------------------------------------------------------------
    def _by_name(self, partitions: dict[str, list[int]] | list[TopicPartition]) -> cg.Assignment:
        topics = self.topic_source()
        out: dict[uuid.UUID, set[int]] = {}
        pairs = ([(tp.topic, tp.partition) for tp in partitions] if isinstance(partitions, list)
                 else [(t, p) for t, ps in partitions.items() for p in ps])
        for topic, p in pairs:
            if topic in topics and 0 <= p < topics[topic][1]:
                out.setdefault(topics[topic][0], set()).add(p)
        return {t: frozenset(ps) for t, ps in out.items()}

    def _serialized(self, member: ConsumerMember, assignment: cg.Assignment) -> bytes:
        names = {topic_id: name for name, (topic_id, _count) in self.topic_source().items()}
        partitions = [TopicPartition(names[t], p) for t, ps in assignment.items() if t in names for p in sorted(ps)]
        return encode_assignment(EmbeddedAssignment(partitions, None, member.classic.version))

    # -- upgrade ---------------------------------------------------------------------------------------------
    def _upgrade(self, group: Group) -> ConsumerGroupState:
        """The classic group ``group`` (with members) becomes a consumer group; raises HeartbeatError."""
        def refuse(why: str) -> HeartbeatError:
            log.info("group %s: cannot upgrade to a consumer group: %s", group.group_id, why)
            return HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                  f"Cannot upgrade classic group {group.group_id} to consumer group because {why}.")

        if self.migration_policy not in ("bidirectional", "upgrade"):
            raise refuse("online upgrade is disabled")
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise refuse("the group does not use the consumer embedded protocol")
        if len(group.members) > self.consumer_group_max_size:
            raise refuse("the group size exceeds the consumer group maximum size")
        state = ConsumerGroupState(epoch=group.generation_id, assignment_epoch=group.generation_id)
        members = []
        for m in group.members.values():
            try:
                subscription = decode_subscription(m.metadata_for(group.protocol_name or m.protocols[0][0]))
                assignment = decode_assignment(m.assignment) if m.assignment else None
            except (ProtocolError, KeyError, IndexError):
                raise refuse("the embedded consumer protocol is malformed") from None
            if assignment is not None and assignment.user_data:
                raise refuse("an unsupported custom assignor is in use. Please refer to the documentation or "
                             "switch to a default assignor before re-attempting the upgrade")
            assigned = self._by_name(assignment.partitions) if assignment is not None else {}
            members.append(ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                epoch=group.generation_id, previous_epoch=group.generation_id, assigned=assigned,
                classic=ClassicMetadata(m.session_timeout_ms, list(m.protocols))))
        # the classic group's held answers and timers end here
        self._cancel_join_timer(group)
        for m in group.members.values():
            self._cancel_heartbeat(m)
            self._finish_join(m, {"error_code": ErrorCode.REBALANCE_IN_PROGRESS, "generation_id": -1,
                                  "protocol_type": None, "protocol_name": None, "leader": "",
                                  "skip_assignment": False, "member_id": m.member_id, "members": []})
            self._finish_sync(m, ErrorCode.REBALANCE_IN_PROGRESS)
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.leader_id = None
        group.transition(Event.MIGRATE, now_ms())
        for member in members:
            state.members[member.member_id] = member
            if member.instance_id is not None:
                state.static_members[member.instance_id] = member.member_id
            state.target[member.member_id] = dict(member.assigned)
            state.take(member)
        all_topics = self.topic_source()
        state.metadata = {n: all_topics[n] for n in state.subscribed_topics(all_topics)}
        group.modern = state
        state.extra.append((group_metadata_key(group.group_id), None))  # the classic group's record goes
        state.dirty.update(state.members)
        for member in members:
            self._schedule_session(group, member)
        log.info("group %s: the classic group (generation %d, %d members) becomes a consumer group",
                 group.group_id, group.generation_id, len(members))
        return state

    # -- downgrade -------------------------------------------------------------------------------------------
    def _maybe_downgrade(self, group: Group) -> None:
        """After a member of the consumer protocol left: a group of classic members only becomes classic."""
        state = group.modern
        if state is None or not state.members or any(m.classic is None for m in state.members.values()):
            return
        if self.migration_policy not in ("bidirectional", "downgrade"):
            log.info("group %s: not downgraded to a classic group: online downgrade is disabled", group.group_id)
            return
        if len(state.members) > self.group_max_size:
            log.info("group %s: not downgraded to a classic group: more members than group.max.size", group.group_id)
            return
        members = list(state.members.values())
        for m in members:
            self._cancel_consumer_timers(m)
        self.append_later(group.group_id, self.modern_tombstones(group))
        group.modern = None
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.generation_id = state.epoch
        for m in members:
            classic = Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                             m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols),
                             assignment=self._serialized(m, state.target.get(m.member_id, m.assigned)))
            group.add(classic)
        group.protocol_name = group.select_protocol()
        group.transition(Event.DOWNGRADED, now_ms())
        group.subscribed_topics = group.compute_subscribed_topics()
        for m in group.members.values():
            self._schedule_heartbeat(group, m)
        log.info("group %s: the consumer group becomes a classic group of its %d classic members", group.group_id,
                 len(members))
        self._prepare_rebalance(group, f"Downgrade group {group.group_id} from consumer to classic for member "
                                       f"leaving.")

    # -- classic requests to a consumer group ---------------------------------------------------------------
    async def classic_join_consumer_group(self, group: Group, member_id: str, instance_id: str | None,
                                          client_id: str, client_host: str, rebalance_timeout_ms: int,
                                          session_timeout_ms: int, protocol_type: str,
                                          protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> dict:
        """Kafka's ``classicGroupJoinToConsumerGroup``: the JoinGroup answer, once what changed is stored."""
        state = group.modern

        def error(code: int, mid: str = member_id) -> dict:
            return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
                    "leader": "", "skip_assignment": False, "member_id": mid, "members": []}

        if self.migration_policy == "disabled":
            log.info("group %s: a classic member may not join the consumer group: the group migration is disabled",
                     group.group_id)
            return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        unknown = member_id == ""
        if unknown:
            member_id = str(uuid.uuid4())
        if len(state.members) >= self.consumer_group_max_size and member_id not in state.members:
            return error(ErrorCode.GROUP_MAX_SIZE_REACHED)
        names = {n for n, _ in protocols}
        common = [set(n for n, _ in m.classic.protocols) for m in state.members.values() if m.classic is not None]
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names or any(not (names & c) for c in common):
            return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ProtocolError:
            return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and require_known_member_id and instance_id is None:
            log.info("group %s: a classic member with no id joins the consumer group: it is to join as %s",
                     group.group_id, member_id)
            return error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        member = state.members.get(member_id)
        if member is not None and member.classic is None:
            return error(ErrorCode.UNKNOWN_MEMBER_ID)  # a member of the consumer protocol under that id
        if instance_id is not None:
            old_id = state.static_members.get(instance_id)
            if old_id is not None and old_id != member_id:
                if not unknown:
                    return error(ErrorCode.FENCED_INSTANCE_ID)
                # a static member back (of either protocol before): it takes the old one's place and partitions
                member = self._replace_static(group, state, state.members[old_id], member_id)
        if member is None:
            member = state.members[member_id] = ConsumerMember(member_id, instance_id=instance_id)
            if instance_id is not None:
                state.static_members[instance_id] = member_id
            log.info("group %s: classic member %s joined the consumer group", group.group_id, member_id)
        member.client_id, member.client_host = client_id, client_host
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.classic = ClassicMetadata(session_timeout_ms, list(protocols))
        topics = tuple(sorted(set(subscription.topics)))
        bump = member.member_id not in state.target or topics != member.subscribed_topic_names
        member.subscribed_topic_names, member.subscribed_topic_regex = topics, None
        self._advance(group, state, bump)
        self._reconcile(group, member, self._by_name(subscription.owned_partitions))
        self._cancel(member, "join_timer")
        self._schedule_session(group, member)
        self._cancel(member, "sync_timer")
        member.sync_timer = self._loop().call_later(rebalance_timeout_ms / 1000, self._consumer_expired, group,
                                                    member, "sync")
        state.dirty.add(member.member_id)
        response = {"error_code": ErrorCode.NONE, "generation_id": member.epoch,
                    "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": member.classic.protocols[0][0],
                    "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}
        code = await self.persist_consumer_group(group)
        if code:
            return error(code)
        self._maybe_downgrade(group)  # it replaced the last member of the consumer protocol
        return response

    def _classic_member(self, group: Group, member_id: str, instance_id: str | None) -> ConsumerMember | int:
        state = group.modern
        error, member_id = state.static_owner(instance_id, member_id)
        if error:
            return error
        member = state.members.get(member_id)
        if member is None or member.classic is None:  # unknown, or a member of the consumer protocol
            return ErrorCode.UNKNOWN_MEMBER_ID
        return member

    def _rejoin_expected(self, group: Group, member: ConsumerMember) -> None:
        if member.join_timer is None:
            member.join_timer = self._loop().call_later(member.rebalance_timeout_ms / 1000, self._consumer_expired,
                                                        group, member, "join")

    def classic_sync_consumer_group(self, group: Group, generation_id: int, member_id: str, instance_id: str | None,
                                    protocol_type: str | None, protocol_name: str | None) -> tuple[int, bytes]:
        """Kafka's ``classicGroupSyncToConsumerGroup``: (error, the member's assignment)."""
        member = self._classic_member(group, member_id, instance_id)
        if isinstance(member, int):
            return member, b""
        if generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION, b""
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != member.classic.protocols[0][0]):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""
        if group.modern.epoch > member.epoch and member.state != cg.UNREVOKED_PARTITIONS:
            self._rejoin_expected(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        self._cancel(member, "sync_timer")
        self._schedule_session(group, member)
        return ErrorCode.NONE, self._serialized(member, member.assigned)

    def classic_heartbeat_consumer_group(self, group: Group, generation_id: int, member_id: str,
                                         instance_id: str | None) -> int:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``."""
        member = self._classic_member(group, member_id, instance_id)
        if isinstance(member, int):
            return member
        if generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_session(group, member)
        state = group.modern
        if (member.epoch < state.epoch or member.state == cg.UNREVOKED_PARTITIONS
                or (member.state == cg.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(state, member))):
            self._rejoin_expected(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @staticmethod
    def _waiting_on_unreleased(state: ConsumerGroupState, member: ConsumerMember) -> bool:
        """Does a partition of the member's target still belong to another member?"""
        for topic_id, partitions in state.target.get(member.member_id, {}).items():
            for p in partitions - member.assigned.get(topic_id, frozenset()):
                holder = state.owners.get((topic_id, p))
                if holder is not None and holder != member.member_id:
                    return True
        return False

    def classic_leave_consumer_group(self, group: Group, members: list[tuple[str, str | None]],
                                     reasons: list[str | None]) -> list[int]:
        """LeaveGroup on a consumer group: any member, of either protocol, by member id or instance id."""
        state = group.modern
        out = []
        for (member_id, instance_id), reason in zip(members, reasons):
            error, member_id = state.static_owner(instance_id, member_id)
            if error:
                out.append(error)
                continue
            member = state.members.get(member_id)
            if member is None:
                out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove_consumer_member(group, member, f"left; client reason: {reason or 'not provided'}",
                                         downgrade=False)
            out.append(ErrorCode.NONE)
        self.persist_later(group)
        self._maybe_downgrade(group)
        return out
