"""Committed offsets: the offsets half of the group coordinator.

:class:`OffsetsMixin` gives :class:`broker.coordinator.GroupCoordinator` its
OffsetCommit, OffsetFetch, OffsetDelete and offset-expiry behaviour; it keeps no
state of its own and uses the coordinator's ``groups``, ``loading``,
``_append`` and ``_remove_group`` (one event loop owns all of it: not thread-safe).

Invariants:

* a commit is in ``__consumer_offsets`` (one batch of offset-commit records, key
  v1 ``(group, topic, partition)``, value as :func:`records.offset_commit_value`
  writes it) and replicated to the ISR (the high watermark passed it) before it
  is in ``Group.offsets`` and before the client hears back; a failed append
  changes nothing in the cache;
* removing an offset (OffsetDelete, expiry, group deletion) appends a tombstone
  (the key with a null value) first, then drops it from the cache, so a reload
  from the log gives the same cache;
* ``offset.metadata.max.bytes`` bounds the UTF-8 length of a commit's metadata
  string (OFFSET_METADATA_TOO_LARGE for that partition, the others still commit).

Expiry follows Apache Kafka 2.7 (``GroupMetadata.removeExpiredOffsets``), checked
every ``offsets.retention.check.interval.ms``; :func:`expired_partitions` decides:

* an offset committed with an explicit expire timestamp (OffsetCommit v2-v4
  retention time, value v1) expires at that timestamp instead of after
  ``offsets.retention.minutes`` (still never while a member subscribes to its topic);
* Empty group with a protocol type: retention counts from when the group became
  Empty (``current_state_timestamp``; the commit timestamp if unknown);
* a group of the consumer rebalance protocol (KIP-848) with members: as below, with the topics its members
  subscribe to (by name or regex);
* consumer-protocol group with members whose subscriptions are known: offsets of
  topics no member subscribes to expire ``offsets.retention.minutes`` after their
  commit; offsets of subscribed topics never expire while the group has members;
* group without a protocol type (standalone commits): retention counts from each
  offset's commit timestamp;
* any other group (another protocol type with members, or unparsable
  subscriptions): nothing expires.

A group left Empty with neither offsets nor members is removed (group tombstone).
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.coordinator.group import Group, GroupState
from broker.coordinator.records import OffsetAndMetadata, offset_commit_key, offset_commit_value
from broker.coordinator.storage import StorageError, commit_error_for
from broker.protocol import ErrorCode

log = logging.getLogger("broker.coordinator")

S = GroupState
TopicPartition = tuple[str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


def member_epoch_error(group: Group, member_id: str, member_epoch: int,
                       stale: int = ErrorCode.STALE_MEMBER_EPOCH) -> int:
    """Kafka's ``ConsumerGroup.validateMemberEpoch`` in a group of the consumer protocol, for OffsetCommit,
    OffsetFetch and TxnOffsetCommit: the member must be known (UNKNOWN_MEMBER_ID) and name its epoch; another
    epoch is ``stale`` (TxnOffsetCommit: ILLEGAL_GENERATION), or ILLEGAL_GENERATION for a classic member of the
    group, whose generation is its epoch."""
    member = group.modern.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch == member.epoch:
        return ErrorCode.NONE
    return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else stale


def modern_commit_error(group: Group, member_id: str, member_epoch: int, version: int) -> int:
    """Kafka's ``ConsumerGroup.validateOffsetCommit``: a commit without a member (epoch < 0) only while the group
    has no members; a member of the consumer protocol commits with OffsetCommit v9+ (UNSUPPORTED_VERSION); then
    :func:`member_epoch_error`."""
    if member_epoch < 0 and not group.modern.members:
        return ErrorCode.NONE
    member = group.modern.members.get(member_id)
    if member is not None and member.classic is None and version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    return member_epoch_error(group, member_id, member_epoch)


def expired_partitions(group: Group, now: int, retention_ms: int) -> list[TopicPartition]:
    """The partitions whose committed offsets are past retention (see the module docstring)."""
    if group.is_(S.DEAD):
        return []
    subscribed: set[str] = set()
    if group.has_consumer_members:
        subscribed = group.subscribed_topics or set()

        def base(om: OffsetAndMetadata) -> int:
            return om.commit_timestamp
    elif group.protocol_type is not None and group.is_(S.EMPTY):
        def base(om: OffsetAndMetadata) -> int:
            return group.current_state_timestamp if group.current_state_timestamp >= 0 else om.commit_timestamp
    elif group.protocol_type == "consumer" and group.subscribed_topics is not None:
        subscribed = group.subscribed_topics

        def base(om: OffsetAndMetadata) -> int:
            return om.commit_timestamp
    elif group.protocol_type is None:
        def base(om: OffsetAndMetadata) -> int:
            return om.commit_timestamp
    else:
        return []
    out = []
    for tp, om in group.offsets.items():
        if tp[0] in subscribed:
            continue
        if om.expire_timestamp != -1:
            due = now >= om.expire_timestamp
        else:
            due = now - base(om) >= retention_ms
        if due:
            out.append(tp)
    return out


class OffsetsMixin:
    """OffsetCommit / OffsetFetch / OffsetDelete and expiry for GroupCoordinator (see the module docstring).

    Expects from the coordinator: ``groups``, ``loading``, ``retention_ms``,
    ``retention_check_interval_ms``, ``offset_metadata_max_bytes``, ``metrics``,
    ``group_error``, ``serving_error``, ``partition_for``, ``_append`` (awaitable),
    ``_remove_group`` (async), ``_is_current`` and ``_schedule_heartbeat``.
    """

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                             offsets: dict[TopicPartition, OffsetAndMetadata], version: int = 8
                             ) -> dict[TopicPartition, int]:
        """Kafka's handleCommitOffsets: per-partition error codes, after the append. In a group of the consumer
        protocol ``generation_id`` is the member epoch (:func:`modern_commit_error`)."""
        def every(code: int) -> dict[TopicPartition, int]:
            return {tp: int(code) for tp in offsets}

        error = await self.serving_error(group_id)
        if error:
            return every(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:  # Kafka 4.x: v9 names the group missing
                return every(ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id, current_state_timestamp=now_ms())
        if group.is_(S.DEAD):
            return every(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.modern is not None:
            error = modern_commit_error(group, member_id, generation_id, version)
            if error:
                return every(error)
        elif not (generation_id < 0 and group.is_(S.EMPTY)):
            if group_instance_id is not None and group.static_member_id(group_instance_id) not in (None, member_id):
                return every(ErrorCode.FENCED_INSTANCE_ID)
            if group.is_(S.COMPLETING_REBALANCE):
                return every(ErrorCode.REBALANCE_IN_PROGRESS)
            member = group.members.get(member_id)
            if member is None:
                return every(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return every(ErrorCode.ILLEGAL_GENERATION)
            self._schedule_heartbeat(group, member)
        result, accepted = self._split_by_metadata_size(offsets)
        if accepted:
            try:
                await self._append(group_id, [(offset_commit_key(group_id, t, p), offset_commit_value(om))
                                              for (t, p), om in accepted])
            except StorageError as exc:
                code = commit_error_for(exc.error_code)
                result.update((tp, code) for tp, _ in accepted)
                return result
            for tp, om in accepted:
                group.offsets[tp] = om
                result[tp] = ErrorCode.NONE
            self.metrics.offset_commits.inc(len(accepted))
        return result

    def _split_by_metadata_size(self, offsets: dict[TopicPartition, OffsetAndMetadata]
                                ) -> tuple[dict[TopicPartition, int], list[tuple[TopicPartition, OffsetAndMetadata]]]:
        """({partition: OFFSET_METADATA_TOO_LARGE} for metadata above ``offset.metadata.max.bytes``, the rest)."""
        result: dict[TopicPartition, int] = {}
        accepted = []
        for tp, om in offsets.items():
            if om.metadata is not None and len(om.metadata.encode("utf-8")) > self.offset_metadata_max_bytes:
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted.append((tp, om))
        return result, accepted

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(error, offsets); ``partitions`` None means every partition the group has offsets for. A member of a
        consumer-protocol group that names itself (OffsetFetch v9) must be known, at its current epoch."""
        error = self.group_error(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if group is not None and group.modern is not None and member_id is not None:
            error = member_epoch_error(group, member_id, member_epoch)
            if error:
                return error, {}
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(stored)
        return ErrorCode.NONE, {tp: stored.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> tuple[int, dict[TopicPartition, int]]:
        """Kafka's handleDeleteOffsets: tombstones for partitions of topics the group does not consume.

        An Empty group (or one without a protocol type) may lose any offset; a
        consumer group with members only offsets of topics it is not subscribed to
        (GROUP_SUBSCRIBED_TO_TOPIC for the others); any other group NON_EMPTY_GROUP.
        """
        error = self.group_error(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        result: dict[TopicPartition, int] = {}
        if (group.is_(S.EMPTY) and not group.has_consumer_members) or group.protocol_type is None:
            doomed = list(partitions)
        elif group.protocol_type == "consumer":
            doomed = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp[0]):
                    result[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    doomed.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        existing = [tp for tp in doomed if tp in group.offsets]
        if existing:
            try:
                await self._append(group_id, [(offset_commit_key(group_id, t, p), None) for t, p in existing])
            except StorageError as exc:
                return commit_error_for(exc.error_code), {}
            for tp in existing:
                group.offsets.pop(tp, None)
        result.update((tp, ErrorCode.NONE) for tp in doomed)
        return ErrorCode.NONE, result

    # -- expiry --------------------------------------------------------------------------------------
    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_interval_ms / 1000)
            try:
                await self.expire_offsets(now_ms())
            except Exception:
                log.exception("offset expiry failed")

    async def expire_offsets(self, now: int) -> int:
        """Tombstone every offset :func:`expired_partitions` names; returns how many expired.

        An offset committed again while its tombstone was being written keeps the new commit.
        """
        expired_total = 0
        for group in list(self.groups.values()):
            if self.group_error(group.group_id) or not self._is_current(group):
                continue
            expired = {tp: group.offsets[tp] for tp in expired_partitions(group, now, self.retention_ms)}
            if expired:
                try:
                    await self._append(group.group_id,
                                       [(offset_commit_key(group.group_id, t, p), None) for t, p in expired])
                except StorageError as exc:
                    log.warning("expiring offsets of group %s failed: %s", group.group_id, exc)
                    continue
                for tp, om in expired.items():
                    if group.offsets.get(tp) is om:
                        del group.offsets[tp]
                expired_total += len(expired)
                log.info("group %s: %d offset(s) expired", group.group_id, len(expired))
            if (self._is_current(group) and group.is_(S.EMPTY) and not group.offsets and not group.members
                    and not group.pending_members and not group.has_consumer_members):
                await self._remove_group(group)
        return expired_total
