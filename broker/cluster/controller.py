"""The controller: one broker of the cluster decides leaders and ISR for all, the Kafka 2.7 way.

Every broker runs a :class:`Controller`; the one that creates the ephemeral
``/controller`` node (in one transaction with the ``/controller_epoch`` bump,
:meth:`ClusterMetadata.elect`) is active until its session is lost or the
node changes hands. The others watch ``/controller`` and stand again when it
goes. The single node runs the same: it is always elected.

Events (Kafka's ``ControllerEventManager``): store watches fire on the
store's thread and queue an event on the loop; one task takes the events in
order, and store I/O runs in the executor, never on the loop. A watch is
one-shot: each event re-reads its nodes and watches them again. An event that
finds the store out of reach is queued again after a pause; one that finds
``/controller_epoch`` moved on (:class:`ControllerMovedError`) resigns.

What the active controller does (Kafka's ``KafkaController``):

* on election: reads the live brokers, topics, assignments and partition
  states; makes the states of partitions that have none, elects leaders for
  partitions whose leader is gone; sends LeaderAndIsr for every partition to
  its live replicas and then UpdateMetadata for all to every live broker (a
  broker's queue is ordered, so a broker whose cache names a partition already
  holds it); resumes topic deletions;
* ``/brokers/ids`` children (broker start and loss; a broker registered again
  under a new session counts as lost and started): partitions led by a lost
  broker get a leader from their live ISR, the lost broker leaves every ISR;
  a started broker gets LeaderAndIsr for its partitions, then StopReplica
  (delete) for the replicas a reassignment removed while it was down, and
  leaderless partitions it can lead get a leader;
* ``/brokers/topics`` children and each topic's data (topic creation,
  partition addition): new partitions get their first state;
* ``/admin/delete_topics`` children: the topic's replicas get StopReplica
  with ``delete_partition``; once every replica answered, the topic's nodes go
  and every broker drops it from its metadata cache (UpdateMetadata with
  leader -2), so a DeleteTopics answered means the name is free again (Kafka
  tells the caches first). A topic with a replica on a dead broker waits for
  that broker;
* ``/isr_change_notification`` children: the named partitions' states are
  read again and sent to every broker;
* controlled shutdown, ElectLeaders, the auto leader rebalance and
  ``/log_dir_event_notification``: :mod:`broker.cluster.controller_leaders`;
* partition reassignments (AlterPartitionReassignments, ``/admin/reassign_partitions``,
  moves resumed after a failover): :mod:`broker.cluster.reassignment`.

Other parts of the broker run code on the event task with :meth:`Controller.call`.

Every write is conditional on the controller epoch znode's version and the
partition state's znode version (:meth:`ClusterMetadata.controller_multi`).
Requests go through :class:`~broker.cluster.controller_channel.ControllerChannel`
at Kafka 2.7's versions: LeaderAndIsr v4, UpdateMetadata v6, StopReplica v3.
Each request carries the broker epoch (KIP-380) of the registration the
controller knows for its destination (the czxid of ``/brokers/ids/N``, filled
in by the channel), so a broker that registered again since refuses what was
meant for its old self; a broker whose registration's epoch grew counts as
bounced (lost, then started).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.cluster.controller_channel import (LEADER_AND_ISR_VERSION, STOP_REPLICA_VERSION, UPDATE_METADATA_VERSION,
                                               ControllerChannel)
from broker.config import SECURITY_PROTOCOL_IDS
from broker.cluster.controller_leaders import LeaderMoves
from broker.cluster.controller_context import (
    ControllerContext,
    elect_leader,
    new_partition_state,
    remove_replica_from_isr,
)
from broker.cluster.metadata import ControllerMovedError
from broker.cluster.reassignment import Reassignments
from broker.cluster.store import BadVersionError, NodeExistsError, NoNodeError, SessionState, StoreError, StoreUnavailableError
from broker.cluster.znodes import (
    ControllerZNode,
    DeleteTopicZNode,
    IsrChangeNotificationZNode,
    TopicZNode,
)
from broker.topic_ids import format_topic_id
from broker.protocol import ApiKey

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.controller")

LEADER_DURING_DELETE = -2  # the leader UpdateMetadata names for a partition being deleted
EPOCH_DURING_DELETE = -2   # StopReplica's leader epoch for a deletion
RETRY_S = 0.5              # pause before an event that found the store unreachable runs again
UNKNOWN_BROKER_EPOCH = -1  # in the bodies; the channel puts each destination's epoch in its place


class Controller(LeaderMoves):
    """See the module docstring. :meth:`start` once the broker is registered; :meth:`stop` at shutdown."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.metadata = broker.metadata
        self.context: ControllerContext | None = None
        self.channel: ControllerChannel | None = None
        self._queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deletions_in_flight: set[str] = set()
        self._token_timer: asyncio.TimerHandle | None = None
        self._token_round = 0
        self.reassignments = Reassignments(self)
        #: events processed by type, as this broker's process ran them (the metrics' controller_events)
        self.events: dict[str, int] = {}

    @property
    def is_active(self) -> bool:
        return self.context is not None

    # -- lifecycle and events ---------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._task = self._loop.create_task(self._process())
        self.metadata.store.add_session_listener(self._on_session_state)
        self.enqueue("elect")

    async def stop(self) -> None:
        """Stop; an active controller resigns (removes ``/controller``) so another broker takes over now."""
        self.metadata.store.remove_session_listener(self._on_session_state)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        epoch = self.context.epoch if self.context is not None else None
        self._resign_locally()
        if epoch is not None:
            await self._blocking(self._remove_controller_node, epoch)

    def enqueue(self, event: str, *args) -> None:
        """Queue an event from any thread (watches fire on the store's)."""
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (event, args))
        except RuntimeError:  # the loop is closed: the broker is gone
            pass

    async def ask(self, event: str, *args):
        """Queue ``event`` with a future after ``args`` and wait for the answer the event sets on it. The future
        is shielded: a caller that stops waiting (a timeout, a closed connection) leaves it to the event, which
        then answers nobody (instead of failing on a cancelled future)."""
        future = self._loop.create_future()
        self.enqueue(event, *args, future)
        return await asyncio.shield(future)

    async def call(self, fn, *args):
        """Run ``await fn(*args)`` on the event task (in order with the events); its result or error."""
        return await self.ask("call", fn, args)

    async def _on_call(self, fn, args, future: asyncio.Future) -> None:
        try:
            result = await fn(*args)
        except Exception as exc:
            future.set_exception(exc)
            if isinstance(exc, ControllerMovedError):
                raise  # resign; the caller has its answer
            return
        future.set_result(result)

    async def _on_reassignment(self, name: str, *args) -> None:
        if self.is_active:
            await getattr(self.reassignments, name)(*args)

    @property
    def queue_size(self) -> int:
        """Events waiting to be processed."""
        return 0 if self._queue is None else self._queue.qsize()

    def _watch(self, event: str, *args):
        return lambda _watch_event: self.enqueue(event, *args)

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            self.enqueue("resign")

    async def _process(self) -> None:
        while True:
            event, args = await self._queue.get()
            self.events[event] = self.events.get(event, 0) + 1
            try:
                await getattr(self, f"_on_{event}")(*args)
            except ControllerMovedError as exc:
                log.info("controller %d: %s; resigning", self.broker.broker_id, exc)
                self._resign_locally()
                self.enqueue("controller_change")
            except StoreError as exc:
                log.warning("controller event %s: %s; again in %.1f s", event, exc, RETRY_S)
                self._loop.call_later(RETRY_S, self.enqueue, event, *args)
            except Exception:
                log.exception("controller event %s failed", event)
                if event == "elect":
                    self._loop.call_later(RETRY_S, self.enqueue, event, *args)

    async def _blocking(self, fn, *args):
        return await self.broker.run_blocking(fn, *args)

    # -- election ---------------------------------------------------------------------------------
    async def _on_elect(self) -> None:
        if self.is_active:
            return
        broker_id = self.broker.broker_id
        controller_id, epoch, epoch_zk_version = await self._blocking(self.metadata.elect, broker_id)
        stat = await self._blocking(self.metadata.store.exists, ControllerZNode.path(),
                                    self._watch("controller_change"))
        if controller_id == broker_id:
            try:
                await self._become_controller(epoch, epoch_zk_version)
            except BaseException:
                # Kafka's controller move: give the role up whole (a half-done failover decides nothing)
                # and stand again
                self._resign_locally()
                await self._blocking(self._remove_controller_node, epoch)
                raise
        elif stat is None:
            self.enqueue("elect")

    def _remove_controller_node(self, epoch: int) -> None:
        try:
            if self.metadata.controller_id() == self.broker.broker_id and self.metadata.controller_epoch() == epoch:
                self.metadata.store.delete(ControllerZNode.path())
        except StoreError:
            pass  # the session is gone, and the node with it

    async def _on_controller_change(self) -> None:
        found = await self._blocking(self.metadata.store.get_or_none, ControllerZNode.path())
        if found is None:
            self._resign_locally()
            self.enqueue("elect")
            return
        await self._blocking(self.metadata.store.exists, ControllerZNode.path(), self._watch("controller_change"))
        if ControllerZNode.decode(found[0]) != self.broker.broker_id and self.is_active:
            log.info("controller %d: another broker is controller now; resigning", self.broker.broker_id)
            self._resign_locally()

    async def _on_resign(self) -> None:
        if self.is_active:
            log.warning("controller %d: session lost; resigning", self.broker.broker_id)
        self._resign_locally()

    async def _on_registered(self) -> None:
        """The broker registered again under a new session: stand again."""
        self._resign_locally()
        await self._on_elect()

    def _resign_locally(self) -> None:
        self._stop_leader_moves()
        if self._token_timer is not None:
            self._token_timer.cancel()
            self._token_timer = None
        self.context = None
        self._deletions_in_flight.clear()
        self.reassignments.reset()
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    async def _become_controller(self, epoch: int, epoch_zk_version: int) -> None:
        log.info("broker %d is controller, epoch %d", self.broker.broker_id, epoch)
        self.context = ctx = ControllerContext(epoch, epoch_zk_version)
        self.channel = ControllerChannel(self.broker)
        live = await self._read_brokers()
        for registration in live.values():
            self.channel.add_broker(registration)
        ctx.live_brokers = live
        for topic in await self._blocking(self._read_topics):
            await self._load_topic(topic)
        # the watch first: a notification made while the old ones are taken fires it
        await self._blocking(self.metadata.store.get_children, IsrChangeNotificationZNode.path(),
                             self._watch("isr_change"))
        await self._blocking(self.metadata.take_isr_change_notifications)
        await self._on_topic_deletion()  # first: a topic being deleted is announced to nobody
        await self._online_partitions(ctx.partitions())
        await self._remove_dead_from_isr(ctx.partitions())
        self._send_leader_and_isr(ctx.partitions())
        self._send_update_metadata(set(live), ctx.partitions())
        await self._start_leader_moves()
        await self.reassignments.resume()
        self._schedule_token_expiry()

    # -- delegation tokens ------------------------------------------------------------------------
    def _schedule_token_expiry(self) -> None:
        """Kafka's controller removes expired delegation tokens every ``delegation.token.expiry.check.interval.ms``
        (:mod:`broker.tokens`). Each pass is numbered: a pass queued before a resignation is dropped."""
        tokens = self.broker.tokens
        if tokens.enabled:
            self._token_round += 1
            self._token_timer = self._loop.call_later(tokens.check_interval_ms / 1000, self.enqueue,
                                                      "expire_tokens", self._token_round)

    async def _on_expire_tokens(self, round_: int) -> None:
        if not self.is_active or round_ != self._token_round:
            return
        try:
            await self._blocking(self.broker.tokens.remove_expired)
        except StoreError as exc:
            log.warning("controller: expired delegation tokens not removed: %s; again at the next pass", exc)
        if self.is_active and round_ == self._token_round:
            self._schedule_token_expiry()

    # -- reading the store ------------------------------------------------------------------------
    async def _read_brokers(self):
        def read():
            self.metadata.store.get_children("/brokers/ids", self._watch("broker_change"))
            return self.metadata.brokers()
        return await self._blocking(read)

    def _read_topics(self) -> list[str]:
        return self.metadata.store.get_children("/brokers/topics", self._watch("topic_change"))

    async def _load_topic(self, topic: str) -> list[tuple[str, int]]:
        """Read a topic's assignment (watching it) and states; returns partitions new to the context."""
        epoch_zk_version = self.context.epoch_zk_version if self.context is not None else -1

        def read():
            try:
                data, stat = self.metadata.store.get(TopicZNode.path(topic), self._watch("partition_change", topic))
            except NoNodeError:
                return None, None, None, {}
            assignment = TopicZNode.decode(data)
            topic_id = TopicZNode.decode_topic_id(data)
            if topic_id is None:  # written by Kafka 2.7 or an older tool: the topic gets its id (KIP-516)
                try:
                    topic_id = self.metadata.set_topic_id(topic, data, stat.version, epoch_zk_version)
                    log.info("controller: topic %s had no topic id; it is now %s", topic, format_topic_id(topic_id))
                except BadVersionError:
                    pass  # the node changed since it was read: its watch loads it again
            return data, assignment, topic_id, {p: self.metadata.partition_state(topic, p) for p in assignment}
        data, assignment, topic_id, states = await self._blocking(read)
        ctx = self.context
        if assignment is None or ctx is None:
            return []
        if topic_id is not None:
            ctx.topic_ids[topic] = topic_id
        self.reassignments.loaded(topic, data)
        known = ctx.assignments.get(topic, {})
        added = [(topic, p) for p in sorted(assignment) if p not in known]
        ctx.assignments[topic] = assignment
        for p, state in states.items():
            if state is not None:
                ctx.states[(topic, p)] = state
        return added

    # -- partition state changes ------------------------------------------------------------------
    async def _online_partitions(self, partitions) -> list[tuple[str, int]]:
        """New partitions get their first state, leaderless ones a leader; returns those that changed."""
        ctx = self.context
        live = set(ctx.live_brokers)
        changed = []
        for tp in partitions:
            if tp[0] in ctx.topics_to_delete:
                continue
            state = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if state is None:
                new = new_partition_state(replicas, live, ctx.epoch)
                if new is None:
                    log.warning("partition %s-%d: no replica alive; waiting for one", *tp)
                    continue
                try:
                    await self._blocking(self.metadata.create_partition_states, tp[0], {tp[1]: new},
                                         ctx.epoch_zk_version)
                except NodeExistsError:  # made by an earlier controller meanwhile: read it
                    ctx.states[tp] = await self._blocking(self.metadata.partition_state, *tp)
                    changed.append(tp)
                    continue
                ctx.states[tp] = new.__class__(new.leader, new.leader_epoch, new.isr, new.controller_epoch, 0)
                changed.append(tp)
            elif state.leader not in live and await self._elect(tp):
                changed.append(tp)
        return changed

    async def _elect(self, tp) -> bool:
        """Elect a leader for an offline partition (again on the stored state if a leader wrote meanwhile)."""
        ctx = self.context
        unclean = await self._blocking(self._unclean_enabled, tp[0])
        for _attempt in range(3):
            live = ctx.online_replicas(tp)
            state = ctx.states[tp]
            if state.leader in live:
                return False
            new = elect_leader(state, ctx.replicas(tp), live, unclean, ctx.epoch)
            if new is None:
                log.warning("partition %s-%d: no replica of the ISR %s is alive; no leader", *tp, list(state.isr))
                if state.leader == -1:
                    return False
                new = remove_replica_from_isr(state, state.leader, ctx.epoch)
            elif unclean and not set(state.isr) & live:
                log.warning("partition %s-%d: unclean leader election of broker %d", *tp, new.leader)
            if await self._write_state(tp, new):
                return True
        return False

    async def _remove_dead_from_isr(self, partitions) -> list[tuple[str, int]]:
        """Replicas on dead brokers leave the ISR (Kafka's OfflineReplica); returns the partitions changed."""
        ctx = self.context
        changed = []
        for tp in partitions:
            if ctx.states.get(tp) is None or tp[0] in ctx.topics_to_delete:
                continue
            for b in [b for b in ctx.states[tp].isr if not ctx.is_alive(b)]:
                new = remove_replica_from_isr(ctx.states[tp], b, ctx.epoch)
                if new is not None:
                    await self._write_state(tp, new)
                    if tp not in changed:
                        changed.append(tp)
        return changed

    async def _write_state(self, tp, state) -> bool:
        """Write a partition state conditionally; False (the stored state read instead) when it moved on."""
        ctx = self.context
        try:
            version = await self._blocking(self.metadata.update_partition_state, tp[0], tp[1], state,
                                           ctx.epoch_zk_version)
        except StoreError as exc:
            if isinstance(exc, (ControllerMovedError, StoreUnavailableError)):
                raise
            # the leader changed the ISR meanwhile (conditional write lost): take the stored state
            ctx.states[tp] = await self._blocking(self.metadata.partition_state, *tp)
            return False
        ctx.states[tp] = state.__class__(state.leader, state.leader_epoch, state.isr, state.controller_epoch, version)
        return True

    def _unclean_enabled(self, topic: str) -> bool:
        overrides = self.metadata.topic_config(topic)
        try:
            return self.broker.default_log_config.with_overrides(overrides).unclean_leader_election_enable
        except ValueError:
            return self.broker.default_log_config.unclean_leader_election_enable

    # -- events of the active controller ---------------------------------------------------------
    async def _on_broker_change(self) -> None:
        ctx = self.context
        if ctx is None:
            return
        current = await self._read_brokers()
        ctx = self.context
        if ctx is None:
            return
        old = ctx.live_brokers
        bounced = {b for b in current if b in old and (current[b].broker_epoch != old[b].broker_epoch
                                                       or current[b].timestamp_ms != old[b].timestamp_ms)}
        dead = (set(old) - set(current)) | bounced
        started = (set(current) - set(old)) | bounced
        if not dead and not started:
            return
        log.info("controller: brokers started %s, lost %s", sorted(started), sorted(dead))
        self._brokers_changed(dead, started)
        ctx.live_brokers = {b: r for b, r in current.items() if b not in bounced}
        for b in dead:
            self.channel.remove_broker(b)
        if dead:
            await self._on_brokers_lost(dead)
        ctx.live_brokers = current
        for b in started:
            self.channel.add_broker(current[b])
        if started:
            await self._on_brokers_started(started)
        await self._on_topic_deletion()

    async def _on_brokers_lost(self, dead: set[int]) -> None:
        ctx = self.context
        affected = ctx.partitions_on(dead)
        changed = set(await self._online_partitions(affected))
        changed.update(await self._remove_dead_from_isr(affected))
        self._send_leader_and_isr(sorted(changed))
        self._send_update_metadata(set(ctx.live_brokers), affected)

    async def _on_brokers_started(self, started: set[int]) -> None:
        ctx = self.context
        self._send_leader_and_isr(ctx.partitions_on(started), only=started)
        self.reassignments.on_brokers_started(started)
        offline = [tp for tp in ctx.partitions() if ctx.states.get(tp) is None or ctx.states[tp].leader == -1]
        changed = await self._online_partitions(offline)
        self._send_leader_and_isr(changed)
        self._send_update_metadata(set(ctx.live_brokers), ctx.partitions())

    async def _on_topic_change(self) -> None:
        if self.context is None:
            return
        topics = set(await self._blocking(self._read_topics))
        ctx = self.context
        if ctx is None:
            return
        gone = set(ctx.assignments) - topics
        for topic in gone:
            ctx.remove_topic(topic)
        added = []
        for topic in sorted(topics - set(ctx.assignments)):
            added += await self._load_topic(topic)
        await self._new_partitions(added)

    async def _on_partition_change(self, topic: str) -> None:
        if self.context is None or topic not in self.context.assignments:
            return
        await self._new_partitions(await self._load_topic(topic))

    async def _new_partitions(self, added) -> None:
        if not added:
            return
        ctx = self.context
        fresh = [tp for tp in added if tp not in ctx.states]
        log.info("controller: new partitions %s", ", ".join(f"{t}-{p}" for t, p in added))
        await self._online_partitions(fresh)
        self._send_leader_and_isr(added, is_new=set(fresh))
        self._send_update_metadata(set(ctx.live_brokers), added)

    async def _on_isr_change(self) -> None:
        if self.context is None:
            return

        def read():
            # the watch before the take: a notification made after the take's read of the children would
            # otherwise wait, unseen, for the next one (and the brokers' metadata keep an old ISR)
            self.metadata.store.get_children(IsrChangeNotificationZNode.path(), self._watch("isr_change"))
            changed = self.metadata.take_isr_change_notifications()
            return {tp: self.metadata.partition_state(*tp) for tp in changed}
        states = await self._blocking(read)
        ctx = self.context
        if ctx is None:
            return
        known = [tp for tp, state in states.items() if state is not None and tp[0] in ctx.assignments]
        for tp in known:
            ctx.states[tp] = states[tp]
        if known:
            self._send_update_metadata(set(ctx.live_brokers), sorted(known))
            await self.reassignments.on_isr_change(sorted(known))

    # -- topic deletion ----------------------------------------------------------------------------
    async def _on_topic_deletion(self) -> None:
        if self.context is None:
            return
        marked = await self._blocking(self.metadata.store.get_children, "/admin/delete_topics",
                                      self._watch("topic_deletion"))
        ctx = self.context
        if ctx is None:
            return
        for topic in marked:
            if topic not in ctx.assignments or not self.broker.config.delete_topic_enable:
                log.info("controller: removing the deletion mark of %s (%s)", topic,
                         "no such topic" if topic in ctx.assignments else "topic deletion is disabled")
                await self._blocking(self._remove_deletion_mark, topic)
                continue
            ctx.topics_to_delete.add(topic)
        for topic in sorted(ctx.topics_to_delete - self._deletions_in_flight):
            partitions = [(topic, p) for p in sorted(ctx.assignments[topic])]
            if any(ctx.offline_replicas(tp) for tp in partitions):
                log.info("controller: deletion of %s waits for its replicas' brokers", topic)
                continue
            self._deletions_in_flight.add(topic)
            futures = [self.channel.send(b, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION,
                                         self._stop_replica_body(topic, [p for _t, p in partitions]))
                       for b in sorted({b for tp in partitions for b in ctx.replicas(tp)})]
            self._loop.create_task(self._await_stop_replicas(topic, futures))

    def _remove_deletion_mark(self, topic: str) -> None:
        try:
            self.metadata.store.delete(DeleteTopicZNode.path(topic))
        except NoNodeError:
            pass

    async def _await_stop_replicas(self, topic: str, futures) -> None:
        responses = await asyncio.gather(*futures)
        ok = all(r is not None and r["error_code"] == 0 and not any(e["error_code"] for e in r["partition_errors"])
                 for r in responses)
        self.enqueue("stop_replicas_done", topic, ok)

    async def _on_stop_replicas_done(self, topic: str, ok: bool) -> None:
        ctx = self.context
        self._deletions_in_flight.discard(topic)
        if ctx is None or topic not in ctx.topics_to_delete:
            return
        if not ok:
            log.warning("controller: a replica of %s did not stop; deletion retried when brokers change", topic)
            return

        topic_id = ctx.topic_ids.get(topic)

        def delete():
            self.metadata.controller_multi([], ctx.epoch_zk_version)
            self.metadata.complete_topic_deletion(topic, topic_id)
        await self._blocking(delete)
        self._send_update_metadata(set(ctx.live_brokers), [(topic, p) for p in sorted(ctx.assignments[topic])],
                                   deleting=True)
        ctx.remove_topic(topic)
        log.info("controller: deleted topic %s", topic)

    # -- requests ----------------------------------------------------------------------------------
    def _send_leader_and_isr(self, partitions, *, is_new: set = frozenset(), only: set | None = None) -> None:
        """LeaderAndIsr for ``partitions`` to each of their live replicas (or only to ``only``)."""
        ctx = self.context
        per_broker: dict[int, list] = {}
        for tp in partitions:
            state = ctx.states.get(tp)
            if state is None or tp[0] in ctx.topics_to_delete:
                continue
            for b in ctx.replicas(tp):
                if ctx.is_alive(b) and (only is None or b in only):
                    per_broker.setdefault(b, []).append(tp)
        for b, tps in per_broker.items():
            self.channel.send(b, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION,
                              self._leader_and_isr_body(tps, is_new))

    def _leader_and_isr_body(self, partitions, is_new) -> dict:
        ctx = self.context
        topics: dict[str, list] = {}
        leaders = set()
        for tp in partitions:
            state = ctx.states[tp]
            leaders.add(state.leader)
            adding, removing = self.reassignments.lists(tp)
            topics.setdefault(tp[0], []).append({
                "partition_index": tp[1], "controller_epoch": state.controller_epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": list(state.isr), "zk_version": state.version,
                "replicas": ctx.replicas(tp), "adding_replicas": adding, "removing_replicas": removing,
                "is_new": tp in is_new})
        live_leaders = []
        for b in sorted(leaders):
            registration = ctx.live_brokers.get(b)
            endpoint = None if registration is None else registration.listener(self.broker.config.inter_broker_listener)
            if endpoint is not None:
                live_leaders.append({"broker_id": b, "host_name": endpoint.host, "port": endpoint.port})
        return {"controller_id": self.broker.broker_id, "controller_epoch": ctx.epoch,
                "broker_epoch": UNKNOWN_BROKER_EPOCH,
                "topic_states": [{"topic_name": t, "topic_id": ctx.topic_id(t), "partition_states": s}
                                 for t, s in sorted(topics.items())],
                "live_leaders": live_leaders}

    def _send_update_metadata(self, brokers: set[int], partitions, *, deleting: bool = False) -> None:
        ctx = self.context
        topics: dict[str, list] = {}
        for tp in partitions:
            state = ctx.states.get(tp)
            if state is None:
                continue
            leader = LEADER_DURING_DELETE if deleting or tp[0] in ctx.topics_to_delete else state.leader
            topics.setdefault(tp[0], []).append({
                "partition_index": tp[1], "controller_epoch": state.controller_epoch, "leader": leader,
                "leader_epoch": state.leader_epoch, "isr": list(state.isr), "zk_version": state.version,
                "replicas": ctx.replicas(tp), "offline_replicas": ctx.offline_replicas(tp)})
        live = []
        for b, registration in sorted(ctx.live_brokers.items()):
            live.append({"id": b, "rack": registration.rack, "endpoints": [
                {"port": e.port, "host": e.host, "listener": e.listener_name,
                 "security_protocol": SECURITY_PROTOCOL_IDS.get(registration.security_protocol(e.listener_name), 0)}
                for e in registration.endpoints]})
        body = {"controller_id": self.broker.broker_id, "controller_epoch": ctx.epoch,
                "broker_epoch": UNKNOWN_BROKER_EPOCH,
                "topic_states": [{"topic_name": t, "topic_id": ctx.topic_id(t), "partition_states": s}
                                 for t, s in sorted(topics.items())],
                "live_brokers": live}
        for b in sorted(brokers):
            self.channel.send(b, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, body)

    def _stop_replica_body(self, topic: str, partitions: list[int]) -> dict:
        ctx = self.context
        return {"controller_id": self.broker.broker_id, "controller_epoch": ctx.epoch,
                "broker_epoch": UNKNOWN_BROKER_EPOCH,
                "topic_states": [{"topic_name": topic, "partition_states": [
                    {"partition_index": p, "leader_epoch": EPOCH_DURING_DELETE, "delete_partition": True}
                    for p in partitions]}]}
