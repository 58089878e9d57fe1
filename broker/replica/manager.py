"""The replica manager: every partition this broker holds, and the only way to their logs.

Kafka's ``ReplicaManager``. The topic layer tells it which partitions this
broker holds and who leads them (:meth:`ReplicaManager.make_leader`,
:meth:`ReplicaManager.remove_partition`); produce, fetch, the offset and log
APIs and the group coordinator find a :class:`~broker.replica.Partition` with
:meth:`ReplicaManager.partition` and append and read through it and this
class. Nothing here imports the server or the coordinator.

Appends:

* :meth:`append_records` (a leader's produce): queued on the writer thread of
  the partition's log dir; the event loop never waits on the disk. The
  owner's delivery hands each written append to :meth:`appended` on the loop,
  which moves the high watermark and wakes the purgatory;
* :meth:`append_records_as_follower`: the same with the leader's offsets and
  epochs kept (replication's fetchers);
* :meth:`append_now`: on the calling thread, for the coordinator's small writes;
* :meth:`wait_for_high_watermark`: acks=all waits in the purgatory until the
  high watermark passes its append (single node: already so when it is written).

Leadership listeners (:meth:`add_leadership_listener`, for the group
coordinator) hear of every partition this broker starts leading, or leads in a
new epoch (``on_become_leader(tp, leader_epoch)``), and of every one it stops
leading or holding (``on_resign(tp, leader_epoch)``), on the thread that made
the change.

High watermarks are checkpointed by the log manager, which asks
:meth:`high_watermark_of`; at start a partition takes the one read from
``replication-offset-checkpoint``.

Loop-only (not thread-safe), except :meth:`high_watermark_of` (a dict read).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

from broker.replica.partition import Partition
from broker.replica.purgatory import Purgatory

if TYPE_CHECKING:
    from broker.log import AppendInfo, Log, LogManager

TopicPartition = tuple[str, int]

log = logging.getLogger("broker.replica")


class _Listener(NamedTuple):
    on_become_leader: Callable[[TopicPartition, int], None]
    on_resign: Callable[[TopicPartition, int], None]


class ReplicaManager:
    """See the module docstring. :meth:`attach` the log manager before adding partitions."""

    def __init__(self) -> None:
        self.purgatory = Purgatory()
        self.local_broker_id = -1
        self._log_manager: "LogManager | None" = None
        self._partitions: dict[TopicPartition, Partition] = {}
        self._listeners: list[_Listener] = []

    def attach(self, log_manager: "LogManager", local_broker_id: int) -> None:
        """Serve ``log_manager``'s logs as broker ``local_broker_id``; it checkpoints our high watermarks."""
        self._log_manager = log_manager
        self.local_broker_id = local_broker_id
        log_manager.high_watermark_of = self.high_watermark_of

    def add_leadership_listener(self, on_become_leader: Callable[[TopicPartition, int], None],
                                on_resign: Callable[[TopicPartition, int], None]) -> None:
        """Hear of leadership changes from now on (see the module docstring)."""
        self._listeners.append(_Listener(on_become_leader, on_resign))

    def _tell(self, call: Callable[[_Listener], None]) -> None:
        for listener in self._listeners:
            try:
                call(listener)
            except Exception:  # a failing listener must not undo the leadership change
                log.exception("leadership listener failed")

    # -- the partitions ------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> Partition | None:
        """The partition if this broker holds a replica of it."""
        return self._partitions.get((topic, partition))

    def partitions(self) -> Iterator[Partition]:
        return iter(list(self._partitions.values()))

    def high_watermark_of(self, tp: TopicPartition) -> int | None:
        partition = self._partitions.get(tp)
        return None if partition is None else partition.high_watermark

    def make_leader(self, topic: str, partition: int, log: "Log", *, leader_epoch: int, isr: list[int],
                    replicas: list[int]) -> Partition:
        """This broker leads ``topic-partition`` (its ``log``) from ``leader_epoch``; returns the Partition."""
        key = (topic, partition)
        p = self._partitions.get(key)
        if p is None:
            checkpointed = self._log_manager.checkpointed_high_watermarks.get(key, log.log_start_offset)
            p = self._partitions[key] = Partition(topic, partition, log, self.local_broker_id, checkpointed)
        already = p.is_leader and p.leader_epoch == leader_epoch
        p.make_leader(leader_epoch, isr, replicas)
        self.purgatory.notify(key)
        if not already:
            self._tell(lambda listener: listener.on_become_leader(key, leader_epoch))
        return p

    def remove_partition(self, topic: str, partition: int) -> None:
        """Stop serving ``topic-partition`` (its topic is deleted); its waiters wake and find it gone."""
        p = self._partitions.pop((topic, partition), None)
        self.purgatory.notify((topic, partition))
        if p is not None and p.is_leader:
            self._tell(lambda listener: listener.on_resign(p.key, p.leader_epoch))

    # -- appends ------------------------------------------------------------------------------
    def append_records(self, partition: Partition, records, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        """Queue a leader's append (offsets assigned) on its log dir's writer; see the module docstring.

        The future gets the ``AppendInfo`` or the log's error once the bytes
        are written (or failed). ``records`` must stay untouched until then.
        """
        return self._submit(partition, records, loop, as_follower=False)

    def append_records_as_follower(self, partition: Partition, records,
                                   loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        """Queue a follower's append: the batches keep the offsets and leader epochs the leader gave them."""
        return self._submit(partition, records, loop, as_follower=True)

    def _submit(self, partition: Partition, records, loop, *, as_follower: bool) -> asyncio.Future:
        fut = loop.create_future()
        plog = partition._log
        self._log_manager.appender_for(plog).submit(plog, records, partition.leader_epoch, (fut, partition),
                                                    as_follower=as_follower)
        return fut

    def append_now(self, partition: Partition, records) -> "AppendInfo":
        """Append a leader's batches on this thread, then publish them (the coordinator's small writes).

        Raises the log's errors (each with its Kafka ``error_code``).
        """
        info = partition._log.append(records, leader_epoch=partition.leader_epoch)
        self.appended(partition)
        return info

    def appended(self, partition: Partition) -> None:
        """On the loop, after an append is written: move the high watermark, wake the partition's waiters."""
        partition.maybe_increment_high_watermark()
        self.purgatory.notify(partition.key)

    def update_follower_fetch(self, partition: Partition, broker_id: int, fetch_offset: int) -> None:
        """A follower fetched from ``fetch_offset`` (its log end): the high watermark may move, waiters check."""
        if partition.update_follower_fetch(broker_id, fetch_offset):
            self.purgatory.notify(partition.key)

    async def wait_for_high_watermark(self, partition: Partition, offset: int, timeout: float) -> bool:
        """acks=all: wait until the high watermark is above ``offset`` (True) or ``timeout`` passes (False)."""
        return await self.purgatory.wait_until((partition.key,), lambda: partition.high_watermark > offset, timeout)

    def settle(self, results: list[tuple[tuple[asyncio.Future, Partition], Any]]) -> None:
        """On the loop: publish each written append (high watermark, waiters), then answer its future.

        Publishing does not depend on the waiter: an append whose producer went
        away (its handler cancelled) still moves the high watermark.
        """
        appended = self.appended
        for (fut, partition), result in results:
            failed = isinstance(result, BaseException)
            if not failed:
                appended(partition)
            if fut.done():
                continue
            if failed:
                fut.set_exception(result)
            else:
                fut.set_result(result)

    def close(self) -> None:
        """Shutdown: wake every waiter now and take no new waits."""
        self.purgatory.close()
