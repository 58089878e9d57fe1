"""Transactional offset commits (TxnOffsetCommit): offsets held pending until the transaction ends.

:class:`TxnOffsetsMixin` gives :class:`broker.coordinator.GroupCoordinator` Kafka's
``handleTxnCommitOffsets`` and ``scheduleHandleTxnCompletion``:

* :meth:`~TxnOffsetsMixin.commit_txn_offsets` appends the offset-commit records
  as one *transactional* batch of the producer (its id and epoch; the partition's
  producer state fences an old epoch) to the group's ``__consumer_offsets``
  partition, and keeps them in ``pending_txn_offsets[producer_id][group]``, not in
  ``Group.offsets``: OffsetFetch does not see them yet;
* :meth:`~TxnOffsetsMixin.complete_txn_offsets` is called once the transaction
  coordinator's COMMIT or ABORT marker is in that partition: a commit moves the
  producer's pending offsets of the partition's groups into ``Group.offsets``,
  an abort drops them;
* a replay of the partition does the same with the markers it meets
  (:func:`broker.coordinator.storage.read_partition`); offsets of a transaction
  still open at the end are pending again.

With a generation (TxnOffsetCommit v3+, KIP-447) the member and generation are
checked as for OffsetCommit; in a group of the consumer protocol (KIP-848) the generation is the
member's epoch, and another epoch is ILLEGAL_GENERATION, as Kafka answers it. Loop-only, like the rest of the coordinator.
"""

from __future__ import annotations

import logging

from broker.coordinator.group import Group, GroupState
from broker.coordinator.offsets import member_epoch_error
from broker.coordinator.records import OffsetAndMetadata, offset_commit_key, offset_commit_value
from broker.coordinator.storage import StorageError, commit_error_for
from broker.protocol import ErrorCode

log = logging.getLogger("broker.coordinator")

S = GroupState
TopicPartition = tuple[str, int]


class TxnOffsetsMixin:
    """TxnOffsetCommit and its completion for GroupCoordinator (see the module docstring).

    Expects from the coordinator: ``groups``, ``pending_txn_offsets``, ``offset_metadata_max_bytes``,
    ``serving_error``, ``partition_for``, ``_append_transactional``, ``_schedule_heartbeat`` and
    ``_split_by_metadata_size`` (the offsets mixin's).
    """

    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 group_instance_id: str | None, generation_id: int,
                                 offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        def every(code: int) -> dict[TopicPartition, int]:
            return {tp: int(code) for tp in offsets}

        error = await self.serving_error(group_id)
        if error:
            return every(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return every(ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id)
        if group.is_(S.DEAD):
            return every(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.modern is not None and (generation_id >= 0 or member_id):
            # a group of the consumer protocol: the generation is the member's epoch (Kafka answers a stale
            # one ILLEGAL_GENERATION here, not STALE_MEMBER_EPOCH)
            error = member_epoch_error(group, member_id, generation_id, stale=ErrorCode.ILLEGAL_GENERATION)
            if error:
                return every(error)
        elif generation_id >= 0 or member_id:
            if group_instance_id is not None and group.static_member_id(group_instance_id) not in (None, member_id):
                return every(ErrorCode.FENCED_INSTANCE_ID)
            member = group.members.get(member_id)
            if member is None:
                return every(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return every(ErrorCode.ILLEGAL_GENERATION)
            self._schedule_heartbeat(group, member)
        result, accepted = self._split_by_metadata_size(offsets)
        if not accepted:
            return result
        try:
            await self._append_transactional(group_id, producer_id, producer_epoch,
                                       [(offset_commit_key(group_id, t, p), offset_commit_value(om))
                                        for (t, p), om in accepted])
        except StorageError as exc:
            code = commit_error_for(exc.error_code)
            result.update((tp, code) for tp, _ in accepted)
            return result
        pending = self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {})
        for tp, om in accepted:
            pending[tp] = om
            result[tp] = ErrorCode.NONE
        return result

    def has_pending_txn_offset(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction not yet ended committed an offset of ``tp`` for the group (KIP-447)."""
        return any(tp in by_group.get(group_id, ()) for by_group in self.pending_txn_offsets.values())

    def complete_txn_offsets(self, producer_id: int, offsets_partition: int, commit: bool) -> None:
        """The marker of ``producer_id``'s transaction is in ``__consumer_offsets-offsets_partition``."""
        by_group = self.pending_txn_offsets.get(producer_id)
        if not by_group:
            return
        for group_id in [g for g in by_group if self.partition_for(g) == offsets_partition]:
            pending = by_group.pop(group_id)
            group = self.groups.get(group_id)
            if commit and group is not None and not group.is_(S.DEAD):
                group.offsets.update(pending)
                log.debug("group %s: %d transactional offset(s) of producer %d committed", group_id,
                          len(pending), producer_id)
        if not by_group:
            del self.pending_txn_offsets[producer_id]
