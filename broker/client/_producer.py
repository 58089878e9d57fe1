"""The producer: :class:`AsyncProducer` (asyncio core) and :class:`Producer`
(blocking facade whose loop runs in a background thread).

``send`` serializes the key and value, picks a partition (explicit, or the
configured partitioner: murmur2 for keys, sticky for null keys), and appends
to the :class:`~._accumulator.RecordAccumulator`. One sender task per producer
drains ready batches grouped by partition leader into Produce requests, at
most ``max_in_flight_requests_per_connection`` unanswered per broker.

Retries: a retriable error code or a lost connection puts the batch back after
``retry_backoff_ms`` (stale-metadata errors also refresh metadata) until
``retries`` attempts or ``delivery_timeout_ms`` since the batch was created.
With ``acks=0`` no response is awaited and offsets are reported as -1.

Idempotence (``enable_idempotence``; by default on unless ``acks`` is not all,
``retries`` is 0 or more than five requests may be in flight, as the Java
client 3.2+; asked for explicitly with those, a ConfigError): the producer
takes a producer id (InitProducerId) at start and numbers each partition's
batches when they are first sent (:class:`~._transactions.IdempotenceManager`).
A batch once sent takes no more records and a retry resends it unchanged, so
the broker writes a batch whose answer was lost only once and answers the
retry with the first write's offset; a partition has one batch in flight at a
time, so sequences reach the broker in order. With the default setting, a
broker that refuses InitProducerId (an old broker: UNSUPPORTED_VERSION) gets a
producer without idempotence, with a warning.

Transactions: with ``transactional_id`` set the producer is transactional
(Kafka's API: :meth:`AsyncProducer.init_transactions`, ``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``;
see :mod:`._transactions`). Every send must be inside a transaction; its batches
carry the producer id, epoch, a per-partition sequence and the transactional
bit, and a partition is added to the transaction before its first batch is sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import Any, Callable, Mapping

from broker.records.batch import Header, Record, RecordBatch, encode_batch
from broker.records.compression import Compression

from ._accumulator import ProducerBatch, RecordAccumulator, RecordFuture
from ._cluster import Cluster
from ._config import ProducerConfig, build_config
from ._connection import Api
from ._partitioner import as_partitioner
from ._serde import bytes_serializer
from ._sync import LoopThread, wait_event
from ._transactions import IdempotenceManager, TransactionManager
from ._types import TopicPartition
from .errors import (
    AuthenticationError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)

log = logging.getLogger("broker.client")

_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
# Errors after which the leader we sent to is probably not the leader any more.
_STALE_METADATA = {3, 5, 6, 74, 75}
DUPLICATE_SEQUENCE_NUMBER = 46


class AsyncProducer:
    """Asyncio producer. Use as ``async with AsyncProducer(bootstrap_servers=...) as p``.

    ``send`` returns a :class:`RecordFuture` at once (await it for the
    :class:`RecordMetadata`); ``send_and_wait`` does both.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: ProducerConfig = build_config(ProducerConfig, config, kwargs)
        c = self.config
        self._cluster = Cluster(c)
        self._partitioner = as_partitioner(c.partitioner)
        self._key_ser: Callable = c.key_serializer or bytes_serializer
        self._value_ser: Callable = c.value_serializer or bytes_serializer
        self._compression = _CODECS[c.compression_type]
        # Called from every thread that sends, unlocked, as Kafka's producer calls onNewBatch: a partitioner
        # with state keeps it consistent itself (DefaultPartitioner's worst race is two threads each
        # choosing the next sticky partition, the later choice standing).
        self._on_new_batch = getattr(self._partitioner, "on_new_batch", None)
        self._acc = RecordAccumulator(c.batch_size, c.linger_ms, c.delivery_timeout_ms,
                                      c.retry_backoff_ms, c.buffer_memory)
        self._txn = TransactionManager(self._cluster, c) if c.transactional_id is not None else None
        #: the producer id and sequences (the transaction manager's when transactional)
        self._ids: IdempotenceManager | None = self._txn or (
            IdempotenceManager(self._cluster, c) if c.enable_idempotence else None)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._sender: asyncio.Task | None = None
        self._in_flight: dict[int, int] = defaultdict(int)
        self._response_tasks: set[asyncio.Task] = set()
        self._closed = False
        self._started = False
        self._wake_pending = False

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        """Connect to the bootstrap list and start the sender."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        await self._cluster.refresh_metadata()
        if self._ids is not None and self._txn is None:
            try:
                await self._ids.init()
            except KafkaError as exc:
                if self.config.idempotence_explicit:
                    raise
                log.warning("producer without idempotence: the broker gave no producer id (%s)", exc)
                self._ids = None
        self._sender = asyncio.ensure_future(self._run_sender())
        self._started = True

    async def __aenter__(self) -> "AsyncProducer":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until every record is acknowledged or failed."""
        self._acc.flushing += 1
        try:
            self._wakeup()
            pending = list(self._acc.incomplete)
            waits = []
            for b in pending:
                if not b.done:
                    fut = self._loop.create_future()
                    b.add_waiter(lambda f=fut: f.done() or f.set_result(None))
                    waits.append(fut)
            if waits:
                done, not_done = await asyncio.wait(waits, timeout=timeout)
                if not_done:
                    raise KafkaTimeoutError(f"flush did not finish within {timeout} s")
        finally:
            self._acc.flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender and close connections. Idempotent."""
        if self._closed:
            return
        if self._started:
            try:
                await self.flush(timeout)
            finally:
                self._closed = True
                self._acc.closing = True
                self._wakeup()
                if self._sender is not None:
                    await asyncio.gather(self._sender, return_exceptions=True)
                self._acc.fail_all(IllegalStateError("producer closed"))
                await self._cluster.close()
        self._closed = True

    # -- sending ---------------------------------------------------------------
    async def partitions_for(self, topic: str) -> list[int]:
        await self._cluster.ensure_topics([topic], self.config.max_block_ms, allow_auto_topic_creation=True)
        return self._cluster.partitions_for(topic)

    async def send(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
                   timestamp_ms: int | None = None, headers: Any = None,
                   on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> RecordFuture:
        """Queue one record; returns its delivery future without waiting for delivery.

        ``headers``: a list of ``(str, bytes | None)`` or a dict. ``on_delivery(error,
        metadata)`` runs on the client's event loop when the record's batch completes.
        """
        if topic not in self._cluster.topics:
            await self._cluster.ensure_topics([topic], self.config.max_block_ms, allow_auto_topic_creation=True)
        while self._acc.buffered >= self.config.buffer_memory and not self._closed:
            self._wakeup()
            await asyncio.sleep(0.001)
        return self._append(topic, value, key, partition, timestamp_ms, headers, on_delivery)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kw):
        fut = await self.send(topic, value, key, **kw)
        return await fut

    # -- transactions ------------------------------------------------------------
    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError("not a transactional producer: set transactional_id")
        return self._txn

    async def init_transactions(self) -> None:
        """Get this transactional id's producer id and epoch, fencing older producers of the id
        (and letting the coordinator end what they left open). Call once, before the first transaction."""
        await self._transactions().init()

    def begin_transaction(self) -> None:
        self._transactions().begin()

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_id: str) -> None:
        """Commit ``offsets`` (the next offset to consume, per partition) for ``group_id`` with the transaction."""
        await self._transactions().send_offsets(dict(offsets), group_id)

    async def commit_transaction(self) -> None:
        """Send everything buffered, then commit; raises if a send failed (then abort instead)."""
        txn = self._transactions()
        txn.require_transaction()
        await self.flush()
        await txn.end(commit=True)

    async def abort_transaction(self) -> None:
        """Wait for the sends in flight, then abort: read_committed consumers never see the transaction."""
        txn = self._transactions()
        txn.require_transaction()
        await self.flush()
        await txn.end(commit=False)

    def _append(self, topic, value, key, partition, timestamp_ms, headers, on_delivery) -> RecordFuture:
        if self._closed:
            raise IllegalStateError("producer is closed")
        if self._txn is not None:
            self._txn.require_transaction()
        key_bytes = key if (key is None or type(key) is bytes) and self._key_ser is bytes_serializer \
            else self._key_ser(key)
        value_bytes = value if (value is None or type(value) is bytes) and self._value_ser is bytes_serializer \
            else self._value_ser(value)
        if headers:
            items = headers.items() if isinstance(headers, Mapping) else headers
            headers = [(k, v.encode() if isinstance(v, str) else v) for k, v in items]
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        cluster = self._cluster
        size = (len(key_bytes) if key_bytes else 0) + (len(value_bytes) if value_bytes else 0)
        if size > self.config.max_request_size:
            raise error_for_code(10, f"record of {size} bytes exceeds max_request_size")
        # As Apache Kafka's producer (KIP-480): a record the partitioner placed that would open a new batch
        # first lets a sticky partitioner move on, then goes where it points now; so one partition is sticky
        # for a batch at a time, at any rate, and never for good. A record given its partition moves nothing.
        on_new = None
        if partition is not None:
            if partition not in cluster.topics[topic].partitions:
                raise ConfigError(f"topic {topic!r} has no partition {partition}")
        else:
            parts = cluster.partitions_for(topic)
            if not parts:
                raise error_for_code(3, f"topic {topic!r} has no known partitions")
            available = cluster.available_partitions(topic)
            partition = self._partitioner.partition(topic, key_bytes, parts, available)
            on_new = self._on_new_batch
        fut, wake = self._acc.append(TopicPartition(topic, partition), timestamp_ms, key_bytes, value_bytes,
                                     headers, on_delivery, on_new is not None)
        if fut is None:
            on_new(topic, partition)
            partition = self._partitioner.partition(topic, key_bytes, parts, available)
            fut, wake = self._acc.append(TopicPartition(topic, partition), timestamp_ms, key_bytes, value_bytes,
                                         headers, on_delivery)
        if wake:
            self._wakeup()
        return fut

    def _wakeup(self) -> None:
        if self._wake is None:
            return
        if self._loop is not None and _in_loop(self._loop):
            self._wake.set()
        elif self._loop is not None and not self._loop.is_closed() and not self._wake_pending:
            # one cross-thread wakeup at a time: each costs a self-pipe write and a GIL handoff
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._set_wake)

    def _set_wake(self) -> None:
        self._wake_pending = False
        self._wake.set()

    # -- sender ----------------------------------------------------------------
    async def _run_sender(self) -> None:
        while not self._closed:
            try:
                delay = await self._send_ready()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep the sender alive; batches time out by themselves
                log.exception("producer sender failed; retrying")
                delay = self.config.retry_backoff_ms / 1000
            if delay > 0:
                await wait_event(self._wake, delay)
            self._wake.clear()

    async def _send_ready(self) -> float:
        """Send every ready batch the in-flight limits allow; return seconds to sleep."""
        now = time.monotonic()
        for b in self._acc.expire(now):
            self._sequence_gap(b)
            self._acc.finished(b, -1, -1, KafkaTimeoutError(
                f"{len(b.records)} record(s) for {b.tp.topic}-{b.tp.partition} expired after "
                f"delivery_timeout_ms={self.config.delivery_timeout_ms}"))
        ready, next_check = self._acc.ready(now)
        if not ready:
            return next_check
        if self._txn is not None:
            try:
                await self._txn.add_partitions(ready)
            except KafkaError as exc:
                for tp in ready:
                    while (b := self._acc.take(tp)) is not None:
                        self._txn.abortable_error = exc
                        self._acc.finished(b, -1, -1, exc)
                return 0.0
        elif self._ids is not None and self._ids.need_new_id:
            try:
                await self._ids.init(retry=False)
            except KafkaError as exc:
                log.debug("InitProducerId failed: %s", exc)
                return self.config.retry_backoff_ms / 1000
        cluster = self._cluster
        if cluster.stale():
            try:
                await cluster.refresh_metadata()
            except AuthenticationError as exc:  # not retried: fail what is ready, as Kafka's sender does
                for tp in ready:
                    while (b := self._acc.take(tp)) is not None:
                        self._sequence_gap(b)
                        self._acc.finished(b, -1, -1, exc)
                return self.config.retry_backoff_ms / 1000
            except KafkaError as exc:
                log.debug("metadata refresh failed: %s", exc)
                return self.config.retry_backoff_ms / 1000
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in ready:
            leader = cluster.leader_for(tp)
            if leader < 0:
                cluster.request_update()
                next_check = min(next_check, self.config.retry_backoff_ms / 1000)
                continue
            by_node[leader].append(tp)
        limit = self.config.max_in_flight_requests_per_connection
        blocked = False
        throttle_wait = 0.0
        sent = False
        for node, tps in by_node.items():
            if self._in_flight[node] >= limit:
                blocked = True
                continue
            throttled = cluster.throttled_for(node)
            if throttled > 0:  # a producer quota's throttle (KIP-219): this broker's batches wait, the others go
                throttle_wait = throttled if not throttle_wait else min(throttle_wait, throttled)
                continue
            batches, size = [], 0
            for tp in tps:
                b = self._acc.take(tp)
                if b is None:
                    continue
                batches.append(b)
                size += b.size
                if size >= self.config.max_request_size:
                    break
            if batches:
                await self._send_batches(node, batches)
                sent = True
        if blocked:
            return 0.05
        if self._acc.flushing:  # at once, unless a throttle held back everything there was to send
            return throttle_wait if throttle_wait and not sent else 0.0
        return min(next_check, throttle_wait) if throttle_wait else next_check

    async def send_batch(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        """Append already encoded record batches (v2, as on the wire) to one partition
        in a Produce request of their own, bypassing the accumulator; returns
        ``(base_offset, log_append_time)`` of the first batch.

        Not retried: an error leaves it unknown whether the broker appended the
        batches (a lost connection, a timeout), so the caller decides, for
        example by reading the partition's tail before sending again. Tools
        that copy batches between clusters use this.
        """
        if self._closed:
            raise IllegalStateError("producer is closed")
        tp = TopicPartition(topic, partition)
        cluster = self._cluster
        if topic not in cluster.topics or partition not in cluster.topics[topic].partitions:
            await cluster.refresh_metadata([topic])
        leader = cluster.leader_for(tp)
        if leader < 0:
            cluster.request_update()
            raise error_for_code(5, context=f"Produce to {topic}-{partition}")
        body = {"transactional_id": None, "acks": self.config.acks, "timeout_ms": self.config.request_timeout_ms,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
        resp = await cluster.request(leader, Api.PRODUCE, body, timeout=self.config.request_timeout_ms / 1000 + 5)
        p = resp["responses"][0]["partition_responses"][0]
        if p["error_code"]:
            if p["error_code"] in _STALE_METADATA:
                cluster.request_update()
            raise error_for_code(p["error_code"], p.get("error_message"), context=f"Produce to {topic}-{partition}")
        return p["base_offset"], p.get("log_append_time_ms", -1)

    def _encode(self, b: ProducerBatch) -> bytes:
        base_ts = b.records[0][0]
        records = [
            Record(i, ts - base_ts, k, v, [Header(hk, hv) for hk, hv in h] if h else [])
            for i, (ts, k, v, h) in enumerate(b.records)
        ]
        ids = self._ids
        if ids is None:
            return encode_batch(RecordBatch(compression=self._compression, base_timestamp=base_ts, records=records))
        if b.base_sequence < 0 or b.producer_id != ids.producer_id:  # first send, or a new producer id since
            b.producer_id = ids.producer_id
            b.base_sequence = ids.next_sequence(b.tp, len(records))
        return encode_batch(RecordBatch(compression=self._compression, base_timestamp=base_ts, records=records,
                                        producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                                        base_sequence=b.base_sequence, is_transactional=self._txn is not None))

    async def _send_batches(self, node: int, batches: list[ProducerBatch]) -> None:
        topic_data: dict[str, list] = defaultdict(list)
        for b in batches:
            topic_data[b.tp.topic].append({"index": b.tp.partition, "records": self._encode(b)})
        body = {
            "transactional_id": None if self._txn is None else self._txn.transactional_id,
            "acks": self.config.acks,
            "timeout_ms": self.config.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topic_data.items()],
        }
        acks0 = self.config.acks == 0
        try:
            conn = await self._cluster.connection(node)
            fut = conn.send(Api.PRODUCE, body, expect_response=not acks0)
        except KafkaError as exc:
            self._cluster.request_update()
            self._retry_or_fail(batches, exc)
            return
        if acks0:
            for b in batches:
                self._acc.finished(b, -1)
            return
        self._in_flight[node] += 1
        task = asyncio.ensure_future(self._await_response(node, conn, fut, batches))
        self._response_tasks.add(task)
        task.add_done_callback(self._response_tasks.discard)

    async def _await_response(self, node, conn, fut, batches) -> None:
        try:
            resp = await asyncio.wait_for(fut, conn.request_timeout + 5)
        except (KafkaError, asyncio.TimeoutError) as exc:
            if isinstance(exc, asyncio.TimeoutError):
                exc = KafkaTimeoutError(f"Produce to broker {node} timed out")
                conn.close(exc)
            self._cluster.request_update()
            self._retry_or_fail(batches, exc)
            return
        finally:
            self._in_flight[node] -= 1
            self._wakeup()
        by_tp = {}
        for t in resp["responses"]:
            for p in t["partition_responses"]:
                by_tp[TopicPartition(t["name"], p["index"])] = p
        for b in batches:
            p = by_tp.get(b.tp)
            if p is None:
                self._retry_or_fail([b], KafkaConnectionError(f"no response for {b.tp}"))
                continue
            code = p["error_code"]
            if code == 0:
                self._acc.finished(b, p["base_offset"], p.get("log_append_time_ms", -1))
                continue
            if code == DUPLICATE_SEQUENCE_NUMBER:  # written before; brokers before 2.x do not say where
                self._acc.finished(b, -1, p.get("log_append_time_ms", -1))
                continue
            if code in _STALE_METADATA:
                self._cluster.request_update()
            self._retry_or_fail([b], error_for_code(code, p.get("error_message"),
                                                    context=f"Produce to {b.tp.topic}-{b.tp.partition}"))

    def _retry_or_fail(self, batches: list[ProducerBatch], exc: KafkaError) -> None:
        now = time.monotonic()
        for b in batches:
            if exc.retriable and b.attempts <= self.config.retries and now < b.deadline and not self._closed:
                self._acc.requeue(b, now)
            else:
                if self._txn is not None:
                    self._txn.abortable_error = exc
                self._sequence_gap(b)
                self._acc.finished(b, -1, -1, exc)
        self._wakeup()

    def _sequence_gap(self, b: ProducerBatch) -> None:
        """``b`` fails for good: if it had sequences, an idempotent producer needs a new producer id
        (a transactional one aborts instead: its epoch is bumped by the next InitProducerId)."""
        if self._txn is None and self._ids is not None and b.base_sequence >= 0:
            self._ids.need_new_id = True


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class Producer:
    """Blocking producer; its event loop runs in a background thread.

    ``send`` does not wait for delivery: it returns a :class:`RecordFuture`
    (``.result(timeout)``). ``flush()`` waits for everything sent so far;
    ``close()`` flushes and releases the connections. Usable as a context manager.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = AsyncProducer(config, **kwargs)
        self._thread = LoopThread("kafkapy-producer")
        try:
            self._thread.run(self._core.start())
        except BaseException:
            self._thread.run(self._core.close())
            self._thread.stop()
            raise

    @property
    def config(self) -> ProducerConfig:
        return self._core.config

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Any = None,
             on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> RecordFuture:
        """Queue one record (see :meth:`AsyncProducer.send`); blocks only while
        topic metadata is unknown or the buffer is full (up to ``max_block_ms``)."""
        core = self._core
        if topic not in core._cluster.topics:
            self._thread.run(core._cluster.ensure_topics([topic], core.config.max_block_ms,
                                                         allow_auto_topic_creation=True))
        if core._acc.buffered >= core.config.buffer_memory:
            core._wakeup()
            if not core._acc.wait_for_space(core.config.max_block_ms / 1000):
                raise KafkaTimeoutError("buffer_memory still full after max_block_ms")
        return core._append(topic, value, key, partition, timestamp_ms, headers, on_delivery)

    def partitions_for(self, topic: str) -> list[int]:
        return self._thread.run(self._core.partitions_for(topic))

    def init_transactions(self) -> None:
        """See :meth:`AsyncProducer.init_transactions`."""
        self._thread.run(self._core.init_transactions())

    def begin_transaction(self) -> None:
        self._core.begin_transaction()

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_id: str) -> None:
        self._thread.run(self._core.send_offsets_to_transaction(offsets, group_id))

    def commit_transaction(self) -> None:
        self._thread.run(self._core.commit_transaction())

    def abort_transaction(self) -> None:
        self._thread.run(self._core.abort_transaction())

    def send_batch(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        """Append encoded record batches in a request of their own (see :meth:`AsyncProducer.send_batch`)."""
        return self._thread.run(self._core.send_batch(topic, partition, records))

    def flush(self, timeout: float | None = None) -> None:
        self._thread.run(self._core.flush(timeout))

    def close(self, timeout: float | None = None) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._core.close(timeout))
        finally:
            self._thread.stop()
