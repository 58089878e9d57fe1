"""Follower fetchers: Kafka's ``ReplicaFetcherManager`` and ``ReplicaFetcherThread``, as tasks on the loop.

Each partition this broker follows is handed to one fetcher of its leader:
``num.replica.fetchers`` fetchers per source broker, a partition going to the
one its hash picks. A fetcher is one asyncio task with one connection
(:class:`~broker.client._connection.BrokerConnection`) to the leader; the
loop never waits on a disk (appends go through the log dir's writer thread).

Each partition first truncates (KIP-101, KIP-279), then fetches:

1. truncation: OffsetForLeaderEpoch (v3, ``replica_id`` = our broker id) with
   our latest epoch and our current leader epoch. The leader answers the end
   offset of that epoch in its log (and the epoch it found). If our log has
   that epoch we truncate to the smaller of the two end offsets and are done;
   if not, we truncate to the end of our own largest epoch below it and ask
   again with the epoch we have then. A log with no epochs truncates to its
   high watermark; a leader with no answer (-1, -1) likewise.
2. fetching: Fetch v12 with ``replica_id`` = our id from our log end; the
   batches are appended as a follower's (offsets and leader epochs kept, so
   ``leader-epoch-checkpoint`` follows the leader's batches) and the high
   watermark becomes the leader's, capped at our log end; a leader's log
   start offset above ours (DeleteRecords, retention) moves ours up too.
   A throttled partition (:mod:`broker.replica.quota`) not yet caught up
   with the leader's high watermark is left out while the follower quota is
   exceeded.
   Each fetcher keeps an incremental fetch session with its leader (KIP-227,
   :mod:`broker.client._fetch_session`): a request names only the partitions
   whose log end or log start moved, and the leader answers only those with
   records or a new high watermark or log start; a lost session (a leader
   restart, an epoch mismatch, a failed request) starts over with a full one.

Errors, per partition, as Kafka's fetcher treats them:

* OFFSET_OUT_OF_RANGE: the leader's log end (ListOffsets latest as a replica)
  below ours means truncate to it; else if the leader's log start is above our
  log end, empty the log and start at the leader's log start;
* FENCED_LEADER_EPOCH: our epoch is stale; the partition leaves the fetcher
  until the controller's next LeaderAndIsr brings it back;
* UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and
  the rest: the partition waits ``replica.fetch.backoff.ms`` and tries again
  (a refused append truncates again first);
* a lost connection: every partition of the fetcher waits the backoff, then
  the fetcher reconnects.

Loop-only.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from broker.client._connection import BrokerConnection
from broker.client._fetch_session import FetchSessionHandler
from broker.acl import RefusalWarning
from broker.client.errors import KafkaError
from broker.log import LogError
from broker.protocol import ApiKey, ErrorCode
from broker.records import CorruptRecordError
from broker.replica.quota import is_throttled

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager
    from broker.replica.partition import Partition

log = logging.getLogger("broker.replica.fetcher")

TopicPartition = tuple[str, int]
OFFSET_FOR_LEADER_EPOCH_VERSION = 3  # the first with replica_id
LATEST = -1
EARLIEST = -2


@dataclass(frozen=True, slots=True)
class LeaderEndpoint:
    """Where a leader listens (LeaderAndIsr's ``live_leaders``)."""

    broker_id: int
    host: str
    port: int


@dataclass(slots=True)
class FetcherSettings:
    """Kafka's ``num.replica.fetchers`` and ``replica.fetch.*`` settings."""

    num_fetchers: int = 1
    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000
    #: The TLS context for leaders' inter-broker listener when it is SSL (:mod:`broker.tls`), asked at each
    #: connection (a replaced key store serves the next one); None: PLAINTEXT
    ssl_context: Callable[[], Any] = lambda: None
    #: SASL settings for it when it is SASL_PLAINTEXT or SASL_SSL (``Broker.inter_broker_sasl``); None: no SASL
    sasl: Any = None


@dataclass(slots=True)
class _FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    leader_high_watermark: int = -1  # from the last fetch response; -1 before it (not in sync)
    #: the leader's high watermark minus our log end, as of the last fetch answer
    lag: int = 0


class ReplicaFetcherManager:
    """The fetchers of every source broker; see the module docstring."""

    def __init__(self, replicas: "ReplicaManager", settings: FetcherSettings) -> None:
        self._replicas = replicas
        self.settings = settings
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}

    def fetcher_of(self, tp: TopicPartition) -> "ReplicaFetcher | None":
        return next((f for f in self._fetchers.values() if tp in f.partitions), None)

    def max_lag(self) -> int:
        """Kafka's ``ReplicaFetcherManager`` MaxLag: the largest lag over the partitions followed (any thread)."""
        return max((s.lag for f in list(self._fetchers.values()) for s in list(f.partitions.values())), default=0)

    def add_partitions(self, partitions: dict[TopicPartition, tuple[LeaderEndpoint, int]]) -> None:
        """Fetch each partition from its leader in its leader epoch, truncating first."""
        for tp, (leader, leader_epoch) in partitions.items():
            index = zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % self.settings.num_fetchers
            key = (leader.broker_id, index)
            fetcher = self._fetchers.get(key)
            if fetcher is not None and fetcher.leader != leader:  # the broker came back at another address
                fetcher.stop()
                moved = fetcher.partitions
                fetcher = None
            else:
                moved = {}
            if fetcher is None:
                fetcher = self._fetchers[key] = ReplicaFetcher(self._replicas, leader, index, self.settings)
                for other, state in moved.items():
                    fetcher.add(other, state.leader_epoch)
            fetcher.add(tp, leader_epoch)

    def resize(self, num_fetchers: int) -> None:
        """``num.replica.fetchers`` changed (a dynamic broker config): every partition goes to the fetcher the new
        count picks, truncating first as any partition handed to a fetcher does."""
        if num_fetchers == self.settings.num_fetchers:
            return
        moving = {tp: (f.leader, state.leader_epoch) for f in self._fetchers.values()
                  for tp, state in f.partitions.items()}
        for fetcher in self._fetchers.values():
            fetcher.stop()
        self._fetchers.clear()
        self.settings = replace(self.settings, num_fetchers=num_fetchers)
        self.add_partitions(moving)

    def remove_partitions(self, tps) -> None:
        """Stop fetching ``tps``; a fetcher left with nothing to fetch stops."""
        tps = set(tps)
        for key, fetcher in list(self._fetchers.items()):
            fetcher.remove(tps)
            if not fetcher.partitions:
                fetcher.stop()
                del self._fetchers[key]

    async def shutdown(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        for fetcher in fetchers:
            fetcher.stop()
        await asyncio.gather(*(f.task for f in fetchers), return_exceptions=True)


class ReplicaFetcher:
    """One fetcher task for some partitions of one leader; see the module docstring."""

    def __init__(self, replicas: "ReplicaManager", leader: LeaderEndpoint, index: int,
                 settings: FetcherSettings) -> None:
        self._replicas = replicas
        self.leader = leader
        self.settings = settings
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self._wake = asyncio.Event()
        self._conn: BrokerConnection | None = None
        #: this fetcher's incremental fetch session with the leader (KIP-227)
        self._session = FetchSessionHandler()
        self._name = f"fetcher {index} of broker {replicas.local_broker_id} from broker {leader.broker_id}"
        self._refusals = RefusalWarning(log)
        self._stopped = False
        self.task = asyncio.get_running_loop().create_task(self._run())

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = _FetchState(leader_epoch)
        self._wake.set()

    def remove(self, tps: set) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    def stop(self) -> None:
        """End the fetcher: its task is cancelled, and the loop ends at its next turn in any case. (On Python 3.11
        ``asyncio.wait_for`` loses a cancellation that comes as the awaited event is set: a fetcher waiting in
        it went on fetching, and its broker's shutdown waited for it for ever. ``asyncio.timeout`` does not.)"""
        self._stopped = True
        self.task.cancel()
        if self._conn is not None:
            self._conn.close()

    # -- the loop ---------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = self.settings.backoff_ms / 1000
        while not self._stopped:
            now = loop.time()
            ready = {tp: s for tp, s in self.partitions.items() if s.delayed_until <= now}
            if not ready:
                self._wake.clear()
                later = [s.delayed_until for s in self.partitions.values()]
                try:
                    async with asyncio.timeout((min(later) - now) if later else None):  # not wait_for: see stop()
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            try:
                conn = await self._connection()
                truncating = {tp: s for tp, s in ready.items() if s.truncating}
                if truncating:
                    await self._truncate(conn, truncating)
                else:
                    await self._fetch(conn, ready)
            except Exception as exc:  # noqa: BLE001 - a lost leader, or a bug: either way the fetcher must go on
                if isinstance(exc, (KafkaError, OSError)):
                    log.warning("%s: %s; retrying in %.1f s", self._name, exc, backoff)
                else:
                    log.exception("%s failed; retrying in %.1f s", self._name, backoff)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                self._session.failed()
                for state in ready.values():
                    state.delayed_until = loop.time() + backoff

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or self._conn.closed:
            conn = BrokerConnection(self.leader.host, self.leader.port, node_id=self.leader.broker_id,
                                    client_id=f"broker-{self._replicas.local_broker_id}-fetcher",
                                    request_timeout_ms=self.settings.socket_timeout_ms,
                                    ssl_context=self.settings.ssl_context(), sasl=self.settings.sasl)
            await conn.connect()
            self._conn = conn
        return self._conn

    def _current(self, tp: TopicPartition, state: _FetchState) -> "Partition | None":
        """The partition if ``state`` is still its fetch state here (not removed or replaced meanwhile)."""
        if self.partitions.get(tp) is not state:
            return None
        partition = self._replicas.partition(*tp)
        if partition is None:
            self.partitions.pop(tp, None)
        return partition

    def _delay(self, state: _FetchState) -> None:
        state.delayed_until = asyncio.get_running_loop().time() + self.settings.backoff_ms / 1000

    async def _blocking(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    # -- truncation (KIP-101 / KIP-279) -------------------------------------------------------------
    async def _truncate(self, conn: BrokerConnection, states: dict[TopicPartition, _FetchState]) -> None:
        asked: dict[TopicPartition, tuple[_FetchState, int]] = {}
        for tp, state in states.items():
            partition = self._current(tp, state)
            if partition is None:
                continue
            epoch = partition.latest_epoch
            if epoch < 0:  # no epochs in our log: the high watermark is all we know to be safe
                await self._blocking(partition.truncate_to, partition.high_watermark)
                state.truncating = False
            else:
                asked[tp] = (state, epoch)
        if not asked:
            return
        topics: dict[str, list] = {}
        for (topic, index), (state, epoch) in asked.items():
            topics.setdefault(topic, []).append(
                {"partition": index, "current_leader_epoch": state.leader_epoch, "leader_epoch": epoch})
        response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, {
            "replica_id": self._replicas.local_broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]},
            version=OFFSET_FOR_LEADER_EPOCH_VERSION)
        for t in response["topics"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition"])
                if tp not in asked:
                    continue
                state = asked[tp][0]
                partition = self._current(tp, state)
                if partition is None:
                    continue
                if p["error_code"]:
                    self._partition_error(tp, state, p["error_code"])
                    continue
                offset, done = self._truncation_point(partition, p["leader_epoch"], p["end_offset"])
                if offset < partition.log_end_offset:
                    log.info("%s-%d: truncating from %d to %d (leader %d: epoch %d ends at %d)", *tp,
                             partition.log_end_offset, offset, self.leader.broker_id, p["leader_epoch"],
                             p["end_offset"])
                    await self._blocking(partition.truncate_to, offset)
                state.truncating = not done

    @staticmethod
    def _truncation_point(partition: "Partition", leader_epoch: int, end_offset: int) -> tuple[int, bool]:
        """Where to truncate given the leader's answer, and whether that settles it (Kafka's rules)."""
        log_end_offset = partition.log_end_offset
        if end_offset < 0:
            return min(partition.high_watermark, log_end_offset), True
        if leader_epoch < 0:
            return min(end_offset, log_end_offset), True
        our_epoch, our_end = partition.end_offset_for_epoch(leader_epoch)
        if our_epoch < 0:
            return min(end_offset, log_end_offset), True
        if our_epoch != leader_epoch:
            return our_end, False  # we lack the leader's epoch: cut to our epoch below it and ask again
        return min(end_offset, our_end), True

    # -- fetching ---------------------------------------------------------------------------------
    async def _fetch(self, conn: BrokerConnection, states: dict[TopicPartition, _FetchState]) -> None:
        settings = self.settings
        wanted: dict[TopicPartition, dict] = {}
        asked: dict[TopicPartition, tuple[_FetchState, int]] = {}
        throttled: set[TopicPartition] = set()
        quota = self._replicas.follower_quota
        for tp, state in states.items():
            partition = self._current(tp, state)
            if partition is None:
                continue
            fetch_offset = partition.log_end_offset
            in_sync = 0 <= state.leader_high_watermark <= fetch_offset
            if quota.enabled and not in_sync and is_throttled(
                    partition.config.follower_replication_throttled_replicas, self._replicas.local_broker_id, tp[1]):
                if quota.is_exceeded():  # a throttled replica catching up waits for the quota
                    self._delay(state)
                    continue
                throttled.add(tp)
            asked[tp] = (state, fetch_offset)
            wanted[tp] = {"partition": tp[1], "current_leader_epoch": state.leader_epoch, "fetch_offset": fetch_offset,
                          "last_fetched_epoch": -1, "log_start_offset": partition.log_start_offset,
                          "partition_max_bytes": settings.max_bytes}
        if not asked:
            return
        # an incremental fetch session: only partitions whose fetch offset (our log end) or log start moved are
        # sent, and the leader answers only those with news (KIP-227)
        response = await conn.request(ApiKey.FETCH, {
            "replica_id": self._replicas.local_broker_id, "max_wait_ms": settings.wait_max_ms,
            "min_bytes": settings.min_bytes, "max_bytes": settings.response_max_bytes, "isolation_level": 0,
            # a partition added afresh (a new leader epoch) has a new state: the handler then asks for every one
            **self._session.build(wanted, {tp: state for tp, (state, _offset) in asked.items()}), "rack_id": ""},
            timeout=settings.socket_timeout_ms / 1000 + settings.wait_max_ms / 1000)
        if not self._session.handle_response(response):  # the leader lost the session: a full request next
            return
        loop = asyncio.get_running_loop()
        for t in response["responses"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition_index"])
                if tp not in asked:
                    continue
                state, fetch_offset = asked[tp]
                partition = self._current(tp, state)
                if partition is None or partition.log_end_offset != fetch_offset:
                    continue
                error = p["error_code"]
                if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._out_of_range(conn, tp, state, partition)
                    continue
                if error:
                    self._partition_error(tp, state, error)
                    continue
                records = p["records"]
                if records is not None and len(records):
                    try:
                        await self._replicas.append_records_as_follower(partition, records, loop)
                    except (LogError, CorruptRecordError) as exc:
                        log.warning("%s-%d: appending what leader %d sent failed (%s); truncating again", *tp,
                                    self.leader.broker_id, exc)
                        state.truncating = True
                        self._delay(state)
                        continue
                if tp in throttled and records is not None:
                    quota.record(len(records))
                if self._current(tp, state) is partition:
                    state.leader_high_watermark = p["high_watermark"]
                    if partition.update_follower_high_watermark(p["high_watermark"]):
                        self._replicas.purgatory.notify(tp)  # consumers reading this follower (KIP-392)
                    state.lag = max(0, p["high_watermark"] - partition.log_end_offset)
                    if p["log_start_offset"] > partition.log_start_offset:  # DeleteRecords or retention at the leader
                        await self._blocking(partition.follow_log_start_offset, p["log_start_offset"])

    async def _out_of_range(self, conn: BrokerConnection, tp: TopicPartition, state: _FetchState,
                            partition: "Partition") -> None:
        """Kafka's ``fetchOffsetAndTruncate``: meet the leader's log where it is."""
        leader_end = await self._leader_offset(conn, tp, state, LATEST)
        if leader_end is None or self._current(tp, state) is not partition:
            return
        if leader_end < partition.log_end_offset:
            log.warning("%s-%d: our log end %d is past leader %d's %d; truncating", *tp, partition.log_end_offset,
                        self.leader.broker_id, leader_end)
            await self._blocking(partition.truncate_to, leader_end)
            return
        leader_start = await self._leader_offset(conn, tp, state, EARLIEST)
        if leader_start is None or self._current(tp, state) is not partition:
            return
        if leader_start > partition.log_end_offset:
            log.info("%s-%d: leader %d starts at %d, past our log end %d; starting the log there", *tp,
                     self.leader.broker_id, leader_start, partition.log_end_offset)
            await self._blocking(partition.truncate_fully_and_start_at, leader_start)

    async def _leader_offset(self, conn: BrokerConnection, tp: TopicPartition, state: _FetchState,
                             timestamp: int) -> int | None:
        response = await conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": self._replicas.local_broker_id, "isolation_level": 0,
            "topics": [{"name": tp[0], "partitions": [{"partition_index": tp[1],
                                                       "current_leader_epoch": state.leader_epoch,
                                                       "timestamp": timestamp, "max_num_offsets": 1}]}]})
        p = response["topics"][0]["partitions"][0]
        if p["error_code"]:
            self._partition_error(tp, state, p["error_code"])
            return None
        return p["offset"]

    def _partition_error(self, tp: TopicPartition, state: _FetchState, error: int) -> None:
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s-%d: leader epoch %d is fenced by leader %d; waiting for the controller", *tp,
                     state.leader_epoch, self.leader.broker_id)
            self.partitions.pop(tp, None)
            return
        if error in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
            self._refusals.refused(f"{self._name}:")
        else:
            log.debug("%s-%d: leader %d answered error %d; retrying", *tp, self.leader.broker_id, error)
        self._delay(state)
