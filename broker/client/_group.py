"""Consumer group membership through the broker's group coordinator.

Protocol (Kafka's classic group protocol, protocol_type "consumer"):

1. FindCoordinator(group) -> coordinator broker.
2. JoinGroup with one (name, metadata) per assignor, metadata a
   ConsumerProtocol Subscription. A first JoinGroup with an empty member id may
   answer MEMBER_ID_REQUIRED with our id: join again with it.
3. The member the coordinator names leader runs the chosen assignor over
   every member's subscription and sends the assignments in SyncGroup; the
   others send SyncGroup empty. Each gets its Assignment back.
4. Heartbeat every ``heartbeat_interval_ms``; REBALANCE_IN_PROGRESS means join
   again; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION mean our membership is gone
   (partitions are *lost*, not revoked).
5. LeaveGroup on close.

Eager assignors revoke every owned partition before joining; the
cooperative one keeps owned partitions, revokes only those missing from the
new assignment after SyncGroup, and then joins again so they can move.

Owned by the consumer's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from ._assignors import COOPERATIVE, Assignor
from ._cluster import Cluster
from ._config import ConsumerConfig
from ._connection import Api
from ._consumer_protocol import (CONSUMER_PROTOCOL_TYPE, Subscription, decode_assignment,
                                 decode_subscription, encode_assignment, encode_subscription)
from ._types import OffsetAndMetadata, TopicPartition
from .errors import (MEMBER_ID_REQUIRED, GroupError, KafkaConnectionError, KafkaError, KafkaTimeoutError,
                     RetriableError, error_for_code)

log = logging.getLogger("broker.client")

_REJOIN = {22, 25, 27, 82}  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID
_COORDINATOR_GONE = {14, 15, 16}


class GroupMember:
    def __init__(self, cluster: Cluster, config: ConsumerConfig, assignors: list[Assignor],
                 subscribed_topics: Callable[[], list[str]],
                 on_change: Callable[[list[TopicPartition], list[TopicPartition], bool], Awaitable[None]]) -> None:
        """``on_change(revoked, assigned, lost)`` is awaited when the assignment changes."""
        self.cluster = cluster
        self.config = config
        self.group_id = config.group_id
        self.assignors = {a.name: a for a in assignors}
        self.assignor_order = [a.name for a in assignors]
        self.subscribed_topics = subscribed_topics
        self.on_change = on_change
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.coordinator: int | None = None
        self.owned: list[TopicPartition] = []
        self.need_rejoin = True
        self.joined_topics: set[str] = set()
        self.joined_partitions: dict[str, int] = {}  # partition counts the last assignment was made for
        self._heartbeat: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self.is_leader = False
        self._leaving = False
        self._lost_pending = False
        self.last_heartbeat: float | None = None  # monotonic time the coordinator last confirmed us

    # -- coordinator ------------------------------------------------------------
    async def ensure_coordinator(self) -> int:
        if self.coordinator is None:
            self.coordinator = await self.cluster.find_coordinator(self.group_id)
        return self.coordinator

    def coordinator_dead(self) -> None:
        self.coordinator = None

    async def _request(self, api: int, body: dict, timeout: float | None = None) -> dict:
        node = await self.ensure_coordinator()
        try:
            return await self.cluster.request(node, api, body, timeout=timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.coordinator_dead()
            raise
        except asyncio.CancelledError:
            if api in (Api.JOIN_GROUP, Api.SYNC_GROUP):
                # The coordinator holds a JoinGroup until the rebalance completes and
                # answers a connection's requests in order: drop the connection so that
                # LeaveGroup and commits do not queue behind the abandoned request.
                self.cluster.drop_connection(node)
            raise

    # -- membership -------------------------------------------------------------
    async def ensure_active(self) -> None:
        """Join (and sync) if needed; returns once we hold a current assignment."""
        async with self._lock:
            while self.need_rejoin or set(self.subscribed_topics()) != self.joined_topics or self._grown():
                try:
                    await self._join_and_sync()
                except (RetriableError, GroupError) as exc:
                    # REBALANCE_IN_PROGRESS / stale generation: join again
                    if exc.error_code in _COORDINATOR_GONE:
                        self.coordinator_dead()
                    self.need_rejoin = True
                    await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                except (KafkaConnectionError, KafkaTimeoutError):
                    self.coordinator_dead()
                    await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            if not self._leaving and (self._heartbeat is None or self._heartbeat.done()):
                self._heartbeat = asyncio.ensure_future(self._heartbeat_loop())

    def _partition_counts(self, topics) -> dict[str, int]:
        known = self.cluster.topics
        return {t: len(known[t].partitions) for t in topics if t in known}

    def _grown(self) -> bool:
        """Whether a topic has more partitions than the last assignment was made for: the
        group then rejoins so that the new partitions are assigned (as Kafka's consumer does)."""
        known = self.cluster.topics
        return any(t in known and len(known[t].partitions) > n for t, n in self.joined_partitions.items())

    async def _join_and_sync(self) -> None:
        topics = sorted(self.subscribed_topics())
        counts = self._partition_counts(topics)
        cooperative = self._protocol_kind() == COOPERATIVE
        if not cooperative and self.owned:
            revoked, self.owned = self.owned, []
            await self.on_change(revoked, [], False)
        protocols = []
        for name in self.assignor_order:
            a = self.assignors[name]
            sub = Subscription(topics, a.subscription_user_data(topics, self.generation),
                               list(self.owned) if cooperative else [])
            protocols.append({"name": name, "metadata": encode_subscription(sub)})
        rebalance_timeout = self.config.max_poll_interval_ms
        body = {
            "group_id": self.group_id, "session_timeout_ms": self.config.session_timeout_ms,
            "rebalance_timeout_ms": rebalance_timeout, "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocols": protocols,
        }
        timeout = rebalance_timeout / 1000 + 5
        resp = await self._request(Api.JOIN_GROUP, body, timeout=timeout)
        code = resp["error_code"]
        if code == MEMBER_ID_REQUIRED:
            self.member_id = resp["member_id"]
            resp = await self._request(Api.JOIN_GROUP, dict(body, member_id=self.member_id), timeout=timeout)
            code = resp["error_code"]
        if code in (22, 25):  # our member id / generation is stale: start over as a new member
            await self._lose()
            raise error_for_code(code, context="JoinGroup")
        if code:
            raise error_for_code(code, resp.get("error_message"), context="JoinGroup")
        self.member_id = resp["member_id"]
        self.generation = resp["generation_id"]
        self.protocol = resp["protocol_name"]
        self.is_leader = resp["leader"] == self.member_id
        assignments = []
        if self.is_leader:
            assignments = await self._assign(resp["members"])
        sync = {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": self.protocol,
            "assignments": assignments,
        }
        sresp = await self._request(Api.SYNC_GROUP, sync, timeout=timeout)
        if sresp["error_code"]:
            if sresp["error_code"] in (22, 25):
                await self._lose()
            raise error_for_code(sresp["error_code"], context="SyncGroup")
        self.last_heartbeat = time.monotonic()
        new = decode_assignment(sresp["assignment"]).partitions
        self.joined_topics = set(topics)
        self.joined_partitions = {**self._partition_counts(topics), **counts}  # topics unknown at the start too
        self.need_rejoin = False
        old = set(self.owned)
        revoked = [tp for tp in self.owned if tp not in set(new)]
        added = [tp for tp in new if tp not in old]
        self.owned = list(new)
        await self.on_change(revoked, added, False)
        if revoked and self._protocol_kind() == COOPERATIVE:
            self.need_rejoin = True  # let the revoked partitions move to their new owner

    def _protocol_kind(self) -> str:
        a = self.assignors.get(self.protocol or self.assignor_order[0])
        return a.rebalance_protocol if a else "EAGER"

    async def _assign(self, members: list[dict]) -> list[dict]:
        assignor = self.assignors[self.protocol]
        subs = {m["member_id"]: decode_subscription(m["metadata"]) for m in members}
        all_topics = {t for s in subs.values() for t in s.topics}
        await self.cluster.refresh_metadata(all_topics)
        counts = {t: len(self.cluster.partitions_for(t)) for t in all_topics}
        result = assignor.assign(subs, counts)
        log.debug("group %s generation %s assignment: %s", self.group_id, self.generation, result)
        return [{"member_id": m, "assignment": encode_assignment(a)} for m, a in result.items()]

    async def _lose(self) -> None:
        lost, self.owned = self.owned, []
        self.member_id, self.generation = "", -1
        self.need_rejoin = True
        if lost:
            await self.on_change(lost, [], True)

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while not self._leaving:
            await asyncio.sleep(interval)
            if self.need_rejoin or self.generation < 0:
                continue
            body = {"group_id": self.group_id, "generation_id": self.generation,
                    "member_id": self.member_id, "group_instance_id": self.config.group_instance_id}
            try:
                resp = await self._request(Api.HEARTBEAT, body)
            except KafkaError as exc:
                log.debug("heartbeat failed: %s", exc)
                continue
            code = resp["error_code"]
            if code == 0:
                self.last_heartbeat = time.monotonic()
            elif code == 27:
                self.need_rejoin = True
            elif code in (22, 25, 82):
                self.need_rejoin = True
                self._lost_pending = True
            elif code in _COORDINATOR_GONE:
                self.coordinator_dead()
            elif code:
                log.warning("heartbeat error %s", code)

    async def check_lost(self) -> None:
        """Report partitions lost by a fenced membership (called from poll)."""
        if self._lost_pending:
            self._lost_pending = False
            await self._lose()

    async def leave(self) -> None:
        self._leaving = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            self._heartbeat = None
        if self.member_id and self.config.group_instance_id is None:
            body = {"group_id": self.group_id, "member_id": self.member_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None}]}
            try:
                await self._request(Api.LEAVE_GROUP, body)
            except KafkaError as exc:
                log.debug("LeaveGroup failed: %s", exc)
        self.member_id, self.generation, self.need_rejoin = "", -1, True
        self._leaving = False

    # -- offsets ------------------------------------------------------------------
    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit for ``offsets``; raises the first partition error."""
        if not offsets:
            return
        topics: dict[str, list] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata or "",
            })
        body = {
            "group_id": self.group_id, "generation_id_or_member_epoch": self.generation,
            "member_id": self.member_id, "group_instance_id": self.config.group_instance_id,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        while True:
            resp = await self._request(Api.OFFSET_COMMIT, body)
            codes = [p["error_code"] for t in resp["topics"] for p in t["partitions"] if p["error_code"]]
            if not codes:
                return
            code = codes[0]
            if code in _COORDINATOR_GONE and time.monotonic() < deadline:
                self.coordinator_dead()
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            if code in _REJOIN:
                self.need_rejoin = True
            raise error_for_code(code, context="OffsetCommit")

    async def fetch_committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {"group_id": self.group_id, "require_stable": False,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        while True:
            resp = await self._request(Api.OFFSET_FETCH, body)
            code = resp.get("error_code", 0)
            if code in _COORDINATOR_GONE and time.monotonic() < deadline:
                self.coordinator_dead()
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            if code:
                raise error_for_code(code, context="OffsetFetch")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for t in resp["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    if p["error_code"] and p["error_code"] != 3:
                        raise error_for_code(p["error_code"], context="OffsetFetch")
                    off = p["committed_offset"]
                    out[tp] = None if off < 0 else OffsetAndMetadata(
                        off, p.get("metadata") or "", p.get("committed_leader_epoch", -1))
            return out
