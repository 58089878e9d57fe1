"""The controller's leadership moves: controlled shutdown, leader elections, failed log dirs.

A mixin of :class:`~broker.cluster.controller.Controller` (its events run on the
controller's one event task like the others; the rules are the pure functions of
:mod:`broker.cluster.controller_context`). Kafka 2.7's ``KafkaController``:

* **controlled shutdown** (``controlled_shutdown`` event, from the
  ControlledShutdown API): the broker joins ``shutting_down`` (it leads
  nothing new until it is gone); each partition it leads, with more than one
  replica, goes to the first online ISR member not shutting down
  (``ControlledShutdownLeaderSelector``) and the broker leaves its ISR; the
  broker leaves the ISR of each partition it follows. The broker gets
  StopReplica (not deleting) for all of them first, so its fetchers stop and
  it answers NOT_LEADER_OR_FOLLOWER at once (Kafka leaves a moved leader
  unaware until it exits); then the other replicas get LeaderAndIsr and every
  broker UpdateMetadata. The answer lists the partitions it still leads that
  could have moved (a lost conditional write); a request whose broker epoch
  is older than the broker's registration gets STALE_BROKER_EPOCH; a partition with no other
  online in-sync replica cannot move and is not listed (as Kafka treats a
  single replica), so the last broker of a cluster stops without waiting;
* **ElectLeaders** (``elect_leaders`` event): preferred (the first replica,
  if online and in the ISR) or unclean (only for a partition whose leader is
  offline: an online ISR member if any, else any online replica; the topic's
  ``unclean.leader.election.enable`` is not consulted, as in Kafka). Each
  partition's result is an error code and message: ELECTION_NOT_NEEDED
  (already led by its preferred replica; for unclean, its leader is online),
  PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
  UNKNOWN_TOPIC_OR_PARTITION;
* **auto leader rebalance** (``auto.leader.rebalance.enable``): every
  ``leader.imbalance.check.interval.seconds`` (the first check 5 s after the
  election), a broker whose share of partitions it is preferred for but does
  not lead exceeds ``leader.imbalance.per.broker.percentage`` gets those back
  by preferred elections;
* **log dir failures** (``/log_dir_event_notification`` children): each
  notification is removed; the named broker gets LeaderAndIsr for all its
  replicas and answers KAFKA_STORAGE_ERROR for those in failed dirs; those
  replicas are offline from then on (until the broker registers again):
  partitions they led get a leader from the other online ISR members, and
  they leave the ISRs.
"""

from __future__ import annotations

import asyncio
import logging

from broker.cluster.controller_channel import LEADER_AND_ISR_VERSION
from broker.cluster.controller_context import (
    controlled_shutdown_leader,
    elect_leader,
    preferred_leader,
    remove_replica_from_isr,
)
from broker.cluster.metadata import ControllerMovedError
from broker.cluster.store import NoNodeError, StoreError
from broker.cluster.znodes import LogDirEventNotificationZNode
from broker.protocol import ApiKey, ErrorCode

log = logging.getLogger("broker.controller")

PREFERRED, UNCLEAN = 0, 1
FIRST_REBALANCE_CHECK_S = 5
WRITE_ATTEMPTS = 3  # a conditional write lost to a leader's ISR change is tried again on the stored state
_STRATEGY = {PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
             UNCLEAN: "OfflinePartitionLeaderElectionStrategy"}


class LeaderMoves:
    """Mixin of the controller; see the module docstring."""

    _rebalance_timer: asyncio.TimerHandle | None = None

    # -- hooks the controller calls ---------------------------------------------------------------
    async def _start_leader_moves(self) -> None:
        """On election: pending log dir notifications, and the first auto rebalance check."""
        await self._on_log_dir_event()
        if self.broker.config.auto_leader_rebalance_enable:
            self._schedule_rebalance(FIRST_REBALANCE_CHECK_S)

    def _stop_leader_moves(self) -> None:
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None

    def _brokers_changed(self, dead: set[int], started: set[int]) -> None:
        """Forget what a broker that went or came back had: its shutdown, its failed dirs."""
        ctx = self.context
        for b in dead | started:
            ctx.shutting_down.discard(b)
            ctx.offline_dir_replicas.pop(b, None)

    # -- controlled shutdown ----------------------------------------------------------------------
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int = -1) -> tuple[int, list[tuple[str, int]]]:
        """Run a ControlledShutdown through the event queue: (error code, partitions remaining)."""
        error, remaining, requests = await self.ask("controlled_shutdown", broker_id, broker_epoch)
        if requests:  # the new leaders know before the broker goes (a bounded wait: a broker may hang)
            await asyncio.wait(requests, timeout=5)
        return error, remaining

    async def _on_controlled_shutdown(self, broker_id: int, broker_epoch: int, future: asyncio.Future) -> None:
        ctx = self.context
        if ctx is None:
            future.set_result((ErrorCode.NOT_CONTROLLER, [], []))
            return
        if broker_id not in ctx.live_brokers:
            future.set_result((ErrorCode.BROKER_NOT_AVAILABLE, [], []))
            return
        if broker_epoch != -1 and broker_epoch < ctx.live_brokers[broker_id].broker_epoch:
            future.set_result((ErrorCode.STALE_BROKER_EPOCH, [], []))  # a request of its previous registration
            return
        try:
            result = await self._shut_down_broker(broker_id)
        except BaseException as exc:
            future.set_result((ErrorCode.UNKNOWN_SERVER_ERROR, [], []))
            if isinstance(exc, StoreError) and not isinstance(exc, ControllerMovedError):
                log.warning("controller: controlled shutdown of broker %d: %s", broker_id, exc)
                return  # the broker asks again (not this event: its answer is given)
            raise
        future.set_result((ErrorCode.NONE, *result))

    async def _shut_down_broker(self, broker_id: int):
        ctx = self.context
        ctx.shutting_down.add(broker_id)
        led, followed = [], []
        for tp in ctx.partitions_on({broker_id}):
            state = ctx.states.get(tp)
            if state is None or tp[0] in ctx.topics_to_delete or len(ctx.replicas(tp)) < 2:
                continue
            (led if state.leader == broker_id else followed).append(tp)
        moved, remaining = [], []
        for tp in led:
            outcome = await self._change_state(tp, lambda s, tp=tp: None if s.leader != broker_id else
                                               controlled_shutdown_leader(s, ctx.replicas(tp), ctx.online_replicas(tp),
                                                                          ctx.shutting_down, ctx.epoch))
            if outcome:
                moved.append(tp)
            elif ctx.states[tp].leader == broker_id and set(ctx.states[tp].isr) & (ctx.online_replicas(tp)):
                remaining.append(tp)
        shrunk = [tp for tp in followed
                  if await self._change_state(tp, lambda s: remove_replica_from_isr(s, broker_id, ctx.epoch))]
        stopped = [tp for tp in moved + followed if ctx.states.get(tp) is not None]
        if stopped:
            self.channel.send(broker_id, ApiKey.STOP_REPLICA, 3, self._stop_replicas_body(stopped))
        requests = self._send_leader_and_isr_to(moved + shrunk, set(ctx.live_brokers) - {broker_id})
        self._send_update_metadata(set(ctx.live_brokers), moved + shrunk)
        log.info("controller: controlled shutdown of broker %d: %d leaderships moved, %d ISRs left, %d remaining",
                 broker_id, len(moved), len(shrunk), len(remaining))
        return remaining, requests

    async def _change_state(self, tp, decide) -> bool:
        """Write ``decide(state)`` (None: nothing to do), again on the stored state if a leader wrote meanwhile."""
        for _attempt in range(WRITE_ATTEMPTS):
            new = decide(self.context.states[tp])
            if new is None:
                return False
            if await self._write_state(tp, new):
                return True
        return False

    def _stop_replicas_body(self, partitions) -> dict:
        ctx = self.context
        topics: dict[str, list] = {}
        for tp in partitions:
            topics.setdefault(tp[0], []).append({"partition_index": tp[1], "leader_epoch": ctx.states[tp].leader_epoch,
                                                 "delete_partition": False})
        return {"controller_id": self.broker.broker_id, "controller_epoch": ctx.epoch, "broker_epoch": -1,
                "topic_states": [{"topic_name": t, "partition_states": s} for t, s in sorted(topics.items())]}

    def _send_leader_and_isr_to(self, partitions, brokers: set[int]) -> list[asyncio.Future]:
        """LeaderAndIsr for ``partitions`` to their online replicas among ``brokers``; the response futures."""
        ctx = self.context
        per_broker: dict[int, list] = {}
        for tp in partitions:
            for b in ctx.replicas(tp):
                if b in brokers and ctx.is_replica_online(b, tp):
                    per_broker.setdefault(b, []).append(tp)
        return [self.channel.send(b, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION,
                                  self._leader_and_isr_body(tps, frozenset()))
                for b, tps in sorted(per_broker.items())]

    # -- leader elections -------------------------------------------------------------------------
    async def elect_leaders(self, election_type: int, partitions) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Run an ElectLeaders through the event queue; ``partitions`` None is every partition."""
        return await self.ask("elect_leaders", election_type, partitions)

    async def _on_elect_leaders(self, election_type: int, partitions, future: asyncio.Future) -> None:
        ctx = self.context
        if ctx is None:
            future.set_result({tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions or ()})
            return
        try:
            results = await self._elect_leaders(election_type, ctx.partitions() if partitions is None else partitions)
        except BaseException as exc:
            future.set_result({tp: (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) for tp in partitions or ()})
            if isinstance(exc, StoreError) and not isinstance(exc, ControllerMovedError):
                log.warning("controller: leader election: %s", exc)
                return  # answered; not run again
            raise
        future.set_result(results)

    async def _elect_leaders(self, election_type: int, partitions):
        ctx = self.context
        results, changed = {}, []
        for tp in partitions:
            state = ctx.states.get(tp)
            if state is None or tp[0] in ctx.topics_to_delete:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            replicas, online = ctx.replicas(tp), ctx.online_replicas(tp)
            if (election_type == PREFERRED and state.leader == replicas[0]) or \
                    (election_type == UNCLEAN and state.leader in online):
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
                continue
            if election_type == PREFERRED:
                decide = lambda s, tp=tp: preferred_leader(s, ctx.replicas(tp), ctx.online_replicas(tp), ctx.epoch)
            else:
                decide = lambda s, tp=tp: (None if s.leader in ctx.online_replicas(tp) else
                                           elect_leader(s, ctx.replicas(tp), ctx.online_replicas(tp), True, ctx.epoch))
            if await self._change_state(tp, decide):
                changed.append(tp)
                results[tp] = (ErrorCode.NONE, None)
            else:
                code = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED
                        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
                results[tp] = (code, f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                                     f"{_STRATEGY[election_type]}")
        if changed:
            log.info("controller: %s election moved %s", "preferred" if election_type == PREFERRED else "unclean",
                     ", ".join(f"{t}-{p}" for t, p in changed))
            self._send_leader_and_isr_to(changed, set(ctx.live_brokers))
            self._send_update_metadata(set(ctx.live_brokers), changed)
        return results

    # -- auto leader rebalance --------------------------------------------------------------------
    def _schedule_rebalance(self, delay_s: float) -> None:
        self._stop_leader_moves()
        self._rebalance_timer = self._loop.call_later(delay_s, self.enqueue, "auto_rebalance")

    async def _on_auto_rebalance(self) -> None:
        ctx = self.context
        if ctx is None:
            return
        config = self.broker.config
        self._schedule_rebalance(config.leader_imbalance_check_interval_seconds)
        by_preferred: dict[int, list] = {}
        for tp in ctx.partitions():
            replicas, state = ctx.replicas(tp), ctx.states.get(tp)
            if replicas and state is not None and tp[0] not in ctx.topics_to_delete:
                by_preferred.setdefault(replicas[0], []).append(tp)
        candidates = []
        for b, tps in sorted(by_preferred.items()):
            not_led = [tp for tp in tps if ctx.states[tp].leader != b]
            if len(not_led) / len(tps) * 100 > config.leader_imbalance_per_broker_percentage:
                candidates += [tp for tp in not_led if b in ctx.online_replicas(tp) and b in ctx.states[tp].isr]
        if candidates:
            log.info("controller: leader imbalance; preferred elections for %d partitions", len(candidates))
            await self._elect_leaders(PREFERRED, candidates)

    # -- failed log dirs --------------------------------------------------------------------------
    async def _on_log_dir_event(self) -> None:
        if self.context is None:
            return

        def take():
            root = LogDirEventNotificationZNode.path()
            self.metadata.store.ensure_path(root)
            brokers = set()
            for name in self.metadata.store.get_children(root, self._watch("log_dir_event")):
                found = self.metadata.store.get_or_none(f"{root}/{name}")
                if found is not None:
                    brokers.add(LogDirEventNotificationZNode.decode(found[0])[0])
                try:
                    self.metadata.store.delete(f"{root}/{name}")
                except NoNodeError:
                    pass
            return brokers
        brokers = await self._blocking(take)
        ctx = self.context
        for b in sorted(brokers):
            if ctx is None or b not in ctx.live_brokers:
                continue
            log.info("controller: a log dir of broker %d failed; asking for its replicas' states", b)
            partitions = [tp for tp in ctx.partitions_on({b}) if tp in ctx.states]
            request = self.channel.send(b, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION,
                                        self._leader_and_isr_body(partitions, frozenset()))
            self._loop.create_task(self._await_replica_states(b, request))

    async def _await_replica_states(self, broker_id: int, request: asyncio.Future) -> None:
        response = await request
        if response is not None:
            offline = {(e["topic_name"], e["partition_index"]) for e in response["partition_errors"]
                       if e["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR}
            self.enqueue("offline_replicas", broker_id, offline)

    async def _on_offline_replicas(self, broker_id: int, offline: set) -> None:
        ctx = self.context
        if ctx is None or broker_id not in ctx.live_brokers or not offline:
            return
        ctx.offline_dir_replicas.setdefault(broker_id, set()).update(offline)
        changed = []
        for tp in sorted(offline):
            if tp not in ctx.states:
                continue
            unclean = await self._blocking(self._unclean_enabled, tp[0])

            def decide(s, tp=tp):
                if s.leader == broker_id:
                    new = elect_leader(s, ctx.replicas(tp), ctx.online_replicas(tp), unclean, ctx.epoch)
                    if new is not None:
                        return new
                return remove_replica_from_isr(s, broker_id, ctx.epoch)
            if await self._change_state(tp, decide):
                changed.append(tp)
        log.info("controller: broker %d's replicas %s are offline (failed log dir)", broker_id,
                 ", ".join(f"{t}-{p}" for t, p in sorted(offline)))
        self._send_leader_and_isr_to(changed, set(ctx.live_brokers))
        self._send_update_metadata(set(ctx.live_brokers), sorted(offline))
