"""The metadata cache: this broker's view of the cluster, as the controller last told it.

Kafka's ``MetadataCache``. It is filled only by UpdateMetadata requests from
the controller (:meth:`MetadataCache.update`, called by the UpdateMetadata
handler), and is empty before the first one. Metadata, DescribeCluster and
FindCoordinator answer from it, so every broker of a cluster answers alike,
and the admin operations wait on it (:meth:`MetadataCache.wait_until`) for
the controller to have acted on what they wrote to the store.

What one UpdateMetadata carries (Kafka's UpdateMetadataRequest, any version
0-7, in the dict form :meth:`update` reads):

* ``controller_id``, ``controller_epoch``: kept; a request from an older
  controller epoch than the newest seen is refused by the handler
  (STALE_CONTROLLER_EPOCH) before it reaches the cache;
* ``live_brokers``: the whole set of live brokers (replaces the last set);
* partition states (``topic_states[].partition_states[]`` from v5, the flat
  ``ungrouped_partition_states`` before): each replaces the partition's entry;
  a leader of -2 (Kafka's ``LeaderDuringDelete``) removes the partition, and a
  topic whose last partition goes is gone. Offline replicas are the replicas
  the controller reports on dead brokers or failed log dirs;
* from v7, each topic's id (KIP-516): :meth:`MetadataCache.topic_name` finds a
  topic by it. A topic announced without one (the zero uuid: a controller of an
  older release) keeps the id it had.

Loop-only (not thread-safe); reads are dict lookups for the hot path.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Callable

from broker.protocol.schema import ZERO_UUID

#: The leader a partition of a topic being deleted is announced with (Kafka's ``LeaderDuringDelete``).
LEADER_DURING_DELETE = -2
#: No leader (every replica of the ISR is down).
NO_LEADER = -1
#: Kafka's internal topics (its ``Topic.isInternal``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One listener of a live broker, as UpdateMetadata carries it."""

    listener_name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker: its id, its listeners and its rack."""

    id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None

    def endpoint(self, listener_name: str = "PLAINTEXT") -> BrokerEndpoint | None:
        """The listener named ``listener_name``, else the first one, else None."""
        return self.listener(listener_name) or (self.endpoints[0] if self.endpoints else None)

    def listener(self, listener_name: str) -> BrokerEndpoint | None:
        """The listener named ``listener_name``, or None when this broker has none of that name."""
        for e in self.endpoints:
            if e.listener_name == listener_name:
                return e
        return None


@dataclass(slots=True)
class PartitionMeta:
    """One partition as the controller described it (replaced, never changed, by an update)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    zk_version: int = 0
    controller_epoch: int = 0


@dataclass(slots=True)
class TopicMeta:
    """A topic's partitions (partition index -> :class:`PartitionMeta`)."""

    name: str
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
    topic_id: uuid.UUID = ZERO_UUID  # the zero uuid until the controller names the id

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataCache:
    """See the module docstring."""

    def __init__(self) -> None:
        self.controller_id = -1
        #: The newest controller epoch seen (older controllers' requests are stale).
        self.controller_epoch = -1
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicMeta] = {}
        self._names: dict[uuid.UUID, str] = {}  # topic id -> name
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future]] = []
        self._stopped = False
        #: goes up with every update (what was derived from the cache before it may be stale)
        self.version = 0
        self._partition_counts: tuple[int, dict[str, tuple[uuid.UUID, int]]] = (-1, {})

    # -- reads ----------------------------------------------------------------------------
    def alive_brokers(self) -> list[BrokerInfo]:
        """The live brokers, by id."""
        return [self._brokers[b] for b in sorted(self._brokers)]

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._brokers.get(broker_id)

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def topic(self, name: str) -> TopicMeta | None:
        return self._topics.get(name)

    def partition_counts(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Every topic with an id: name -> (topic id, partition count); kept until the next update (read only)."""
        version, counts = self._partition_counts
        if version != self.version:
            counts = {name: (meta.topic_id, len(meta.partitions)) for name, meta in self._topics.items()
                      if meta.topic_id is not None and meta.topic_id.int != 0 and meta.partitions}
            self._partition_counts = (self.version, counts)
        return counts

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, or None (unknown, or the zero uuid)."""
        name = self._names.get(topic_id)
        return name if name is not None and name in self._topics else None

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        meta = self._topics.get(topic)
        return None if meta is None else meta.partitions.get(partition)

    def has_leaders(self, topic: str, partitions: int | None = None) -> bool:
        """True when ``topic`` is known with (at least ``partitions``) partitions, each with a leader."""
        meta = self._topics.get(topic)
        if meta is None or (partitions is not None and len(meta.partitions) < partitions):
            return False
        return all(p.leader >= 0 for p in meta.partitions.values())

    # -- updates (the UpdateMetadata handler) -------------------------------------------------
    def update(self, request: dict, version: int) -> None:
        """Apply one UpdateMetadata request (see the module docstring), then wake the waiters."""
        self.controller_id = request["controller_id"]
        self.controller_epoch = request["controller_epoch"]
        self._brokers = {b.id: b for b in (_broker_info(entry, version) for entry in request["live_brokers"])}
        if version >= 5:
            states = [dict(s, topic_name=t["topic_name"]) for t in request["topic_states"]
                      for s in t["partition_states"]]
        else:
            states = request["ungrouped_partition_states"]
        for state in states:
            self._apply(state)
        if version >= 7:
            for t in request["topic_states"]:
                meta = self._topics.get(t["topic_name"])
                if meta is not None and t["topic_id"] != ZERO_UUID and meta.topic_id != t["topic_id"]:
                    self._names.pop(meta.topic_id, None)
                    meta.topic_id = t["topic_id"]
                    self._names[meta.topic_id] = meta.name
        self._wake()

    def _apply(self, state: dict) -> None:
        name, index = state["topic_name"], state["partition_index"]
        if state["leader"] == LEADER_DURING_DELETE:
            meta = self._topics.get(name)
            if meta is not None:
                meta.partitions.pop(index, None)
                if not meta.partitions:
                    del self._topics[name]
                    self._names.pop(meta.topic_id, None)
            return
        meta = self._topics.get(name)
        if meta is None:
            meta = self._topics[name] = TopicMeta(name)
        meta.partitions[index] = PartitionMeta(
            name, index, state["leader"], state["leader_epoch"], list(state["isr"]), list(state["replicas"]),
            list(state.get("offline_replicas") or ()), state["zk_version"], state["controller_epoch"])

    # -- waiting for the controller to have acted ---------------------------------------------
    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds after an update (True), or ``timeout`` seconds pass (False), or
        the broker stops (False: no update will come)."""
        if predicate():
            return True
        if self._stopped:
            return False
        future = asyncio.get_running_loop().create_future()
        entry = (predicate, future)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout) if timeout > 0 else False
        except asyncio.TimeoutError:
            return False
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _wake(self) -> None:
        self.version += 1
        for predicate, future in list(self._waiters):
            if not future.done() and predicate():
                future.set_result(True)

    def stop(self) -> None:
        """The broker is stopping (its controller and replicas are gone): every wait ends now, unfulfilled, so a
        request waiting for a topic's leaders (a CreateTopics, a group's first FindCoordinator) is answered
        instead of holding the shutdown until its timeout."""
        self._stopped = True
        for _predicate, future in list(self._waiters):
            if not future.done():
                future.set_result(False)


def _broker_info(entry: dict, version: int) -> BrokerInfo:
    if version == 0:
        endpoints = (BrokerEndpoint("PLAINTEXT", entry["v0_host"], entry["v0_port"]),)
    else:
        endpoints = tuple(BrokerEndpoint(e.get("listener") or "PLAINTEXT", e["host"], e["port"],
                                         e.get("security_protocol", 0)) for e in entry["endpoints"])
    return BrokerInfo(entry["id"], endpoints, entry.get("rack") if version >= 2 else None)
