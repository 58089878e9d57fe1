"""The ``__consumer_offsets`` topic as the coordinator's store: create, append, load.

* :func:`ensure_offsets_topic` creates the topic at first use with Kafka's settings:
  ``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``,
  ``segment.bytes=offsets.topic.segment.bytes`` (100 MiB by default).
* :func:`append_records` writes one uncompressed v2 batch of (key, value) records
  through the replica layer to a partition this broker leads and returns only
  after the log has it (the single-node high watermark moves with the append),
  so a commit acknowledged to a client is in the log. Storage errors map to the codes Kafka's coordinator
  answers with (:func:`commit_error_for`).
* :func:`read_partition` replays a partition (a :class:`~broker.replica.Partition`)
  from its log start offset to its high watermark and returns the surviving state: the last value of every key, tombstones
  having removed keys (run in a worker thread; touches only the log's files).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from broker.coordinator.records import (GroupKey, GroupMetadataValue, OffsetAndMetadata, OffsetKey,
                                        OffsetsRecordError, decode_group_value, decode_key, decode_offset_value)
from broker.log import CorruptRecordError, LogError
from broker.protocol import ErrorCode
from broker.records import BatchBuilder, iter_batches

if TYPE_CHECKING:
    from broker.replica import Partition, ReplicaManager

OFFSETS_TOPIC = "__consumer_offsets"
READ_CHUNK = 1 << 20


class StorageError(Exception):
    """An append to ``__consumer_offsets`` failed; ``error_code`` is the log's Kafka code."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = int(error_code)


def offsets_topic_configs(broker_config) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(broker_config.offsets_topic_segment_bytes),
        "compression.type": "producer",
    }


async def ensure_offsets_topic(broker):
    """The ``__consumer_offsets`` TopicInfo, created with Kafka's settings if it does not exist."""
    from broker.server.topics import TopicError

    info = broker.topics.get(OFFSETS_TOPIC)
    if info is not None:
        return info
    cfg = broker.config
    factor = min(cfg.offsets_topic_replication_factor, len(broker.live_brokers()))
    try:
        return await broker.topics.create_topic(OFFSETS_TOPIC, num_partitions=cfg.offsets_topic_num_partitions,
                                                replication_factor=factor, configs=offsets_topic_configs(cfg))
    except TopicError as exc:
        if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and broker.topics.get(OFFSETS_TOPIC) is not None:
            return broker.topics.get(OFFSETS_TOPIC)
        raise


def append_records(replicas: "ReplicaManager", partition: "Partition | None",
                   records: list[tuple[bytes, bytes | None]], now_ms: int | None = None) -> int:
    """Append ``records`` as one batch; returns the first offset. Raises StorageError."""
    if partition is None:
        raise StorageError(ErrorCode.NOT_COORDINATOR, "this broker does not host the partition")
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    builder = BatchBuilder()
    for key, value in records:
        builder.append(ts, key, value)
    try:
        return replicas.append_now(partition, builder.build()).first_offset
    except (LogError, CorruptRecordError) as exc:
        raise StorageError(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR), str(exc)) from None
    except ValueError as exc:  # the log was closed under us (shutdown)
        raise StorageError(ErrorCode.NOT_COORDINATOR, str(exc)) from None


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
        self.records_read = 0
        self.bad_records = 0

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
        except OffsetsRecordError:
            self.bad_records += 1
        self.records_read += 1

    def group_ids(self) -> set[str]:
        return set(self.groups) | {g for g, offs in self.offsets.items() if offs}


def read_partition(partition: "Partition") -> PartitionState:
    """Replay a partition of ``__consumer_offsets`` from its start to its high watermark (blocking)."""
    state = PartitionState()
    offset = partition.log_start_offset
    end = partition.high_watermark
    while offset < end:
        data = partition.read(offset, READ_CHUNK).read_bytes()
        if not data:
            break
        progressed = False
        for batch in iter_batches(data):
            nxt = batch.next_offset
            if nxt <= offset:
                continue
            if not batch.is_control:
                for r in batch.records:
                    if batch.offset_of(r) >= offset:
                        state.apply(r.key, r.value)
            offset = nxt
            progressed = True
        if not progressed:
            break
    return state
