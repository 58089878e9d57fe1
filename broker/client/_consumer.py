"""The consumer: :class:`AsyncConsumer` (asyncio core) and :class:`Consumer`
(blocking facade).

Reading follows Kafka's consumer: ``subscribe`` (topic names, or a regex
``pattern`` with an optional ``exclude`` regex: the old consumer's whitelist and
blacklist) joins the group ``group_id`` through its coordinator, or ``assign``
takes partitions by hand. ``poll`` returns records and advances positions;
with ``enable_auto_commit`` positions are committed every
``auto_commit_interval_ms``, before partitions are revoked, and on close.

With ``group_protocol="zookeeper"`` the group is formed the legacy way, in
ZooKeeper (:mod:`._zk_group`); ``offsets_storage`` and ``dual_commit_enabled``
say where commits go and committed offsets come from (:mod:`._offset_storage`),
with either protocol.

Positions start from the group's committed offset, else ``auto_offset_reset``
(earliest, latest, or none: :class:`~.errors.NoOffsetForPartitionError`).
Rebalance callbacks ``on_assign(partitions)``, ``on_revoke(partitions)``,
``on_lost(partitions)`` (default: ``on_revoke``) may be plain or async
functions; the blocking consumer calls them in the thread that called poll, so
they may call the consumer (e.g. ``commit``). Neither class is thread-safe.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import re
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from ._assignors import resolve_assignors
from ._cluster import Cluster
from ._config import ConsumerConfig, build_config
from ._fetcher import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Fetcher, PartitionState, SubscriptionState
from ._group import GroupMember
from ._offset_storage import OffsetStorage
from ._serde import bytes_deserializer
from ._sync import LoopThread, wait_event
from ._types import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from ._zk_group import ZooKeeperGroupMember
from ._zookeeper import ZooKeeperOffsetStore
from .errors import AuthenticationError, ConfigError, IllegalStateError, KafkaError, KafkaTimeoutError

log = logging.getLogger("broker.client")

CANCEL_GRACE_S = 2.0  # how long an interrupted blocking call waits for its coroutine to unwind
_WAKE_S = 0.1  # blocking calls wake this often to notice a dead loop thread or a deadline


def _as_tp(tp) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(tp[0], tp[1])


class AsyncConsumer:
    """Asyncio consumer: ``async with AsyncConsumer(group_id="g", ...) as c: c.subscribe([...])``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: ConsumerConfig = build_config(ConsumerConfig, config, kwargs)
        c = self.config
        self._cluster = Cluster(c)
        self._subs = SubscriptionState()
        self._assignors = resolve_assignors(c.partition_assignment_strategy)
        self._fetcher: Fetcher | None = None
        self._group: GroupMember | ZooKeeperGroupMember | None = None
        self._offsets: OffsetStorage | None = None
        self._zookeeper: ZooKeeperOffsetStore | None = None
        self._listeners: dict[str, Callable | None] = {"assign": None, "revoke": None, "lost": None}
        self._next_auto_commit = 0.0
        self._next_pattern_refresh = 0.0
        self._commit_task: asyncio.Task | None = None
        self._started = False
        self._closed = False

    async def start(self) -> None:
        if self._started:
            return
        self._fetcher = Fetcher(self._cluster, self.config, self._subs,
                                self.config.key_deserializer or bytes_deserializer,
                                self.config.value_deserializer or bytes_deserializer)
        c = self.config
        if c.uses_zookeeper():
            self._zookeeper = await asyncio.to_thread(
                ZooKeeperOffsetStore, c.zookeeper_connect, session_timeout_ms=c.zookeeper_session_timeout_ms,
                connection_timeout_ms=c.zookeeper_connection_timeout_ms)
        if c.group_id:
            # the classic member joins through the coordinator; otherwise it only commits there
            broker = GroupMember(self._cluster, c, self._assignors, self._subscribed_topics,
                                 self._on_assignment_change)
            if c.group_protocol == "zookeeper":
                self._group = ZooKeeperGroupMember(self._cluster, c, self._zookeeper, self._subs,
                                                   self._subscribed_topics, self._on_assignment_change)
            else:
                self._group = broker
            self._offsets = OffsetStorage(c, broker, self._zookeeper)
        await self._cluster.refresh_metadata()
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._started = True

    async def __aenter__(self) -> "AsyncConsumer":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __aiter__(self):
        return self._iterate()

    async def _iterate(self):
        while not self._closed:
            for r in await self.poll(1000):
                yield r

    # -- subscription -------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern | None = None,
                  exclude: str | re.Pattern | None = None, on_assign: Callable | None = None,
                  on_revoke: Callable | None = None, on_lost: Callable | None = None) -> None:
        """Subscribe to ``topics`` or to every topic matching ``pattern`` and not ``exclude``."""
        if (topics is None) == (pattern is None):
            raise ConfigError("subscribe needs either topics or pattern")
        if not self.config.group_id:
            raise ConfigError("subscribe needs group_id; use assign() without a group")
        if self._subs.manual:
            raise IllegalStateError("cannot subscribe while partitions are assigned manually")
        if exclude is not None and self.config.group_protocol == "zookeeper":
            raise ConfigError("group_protocol=zookeeper takes topics or one pattern, not exclude")
        if isinstance(topics, str):
            topics = [topics]
        self._subs.topics = set(topics or ())
        self._subs.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._subs.exclude = re.compile(exclude) if isinstance(exclude, str) else exclude
        self._listeners = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        if self._subs.pattern is not None:
            self._cluster._all_topics = True
            self._next_pattern_refresh = 0.0
        else:
            self._cluster.watch(self._subs.topics)
        if self._group is not None:
            self._group.need_rejoin = True

    def subscription(self) -> set[str]:
        return set(self._subscribed_topics())

    def _subscribed_topics(self) -> list[str]:
        s = self._subs
        if s.pattern is None:
            return sorted(s.topics)
        return sorted(t for t, tm in self._cluster.topics.items()
                      if s.match(t) and not (tm.is_internal and self.config.exclude_internal_topics)
                      and not (t.startswith("__") and self.config.exclude_internal_topics))

    async def unsubscribe(self) -> None:
        if self._group is not None and self._group.member_id:
            await self._group.leave()
            await self._on_assignment_change(list(self._subs.assignment), [], False)
            self._group.owned = []
        self._subs.topics, self._subs.pattern, self._subs.exclude = set(), None, None
        self._subs.manual = False
        self._subs.assign([])

    def assign(self, partitions: Iterable) -> None:
        """Read exactly these partitions (no group membership, no rebalancing)."""
        if self._subs.subscribed:
            raise IllegalStateError("cannot assign while subscribed; unsubscribe first")
        tps = [_as_tp(tp) for tp in partitions]
        self._subs.manual = True
        self._subs.assign(tps)
        self._cluster.watch({tp.topic for tp in tps})
        if any(tp.topic not in self._cluster.topics for tp in tps):
            self._cluster.request_update()
        if self._fetcher is not None:
            for tp in list(self._fetcher.buffer):
                if tp not in self._subs.assignment:
                    self._fetcher.drop_buffered(tp)
            self._fetcher.abandon_fetches()  # fetch the new assignment now, not after a long poll

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    async def _on_assignment_change(self, revoked, added, lost) -> None:
        if revoked:
            if not lost and self.config.enable_auto_commit:
                try:
                    await self._commit_positions([tp for tp in revoked if tp in self._subs.assignment])
                except KafkaError as exc:
                    log.warning("commit before revoke failed: %s", exc)
            fn = self._listeners["lost"] if lost and self._listeners["lost"] else self._listeners["revoke"]
            if fn is not None:
                await self._call_listener(fn, list(revoked))
            for tp in revoked:
                self._subs.assignment.pop(tp, None)
                self._fetcher.drop_buffered(tp)
        for tp in added:
            self._subs.assignment.setdefault(tp, PartitionState())
        if revoked or added:
            self._fetcher.abandon_fetches()
        self._cluster.watch({tp.topic for tp in added})
        if self._listeners["assign"] is not None and (added or not revoked):
            await self._call_listener(self._listeners["assign"], list(added))

    async def _call_listener(self, fn: Callable, partitions: list[TopicPartition]) -> None:
        result = fn(partitions)
        if inspect.isawaitable(result):
            await result

    # -- polling -------------------------------------------------------------------
    async def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched since the last poll (waiting up to ``timeout_ms`` for some)."""
        if self._closed:
            raise IllegalStateError("consumer is closed")
        if not self._started:
            await self.start()
        if not self._subs.subscribed and not self._subs.manual:
            raise IllegalStateError("consumer is neither subscribed nor assigned")
        max_records = max_records or self.config.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        fetcher = self._fetcher
        while True:
            if fetcher.errors:
                raise fetcher.errors.pop(0)
            await self._ensure_assignment()
            await self._update_positions()
            self._maybe_auto_commit()
            records = fetcher.drain(max_records)
            if self._cluster.stale():
                try:
                    await self._cluster.refresh_metadata()
                except AuthenticationError:
                    raise
                except KafkaError as exc:
                    log.debug("metadata refresh failed: %s", exc)
            fetcher.data_ready.clear()
            fetcher.send_fetches()
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            await wait_event(fetcher.data_ready, min(remaining, 0.05 if self._cluster.stale() else 0.5))

    async def _ensure_assignment(self) -> None:
        if self._group is None or not self._subs.subscribed:
            return
        if self._subs.pattern is not None and time.monotonic() >= self._next_pattern_refresh:
            await self._cluster.refresh_metadata(all_topics=True)
            self._next_pattern_refresh = time.monotonic() + self.config.metadata_max_age_ms / 1000
        await self._group.check_lost()
        await self._group.ensure_active()

    async def _update_positions(self) -> None:
        need = self._subs.need_position()
        if not need:
            return
        await self._cluster.ensure_topics({tp.topic for tp in need})
        missing = list(need)
        if self._group is not None:
            committed = await self._offsets.fetch_committed(need)
            missing = []
            for tp in need:
                om = committed.get(tp)
                st = self._subs.assignment.get(tp)
                if st is None:
                    continue
                if om is None:
                    missing.append(tp)
                else:
                    st.position = om.offset
        if missing:
            await self._fetcher.reset_positions(missing)

    # -- commits ---------------------------------------------------------------------
    def _maybe_auto_commit(self) -> None:
        if not (self.config.enable_auto_commit and self._group is not None):
            return
        now = time.monotonic()
        if now < self._next_auto_commit or (self._commit_task and not self._commit_task.done()):
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000
        self._commit_task = asyncio.ensure_future(self._auto_commit())

    async def _auto_commit(self) -> None:
        try:
            await self._commit_positions(list(self._subs.assignment))
        except KafkaError as exc:
            log.warning("auto commit failed: %s", exc)

    async def _commit_positions(self, tps: list[TopicPartition]) -> None:
        offsets = {tp: OffsetAndMetadata(self._subs.assignment[tp].position)
                   for tp in tps if tp in self._subs.assignment and self._subs.assignment[tp].position is not None}
        if offsets and self._group is not None and self._group.generation >= 0:
            await self._offsets.commit(offsets)

    async def commit(self, offsets: Mapping | None = None) -> None:
        """Commit ``{tp: offset | OffsetAndMetadata}``, or the current positions of every
        assigned partition. The committed offset is the next offset to read."""
        if self._group is None:
            raise ConfigError("commit needs group_id")
        if offsets is None:
            await self._commit_positions(list(self._subs.assignment))
            return
        om = {_as_tp(tp): (v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v)))
              for tp, v in offsets.items()}
        await self._offsets.commit(om)

    async def committed(self, partitions: Iterable) -> dict[TopicPartition, OffsetAndMetadata | None]:
        if self._group is None:
            raise ConfigError("committed needs group_id")
        return await self._offsets.fetch_committed([_as_tp(tp) for tp in partitions])

    # -- positions -------------------------------------------------------------------
    def _state(self, tp):
        tp = _as_tp(tp)
        st = self._subs.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return tp, st

    def seek(self, partition, offset: int) -> None:
        """Read ``partition`` from ``offset`` at the next poll."""
        tp, st = self._state(partition)
        if offset < 0:
            raise ConfigError("offset must be >= 0")
        st.position = offset
        st.reset_to = None
        if self._fetcher is not None:
            self._fetcher.drop_buffered(tp)
            self._fetcher.abandon_fetches([tp])

    async def seek_to_beginning(self, *partitions) -> None:
        await self._seek_to(partitions, EARLIEST_TIMESTAMP)

    async def seek_to_end(self, *partitions) -> None:
        await self._seek_to(partitions, LATEST_TIMESTAMP)

    async def _seek_to(self, partitions, ts: int) -> None:
        tps = [_as_tp(p) for p in partitions] or list(self._subs.assignment)
        for tp in tps:
            self._state(tp)
        offsets = await self._fetcher.list_offsets({tp: ts for tp in tps})
        for tp, (off, _) in offsets.items():
            self.seek(tp, off)

    async def position(self, partition) -> int:
        tp, st = self._state(partition)
        if st.position is None:
            await self._update_positions()
        return st.position

    async def offsets_for_times(self, timestamps: Mapping) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Earliest offset whose timestamp is >= the given ms timestamp, per partition (None if none)."""
        query = {_as_tp(tp): int(ts) for tp, ts in timestamps.items()}
        for ts in query.values():
            if ts < 0:
                raise ConfigError("timestamps must be >= 0")
        res = await self._fetcher.list_offsets(query)
        return {tp: (None if off < 0 else OffsetAndTimestamp(off, ts)) for tp, (off, ts) in res.items()}

    async def beginning_offsets(self, partitions: Iterable) -> dict[TopicPartition, int]:
        res = await self._fetcher.list_offsets({_as_tp(tp): EARLIEST_TIMESTAMP for tp in partitions})
        return {tp: off for tp, (off, _) in res.items()}

    async def end_offsets(self, partitions: Iterable) -> dict[TopicPartition, int]:
        res = await self._fetcher.list_offsets({_as_tp(tp): LATEST_TIMESTAMP for tp in partitions})
        return {tp: off for tp, (off, _) in res.items()}

    def last_heartbeat_seconds_ago(self) -> float | None:
        """Seconds since the group coordinator last confirmed this member (a heartbeat
        answered without error, or a completed join); None when not a group member.
        (Kafka's consumer metric of the same name.) A member not confirmed for
        ``session_timeout_ms`` has probably been removed from the group."""
        g = self._group
        if g is None or g.last_heartbeat is None or g.generation < 0:
            return None
        return time.monotonic() - g.last_heartbeat

    def highwater(self, partition) -> int | None:
        """The high watermark of ``partition`` in the last Fetch response for it (None before one).

        Unlike ``end_offsets`` it costs no request, and it is what the broker
        serves reads by (one foreign broker answers ListOffsets with another figure).
        """
        tp, st = self._state(partition)
        return None if st.high_watermark < 0 else st.high_watermark

    def pause(self, *partitions) -> None:
        for p in partitions:
            tp, st = self._state(p)
            st.paused = True

    def resume(self, *partitions) -> None:
        for p in partitions:
            tp, st = self._state(p)
            st.paused = False
            if self._fetcher is not None:
                self._fetcher.abandon_fetches()  # a Fetch without it may be waiting out a long poll

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._subs.assignment.items() if st.paused}

    async def topics(self) -> dict[str, list[int]]:
        await self._cluster.refresh_metadata(all_topics=True)
        return {t: sorted(tm.partitions) for t, tm in self._cluster.topics.items()}

    async def partitions_for(self, topic: str) -> list[int]:
        await self._cluster.ensure_topics([topic])
        return self._cluster.partitions_for(topic)

    @property
    def member_id(self) -> str | None:
        return self._group.member_id if self._group else None

    async def close(self, timeout: float | None = None) -> None:
        """Commit (with auto commit), leave the group, and close connections.

        The commit and LeaveGroup are abandoned after ``timeout`` seconds
        (default ``request_timeout_ms``); connections are closed in every case.
        """
        if self._closed:
            return
        self._closed = True
        if not self._started:
            if self._zookeeper is not None:  # start failed after reaching ZooKeeper
                await asyncio.to_thread(self._zookeeper.close)
            return
        limit = self.config.request_timeout_ms / 1000 if timeout is None else timeout
        try:
            graceful = asyncio.ensure_future(self._close_gracefully())
            try:
                done, _ = await asyncio.wait((graceful,), timeout=limit)
            finally:
                if not graceful.done():
                    graceful.cancel()
                    await asyncio.gather(graceful, return_exceptions=True)
                    log.warning("consumer close: commit/leave abandoned after %s s", limit)
        finally:
            await self._fetcher.close()
            await self._cluster.close()
            if self._zookeeper is not None:
                await asyncio.to_thread(self._zookeeper.close)

    async def _close_gracefully(self) -> None:
        if self._commit_task is not None:
            await asyncio.gather(self._commit_task, return_exceptions=True)
        if self._group is not None and self.config.enable_auto_commit and self._group.generation >= 0:
            try:
                await self._commit_positions(list(self._subs.assignment))
            except KafkaError as exc:
                log.warning("final commit failed: %s", exc)
        if self._group is not None:
            await self._group.leave()


class Consumer:
    """Blocking consumer; same methods as :class:`AsyncConsumer`, without ``await``.

    Iterating over it yields records forever (until close). Not thread-safe.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = AsyncConsumer(config, **kwargs)
        self._core._call_listener = self._call_listener_in_caller
        self._thread = LoopThread("kafkapy-consumer")
        self._waiting: list[queue.SimpleQueue] = []
        try:
            self._run(self._core.start())
        except BaseException:
            self._run(self._core.close())
            self._thread.stop()
            raise

    @property
    def config(self) -> ConsumerConfig:
        return self._core.config

    def _run(self, coro, timeout: float | None = None):
        """Run ``coro`` on the loop; meanwhile execute rebalance callbacks it sends us here.

        Interruptible: a KeyboardInterrupt (or any BaseException) raised in this
        thread while waiting, or by a rebalance callback, cancels the coroutine,
        waits up to :data:`CANCEL_GRACE_S` for it to unwind, and propagates. With
        ``timeout`` (seconds) the coroutine is cancelled likewise when it runs
        longer, and :class:`KafkaTimeoutError` raised.
        """
        loop = self._thread.loop
        if loop.is_closed() or not self._thread.thread.is_alive():
            coro.close()
            raise IllegalStateError("consumer is closed")
        q: queue.SimpleQueue = queue.SimpleQueue()
        unwound = threading.Event()
        fut = asyncio.run_coroutine_threadsafe(_guarded(coro, unwound), loop)
        fut.add_done_callback(lambda _: q.put(None))
        self._waiting.append(q)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                try:
                    item = q.get(timeout=_WAKE_S)
                except queue.Empty:
                    if not self._thread.thread.is_alive():
                        raise IllegalStateError("the consumer's event loop thread has died") from None
                    if deadline is not None and time.monotonic() >= deadline:
                        raise KafkaTimeoutError(f"operation did not finish within {timeout} s") from None
                    continue
                if item is None:
                    return fut.result()
                fn, partitions, reply = item
                try:
                    fn(partitions)
                except Exception as exc:  # hand it to the loop side, which re-raises in poll
                    loop.call_soon_threadsafe(_set_exc, reply, exc)
                else:
                    loop.call_soon_threadsafe(_set_result, reply)
        except BaseException:
            if not fut.done():
                fut.cancel()
                self._await_unwind(q, unwound)
            raise
        finally:
            self._waiting.pop()

    def _await_unwind(self, q: queue.SimpleQueue, unwound: threading.Event) -> None:
        """After cancelling: wait (bounded) until the coroutine has unwound, refusing the
        rebalance callbacks it still asks for meanwhile."""
        deadline = time.monotonic() + CANCEL_GRACE_S
        while not unwound.is_set() and self._thread.thread.is_alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                item = q.get(timeout=min(left, _WAKE_S))
            except queue.Empty:
                continue
            if item is not None:
                self._thread.loop.call_soon_threadsafe(_cancel_future, item[2])

    async def _call_listener_in_caller(self, fn: Callable, partitions: list[TopicPartition]) -> None:
        if not self._waiting:
            result = fn(partitions)
            if inspect.isawaitable(result):
                await result
            return
        reply = asyncio.get_running_loop().create_future()
        self._waiting[-1].put((fn, partitions, reply))
        await reply

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        while not self._core._closed:
            yield from self.poll(1000)

    def subscribe(self, topics=None, *, pattern=None, exclude=None, on_assign=None, on_revoke=None,
                  on_lost=None) -> None:
        self._run(_call(self._core.subscribe, topics, pattern=pattern, exclude=exclude, on_assign=on_assign,
                        on_revoke=on_revoke, on_lost=on_lost))

    def unsubscribe(self) -> None:
        self._run(self._core.unsubscribe())

    def subscription(self) -> set[str]:
        return self._run(_call(self._core.subscription))

    def assign(self, partitions: Iterable) -> None:
        self._run(_call(self._core.assign, list(partitions)))

    def assignment(self) -> set[TopicPartition]:
        return self._run(_call(self._core.assignment))

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._run(self._core.poll(timeout_ms, max_records))

    def commit(self, offsets: Mapping | None = None) -> None:
        self._run(self._core.commit(offsets))

    def committed(self, partitions: Iterable) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self._core.committed(list(partitions)))

    def seek(self, partition, offset: int) -> None:
        self._run(_call(self._core.seek, partition, offset))

    def seek_to_beginning(self, *partitions) -> None:
        self._run(self._core.seek_to_beginning(*partitions))

    def seek_to_end(self, *partitions) -> None:
        self._run(self._core.seek_to_end(*partitions))

    def position(self, partition) -> int:
        return self._run(self._core.position(partition))

    def offsets_for_times(self, timestamps: Mapping) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._core.offsets_for_times(dict(timestamps)))

    def beginning_offsets(self, partitions: Iterable) -> dict[TopicPartition, int]:
        return self._run(self._core.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable) -> dict[TopicPartition, int]:
        return self._run(self._core.end_offsets(list(partitions)))

    def highwater(self, partition) -> int | None:
        return self._run(_call(self._core.highwater, partition))

    def last_heartbeat_seconds_ago(self) -> float | None:
        return self._core.last_heartbeat_seconds_ago()

    def pause(self, *partitions) -> None:
        self._run(_call(self._core.pause, *partitions))

    def resume(self, *partitions) -> None:
        self._run(_call(self._core.resume, *partitions))

    def paused(self) -> set[TopicPartition]:
        return self._run(_call(self._core.paused))

    def topics(self) -> dict[str, list[int]]:
        return self._run(self._core.topics())

    def partitions_for(self, topic: str) -> list[int]:
        return self._run(self._core.partitions_for(topic))

    @property
    def member_id(self) -> str | None:
        return self._core.member_id

    def close(self, timeout: float | None = None) -> None:
        """Commit (with auto commit), leave the group and close connections.

        Always returns: the graceful part is abandoned after ``timeout`` seconds
        (default ``request_timeout_ms``), a KeyboardInterrupt cancels it, and the
        loop thread stops in every case. Idempotent.
        """
        if self._thread.loop.is_closed():
            return
        limit = self.config.request_timeout_ms / 1000 if timeout is None else timeout
        try:
            if self._thread.thread.is_alive():
                self._run(self._core.close(limit), timeout=limit + CANCEL_GRACE_S)
        except KafkaTimeoutError:
            log.warning("consumer close did not finish within %s s; connections dropped", limit)
        finally:
            self._core._closed = True
            self._thread.stop()


async def _guarded(coro, unwound: threading.Event):
    try:
        return await coro
    finally:
        unwound.set()


def _cancel_future(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.cancel()


async def _call(fn, *args, **kwargs):
    """Run a plain method of the core on its loop (the core is not thread-safe)."""
    return fn(*args, **kwargs)


def _set_result(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _set_exc(fut: asyncio.Future, exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)
