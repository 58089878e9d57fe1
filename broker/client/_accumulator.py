"""Per-partition batching for the producer (Kafka's design document, "async batching").

Records are appended to the open :class:`ProducerBatch` of their partition; a
batch is *ready* when it reaches ``batch_size`` bytes, when ``linger_ms`` has
passed since its first record, when a flush is in progress, or when it waits
for a retry whose backoff has elapsed. The sender drains ready batches, one
per partition per request, encodes each as one RecordBatch v2 (with
``broker.records``) and completes it with the broker's base offset.

Thread-safety: :class:`RecordAccumulator` is safe to call from any thread
(one lock); batches are completed only on the sender's event loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Callable

from ._types import RecordMetadata, TopicPartition
from .errors import KafkaError, KafkaTimeoutError

RECORD_OVERHEAD = 16  # rough per-record varint/attribute overhead, for sizing only


class ProducerBatch:
    """Records for one partition, sent together; completed once, on the event loop."""

    __slots__ = (
        "tp", "records", "size", "created", "deadline", "attempts", "retry_at", "callbacks",
        "done", "base_offset", "log_append_time", "error", "_event", "_waiters", "in_flight", "base_sequence",
        "producer_id",
    )

    def __init__(self, tp: TopicPartition, now: float, delivery_timeout: float) -> None:
        self.tp = tp
        self.records: list[tuple] = []  # (timestamp, key, value, headers)
        self.size = 0
        self.created = now
        self.deadline = now + delivery_timeout
        self.attempts = 0
        #: an idempotent producer's id and sequence, given at the first send and kept by retries
        self.base_sequence = -1
        self.producer_id = -1
        self.retry_at = 0.0
        self.callbacks: list | None = None
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self._event: threading.Event | None = None
        self._waiters: list | None = None
        self.in_flight = False

    def complete(self, base_offset: int, log_append_time: int = -1, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error
        self.done = True
        if self._event is not None:
            self._event.set()
        if self._waiters:
            for fn in self._waiters:
                fn()
        if self.callbacks:
            for index, cb in self.callbacks:
                try:
                    if error is None:
                        cb(None, self.metadata(index))
                    else:
                        cb(error, None)
                except Exception:  # a user callback must not break the sender
                    import logging

                    logging.getLogger("broker.client").exception("delivery callback failed")

    def metadata(self, index: int) -> RecordMetadata:
        ts, key, value, _ = self.records[index]
        offset = -1 if self.base_offset < 0 else self.base_offset + index
        timestamp = self.log_append_time if self.log_append_time >= 0 else ts
        return RecordMetadata(
            self.tp.topic, self.tp.partition, offset, timestamp,
            -1 if key is None else len(key), -1 if value is None else len(value),
        )

    def wait(self, timeout: float | None) -> bool:
        if self.done:
            return True
        with _event_lock:
            if self._event is None:
                self._event = threading.Event()
            if self.done:
                return True
        return self._event.wait(timeout)

    def add_waiter(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` (on the event loop) when the batch completes; now if it has."""
        if self.done:
            fn()
            return
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fn)


_event_lock = threading.Lock()


class RecordFuture:
    """The delivery future of one record: ``result(timeout)`` blocks (from any
    thread but the client's loop) and returns :class:`RecordMetadata` or raises
    the delivery error; ``await fut`` does the same inside the client's loop."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s")
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s")
        return self._batch.error

    def __await__(self):
        if not self._batch.done:
            fut = asyncio.get_running_loop().create_future()
            self._batch.add_waiter(lambda: fut.done() or fut.set_result(None))
            yield from fut.__await__()
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.metadata(self._index)


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: float, delivery_timeout_ms: int,
                 retry_backoff_ms: int, buffer_memory: int) -> None:
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.buffer_memory = buffer_memory
        self.lock = threading.Lock()
        self.space = threading.Condition(self.lock)
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.incomplete: set[ProducerBatch] = set()
        self.buffered = 0
        self.flushing = 0
        self.closing = False

    def append(self, tp: TopicPartition, timestamp: int, key, value, headers, callback,
               abort_on_new_batch: bool = False) -> tuple[RecordFuture | None, bool]:
        """Append one record; returns its future and whether the sender should wake
        (a new batch started its linger clock, or a batch filled up).

        With ``abort_on_new_batch``, a record that would start a new batch for ``tp``
        (none open, or the open one sent or full) is not appended: the result is
        ``(None, False)``, so that the producer can tell a sticky partitioner and
        place the record again (Apache Kafka's ``abortOnNewBatch``, KIP-480)."""
        size = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        if headers:
            size += sum(len(k) + (len(v) if v is not None else 0) for k, v in headers)
        with self.lock:
            dq = self.batches.get(tp)
            if dq is None:
                dq = self.batches[tp] = deque()
            batch = dq[-1] if dq else None
            wake = False
            # a batch once sent takes no more records: a retry must carry exactly what was sent
            if batch is None or batch.in_flight or batch.attempts or (
                    batch.size + size > self.batch_size and batch.records):
                if abort_on_new_batch:
                    return None, False
                batch = ProducerBatch(tp, time.monotonic(), self.delivery_timeout)
                dq.append(batch)
                self.incomplete.add(batch)
                wake = True
            index = len(batch.records)
            batch.records.append((timestamp, key, value, headers))
            batch.size += size
            self.buffered += size
            if batch.size >= self.batch_size:
                wake = True
            if callback is not None:
                if batch.callbacks is None:
                    batch.callbacks = []
                batch.callbacks.append((index, callback))
        return RecordFuture(batch, index), wake

    def wait_for_space(self, timeout: float) -> bool:
        """Block (caller's thread) until buffered bytes fall below ``buffer_memory``."""
        with self.space:
            return self.space.wait_for(lambda: self.buffered < self.buffer_memory, timeout)

    def ready(self, now: float) -> tuple[list[TopicPartition], float]:
        """Partitions with a sendable first batch, and seconds until the next one may be."""
        ready = []
        next_check = 3600.0
        force = self.flushing > 0 or self.closing
        with self.lock:
            for tp, dq in self.batches.items():
                if not dq:
                    continue
                b = dq[0]
                if b.in_flight:
                    continue
                if b.attempts and b.retry_at > now:
                    next_check = min(next_check, b.retry_at - now)
                    continue
                if force or len(dq) > 1 or b.size >= self.batch_size or b.attempts:
                    ready.append(tp)
                    continue
                due = b.created + self.linger
                if due <= now:
                    ready.append(tp)
                else:
                    next_check = min(next_check, due - now)
        return ready, next_check

    def take(self, tp: TopicPartition) -> ProducerBatch | None:
        """Mark the first batch of ``tp`` in flight and return it (closes it for appends)."""
        with self.lock:
            dq = self.batches.get(tp)
            if not dq or dq[0].in_flight:
                return None
            b = dq[0]
            b.in_flight = True
            b.attempts += 1
            return b

    def expire(self, now: float) -> list[ProducerBatch]:
        """Remove and return batches not in flight whose delivery timeout passed."""
        out = []
        with self.lock:
            for dq in self.batches.values():
                while dq and not dq[0].in_flight and dq[0].deadline <= now:
                    out.append(dq.popleft())
        return out

    def finished(self, batch: ProducerBatch, base_offset: int, log_append_time: int = -1,
                 error: BaseException | None = None) -> None:
        """Remove a sent batch and complete it (on the event loop)."""
        with self.lock:
            dq = self.batches.get(batch.tp)
            if dq and dq[0] is batch:
                dq.popleft()
            elif dq and batch in dq:
                dq.remove(batch)
            self.incomplete.discard(batch)
            self.buffered -= batch.size
            self.space.notify_all()
        batch.complete(base_offset, log_append_time, error)

    def requeue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch whose attempt failed retriably back for another try after backoff."""
        with self.lock:
            batch.in_flight = False
            batch.retry_at = now + self.retry_backoff

    def fail_all(self, error: KafkaError) -> None:
        with self.lock:
            pending = [b for dq in self.batches.values() for b in dq if not b.in_flight]
        for b in pending:
            self.finished(b, -1, -1, error)

    def has_unsent(self) -> bool:
        with self.lock:
            return any(dq for dq in self.batches.values())
