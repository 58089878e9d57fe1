"""Consumer positions and fetching.

:class:`SubscriptionState` holds what the consumer reads: the subscription
(topic names, or a pattern with an optional exclude pattern) or a manual
assignment, and per assigned partition its position (the offset of the next
record to return), paused flag and last known high watermark.

:class:`Fetcher` sends Fetch requests through an incremental fetch session with each broker
(KIP-227, :mod:`broker.client._fetch_session`: a request names only the partitions whose position
changed, and an answer only those with news), at most one in flight per leader,
only for partitions with a position, not paused, and no records waiting in
the buffer. It decodes batches with ``broker.records`` into ConsumerRecords,
skips control batches and records before the fetch offset (a compressed batch
may start earlier), and turns stale-metadata errors into a metadata refresh.
With ``isolation_level="read_committed"`` the broker answers up to the last
stable offset with the aborted transactions in range, and the batches of those
transactions are dropped here, as Kafka's consumer does.
Positions advance only when ``poll`` hands records to the caller, so a seek
simply drops the buffered records of that partition.
Fetch from the closest replica (KIP-392): with ``client_rack`` set the
consumer sends its rack; a leader that answers with ``preferred_read_replica``
sends that partition's next fetches to that follower, as Kafka's consumer
does, until ``metadata_max_age_ms`` passes, the follower answers an error or
cannot be reached, or it leaves the metadata; then the leader again.

Both are owned by the consumer's event loop and not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from broker.records.fetched import iter_fetched

from ._cluster import Cluster
from ._config import ConsumerConfig
from ._connection import Api
from ._fetch_session import FetchSessionHandler
from ._serde import bytes_deserializer
from ._types import ConsumerRecord, TopicPartition
from .errors import AuthenticationError, KafkaError, NoOffsetForPartitionError, error_for_code

log = logging.getLogger("broker.client")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_STALE_METADATA = {3, 5, 6, 74, 75}
OFFSET_OUT_OF_RANGE = 1


@dataclass
class PartitionState:
    position: int | None = None
    paused: bool = False
    reset_to: str | None = None  # pending reset strategy when position is None
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    #: KIP-392: the follower the leader sent us to, until ``preferred_until`` (monotonic seconds) or an error
    preferred_read_replica: int = -1
    preferred_until: float = 0.0

    def read_replica(self, leader: int, known: Callable[[int], bool]) -> int:
        """The node to fetch from: the preferred replica while it is valid and known, else the leader."""
        replica = self.preferred_read_replica
        if replica >= 0 and (time.monotonic() >= self.preferred_until or not known(replica)):
            replica = self.preferred_read_replica = -1
        return leader if replica < 0 else replica


@dataclass
class SubscriptionState:
    topics: set[str] = field(default_factory=set)
    pattern: re.Pattern | None = None
    exclude: re.Pattern | None = None
    manual: bool = False
    assignment: dict[TopicPartition, PartitionState] = field(default_factory=dict)

    @property
    def subscribed(self) -> bool:
        return bool(self.topics) or self.pattern is not None

    def match(self, topic: str) -> bool:
        if self.pattern is None:
            return topic in self.topics
        if not self.pattern.fullmatch(topic) and not self.pattern.match(topic):
            return False
        return not (self.exclude is not None and self.exclude.fullmatch(topic))

    def assign(self, partitions) -> None:
        """Replace the assignment, keeping state of partitions that stay."""
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in partitions}

    def need_position(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.position is None]


class Fetcher:
    def __init__(self, cluster: Cluster, config: ConsumerConfig, subs: SubscriptionState,
                 key_deserializer: Callable, value_deserializer: Callable) -> None:
        self.cluster = cluster
        self.config = config
        self.subs = subs
        self.key_de = key_deserializer
        self.value_de = value_deserializer
        self.buffer: dict[TopicPartition, deque[ConsumerRecord]] = {}
        self.in_flight: dict[int, asyncio.Task] = {}
        #: an incremental fetch session with each broker fetched from (KIP-227)
        self._sessions: dict[int, FetchSessionHandler] = {}
        self._fetching: dict[int, frozenset[TopicPartition]] = {}  # partitions of each in-flight Fetch
        self.data_ready = asyncio.Event()
        self.errors: list[KafkaError] = []
        self.isolation = 1 if config.isolation_level == "read_committed" else 0

    # -- offsets ----------------------------------------------------------
    async def list_offsets(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets: ``{tp: timestamp or -2 earliest / -1 latest}`` -> ``{tp: (offset, timestamp)}``.
        Offset is -1 when no record has a timestamp at or after the query."""
        result: dict[TopicPartition, tuple[int, int]] = {}
        pending = dict(timestamps)
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        while pending:
            await self.cluster.ensure_topics({tp.topic for tp in pending})
            by_node: dict[int, dict[TopicPartition, int]] = {}
            for tp, ts in pending.items():
                leader = self.cluster.leader_for(tp)
                if leader < 0:
                    raise error_for_code(3, f"{tp.topic}-{tp.partition} has no leader")
                by_node.setdefault(leader, {})[tp] = ts
            retry = {}
            for node, tps in by_node.items():
                topics: dict[str, list] = {}
                for tp, ts in tps.items():
                    topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "timestamp": ts})
                body = {"replica_id": -1, "isolation_level": self.isolation,
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                resp = await self.cluster.request(node, Api.LIST_OFFSETS, body)
                for t in resp["topics"]:
                    for p in t["partitions"]:
                        tp = TopicPartition(t["name"], p["partition_index"])
                        code = p["error_code"]
                        if code == 0:
                            result[tp] = (p["offset"], p["timestamp"])
                        elif code in _STALE_METADATA and time.monotonic() < deadline:
                            self.cluster.request_update()
                            retry[tp] = tps[tp]
                        else:
                            raise error_for_code(code, context=f"ListOffsets {tp.topic}-{tp.partition}")
            pending = retry
            if pending:
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                await self.cluster.refresh_metadata()
        return result

    async def reset_positions(self, tps: list[TopicPartition], strategy: str | None = None) -> None:
        """Set positions of ``tps`` by ``strategy`` (default auto_offset_reset)."""
        strategy = strategy or self.config.auto_offset_reset
        if strategy == "none":
            raise NoOffsetForPartitionError(tps)
        ts = EARLIEST_TIMESTAMP if strategy == "earliest" else LATEST_TIMESTAMP
        offsets = await self.list_offsets({tp: ts for tp in tps})
        for tp, (offset, _) in offsets.items():
            st = self.subs.assignment.get(tp)
            if st is not None and st.position is None:
                st.position = offset
                st.reset_to = None

    # -- fetching -----------------------------------------------------------
    def drop_buffered(self, tp: TopicPartition) -> None:
        self.buffer.pop(tp, None)

    def abandon_fetches(self, tps=None) -> None:
        """Abandon in-flight Fetches covering any of ``tps`` (all when None).

        Called when positions or the assignment change: the answer to such a
        Fetch would be thrown away, and waiting for it (a long poll of up to
        ``fetch_max_wait_ms``) would delay the Fetch for the new positions. Its
        connection is dropped, so the broker's answer cannot hold up the next one.
        """
        for node, task in list(self.in_flight.items()):
            if tps is None or not self._fetching.get(node, frozenset()).isdisjoint(tps):
                task.cancel()
                del self.in_flight[node]
                self._fetching.pop(node, None)
                self.cluster.drop_fetch_connection(node)

    def has_data(self) -> bool:
        return any(self.buffer.values())

    def fetchable(self) -> dict[int, list[TopicPartition]]:
        by_node: dict[int, list[TopicPartition]] = {}
        for tp, st in self.subs.assignment.items():
            if st.position is None or st.paused or self.buffer.get(tp):
                continue
            leader = self.cluster.leader_for(tp)
            if leader < 0:
                self.cluster.request_update()
                continue
            node = st.read_replica(leader, lambda b: b in self.cluster.brokers)
            if node in self.in_flight:
                continue
            by_node.setdefault(node, []).append(tp)
        return by_node

    def send_fetches(self) -> None:
        """Start a Fetch to every node (a leader, or the preferred read replica) that has fetchable partitions
        and none in flight."""
        for node, tps in self.fetchable().items():
            task = asyncio.ensure_future(self._fetch(node, tps))
            self.in_flight[node] = task
            self._fetching[node] = frozenset(tps)

    async def _fetch(self, node: int, tps: list[TopicPartition]) -> None:
        c = self.config
        positions = {tp: self.subs.assignment[tp].position for tp in tps}
        session = self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = FetchSessionHandler()
        wanted = {(tp.topic, tp.partition): {
            "partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": pos,
            "log_start_offset": -1, "partition_max_bytes": c.max_partition_fetch_bytes,
        } for tp, pos in positions.items()}
        body = {
            "replica_id": -1, "max_wait_ms": c.fetch_max_wait_ms, "min_bytes": c.fetch_min_bytes,
            "max_bytes": c.fetch_max_bytes, "isolation_level": self.isolation,
            # a partition assigned afresh has a new state: the handler then asks for every partition
            **session.build(wanted, {(tp.topic, tp.partition): self.subs.assignment[tp] for tp in tps}),
            "rack_id": c.client_rack,
        }
        me = asyncio.current_task()
        answered = False
        try:
            conn = await self.cluster.fetch_connection(node)
            resp = await conn.request(Api.FETCH, body,
                                      timeout=c.request_timeout_ms / 1000 + c.fetch_max_wait_ms / 1000)
            answered = True
            if session.handle_response(resp):  # else the broker lost the session: a full request next
                self._handle(resp, positions)
        except AuthenticationError as exc:  # not retried: poll raises it
            self.errors.append(exc)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        except KafkaError as exc:
            log.debug("fetch from broker %s failed: %s", node, exc)
            self._forget_preferred(positions)  # a follower out of reach: back to the leader
            self.cluster.request_update()
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a decoding failure must surface, not kill the loop silently
            self.errors.append(exc if isinstance(exc, KafkaError) else KafkaError(str(exc)))
        finally:
            if not answered:  # no answer (or one abandoned): the next request is full and closes the session
                session.failed()
            if self.in_flight.get(node) is me:  # not abandoned and replaced meanwhile
                del self.in_flight[node]
                self._fetching.pop(node, None)
            self.data_ready.set()

    def _forget_preferred(self, tps) -> None:
        for tp in tps:
            st = self.subs.assignment.get(tp)
            if st is not None:
                st.preferred_read_replica = -1

    def _handle(self, resp: dict, positions: dict[TopicPartition, int]) -> None:
        if resp.get("error_code"):
            self._forget_preferred(positions)
            self.cluster.request_update()
            return
        key_de, value_de = self.key_de, self.value_de
        for t in resp["responses"]:
            topic = t["topic"]
            for p in t["partitions"]:
                partition = p["partition_index"]
                tp = TopicPartition(topic, partition)
                st = self.subs.assignment.get(tp)
                fetch_offset = positions.get(tp)
                if st is None or st.position != fetch_offset:
                    continue  # reassigned or seeked meanwhile
                code = p["error_code"]
                if code:
                    st.preferred_read_replica = -1  # as Kafka's consumer: any error sends it back to the leader
                    if code in _STALE_METADATA:
                        self.cluster.request_update()
                    elif code == OFFSET_OUT_OF_RANGE:
                        st.position = None
                        if self.config.auto_offset_reset == "none":
                            self.errors.append(NoOffsetForPartitionError([tp]))
                    else:
                        self.errors.append(error_for_code(code, context=f"Fetch {topic}-{tp.partition}"))
                    continue
                st.high_watermark = p["high_watermark"]
                st.last_stable_offset = p["last_stable_offset"]
                st.log_start_offset = p["log_start_offset"]
                if p.get("preferred_read_replica", -1) >= 0:  # KIP-392: read that replica from now on
                    st.preferred_read_replica = p["preferred_read_replica"]
                    st.preferred_until = time.monotonic() + self.config.metadata_max_age_ms / 1000
                records = p["records"]
                if not records:
                    continue
                out = deque()
                append = out.append
                identity_key = key_de is bytes_deserializer
                identity_value = value_de is bytes_deserializer
                last = None
                # read_committed: the aborted transactions in range, by first offset (Kafka's consumer
                # drops a producer's transactional batches from the first offset on, up to its ABORT marker)
                aborted = sorted((a["first_offset"], a["producer_id"]) for a in p.get("aborted_transactions") or ())
                aborted_producers: set[int] = set()
                for fb in iter_fetched(records, 0, fetch_offset):
                    last = fb.last_offset
                    while aborted and aborted[0][0] <= fb.last_offset:
                        aborted_producers.add(aborted.pop(0)[1])
                    if fb.is_control:
                        aborted_producers.discard(fb.producer_id)
                        continue
                    if not fb.records or (fb.is_transactional and fb.producer_id in aborted_producers):
                        continue
                    tstype = fb.timestamp_type
                    if identity_key and identity_value:
                        for offset, ts, key, value, headers in fb.records:
                            append(ConsumerRecord(topic, partition, offset, ts, tstype, key, value, headers))
                    else:
                        for offset, ts, key, value, headers in fb.records:
                            append(ConsumerRecord(
                                topic, partition, offset, ts, tstype,
                                key if identity_key else key_de(key),
                                value if identity_value else value_de(value), headers))
                if out:
                    self.buffer[tp] = out
                elif last is not None and last >= fetch_offset:
                    # Only records before the position (or control records): skip past them.
                    st.position = last + 1

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Take up to ``max_records`` buffered records and advance positions past them."""
        out: list[ConsumerRecord] = []
        for tp in list(self.buffer):
            dq = self.buffer[tp]
            st = self.subs.assignment.get(tp)
            if st is None or st.paused:
                if st is None:
                    del self.buffer[tp]
                continue
            while dq and len(out) < max_records:
                out.append(dq.popleft())
            if out and out[-1].topic == tp.topic and out[-1].partition == tp.partition:
                st.position = out[-1].offset + 1
            if not dq:
                del self.buffer[tp]
            if len(out) >= max_records:
                break
        return out

    async def close(self) -> None:
        for task in list(self.in_flight.values()):
            task.cancel()
        if self.in_flight:
            await asyncio.gather(*self.in_flight.values(), return_exceptions=True)
        self.in_flight.clear()

