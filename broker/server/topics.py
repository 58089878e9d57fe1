"""The topic manager: topics, their partitions, leadership and logs, in one place.

It is the single owner of the broker's view of topics. The truth lives in the
metadata store (:class:`~broker.cluster.ClusterMetadata`); this class keeps the
loop-side copy, creates/deletes the partition logs through the log manager,
hands the partitions this broker holds to the replica layer
(:class:`~broker.replica.ReplicaManager`, which alone appends to and reads
them) and maps topic configs onto :class:`~broker.log.LogConfig`.

Topic names are checked as Kafka checks them: 1-249 characters of
``[a-zA-Z0-9._-]``, not ``.`` or ``..``, and no collision with an existing
topic once ``.`` and ``_`` are treated as equal (their metric names would
collide). Replication factor may not exceed the live brokers. Every failure is
a :class:`TopicError` carrying a Kafka error code.

Mutations run one at a time (an asyncio lock); their blocking parts (store
writes with fsync, directory creation and removal) go to an executor. Reads
(``get``, ``partition``) are plain dict lookups for the hot path.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from broker.cluster import PartitionState, StoreUnavailableError, TopicExistsError
from broker.log import KafkaStorageError, LogConfig
from broker.protocol import ErrorCode

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.topics")

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
#: Kafka's internal topics (its ``Topic.isInternal``): the group coordinator's and, for the
#: transactions to come, the transaction coordinator's. They are never deleted (see delete_topic).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicError(Exception):
    """A topic operation failed; ``error_code`` is the Kafka error code."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = int(error_code)
        self.message = message


@dataclass(slots=True)
class PartitionInfo:
    """One partition's metadata as this broker knows it (its replica, if hosted here, is the replica layer's)."""

    topic: str
    partition: int
    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]

    @property
    def offline_replicas(self) -> list[int]:
        return []


@dataclass(slots=True)
class TopicInfo:
    name: str
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)  # overrides only

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def validate_topic_name(name: str | None) -> None:
    """Raise TopicError(INVALID_TOPIC_EXCEPTION) unless ``name`` is a legal Kafka topic name."""
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is {len(name)} characters, more than {MAX_NAME_LENGTH}"
        )
    if not _LEGAL.match(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} is illegal: only ASCII alphanumerics, '.', '_' and '-' are allowed",
        )


def _check_assignment(assignment: Mapping[int, list[int]], live: list[int], factor: int) -> None:
    """INVALID_REPLICA_ASSIGNMENT unless every partition names ``factor`` distinct live brokers."""
    for p, replicas in assignment.items():
        if not replicas or len(set(replicas)) != len(replicas):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"partition {p} has an empty or duplicated replica list")
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {p} names unknown brokers {unknown}")
        if len(replicas) != factor:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"partition {p} has {len(replicas)} replicas; every partition must have {factor}")


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


class TopicManager:
    """See the module docstring."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.topics: dict[str, TopicInfo] = {}
        self._lock = asyncio.Lock()
        self._creating: dict[str, asyncio.Future] = {}

    # -- reads (hot path) -----------------------------------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(partition)

    def _existing(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return info

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The broker's log defaults with a topic's overrides; TopicError(INVALID_CONFIG) if bad."""
        try:
            return self.broker.default_log_config.with_overrides(dict(overrides))
        except (ValueError, TypeError) as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    async def _write(self, fn, *args):
        """Run blocking metadata work; a store out of reach is REQUEST_TIMED_OUT, which clients retry."""
        try:
            return await self.broker.run_blocking(fn, *args)
        except StoreUnavailableError as exc:
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from None

    # -- startup (blocking, before the loop serves) ----------------------------------------
    def load(self) -> None:
        """Read every topic from the store and open (or create) the logs of our partitions."""
        metadata = self.broker.metadata
        log_manager = self.broker.log_manager
        for topic in metadata.pending_deletions():
            log.info("finishing the deletion of topic %s", topic)
            self._delete_files_and_nodes(topic, metadata.topic_assignment(topic) or {})
        for name in metadata.topics():
            assignment = metadata.topic_assignment(name) or {}
            overrides = metadata.topic_config(name)
            info = TopicInfo(name, config=overrides)
            cfg = self.log_config(overrides) if overrides else self.broker.default_log_config
            opened = []
            for p, replicas in sorted(assignment.items()):
                state = metadata.partition_state(name, p) or PartitionState(replicas[0], 0, tuple(replicas))
                pinfo = PartitionInfo(name, p, list(replicas), state.leader, state.leader_epoch, list(state.isr))
                plog = None
                if self.broker.broker_id in replicas:
                    try:
                        plog = log_manager.get_log((name, p)) or log_manager.create_missing_log(name, p, cfg)
                    except KafkaStorageError as exc:
                        log.error("%s-%d is offline: %s", name, p, exc)
                        self.broker.replicas.mark_offline([(name, p)])
                    else:
                        if overrides:
                            plog.update_config(cfg)
                opened.append((pinfo, plog))
            self._publish(info, opened)
            self.topics[name] = info
        known = {(t, p) for t, info in self.topics.items() for p in info.partitions}
        for key in list(log_manager.logs()):
            if key not in known:
                log.warning("log %s-%d on disk belongs to no topic in the metadata store; not serving it", *key)

    # -- creation -------------------------------------------------------------------------------
    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: Mapping[int, list[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo | None:
        """Create a topic (Kafka's CreateTopics rules); -1 means the broker default.

        Returns the new TopicInfo (None when ``validate_only``); raises TopicError.
        """
        async with self._lock:
            return await self._create_locked(name, num_partitions, replication_factor, assignments, configs,
                                             validate_only)

    async def _create_locked(self, name, num_partitions, replication_factor, assignments, configs, validate_only):
        cfg_broker = self.broker.config
        validate_topic_name(name)
        if name in self.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        key = _collision_key(name)
        for other in self.topics:
            if _collision_key(other) == key:
                raise TopicError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"topic {name!r} collides with existing topic {other!r} ('.' and '_' are equivalent)",
                )
        live = sorted(self.broker.live_brokers())
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "give either replica assignments or partitions and replication factor")
            assignment = {int(p): [int(b) for b in r] for p, r in assignments.items()}
            if sorted(assignment) != list(range(len(assignment))):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
            _check_assignment(assignment, live, len(assignment[0]))
        else:
            partitions = cfg_broker.num_partitions if num_partitions == -1 else num_partitions
            factor = cfg_broker.default_replication_factor if replication_factor == -1 else replication_factor
            if partitions <= 0:
                raise TopicError(ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, got {partitions}")
            if factor <= 0:
                raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"replication factor must be positive, got {factor}")
            if factor > len(live):
                raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"replication factor: {factor} larger than available brokers: {len(live)}")
            assignment = self._assign(range(partitions), factor, live)
        overrides = {str(k): str(v) for k, v in (configs or {}).items() if v is not None}
        cfg = self.log_config(overrides)
        if validate_only:
            return None
        epoch = self.broker.controller_epoch
        states = {p: PartitionState(replicas[0], 0, tuple(replicas), epoch) for p, replicas in assignment.items()}
        info = TopicInfo(name, config=overrides)
        self._publish(info, await self._write(self._create_blocking, name, assignment, overrides, states, cfg))
        self.topics[name] = info
        log.info("created topic %s with %d partition(s)", name, len(assignment))
        return info

    def _assign(self, partitions, factor: int, live: list[int]) -> dict[int, list[int]]:
        """Round-robin replica assignment starting at the partition index (Kafka's simple form)."""
        n = len(live)
        return {p: [live[(p + i) % n] for i in range(factor)] for p in partitions}

    def _create_blocking(self, name, assignment, overrides, states, cfg) -> list:
        try:
            self.broker.metadata.create_topic(name, assignment, overrides, states)
        except TopicExistsError as exc:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, str(exc)) from None
        return self._open_partitions(name, assignment, states, cfg)

    def _open_partitions(self, name, assignment, states, cfg) -> list:
        """Make the logs of the new partitions this broker holds (blocking); ``[(PartitionInfo, log or None)]``."""
        log_manager = self.broker.log_manager
        opened = []
        for p, state in sorted(states.items()):
            replicas = assignment[p]
            pinfo = PartitionInfo(name, p, list(replicas), state.leader, state.leader_epoch, list(state.isr))
            plog = None
            if self.broker.broker_id in replicas:
                plog = log_manager.get_log((name, p)) or log_manager.create_log(name, p, cfg)
            opened.append((pinfo, plog))
        return opened

    def _publish(self, info: TopicInfo, opened: list) -> None:
        """Add partitions to ``info``, handing those this broker holds to the replica layer (single node: as leader)."""
        for pinfo, plog in opened:
            if plog is not None:
                self.broker.replicas.make_leader(pinfo.topic, pinfo.partition, plog, leader_epoch=pinfo.leader_epoch,
                                                 isr=pinfo.isr, replicas=pinfo.replicas)
            info.partitions[pinfo.partition] = pinfo

    async def auto_create(self, name: str) -> TopicInfo:
        """Create ``name`` with broker defaults, or wait for a creation already under way."""
        existing = self.topics.get(name)
        if existing is not None:
            return existing
        pending = self._creating.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self.create_topic(name))
            self._creating[name] = pending

            def done(future: asyncio.Future) -> None:
                self._creating.pop(name, None)
                if not future.cancelled():
                    future.exception()  # seen: every waiter may have gone (connections closed)

            pending.add_done_callback(done)
        try:
            return await asyncio.shield(pending)
        except TopicError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and name in self.topics:
                return self.topics[name]
            raise

    # -- partitions, configs, deletion (used by the admin APIs) ------------------------------------
    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None = None,
                                validate_only: bool = False) -> None:
        """Grow ``name`` to ``count`` partitions (INVALID_PARTITIONS if not larger)."""
        async with self._lock:
            info = self._existing(name)
            current = len(info.partitions)
            if count <= current:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 f"topic {name!r} has {current} partitions; {count} is not more")
            live = sorted(self.broker.live_brokers())
            factor = len(info.partitions[0].replicas)
            new_ids = range(current, count)
            if assignments:
                if len(assignments) != len(new_ids):
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"{len(assignments)} assignments for {len(new_ids)} new partitions")
                new = {p: [int(b) for b in r] for p, r in zip(new_ids, assignments)}
                _check_assignment(new, live, factor)
            else:
                if factor > len(live):
                    raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                     f"replication factor {factor} larger than available brokers {len(live)}")
                new = self._assign(new_ids, factor, live)
            if validate_only:
                return
            full = {p: pi.replicas for p, pi in info.partitions.items()} | new
            states = {p: PartitionState(r[0], 0, tuple(r), self.broker.controller_epoch) for p, r in new.items()}
            cfg = self.log_config(info.config)

            def blocking():
                self.broker.metadata.add_partitions(name, full, states)
                return self._open_partitions(name, full, states, cfg)

            self._publish(info, await self._write(blocking))

    async def alter_topic_config(self, name: str, overrides: Mapping[str, str], validate_only: bool = False) -> None:
        """Replace a topic's config overrides and apply them to its logs at once."""
        await self.update_topic_config(name, lambda _current: overrides, validate_only)

    async def delete_topic(self, name: str) -> None:
        """Delete a topic: mark, remove the logs, remove the metadata (resumed at restart if cut short).

        An internal topic is refused by name, present or not: INVALID_TOPIC_EXCEPTION,
        the code Kafka gives the other operations it refuses on internal topics
        (appends, DeleteRecords). Deleting ``__consumer_offsets`` would lose every
        group's committed offsets.
        """
        if name in INTERNAL_TOPICS:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {name} is internal and cannot be deleted")
        async with self._lock:
            info = self._existing(name)
            if not self.broker.config.delete_topic_enable:
                raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "topic deletion is disabled")
            del self.topics[name]
            for p in info.partitions:
                self.broker.replicas.remove_partition(name, p)
            assignment = {p: pi.replicas for p, pi in info.partitions.items()}
            await self._write(self._delete_blocking, name, assignment)
            log.info("deleted topic %s", name)

    def _delete_blocking(self, name: str, assignment: dict[int, list[int]]) -> None:
        self.broker.metadata.mark_topic_deletion(name)
        self._delete_files_and_nodes(name, assignment)

    def _delete_files_and_nodes(self, name: str, assignment: dict[int, list[int]]) -> None:
        log_manager = self.broker.log_manager
        partitions = set(assignment) | {p for (t, p) in log_manager.logs() if t == name}
        for p in sorted(partitions):
            if log_manager.get_log((name, p)) is not None:
                log_manager.delete_log(name, p)
        self.broker.metadata.complete_topic_deletion(name)

    # -- admin API additions (owned by the admin APIs; keep below this line) -------------------------
    async def update_topic_config(self, name: str, change, validate_only: bool = False) -> dict[str, str]:
        """Replace a topic's overrides by ``change(current_overrides)``, atomically with other mutations.

        ``change`` gets a copy of the current overrides and returns the new ones
        (or raises TopicError). The result is validated (INVALID_CONFIG), stored,
        and applied to the topic's logs at once unless ``validate_only``.
        Returns the new overrides.
        """
        async with self._lock:
            info = self._existing(name)
            overrides = {str(k): str(v) for k, v in change(dict(info.config)).items()}
            cfg = self.log_config(overrides)
            if validate_only:
                return overrides
            await self._write(self.broker.metadata.set_topic_config, name, overrides)
            info.config = overrides
            for p in info.partitions:
                partition = self.broker.replicas.partition(name, p)
                if partition is not None:
                    partition.update_config(cfg)
            return overrides
