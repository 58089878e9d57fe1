"""The transaction state machine (Kafka 2.7's ``TransactionMetadata``), sans-I/O.

States and the states each may be entered from (:data:`VALID_PREVIOUS`)::

    Empty              <- Empty, CompleteCommit, CompleteAbort     producer id/epoch handed out, nothing open
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort   partitions added
    PrepareCommit      <- Ongoing                                  EndTxn(commit) written; markers to send
    PrepareAbort       <- Ongoing, PrepareEpochFence               EndTxn(abort) or a timeout/fence
    CompleteCommit     <- PrepareCommit                            every marker written
    CompleteAbort      <- PrepareAbort
    Dead               <- Empty, CompleteCommit, CompleteAbort     transactional id expired (tombstone)
    PrepareEpochFence  <- Ongoing                                  epoch bumped to fence the producer;
                                                                   the abort follows at once

A change is made in two steps, as Kafka's: :meth:`TransactionMetadata.prepare`
checks the transition, sets ``pending_state`` and returns the new values (a
:class:`~broker.txn.records.TransactionLogValue`) to write to
``__transaction_state``; once the write is in the log :meth:`complete` applies
them, and if it failed :meth:`abandon` clears ``pending_state``. While a change
is pending every other request for the id gets CONCURRENT_TRANSACTIONS.
Not thread-safe: the coordinator uses it from the event loop only.
"""

from __future__ import annotations

import enum
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.txn.records import TransactionLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = (1 << 15) - 1


class TransactionState(enum.IntEnum):
    """``transaction_status`` as stored (Kafka's byte values)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """Kafka's name (``PrepareCommit``), as DescribeTransactions and ListTransactions report it."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def from_label(cls, label: str) -> "TransactionState | None":
        return next((s for s in cls if s.label.lower() == label.lower()), None)


S = TransactionState

VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """A transition the table does not allow (a coordinator bug, never a client's mistake)."""


class TransactionMetadata:
    """One transactional id's state; see the module docstring."""

    def __init__(self, transactional_id: str, value: "TransactionLogValue") -> None:
        self.transactional_id = transactional_id
        self.value = value
        #: the producer id/epoch before the last bump, so a retried InitProducerId/EndTxn is recognised
        self.last_producer_id = NO_PRODUCER_ID
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.pending_state: TransactionState | None = None

    # the stored fields, read through
    @property
    def state(self) -> TransactionState:
        return self.value.state

    @property
    def producer_id(self) -> int:
        return self.value.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.value.producer_epoch

    @property
    def partitions(self) -> set[tuple[str, int]]:
        return self.value.partitions

    @property
    def timeout_ms(self) -> int:
        return self.value.transaction_timeout_ms

    def prepare(self, state: TransactionState, now_ms: int, **changes) -> "TransactionLogValue":
        """Check ``state`` against the table and mark it pending; returns the value to write."""
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: {self.pending_state.label} is still pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.label} -> {state.label} is not allowed")
        new = replace(self.value, state=state, last_update_timestamp_ms=now_ms, **changes)
        if state in (S.EMPTY, S.DEAD):
            new.partitions = set()
        self.pending_state = state
        return new

    def complete(self, new: "TransactionLogValue") -> None:
        if new.producer_id != self.value.producer_id or new.producer_epoch != self.value.producer_epoch:
            self.last_producer_id, self.last_producer_epoch = self.value.producer_id, self.value.producer_epoch
        self.value = new
        self.pending_state = None

    def abandon(self) -> None:
        self.pending_state = None

    def describe(self) -> dict:
        """The DescribeTransactions fields of this id."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            topics.setdefault(topic, []).append(partition)
        return {"transactional_id": self.transactional_id, "transaction_state": self.state.label,
                "transaction_timeout_ms": self.timeout_ms,
                "transaction_start_time_ms": self.value.start_timestamp_ms,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
