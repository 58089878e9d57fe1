"""Cluster view shared by the producer, consumer and admin client: the
bootstrap list, one reused connection per broker, and the metadata cache
(brokers, topics, partition leaders, controller).

Owned by one event loop; not thread-safe. Metadata is refreshed on demand
(``refresh_metadata``) and whenever a caller saw a stale-metadata error
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
a lost connection) and called ``request_update``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Iterable

from ._config import CommonConfig
from ._connection import Api, BrokerConnection
from ._types import BrokerMetadata, PartitionMetadata, TopicMetadata, TopicPartition
from .errors import (
    AuthenticationError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RetriableError,
    error_for_code,
)

log = logging.getLogger("broker.client")
TOPIC_AUTHORIZATION_FAILED = 29

COORDINATOR_GROUP = 0


class Cluster:
    def __init__(self, config: CommonConfig) -> None:
        self.config = config
        self.bootstrap = config.bootstrap_list()
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        #: Topics the last Metadata answered TOPIC_AUTHORIZATION_FAILED (no DESCRIBE ACL): an error, not a wait
        self.unauthorized_topics: set[str] = set()
        self._partition_lists: dict[str, tuple[list[int], list[int]]] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self._conns: dict[int, BrokerConnection] = {}
        self._fetch_conns: dict[int, BrokerConnection] = {}  # the consumer's Fetches: see fetch_connection
        self._connecting: dict[int, asyncio.Task] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._metadata_lock: asyncio.Lock | None = None
        self._last_refresh = 0.0
        self._need_update = True
        self._watched: set[str] = set()
        self._all_topics = False
        self.closed = False

    # -- connections ------------------------------------------------------
    def _new_conn(self, host: str, port: int, node_id: int) -> BrokerConnection:
        c = self.config
        return BrokerConnection(
            host, port, node_id=node_id, client_id=c.client_id,
            request_timeout_ms=c.request_timeout_ms,
            connect_timeout_ms=c.socket_connection_setup_timeout_ms,
            max_frame_bytes=c.max_frame_bytes, ssl_context=c.ssl_context, sasl=c.sasl,
        )

    def throttled_for(self, node_id: int) -> float:
        """Seconds the broker ``node_id`` still asks us to wait (a quota's throttle; 0 when none)."""
        conn = self._conns.get(node_id)
        if conn is None:
            return 0.0
        return max(0.0, conn.throttled_until - asyncio.get_running_loop().time())

    async def connection(self, node_id: int) -> BrokerConnection:
        """The live connection to broker ``node_id``, opened on first use."""
        if self.closed:
            raise IllegalStateError("client is closed")
        conn = self._conns.get(node_id)
        if conn is not None and conn.usable:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            broker = await self._known_broker(node_id)
            task = asyncio.ensure_future(self._open(broker))
            self._connecting[node_id] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._connecting.pop(node_id, None)

    async def _known_broker(self, node_id: int):
        """The metadata of broker ``node_id``, refreshing the cluster metadata once if unknown."""
        broker = self.brokers.get(node_id)
        if broker is None:
            await self.refresh_metadata()
            broker = self.brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return broker

    async def fetch_connection(self, node_id: int) -> BrokerConnection:
        """A connection to ``node_id`` that carries only Fetch requests.

        A Fetch may wait ``fetch_max_wait_ms`` in the broker, and a broker answers
        a connection's requests in order; on its own connection a long poll never
        delays commits or offset lookups, and it can be abandoned
        (:meth:`drop_fetch_connection`) without failing them.
        """
        conn = self._fetch_conns.get(node_id)
        if conn is not None and conn.usable:
            return conn
        if self.closed:
            raise IllegalStateError("client is closed")
        broker = await self._known_broker(node_id)
        conn = self._new_conn(broker.host, broker.port, broker.node_id)
        await conn.connect()
        old = self._fetch_conns.get(node_id)
        if old is not None and old.usable:  # opened concurrently: keep one
            conn.close()
            return old
        if self.closed:
            conn.close()
            raise IllegalStateError("client is closed")
        if old is not None:
            old.retire()  # its SASL session is nearly over
        self._fetch_conns[node_id] = conn
        return conn

    def drop_fetch_connection(self, node_id: int) -> None:
        """Close the Fetch connection to ``node_id``, abandoning the Fetch it carries."""
        conn = self._fetch_conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    async def _open(self, broker: BrokerMetadata) -> BrokerConnection:
        conn = self._new_conn(broker.host, broker.port, broker.node_id)
        await conn.connect()
        old = self._conns.get(broker.node_id)
        if old is not None:
            old.retire()  # its SASL session is nearly over
        self._conns[broker.node_id] = conn
        return conn

    def drop_connection(self, node_id: int) -> None:
        """Close the connection to ``node_id`` (its in-flight requests fail); the next
        request opens a new one."""
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    async def any_connection(self) -> BrokerConnection:
        """A connection to any broker: a known live one, else the bootstrap list in random order.
        An authentication failure is raised at once: the same credentials fail at every broker."""
        for conn in self._conns.values():
            if conn.usable:
                return conn
        if self._bootstrap_conn is not None:
            if self._bootstrap_conn.usable:
                return self._bootstrap_conn
            self._bootstrap_conn.retire()
        errors = []
        candidates = [(b.host, b.port) for b in self.brokers.values()] + list(self.bootstrap)
        seen = set()
        for host, port in candidates:
            if (host, port) in seen:
                continue
            seen.add((host, port))
            conn = self._new_conn(host, port, -1)
            try:
                await conn.connect()
            except AuthenticationError:
                raise
            except KafkaError as exc:
                errors.append(str(exc))
                continue
            self._bootstrap_conn = conn
            return conn
        raise KafkaConnectionError("no broker reachable: " + "; ".join(errors))

    async def request(self, node_id: int | None, api_key: int, body: dict[str, Any], **kw) -> dict[str, Any]:
        """Send to ``node_id`` (None: any broker) and return the response body.
        A failed connection marks metadata stale and raises KafkaConnectionError."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        try:
            return await conn.request(api_key, body, **kw)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.request_update()
            raise

    # -- metadata ---------------------------------------------------------
    def request_update(self) -> None:
        self._need_update = True

    def watch(self, topics: Iterable[str]) -> None:
        """Topics whose metadata every refresh should include."""
        self._watched.update(topics)

    def stale(self) -> bool:
        age = time.monotonic() - self._last_refresh
        return self._need_update or age * 1000 > self.config.metadata_max_age_ms

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *, all_topics: bool = False,
                               allow_auto_topic_creation: bool = False) -> None:
        """Fetch metadata for ``topics`` (plus watched topics), or for every topic."""
        if self._metadata_lock is None:
            self._metadata_lock = asyncio.Lock()
        async with self._metadata_lock:
            wanted = None if (all_topics or self._all_topics) else sorted(self._watched | set(topics or ()))
            body = {
                "topics": None if wanted is None else [{"name": t} for t in wanted],
                "allow_auto_topic_creation": allow_auto_topic_creation,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            }
            conn = await self.any_connection()
            if wanted is not None and not wanted and conn.version(Api.METADATA) < 1:
                return
            try:
                resp = await conn.request(Api.METADATA, body)
            except (KafkaConnectionError, KafkaTimeoutError):
                conn.close()
                conn = await self.any_connection()
                resp = await conn.request(Api.METADATA, body)
            self._apply_metadata(resp, full=wanted is None)

    def _apply_metadata(self, resp: dict[str, Any], full: bool) -> None:
        brokers = {}
        for b in resp["brokers"]:
            brokers[b["node_id"]] = BrokerMetadata(b["node_id"], b["host"], b["port"], b.get("rack"))
        for conns in (self._conns, self._fetch_conns):
            for node_id, conn in list(conns.items()):
                new = brokers.get(node_id)
                if new is None or (new.host, new.port) != (conn.host, conn.port):
                    conn.close()
                    del conns[node_id]
        self.brokers = brokers
        self.controller_id = resp.get("controller_id", -1)
        self.cluster_id = resp.get("cluster_id")
        topics = {} if full else dict(self.topics)
        for t in resp["topics"]:
            name = t["name"]
            if t["error_code"] == TOPIC_AUTHORIZATION_FAILED:
                self.unauthorized_topics.add(name)
            else:
                self.unauthorized_topics.discard(name)
            if t["error_code"]:
                topics.pop(name, None)
                if t["error_code"] not in (3, 5):  # UNKNOWN_TOPIC / LEADER_NOT_AVAILABLE: stay unknown
                    log.debug("metadata error %s for topic %s", t["error_code"], name)
                if t["error_code"] == 5:
                    self._need_update = True
                continue
            parts = {}
            for p in t["partitions"]:
                pm = PartitionMetadata(
                    name, p["partition_index"], p["leader_id"], p.get("leader_epoch", -1),
                    tuple(p["replica_nodes"]), tuple(p["isr_nodes"]), tuple(p.get("offline_replicas", ())),
                    p["error_code"],
                )
                parts[pm.partition] = pm
            topics[name] = TopicMetadata(name, parts, t.get("is_internal", False), t.get("topic_id"))
        self.topics = topics
        self._partition_lists: dict[str, tuple[list[int], list[int]]] = {}
        self._last_refresh = time.monotonic()
        self._need_update = any(
            p.leader < 0 for tm in topics.values() for p in tm.partitions.values()
        )

    async def ensure_topics(self, topics: Iterable[str], timeout_ms: int | None = None, *,
                            allow_auto_topic_creation: bool = False) -> None:
        """Refresh until every topic in ``topics`` is known with leaders, or time out
        with UnknownTopicOrPartitionError.

        With ``allow_auto_topic_creation`` (the producer, as Kafka's Java client
        does) the Metadata requests let a broker with ``auto.create.topics.enable``
        create missing topics; this waits for them to appear.
        """
        topics = set(topics)
        self.watch(topics)
        timeout_ms = timeout_ms or self.config.request_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            missing = [t for t in topics if t not in self.topics]
            if not missing and not self.stale():
                return
            await self.refresh_metadata(topics, allow_auto_topic_creation=allow_auto_topic_creation)
            missing = [t for t in topics if t not in self.topics]
            if not missing:
                return
            refused = sorted(t for t in missing if t in self.unauthorized_topics)
            if refused:  # waiting would not help (Kafka's clients raise TopicAuthorizationException)
                raise error_for_code(TOPIC_AUTHORIZATION_FAILED, f"not authorized to access topic(s) "
                                                                 f"{', '.join(refused)}")
            if time.monotonic() >= deadline:
                names = ", ".join(sorted(missing))
                if allow_auto_topic_creation:
                    raise error_for_code(3, f"topic(s) {names} not present in metadata after {timeout_ms} ms "
                                            "(not found, and the broker did not create them)")
                raise error_for_code(3, f"topic(s) {names} not found")
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    def partitions_for(self, topic: str) -> list[int]:
        """Sorted partition indexes of ``topic`` (empty if unknown). Do not modify the list."""
        cached = self._partition_lists.get(topic)
        if cached is None:
            tm = self.topics.get(topic)
            if tm is None:
                return []
            cached = self._partition_lists[topic] = (
                sorted(tm.partitions), sorted(p for p, pm in tm.partitions.items() if pm.leader >= 0))
        return cached[0]

    def available_partitions(self, topic: str) -> list[int]:
        """Sorted indexes of the partitions of ``topic`` that have a leader. Do not modify the list."""
        self.partitions_for(topic)
        cached = self._partition_lists.get(topic)
        return cached[1] if cached else []

    def leader_for(self, tp: TopicPartition) -> int:
        tm = self.topics.get(tp.topic)
        if tm is None:
            return -1
        pm = tm.partitions.get(tp.partition)
        return -1 if pm is None else pm.leader

    def leader_epoch(self, tp: TopicPartition) -> int:
        tm = self.topics.get(tp.topic)
        pm = tm.partitions.get(tp.partition) if tm else None
        return -1 if pm is None else pm.leader_epoch

    # -- coordinators -----------------------------------------------------
    async def find_coordinator(self, key: str, key_type: int = COORDINATOR_GROUP) -> int:
        """Node id of the coordinator for group ``key`` (FindCoordinator), retrying while unavailable."""
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        while True:
            resp = await self.request(None, Api.FIND_COORDINATOR, {"key": key, "key_type": key_type})
            code = resp["error_code"]
            if code == 0:
                node = resp["node_id"]
                known = self.brokers.get(node)
                if known is None or (known.host, known.port) != (resp["host"], resp["port"]):
                    self.brokers[node] = BrokerMetadata(node, resp["host"], resp["port"])
                return node
            err = error_for_code(code, resp.get("error_message"), context="FindCoordinator")
            if not isinstance(err, RetriableError) or time.monotonic() >= deadline:
                raise err
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    async def close(self) -> None:
        self.closed = True
        for task in self._connecting.values():
            task.cancel()
        for conn in [*self._conns.values(), *self._fetch_conns.values()]:
            conn.close()
        self._conns.clear()
        self._fetch_conns.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()


def jitter(ms: float) -> float:
    """Seconds to sleep for a backoff of ``ms`` with +-20% jitter."""
    return ms * random.uniform(0.8, 1.2) / 1000
