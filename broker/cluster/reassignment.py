"""Partition reassignment (KIP-455), the active controller's part: Kafka 2.7's ``onPartitionReassignment``.

A reassignment moves a partition from its original replicas (ORS) to target
replicas (TRS). While it runs the partition's replicas are RS = TRS + ORS
(distinct, target first), with ``adding`` = RS - ORS and ``removing`` = RS - TRS
kept in ``/brokers/topics/<t>`` (the KIP-455 layout, :class:`TopicZNode`), in
LeaderAndIsr (v3+) and in ListPartitionReassignments. The steps:

1. start: ``/brokers/topics/<t>`` gets RS, adding and removing; the leader
   epoch is bumped (same leader and ISR) and LeaderAndIsr with RS goes to every
   live replica of RS, so the new replicas create their logs and fetch from
   the leader; UpdateMetadata tells every broker. Replicas of an earlier,
   superseded move that are in neither ORS nor TRS are dropped at once (below);
2. the leader adds each new replica to the ISR when it has caught up (its
   ISR change notification reaches the controller, :meth:`on_isr_change`);
3. complete, once every replica of TRS is in the ISR: the leader stays if it
   is in TRS and alive, else the first live TRS member of the ISR leads; the
   ISR becomes its TRS members; the leader epoch is bumped; LeaderAndIsr with
   TRS goes to TRS, StopReplica with ``delete_partition`` (at the new leader
   epoch, so no older request can undo it) to the removed replicas; then
   ``/brokers/topics/<t>`` gets TRS with no adding or removing, and
   UpdateMetadata tells every broker.

A target of the same replicas in another order completes at once: the
partition gets the new order (its preferred leader is the first), as Kafka's
controller writes it.

Cancelling (a null target in AlterPartitionReassignments) is a reassignment
back to ORS: the adding replicas are dropped, and the partition is complete.
A new target for a partition being moved replaces the old one the same way.

Old tools write ``/admin/reassign_partitions``; its moves are started like the
API's, and each partition leaves the node when its move completes (the node
goes when empty). A new controller resumes every move from the topic znodes
(:meth:`loaded`, then :meth:`resume`), so a reassignment survives a controller
failover.

A removed replica whose broker is down when the move completes (or whose
StopReplica never got an answer) is Kafka's ReplicaDeletionIneligible: it is
kept in ``ControllerContext.replicas_to_delete``, and when the broker starts
again (:meth:`on_brokers_started`, after the LeaderAndIsr for the partitions
it does hold) it gets StopReplica with ``delete_partition`` for it, unless the
partition has it as a replica again by then. Until then the broker holds the
log but serves nothing from it (it serves only what LeaderAndIsr names). The
list lives in the active controller's memory, as Kafka's does: a controller
failover in between forgets it, and the log stays on that disk.

Runs on the controller's event task only (every entry point is an event or
called from one); see :mod:`broker.cluster.controller`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.cluster.znodes import PartitionState, TopicZNode
from broker.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from broker.cluster.controller import Controller

log = logging.getLogger("broker.controller")

TopicPartition = tuple[str, int]
STOP_REPLICA_VERSION = 3
EPOCH_DURING_DELETE = -2  # StopReplica's leader epoch for a partition whose topic is gone
ATTEMPTS = 3  # conditional state writes retried on a fresh read when a leader's ISR write came first


class ReassignmentError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class NotControllerError(Exception):
    """This broker stopped being the controller before the request's turn came."""


class Reassignments:
    """The controller's reassignments in progress; see the module docstring."""

    def __init__(self, controller: "Controller") -> None:
        self.controller = controller
        #: partition -> (adding, removing) of each reassignment in progress
        self.in_progress: dict[TopicPartition, tuple[list[int], list[int]]] = {}
        #: partitions whose move came from ``/admin/reassign_partitions``
        self._from_znode: set[TopicPartition] = set()

    def reset(self) -> None:
        self.in_progress.clear()
        self._from_znode.clear()

    @property
    def _ctx(self):
        return self.controller.context

    async def _blocking(self, fn, *args):
        return await self.controller.broker.run_blocking(fn, *args)

    # -- what others ask -------------------------------------------------------------------------
    def lists(self, tp: TopicPartition) -> tuple[list[int], list[int]]:
        """``(adding, removing)`` of ``tp`` (empty when it is not being reassigned)."""
        return self.in_progress.get(tp, ([], []))

    def listing(self, wanted: list[TopicPartition] | None) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """``{tp: (replicas, adding, removing)}`` of the moves in progress (of ``wanted`` only, if given)."""
        ctx = self._ctx
        if ctx is None:
            raise NotControllerError()
        tps = sorted(self.in_progress) if wanted is None else [tp for tp in wanted if tp in self.in_progress]
        return {tp: (ctx.replicas(tp), *self.in_progress[tp]) for tp in tps if tp[0] in ctx.assignments}

    def loaded(self, topic: str, data: bytes) -> None:
        """A topic znode was read: remember the moves it records (a new controller resumes them)."""
        adding, removing = TopicZNode.decode_reassignment(data)
        for tp in [tp for tp in self.in_progress if tp[0] == topic]:
            del self.in_progress[tp]
        for p in set(adding) | set(removing):
            self.in_progress[(topic, p)] = (adding.get(p, []), removing.get(p, []))

    # -- entry points (controller events) -------------------------------------------------------
    async def resume(self) -> None:
        """After election: carry on every move found in the topic znodes, then the old tools' node."""
        for tp, (_adding, removing) in sorted(self.in_progress.items()):
            if tp[0] in self._ctx.assignments:
                target = [b for b in self._ctx.replicas(tp) if b not in removing]
                log.info("controller: resuming the reassignment of %s-%d to %s", *tp, target)
                await self._reassign(tp, target)
        await self.on_znode_change()

    async def alter(self, targets: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, tuple[int, str | None]]:
        """AlterPartitionReassignments: start (or cancel, target None) each move; its error per partition."""
        if self._ctx is None:
            raise NotControllerError()
        results = {}
        for tp, target in targets.items():
            try:
                self._validate(tp, target)
                if target is None:
                    adding, _removing = self.in_progress[tp]
                    target = [b for b in self._ctx.replicas(tp) if b not in adding]
                    log.info("controller: cancelling the reassignment of %s-%d; back to %s", *tp, target)
                await self._reassign(tp, list(target))
                results[tp] = (ErrorCode.NONE, None)
            except ReassignmentError as exc:
                results[tp] = (exc.error_code, exc.message)
        return results

    async def on_isr_change(self, partitions: list[TopicPartition]) -> None:
        """Partitions' ISR changed: a move whose targets are all in the ISR completes."""
        for tp in partitions:
            if tp in self.in_progress and self._targets_in_isr(tp):
                await self._complete(tp)

    async def on_znode_change(self) -> None:
        """``/admin/reassign_partitions`` appeared or changed: start the moves it names (watching it again)."""
        if self._ctx is None:
            return
        request = await self._blocking(self.controller.metadata.reassign_partitions_request,
                                       self.controller._watch("reassignment", "on_znode_change"))
        if not request:
            return
        invalid = set()
        for tp, target in sorted(request.items()):
            current = self.in_progress.get(tp)
            if current is not None and [b for b in self._ctx.replicas(tp) if b not in current[1]] == target:
                self._from_znode.add(tp)
                continue
            try:
                self._validate(tp, target)
            except ReassignmentError as exc:
                log.warning("controller: /admin/reassign_partitions: %s-%d: %s", *tp, exc.message)
                invalid.add(tp)
                continue
            self._from_znode.add(tp)
            await self._reassign(tp, target)
        done = invalid | {tp for tp in request if tp in self._from_znode and tp not in self.in_progress}
        if done:
            self._from_znode -= done
            await self._blocking(self.controller.metadata.remove_from_reassign_partitions_request, done)

    # -- the steps ---------------------------------------------------------------------------------
    def _validate(self, tp: TopicPartition, target: list[int] | None) -> None:
        ctx = self._ctx
        if tp[0] not in ctx.assignments or tp[1] not in ctx.assignments[tp[0]] or tp[0] in ctx.topics_to_delete:
            raise ReassignmentError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    f"partition {tp[0]}-{tp[1]} does not exist")
        if target is None:
            if tp not in self.in_progress:
                raise ReassignmentError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                        f"no reassignment of {tp[0]}-{tp[1]} is in progress")
            return
        if not target:
            raise ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    "empty replica list specified in partition reassignment")
        if len(set(target)) != len(target):
            raise ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    f"duplicate replica ids in partition reassignment replica list {target}")
        dead = [b for b in target if not ctx.is_alive(b)]
        if dead:
            raise ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    f"the proposed assignment contains brokers that are not alive: {dead}")

    def _targets_in_isr(self, tp: TopicPartition) -> bool:
        state = self._ctx.states.get(tp)
        target = [b for b in self._ctx.replicas(tp) if b not in self.in_progress[tp][1]]
        return state is not None and set(target) <= set(state.isr)

    async def _reassign(self, tp: TopicPartition, target: list[int]) -> None:
        ctx = self._ctx
        current = ctx.replicas(tp)
        adding, _removing = self.lists(tp)
        origin = [b for b in current if b not in adding]
        full = list(dict.fromkeys(target + origin))
        unneeded = [b for b in current if b not in full]
        moving = ([b for b in full if b not in origin], [b for b in full if b not in target])
        if moving == ([], []) and not unneeded and tp not in self.in_progress and full == current:
            return  # already there (the same replicas in another order is a move: the order is the preference)
        if moving == ([], []):
            self.in_progress.pop(tp, None)
        else:
            self.in_progress[tp] = moving
        await self._write_topic(tp[0], {tp[1]: full})
        log.info("controller: reassigning %s-%d from %s to %s (replicas %s)", *tp, origin, target, full)
        if unneeded:
            await self._shrink(tp, full, unneeded)
        if tp not in self.in_progress or self._targets_in_isr(tp):
            self.in_progress.setdefault(tp, ([], []))
            await self._complete(tp)
            return
        state = await self._new_state(tp, lambda s: s)
        if state is None:
            return
        ctl = self.controller
        ctl._send_leader_and_isr([tp])
        ctl._send_update_metadata(set(ctx.live_brokers), [tp])

    async def _complete(self, tp: TopicPartition) -> None:
        _adding, removing = self.in_progress[tp]
        target = [b for b in self._ctx.replicas(tp) if b not in removing]
        if await self._shrink(tp, target, removing) is None:
            return  # no leader possible yet; the next ISR change tries again
        del self.in_progress[tp]
        await self._write_topic(tp[0], {tp[1]: target})
        self.controller._send_update_metadata(set(self._ctx.live_brokers), [tp])
        log.info("controller: reassignment of %s-%d to %s complete", *tp, target)
        if tp in self._from_znode:
            self._from_znode.discard(tp)
            await self._blocking(self.controller.metadata.remove_from_reassign_partitions_request, {tp})

    async def _shrink(self, tp: TopicPartition, keep: list[int], drop: list[int]) -> PartitionState | None:
        """Leadership and ISR to ``keep`` (epoch bumped), LeaderAndIsr to it, StopReplica(delete) to ``drop``."""
        ctx = self._ctx

        def shrunk(state: PartitionState) -> PartitionState | None:
            isr = [b for b in state.isr if b in keep] or list(state.isr)
            leader = state.leader
            if leader not in keep or not ctx.is_alive(leader):
                leader = next((b for b in keep if b in isr and ctx.is_alive(b)), -1)
                if leader == -1:
                    return None
            return PartitionState(leader, state.leader_epoch, tuple(isr), state.controller_epoch, state.version)
        state = await self._new_state(tp, shrunk)
        if state is None:
            log.warning("controller: %s-%d: no live in-sync replica among %s to lead; waiting", *tp, keep)
            return None
        ctx.assignments[tp[0]][tp[1]] = list(keep)
        self.controller._send_leader_and_isr([tp])
        for b in drop:
            self._delete_replicas(b, [tp])
        return state

    def on_brokers_started(self, started: set[int]) -> None:
        """Brokers (re)started: the replicas removed from their partitions while they were down go now."""
        ctx = self._ctx
        for b in sorted(started):
            removed = sorted(tp for tp in ctx.replicas_to_delete.pop(b, ()) if b not in ctx.replicas(tp))
            if removed:
                log.info("controller: broker %d is back; deleting its removed replicas %s", b,
                         ", ".join(f"{t}-{p}" for t, p in removed))
                self._delete_replicas(b, removed)

    def _delete_replicas(self, broker_id: int, partitions: list[TopicPartition]) -> None:
        """StopReplica with delete_partition to ``broker_id``; kept for its next start if it is down or no
        answer says done."""
        ctx = self._ctx
        if not ctx.is_alive(broker_id):
            ctx.replicas_to_delete.setdefault(broker_id, set()).update(partitions)
            return
        topics: dict[str, list] = {}
        for tp in partitions:
            state = ctx.states.get(tp)
            epoch = EPOCH_DURING_DELETE if state is None else state.leader_epoch
            topics.setdefault(tp[0], []).append({"partition_index": tp[1], "leader_epoch": epoch,
                                                 "delete_partition": True})
        body = {"controller_id": self.controller.broker.broker_id, "controller_epoch": ctx.epoch, "broker_epoch": -1,
                "topic_states": [{"topic_name": t, "partition_states": s} for t, s in sorted(topics.items())]}

        def answered(future) -> None:
            response = None if future.cancelled() else future.result()
            if self._ctx is ctx and (response is None or response["error_code"] != ErrorCode.NONE):
                ctx.replicas_to_delete.setdefault(broker_id, set()).update(partitions)
        self.controller.channel.send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body) \
            .add_done_callback(answered)

    async def _new_state(self, tp: TopicPartition, change) -> PartitionState | None:
        """Write ``change(state)`` with the leader epoch bumped; retried on a fresh read if a leader wrote first."""
        ctx = self._ctx
        for _attempt in range(ATTEMPTS):
            state = ctx.states.get(tp)
            if state is None:
                return None
            new = change(state)
            if new is None:
                return None
            new = PartitionState(new.leader, state.leader_epoch + 1, new.isr, ctx.epoch, state.version)
            if await self.controller._write_state(tp, new):
                return ctx.states[tp]
        return None

    async def _write_topic(self, topic: str, changed: dict[int, list[int]]) -> None:
        """``/brokers/topics/<t>`` with ``changed`` partitions' replicas and every move of the topic."""
        ctx = self._ctx
        assignment = dict(ctx.assignments[topic])
        assignment.update(changed)
        adding = {p: a for (t, p), (a, _r) in self.in_progress.items() if t == topic}
        removing = {p: r for (t, p), (_a, r) in self.in_progress.items() if t == topic}
        await self._blocking(self.controller.metadata.write_reassignment, topic, assignment, adding, removing,
                             ctx.epoch_zk_version, ctx.topic_ids.get(topic))
        ctx.assignments[topic] = assignment
