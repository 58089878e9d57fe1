"""The idempotent and the transactional producer's state (Kafka's ``TransactionManager``).

:class:`IdempotenceManager`: producer id, epoch and sequences of an idempotent
producer (``enable_idempotence``, the default with acks=all). One
:class:`TransactionManager` per producer with a ``transactional_id``, owned
by the producer's event loop (not thread-safe). The producer's life::

    init_transactions()            FindCoordinator(key_type 1) + InitProducerId: producer id and epoch,
                                   fencing every older producer of the same transactional id
    begin_transaction()            local only
      send(...)                    before a partition's first batch: AddPartitionsToTxn
      send_offsets_to_transaction  AddOffsetsToTxn to the transaction coordinator, then
                                   TxnOffsetCommit to the group coordinator
    commit_transaction()           flush, then EndTxn(commit); abort_transaction(): EndTxn(abort)

Batches carry the producer id, epoch, the transactional bit and a sequence
number per partition (from 0 after each InitProducerId), assigned once per
batch so a retried batch keeps its sequence. A send that finally failed makes
the transaction abortable only (commit raises, abort works); PRODUCER_FENCED,
INVALID_PRODUCER_EPOCH and a transactional id mapping error are fatal: every
later call raises :class:`~broker.client.errors.ProducerFencedError` or the error.
Retriable answers (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR, ...) are retried until ``max_block_ms``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from ._connection import Api
from ._types import TopicPartition
from .errors import IllegalStateError, KafkaError, KafkaTimeoutError, error_for_code

if TYPE_CHECKING:
    from ._cluster import Cluster
    from ._config import ProducerConfig

COORDINATOR_TRANSACTION = 1
SEQUENCE_WRAP = 1 << 31
_REFIND = {15, 16}  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: look the coordinator up again
_RETRY = {7, 14, 15, 16, 51}  # ... and REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS
_FATAL = {47, 49, 53, 90}  # INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, not authorized, PRODUCER_FENCED
_RETRY_BACKOFF_S = 0.02  # Kafka's client retries CONCURRENT_TRANSACTIONS after 20 ms


class IdempotenceManager:
    """The producer id, epoch and per-partition sequences of an idempotent producer.

    Without a ``transactional_id`` the id comes from InitProducerId sent to any
    broker. Sequences start at 0 in every partition after each InitProducerId.
    When a batch that had sequences fails for good its partition's sequences
    have a gap the broker would refuse: :attr:`need_new_id` is set and the
    sender takes a new producer id before its next send; batches not yet
    acknowledged are numbered again under the new id (a batch whose answer was
    lost and that is resent under the new id may then be written twice, as
    with a Java producer after its id is reset).
    """

    transactional_id: str | None = None

    def __init__(self, cluster: "Cluster", config: "ProducerConfig") -> None:
        self.cluster = cluster
        self.config = config
        self.producer_id = -1
        self.producer_epoch = -1
        self.need_new_id = False
        self._sequences: dict[TopicPartition, int] = {}

    def next_sequence(self, tp: TopicPartition, count: int) -> int:
        """The base sequence of a new batch of ``count`` records to ``tp``."""
        seq = self._sequences.get(tp, 0)
        self._sequences[tp] = (seq + count) % SEQUENCE_WRAP
        return seq

    def _take_id(self, resp: dict) -> None:
        self.producer_id, self.producer_epoch = resp["producer_id"], resp["producer_epoch"]
        self._sequences.clear()
        self.need_new_id = False

    async def init(self, retry: bool = True) -> None:
        """InitProducerId without a transactional id, retrying retriable errors until ``max_block_ms``
        (``retry``: the producer's start) or not at all (the sender's, which must go on expiring batches)."""
        deadline = time.monotonic() + (self.config.max_block_ms / 1000 if retry else 0)
        body = {"transactional_id": None, "transaction_timeout_ms": self.config.transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}
        while True:
            try:
                resp = await self.cluster.request(None, Api.INIT_PRODUCER_ID, body)
                if resp["error_code"] == 0:
                    self._take_id(resp)
                    return
                raise error_for_code(resp["error_code"], context="InitProducerId")
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)


class TransactionManager(IdempotenceManager):
    """See the module docstring."""

    def __init__(self, cluster: "Cluster", config: "ProducerConfig") -> None:
        super().__init__(cluster, config)
        self.transactional_id: str = config.transactional_id
        self.in_transaction = False
        self.partitions: set[TopicPartition] = set()
        #: whether the coordinator has anything of this transaction (partitions or a group's offsets)
        self.started = False
        self.abortable_error: KafkaError | None = None
        self.fatal_error: KafkaError | None = None
        self._coordinator: int | None = None

    # -- state -------------------------------------------------------------------------
    def check_fatal(self) -> None:
        if self.fatal_error is not None:
            raise self.fatal_error

    def require_transaction(self) -> None:
        self.check_fatal()
        if self.producer_id < 0:
            raise IllegalStateError("init_transactions() has not been called")
        if not self.in_transaction:
            raise IllegalStateError("no transaction in progress: call begin_transaction() first")

    # -- requests to the transaction coordinator ----------------------------------------
    async def _call(self, api: int, body: dict, what: str, error_of=lambda r: r["error_code"]) -> dict:
        """Send ``body`` to the coordinator, retrying retriable answers until ``max_block_ms``."""
        self.check_fatal()
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while True:
            try:
                if self._coordinator is None:
                    self._coordinator = await self.cluster.find_coordinator(self.transactional_id,
                                                                            COORDINATOR_TRANSACTION)
                resp = await self.cluster.request(self._coordinator, api, body)
                code = error_of(resp)
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() >= deadline:
                    raise
                self._coordinator = None
                code, resp = None, None
            if code == 0:
                return resp
            if code is not None:
                err = error_for_code(code, context=f"{what} for transactional id {self.transactional_id!r}")
                if code in _FATAL:
                    self.fatal_error = err
                    raise err
                if code not in _RETRY:
                    raise err
                if code in _REFIND:
                    self._coordinator = None
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{what} did not succeed within max_block_ms={self.config.max_block_ms}")
            await asyncio.sleep(_RETRY_BACKOFF_S)

    async def init(self) -> None:
        if self.in_transaction:
            raise IllegalStateError("a transaction is in progress")
        resp = await self._call(Api.INIT_PRODUCER_ID, {
            "transactional_id": self.transactional_id, "transaction_timeout_ms": self.config.transaction_timeout_ms,
            "producer_id": -1, "producer_epoch": -1}, "InitProducerId")
        self._take_id(resp)

    def begin(self) -> None:
        self.check_fatal()
        if self.producer_id < 0:
            raise IllegalStateError("init_transactions() has not been called")
        if self.in_transaction:
            raise IllegalStateError("a transaction is already in progress")
        self.in_transaction = True
        self.abortable_error = None
        self.partitions.clear()
        self.started = False

    async def add_partitions(self, tps) -> None:
        new = sorted(set(tps) - self.partitions)
        if not new:
            return
        by_topic: dict[str, list[int]] = {}
        for tp in new:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def first_error(resp: dict) -> int:
            codes = [p["error_code"] for t in resp["results"] for p in t["results"]]
            return next((c for c in codes if c), 0)

        await self._call(Api.ADD_PARTITIONS_TO_TXN, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
            "AddPartitionsToTxn", first_error)
        self.partitions.update(new)
        self.started = True

    async def send_offsets(self, offsets: dict[TopicPartition, int], group_id: str) -> None:
        self.require_transaction()
        await self._call(Api.ADD_OFFSETS_TO_TXN, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "group_id": group_id}, "AddOffsetsToTxn")
        self.started = True
        by_topic: dict[str, list[dict]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": offset,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""})
        body = {"transactional_id": self.transactional_id, "group_id": group_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while True:
            node = await self.cluster.find_coordinator(group_id)
            resp = await self.cluster.request(node, Api.TXN_OFFSET_COMMIT, body)
            code = next((p["error_code"] for t in resp["topics"] for p in t["partitions"] if p["error_code"]), 0)
            if code == 0:
                return
            err = error_for_code(code, context=f"TxnOffsetCommit for group {group_id!r}")
            if code in _FATAL:
                self.fatal_error = err
                raise err
            if code not in _RETRY or time.monotonic() >= deadline:
                raise err
            await asyncio.sleep(_RETRY_BACKOFF_S)

    async def end(self, commit: bool) -> None:
        self.check_fatal()
        if not self.in_transaction:
            raise IllegalStateError("no transaction in progress")
        if commit and self.abortable_error is not None:
            raise KafkaError(f"the transaction cannot commit, a send failed ({self.abortable_error}); "
                             "abort it") from self.abortable_error
        if self.started:  # nothing added: nothing to end at the coordinator (as Kafka's client)
            await self._call(Api.END_TXN, {
                "transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "committed": commit},
                "EndTxn(commit)" if commit else "EndTxn(abort)")
        self.in_transaction = False
        self.started = False
        self.partitions.clear()
