"""The coordinator's partition store: ``__consumer_offsets`` through the replica layer.

The coordinator sees this narrow interface and nothing else of the broker
(:class:`OffsetsStore`, implemented over the replica layer by
:class:`ReplicaStore`):

* :meth:`~OffsetsStore.subscribe` ``(on_become_leader(p, epoch), on_resign(p, epoch))``:
  the replica layer's leadership listeners for the partitions of
  ``__consumer_offsets``, called on the event loop; partitions already led when
  it is called are announced at once;
* :meth:`~OffsetsStore.append` writes one uncompressed v2 batch of (key, value)
  records to a partition this broker leads, off the loop (the log dir's writer
  thread), and returns once the high watermark has passed it, that is once every
  replica in the ISR has it (single node: when it is written). Failures raise
  :class:`StorageError` with the Kafka code; :func:`commit_error_for` maps it to
  what the coordinator answers. Waiting longer than ``offsets.commit.timeout.ms``
  is REQUEST_TIMED_OUT; losing the leadership meanwhile NOT_COORDINATOR. The
  transaction coordinator writes ``__transaction_state`` through the same
  :func:`append_replicated`;
* :meth:`~OffsetsStore.replay` reads a partition from its log start to its log
  end in a worker thread (as Kafka's loader does: a new leader's log is the
  truth) and returns the surviving state: the last value of every key,
  tombstones having removed keys; transactional offset commits count once their
  producer's COMMIT marker follows, are dropped by an ABORT, and are returned as
  pending without one;
* :meth:`~OffsetsStore.ensure_topic` creates the topic at first use with Kafka's
  settings: ``offsets.topic.num.partitions`` partitions,
  ``offsets.topic.replication.factor`` replicas, ``cleanup.policy=compact``,
  ``segment.bytes=offsets.topic.segment.bytes``. As Kafka 2.7 does, it refuses
  (COORDINATOR_NOT_AVAILABLE) while fewer brokers are alive than the replication
  factor; the single-node defaults set the factor to 1.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Awaitable, Callable, Iterator, Protocol

from broker.coordinator import consumer_group_records as cgr
from broker.coordinator.consumer_group_records import ConsumerGroupKey
from broker.coordinator.records import (GroupKey, GroupMetadataValue, OffsetAndMetadata, OffsetKey,
                                        OffsetsRecordError, decode_group_value, decode_key, decode_offset_value)
from broker.log import CorruptRecordError, LogError
from broker.protocol import ErrorCode
from broker.records import BatchBuilder, RecordBatch, iter_batches
from broker.records.control import ControlRecordType, decode_control_key

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.replica import Partition, ReplicaManager

OFFSETS_TOPIC = "__consumer_offsets"
READ_CHUNK = 1 << 20

Records = list[tuple[bytes, "bytes | None"]]


class StorageError(Exception):
    """An append to ``__consumer_offsets`` failed; ``error_code`` is the log's Kafka code."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = int(error_code)


def offsets_topic_configs(broker_config: "BrokerConfig") -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(broker_config.offsets_topic_segment_bytes),
        "compression.type": "producer",
    }


async def append_replicated(replicas: "ReplicaManager", topic: str, partition: int, batch: bytes,
                            timeout_s: float) -> None:
    """Append ``batch`` to an internal partition led here and wait until its high watermark passes it.

    The one way the coordinators write their state: through the replica layer
    (off the loop, the log dir's writer), done once every ISR replica has it.
    Raises :class:`StorageError`: NOT_COORDINATOR when this broker does not lead
    the partition, loses the leadership meanwhile or closes the log (shutdown);
    the log's own code when the append fails; REQUEST_TIMED_OUT when the ISR
    does not have it within ``timeout_s``.
    """
    p = replicas.partition(topic, partition)
    if p is None or not p.is_leader:
        raise StorageError(ErrorCode.NOT_COORDINATOR, f"this broker does not lead {topic}-{partition}")
    epoch = p.leader_epoch
    try:
        info = await replicas.append_records(p, batch, asyncio.get_running_loop())
    except (LogError, CorruptRecordError) as exc:
        raise StorageError(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR), str(exc)) from None
    except ValueError as exc:  # the log was closed under us (shutdown)
        raise StorageError(ErrorCode.NOT_COORDINATOR, str(exc)) from None

    def still_leader() -> bool:
        return replicas.partition(topic, partition) is p and p.is_leader and p.leader_epoch == epoch

    def settled() -> bool:
        return p.high_watermark > info.last_offset or not still_leader()

    await replicas.purgatory.wait_until((p.key,), settled, timeout_s)
    if not still_leader() or replicas.purgatory.closed:
        raise StorageError(ErrorCode.NOT_COORDINATOR, f"no longer the leader of {topic}-{partition}")
    if p.high_watermark <= info.last_offset:
        raise StorageError(ErrorCode.REQUEST_TIMED_OUT, f"{topic}-{partition}: offset {info.last_offset} "
                           f"not replicated to the ISR within {round(timeout_s * 1000)} ms")


class OffsetsStore(Protocol):
    """What the group coordinator needs of ``__consumer_offsets`` (see the module docstring)."""

    def subscribe(self, on_become_leader: Callable[[int, int], None],
                  on_resign: Callable[[int, int], None]) -> None: ...

    def partition_count(self) -> int | None: ...

    async def ensure_topic(self) -> int: ...

    async def append(self, partition: int, records: Records, now_ms: int | None = None, *,
                     producer_id: int = -1, producer_epoch: int = -1) -> None: ...

    async def replay(self, partition: int) -> "PartitionState": ...


#: creates a topic: (name, partitions, replication factor, configs) -> its partition count;
#: raises an exception with ``error_code`` and ``message`` (the topic layer's TopicError)
CreateTopic = Callable[[str, int, int, dict], Awaitable[int]]


class ReplicaStore:
    """:class:`OffsetsStore` over the replica layer (see the module docstring).

    ``partition_count()`` and ``create_topic`` come from the topic layer,
    ``alive_brokers()`` from the broker's view of the cluster.
    """

    def __init__(self, replicas: "ReplicaManager", config: "BrokerConfig", *,
                 partition_count: Callable[[], int | None], create_topic: CreateTopic,
                 alive_brokers: Callable[[], int]) -> None:
        self._replicas = replicas
        self._config = config
        self._partition_count = partition_count
        self._create_topic = create_topic
        self._alive_brokers = alive_brokers
        self._commit_timeout_s = config.offsets_commit_timeout_ms / 1000
        self._listener: tuple[Callable[[int, int], None], Callable[[int, int], None]] | None = None

    # -- leadership -------------------------------------------------------------------------------
    def subscribe(self, on_become_leader: Callable[[int, int], None], on_resign: Callable[[int, int], None]) -> None:
        self._listener = (on_become_leader, on_resign)
        self._replicas.add_leadership_listener(
            lambda tp, epoch: tp[0] == OFFSETS_TOPIC and on_become_leader(tp[1], epoch),
            lambda tp, epoch: tp[0] == OFFSETS_TOPIC and on_resign(tp[1], epoch))
        self._announce_leaders()

    def _announce_leaders(self) -> None:
        """Announce every partition of the topic led here (the coordinator ignores what it knows)."""
        if self._listener is None:
            return
        for p in self._replicas.partitions():
            if p.topic == OFFSETS_TOPIC and p.is_leader:
                self._listener[0](p.partition, p.leader_epoch)

    def partition_count(self) -> int | None:
        return self._partition_count()

    async def ensure_topic(self) -> int:
        count = self._partition_count()
        if count is not None:
            return count
        cfg = self._config
        factor, alive = cfg.offsets_topic_replication_factor, self._alive_brokers()
        if alive < factor:
            raise StorageError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               f"number of alive brokers '{alive}' does not meet the required replication factor "
                               f"'{factor}' for the offsets topic (configured via "
                               f"'offsets.topic.replication.factor')")
        try:
            count = await self._create_topic(OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, factor,
                                             offsets_topic_configs(cfg))
        except Exception as exc:
            count = self._partition_count()  # created meanwhile by another request or broker
            if count is None:
                code = getattr(exc, "error_code", None)
                if code is None:
                    raise
                raise StorageError(ErrorCode.COORDINATOR_NOT_AVAILABLE, getattr(exc, "message", str(exc))) from None
        # a topic layer that makes this broker leader without telling the listeners still counts
        self._announce_leaders()
        return count

    # -- appends and replay -------------------------------------------------------------------------
    def _leader(self, partition: int) -> "Partition":
        p = self._replicas.partition(OFFSETS_TOPIC, partition)
        if p is None or not p.is_leader:
            raise StorageError(ErrorCode.NOT_COORDINATOR, f"this broker does not lead {OFFSETS_TOPIC}-{partition}")
        return p

    async def append(self, partition: int, records: Records, now_ms: int | None = None, *,
                     producer_id: int = -1, producer_epoch: int = -1) -> None:
        # with a producer id: that producer's transactional batch (TxnOffsetCommit; base sequence 0, as Kafka)
        builder = (BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                                is_transactional=True) if producer_id >= 0 else BatchBuilder())
        ts = int(time.time() * 1000) if now_ms is None else now_ms
        for key, value in records:
            builder.append(ts, key, value)
        await append_replicated(self._replicas, OFFSETS_TOPIC, partition, builder.build(), self._commit_timeout_s)

    async def replay(self, partition: int) -> "PartitionState":
        p = self._leader(partition)
        return await asyncio.get_running_loop().run_in_executor(None, read_partition, p)


def commit_error_for(code: int) -> int:
    """Kafka's mapping of a failed append to the error an OffsetCommit/SyncGroup answers with."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return ErrorCode.UNKNOWN_SERVER_ERROR


class PartitionState:
    """What a partition of ``__consumer_offsets`` holds after replay."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.groups: dict[str, GroupMetadataValue] = {}
        #: offsets of transactions without a marker yet: producer id -> group -> offsets
        self.pending_txn_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        #: consumer groups of the consumer protocol (KIP-848): group -> their records' values by kind
        #: (``epoch``, ``assignment_epoch``: ints; ``members``, ``targets``, ``current``: member -> value)
        self.modern: dict[str, dict] = {}
        #: which of a group's two kinds of metadata record came last ("classic" or "consumer"): the group is
        #: that kind, should a conversion's tombstones be missing
        self.latest_kind: dict[str, str] = {}
        self.records_read = 0
        self.bad_records = 0

    def apply_txn(self, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        """A transactional offset commit: held until the producer's marker."""
        try:
            k = decode_key(key) if key is not None else None
            if isinstance(k, OffsetKey) and value is not None:
                by_group = self.pending_txn_offsets.setdefault(producer_id, {})
                by_group.setdefault(k.group, {})[(k.topic, k.partition)] = decode_offset_value(value)
                self.records_read += 1
                return
        except OffsetsRecordError:
            pass
        self.bad_records += 1

    def end_txn(self, producer_id: int, commit: bool) -> None:
        for group, offsets in self.pending_txn_offsets.pop(producer_id, {}).items():
            if commit:
                self.offsets.setdefault(group, {}).update(offsets)

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            self.bad_records += 1
            return
        try:
            k = decode_key(key)
            if isinstance(k, OffsetKey):
                tp = (k.topic, k.partition)
                if value is None:
                    self.offsets.get(k.group, {}).pop(tp, None)
                else:
                    self.offsets.setdefault(k.group, {})[tp] = decode_offset_value(value)
            elif isinstance(k, GroupKey):
                if value is None:
                    self.groups.pop(k.group, None)
                else:
                    self.groups[k.group] = decode_group_value(value)[1]
                    self.latest_kind[k.group] = "classic"
            elif isinstance(k, ConsumerGroupKey):
                self._apply_modern(k, value)
        except (OffsetsRecordError, ValueError, IndexError):
            self.bad_records += 1
        self.records_read += 1

    def _apply_modern(self, k: ConsumerGroupKey, value: bytes | None) -> None:
        if k.version not in cgr.VALUES:  # Kafka 3.x's partition metadata, regexes: not needed here
            return
        if value is None and k.version == cgr.GROUP_METADATA:
            self.modern.pop(k.group, None)
            return
        group = self.modern.setdefault(k.group, {"epoch": None, "assignment_epoch": 0, "members": {}, "targets": {},
                                                 "current": {}})
        if k.version == cgr.GROUP_METADATA:
            decoded = cgr.decode_value(k.version, value)
            group["epoch"], group["metadata_hash"] = decoded["epoch"], decoded["metadata_hash"]
            self.latest_kind[k.group] = "consumer"
        elif k.version == cgr.TARGET_METADATA:
            group["assignment_epoch"] = 0 if value is None else cgr.decode_value(k.version, value)["assignment_epoch"]
        else:
            kind = {cgr.MEMBER_METADATA: "members", cgr.TARGET_MEMBER: "targets",
                    cgr.CURRENT_ASSIGNMENT: "current"}[k.version]
            if value is None:
                group[kind].pop(k.member, None)
            else:
                group[kind][k.member] = cgr.decode_value(k.version, value)

    def group_ids(self) -> set[str]:
        return (set(self.groups) | {g for g, offs in self.offsets.items() if offs}
                | {g for g, m in self.modern.items() if m["epoch"] is not None})


def replay_batches(partition: "Partition") -> Iterator[tuple[RecordBatch, int]]:
    """Every batch of ``partition`` from its log start to its log end as of the call (blocking).

    Yields ``(batch, offset)``: records of the batch below ``offset`` were
    already replayed (reads start at the batch holding an offset, so the
    first batch may begin below the log start). Used by the group and
    transaction coordinators to load a partition they become leader of.
    """
    offset = partition.log_start_offset
    end = partition.log_end_offset
    while offset < end:
        data = partition.read(offset, READ_CHUNK, follower=True).read_bytes()
        if not data:
            return
        progressed = False
        for batch in iter_batches(data):
            if batch.base_offset >= end:
                return
            nxt = batch.next_offset
            if nxt <= offset:
                continue
            yield batch, offset
            offset = nxt
            progressed = True
        if not progressed:
            return


def read_partition(partition: "Partition") -> PartitionState:
    """Replay a partition of ``__consumer_offsets`` from its start to its log end (blocking)."""
    state = PartitionState()
    for batch, offset in replay_batches(partition):
        if batch.is_control:
            for r in batch.records:
                try:
                    commit = decode_control_key(r.key)[1] is ControlRecordType.COMMIT
                except CorruptRecordError:
                    continue
                state.end_txn(batch.producer_id, commit)
        elif batch.is_transactional:
            for r in batch.records:
                if batch.offset_of(r) >= offset:
                    state.apply_txn(batch.producer_id, r.key, r.value)
        else:
            for r in batch.records:
                if batch.offset_of(r) >= offset:
                    state.apply(r.key, r.value)
    return state
