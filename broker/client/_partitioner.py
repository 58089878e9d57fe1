"""Partitioners: which partition a record goes to.

A partitioner is any object with ``partition(topic, key, partitions, available)``
returning a partition index (the old producer API's ``Partitioner``): ``key`` is the
serialized key (bytes or None), ``partitions`` all partition indexes of the
topic, ``available`` those with a live leader. It may also define
``on_new_batch(topic, partition)``: the producer calls it when a record it placed
on ``partition`` would open a new batch there (none open, or the open one sent or
full), then asks for the record's partition again (Apache Kafka's ``onNewBatch``),
which lets sticky partitioners move on; not for a record sent to a partition
the caller named. A plain callable with the same four
arguments is accepted too.

:class:`DefaultPartitioner` keys records exactly as Apache Kafka's Java client
and librdkafka's ``murmur2_random`` do::

    partition = (murmur2(key) & 0x7fffffff) % len(partitions)

so data partitioned by any of them stays co-partitioned. Records without a key
use the sticky partitioner of Kafka 2.4 to 3.2 (KIP-480): one randomly chosen
available partition per topic, until a record would open a new batch there; that
record and the ones after it go to another partition, chosen at random. So a busy
producer fills one batch at a time, and one that sends a record at a time spreads
its records over the partitions instead of keeping to one for good.
"""

from __future__ import annotations

import random
import struct
from typing import Callable, Protocol, Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 (32-bit) of ``data`` with Kafka's seed 0x9747b28c, as an
    unsigned int. Apache Kafka's ``Utils.murmur2`` returns the same bits as a
    signed Java int; apply ``& 0x7fffffff`` to get its ``toPositive`` value."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:n4]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rem = length & 3
    if rem:
        if rem == 3:
            h ^= data[n4 + 2] << 16
        if rem >= 2:
            h ^= data[n4 + 1] << 8
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition Java's default partitioner / librdkafka's murmur2 pick for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class Partitioner(Protocol):
    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int: ...


class DefaultPartitioner:
    """murmur2 for keyed records, sticky for null keys (see the module docstring).

    Called from any thread that sends, without a lock: a race between two threads can at
    worst have both choose the next sticky partition, the later choice standing.
    """

    def __init__(self) -> None:
        self._sticky: dict[str, int] = {}
        self._previous: tuple[str, int] | None = None

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        if key is not None:
            return partitions[murmur2_partition(key, len(partitions))]
        current = self._sticky.get(topic)
        if current is None:
            current = self._choose(topic, partitions, available)
        return current

    def on_new_batch(self, topic: str, partition: int) -> None:
        """A record placed on ``partition`` would open a new batch: stick to another partition."""
        if self._sticky.get(topic) == partition:
            self._sticky.pop(topic, None)
            self._previous = (topic, partition)

    def _choose(self, topic, partitions, available) -> int:
        choices = list(available) or list(partitions)
        prev = self._previous
        if len(choices) > 1 and prev is not None and prev[0] == topic and prev[1] in choices:
            choices.remove(prev[1])
        chosen = random.choice(choices)
        self._sticky[topic] = chosen
        return chosen


class RoundRobinPartitioner:
    """Every record (keyed or not) to the next available partition in turn."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]) -> int:
        choices = available or partitions
        i = self._next.get(topic, 0)
        self._next[topic] = i + 1
        return choices[i % len(choices)]


def as_partitioner(obj) -> Partitioner:
    """Accept a partitioner object, a callable, or the names "default"/"murmur2_random"/"round_robin"."""
    if obj is None or obj in ("default", "murmur2_random", "murmur2"):
        return DefaultPartitioner()
    if obj == "round_robin":
        return RoundRobinPartitioner()
    if hasattr(obj, "partition"):
        return obj
    if callable(obj):
        return _CallablePartitioner(obj)
    from .errors import ConfigError

    raise ConfigError(f"partitioner must be a Partitioner, a callable or a known name, not {obj!r}")


class _CallablePartitioner:
    def __init__(self, fn: Callable) -> None:
        self._fn = fn

    def partition(self, topic, key, partitions, available) -> int:
        return self._fn(topic, key, partitions, available)
