"""Topic admin operations, routed through the metadata store and the controller, as Kafka's ``AdminZkClient``.

Reads come from the metadata cache (:mod:`broker.server.metadata_cache`,
which only the controller's UpdateMetadata fills), so every broker answers
alike. Mutations write the store and then wait, up to the request's timeout,
until the controller has acted and told this broker's cache:

* creation (Kafka's rules below) writes ``/config/topics/<t>`` and
  ``/brokers/topics/<t>`` (the assignment, never partition states: those are
  the controller's) and waits until the cache has a leader for every
  partition;
* partition addition rewrites ``/brokers/topics/<t>`` and waits for the new
  partitions' leaders;
* deletion writes ``/admin/delete_topics/<t>`` and waits until the topic has
  left the cache (the controller announces that once every replica deleted
  its log and the topic's nodes are gone, so the name can be used again);
* a config change writes ``/config/topics/<t>`` with a
  ``/config/changes/config_change_N`` notification; every broker (this one
  too) watches ``/config/changes`` and applies the new config to the logs it
  holds (:meth:`TopicManager.start`), and the notifications of the other
  entities to their owners (dynamic broker configs, client quotas, group
  configs).

A wait that times out is REQUEST_TIMED_OUT; what was written stays, and the
controller completes it when it can, as in Kafka.

Topic names are checked as Kafka checks them: 1-249 characters of
``[a-zA-Z0-9._-]``, not ``.`` or ``..``, and no collision with an existing
topic once ``.`` and ``_`` are treated as equal (their metric names would
collide). Replication factor may not exceed the live brokers. Replicas are
placed by Kafka's algorithm (:mod:`broker.cluster.assignment`: round-robin
from a random start, rack-aware when every live broker has a ``broker.rack``;
added partitions as Kafka's ``addPartitions``). Every failure is a
:class:`TopicError` carrying a Kafka error code.

Store I/O runs in an executor; reads (``get``, ``partition``) are dict lookups
for the hot path. Loop-only.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from broker.cluster import StoreUnavailableError, TopicExistsError
from broker.cluster.assignment import AssignmentError, BrokerRack, assign_new_partitions, assign_replicas_to_brokers
from broker.cluster.znodes import ConfigChangeNotificationZNode
from broker.topic_ids import format_topic_id
from broker.log import KafkaStorageError, LogConfig
from broker.protocol import ErrorCode
from broker.protocol.schema import ZERO_UUID
from broker.server.metadata_cache import INTERNAL_TOPICS, PartitionMeta
from broker.server.quotas import QuotaManager

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.topics")

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
#: How long admin operations wait for the controller when the caller gives no timeout.
DEFAULT_TIMEOUT_MS = 30000


class TopicError(Exception):
    """A topic operation failed; ``error_code`` is the Kafka error code."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = int(error_code)
        self.message = message


async def store_call(broker: "Broker", fn, *args):
    """Run blocking metadata work in an executor; a store out of reach is TopicError(REQUEST_TIMED_OUT), which
    clients retry (the config and topic changes a request makes)."""
    try:
        return await broker.run_blocking(fn, *args)
    except StoreUnavailableError as exc:
        raise TopicError(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from None


@dataclass(slots=True)
class TopicInfo:
    """A topic as this broker knows it: its partitions (the metadata cache's) and its config overrides."""

    name: str
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
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


def _timed_out(what: str, timeout_ms: int) -> TopicError:
    return TopicError(ErrorCode.REQUEST_TIMED_OUT,
                      f"{what} did not complete within {timeout_ms} ms; the controller completes it when it can")


class TopicManager:
    """See the module docstring."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.cache = broker.metadata_cache
        self._infos: dict[str, TopicInfo] = {}
        #: topic config overrides as last read from the store
        self._configs: dict[str, dict[str, str]] = {}
        self._config_reads: set[str] = set()
        self._lock = asyncio.Lock()
        self._creating: dict[str, asyncio.Future] = {}
        self._last_config_change = -1
        #: the ids of topics this broker created, until the controller's UpdateMetadata names them
        self._created_ids: dict[str, uuid.UUID] = {}

    # -- reads (hot path) -----------------------------------------------------------------
    @property
    def topics(self) -> dict[str, TopicInfo]:
        """Every topic the metadata cache knows, by name."""
        return {name: self.get(name) for name in self.cache.topics()}

    def get(self, name: str) -> TopicInfo | None:
        meta = self.cache.topic(name)
        if meta is None:
            self._infos.pop(name, None)
            return None
        info = self._infos.get(name)
        if info is None or info.partitions is not meta.partitions:
            config = self._configs.get(name)
            if config is None:
                self._read_config_later(name)
            info = self._infos[name] = TopicInfo(name, meta.partitions, dict(config or {}))
        return info

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        return self.cache.partition(topic, partition)

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id (KIP-516); the zero uuid while neither the controller nor this broker named one."""
        meta = self.cache.topic(name)
        if meta is not None and meta.topic_id != ZERO_UUID:
            self._created_ids.pop(name, None)
            return meta.topic_id
        return self._created_ids.get(name, ZERO_UUID)

    def _existing(self, name: str) -> TopicInfo:
        info = self.get(name)
        if info is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return info

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The broker's log defaults with a topic's overrides; TopicError(INVALID_CONFIG) if bad."""
        try:
            return self.broker.default_log_config.with_overrides(dict(overrides))
        except (ValueError, TypeError) as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def _live(self) -> list[int]:
        return [b.id for b in self.cache.alive_brokers()]

    def _brokers(self) -> list[BrokerRack]:
        return [BrokerRack(b.id, b.rack) for b in self.cache.alive_brokers()]

    async def _write(self, fn, *args):
        return await store_call(self.broker, fn, *args)

    # -- startup (blocking, before the loop serves) ----------------------------------------
    def load(self) -> None:
        """Read every topic's config overrides from the store; account for the logs of lost log dirs.

        A partition assigned here whose log no live dir has (a replaced disk)
        gets an empty log, with a warning that its records on this broker are
        lost, or, while a dir is offline (the log may be there), is marked
        offline (:meth:`LogManager.create_missing_log`), before the
        controller's LeaderAndIsr could create it as if it were new.
        """
        metadata = self.broker.metadata
        log_manager = self.broker.log_manager
        pending = set(metadata.pending_deletions())
        for name in metadata.topics():
            self._configs[name] = metadata.topic_config(name)
            if name in pending:
                continue
            for p, replicas in sorted((metadata.topic_assignment(name) or {}).items()):
                if self.broker.broker_id in replicas and log_manager.get_log((name, p)) is None:
                    try:
                        log_manager.create_missing_log(name, p, self.log_config(self._configs[name]))
                    except KafkaStorageError as exc:
                        log.error("%s-%d is offline: %s", name, p, exc)
                        self.broker.replicas.mark_offline([(name, p)])

    def start(self) -> None:
        """On the loop: follow ``/config/changes`` (every notification is applied once, the existing ones too)."""
        self._config_changes()

    # -- creation -------------------------------------------------------------------------------
    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: Mapping[int, list[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> TopicInfo | None:
        """Create a topic (Kafka's CreateTopics rules); -1 means the broker default.

        Returns the new TopicInfo once every partition has a leader (None when
        ``validate_only`` or ``timeout_ms`` <= 0: then it does not wait); raises TopicError.
        Creations on this broker run one at a time, so a second creation of a
        name finds the first one's topic and answers TOPIC_ALREADY_EXISTS.
        """
        async with self._lock:
            return await self._create_locked(name, num_partitions, replication_factor, assignments, configs,
                                             validate_only, timeout_ms)

    async def _create_locked(self, name, num_partitions, replication_factor, assignments, configs, validate_only,
                             timeout_ms):
        cfg_broker = self.broker.config
        validate_topic_name(name)
        if self.cache.topic(name) is not None:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        key = _collision_key(name)
        for other in self.cache.topics():
            if _collision_key(other) == key:
                raise TopicError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"topic {name!r} collides with existing topic {other!r} ('.' and '_' are equivalent)",
                )
        live = sorted(self._live())
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
            try:
                assignment = assign_replicas_to_brokers(self._brokers(), partitions, factor)
            except AssignmentError as exc:
                raise TopicError(exc.error_code, exc.message) from None
        overrides = {str(k): str(v) for k, v in (configs or {}).items() if v is not None}
        self.log_config(overrides)
        if validate_only:
            return None
        try:
            topic_id = await self._write(self.broker.metadata.create_topic, name, assignment, overrides)
        except TopicExistsError as exc:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, str(exc)) from None
        self._configs[name] = overrides
        self._created_ids[name] = topic_id
        log.info("created topic %s with %d partition(s), topic id %s", name, len(assignment),
                 format_topic_id(topic_id))
        if timeout_ms <= 0:
            return None
        if not await self.cache.wait_until(lambda: self.cache.has_leaders(name, len(assignment)), timeout_ms / 1000):
            raise _timed_out(f"creation of topic {name!r}", timeout_ms)
        return self.get(name)

    async def auto_create(self, name: str) -> TopicInfo:
        """Create ``name`` with broker defaults, or wait for a creation already under way.

        LEADER_NOT_AVAILABLE, which clients retry, while this broker knows no live broker: it
        serves before its first UpdateMetadata (as Kafka's listeners do), and the topic may well
        exist then; an attempt to create it would fail with a replication factor error.
        """
        existing = self.get(name)
        if existing is not None:
            return existing
        if not self._live():
            raise TopicError(ErrorCode.LEADER_NOT_AVAILABLE, "this broker has no metadata yet")
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
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                if await self.cache.wait_until(lambda: self.cache.has_leaders(name), DEFAULT_TIMEOUT_MS / 1000):
                    return self.get(name)
            raise

    # -- partitions, configs, deletion (used by the admin APIs) ------------------------------------
    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None = None,
                                validate_only: bool = False, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Grow ``name`` to ``count`` partitions (INVALID_PARTITIONS if not larger)."""
        async with self._lock:
            info = self._existing(name)
            current = len(info.partitions)
            if count <= current:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 f"topic {name!r} has {current} partitions; {count} is not more")
            live = sorted(self._live())
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
                existing = {p: list(pi.replicas) for p, pi in info.partitions.items()}
                try:
                    new = assign_new_partitions(self._brokers(), existing, len(new_ids))
                except AssignmentError as exc:
                    raise TopicError(exc.error_code, exc.message) from None
            if validate_only:
                return
            full = {p: list(pi.replicas) for p, pi in info.partitions.items()} | new
            await self._write(self.broker.metadata.add_partitions, name, full)
        if timeout_ms > 0 and not await self.cache.wait_until(lambda: self.cache.has_leaders(name, count),
                                                              timeout_ms / 1000):
            raise _timed_out(f"addition of partitions to {name!r}", timeout_ms)

    async def alter_topic_config(self, name: str, overrides: Mapping[str, str], validate_only: bool = False) -> None:
        """Replace a topic's config overrides and apply them to its logs at once."""
        await self.update_topic_config(name, lambda _current: overrides, validate_only)

    async def delete_topic(self, name: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Mark a topic for deletion and wait until the controller has deleted it (see the module docstring).

        An internal topic is refused by name, present or not: INVALID_TOPIC_EXCEPTION,
        the code Kafka gives the other operations it refuses on internal topics
        (appends, DeleteRecords). Deleting ``__consumer_offsets`` would lose every
        group's committed offsets.
        """
        if name in INTERNAL_TOPICS:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {name} is internal and cannot be deleted")
        self._existing(name)
        if not self.broker.config.delete_topic_enable:
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "topic deletion is disabled")
        await self._write(self.broker.metadata.mark_topic_deletion, name)
        if timeout_ms > 0 and not await self.cache.wait_until(lambda: self.cache.topic(name) is None,
                                                              timeout_ms / 1000):
            raise _timed_out(f"deletion of topic {name!r}", timeout_ms)
        self._configs.pop(name, None)
        self._created_ids.pop(name, None)
        log.info("deleted topic %s", name)

    async def update_topic_config(self, name: str, change, validate_only: bool = False) -> dict[str, str]:
        """Replace a topic's overrides by ``change(current_overrides)``, atomically with other mutations.

        ``change`` gets a copy of the current overrides and returns the new ones
        (or raises TopicError). The result is validated (INVALID_CONFIG), stored
        with a change notification for every broker, and applied to this
        broker's logs at once unless ``validate_only``. Returns the new overrides.
        """
        async with self._lock:
            self._existing(name)
            current = await self._write(self.broker.metadata.topic_config, name)
            overrides = {str(k): str(v) for k, v in change(dict(current)).items()}
            cfg = self.log_config(overrides)
            if validate_only:
                return overrides
            await self._write(self.broker.metadata.set_topic_config, name, overrides)
            self._apply_config(name, overrides, cfg)
            return overrides

    # -- topic configs --------------------------------------------------------------------------
    def _apply_config(self, name: str, overrides: dict[str, str], cfg: LogConfig) -> None:
        self._configs[name] = overrides
        info = self._infos.get(name)
        if info is not None:
            info.config = dict(overrides)
        for partition in self.broker.replicas.partitions():
            if partition.topic == name:
                partition.update_config(cfg)

    def _read_config_later(self, name: str) -> None:
        """Read the config of a topic this broker learnt of from the controller (made on another broker)."""
        if name in self._config_reads:
            return
        self._config_reads.add(name)

        async def read():
            try:
                config = await self.broker.run_blocking(self.broker.metadata.topic_config, name)
            except Exception as exc:  # the store out of reach: the next get() tries again
                log.warning("cannot read the config of topic %s: %s", name, exc)
                return
            finally:
                self._config_reads.discard(name)
            self._configs.setdefault(name, config)
            info = self._infos.get(name)
            if info is not None:
                info.config = dict(self._configs[name])
        asyncio.get_running_loop().create_task(read())

    def _config_changes(self) -> None:
        """Read the notifications newer than the last applied (watching for more), apply their configs."""
        loop = self.broker.loop

        def read():
            metadata = self.broker.metadata
            watch = lambda _event: loop.call_soon_threadsafe(self._config_changes)  # noqa: E731
            names = metadata.store.get_children(ConfigChangeNotificationZNode.path(), watch)
            changed, brokers_changed, quotas, ips, groups, subscriptions = [], False, [], [], [], []
            for child in names:
                sequence = int(child[len(ConfigChangeNotificationZNode.PREFIX):])
                if sequence <= self._last_config_change:
                    continue
                found = metadata.store.get_or_none(f"{ConfigChangeNotificationZNode.path()}/{child}")
                if found is not None:
                    entity_type, _, entity = ConfigChangeNotificationZNode.decode(found[0]).partition("/")
                    if entity_type == "topics":
                        changed.append((entity, metadata.topic_config(entity)))
                    elif entity_type == "brokers":
                        brokers_changed = True
                    elif entity_type in ("users", "clients"):  # client quotas (broker.server.quotas)
                        found = QuotaManager.read_entity(metadata, f"{entity_type}/{entity}")
                        if found is not None:
                            quotas.append(found)
                    elif entity_type == "ips":  # connection_creation_rate per address (broker.server.quotas)
                        found = QuotaManager.read_ip(metadata, f"ips/{entity}")
                        if found is not None:
                            ips.append(found)
                    elif entity_type == "groups":  # group configs (broker.server.group_configs)
                        groups.append(self.broker.group_configs.read(entity))
                    elif entity_type == "client-metrics":  # subscriptions (broker.server.client_metrics)
                        subscriptions.append(self.broker.client_metrics.read(entity))
                self._last_config_change = max(self._last_config_change, sequence)
            if brokers_changed:  # dynamic broker configs (broker.server.dynamic_config)
                self.broker.dynamic_config.load()
            return changed, brokers_changed, quotas, ips, groups, subscriptions

        async def apply():
            try:
                changed, brokers_changed, quotas, ips, groups, subscriptions = await self.broker.run_blocking(read)
            except Exception as exc:
                log.warning("cannot read config change notifications (%s); again in 1 s", exc)
                loop.call_later(1.0, self._config_changes)
                return
            if brokers_changed:
                self.broker.dynamic_config.apply()
            for entity, values in quotas:
                self.broker.quotas.apply(entity, values)
            for address, value in ips:
                self.broker.quotas.apply_ip(address, value)
            for group_id, overrides in groups:
                self.broker.group_configs.apply(group_id, overrides)
            for name, configs in subscriptions:
                self.broker.client_metrics.apply(name, configs)
            for name, overrides in changed:
                try:
                    cfg = self.broker.default_log_config.with_overrides(overrides)
                except (ValueError, TypeError) as exc:
                    log.warning("topic %s: ignoring bad stored config (%s)", name, exc)
                    continue
                self._apply_config(name, overrides, cfg)
        loop.create_task(apply())
