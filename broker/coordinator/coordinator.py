"""The group coordinator: the async layer over :mod:`broker.coordinator.group`.

One :class:`GroupCoordinator` per broker, owned by the event loop (not thread-safe).
It keeps every group of the ``__consumer_offsets`` partitions this broker leads in
memory, drives each through the table-driven state machine, and holds the timers:

* session timeout per member (reset by JoinGroup/SyncGroup/Heartbeat/OffsetCommit);
  a member whose session expires is removed and the group rebalances. A member
  whose JoinGroup or SyncGroup response is being held is kept alive, as in Kafka;
* the join phase: ``group.initial.rebalance.delay.ms`` for a group leaving Empty
  (extended while new members keep arriving, up to the rebalance timeout), else the
  largest rebalance timeout of the members; the phase ends early once every known
  member has rejoined and no member id handed out with MEMBER_ID_REQUIRED is unused.
  Dynamic members that did not rejoin are removed when it ends; static members stay,
  and if none of the remaining members rejoined the phase waits another rebalance
  timeout rather than start a generation whose leader is not there (as Kafka does);
* the new-member join timeout: a member that joined the group for the first time
  and whose JoinGroup is still held after ``group.new.member.join.timeout.ms``
  (Kafka's fixed 5 minutes) is removed and answered UNKNOWN_MEMBER_ID, so clients
  that disconnected and retried leave no defunct members behind; a member id handed
  out with MEMBER_ID_REQUIRED and not used within the session timeout is forgotten;
* expiry of committed offsets (:mod:`broker.coordinator.offsets`, which also holds
  OffsetCommit/OffsetFetch/OffsetDelete as :class:`OffsetsMixin`).

Static members (KIP-345) come back after a restart with an empty member id and
their ``group.instance.id``: they take their old place under a new id without a
rebalance while the group is Stable and its selected protocol does not change (see
:meth:`GroupCoordinator._update_static_member_and_rebalance`); the old id is fenced.

JoinGroup and SyncGroup responses are futures completed when the rebalance gets
there. The coordinator never assigns partitions: the leader's SyncGroup carries
the assignment chosen by the client's own assignor (eager or cooperative alike).

The coordinator holds no broker: it sees ``__consumer_offsets`` through a narrow
partition store (:class:`~broker.coordinator.storage.OffsetsStore`). A group's
coordinator is the leader of its partition. When this broker becomes the leader
of a partition, the store's listener queues it for loading: the partition is
replayed in a worker thread, and requests for its groups get
COORDINATOR_LOAD_IN_PROGRESS until it is; partitions queued together are
released together, after the load has moved the groups found on the wrong
partition (stored under the old mapping that masked the hash's sign bit, see
:meth:`GroupCoordinator._move_misplaced`). When it stops leading a partition, its
groups are unloaded: timers cancelled, held JoinGroup/SyncGroup answered
NOT_COORDINATOR, and every later request for them gets NOT_COORDINATOR. Leader
epochs order the two: a resignation older than the load it would undo is ignored.

Offsets and group metadata are appended to ``__consumer_offsets`` before the
in-memory cache changes and before the client hears back; an append completes
when the high watermark passes it (the ISR has it). While an append is under
way other requests are served; what it was for is re-checked when it completes
(the group may have rebalanced or been unloaded meanwhile), as Kafka's callbacks do.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.coordinator import storage
from broker.coordinator.group import Event, Group, GroupState, Member
from broker.coordinator.mixed import ClassicMembersMixin
from broker.coordinator.modern import ConsumerGroupsMixin
from broker.coordinator.offsets import OffsetsMixin, now_ms
from broker.coordinator.records import (OffsetAndMetadata, group_metadata_key, group_metadata_value, offset_commit_key,
                                        offset_commit_value, partition_for)
from broker.coordinator.storage import OFFSETS_TOPIC, StorageError, commit_error_for
from broker.coordinator.txn_offsets import TxnOffsetsMixin
from broker.protocol import ErrorCode

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.coordinator.storage import OffsetsStore
    from broker.metrics import BrokerMetrics

log = logging.getLogger("broker.coordinator")

S = GroupState


def join_error(member_id: str, error_code: int) -> dict:
    return {"error_code": int(error_code), "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}


@dataclass(slots=True)
class JoinRequest:
    """One JoinGroup as the coordinator needs it; ``fut`` gets the response fields."""

    fut: asyncio.Future
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    #: JoinGroup v9+ (KIP-814): a returning static leader may be told to skip its assignor
    supports_skip_assignment: bool
    #: JoinGroup v8+ (KIP-800): why the client joins, for the rebalance's log line
    reason: str


class GroupCoordinator(OffsetsMixin, TxnOffsetsMixin, ConsumerGroupsMixin, ClassicMembersMixin):
    """See the module docstring. ``await start()`` once the loop runs; ``await shutdown()``."""

    def __init__(self, config: "BrokerConfig", store: "OffsetsStore", metrics: "BrokerMetrics") -> None:
        self.store = store
        cfg = config
        self.num_partitions: int = cfg.offsets_topic_num_partitions
        self.min_session_timeout_ms: int = cfg.group_min_session_timeout_ms
        self.max_session_timeout_ms: int = cfg.group_max_session_timeout_ms
        self.initial_rebalance_delay_ms: int = cfg.group_initial_rebalance_delay_ms
        self.group_max_size: int = cfg.group_max_size
        self.retention_ms: int = cfg.offsets_retention_minutes * 60_000
        self.retention_check_interval_ms: int = cfg.offsets_retention_check_interval_ms
        self.offset_metadata_max_bytes: int = cfg.offset_metadata_max_bytes
        self.new_member_join_timeout_ms: int = cfg.group_new_member_join_timeout_ms
        self.consumer_group_max_size: int = cfg["group.consumer.max.size"]
        self.migration_policy: str = cfg["group.consumer.migration.policy"]
        self.metrics = metrics
        self.groups: dict[str, Group] = {}
        #: TxnOffsetCommit offsets waiting for their transaction's marker: producer id -> group -> offsets
        self.pending_txn_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        #: partitions of __consumer_offsets this broker leads -> leader epoch (loaded or loading)
        self.owned: dict[int, int] = {}
        #: owned partitions not loaded yet (COORDINATOR_LOAD_IN_PROGRESS for their groups)
        self.loading: set[int] = set()
        #: owned partitions -> the loop time their loading ended (how long this broker has coordinated them)
        self.loaded_at: dict[int, float] = {}
        #: partitions waiting for the loader
        self._queued: set[int] = set()
        self._loader: asyncio.Task | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._loop_: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        self._stopped = False
        self.metrics.watch_groups(self.metrics_snapshot)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop_ = asyncio.get_running_loop()
        self.num_partitions = self.store.partition_count() or self.num_partitions
        self.store.subscribe(self._on_become_leader, self._on_resign)
        self._spawn(self._expiry_loop())

    def _spawn(self, coro) -> asyncio.Task:
        """Run ``coro`` as a task the coordinator owns (cancelled at shutdown; failures logged)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("coordinator task failed", exc_info=t.exception())

        task.add_done_callback(done)
        return task

    def _on_loop(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the loop: now if called there, else soon (a listener on another thread)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop_:
            fn(*args)
        elif self._loop_ is not None:
            self._loop_.call_soon_threadsafe(fn, *args)

    # -- leadership: load and unload ---------------------------------------------------------------
    def _on_become_leader(self, partition: int, epoch: int) -> None:
        self._on_loop(self._become_leader, partition, epoch)

    def _on_resign(self, partition: int, epoch: int) -> None:
        self._on_loop(self._resign, partition, epoch)

    def _become_leader(self, partition: int, epoch: int) -> None:
        if self._stopped or self.owned.get(partition, -2) >= epoch:
            return
        if partition in self.owned:  # still the leader, in a new epoch: what is cached is current
            self.owned[partition] = epoch
            return
        self.num_partitions = self.store.partition_count() or self.num_partitions
        self.owned[partition] = epoch
        self.loading.add(partition)
        self._queued.add(partition)
        self._idle.clear()
        if self._loader is None or self._loader.done():
            self._loader = self._spawn(self._load_queued())

    def _resign(self, partition: int, epoch: int) -> None:
        current = self.owned.get(partition)
        if current is None or current > epoch:
            return
        del self.owned[partition]
        self.loading.discard(partition)
        self.loaded_at.pop(partition, None)
        self._queued.discard(partition)
        self._unload(partition)
        log.info("resigned as coordinator of %s-%d (leader epoch %d)", OFFSETS_TOPIC, partition, epoch)

    def _unload(self, partition: int) -> None:
        """Forget the groups of ``partition``; members waiting on them are answered NOT_COORDINATOR."""
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            self._drop_group(self.groups.pop(group_id), ErrorCode.NOT_COORDINATOR)
        for by_group in self.pending_txn_offsets.values():
            for group_id in [g for g in by_group if self.partition_for(g) == partition]:
                del by_group[group_id]

    def _drop_group(self, group: Group, error: int) -> None:
        self.drop_consumer_members(group)
        self._cancel_join_timer(group)
        for member in group.members.values():
            self._cancel_heartbeat(member)
            self._finish_join(member, join_error(member.member_id, error))
            self._finish_sync(member, error)

    async def _load_queued(self) -> None:
        """Load every queued partition; loop while more arrive (one loader at a time)."""
        while self._queued and not self._stopped:
            batch, self._queued = self._queued, set()
            await self._load(batch)
        if not self.loading:
            self._idle.set()

    async def _load(self, batch: set[int]) -> None:
        """Replay the partitions of ``batch``, install their groups, move misplaced ones, release them.

        The partitions are released together, after the moves, so no request for a
        moved group is served from its new partition before its records are there.
        A partition resigned meanwhile is dropped (and loaded again if led again).
        """
        started = time.perf_counter()
        states: dict[int, storage.PartitionState] = {}
        for p in sorted(batch):
            partition_started = time.perf_counter()
            try:
                states[p] = await self.store.replay(p)
            except StorageError as exc:
                log.warning("not loading %s-%d: %s", OFFSETS_TOPIC, p, exc)
                continue
            except Exception:
                log.exception("loading %s-%d failed", OFFSETS_TOPIC, p)
                continue
            self.metrics.coordinator_load_duration.observe(time.perf_counter() - partition_started)
        states = {p: st for p, st in states.items() if self._still_loading(p)}
        loaded = moved = 0
        for p, state in states.items():
            for group_id in state.group_ids():
                if self.partition_for(group_id) == p:
                    modern = state.modern.get(group_id)
                    if modern is not None and modern["epoch"] is None:
                        modern = None
                    if modern is not None and state.latest_kind.get(group_id) != "consumer":
                        modern = None  # classic again later (a downgrade whose tombstones are missing)
                    group = self._install(group_id, state.groups.get(group_id) if modern is None else None,
                                          state.offsets.get(group_id, {}))
                    if modern is not None:
                        self.install_consumer_group(group, modern)
                    loaded += 1
        for p, state in states.items():
            for group_id in sorted(state.group_ids()):
                if self.partition_for(group_id) != p:
                    moved += await self._move_misplaced(group_id, p, state)
        for state in states.values():
            for producer_id, by_group in state.pending_txn_offsets.items():
                for group_id, offsets in by_group.items():
                    self.groups.setdefault(group_id, Group(group_id))
                    self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)
        for p in batch:
            if self._still_loading(p):
                self.loading.discard(p)
                self.loaded_at[p] = asyncio.get_running_loop().time()
        if states:
            log.info("coordinator loaded %d group(s) from %d partition(s) of %s in %.3f s%s", loaded + moved,
                     len(states), OFFSETS_TOPIC, time.perf_counter() - started,
                     f"; moved {moved} to their partition" if moved else "")

    def _still_loading(self, partition: int) -> bool:
        """A partition of the batch being loaded is still ours and not queued again (resigned and re-led)."""
        return partition in self.owned and partition not in self._queued

    def _install(self, group_id: str, value, offsets: dict) -> Group:
        group = Group.from_value(group_id, value) if value is not None else Group(group_id)
        group.offsets = dict(offsets)
        self.groups[group_id] = group
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        return group

    async def _move_misplaced(self, group_id: str, old: int, state: storage.PartitionState) -> int:
        """Move a group found on partition ``old`` to the one :func:`partition_for` names; 1 if moved.

        Such a group was stored under the mapping that masked the hash's sign bit.
        Its records are rewritten on the new partition, then tombstoned on the old
        one, so a crash in between only repeats the move at the next load. What the
        new partition already holds for the group (its metadata, an offset of the
        same topic-partition) is newer and wins; the old partition only fills gaps.
        The new partition must be led here (a single node: always); otherwise the
        group is left where it is.
        """
        new = self.partition_for(group_id)
        if new not in self.owned:
            log.warning("group %s is stored on %s-%d but belongs on partition %d, which this broker does not "
                        "lead; left where it is", group_id, OFFSETS_TOPIC, old, new)
            return 0
        value = state.groups.get(group_id)
        offsets = state.offsets.get(group_id, {})
        group = self.groups.get(group_id)
        records = []
        if group is None:
            group = self._install(group_id, value, {})
            if value is not None:
                records.append((group_metadata_key(group_id), group_metadata_value(value)))
        gaps = {tp: om for tp, om in offsets.items() if tp not in group.offsets}
        records += [(offset_commit_key(group_id, t, p), offset_commit_value(om)) for (t, p), om in gaps.items()]
        tombstones = [(offset_commit_key(group_id, t, p), None) for t, p in offsets]
        if value is not None:
            tombstones.append((group_metadata_key(group_id), None))
        group.offsets.update(gaps)
        try:
            if records:
                await self.store.append(new, records)
            await self.store.append(old, tombstones)
        except StorageError as exc:
            log.warning("moving group %s from %s-%d to partition %d failed (retried at the next load): %s",
                        group_id, OFFSETS_TOPIC, old, new, exc)
        else:
            log.info("group %s moved from %s-%d to partition %d (Kafka's group to partition mapping)",
                     group_id, OFFSETS_TOPIC, old, new)
        return 1

    async def wait_loaded(self) -> None:
        """Wait until every partition led here is loaded (tests, tools)."""
        await self._idle.wait()

    async def shutdown(self) -> None:
        self._stopped = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        for group in self.groups.values():
            self._drop_group(group, ErrorCode.NOT_COORDINATOR)
        self._idle.set()

    def metrics_snapshot(self) -> tuple[dict[str, int], int]:
        """({state name: groups}, offsets cached) for the metrics scrape (another thread: reads only)."""
        by_state: dict[str, int] = {}
        cached = 0
        for group in list(self.groups.values()):
            by_state[group.state_name] = by_state.get(group.state_name, 0) + 1
            cached += len(group.offsets)
        return by_state, cached

    # -- routing -------------------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def group_error(self, group_id: str | None) -> int:
        """INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR or NONE for a group."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if self._stopped:
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    async def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist (StorageError if refused).

        When this call created it, it returns once the partitions led here are loaded,
        so the request that triggered the creation is served rather than told to retry.
        """
        existed = self.store.partition_count() is not None
        self.num_partitions = await self.store.ensure_topic()
        if not existed:
            await self._idle.wait()

    async def serving_error(self, group_id: str | None) -> int:
        """:meth:`group_error` after creating ``__consumer_offsets`` if need be (JoinGroup, OffsetCommit)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        try:
            await self.ensure_topic()
        except StorageError as exc:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.group_error(group_id)

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]):
        """Append to the group's partition; an awaitable that completes when the ISR has it."""
        return self.store.append(self.partition_for(group_id), records)

    def _append_transactional(self, group_id: str, producer_id: int, producer_epoch: int,
                              records: list[tuple[bytes, bytes | None]]):
        """Append ``records`` as the producer's transactional batch (TxnOffsetCommit); awaitable as :meth:`_append`."""
        return self.store.append(self.partition_for(group_id), records, producer_id=producer_id,
                                 producer_epoch=producer_epoch)

    async def _store_group(self, group: Group) -> int:
        """Append the group's metadata record; NONE or the error to answer with."""
        try:
            await self._append(group.group_id,
                               [(group_metadata_key(group.group_id), group_metadata_value(group.to_value()))])
            return ErrorCode.NONE
        except StorageError as exc:
            log.warning("storing group %s failed: %s", group.group_id, exc)
            return commit_error_for(exc.error_code)

    def _is_current(self, group: Group) -> bool:
        """The group is still the one this coordinator serves (not unloaded, deleted or replaced)."""
        return not self._stopped and self.groups.get(group.group_id) is group

    # -- timers ----------------------------------------------------------------------------------------
    def _loop(self) -> asyncio.AbstractEventLoop:
        return self._loop_ or asyncio.get_running_loop()

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        self._cancel_heartbeat(member)
        delay = (member.session_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        member.heartbeat_timer = self._loop().call_later(delay, self._heartbeat_expired, group, member)

    @staticmethod
    def _cancel_heartbeat(member: Member) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.is_new and member.awaiting_join:
            why = f"new member {member.member_id} did not complete its join in time"
        elif member.awaiting_join or member.awaiting_sync:
            self._schedule_heartbeat(group, member)
            return
        else:
            why = f"member {member.member_id} session expired"
        log.info("group %s: %s", group.group_id, why)
        self._remove_member_and_update_group(group, member, why)

    def _cancel_join_timer(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    # -- futures -----------------------------------------------------------------------------------------
    @staticmethod
    def _finish_join(member: Member, response: dict) -> None:
        fut, member.join_waiter = member.join_waiter, None
        if fut is not None and not fut.done():
            fut.set_result(response)

    @staticmethod
    def _finish_sync(member: Member, error_code: int, assignment: bytes = b"") -> None:
        fut, member.sync_waiter = member.sync_waiter, None
        if fut is not None and not fut.done():
            fut.set_result((int(error_code), assignment))

    def _join_response(self, group: Group, member: Member) -> dict:
        members = []
        if group.is_leader(member.member_id):
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata_for(group.protocol_name)} for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id or "", "skip_assignment": False, "member_id": member.member_id,
                "members": members}

    # -- JoinGroup -----------------------------------------------------------------------------------------
    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                         client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool, supports_skip_assignment: bool = False,
                         reason: str | None = None) -> dict:
        """Kafka's handleJoinGroup; returns the JoinGroup response fields (held until the rebalance ends).

        ``supports_skip_assignment`` (JoinGroup v9+, KIP-814) changes only the answer to a
        static leader that comes back to a Stable group; ``reason`` (v8+, KIP-800) goes into
        the log line of any rebalance the join starts.
        """
        error = await self.serving_error(group_id)
        if error:
            return join_error(member_id, error)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return join_error(member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        unknown = member_id == ""
        if group is None:
            if not unknown:
                return join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = Group(group_id, current_state_timestamp=now_ms())
        if group.modern is not None:
            if group.modern.members:  # a classic member of a consumer group (KIP-848's migration)
                return await self.classic_join_consumer_group(
                    group, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                    session_timeout_ms, protocol_type, protocols, require_known_member_id)
            log.info("group %s: the empty consumer group becomes a classic group, its offsets kept", group_id)
            self.append_later(group_id, self.modern_tombstones(group))
            group.modern = None
        if unknown and len(group.members) >= self.group_max_size:
            return join_error(member_id, ErrorCode.GROUP_MAX_SIZE_REACHED)
        req = JoinRequest(self._loop().create_future(), group_instance_id, client_id, client_host,
                          rebalance_timeout_ms, session_timeout_ms, protocol_type,
                          [(n, bytes(m)) for n, m in protocols], supports_skip_assignment,
                          reason or "not provided")
        if unknown:
            self._join_unknown(group, req, require_known_member_id)
        else:
            self._join_known(group, req, member_id)
        return await req.fut

    def _join_unknown(self, group: Group, req: "JoinRequest", require_known_member_id: bool) -> None:
        if group.is_(S.DEAD):
            req.fut.set_result(join_error("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports(req.protocol_type, req.protocols):
            req.fut.set_result(join_error("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{req.client_id}-{uuid.uuid4()}"
        old_id = group.static_member_id(req.instance_id)
        if old_id is not None:
            self._update_static_member_and_rebalance(group, req, old_id, new_id)
        elif require_known_member_id and req.instance_id is None:
            group.pending_members.add(new_id)
            self._loop().call_later(req.session_timeout_ms / 1000, self._pending_expired, group, new_id)
            req.fut.set_result(join_error(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, req, new_id)

    def _pending_expired(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._check_join_complete(group)

    def _join_known(self, group: Group, req: "JoinRequest", member_id: str) -> None:
        if group.is_(S.DEAD):
            req.fut.set_result(join_error(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports(req.protocol_type, req.protocols):
            req.fut.set_result(join_error(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._add_member_and_rebalance(group, req, member_id)
            return
        current = group.static_member_id(req.instance_id)
        if req.instance_id is not None and current not in (None, member_id):
            req.fut.set_result(join_error(member_id, ErrorCode.FENCED_INSTANCE_ID))
            return
        member = group.members.get(member_id)
        # a static member whose instance id the group does not know resets its member id and retries
        if member is None or group.is_(S.EMPTY) or (req.instance_id is not None and current is None):
            req.fut.set_result(join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        same = member.matches(req.protocols)
        if group.is_(S.COMPLETING_REBALANCE) and same:
            self._schedule_heartbeat(group, member)
            req.fut.set_result(self._join_response(group, member))
        elif group.is_(S.STABLE) and same and not group.is_leader(member_id):
            self._schedule_heartbeat(group, member)
            req.fut.set_result(self._join_response(group, member))
        else:
            why = ("leader rejoined" if group.is_(S.STABLE) and same else
                   "joined during the rebalance" if group.is_(S.PREPARING_REBALANCE) else "changed its protocols")
            self._update_member_and_rebalance(group, member, req, f"member {member_id} {why}")

    def _add_member_and_rebalance(self, group: Group, req: "JoinRequest", member_id: str) -> None:
        member = Member(member_id, req.instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                        req.session_timeout_ms, req.protocol_type, req.protocols, join_waiter=req.fut, is_new=True)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # its socket is muted while the JoinGroup is held, so only this timer notices a client that gave up
        self._schedule_heartbeat(group, member, self.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined; client reason: {req.reason}")
        self._check_join_complete(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, req: "JoinRequest", why: str) -> None:
        if member.join_waiter is not None and member.join_waiter is not req.fut:
            self._finish_join(member, join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        member.update(req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        member.join_waiter = req.fut
        if not member.is_new:  # a new member's join timeout is not extended by retries
            self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"{why}; client reason: {req.reason}")
        self._check_join_complete(group)

    def _update_static_member_and_rebalance(self, group: Group, req: "JoinRequest", old_id: str,
                                            new_id: str) -> None:
        """Kafka's updateStaticMemberAndRebalance: a static member came back without its member id.

        The old id is fenced and the new id takes its place (assignment kept) with the
        request's protocols and timeouts. A Stable group whose selected protocol does not
        change stays Stable: the group is stored and the member answered at once, with the
        leader id from before the replacement, so a returning leader acts as a follower and
        its SyncGroup gets its stored assignment (KIP-814's v9 answer instead names it leader
        with ``skip_assignment``). CompletingRebalance rebalances (the leader may be assigning
        to the old id); PreparingRebalance just takes the join.
        """
        current_leader = group.leader_id
        old = group.members[old_id]
        self._finish_join(old, join_error(old_id, ErrorCode.FENCED_INSTANCE_ID))
        self._finish_sync(old, ErrorCode.FENCED_INSTANCE_ID)
        member = group.replace_static_member(req.instance_id, old_id, new_id)
        before = member.update(req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        member.join_waiter = req.fut
        self._schedule_heartbeat(group, member)
        why = f"static member {new_id} (instance {req.instance_id}) rejoined; client reason: {req.reason}"
        log.info("group %s: static member %s rejoined in %s as %s, fencing %s", group.group_id, req.instance_id,
                 group.state.value, new_id, old_id)
        if group.is_(S.STABLE) and group.select_protocol() == group.protocol_name:
            self._spawn(self._store_static_replacement(group, member, req, current_leader, old_id, before))
            return
        if group.is_(S.STABLE):
            self._prepare_rebalance(group, f"{why} with a change of the selected protocol")
        elif group.is_(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, why)
        self._check_join_complete(group)

    async def _store_static_replacement(self, group: Group, member: Member, req: "JoinRequest",
                                        current_leader: str | None, old_id: str, before) -> None:
        """The Stable case above, once the group is stored: answer the member, or undo the replacement."""
        new_id = member.member_id
        error = await self._store_group(group)
        if not self._is_current(group):
            self._finish_join(member, join_error(new_id, ErrorCode.NOT_COORDINATOR))
            return
        if error:
            if group.members.get(new_id) is member:  # nothing changed it meanwhile: back to the old id
                member.update(*before)
                group.replace_static_member(req.instance_id, new_id, old_id)
                self._schedule_heartbeat(group, member)
            self._finish_join(member, join_error("", error))
            return
        response = self._join_response(group, member)
        if not req.supports_skip_assignment:
            response.update(leader=current_leader or "", members=[])
        elif group.is_leader(new_id):
            response["skip_assignment"] = True
        self._finish_join(member, response)

    # -- the join phase ------------------------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            group.clear_assignments()
            for m in group.members.values():
                self._finish_sync(m, ErrorCode.REBALANCE_IN_PROGRESS)
        initial = group.is_(S.EMPTY)
        group.transition(Event.PREPARE_REBALANCE, now_ms())
        self._cancel_join_timer(group)
        log.info("group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        loop = self._loop()
        if initial:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.join_initial = True
            group.new_member_added = False
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_expired, group, delay, remaining)
        else:
            group.join_initial = False
            group.join_timer = loop.call_later(group.max_rebalance_timeout_ms() / 1000, self._complete_join, group)
            # as Kafka's purgatory tries a new join phase at once: the last member leaving empties the group now
            self._check_join_complete(group)

    def _initial_delay_expired(self, group: Group, delay: int, remaining: int) -> None:
        group.join_timer = None
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            group.join_timer = self._loop().call_later(step / 1000, self._initial_delay_expired, group, delay,
                                                       remaining - step)
            return
        self._complete_join(group)

    def _check_join_complete(self, group: Group) -> None:
        if group.is_(S.PREPARING_REBALANCE) and not group.join_initial and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._cancel_join_timer(group)
        group.join_initial = False
        if not group.is_(S.PREPARING_REBALANCE):
            return
        for m in group.not_yet_rejoined():
            if not m.is_static:
                log.info("group %s: member %s did not rejoin in time", group.group_id, m.member_id)
                self._cancel_heartbeat(m)
                group.remove(m.member_id)
        if not group.elect_joined_leader() and group.members:
            # only static members are left and none came back: a generation now would wait for a
            # leader that is not there, so wait one more rebalance timeout (sessions may expire)
            timeout_ms = group.max_rebalance_timeout_ms()
            log.warning("group %s: no member rejoined; waiting another %d ms", group.group_id, timeout_ms)
            group.join_timer = self._loop().call_later(timeout_ms / 1000, self._complete_join, group)
            return
        group.init_next_generation(now_ms())
        if group.is_(S.EMPTY):
            self._spawn(self._store_group(group))  # a failure is logged; nobody waits for it
            return
        log.info("group %s: generation %d with %d member(s), protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for m in list(group.members.values()):
            if m.join_waiter is not None:
                self._finish_join(m, self._join_response(group, m))
                m.is_new = False
                self._schedule_heartbeat(group, m)

    # -- SyncGroup ------------------------------------------------------------------------------------------------
    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> tuple[int, bytes, Group | None]:
        """Kafka's handleSyncGroup: (error_code, assignment, group)."""
        error = self.group_error(group_id)
        if error:
            return error, b"", None
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, b"", None
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, b"", group
        if group.has_consumer_members:
            code, assignment = self.classic_sync_consumer_group(group, generation_id, member_id, group_instance_id,
                                                                protocol_type, protocol_name)
            return code, assignment, group
        if group_instance_id is not None and group.static_member_id(group_instance_id) not in (None, member_id):
            return ErrorCode.FENCED_INSTANCE_ID, b"", group
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, b"", group
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION, b"", group
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b"", group
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID, b"", group
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS, b"", group
        if group.is_(S.STABLE):
            self._schedule_heartbeat(group, member)
            return ErrorCode.NONE, member.assignment, group
        # CompletingRebalance: wait for the leader's assignment
        fut = self._loop().create_future()
        if member.sync_waiter is not None:
            self._finish_sync(member, ErrorCode.REBALANCE_IN_PROGRESS)
        member.sync_waiter = fut
        self._schedule_heartbeat(group, member)
        if group.is_leader(member_id):
            generation = group.generation_id
            for m in group.members.values():
                m.assignment = bytes(assignments.get(m.member_id, b""))
            error = await self._store_group(group)
            # as Kafka's callback: only the generation that was stored moves on (a rebalance or an
            # unload meanwhile has answered the waiters already)
            if self._is_current(group) and group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation:
                if error:
                    group.clear_assignments()
                    for m in group.members.values():
                        self._finish_sync(m, error)
                    self._maybe_prepare_rebalance(group, f"storing the assignment failed ({error})")
                else:
                    group.transition(Event.ASSIGNMENT_RECEIVED, now_ms())
                    self.metrics.group_rebalances.inc()
                    log.info("group %s: generation %d is stable", group.group_id, group.generation_id)
                    for m in group.members.values():
                        if m.sync_waiter is not None:
                            self._finish_sync(m, ErrorCode.NONE, m.assignment)
                            self._schedule_heartbeat(group, m)
        code, assignment = await fut
        return code, assignment, group

    # -- Heartbeat ---------------------------------------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        error = self.group_error(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.has_consumer_members:
            return self.classic_heartbeat_consumer_group(group, generation_id, member_id, group_instance_id)
        if group_instance_id is not None and group.static_member_id(group_instance_id) not in (None, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_heartbeat(group, member)
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup ---------------------------------------------------------------------------------------------------
    def leave_group(self, group_id: str, members: list[tuple[str, str | None]],
                    reasons: list[str | None] | None = None) -> tuple[int, list[int]]:
        """(top-level error, per-member errors) for members given as (member_id, group_instance_id).

        ``reasons`` (LeaveGroup v5+, KIP-800), one per member, go into the log lines."""
        error = self.group_error(group_id)
        if error:
            return error, [error] * len(members)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(members)
        if group.has_consumer_members:
            return ErrorCode.NONE, self.classic_leave_consumer_group(group, members,
                                                                     reasons or [None] * len(members))
        out = []
        for (member_id, instance_id), reason in zip(members, reasons or [None] * len(members)):
            if instance_id is not None:
                current = group.static_member_id(instance_id)
                if current is None:
                    out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    out.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._check_join_complete(group)
                out.append(ErrorCode.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            why = f"member {member_id} left; client reason: {reason or 'not provided'}"
            log.info("group %s: %s", group.group_id, why)
            self._remove_member_and_update_group(group, member, why)
            out.append(ErrorCode.NONE)
        return ErrorCode.NONE, out

    def _remove_member_and_update_group(self, group: Group, member: Member, why: str) -> None:
        self._cancel_heartbeat(member)
        self._finish_join(member, join_error(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        self._finish_sync(member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, why)
        elif group.is_(S.PREPARING_REBALANCE):
            self._check_join_complete(group)

    # -- groups as a whole -----------------------------------------------------------------------------------------
    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for group_id in group_ids:
            error = self.group_error(group_id)
            group = self.groups.get(group_id) if not error else None
            if error:
                out[group_id] = error
            elif group is None or group.is_(S.DEAD):
                out[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(S.EMPTY) or group.has_consumer_members:
                out[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                out[group_id] = await self._remove_group(group)
        return out

    async def _remove_group(self, group: Group) -> int:
        """Mark the group Dead, tombstone it and its offsets, forget it; NONE or the error to answer with.

        Dead first, as Kafka does: a member joining while the tombstones are written
        is told COORDINATOR_NOT_AVAILABLE and finds a fresh group when it retries.
        If the append fails the group is forgotten all the same (its records come
        back at the next load), and the error is answered.
        """
        group.transition(Event.REMOVE, now_ms())
        records = [(offset_commit_key(group.group_id, t, p), None) for t, p in group.offsets]
        records += self.modern_tombstones(group)
        records.append((group_metadata_key(group.group_id), None))
        group.offsets.clear()
        try:
            await self._append(group.group_id, records)
            return ErrorCode.NONE
        except StorageError as exc:
            log.warning("removing group %s failed: %s", group.group_id, exc)
            return commit_error_for(exc.error_code)
        finally:
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if not g.is_(S.DEAD)]

    def describe(self, group_id: str) -> tuple[int, Group | None]:
        error = self.group_error(group_id)
        if error:
            return error, None
        return ErrorCode.NONE, self.groups.get(group_id)
