"""One partition this broker holds a replica of: Kafka's ``Partition``.

It owns what the log does not know: whether this broker leads the partition
or follows its leader, the leader epoch, the ISR (with the version of the
partition state it was read at, for conditional ISR writes), what each
follower's fetches said (:class:`FollowerState`) and the high watermark. The
log (a :class:`~broker.log.Log`) is private to it; handlers and the group
coordinator read and append through it and never hold the log.

Invariants:

- ``log_start_offset <= high_watermark <= log_end_offset``;
- on a leader, the high watermark is the smallest log end offset of the ISR
  and only moves forward (:meth:`maybe_increment_high_watermark`); a single
  node's ISR is itself, so it follows the log end offset at once;
- on a follower, it is the leader's (from its fetch answers) capped at our log end;
- consumers read below the high watermark (read_committed ones below the last
  stable offset, ``last_stable_offset <= high_watermark``), followers up to the
  log end.

ISR membership follows Kafka's rules: a follower is caught up at a fetch that
reaches the leader's log end, or that reaches where the log end was at its
previous fetch (then it was caught up as of that fetch). One that has not been
caught up for ``replica.lag.time.max.ms`` leaves the ISR
(:meth:`out_of_sync_replicas`); one whose log end reaches the high watermark
(and this leader's first offset of its epoch) joins it again
(:meth:`should_expand_isr`). The replica manager writes the changes.

Loop-only (not thread-safe), apart from the reads that run in a worker thread
(:meth:`offset_for_timestamp`, :meth:`offset_of_max_timestamp`,
:meth:`delete_records`, :meth:`end_offset_for_epoch`, :meth:`follow_log_start_offset`)
and the follower's truncations (which also cap the high watermark), all of
which touch only the log (thread-safe itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.log import OffsetOutOfRange
from broker.protocol import ErrorCode

if TYPE_CHECKING:
    from pathlib import Path

    from broker.log import FetchSlice, Log, LogConfig

#: DeleteRecords' and ListOffsets' "the high watermark"
HIGH_WATERMARK = -1


@dataclass(slots=True)
class FollowerState:
    """What a leader knows of one follower, from its fetches (Kafka's ``Replica``)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1

    def update(self, fetch_offset: int, fetch_ms: int, leader_log_end_offset: int) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, fetch_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_ms = fetch_ms
        self.last_fetch_leader_log_end_offset = leader_log_end_offset


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
        #: the first offset this broker wrote as leader in ``leader_epoch``
        self.leader_epoch_start_offset = -1
        self.controller_epoch = -1
        #: version of the partition state znode our ISR was read at (conditional ISR writes)
        self.zk_version = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        #: what each follower's fetches said (leader only)
        self.followers: dict[int, FollowerState] = {}
        self.high_watermark = max(log.log_start_offset, min(high_watermark, log.log_end_offset))
        #: False once the replica manager dropped it (:meth:`stop_serving`)
        self.served = True

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={self.isr}, hw={self.high_watermark})")

    # -- state ----------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def follower_log_end(self) -> dict[int, int]:
        """Each follower's log end offset as its last fetch said (-1: not fetched yet)."""
        return {b: f.log_end_offset for b, f in self.followers.items()}

    def stop_serving(self) -> None:
        """Dropped by the replica manager (topic deleted, log dir failed): neither leader nor follower now.

        :attr:`served` turns False and :attr:`is_leader` with it, so whoever still
        holds this object (a produce waiting for the high watermark, a fetch
        session) sees it is no longer the partition's leader.
        """
        self.served = False
        self.leader_id = -1

    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int], *, controller_epoch: int = -1,
                    zk_version: int = -1, now_ms: int = 0) -> bool:
        """Lead from ``leader_epoch`` with ``isr``; the high watermark then follows the ISR.

        The followers' states start afresh (the ISR members count as caught up
        now, so they are not dropped before they could fetch). The caller has
        recorded the epoch's start in the log (:meth:`assign_leader_epoch_start`).
        True if this broker was not the leader before.
        """
        was_leader = self.is_leader
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = self._log.log_end_offset
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.followers = {b: FollowerState(last_caught_up_ms=now_ms if b in isr else 0)
                          for b in replicas if b != self.local_broker_id}
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, leader: int, leader_epoch: int, isr: list[int], replicas: list[int], *,
                      controller_epoch: int = -1, zk_version: int = -1) -> None:
        """Follow ``leader`` from ``leader_epoch``; the high watermark stays until the leader's answers move it."""
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = -1
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.followers = {}

    def assign_leader_epoch_start(self) -> None:
        """Blocking: record in the log's epoch cache that ``leader_epoch`` starts at its log end (a new leader)."""
        self._log.assign_epoch_start_offset(self.leader_epoch, self.leader_epoch_start_offset)

    def leader_epoch_error(self, current_leader_epoch: int) -> int:
        """Kafka's check of a request's ``current_leader_epoch`` (-1: not given) against ours."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def check_leader(self, current_leader_epoch: int, *, leader_only: bool = True) -> int:
        """The error a request for this replica gets: a stale or future epoch, or (``leader_only``) not the leader."""
        error = self.leader_epoch_error(current_leader_epoch)
        if error:
            return error
        if leader_only and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the smallest log end offset of the ISR; True if it moved."""
        if not self.is_leader:
            return False
        new = self._log.log_end_offset
        followers = self.followers
        for broker_id in self.isr:
            if broker_id != self.local_broker_id:
                state = followers.get(broker_id)
                new = min(new, state.log_end_offset if state is not None else -1)
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False

    def update_follower_fetch(self, broker_id: int, fetch_offset: int, now_ms: int = 0) -> bool:
        """A follower fetched from ``fetch_offset`` (its log end); True if the high watermark moved."""
        state = self.followers.get(broker_id)
        if state is None:
            return False
        state.update(fetch_offset, now_ms, self._log.log_end_offset)
        return self.maybe_increment_high_watermark()

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """Followers in the ISR not caught up within ``max_lag_ms`` (leader only)."""
        if not self.is_leader:
            return []
        return [b for b in self.isr if b in self.followers
                and now_ms - self.followers[b].last_caught_up_ms > max_lag_ms]

    def should_expand_isr(self, broker_id: int) -> bool:
        """A follower outside the ISR whose log end reached the high watermark and this epoch's start."""
        state = self.followers.get(broker_id)
        return (self.is_leader and state is not None and broker_id not in self.isr
                and state.log_end_offset >= self.high_watermark
                and state.log_end_offset >= self.leader_epoch_start_offset)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower takes the leader's high watermark, capped at its own log end; True if it moved."""
        old = self.high_watermark
        self.high_watermark = max(self._log.log_start_offset, min(leader_high_watermark, self._log.log_end_offset))
        return self.high_watermark != old

    # -- follower truncation (blocking; the fetcher runs them in a worker thread) -----------------------
    @property
    def latest_epoch(self) -> int:
        """The largest leader epoch in our log (-1: none)."""
        return self._log.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers from our log; (-1, -1) if unknown."""
        return self._log.end_offset_for_epoch(leader_epoch)

    def truncate_to(self, offset: int) -> None:
        """Remove everything at and above ``offset``; the high watermark follows the log end down."""
        self._log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self._log.log_end_offset)

    def follow_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A follower moves its log start up to the leader's (as far as its own log reaches)."""
        self._log.delete_records(min(leader_log_start_offset, self._log.log_end_offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset`` (the leader's log start is above our log end)."""
        self._log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

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
    def log_dir(self) -> "Path":
        """The log dir (JBOD disk) holding this replica's log."""
        return self._log.dir.parent

    @property
    def size_in_bytes(self) -> int:
        return self._log.size_in_bytes

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the earliest transaction not yet decided (or decided by a
        marker not yet below the high watermark), else the high watermark."""
        high_watermark = self.high_watermark
        first = self._log.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def read(self, offset: int, max_bytes: int, *, follower: bool = False,
             min_one_batch: bool = False, read_committed: bool = False) -> "FetchSlice":
        """Whole batches from the one holding ``offset``: below the high watermark (read_committed: the
        last stable offset), or the log end for a follower.

        Raises :class:`~broker.log.OffsetOutOfRange`.
        """
        if follower:
            max_offset = None
        else:
            max_offset = self.last_stable_offset if read_committed else self.high_watermark
        return self._log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)

    def active_producers(self) -> list:
        """The producers the log keeps state for (see :meth:`broker.log.log.Log.active_producers`)."""
        return self._log.active_producers()

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list:
        """``AbortedTxn`` (producer_id, first_offset, ...) overlapping ``[fetch_offset, upper_bound)``,
        from the transaction indexes (read_committed fetches)."""
        return self._log.collect_aborted_transactions(fetch_offset, upper_bound)

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
