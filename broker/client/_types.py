"""Small value types shared by the producer, consumer and admin client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class TopicPartition(NamedTuple):
    """A topic name and a partition index."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a produced record landed. ``timestamp`` is the broker's LogAppendTime
    when the topic uses it, else the record's CreateTime (ms since the epoch)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


@dataclass(slots=True)
class ConsumerRecord:
    """One record read by the consumer. ``key``/``value`` are deserialized
    (bytes by default); ``headers`` is a list of ``(str, bytes | None)``;
    ``timestamp_type`` is 0 for CreateTime, 1 for LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list = field(default_factory=list)
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """Answer of ``offsets_for_times``: the earliest offset whose timestamp is >= the query."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed position: the next offset to read, with optional metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    partitions: dict[int, PartitionMetadata]
    is_internal: bool = False
    topic_id: Any = None
    error_code: int = 0
