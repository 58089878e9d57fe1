"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the consumer rebalance protocol (KIP-848) on the group
coordinator, as Kafka 4.x serves it (``GroupMetadataManager.consumerGroupHeartbeat``). A mixin of
:class:`broker.coordinator.GroupCoordinator`; the rules of epochs, assignment and reconciliation are in
:mod:`broker.coordinator.consumer_group`.

* **Joining.** Epoch 0 with the member's id (made by the client from v1; v0 may leave it to the coordinator)
  and its subscription (topic names, or from v1 a regex). The group is made if need be. An Empty classic
  group (committed offsets, no members) becomes a consumer group and keeps its offsets; a classic group with
  members is upgraded online (:mod:`broker.coordinator.mixed`); a share group's id is refused:
  GROUP_ID_NOT_FOUND, "not a consumer group". ``group.consumer.max.size`` members at most
  (GROUP_MAX_SIZE_REACHED).
* **Heartbeats** carry only what changed (null fields: unchanged). Every heartbeat moves the member towards
  its target; the answer carries its assignment when that changed or the request was a full one. An epoch
  above the member's, or below it other than its previous epoch with a subset of what it was given (a lost
  answer), is FENCED_MEMBER_EPOCH: the member gives up its partitions and joins again. An unknown member gets
  UNKNOWN_MEMBER_ID.
* **Leaving.** Epoch -1 leaves; -2 is a static member leaving for now: it keeps its place and its partitions
  until its session ends, and joining again with its ``group.instance.id`` (epoch 0, a new member id) takes
  them back without a rebalance. An instance id held by a member that has not left is UNRELEASED_INSTANCE_ID.
* **Timeouts.** A member without a heartbeat for the group's ``consumer.session.timeout.ms`` is removed; one
  that does not revoke what it was told to within its rebalance timeout is removed too.
* **Topics.** The subscribed topics are looked at on every heartbeat; a topic created, deleted or given more
  partitions moves the group epoch and a new target is computed.

**Storage.** What a heartbeat changed (the group epoch, the member's subscription, its target and current
assignment, the target's epoch) is appended to the group's ``__consumer_offsets`` partition in Kafka 4.x's
record layouts (:mod:`broker.coordinator.consumer_group_records`) before the answer, as Kafka does, and only
what changed (each group keeps what it last wrote). A new coordinator reads the records back, so its members
carry on at their epochs with their partitions. A failed append answers the heartbeat with the append's error
and keeps the change (it came from the member); the member sends again with its epoch, accepted as its
previous one.

Loop-only, like the rest of the coordinator.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Callable

from broker.coordinator import consumer_group as cg
from broker.coordinator import consumer_group_records as cgr
from broker.coordinator.consumer_group import ConsumerGroupState, ConsumerMember, HeartbeatError
from broker.coordinator.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from broker.coordinator.mixed import ClassicMetadata
from broker.coordinator.records import group_metadata_key
from broker.coordinator.storage import StorageError, commit_error_for
from broker.protocol import ErrorCode

log = logging.getLogger("broker.coordinator")


def _owned(topic_partitions: list[dict] | None) -> cg.Assignment | None:
    """What a heartbeat says the member owns (None: it did not say)."""
    return None if topic_partitions is None else cgr.partitions_from(topic_partitions)


class ConsumerGroupsMixin:
    """See the module docstring. Expects the coordinator's ``groups``, ``group_error``, ``_loop`` and the three
    providers the broker sets: ``topic_source`` (every topic: name -> (id, partition count)), ``group_setting``
    (a group config's value for a group) and ``other_group_type`` (the type of a group of that id that the
    coordinator does not keep, e.g. ``"share"``, or None)."""

    topic_source: Callable[[], cg.TopicMetadata] = staticmethod(lambda: {})
    group_setting: Callable[[str, str], int] = staticmethod(
        lambda group_id, name: {"consumer.session.timeout.ms": 45000, "consumer.heartbeat.interval.ms": 5000}[name])
    other_group_type: Callable[[str], str | None] = staticmethod(lambda group_id: None)
    consumer_group_max_size: int = 0x7FFFFFFF

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------------------
    async def consumer_group_heartbeat(self, request: dict, version: int, client_id: str, client_host: str,
                                       topic_filter: Callable[[frozenset[str]], frozenset[str]] | None = None
                                       ) -> dict:
        """The heartbeat's answer (without throttle time), once what it changed is in ``__consumer_offsets``;
        raises :class:`HeartbeatError`. ``topic_filter``: the topics among those given that the requesting
        principal may DESCRIBE; the group's regexes are matched with it (see
        :attr:`~broker.coordinator.consumer_group.ConsumerGroupState.topic_filter`)."""
        self._validate(request, version)
        group_id, epoch = request["group_id"], request["member_epoch"]
        member_id = request["member_id"] or (str(uuid.uuid4()) if version == 0 and epoch == 0 else "")
        group = self.groups.get(group_id)
        if epoch in (cg.LEAVE_EPOCH, cg.STATIC_LEAVE_EPOCH):
            response = self._consumer_leave(group_id, group, member_id, request["instance_id"], epoch)
            await self.persist_consumer_group(group)  # leaving is not undone by a failed write
            return response
        state = self._consumer_group(group_id, group, member_id, create=epoch == cg.JOIN_EPOCH)
        group = self.groups[group_id]
        member = self._consumer_member(group, state, member_id, epoch, request)
        bump = self._update_member(state, member, request, client_id, client_host)
        if topic_filter is not None:
            state.topic_filter = topic_filter
        self._advance(group, state, bump)
        self._reconcile(group, member, _owned(request["topic_partitions"]))  # marks the member's records to write
        self._schedule_session(group, member)
        full = epoch == cg.JOIN_EPOCH or (
            request["rebalance_timeout_ms"] != -1 and request["topic_partitions"] is not None
            and (request["subscribed_topic_names"] is not None or request.get("subscribed_topic_regex") is not None))
        send = full or member.last_sent != member.assigned
        assigned = dict(member.assigned)
        error = await self.persist_consumer_group(group)
        if error:
            # what changed stays (it came from the member), only the answer is lost: the member sends again with
            # the epoch it had, which is accepted as its previous one
            raise HeartbeatError(error)
        member.last_sent = assigned
        return {
            "error_code": ErrorCode.NONE, "error_message": None, "member_id": member.member_id,
            "member_epoch": member.epoch,
            "heartbeat_interval_ms": self.group_setting(group_id, "consumer.heartbeat.interval.ms"),
            "assignment": {"topic_partitions": cgr.partitions_body(assigned)} if send else None,
        }

    # -- persistence ------------------------------------------------------------------------------------------
    def _member_records(self, group_id: str, state: ConsumerGroupState, member_id: str) -> dict:
        keys = [cgr.key(v, group_id, member_id) for v in (cgr.MEMBER_METADATA, cgr.TARGET_MEMBER,
                                                          cgr.CURRENT_ASSIGNMENT)]
        m = state.members.get(member_id)
        if m is None:
            return dict.fromkeys(keys)
        classic = None if m.classic is None else {
            "session_timeout_ms": m.classic.session_timeout_ms,
            "supported_protocols": [{"name": n, "metadata": md} for n, md in m.classic.protocols]}
        return {
            keys[0]: cgr.value(cgr.MEMBER_METADATA, {
                "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
                "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "server_assignor": m.server_assignor, "classic_member_metadata": classic}),
            keys[1]: cgr.value(cgr.TARGET_MEMBER,
                               {"topic_partitions": cgr.partitions_body(state.target.get(member_id, {}))}),
            keys[2]: cgr.value(cgr.CURRENT_ASSIGNMENT, {
                "member_epoch": m.epoch, "previous_member_epoch": m.previous_epoch, "state": cgr.STATES[m.state],
                "assigned_partitions": cgr.partitions_body(m.assigned),
                "partitions_pending_revocation": cgr.partitions_body(m.pending_revocation)}),
        }

    def _group_records(self, group_id: str, state: ConsumerGroupState) -> dict:
        return {cgr.key(cgr.GROUP_METADATA, group_id): cgr.value(cgr.GROUP_METADATA, {
                    "epoch": state.epoch, "metadata_hash": cg.metadata_hash(state.metadata)}),
                cgr.key(cgr.TARGET_METADATA, group_id): cgr.value(cgr.TARGET_METADATA,
                                                                  {"assignment_epoch": state.assignment_epoch})}

    def _changed_records(self, group_id: str, state: ConsumerGroupState) -> list[tuple[bytes, bytes | None]]:
        """The records to append for what changed since the last write (``state.dirty``), and note them written."""
        out = list(state.extra)
        state.extra.clear()
        desired = {}
        for member_id in sorted(state.dirty):
            desired.update(self._member_records(group_id, state, member_id))
        desired.update(self._group_records(group_id, state))
        state.dirty.clear()
        for k, v in desired.items():
            if v is None:
                if state.persisted.pop(k, None) is not None:
                    out.append((k, None))
            elif state.persisted.get(k) != v:
                state.persisted[k] = v
                out.append((k, v))
        return out

    async def persist_consumer_group(self, group: Group | None) -> int:
        """Append the records of what changed in ``group`` (a consumer group); NONE, or the error to answer.

        Appends go through tasks made in the order of the calls, so they reach the partition in that order."""
        state = group.modern if group is not None else None
        if state is None or not self._is_current(group):
            return ErrorCode.NONE
        records = self._changed_records(group.group_id, state)
        if not records:
            return ErrorCode.NONE
        try:
            # shielded: a client that goes away must not take the write of the group's change with it
            await asyncio.shield(asyncio.ensure_future(self._append(group.group_id, records)))
        except StorageError as exc:
            log.warning("storing consumer group %s failed: %s", group.group_id, exc)
            self._unwritten(state, records)
            return commit_error_for(exc.error_code)
        return ErrorCode.NONE

    @staticmethod
    def _unwritten(state: ConsumerGroupState, records: list[tuple[bytes, bytes | None]]) -> None:
        """An append of ``records`` failed: each is written again with the next change (tombstones as they are,
        values from the state as it will be then)."""
        for k, v in records:
            if v is None:
                state.extra.append((k, None))
            else:
                state.persisted.pop(k, None)
        state.dirty.update(state.members)

    def append_later(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append ``records`` (a conversion's tombstones) without waiting; a failure is a warning (the records
        that follow decide what a reload finds: see :attr:`broker.coordinator.storage.PartitionState.latest_kind`)."""
        async def append() -> None:
            try:
                await self._append(group_id, records)
            except StorageError as exc:
                log.warning("group %s: writing %d tombstone(s) failed: %s", group_id, len(records), exc)

        if records:
            self._spawn(append())

    def persist_later(self, group: Group) -> None:
        """:meth:`persist_consumer_group` from a timer or another place that cannot wait."""
        self._spawn(self.persist_consumer_group(group))

    def modern_tombstones(self, group: Group) -> list[tuple[bytes, None]]:
        """Tombstones for every record the consumer group has written (the group metadata one last)."""
        state = group.modern
        if state is None:
            return []
        first = cgr.key(cgr.GROUP_METADATA, group.group_id)
        out = [(k, None) for k in state.persisted if k != first]
        if first in state.persisted:
            out.append((first, None))
        state.persisted.clear()
        return out

    def install_consumer_group(self, group: Group, records: dict) -> None:
        """A consumer group read back from ``__consumer_offsets`` (:class:`broker.coordinator.storage.PartitionState`):
        its members, epochs and assignments as last written; each member's session starts now."""
        state = ConsumerGroupState(epoch=records["epoch"], assignment_epoch=records["assignment_epoch"])
        for member_id, meta in records["members"].items():
            current = records["current"].get(member_id, {})
            classic = meta.get("classic_member_metadata")
            m = ConsumerMember(
                member_id, instance_id=meta["instance_id"], rack_id=meta["rack_id"], client_id=meta["client_id"],
                client_host=meta["client_host"], rebalance_timeout_ms=meta["rebalance_timeout_ms"],
                subscribed_topic_names=tuple(meta["subscribed_topic_names"]),
                subscribed_topic_regex=meta["subscribed_topic_regex"], server_assignor=meta["server_assignor"],
                epoch=current.get("member_epoch", 0), previous_epoch=current.get("previous_member_epoch", -1),
                state=cgr.STATE_NAMES.get(current.get("state", 0), cg.STABLE),
                assigned=cgr.partitions_from(current.get("assigned_partitions", [])),
                pending_revocation=cgr.partitions_from(current.get("partitions_pending_revocation", [])),
                classic=None if classic is None else ClassicMetadata(
                    classic["session_timeout_ms"],
                    [(p["name"], bytes(p["metadata"])) for p in classic["supported_protocols"]]))
            state.members[member_id] = m
            if m.instance_id is not None:
                state.static_members[m.instance_id] = member_id
            state.target[member_id] = cgr.partitions_from(
                records["targets"].get(member_id, {}).get("topic_partitions", []))
            clashes = state.take(m)
            if clashes:  # records that disagree (a write that failed before a move): the member starts over
                log.warning("group %s: member %s holds partitions another member holds too; it joins again",
                            group.group_id, member_id)
                state.release(m)
                for holder in {state.owners.get(tp) for tp in clashes} - {None, member_id}:
                    state.take(state.members[holder])
                m.assigned, m.pending_revocation, m.state = {}, {}, cg.STABLE
                m.epoch = m.previous_epoch = 0
        all_topics = self.topic_source()
        metadata = {n: all_topics[n] for n in state.subscribed_topics(all_topics)}
        # topics changed while nobody coordinated the group: an unknown metadata makes the next heartbeat move
        # the epoch and compute the target again
        state.metadata = metadata if cg.metadata_hash(metadata) == records.get("metadata_hash", 0) else {}
        state.assignor = state.select_assignor()
        for member_id in state.members:
            state.persisted.update(self._member_records(group.group_id, state, member_id))
        state.persisted.update(self._group_records(group.group_id, state))
        group.modern = state
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.subscribed_topics = set(state.metadata)
        for m in state.members.values():
            self._schedule_session(group, m)
            if m.state == cg.UNREVOKED_PARTITIONS:
                self._schedule_revocation(group, m)

    def _advance(self, group: Group, state: ConsumerGroupState, bump: bool) -> None:
        """Move the group epoch when ``bump`` or when the subscribed topics changed, and compute the new target."""
        all_topics = self.topic_source()
        metadata = {n: all_topics[n] for n in state.subscribed_topics(all_topics)}
        if metadata != state.metadata:
            state.metadata = metadata
            bump = True
        if bump:
            state.epoch += 1
        group.subscribed_topics = set(metadata)
        if state.assignment_epoch != state.epoch:
            self._compute_target(group, state, all_topics)

    def _reconcile(self, group: Group, member: ConsumerMember, owned: cg.Assignment | None) -> None:
        group.modern.dirty.add(member.member_id)
        before = (member.state, member.pending_revocation)
        cg.reconcile(group.modern, member, owned)
        if member.state == cg.UNREVOKED_PARTITIONS:
            if before != (member.state, member.pending_revocation):  # a new revocation: a new deadline
                self._schedule_revocation(group, member)
        else:
            self._cancel(member, "revocation_timer")

    @staticmethod
    def _validate(request: dict, version: int) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

        group_id, member_id, epoch = request["group_id"], request["member_id"], request["member_epoch"]
        regex = request.get("subscribed_topic_regex")
        if not group_id or not group_id.strip():
            raise invalid("GroupId can't be empty.")
        if request["instance_id"] is not None and not request["instance_id"].strip():
            raise invalid("InstanceId can't be empty.")
        if request["rack_id"] is not None and not request["rack_id"].strip():
            raise invalid("RackId can't be empty.")
        if (version >= 1 or epoch > 0 or epoch == cg.LEAVE_EPOCH) and (not member_id or not member_id.strip()):
            raise invalid("MemberId can't be empty.")
        if epoch == cg.JOIN_EPOCH:
            if request["rebalance_timeout_ms"] == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request["topic_partitions"] is None or any(tp["partitions"] for tp in request["topic_partitions"]):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if request["subscribed_topic_names"] is None and regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == cg.STATIC_LEAVE_EPOCH:
            if request["instance_id"] is None:
                raise invalid("InstanceId can't be null.")
        elif epoch < cg.STATIC_LEAVE_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if regex:
            try:
                cg.compile_regex(regex)
            except cg.RegexError as exc:
                why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}.")
        assignor = request["server_assignor"]
        if assignor is not None and assignor not in cg.ASSIGNORS:
            raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {assignor} is not supported. Supported assignors: "
                                 f"{', '.join(cg.ASSIGNORS)}.")

    def _consumer_group(self, group_id: str, group: Group | None, member_id: str,
                        create: bool) -> ConsumerGroupState:
        """The group's consumer-protocol state, making the group (or turning an Empty classic one) if ``create``."""
        if group is not None and group.is_(GroupState.DEAD):  # being deleted: the client asks again
            raise HeartbeatError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group is not None and group.modern is not None:
            return group.modern
        if group is None or (not create and not group.members and group.is_(GroupState.EMPTY)):
            if not create:
                # Kafka answers GROUP_ID_NOT_FOUND, which librdkafka takes as fatal and ends the consumer with;
                # a member of a group this coordinator does not know (its records lost with an unclean leader
                # election, say) is better told to join again
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
            if self.other_group_type(group_id) is not None:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            group = self.groups[group_id] = Group(group_id, current_state_timestamp=_now())
        elif group.members and create:
            if len(group.members) >= self.consumer_group_max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The consumer group has reached its maximum capacity of "
                                     f"{self.consumer_group_max_size} members.")
            return self._upgrade(group)
        elif group.members or group.pending_members or not group.is_(GroupState.EMPTY) or not create:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        else:
            log.info("group %s: the empty classic group becomes a consumer group, its offsets kept", group_id)
        existed = group.protocol_type is not None or group.generation_id > 0
        group.modern = ConsumerGroupState()
        if existed:  # the classic group's record goes
            group.modern.extra.append((group_metadata_key(group_id), None))
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        return group.modern

    def _consumer_member(self, group: Group, state: ConsumerGroupState, member_id: str, epoch: int,
                         request: dict) -> ConsumerMember:
        instance_id = request["instance_id"]
        member = state.members.get(member_id)
        if epoch == cg.JOIN_EPOCH:
            if instance_id is not None:
                old_id = state.static_members.get(instance_id)
                if old_id is not None and old_id != member_id:
                    old = state.members[old_id]
                    if old.classic is None and old.epoch != cg.STATIC_LEAVE_EPOCH:
                        raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                             f"Static member {member_id} with instance id {instance_id} cannot join "
                                             f"the group because the instance id is owned by {old_id} member.")
                    return self._replace_static(group, state, old, member_id)
            if member is None:
                if len(state.members) >= self.consumer_group_max_size:
                    raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                         f"The consumer group has reached its maximum capacity of "
                                         f"{self.consumer_group_max_size} members.")
                member = state.members[member_id] = ConsumerMember(member_id, instance_id=instance_id)
                if instance_id is not None:
                    state.static_members[instance_id] = member_id
                log.info("group %s: member %s joined (consumer protocol)", group.group_id, member_id)
                return member
            # a member joining again under its id keeps its place; the empty list of what it owns it sends
            # acknowledges any revocation, and the answer carries its assignment
            return member
        self._check_static(state, instance_id, member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        if member.classic is not None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} uses the classic protocol.")
        if epoch > member.epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a greater member epoch ({epoch}) than the one known "
                                 f"by the group coordinator ({member.epoch}). The member must abandon all its "
                                 f"partitions and rejoin.")
        if epoch < member.epoch and (epoch != member.previous_epoch
                                     or not cg.is_subset(_owned(request["topic_partitions"]), member.assigned)):
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                                 f"by the group coordinator ({member.epoch}). The member must abandon all its "
                                 f"partitions and rejoin.")
        return member

    @staticmethod
    def _check_static(state: ConsumerGroupState, instance_id: str | None, member_id: str) -> None:
        error, _current = state.static_owner(instance_id, member_id)
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            raise HeartbeatError(error, f"Instance id {instance_id} is unknown.")
        if error:
            raise HeartbeatError(error, f"Static member {member_id} with instance id {instance_id} was fenced by "
                                        f"member {state.static_members[instance_id]}.")

    def _replace_static(self, group: Group, state: ConsumerGroupState, old: ConsumerMember,
                        member_id: str) -> ConsumerMember:
        """A static member back under a new id takes the old one's place, partitions and epoch."""
        self._cancel_consumer_timers(old)
        old.classic = None
        state.release(old)
        old_id = old.member_id
        del state.members[old_id]
        old.member_id = member_id
        old.epoch = old.previous_epoch = 0
        old.last_sent = None
        state.members[member_id] = old
        state.static_members[old.instance_id] = member_id
        if old_id in state.target:
            state.target[member_id] = state.target.pop(old_id)
        state.take(old)
        state.dirty.update((old_id, member_id))
        log.info("group %s: static member %s is back as %s", group.group_id, old.instance_id, member_id)
        return old

    def _update_member(self, state: ConsumerGroupState, member: ConsumerMember, request: dict, client_id: str,
                       client_host: str) -> bool:
        """Take what the heartbeat changed; True when the group epoch must move (subscription or assignor)."""
        member.client_id, member.client_host = client_id, client_host
        if request["rack_id"] is not None:
            member.rack_id = request["rack_id"]
        if request["rebalance_timeout_ms"] != -1:
            member.rebalance_timeout_ms = request["rebalance_timeout_ms"]
        changed = member.epoch == cg.JOIN_EPOCH and member.member_id not in state.target
        names, regex = request["subscribed_topic_names"], request.get("subscribed_topic_regex")
        if names is not None:
            new = tuple(sorted(set(names)))
            if new != member.subscribed_topic_names:
                member.subscribed_topic_names = new
                changed = True
        if regex is not None and (regex or None) != member.subscribed_topic_regex:  # "": no regex
            member.subscribed_topic_regex = regex or None
            changed = True
        if request["server_assignor"] is not None and request["server_assignor"] != member.server_assignor:
            member.server_assignor = request["server_assignor"]
            changed = True
        return changed

    def _compute_target(self, group: Group, state: ConsumerGroupState, all_topics: cg.TopicMetadata) -> None:
        state.assignor = state.select_assignor()
        subscriptions = {m.member_id: cg.resolve(m, all_topics, state.regex_matches, state.topic_filter)
                         for m in state.members.values()}
        state.target = cg.assign(state.assignor, subscriptions, state.metadata, state.target,
                                 {m.member_id: m.instance_id for m in state.members.values()})
        state.assignment_epoch = state.epoch
        state.dirty.update(state.members)
        log.info("group %s: target assignment of epoch %d computed (%s assignor, %d members)", group.group_id,
                 state.epoch, state.assignor, len(state.members))

    # -- leaving, timeouts --------------------------------------------------------------------------------------
    def _consumer_leave(self, group_id: str, group: Group | None, member_id: str, instance_id: str | None,
                        epoch: int) -> dict:
        state = group.modern if group is not None else None
        if state is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        self._check_static(state, instance_id, member_id)
        member = state.members.get(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        if epoch == cg.STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # it keeps its partitions for its session, but owes no revocation any more: those go at once
            state.release(member)
            member.pending_revocation = {}
            if member.state == cg.UNREVOKED_PARTITIONS:
                member.state = cg.STABLE
            state.take(member)
            self._cancel(member, "revocation_timer")
            member.previous_epoch, member.epoch = member.epoch, cg.STATIC_LEAVE_EPOCH
            state.dirty.add(member_id)
            log.info("group %s: static member %s (instance %s) left for now", group.group_id, member_id,
                     member.instance_id)
        else:
            self._remove_consumer_member(group, member, "left")
        return {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id, "member_epoch": epoch,
                "heartbeat_interval_ms": 0, "assignment": None}

    def _remove_consumer_member(self, group: Group, member: ConsumerMember, why: str, downgrade: bool = True) -> None:
        """Remove the member; ``downgrade``: then, if only classic members remain, the group becomes classic
        (a caller removing several members at once passes False and asks once at the end)."""
        self._cancel_consumer_timers(member)
        if group.modern is not None and group.modern.remove(member.member_id) is not None:
            log.info("group %s: member %s %s", group.group_id, member.member_id, why)
            if not group.modern.members:
                group.current_state_timestamp = _now()
            elif downgrade:
                self._maybe_downgrade(group)

    def _cancel_consumer_timers(self, member: ConsumerMember) -> None:
        for timer in ("session_timer", "revocation_timer", "join_timer", "sync_timer"):
            self._cancel(member, timer)

    @staticmethod
    def _cancel(member: ConsumerMember, timer: str) -> None:
        handle = getattr(member, timer)
        if handle is not None:
            handle.cancel()
            setattr(member, timer, None)

    def _schedule_session(self, group: Group, member: ConsumerMember) -> None:
        self._cancel(member, "session_timer")
        timeout = (member.classic.session_timeout_ms if member.classic is not None else
                   self.group_setting(group.group_id, "consumer.session.timeout.ms")) / 1000
        member.session_timer = self._loop().call_later(timeout, self._consumer_expired, group, member, "session")

    def _schedule_revocation(self, group: Group, member: ConsumerMember) -> None:
        self._cancel(member, "revocation_timer")
        timeout = max(member.rebalance_timeout_ms, 0) / 1000
        member.revocation_timer = self._loop().call_later(timeout, self._consumer_expired, group, member, "revocation")

    def _consumer_expired(self, group: Group, member: ConsumerMember, which: str) -> None:
        setattr(member, f"{which}_timer", None)
        if group.modern is None or group.modern.members.get(member.member_id) is not member:
            return
        if which == "revocation" and member.state != cg.UNREVOKED_PARTITIONS:
            return
        why = {"session": "no heartbeat within its session timeout",
               "revocation": f"it did not revoke its partitions within its rebalance timeout "
                             f"({member.rebalance_timeout_ms} ms)",
               "join": "the classic member failed to join within the rebalance timeout",
               "sync": "the member failed to sync within timeout"}[which]
        self._remove_consumer_member(group, member, f"removed: {why}")
        self.persist_later(group)

    def drop_consumer_members(self, group: Group) -> None:
        """The group is unloaded or deleted: stop its members' timers."""
        if group.modern is not None:
            for member in group.modern.members.values():
                self._cancel_consumer_timers(member)

    # -- ConsumerGroupDescribe ------------------------------------------------------------------------------------
    def consumer_group_describe(self, group_id: str, version: int) -> dict:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return _described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        state = group.modern
        if state is None:
            return _described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                    f"Group {group_id} is not a consumer group.")
        names = {topic_id: name for name, (topic_id, _count) in self.topic_source().items()}

        def named(assignment: cg.Assignment) -> dict:
            return {"topic_partitions": [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                                         for t, ps in sorted(assignment.items(), key=lambda i: str(i[0])) if ps]}

        return {
            "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id, "group_state": state.state,
            "group_epoch": state.epoch, "assignment_epoch": state.assignment_epoch, "assignor_name": state.assignor,
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": named(m.assigned), "target_assignment": named(state.target.get(m.member_id, {})),
                "member_type": 0 if m.classic is not None else 1,
            } for m in sorted(state.members.values(), key=lambda m: m.member_id)],
        }


def _described_error(group_id: str, code: int, message: str) -> dict:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}


def _now() -> int:
    return int(time.time() * 1000)
