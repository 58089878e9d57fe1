"""One share-partition: what a share group has taken from one topic partition (KIP-932, Kafka 4.2's rules).

It lives on the partition's leader. Each record offset the group has read is in one state::

    AVAILABLE (0) --acquire--> ACQUIRED (1) --accept-->            ACKNOWLEDGED (2)
         ^                         |        --reject / gap-->      ARCHIVED (4)
         +-- release, lock expiry, session closed  (ARCHIVED instead once the record
             has been delivered ``delivery_count_limit`` times)

ACKNOWLEDGED and ARCHIVED are final. The share-partition start offset (SPSO, :attr:`SharePartition.start_offset`)
is the first offset that is not final; everything below it is done for the group. :attr:`next_offset` is the
first offset never read from the log: records from there on are new, acquired in log order. In between,
:attr:`records` holds every offset read (final ones too, until the SPSO passes them); an offset of the range
that is not in it had no record (a hole the log never had, or one compaction left).

Acquisition takes whole batches of the log (the client keeps only the offsets named in AcquiredRecords), up to
``max_records`` (the batch that crosses it is taken whole), and never more than ``max_in_flight`` offsets
between the SPSO and the next offset (a batch that crosses that limit is taken up to it, the rest read later); a record acquired gets its delivery count raised and a lock that
expires after the group's ``share.record.lock.duration.ms`` (the manager's timer calls :meth:`expire`).
Control batches (transaction markers), and for ``read_committed`` the batches of aborted transactions, are
archived as they are read: no member ever gets them.

An acknowledgement of one partition is all or nothing: every offset it names at or above the SPSO must be
ACQUIRED by the acknowledging member, else INVALID_RECORD_STATE and nothing changes.

:meth:`snapshot` / :meth:`restore` are the persisted form: the SPSO and runs of equal (state, delivery count)
above it; an ACQUIRED record is stored as AVAILABLE (a lock does not survive its leader).

Loop-only; no I/O here (the manager reads the log and persists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple

from broker.protocol import ErrorCode

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
FINAL = (ACKNOWLEDGED, ARCHIVED)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_ACK_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED}  # RELEASE: AVAILABLE, or ARCHIVED at the limit


@dataclass(slots=True)
class InFlight:
    """One offset the group has read."""

    state: int
    delivery_count: int = 0
    member: str = ""
    deadline: float = 0.0  # loop time the lock expires (ACQUIRED only)


class LogBatch(NamedTuple):
    """What acquisition needs of one batch of the log."""

    base_offset: int
    last_offset: int
    skip: bool  # a control batch, or (read_committed) a batch of an aborted transaction
    position: int  # within the bytes read
    size: int


class AckError(Exception):
    """An acknowledgement refused; ``code`` is the partition's error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class SharePartition:
    """See the module docstring."""

    def __init__(self, group_id: str, topic: str, partition: int, start_offset: int) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.records: dict[int, InFlight] = {}
        #: bumped at every change worth persisting; the manager stores up to it
        self.version = 0

    def __repr__(self) -> str:
        return (f"SharePartition({self.group_id}, {self.topic}-{self.partition}, start={self.start_offset}, "
                f"next={self.next_offset}, in flight={len(self.records)})")

    # -- reading -------------------------------------------------------------------------------
    def first_to_read(self) -> int:
        """Where the next fetch reads the log: the first AVAILABLE offset, else the next offset."""
        available = [o for o, r in self.records.items() if r.state == AVAILABLE]
        return min(available) if available else self.next_offset

    def in_flight(self) -> int:
        return max(self.next_offset - self.start_offset, 0)

    def held_by(self, member: str) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED and r.member == member)

    # -- acquisition -----------------------------------------------------------------------------
    def acquire(self, member: str, batches: Iterable[LogBatch], max_records: int, max_in_flight: int,
                deadline: float, record_limit: bool = False
                ) -> tuple[list[tuple[int, int, int]], list[int], tuple[int, int] | None]:
        """Acquire for ``member`` from ``batches`` (the log read from :meth:`first_to_read`, in order). With
        ``record_limit`` (ShareFetch v2's acquire mode 1, KIP-1206) never more than ``max_records``, a batch
        taken in part.

        Returns (AcquiredRecords as (first, last, delivery count) runs, the offsets acquired, and the byte range
        (start, end) of the batches that hold them, or None when nothing was acquired)."""
        acquired: list[tuple[int, int]] = []
        span: list[int] = []
        changed = False
        full = False
        for batch in batches:
            if len(acquired) >= max_records or full:
                break
            took = False
            for offset in range(max(batch.base_offset, self.start_offset), batch.last_offset + 1):
                if record_limit and len(acquired) >= max_records:
                    full = True
                    break
                record = self.records.get(offset)
                if record is None:
                    if offset < self.next_offset:
                        continue  # final and passed, or no record there
                    if not batch.skip and self.in_flight() >= max_in_flight:
                        full = True  # the group holds as many of this partition as it may: read on later
                        break
                    record = self.records[offset] = InFlight(ARCHIVED if batch.skip else AVAILABLE)
                    self.next_offset = offset + 1
                    changed = True
                if record.state != AVAILABLE:
                    continue
                record.state = ACQUIRED
                record.delivery_count += 1
                record.member = member
                record.deadline = deadline
                acquired.append((offset, record.delivery_count))
                took = True
            if not full and batch.last_offset + 1 > self.next_offset:
                self.next_offset = batch.last_offset + 1
            if took:
                span = [span[0] if span else batch.position, batch.position + batch.size]
        if changed or acquired:
            self._advance()
            self.version += 1
        return _runs(acquired), [o for o, _c in acquired], (span[0], span[1]) if span else None

    # -- giving records back ---------------------------------------------------------------------
    def _release(self, record: InFlight, limit: int) -> None:
        record.state = ARCHIVED if record.delivery_count >= limit else AVAILABLE
        record.member = ""
        record.deadline = 0.0

    def expire(self, member: str, offsets: Iterable[int], now: float, limit: int) -> int:
        """Locks of ``member`` on ``offsets`` that have expired by ``now`` end; returns how many."""
        records = (self.records.get(offset) for offset in offsets)
        return self._release_all([r for r in records if r is not None and r.deadline <= now], member, limit)

    def release_member(self, member: str, limit: int) -> int:
        """Every record ``member`` holds becomes available again (its session ended); returns how many.
        As in Kafka 4.2, the delivery counts: a record at the limit is archived."""
        return self._release_all(list(self.records.values()), member, limit)

    def _release_all(self, records: list[InFlight], member: str, limit: int) -> int:
        held = [r for r in records if r.state == ACQUIRED and r.member == member]
        for record in held:
            self._release(record, limit)
        if held:
            self._advance()
            self.version += 1
        return len(held)

    def acknowledge(self, member: str, batches: list[dict], limit: int, renewed_until: float = 0.0) -> list[int]:
        """Apply one partition's acknowledgement batches (validated by the caller); raises AckError. RENEW
        (KIP-1222) keeps a record acquired with its lock extended to ``renewed_until``; returns the offsets
        renewed."""
        plan: list[tuple[int, InFlight, int]] = []
        last_read = self.next_offset - 1
        for batch in batches:
            first, last, types = batch["first_offset"], batch["last_offset"], batch["acknowledge_types"]
            if last > last_read:
                raise AckError(ErrorCode.INVALID_REQUEST, f"offset {last} was never delivered")
            for offset in range(max(first, self.start_offset), last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                record = self.records.get(offset)
                if record is None:
                    if kind == GAP:
                        continue  # no record there, as the client says
                    raise AckError(ErrorCode.INVALID_RECORD_STATE, f"offset {offset} is not acquired")
                if record.state != ACQUIRED:
                    raise AckError(ErrorCode.INVALID_RECORD_STATE,
                                   f"offset {offset} is not acquired (its lock may have expired)")
                if record.member != member:
                    raise AckError(ErrorCode.INVALID_RECORD_STATE, f"member {member} does not hold offset {offset}")
                plan.append((offset, record, kind))
        renewed = []
        for offset, record, kind in plan:
            if kind == RENEW:
                record.deadline = renewed_until
                renewed.append(offset)
            elif kind == RELEASE:
                self._release(record, limit)
            else:
                record.state = _ACK_STATE[kind]
                record.member = ""
                record.deadline = 0.0
        if len(renewed) < len(plan):
            self._advance()
            self.version += 1
        return renewed

    def move_start(self, log_start_offset: int) -> None:
        """The log start moved up (retention, DeleteRecords): what is below it is gone for the group too."""
        if log_start_offset <= self.start_offset:
            return
        for offset in [o for o in self.records if o < log_start_offset]:
            del self.records[offset]
        self.start_offset = log_start_offset
        self.next_offset = max(self.next_offset, log_start_offset)
        self._advance()
        self.version += 1

    def _advance(self) -> None:
        """The SPSO passes every final offset (and every hole) at the front."""
        start, records = self.start_offset, self.records
        while start < self.next_offset:
            record = records.get(start)
            if record is not None and record.state not in FINAL:
                break
            records.pop(start, None)
            start += 1
        self.start_offset = start

    # -- persistence -----------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """The persisted form: ``{"start_offset": N, "state_batches": [[first, last, state, count], ...]}``."""
        runs: list[list[int]] = []
        for offset in sorted(self.records):
            record = self.records[offset]
            state = AVAILABLE if record.state == ACQUIRED else record.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == state and runs[-1][3] == record.delivery_count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, state, record.delivery_count])
        return {"start_offset": self.start_offset, "state_batches": runs}

    def restore(self, snapshot: dict) -> None:
        self.start_offset = int(snapshot["start_offset"])
        self.records = {}
        for first, last, state, count in snapshot.get("state_batches", ()):
            for offset in range(first, last + 1):
                if offset >= self.start_offset:
                    self.records[offset] = InFlight(AVAILABLE if state == ACQUIRED else state, count)
        self.next_offset = max([self.start_offset, *(o + 1 for o in self.records)])
        self._advance()


def _runs(acquired: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Consecutive offsets with the same delivery count as (first, last, count) runs."""
    runs: list[list[int]] = []
    for offset, count in acquired:
        if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset, count])
    return [tuple(r) for r in runs]


def check_batches(batches: list[dict], renew: bool = False) -> str | None:
    """Kafka's checks of one partition's acknowledgement batches: the reason they are invalid, or None. RENEW (4)
    only in a v2 request that says it renews (``renew``)."""
    previous = None
    for batch in batches:
        first, last, types = batch["first_offset"], batch["last_offset"], batch["acknowledge_types"]
        if first > last:
            return f"first offset {first} is after last offset {last}"
        if previous is not None and first < previous:
            return "acknowledgement batches are not in ascending order"
        if not types:
            return "an acknowledgement batch without types"
        if len(types) != 1 and len(types) != last - first + 1:
            return f"{len(types)} acknowledge types for {last - first + 1} offsets"
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT) and not (renew and t == RENEW) for t in types):
            return f"unknown acknowledge type in {list(types)}"
        previous = last
    return None
