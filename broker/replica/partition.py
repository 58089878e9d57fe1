"""One partition this broker holds a replica of: Kafka's ``Partition``.

It owns what the log does not know: whether this broker leads the partition
or follows its leader, the leader epoch, the ISR, the log end offset of every
follower (as their fetches report it) and the high watermark. The log (a
:class:`~broker.log.Log`) is private to it; handlers and the group
coordinator read and append through it and never hold the log.

Invariants:

- ``log_start_offset <= high_watermark <= log_end_offset``;
- on a leader, the high watermark is the smallest log end offset of the ISR
  and only moves forward (:meth:`maybe_increment_high_watermark`); a single
  node's ISR is itself, so it follows the log end offset at once;
- consumers read below the high watermark, followers up to the log end.

Loop-only (not thread-safe), apart from the reads that run in a worker thread
(:meth:`offset_for_timestamp`, :meth:`offset_of_max_timestamp`,
:meth:`delete_records`), which touch only the log (thread-safe itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.log import OffsetOutOfRange
from broker.protocol import ErrorCode

if TYPE_CHECKING:
    from broker.log import FetchSlice, Log, LogConfig

#: DeleteRecords' and ListOffsets' "the high watermark"
HIGH_WATERMARK = -1


class Partition:
    """See the module docstring. Made and dropped by :class:`~broker.replica.ReplicaManager`."""

    def __init__(self, topic: str, partition: int, log: "Log", local_broker_id: int, high_watermark: int) -> None:
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)
        self.local_broker_id = local_broker_id
        self._log = log
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        #: log end offsets of the followers, as their last fetch said (leader only)
        self.follower_log_end: dict[int, int] = {}
        self.high_watermark = max(log.log_start_offset, min(high_watermark, log.log_end_offset))

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={self.isr}, hw={self.high_watermark})")

    # -- state ----------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int]) -> None:
        """Lead from ``leader_epoch`` with ``isr``; the high watermark then follows the ISR."""
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.follower_log_end = {b: self.follower_log_end.get(b, -1) for b in replicas if b != self.local_broker_id}
        self.maybe_increment_high_watermark()

    def leader_epoch_error(self, current_leader_epoch: int) -> int:
        """Kafka's check of a request's ``current_leader_epoch`` (-1: not given) against ours."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the smallest log end offset of the ISR; True if it moved."""
        if not self.is_leader:
            return False
        new = self._log.log_end_offset
        for broker_id in self.isr:
            if broker_id != self.local_broker_id:
                new = min(new, self.follower_log_end.get(broker_id, -1))
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False

    def update_follower_fetch(self, broker_id: int, fetch_offset: int) -> bool:
        """A follower fetched from ``fetch_offset`` (its log end); True if the high watermark moved."""
        if broker_id not in self.follower_log_end:
            return False
        self.follower_log_end[broker_id] = fetch_offset
        return self.maybe_increment_high_watermark()

    # -- the log, read through the partition -----------------------------------------------
    @property
    def config(self) -> "LogConfig":
        return self._log.config

    def update_config(self, config: "LogConfig") -> None:
        self._log.update_config(config)

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def size_in_bytes(self) -> int:
        return self._log.size_in_bytes

    def read(self, offset: int, max_bytes: int, *, follower: bool = False,
             min_one_batch: bool = False) -> "FetchSlice":
        """Whole batches from the one holding ``offset``: below the high watermark, or the log end for a follower.

        Raises :class:`~broker.log.OffsetOutOfRange`.
        """
        return self._log.read(offset, max_bytes, max_offset=None if follower else self.high_watermark,
                              min_one_batch=min_one_batch)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp_ms`` below the high watermark."""
        found = self._log.offset_for_timestamp(timestamp_ms)
        return found if found is not None and found[0] < self.high_watermark else None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp below the high watermark."""
        high_watermark = self.high_watermark
        found = self._log.offset_of_max_timestamp(high_watermark)
        return found if found is not None and found[0] < high_watermark else None

    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (-1: the high watermark); returns it.

        OffsetOutOfRange when ``offset`` is above the high watermark or below -1.
        """
        high_watermark = self.high_watermark
        target = high_watermark if offset == HIGH_WATERMARK else offset
        if target > high_watermark or target < 0:
            raise OffsetOutOfRange(target, self._log.log_start_offset, high_watermark)
        return self._log.delete_records(target)
