"""Share group membership (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe on the group's coordinator, the
broker that leads the group's ``__consumer_offsets`` partition (found with FindCoordinator, key type GROUP, as
for consumer groups). Kafka 4.2's ``GroupMetadataManager.shareGroupHeartbeat`` rules:

* The client makes its member id. Epoch 0 joins (the group is made if need be; ``group.share.max.size``
  members at most, GROUP_MAX_SIZE_REACHED beyond) and must name its subscription; -1 leaves; any other epoch
  must be the member's (or its previous one, a response lost), else FENCED_MEMBER_EPOCH; an unknown member
  gets UNKNOWN_MEMBER_ID, and the client joins again with epoch 0.
* A null subscription means unchanged. The group epoch goes up whenever the group's assignment changes (a
  member joins, leaves or changes its subscription; a subscribed topic is created, deleted or gains
  partitions), and every member moves to it at its next heartbeat: there is no revocation step in a share
  group, since a partition may be shared.
* The assignment (Kafka's ``SimpleAssignor``, per topic): with no more members than partitions, each partition
  goes to one member, round robin; with more members, each member gets one partition and every partition is
  shared by several. Topics that do not exist are left out until they do.
* A member that does not heartbeat within the group's ``share.session.timeout.ms`` is removed.
* The heartbeat answer names ``share.heartbeat.interval.ms`` and carries the assignment when the member
  joined, sent its subscription, or its partitions changed (null otherwise: unchanged).

Unlike Kafka, membership is kept in memory only (Kafka writes it to ``__consumer_offsets``): after the
coordinator moves, a member's heartbeat gets UNKNOWN_MEMBER_ID and it joins again at once, which costs one
round trip and nothing else, since what the group has consumed is kept by the partitions' leaders
(:mod:`broker.share.manager`). A group without members is still listed and described (Empty) while the
metadata store keeps what it consumed, as Kafka keeps an empty share group. Its offsets may be altered or
deleted only once it has been empty here for its session timeout since this broker became its coordinator
(:meth:`ShareCoordinator.offsets_change_error`): its members are not known before they rejoin. A group id in use by a consumer group is refused (GROUP_ID_NOT_FOUND,
"not a share group"), as Kafka does.

Loop-only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.cluster.store import StoreError
from broker.protocol import ErrorCode

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.share")


@dataclass(eq=False)
class ShareMember:
    member_id: str
    epoch: int = 0
    previous_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscriptions: tuple[str, ...] = ()
    assignment: dict[uuid.UUID, list[int]] = field(default_factory=dict)  # what the member was last told
    timer: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, dict[uuid.UUID, list[int]]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def assign(members: dict[str, tuple[str, ...]], topics: dict[str, tuple[uuid.UUID, int]]
           ) -> dict[str, dict[uuid.UUID, list[int]]]:
    """Kafka's ``SimpleAssignor`` rule per topic: ``members`` (id -> subscribed names), ``topics`` (name ->
    (id, partition count)) -> member -> topic id -> partitions."""
    out: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in members}
    for name, (topic_id, count) in sorted(topics.items()):
        subscribed = sorted(m for m, subs in members.items() if name in subs)
        if not subscribed or count <= 0:
            continue
        if len(subscribed) <= count:
            for p in range(count):
                out[subscribed[p % len(subscribed)]].setdefault(topic_id, []).append(p)
        else:
            for i, m in enumerate(subscribed):
                out[m].setdefault(topic_id, []).append(i % count)
    return out


class ShareCoordinator:
    """See the module docstring."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.groups: dict[str, ShareGroup] = {}
        #: one per group whose offsets were ever changed here (kept until the group is deleted)
        self._offset_locks: dict[str, asyncio.Lock] = {}

    def _setting(self, group_id: str, name: str) -> int:
        """The group's setting: its group config, else the broker's default."""
        return int(self.broker.group_configs.value(group_id, name))

    def _topics(self, names) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self.broker.topics
        out = {}
        for name in set(names):
            meta = self.broker.metadata_cache.topic(name)
            if meta is not None and meta.partitions:
                out[name] = (topics.topic_id(name), len(meta.partitions))
        return out

    def _rebalance(self, group: ShareGroup) -> None:
        """The group's target assignment from its members and the topics as they are now."""
        subscriptions = {m.member_id: m.subscriptions for m in group.members.values()}
        names = {n for subs in subscriptions.values() for n in subs}
        target = assign(subscriptions, self._topics(names))
        if target != group.target:
            group.epoch += 1
            group.target = target

    def heartbeat(self, ctx, request: dict) -> dict:
        group_id, member_id, epoch = request["group_id"], request["member_id"], request["member_epoch"]
        subscriptions = request["subscribed_topic_names"]
        if not group_id or not group_id.strip():
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id or not member_id.strip():
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if epoch < -1:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, f"MemberEpoch {epoch} is invalid.")
        if epoch == 0 and not subscriptions:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if request["rack_id"] is not None and not request["rack_id"].strip():
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        group = self.groups.get(group_id)
        if epoch == -1:
            return self._leave(group, member_id)
        if group is None:
            if epoch != 0:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group_id}")
            described = self.broker.coordinator.describe(group_id)[1]
            if described is not None and described.state.name != "DEAD":
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            group = self.groups[group_id] = ShareGroup(group_id)
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group_id}")
            if len(group.members) >= self.broker.config["group.share.max.size"]:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"group {group_id} has reached its maximum size")
            member = group.members[member_id] = ShareMember(member_id)
            log.info("share group %s: member %s joined", group_id, member_id)
        elif epoch != 0 and epoch != member.epoch and epoch != member.previous_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"member {member_id} sent epoch {epoch}, the group has it at {member.epoch}")
        if ctx.connection is not None:
            member.client_host = ctx.connection.host
        member.client_id = ctx.client_id or ""
        if request["rack_id"] is not None:
            member.rack_id = request["rack_id"]
        full = epoch == 0 or subscriptions is not None
        if subscriptions is not None:
            member.subscriptions = tuple(sorted(set(subscriptions)))
        self._rebalance(group)
        self._schedule_expiry(group, member)
        if member.epoch != group.epoch:
            member.previous_epoch, member.epoch = member.epoch, group.epoch
        assignment = group.target.get(member_id, {})
        send = full or assignment != member.assignment
        member.assignment = assignment
        return {
            "error_code": ErrorCode.NONE, "member_id": member_id, "member_epoch": member.epoch,
            "heartbeat_interval_ms": self._setting(group_id, "share.heartbeat.interval.ms"),
            "assignment": {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                                for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))]}
            if send else None,
        }

    def _leave(self, group: ShareGroup | None, member_id: str) -> dict:
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, "the group is not known")
        member = group.members.pop(member_id, None)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in the group")
        if member.timer is not None:
            member.timer.cancel()
        log.info("share group %s: member %s left", group.group_id, member_id)
        self._rebalance(group)
        return {"error_code": ErrorCode.NONE, "member_id": member_id, "member_epoch": -1,
                "heartbeat_interval_ms": 0, "assignment": None}

    def _schedule_expiry(self, group: ShareGroup, member: ShareMember) -> None:
        if member.timer is not None:
            member.timer.cancel()
        timeout = self._setting(group.group_id, "share.session.timeout.ms") / 1000
        member.timer = asyncio.get_running_loop().call_later(timeout, self._expired, group, member)

    def _expired(self, group: ShareGroup, member: ShareMember) -> None:
        if group.members.get(member.member_id) is member:
            del group.members[member.member_id]
            log.info("share group %s: member %s removed: no heartbeat within its session timeout", group.group_id,
                     member.member_id)
            self._rebalance(group)

    def offsets_lock(self, group_id: str) -> asyncio.Lock:
        """Held while a group's offsets are altered or deleted: its heartbeats wait for it (:meth:`heartbeat_gate`),
        so that nobody joins between the emptiness check and the change, as Kafka's coordinator runs both in one
        write operation."""
        lock = self._offset_locks.get(group_id)
        if lock is None:
            lock = self._offset_locks[group_id] = asyncio.Lock()
        return lock

    async def heartbeat_gate(self, group_id: str) -> None:
        """Wait while the group's offsets are being changed (see :meth:`offsets_lock`)."""
        lock = self._offset_locks.get(group_id)
        if lock is not None and lock.locked():
            async with lock:
                pass

    async def offsets_change_error(self, group_id: str, create: bool) -> tuple[int, str | None]:
        """Whether a share group's offsets may be altered (``create``: AlterShareGroupOffsets, which makes an
        unknown group, as Kafka does) or deleted (DeleteShareGroupOffsets); call it holding
        :meth:`offsets_lock`. NON_EMPTY_GROUP while it has members, and for a group this broker has known only
        from the store for less than its ``share.session.timeout.ms`` since it became its coordinator:
        membership is not stored, so its members may not have rejoined yet (Kafka keeps them across a
        failover and expires the silent ones after that timeout). GROUP_ID_NOT_FOUND for a group of another
        type or (deleting) an unknown one; COORDINATOR_NOT_AVAILABLE when the store cannot be read. Altering
        bumps the group's epoch."""
        group = self.groups.get(group_id)
        if group is None:
            described = self.broker.coordinator.describe(group_id)[1]
            if described is not None and described.state.name != "DEAD":
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            try:
                stored = await self.broker.run_blocking(self.broker.share_manager.has_stored_state, group_id)
            except StoreError as exc:
                log.warning("share group %s: the store could not be read: %s", group_id, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the metadata store cannot be read"
            if not create and not stored:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            if stored and self._members_may_return(group_id):
                return ErrorCode.NON_EMPTY_GROUP, ("The group is not empty: its members may not have joined this "
                                                   "coordinator yet (try again after share.session.timeout.ms).")
            group = self.groups.get(group_id)  # a member may have joined while the store was read
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
        if create:
            group = self.groups.setdefault(group_id, ShareGroup(group_id))
            group.epoch += 1
        return ErrorCode.NONE, None

    def _members_may_return(self, group_id: str) -> bool:
        coordinator = self.broker.coordinator
        since = coordinator.loaded_at.get(coordinator.partition_for(group_id))
        timeout = self._setting(group_id, "share.session.timeout.ms") / 1000
        return since is None or asyncio.get_running_loop().time() - since < timeout

    async def delete(self, group_id: str) -> int | None:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else the group and what it
        consumed (its state in the metadata store) are removed. None when ``group_id`` is no share group."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP
        removed = await self.broker.run_blocking(self.broker.share_manager.delete_stored_state, group_id)
        if group is None and not removed:
            return None
        self.groups.pop(group_id, None)
        self._offset_locks.pop(group_id, None)
        self.broker.share_manager.forget_group(group_id, stored_or_not=True)
        log.info("share group %s deleted", group_id)
        return ErrorCode.NONE

    @staticmethod
    def describe_empty(group_id: str) -> dict:
        """A share group without members that this coordinator knows only by what it consumed (its members left
        before a restart of the coordinator, or it moved here): Empty at epoch 0."""
        return {"group_id": group_id, "error_code": ErrorCode.NONE, "error_message": None, "group_state": "Empty",
                "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "simple", "members": []}

    def describe(self, group_id: str) -> dict:
        group = self.groups.get(group_id)
        if group is None:
            return {"group_id": group_id, "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                    "error_message": f"Group {group_id} not found.", "group_state": "Dead",
                    "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []}
        names = {t: n for n in self.broker.metadata_cache.topics() if (t := self.broker.topics.topic_id(n))}
        return {
            "group_id": group_id, "error_code": ErrorCode.NONE, "group_state": group.state,
            "group_epoch": group.epoch, "assignment_epoch": group.epoch, "assignor_name": "simple",
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.epoch, "client_id": m.client_id,
                "client_host": f"/{m.client_host}", "subscribed_topic_names": list(m.subscriptions),
                "assignment": {"topic_partitions": [
                    {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                    for t, ps in sorted(m.assignment.items(), key=lambda i: str(i[0]))]},
            } for m in sorted(group.members.values(), key=lambda m: m.member_id)],
        }
