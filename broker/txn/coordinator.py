"""The transaction coordinator: Kafka 2.7's ``TransactionCoordinator`` over ``__transaction_state``.

One :class:`TransactionCoordinator` per broker, owned by the event loop (not
thread-safe). It coordinates the transactional ids whose ``__transaction_state``
partition (:func:`broker.txn.records.partition_for`) this broker leads, keeps
their :class:`~broker.txn.state.TransactionMetadata` in memory, and writes every
change to that partition before acting on it or answering (see
:mod:`broker.txn.state` for the two-step transitions).

* InitProducerId: a new id gets a producer id and epoch 0; a known one gets its
  epoch bumped (a new producer id once the epoch is exhausted), which fences the
  previous producer. A transaction the old producer left Ongoing is aborted first
  (its epoch bumped so the old producer is fenced at the partitions too) and the
  client is told CONCURRENT_TRANSACTIONS, so it retries once the abort completes.
  ``transaction_timeout_ms`` must be in (0, ``transaction.max.timeout.ms``].
* AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the transaction (Ongoing).
  One that meets a change in progress, most often the producer's previous
  transaction still writing its markers and CompleteCommit, waits for it (up to
  :data:`CONCURRENT_WAIT_S`, then CONCURRENT_TRANSACTIONS) instead of being
  answered CONCURRENT_TRANSACTIONS at once as Kafka 2.7 does. Kafka's design
  (KIP-98) and later KAFKA-9878 meant to hold the request so; Kafka 4.0 does
  the like on the broker for KIP-890's produce-side adds. The client sees only
  a later success: librdkafka and Java retry CONCURRENT_TRANSACTIONS after
  20 ms, many times what the completion takes, and a producer committing every
  few milliseconds met it in about one transaction of eight.
* EndTxn: PrepareCommit or PrepareAbort is written and the client answered;
  then markers are written into every partition of the transaction by its
  current leader (:mod:`broker.txn.marker_channel`: WriteTxnMarkers to remote
  leaders, a direct append where this broker leads; retried with the leader the
  metadata cache names then until each partition has its marker, given up only
  for a partition whose topic is gone) and only then is CompleteCommit/CompleteAbort
  written. A transaction found in PrepareCommit/PrepareAbort when a partition is
  loaded (the broker died between the two) is completed the same way.
* Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an
  Ongoing transaction older than its timeout is aborted with its epoch bumped
  (the producer is fenced: its next request gets PRODUCER_FENCED).
* Every ``transaction.remove.expired.transaction.cleanup.interval.ms`` an id
  with nothing open whose last update is older than ``transactional.id.expiration.ms``
  is tombstoned and forgotten.

Loading: the replica layer's leadership listeners call :meth:`load_partition`
when this broker becomes the leader of a ``__transaction_state`` partition (its
log is replayed in a worker thread; requests for its ids meanwhile get
COORDINATOR_LOAD_IN_PROGRESS) and :meth:`unload_partition` when it resigns (its
ids are forgotten; their requests get NOT_COORDINATOR, as do ids of partitions
not led here). The coordinator epoch written into markers is the partition's
leader epoch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from broker.coordinator.storage import StorageError, commit_error_for
from broker.protocol import ErrorCode
from broker.txn import storage
from broker.txn.marker_channel import MarkerChannel
from broker.txn.producer_ids import ProducerIdManager
from broker.txn.records import TransactionLogValue, encode_key, encode_value, partition_for
from broker.txn.state import MAX_EPOCH, IllegalTransition, TransactionMetadata, TransactionState
from broker.txn.storage import TRANSACTION_TOPIC

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.txn")

S = TransactionState
#: how long a write to __transaction_state or a marker may wait for replication (Kafka: request.timeout.ms)
WRITE_TIMEOUT_S = 30.0
#: pause between rounds of marker writes to partitions that answered with a retriable error
MARKER_RETRY_S = 0.1
#: how long AddPartitionsToTxn/AddOffsetsToTxn waits for a change in progress before CONCURRENT_TRANSACTIONS
CONCURRENT_WAIT_S = 5.0


def now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    """See the module docstring. ``await start()`` after the topics are loaded; ``await shutdown()``."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions: int = cfg.transaction_state_log_num_partitions
        self.max_timeout_ms: int = cfg.transaction_max_timeout_ms
        self.expiration_ms: int = cfg.transactional_id_expiration_ms
        self.abort_interval_ms: int = cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
        self.remove_interval_ms: int = cfg.transaction_remove_expired_transaction_cleanup_interval_ms
        self.producer_ids = ProducerIdManager(broker)
        self.markers = MarkerChannel(broker)
        self.transactions: dict[str, TransactionMetadata] = {}
        #: partitions of __transaction_state coordinated here -> coordinator epoch (their leader epoch)
        self.owned: dict[int, int] = {}
        self.loading: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        #: requests waiting for a change of a transactional id to be written (see add_partitions)
        self._waiters: dict[str, list[asyncio.Future]] = {}
        self._stopped = False

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        info = self.broker.topics.get(TRANSACTION_TOPIC)
        if info is not None:
            self.num_partitions = len(info.partitions)
        replicas = self.broker.replicas
        replicas.add_leadership_listener(
            lambda tp, epoch: tp[0] == TRANSACTION_TOPIC and self._on_loop(self.load_partition, tp[1], epoch),
            lambda tp, epoch: tp[0] == TRANSACTION_TOPIC and self._on_loop(self.unload_partition, tp[1]))
        for partition in replicas.partitions():  # led before we listened
            if partition.topic == TRANSACTION_TOPIC and partition.is_leader:
                self.load_partition(partition.partition, partition.leader_epoch)
        self._spawn(self._every(self.abort_interval_ms, self.abort_timed_out_transactions))
        self._spawn(self._every(self.remove_interval_ms, self.expire_transactional_ids))

    def _on_loop(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the loop: now if called there, else soon (a listener on another thread)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            fn(*args)
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(fn, *args)

    async def shutdown(self) -> None:
        self._stopped = True
        for txn_id in list(self._waiters):
            self._changed(txn_id)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.markers.close()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _every(self, interval_ms: int, fn) -> None:
        while not self._stopped:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await fn()
            except Exception:
                log.exception("transaction coordinator: %s failed", fn.__name__)

    def load_partition(self, p: int, epoch: int) -> None:
        """This broker now leads ``__transaction_state-p`` from ``epoch``: replay it, then coordinate its ids."""
        if self._stopped or self.owned.get(p, -2) >= epoch:
            return
        if p in self.owned:  # still the leader, in a new epoch: what is cached is current
            self.owned[p] = epoch
            self._complete_prepared(p)  # a completion under way stops at the epoch change; go on in this one
            return
        self.num_partitions = self._partition_count()
        self.loading.add(p)
        self._spawn(self._load(p, epoch))

    def _partition_count(self) -> int:
        info = self.broker.topics.get(TRANSACTION_TOPIC)
        return self.num_partitions if info is None else len(info.partitions)

    async def _load(self, p: int, epoch: int) -> None:
        partition = self.broker.replicas.partition(TRANSACTION_TOPIC, p)
        started = time.perf_counter()
        try:
            values, bad = await self.broker.run_blocking(storage.read_partition, partition)
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_TOPIC, p)
            self.loading.discard(p)
            return
        if p not in self.loading:  # unloaded meanwhile
            return
        for txn_id, value in values.items():
            self.transactions[txn_id] = TransactionMetadata(txn_id, value)
        self.owned[p] = epoch
        self.loading.discard(p)
        if values or bad:
            log.info("transaction coordinator loaded %d transactional id(s) from %s-%d in %.3f s%s", len(values),
                     TRANSACTION_TOPIC, p, time.perf_counter() - started, f" ({bad} bad record(s))" if bad else "")
        self._complete_prepared(p)

    def _complete_prepared(self, p: int) -> None:
        """Complete the transactions of partition ``p`` found in PrepareCommit/PrepareAbort."""
        for txn in list(self.transactions.values()):
            if self.partition_for(txn.transactional_id) == p and txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info("transaction %s: completing %s (coordinator epoch %d)", txn.transactional_id,
                         txn.state.label, self.owned[p])
                self._spawn(self._complete(txn, txn.state is S.PREPARE_COMMIT))

    def unload_partition(self, p: int) -> None:
        """This broker no longer leads ``__transaction_state-p``: forget its ids."""
        self.loading.discard(p)
        self.owned.pop(p, None)
        for txn_id in [t for t in self.transactions if self.partition_for(t) == p]:
            del self.transactions[txn_id]
            self._changed(txn_id)

    async def wait_loaded(self) -> None:
        """Wait until every partition being loaded is loaded (tests, tools)."""
        while self.loading and not self._stopped:
            await asyncio.sleep(0.01)

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` if needed (TopicError if refused); a new topic is served once loaded."""
        existed = self.broker.topics.get(TRANSACTION_TOPIC) is not None
        info = await storage.ensure_transaction_topic(self.broker)
        self.num_partitions = len(info.partitions)
        if not existed:
            await self.wait_loaded()

    # -- routing -------------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_error(self, transactional_id: str | None) -> int:
        """INVALID_REQUEST, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or NONE for an id."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        p = self.partition_for(transactional_id)
        if self._stopped:
            return ErrorCode.NOT_COORDINATOR
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    async def _write(self, txn: TransactionMetadata, new: TransactionLogValue) -> int:
        """Write ``new`` (prepared on ``txn``) and complete the transition; NONE or the error to answer."""
        p = self.partition_for(txn.transactional_id)
        epoch = self.owned.get(p)
        value = None if new.state is S.DEAD else encode_value(new)
        try:
            await storage.append_record(self.broker.replicas, p, encode_key(txn.transactional_id), value,
                                        WRITE_TIMEOUT_S)
        except StorageError as exc:
            txn.abandon()
            self._changed(txn.transactional_id)
            log.warning("transaction %s: writing %s failed: %s", txn.transactional_id, new.state.label, exc)
            code = commit_error_for(exc.error_code)
            return ErrorCode.UNKNOWN_SERVER_ERROR if code == ErrorCode.INVALID_COMMIT_OFFSET_SIZE else code
        if self.owned.get(p) != epoch:  # the partition moved on while we wrote
            txn.abandon()
            self._changed(txn.transactional_id)
            return ErrorCode.NOT_COORDINATOR
        txn.complete(new)
        self._changed(txn.transactional_id)
        return ErrorCode.NONE

    async def _wait_for_change(self, transactional_id: str, timeout_s: float) -> None:
        """Wait until a change of ``transactional_id`` is written or given up, its partition unloaded, or
        ``timeout_s`` passes."""
        waiter = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(transactional_id, [])
        waiters.append(waiter)
        try:
            await asyncio.wait((waiter,), timeout=timeout_s)
        finally:
            if not waiter.done():
                waiter.cancel()
                waiters.remove(waiter)
                if not waiters and self._waiters.get(transactional_id) is waiters:
                    del self._waiters[transactional_id]

    def _changed(self, transactional_id: str) -> None:
        """Wake the requests waiting for a change of ``transactional_id`` (they check again)."""
        for waiter in self._waiters.pop(transactional_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    # -- InitProducerId -----------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = -1,
                               expected_epoch: int = -1) -> tuple[int, int, int]:
        """Kafka's handleInitProducerId for a transactional id: (error_code, producer_id, producer_epoch)."""
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, -1, -1
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        error = self.coordinator_error(transactional_id)
        if error:
            return error, -1, -1
        txn = self.transactions.get(transactional_id)
        if txn is None:
            producer_id = await self.producer_ids.generate()
            txn = self.transactions.setdefault(transactional_id, TransactionMetadata(transactional_id, TransactionLogValue(
                producer_id, -1, timeout_ms, S.EMPTY, set(), now_ms(), -1)))
        if txn.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if expected_producer_id != -1 and (expected_producer_id, expected_epoch) != (txn.producer_id,
                                                                                     txn.producer_epoch):
            if (expected_producer_id, expected_epoch) == (txn.last_producer_id, txn.last_producer_epoch) \
                    and txn.state is S.EMPTY:
                return ErrorCode.NONE, txn.producer_id, txn.producer_epoch  # a retry of the bump that happened
            return ErrorCode.PRODUCER_FENCED, -1, -1
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if txn.state is S.ONGOING:
            log.info("transaction %s: a new producer fences epoch %d; aborting its open transaction",
                     transactional_id, txn.producer_epoch)
            error = await self._fence_and_abort(txn)
            return (error or ErrorCode.CONCURRENT_TRANSACTIONS), -1, -1
        producer_id, epoch = txn.producer_id, txn.producer_epoch + 1
        if epoch >= MAX_EPOCH:
            producer_id, epoch = await self.producer_ids.generate(), 0
            if txn.pending_state is not None:
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        new = txn.prepare(S.EMPTY, now_ms(), producer_id=producer_id, producer_epoch=epoch,
                          transaction_timeout_ms=timeout_ms, start_timestamp_ms=-1)
        error = await self._write(txn, new)
        if error:
            return error, -1, -1
        return ErrorCode.NONE, producer_id, epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[int, TransactionMetadata | None]:
        error = self.coordinator_error(transactional_id)
        if error:
            return error, None
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if txn.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, txn

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: set[tuple[str, int]]) -> int:
        """Kafka's handleAddPartitionsToTransaction: one error code for all ``partitions``.

        A request that meets a change in progress (most often the previous
        transaction's markers and CompleteCommit, which a producer's next
        transaction races) waits for it, up to :data:`CONCURRENT_WAIT_S`, instead
        of being answered CONCURRENT_TRANSACTIONS at once: the client would retry
        only after its backoff (librdkafka and Java: 20 ms), longer than the
        completion takes. After the wait everything is checked again.
        """
        deadline = time.monotonic() + CONCURRENT_WAIT_S
        while True:
            error = await self._add_partitions_once(transactional_id, producer_id, epoch, partitions)
            remaining = deadline - time.monotonic()
            if error != ErrorCode.CONCURRENT_TRANSACTIONS or remaining <= 0 or self._stopped:
                return error
            await self._wait_for_change(transactional_id, remaining)

    async def _add_partitions_once(self, transactional_id: str, producer_id: int, epoch: int,
                                   partitions: set[tuple[str, int]]) -> int:
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if error:
            return error
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is S.ONGOING and partitions <= txn.partitions:
            return ErrorCode.NONE
        now = now_ms()
        start = txn.value.start_timestamp_ms if txn.state is S.ONGOING else now
        new = txn.prepare(S.ONGOING, now, partitions=txn.partitions | partitions, start_timestamp_ms=start)
        return await self._write(txn, new)

    # -- EndTxn ---------------------------------------------------------------------------------------------
    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> int:
        """Kafka's handleEndTransaction from a client; answered once PrepareCommit/PrepareAbort is written."""
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if error:
            return error
        state = txn.state
        if state is S.ONGOING:
            new = txn.prepare(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms())
            error = await self._write(txn, new)
            if not error:
                self._spawn(self._complete(txn, commit))
            return error
        if state is S.COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
        if state is S.COMPLETE_ABORT:
            return ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE
        if state is S.PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        if state is S.PREPARE_ABORT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE

    async def _fence_and_abort(self, txn: TransactionMetadata) -> int:
        """Bump the epoch of an Ongoing transaction and abort it (timeouts, a new producer, operators)."""
        epoch = txn.producer_epoch if txn.producer_epoch >= MAX_EPOCH - 1 else txn.producer_epoch + 1
        new = txn.prepare(S.PREPARE_ABORT, now_ms(), producer_epoch=epoch)
        error = await self._write(txn, new)
        if not error:
            self._spawn(self._complete(txn, False))
        return error

    async def _complete(self, txn: TransactionMetadata, commit: bool) -> None:
        """Write the markers into every partition of ``txn``, then CompleteCommit/CompleteAbort."""
        p = self.partition_for(txn.transactional_id)
        coordinator_epoch = self.owned.get(p)
        pending = set(txn.partitions)
        producer_id, epoch = txn.producer_id, txn.producer_epoch
        reported: dict[tuple[str, int], int] = {}
        while pending:
            codes = await self.markers.send_markers(producer_id, epoch, commit, coordinator_epoch, sorted(pending),
                                                    WRITE_TIMEOUT_S)
            for tp, code in codes.items():
                if code in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    pending.discard(tp)
                elif reported.get(tp) != code:  # once per error, not once per retry
                    reported[tp] = code
                    log.info("transaction %s: marker for %s-%d: error %d, retrying", txn.transactional_id, *tp, code)
            if self.owned.get(p) != coordinator_epoch or self.transactions.get(txn.transactional_id) is not txn:
                return  # another coordinator (or a reload) completes it
            if pending:
                await asyncio.sleep(MARKER_RETRY_S)
        target = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        while self.owned.get(p) == coordinator_epoch and txn.state is not target:
            if txn.pending_state is None:
                error = await self._write(txn, txn.prepare(target, now_ms(), partitions=set()))
                if error in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR):
                    return
                log.warning("transaction %s: writing %s failed (error %d), retrying", txn.transactional_id,
                            target.label, error)
            await asyncio.sleep(MARKER_RETRY_S)

    # -- timeouts and expiry ------------------------------------------------------------------------------
    async def abort_timed_out_transactions(self) -> None:
        now = now_ms()
        for txn in list(self.transactions.values()):
            if (txn.state is S.ONGOING and txn.pending_state is None
                    and txn.value.start_timestamp_ms + txn.timeout_ms < now
                    and self.coordinator_error(txn.transactional_id) == ErrorCode.NONE):
                log.info("transaction %s (producer %d, epoch %d) timed out after %d ms; aborting it",
                         txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.timeout_ms)
                await self._fence_and_abort(txn)

    async def expire_transactional_ids(self) -> None:
        now = now_ms()
        for txn in list(self.transactions.values()):
            if (txn.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and txn.pending_state is None
                    and txn.value.last_update_timestamp_ms + self.expiration_ms <= now
                    and self.coordinator_error(txn.transactional_id) == ErrorCode.NONE):
                try:
                    new = txn.prepare(S.DEAD, now)
                except IllegalTransition:
                    continue
                if not await self._write(txn, new):
                    log.info("transactional id %s expired", txn.transactional_id)
                    self.transactions.pop(txn.transactional_id, None)

    # -- DescribeTransactions / ListTransactions -------------------------------------------------------------
    def describe(self, transactional_id: str) -> dict:
        error = self.coordinator_error(transactional_id)
        txn = None if error else self.transactions.get(transactional_id)
        if not error and (txn is None or txn.state is S.DEAD):
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if error:
            return {"error_code": int(error), "transactional_id": transactional_id, "transaction_state": "",
                    "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                    "producer_epoch": -1, "topics": []}
        return {"error_code": ErrorCode.NONE, **txn.describe()}

    def list(self, states: set[TransactionState] | None, producer_ids: set[int] | None) -> list[TransactionMetadata]:
        """The ids coordinated here, filtered by state and producer id (None: no filter)."""
        return [t for t in self.transactions.values()
                if t.state is not S.DEAD and (not states or t.state in states)
                and (not producer_ids or t.producer_id in producer_ids)
                and self.coordinator_error(t.transactional_id) == ErrorCode.NONE]
