"""Group membership the legacy way, through ZooKeeper (``group_protocol="zookeeper"``, our name).

What old Kafka consumers did (Kafka 0.8's documentation, "Consumer registration algorithm" and "Consumer
rebalancing algorithm"), in the layout of :mod:`._zookeeper`:

1. Register ``/consumers/<group>/ids/<consumer_id>`` (ephemeral, the subscription as JSON).
2. Watch the group's consumers, and ``/brokers/ids`` and ``/brokers/topics`` where this ZooKeeper
   has them (it often is not the cluster's own); partition counts also come from the broker's
   metadata, checked at every poll. Any change means a rebalance.
3. Rebalance, each consumer on its own: per subscribed topic, sort its partitions and the
   consumers subscribed to it (by thread id ``<consumer_id>-0``); with N = |P| div |C| and
   R = |P| mod |C|, consumer i takes N partitions from N*i + min(i, R), plus one if i < R.
4. Stop reading every owned partition (commit first, as any revoke does), delete the owner
   znodes it no longer gets, and create ``/consumers/<group>/owners/<topic>/<partition>``
   (ephemeral, our thread id) for each new one. A znode that still names another consumer means
   the previous owner has not let go: delete what this attempt claimed and try the whole
   rebalance again after ``rebalance_backoff_ms``, until the owner releases or its session ends.

Exclusive ownership holds at every moment by construction: a partition is read only after its
owner znode was created by us, ZooKeeper lets only one create it, and we stop reading before we
delete it. The session matters, so kazoo's connection states are treated apart:

- SUSPENDED (connection lost, session perhaps alive): stop reading at once, report the partitions
  lost; ZooKeeper expires a session only after the session timeout, and kazoo suspends well
  before that, so nobody else can own them yet. On reconnection within the session our znodes
  are still there: rebalance, and claims of znodes that already name us succeed.
- LOST (session expired: our ephemeral znodes are gone, others may own our partitions): the same,
  then register anew with a new session before rebalancing.

Rebalancing runs from ``poll``: a consumer that does not poll keeps its partitions, and the others
keep retrying their claims, as with the classic protocol's ``max_poll_interval_ms``. Owned by the
consumer's event loop; ZooKeeper calls run in a worker thread, watches only set flags.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
import uuid
from typing import Awaitable, Callable

from ._cluster import Cluster
from ._config import ConsumerConfig
from ._fetcher import SubscriptionState
from ._types import TopicPartition
from ._zookeeper import ConsumerIdZNode, ConsumerOwnerZNode, Registration, ZooKeeperOffsetStore, zk_errors
from .errors import KafkaError, ZooKeeperError

log = logging.getLogger("broker.client")


def covers(reg: Registration, topic: str) -> bool:
    """Whether a registration subscribes ``topic`` (wildcards never take internal topics)."""
    if reg.pattern == "static":
        return topic in reg.entries
    if topic.startswith("__") or not reg.entries:
        return False
    matched = re.fullmatch(reg.entries[0], topic) is not None
    return matched if reg.pattern == "white_list" else not matched


def range_assignment(me: str, partition_counts: dict[str, int],
                     consumers: dict[str, Registration]) -> list[TopicPartition]:
    """The partitions of ``partition_counts``' topics that consumer ``me`` takes (module docstring, 3)."""
    out = []
    for topic, count in sorted(partition_counts.items()):
        threads = sorted(f"{cid}-0" for cid, reg in consumers.items() if covers(reg, topic))
        mine = f"{me}-0"
        if mine not in threads:
            continue
        i = threads.index(mine)
        per, extra = divmod(count, len(threads))
        start = per * i + min(i, extra)
        out += [TopicPartition(topic, p) for p in range(start, start + per + (1 if i < extra else 0))]
    return out


class ZooKeeperGroupMember:
    """The consumer's group membership when ``group_protocol="zookeeper"`` (module docstring)."""

    def __init__(self, cluster: Cluster, config: ConsumerConfig, store: ZooKeeperOffsetStore,
                 subs: SubscriptionState, subscribed_topics: Callable[[], list[str]],
                 on_change: Callable[[list[TopicPartition], list[TopicPartition], bool], Awaitable[None]]) -> None:
        """``on_change(revoked, assigned, lost)`` is awaited when the assignment changes."""
        self.cluster = cluster
        self.config = config
        self.group_id = config.group_id
        self.store = store
        self.client = store.client
        self.subs = subs
        self.subscribed_topics = subscribed_topics
        self.on_change = on_change
        self.member_id = f"{self.group_id}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"
        self.owner_id = f"{self.member_id}-0"
        self.generation = -1  # successful rebalances so far; >= 0 once we own an assignment
        self.owned: list[TopicPartition] = []
        self.need_rejoin = True
        self._claimed: set[TopicPartition] = set()  # owner znodes of ours that exist
        self._registered: bytes | None = None  # the registration data in ZooKeeper now
        self._counts: dict[str, int] = {}
        self._next_attempt = 0.0
        self._suspended = False
        self._session_lost = False
        self._watches: list = []
        self._left = False
        self.client.add_listener(self._on_state)

    # -- called from kazoo's threads: set flags only ------------------------------------------
    def _on_state(self, state) -> None:
        from kazoo.client import KazooState

        if state == KazooState.SUSPENDED:
            self._suspended = True
        elif state == KazooState.LOST:
            self._suspended = self._session_lost = True
        else:
            self._suspended = False
        self.need_rejoin = True

    def _on_children(self, _children) -> bool:
        self.need_rejoin = True
        return not self._left  # False ends kazoo's ChildrenWatch

    # -- membership (from poll) -----------------------------------------------------------------
    async def check_lost(self) -> None:
        """While the ZooKeeper connection is down, or after our session expired, own nothing."""
        if (self._suspended or self._session_lost) and self.owned:
            lost, self.owned = self.owned, []
            await self.on_change(lost, [], True)
        if self._session_lost and not self._suspended:
            self._session_lost = False
            self._claimed.clear()
            self._registered = None

    async def ensure_active(self) -> None:
        if self._suspended:
            return
        topics = self.subscribed_topics()
        counts = {t: len(self.cluster.partitions_for(t)) for t in topics}
        if counts != self._counts:
            self.need_rejoin = True
        if not self.need_rejoin or time.monotonic() < self._next_attempt:
            return
        try:
            await self._rebalance(topics)
        except KafkaError as exc:  # ZooKeeperError included
            log.warning("group %s: rebalance failed, retrying: %s", self.group_id, exc)
            self.need_rejoin = True
            self._next_attempt = time.monotonic() + self.config.rebalance_backoff_ms / 1000

    async def _rebalance(self, topics: list[str]) -> None:
        self.need_rejoin = False  # a watch firing from here on asks for another round
        await asyncio.to_thread(self._register)
        if topics:
            await self.cluster.refresh_metadata(topics)
        counts = {t: len(self.cluster.partitions_for(t)) for t in topics}
        consumers = await asyncio.to_thread(self.store.registrations, self.group_id)
        consumers[self.member_id] = self._registration()
        mine = range_assignment(self.member_id, counts, consumers)
        if set(mine) == set(self.owned) and set(self.owned) <= self._claimed and self.generation >= 0:
            self._counts = counts
            return
        if self.owned:
            revoked, self.owned = self.owned, []
            await self.on_change(revoked, [], False)
        if not await asyncio.to_thread(self._claim, mine):
            log.info("group %s: a partition still has another owner; retrying in %s ms", self.group_id,
                     self.config.rebalance_backoff_ms)
            self.need_rejoin = True
            self._next_attempt = time.monotonic() + self.config.rebalance_backoff_ms / 1000
            return
        self._counts = counts
        self.owned = mine
        self.generation += 1
        log.debug("group %s: %s owns %s", self.group_id, self.owner_id, mine)
        await self.on_change([], list(mine), False)

    def _registration(self) -> Registration:
        if self.subs.pattern is not None:
            return Registration("white_list", [self.subs.pattern.pattern])
        return Registration("static", sorted(self.subs.topics))

    def _register(self) -> None:
        """Create (or update) our ids znode and the watches; runs in a worker thread."""
        from kazoo.exceptions import NodeExistsError
        from kazoo.recipe.watchers import ChildrenWatch

        reg = self._registration()
        data = ConsumerIdZNode.encode(reg.entries, None) if reg.pattern == "static" \
            else ConsumerIdZNode.encode((), reg.entries[0])
        path = ConsumerIdZNode.path(self.group_id, self.member_id)
        with zk_errors(f"registering {path}"):
            if self._registered is None:
                try:
                    self.client.create(path, data, ephemeral=True, makepath=True)
                except NodeExistsError:  # ours, from before a reconnection within the session
                    self.client.set(path, data)
                self._registered = data
            elif self._subscription_changed(data):
                self.client.set(path, data)
                self._registered = data
            if not self._watches:
                # all or none: a failure halfway (the connection dropped) sets up every watch at the next attempt
                self._left = False
                watches = [ChildrenWatch(self.client, ConsumerIdZNode.group_path(self.group_id), self._on_children)]
                for cluster_path in ("/brokers/ids", "/brokers/topics"):
                    if self.client.exists(cluster_path):
                        watches.append(ChildrenWatch(self.client, cluster_path, self._on_children))
                self._watches = watches

    def _subscription_changed(self, data: bytes) -> bool:
        return ConsumerIdZNode.decode(data) != ConsumerIdZNode.decode(self._registered)

    def _claim(self, wanted: list[TopicPartition]) -> bool:
        """Release owner znodes we no longer want, create the wanted ones; all or none (thread)."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        with zk_errors("claiming partitions"):
            for tp in sorted(self._claimed - set(wanted)):
                self._release(tp)
            for tp in wanted:
                if tp in self._claimed:
                    continue
                path = ConsumerOwnerZNode.path(self.group_id, tp.topic, tp.partition)
                try:
                    self.client.create(path, ConsumerOwnerZNode.encode(self.owner_id), ephemeral=True, makepath=True)
                except NodeExistsError:
                    try:
                        data, _ = self.client.get(path)
                    except NoNodeError:
                        data = b""
                    if ConsumerOwnerZNode.decode(data) != self.owner_id:
                        log.debug("group %s: %s-%s is still owned by %s", self.group_id, tp.topic, tp.partition,
                                  ConsumerOwnerZNode.decode(data))
                        for mine in sorted(self._claimed):
                            self._release(mine)
                        return False
                self._claimed.add(tp)
        return True

    def _release(self, tp: TopicPartition) -> None:
        from kazoo.exceptions import BadVersionError, NoNodeError

        path = ConsumerOwnerZNode.path(self.group_id, tp.topic, tp.partition)
        try:
            data, stat = self.client.get(path)
            if ConsumerOwnerZNode.decode(data) == self.owner_id:
                self.client.delete(path, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass
        self._claimed.discard(tp)

    async def leave(self) -> None:
        """Revoke (committing first), release every owner znode and deregister."""
        if self.owned:
            revoked, self.owned = self.owned, []
            await self.on_change(revoked, [], False)
        try:
            await asyncio.to_thread(self._deregister)
        except ZooKeeperError as exc:
            log.debug("leaving group %s: %s", self.group_id, exc)
        self.generation, self.need_rejoin = -1, True

    def _deregister(self) -> None:
        from kazoo.exceptions import NoNodeError

        self._left = True
        self._watches.clear()
        with zk_errors("leaving the group"):
            for tp in sorted(self._claimed):
                self._release(tp)
            if self._registered is not None:
                try:
                    self.client.delete(ConsumerIdZNode.path(self.group_id, self.member_id))
                except NoNodeError:
                    pass
                self._registered = None
