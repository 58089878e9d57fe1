"""The replica manager: every partition this broker holds, and the only way to their logs.

Kafka's ``ReplicaManager``. The controller says which partitions this broker
holds and who leads them with LeaderAndIsr
(:meth:`ReplicaManager.become_leader_or_follower`) and StopReplica
(:meth:`ReplicaManager.stop_replicas`); produce, fetch, the offset and log
APIs and the group coordinator find a :class:`~broker.replica.Partition` with
:meth:`ReplicaManager.partition` and append and read through it and this
class. Nothing here imports the server, the cluster package or the
coordinator: what it needs from them is injected (:meth:`attach`):

* ``log_config_for(topic) -> LogConfig``: the config of a log created on demand;
* ``isr_writer(topic, partition, LeaderAndIsr, zk_version) -> new zk_version | None``:
  a conditional write of the partition state (None: the version did not match and
  what is stored is not what we meant to write; the controller will tell us the news);
* ``partition_known(topic, partition) -> bool``: whether the cluster has the
  partition (the metadata cache), for :meth:`missing_error`;
* leadership listeners (:meth:`add_leadership_listener`, below).

LeaderAndIsr follows Kafka: a request from an older controller epoch than the
newest seen is refused whole (:class:`StaleControllerEpochError`); a
partition state whose leader epoch is not newer than ours is ignored
(STALE_CONTROLLER_EPOCH for it); one that does not list this broker gets
UNKNOWN_TOPIC_OR_PARTITION. Leaders record where their epoch starts in the
log's epoch cache; followers are handed to the fetchers
(:mod:`broker.replica.fetcher`), which truncate (KIP-101/279) and fetch.

The ISR (leader side, :mod:`broker.replica.isr`): a follower not caught up for
``replica.lag.time.max.ms`` is dropped (checked every half of it), one that
reaches the high watermark is added back; every change goes through
``isr_writer`` first and is applied only once written.

Appends:

* :meth:`append_records` (a leader's produce): queued on the writer thread of
  the partition's log dir; the event loop never waits on the disk for long.
  The writers' delivery (:attr:`handback`, :mod:`broker.replica.handback`)
  hands each written append to :meth:`settle` and :meth:`appended` on the
  loop, which move the high watermark and wake the purgatory. A produce may
  wait a bounded moment for an append its idle writer takes alone, so that
  it is answered in the pass of the loop that read it;
* :meth:`append_records_as_follower`: the same with the leader's offsets and
  epochs kept (the fetchers);
* :meth:`append_now`: on the calling thread, for the coordinator's small writes;
* :meth:`wait_for_high_watermark`: acks=all waits in the purgatory until the
  high watermark passes its append or this broker stops leading the partition
  (including when it stops serving it at all: topic deleted, log dir failed).

Leadership listeners (:meth:`add_leadership_listener`, for the group
coordinator) hear of every partition this broker starts leading, or leads in a
new epoch (``on_become_leader(tp, leader_epoch)``), and of every one it stops
leading or holding (``on_resign(tp, leader_epoch)``), on the thread that made
the change.

A partition this broker does not serve gets, from :meth:`missing_error`,
Kafka's answer (its ``ReplicaManager.getPartitionOrError``): KAFKA_STORAGE_ERROR
if its replica here is offline, NOT_LEADER_OR_FOLLOWER if the cluster has it
(this broker is not a replica, or is one that has not heard its LeaderAndIsr
yet: clients refresh their metadata and retry), UNKNOWN_TOPIC_OR_PARTITION
only if the cluster does not have it at all (librdkafka gives up on a
ListOffsets answered so).

A partition whose log dir failed is offline (Kafka's ``HostedPartition.Offline``,
:meth:`mark_offline`): it is no longer served (:meth:`partition` finds
nothing, waiters wake, a leader resigns to the listeners) and
:meth:`is_offline` tells the handlers to answer KAFKA_STORAGE_ERROR for it
until the broker restarts.

High watermarks are checkpointed by the log manager, which asks
:meth:`high_watermark_of`; a partition starts from the one read from
``replication-offset-checkpoint``.

Loop-only (not thread-safe), except :meth:`high_watermark_of` (a dict read).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

from broker.topic_ids import format_topic_id
from broker.protocol import ErrorCode
from broker.protocol.schema import ZERO_UUID
from broker.replica.fetcher import FetcherSettings, LeaderEndpoint, ReplicaFetcherManager
from broker.replica.handback import SLOW_BACKOFF_S, AppendHandback
from broker.replica.isr import IsrManager, LeaderAndIsr
from broker.replica.partition import Partition
from broker.replica.purgatory import Purgatory
from broker.replica.quota import ReplicationQuota

if TYPE_CHECKING:
    from broker.log import AppendInfo, Log, LogConfig, LogManager

log = logging.getLogger("broker.replica")

TopicPartition = tuple[str, int]
IsrWriter = Callable[[str, int, LeaderAndIsr, int], "int | None"]


class StaleControllerEpochError(Exception):
    """A controller request from an older controller epoch than the newest seen."""

    error_code = ErrorCode.STALE_CONTROLLER_EPOCH


class _Listener(NamedTuple):
    on_become_leader: Callable[[TopicPartition, int], None]
    on_resign: Callable[[TopicPartition, int], None]


def now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    """See the module docstring. :meth:`attach` the log manager before adding partitions."""

    def __init__(self) -> None:
        self.purgatory = Purgatory()
        self.local_broker_id = -1
        #: the newest controller epoch seen in a controller request
        self.controller_epoch = -1
        self._log_manager: "LogManager | None" = None
        self._log_config_for: Callable[[str], "LogConfig"] | None = None
        self._partition_known: Callable[[str, int], bool] | None = None
        self._partitions: dict[TopicPartition, Partition] = {}
        self._offline: set[TopicPartition] = set()
        self._listeners: list[_Listener] = []
        self.fetchers = ReplicaFetcherManager(self, FetcherSettings())
        #: replication throttles (:mod:`broker.replica.quota`); rates set by the dynamic broker configs
        self.leader_quota = ReplicationQuota()
        self.follower_quota = ReplicationQuota()
        self.isr = IsrManager(self)
        #: how the writers' results reach the loop (the log manager's delivery; :mod:`broker.replica.handback`)
        self.handback = AppendHandback(self.settle)

    def attach(self, log_manager: "LogManager", local_broker_id: int, *,
               log_config_for: Callable[[str], "LogConfig"] | None = None, isr_writer: IsrWriter | None = None,
               fetcher_settings: FetcherSettings | None = None, replica_lag_time_max_ms: int = 30000,
               partition_known: Callable[[str, int], bool] | None = None) -> None:
        """Serve ``log_manager``'s logs as broker ``local_broker_id``; it checkpoints our high watermarks."""
        self._log_manager = log_manager
        self.local_broker_id = local_broker_id
        self._log_config_for = log_config_for
        self._partition_known = partition_known
        log_manager.high_watermark_of = self.high_watermark_of
        if fetcher_settings is not None:
            self.fetchers.settings = fetcher_settings
        self.isr.writer = isr_writer
        self.isr.lag_time_max_ms = replica_lag_time_max_ms

    def start(self) -> None:
        """On the loop: start the periodic ISR check (the fetchers start with their first partition)."""
        self.isr.start()

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

    def _partition_for(self, topic: str, partition: int, log: "Log") -> Partition:
        key = (topic, partition)
        self._offline.discard(key)  # a new log (the topic made again) in a live dir
        p = self._partitions.get(key)
        if p is None:
            checkpointed = self._log_manager.checkpointed_high_watermarks.get(key, log.log_start_offset)
            p = self._partitions[key] = Partition(topic, partition, log, self.local_broker_id, checkpointed)
        return p

    def make_leader(self, topic: str, partition: int, log: "Log", *, leader_epoch: int, isr: list[int],
                    replicas: list[int]) -> Partition:
        """This broker leads ``topic-partition`` (its ``log``) from ``leader_epoch``; returns the Partition.

        Blocking (the epoch start goes to the log's checkpoint): the single-node
        topic layer's way in, and tests'; a cluster goes through
        :meth:`become_leader_or_follower`.
        """
        p = self._partition_for(topic, partition, log)
        already = p.is_leader and p.leader_epoch == leader_epoch
        p.make_leader(leader_epoch, isr, replicas, now_ms=now_ms())
        p.assign_leader_epoch_start()
        self.purgatory.notify(p.key)
        if not already:
            self._tell(lambda listener: listener.on_become_leader(p.key, leader_epoch))
        return p

    # -- controller requests ----------------------------------------------------------------------
    def check_controller_epoch(self, controller_epoch: int) -> None:
        """Raise :class:`StaleControllerEpochError` if ``controller_epoch`` is older than the newest seen."""
        if controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"controller epoch {controller_epoch} is older than {self.controller_epoch}")
        self.controller_epoch = controller_epoch

    async def become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                        partition_states: Iterable[dict], live_leaders: Iterable[dict]
                                        ) -> dict[TopicPartition, int]:
        """Apply a LeaderAndIsr request; returns each partition's error code (see the module docstring).

        ``partition_states`` are LeaderAndIsr's partition states (Kafka's field
        names, each with its ``topic_name``), ``live_leaders`` its
        ``{broker_id, host_name, port}``. Raises :class:`StaleControllerEpochError`.
        """
        self.check_controller_epoch(controller_epoch)
        errors: dict[TopicPartition, int] = {}
        accepted: list[tuple[TopicPartition, dict]] = []
        for state in partition_states:
            tp = (state["topic_name"], state["partition_index"])
            current = self._partitions.get(tp)
            if current is not None and state["leader_epoch"] <= current.leader_epoch:
                log.info("ignoring LeaderAndIsr for %s-%d from controller %d: leader epoch %d is not newer than %d",
                         *tp, controller_id, state["leader_epoch"], current.leader_epoch)
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            elif self.local_broker_id not in state["replicas"]:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif tp in self._offline:  # its log dir failed: never a new log elsewhere (Kafka's getOrCreateLog)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                accepted.append((tp, state))
        if not accepted:
            return errors
        loop = asyncio.get_running_loop()
        ids = {tp: s["topic_id"] for tp, s in accepted if s.get("topic_id", ZERO_UUID) != ZERO_UUID}
        logs, inconsistent = await loop.run_in_executor(None, self._open_logs, [tp for tp, _s in accepted], ids)
        if inconsistent:  # a log of another topic of the same name (KIP-516): left alone, never served
            for tp in inconsistent:
                log.error("%s-%d: the log in %s belongs to another topic than id %s (its partition.metadata); "
                          "not served (INCONSISTENT_TOPIC_ID)", *tp, logs[tp].dir, format_topic_id(ids[tp]))
                errors[tp] = ErrorCode.INCONSISTENT_TOPIC_ID
            accepted = [(tp, s) for tp, s in accepted if tp not in inconsistent]
            if not accepted:
                return errors
        self.fetchers.remove_partitions([tp for tp, _s in accepted])
        leaders = {b["broker_id"]: LeaderEndpoint(b["broker_id"], b["host_name"], b["port"]) for b in live_leaders}
        to_fetch: dict[TopicPartition, tuple[LeaderEndpoint, int]] = {}
        became_leader, resigned = [], []
        now = now_ms()
        for tp, state in accepted:
            p = self._partition_for(tp[0], tp[1], logs[tp])
            was_leader = p.is_leader
            epoch, isr, replicas = state["leader_epoch"], list(state["isr"]), list(state["replicas"])
            zk_version, epoch_of_controller = state["zk_version"], state["controller_epoch"]
            if state["leader"] == self.local_broker_id:
                p.make_leader(epoch, isr, replicas, controller_epoch=epoch_of_controller, zk_version=zk_version,
                              now_ms=now)
                became_leader.append(p)
            else:
                p.make_follower(state["leader"], epoch, isr, replicas, controller_epoch=epoch_of_controller,
                                zk_version=zk_version)
                if was_leader:
                    resigned.append(p)
                leader = leaders.get(state["leader"])
                if leader is not None:
                    to_fetch[tp] = (leader, epoch)
                else:
                    log.warning("%s-%d: leader %d is not among the live leaders; not fetching", *tp, state["leader"])
            errors[tp] = ErrorCode.NONE
            self.purgatory.notify(tp)
        if became_leader:
            await loop.run_in_executor(None, _assign_epoch_starts, became_leader)
        self.fetchers.add_partitions(to_fetch)
        for p in became_leader:
            self._tell(lambda listener, p=p: listener.on_become_leader(p.key, p.leader_epoch))
        for p in resigned:
            self._tell(lambda listener, p=p: listener.on_resign(p.key, p.leader_epoch))
        return errors

    def _open_logs(self, tps: list[TopicPartition], topic_ids: dict) -> tuple[dict[TopicPartition, "Log"], set]:
        """Blocking: the logs of ``tps``, created on demand with their topic's config, and those of them whose
        ``partition.metadata`` names another id than ``topic_ids`` does (a log without one takes the id)."""
        log_manager = self._log_manager
        out = {}
        inconsistent = set()
        for tp in tps:
            plog = log_manager.get_log(tp)
            if plog is None:
                config = self._log_config_for(tp[0]) if self._log_config_for is not None else None
                plog = log_manager.create_log(tp[0], tp[1], config)
            out[tp] = plog
            topic_id = topic_ids.get(tp)
            if topic_id is not None and not plog.check_or_set_topic_id(topic_id):
                inconsistent.add(tp)
        return out, inconsistent

    async def stop_replicas(self, partitions: Iterable[TopicPartition], delete: bool) -> None:
        """Stop holding ``partitions`` (StopReplica): fetchers stop, waiters wake; ``delete`` removes their logs.

        With ``delete``, a log on disk is removed even if this broker does not
        hold its partition (Kafka's rule: a broker restarted during a topic
        deletion has the log but was never told to serve it).
        """
        partitions = list(partitions)
        stopped = [self._partitions[tp] for tp in partitions if tp in self._partitions]
        keys = [p.key for p in stopped]
        self.fetchers.remove_partitions(keys)
        for p in stopped:
            was_leader = p.is_leader
            if delete:
                self._drop(p.key)
            else:
                p.make_follower(-1, p.leader_epoch, p.isr, p.replicas, controller_epoch=p.controller_epoch,
                                zk_version=p.zk_version)
            self.purgatory.notify(p.key)
            if was_leader or delete:
                self._tell(lambda listener, p=p: listener.on_resign(p.key, p.leader_epoch))
        if delete:
            log_manager = self._log_manager
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: [log_manager.delete_log(*tp) for tp in partitions if log_manager.get_log(tp) is not None])

    def mark_offline(self, partitions: list[TopicPartition]) -> None:
        """Their log dir failed: stop serving them, and answer KAFKA_STORAGE_ERROR for them from now on."""
        for key in partitions:
            key = tuple(key)
            self._offline.add(key)
            self.remove_partition(*key)

    def offline_partitions(self) -> list[TopicPartition]:
        """The partitions whose replica here is in a failed log dir (any thread)."""
        return list(self._offline)

    def is_offline(self, topic: str, partition: int) -> bool:
        """True if this broker's replica of the partition is in a failed log dir."""
        return (topic, partition) in self._offline

    def missing_error(self, topic: str, partition: int) -> int:
        """The error for a partition :meth:`partition` did not find (see the module docstring)."""
        if (topic, partition) in self._offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self._partition_known is not None and self._partition_known(topic, partition):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def log_moved(self, tp: TopicPartition, log: "Log") -> None:
        """The partition's log moved to another log dir (AlterReplicaLogDirs' swap): serve that one.

        Called on the mover's thread holding the old log's lock; the swap of one
        attribute is atomic, and the old log is closed right after.
        """
        p = self._partitions.get(tuple(tp))
        if p is not None:
            p._log = log

    def remove_partition(self, topic: str, partition: int) -> None:
        """Stop serving ``topic-partition`` (its topic deleted, or its log dir failed); its waiters end.

        The dropped :class:`Partition` stops leading here (:meth:`_drop`): an acks=all
        produce waiting on it would otherwise wait out its whole timeout, as no
        follower fetches from it any more, and hold up every later answer on its
        connection. It answers :meth:`missing_error`'s error instead.
        """
        self.fetchers.remove_partitions([(topic, partition)])
        p = self._partitions.get((topic, partition))
        was_leader = p is not None and p.is_leader
        self._drop((topic, partition))
        self.purgatory.notify((topic, partition))
        if was_leader:
            self._tell(lambda listener: listener.on_resign(p.key, p.leader_epoch))

    def _drop(self, key: TopicPartition) -> None:
        """Stop serving a partition: out of the table, and the object itself neither leader nor
        follower (:meth:`Partition.stop_serving`), so a produce still holding it, waiting for the
        high watermark, ends at the purgatory's next notify of ``key`` instead of at its timeout."""
        p = self._partitions.pop(key, None)
        if p is not None:
            p.stop_serving()

    # -- appends ------------------------------------------------------------------------------
    def append_records(self, partition: Partition, records, loop: asyncio.AbstractEventLoop, *,
                       wait_s: float = 0.0) -> asyncio.Future:
        """Queue a leader's append (offsets assigned) on its log dir's writer; see the module docstring.

        The future gets the ``AppendInfo`` or the log's error once the bytes
        are written (or failed). ``records`` must stay untouched until then.

        ``wait_s`` (on the loop): if the writer takes
        this append at once and alone, wait up to that long for it here, so
        that the future is usually done on return and the caller answers
        without another pass of the loop (:mod:`broker.replica.handback`). A
        wait that runs out stops waits on that log dir for a while.
        """
        fut, appender, prompt = self._submit(partition, records, loop, will_wait=wait_s > 0)
        if prompt and wait_s > 0 and not self.handback.wait(fut, wait_s):
            appender.mark_slow(SLOW_BACKOFF_S)
        return fut

    def append_records_as_follower(self, partition: Partition, records,
                                   loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        """Queue a follower's append: the batches keep the offsets and leader epochs the leader gave them."""
        return self._submit(partition, records, loop, as_follower=True)[0]

    def _submit(self, partition: Partition, records, loop: asyncio.AbstractEventLoop, **how) -> tuple:
        """Queue an append on the partition's log dir writer: ``(its future, the LogAppender, prompt?)``."""
        fut = loop.create_future()
        plog = partition._log
        appender = self._log_manager.appender_for(plog)
        return fut, appender, appender.submit(plog, records, partition.leader_epoch, (fut, partition), **how)

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
        """A follower fetched from ``fetch_offset`` (its log end): the high watermark may move, waiters check,
        and a follower that caught up joins the ISR again."""
        if partition.update_follower_fetch(broker_id, fetch_offset, now_ms()):
            self.purgatory.notify(partition.key)
        if partition.should_expand_isr(broker_id):
            self.isr.expand(partition, broker_id)

    async def wait_for_high_watermark(self, partition: Partition, offset: int, timeout: float) -> bool:
        """acks=all: wait until the high watermark is above ``offset`` (True) or ``timeout`` passes (False).

        Also True as soon as this broker stops leading the partition: the caller
        checks :attr:`Partition.is_leader` (NOT_LEADER_OR_FOLLOWER then, as Kafka answers).
        """
        return await self.purgatory.wait_until(
            (partition.key,), lambda: partition.high_watermark > offset or not partition.is_leader, timeout)

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

    async def shutdown(self) -> None:
        """Stop the fetchers and the ISR check (before the logs close)."""
        self.isr.stop()
        await self.fetchers.shutdown()

    def close(self) -> None:
        """Shutdown: wake every waiter now and take no new waits."""
        self.purgatory.close()


def _assign_epoch_starts(partitions: list[Partition]) -> None:
    for p in partitions:
        p.assign_leader_epoch_start()
