"""The leader's ISR upkeep: shrink after ``replica.lag.time.max.ms``, expand when a follower catches up.

Kafka 2.7's rules (``Partition.maybeShrinkIsr`` / ``maybeExpandIsr``), with
the ISR kept in the partition state znode as Kafka does without AlterIsr:

* every half of ``replica.lag.time.max.ms`` each partition this broker leads
  drops the ISR followers that have not been caught up for that long
  (:meth:`~broker.replica.Partition.out_of_sync_replicas`);
* a follower's fetch that brings it to the high watermark (and to this
  leader's first offset of its epoch) adds it back
  (:meth:`~broker.replica.Partition.should_expand_isr`).

A change is written first, through the injected ``writer(topic, partition,
LeaderAndIsr, zk_version) -> new zk_version | None`` (blocking: a conditional
write, run in a worker thread), and applied only once written. None means
the stored state moved on (a new controller decision): nothing changes here
and the controller's next LeaderAndIsr brings the news. A partition that
changed leader or epoch while its write was under way keeps its new state.
At most one write per partition is under way. Without a writer (a broker
that is no cluster member) the ISR never changes.

A shrink may move the high watermark (the ISR is smaller), so acks=all
waiters wake and see the new ISR (NOT_ENOUGH_REPLICAS_AFTER_APPEND below
``min.insync.replicas``).

Loop-only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable, NamedTuple

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager
    from broker.replica.partition import Partition

log = logging.getLogger("broker.replica.isr")


class LeaderAndIsr(NamedTuple):
    """A partition state as the leader writes it (the fields of ``/brokers/topics/T/partitions/P/state``)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


class IsrManager:
    """See the module docstring. Owned by the replica manager."""

    def __init__(self, replicas: "ReplicaManager") -> None:
        self._replicas = replicas
        self.writer: Callable[[str, int, LeaderAndIsr, int], int | None] | None = None
        self.lag_time_max_ms = 30000
        self._in_flight: set[tuple[str, int]] = set()
        #: ISR changes written and applied by this leader (the metrics' isr_shrinks / isr_expands)
        self.shrinks = 0
        self.expands = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None and self.writer is not None:
            self._task = asyncio.get_running_loop().create_task(self._shrink_periodically())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _shrink_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.lag_time_max_ms / 2000)
            self.shrink_all()

    def shrink_all(self) -> None:
        """Drop the lagging followers from the ISR of every partition this broker leads."""
        now = int(time.time() * 1000)
        for partition in self._replicas.partitions():
            lagging = partition.out_of_sync_replicas(now, self.lag_time_max_ms)
            if lagging:
                log.info("%s-%d: shrinking ISR from %s: %s not caught up for %d ms", partition.topic,
                         partition.partition, partition.isr, lagging, self.lag_time_max_ms)
                self._submit(partition, [b for b in partition.isr if b not in lagging])

    def expand(self, partition: "Partition", broker_id: int) -> None:
        """Add ``broker_id`` (caught up) to the ISR."""
        log.info("%s-%d: expanding ISR from %s to add %d", partition.topic, partition.partition, partition.isr,
                 broker_id)
        self._submit(partition, partition.isr + [broker_id])

    def _submit(self, partition: "Partition", new_isr: list[int]) -> None:
        if self.writer is None or partition.key in self._in_flight:
            return
        self._in_flight.add(partition.key)
        asyncio.get_running_loop().create_task(self._write(partition, new_isr))

    async def _write(self, partition: "Partition", new_isr: list[int]) -> None:
        epoch, zk_version = partition.leader_epoch, partition.zk_version
        state = LeaderAndIsr(partition.local_broker_id, epoch, tuple(new_isr), partition.controller_epoch)
        try:
            version = await asyncio.get_running_loop().run_in_executor(
                None, self.writer, partition.topic, partition.partition, state, zk_version)
        except Exception as exc:  # noqa: BLE001 - the store out of reach: the next check tries again
            log.warning("%s-%d: writing ISR %s failed: %s", partition.topic, partition.partition, new_isr, exc)
            return
        finally:
            self._in_flight.discard(partition.key)
        if not partition.is_leader or partition.leader_epoch != epoch or partition.zk_version != zk_version:
            return  # a LeaderAndIsr came meanwhile: its state stands
        if version is None:
            log.info("%s-%d: ISR not updated: the partition state's version is not %d (the controller changed it)",
                     partition.topic, partition.partition, zk_version)
            return
        if len(new_isr) < len(partition.isr):
            self.shrinks += 1
        else:
            self.expands += 1
        partition.isr = list(new_isr)
        partition.zk_version = version
        partition.maybe_increment_high_watermark()
        self._replicas.purgatory.notify(partition.key)
