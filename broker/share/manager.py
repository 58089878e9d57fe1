"""Share fetches and acknowledgements on a partition leader (KIP-932): share sessions, share-partitions, their
locks and their persisted state. Kafka 4.2's ``SharePartitionManager`` and ``ShareSessionCache``.

**Share sessions.** One per (group, member) on each broker, as librdkafka and the Java client keep them::

    ShareFetch epoch 0       a new session with the partitions named (a session of the same member ends first,
                             its records released); acknowledgements here are INVALID_REQUEST
    ShareFetch epoch N > 0   N must be the session's epoch (else INVALID_SHARE_SESSION_EPOCH; no session:
                             SHARE_SESSION_NOT_FOUND); the partitions named join it, ForgottenTopicsData leave it
                             (their records released); the epoch becomes N + 1 (INT32_MAX wraps to 1)
    ShareFetch epoch -1      acknowledgements applied, nothing fetched, the session ends
    ShareAcknowledge         the same rules (epoch 0: INVALID_SHARE_SESSION_EPOCH)

A session ends, its member's records released for redelivery, when it is closed (epoch -1), replaced, or when
the connection that opened it closes. At most ``group.share.max.share.sessions`` sessions are kept
(SHARE_SESSION_LIMIT_REACHED beyond).

**Share-partitions** (:class:`~broker.share.partition.SharePartition`) are made on the leader at the first
fetch of a group: their state is read from the metadata store, or starts at the group's
``share.auto.offset.reset`` (``latest``: the high watermark, the default; ``earliest``: the log start;
``by_duration:PnDTnHnMnS``: the first offset of a record no older than that). A share-partition made in
another leader epoch is made again from the store (the leadership moved and came back).

**Persistence.** After every change (acquisition aside) the state is written to the metadata store at
``/share_group_state/<group, URL-encoded>/<topic id>-<partition>`` as JSON, version 1::

    {"version":1,"start_offset":42,"state_batches":[[42,45,2,1],[46,46,0,2]],"state_epoch":1,"leader_epoch":7}

(runs of [first offset, last offset, state, delivery count]; the state epoch, which AlterShareGroupOffsets
moves on, and the leader epoch of the leader that wrote it, -1 from AlterShareGroupOffsets; both absent,
read as 0 and -1, in what earlier versions wrote). Each write is a compare-and-set on the node's version:
a share-partition whose node was deleted, altered, or written by a later leader is dropped from memory
and read again at the next fetch; one written by an earlier leader is written over. An acknowledgement is answered only once the
state that includes it is stored; writes of one share-partition are coalesced (one at a time, each carrying
every change made before it started). A new leader reads the state: acknowledged records are never delivered
again, records in flight are delivered again.

**Fetching.** The records of every partition of the session are acquired in turn (``max_records`` is a budget
for the whole request, ``max_bytes`` too, at least one batch answered), from the leader's log up to the high
watermark (``share.isolation.level=read_committed``: the last stable offset). With nothing acquired the request
waits up to ``max_wait_ms`` for an append, a release or a lock expiry on its partitions.

Loop-only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.cluster.metadata import SHARE_GROUP_STATE_ROOT
from broker.cluster.store import BadVersionError, NodeExistsError, NoNodeError
from broker.log import OffsetOutOfRange
from broker.protocol import ErrorCode
from broker.server.group_configs import auto_offset_reset_duration_ms, sanitize_group
from broker.sasl import desanitize_user
from broker.records.view import CONTROL_MASK, TRANSACTIONAL_MASK, iter_batch_views
from broker.share.partition import AckError, LogBatch, SharePartition, check_batches
from broker.topic_ids import format_topic_id, parse_topic_id

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.share")

INT32_MAX = 2**31 - 1
#: The most a share fetch reads of one partition at a time (unless ``max_records`` needs more, at 4 KiB a record)
READ_WINDOW_BYTES = 1 << 20

TopicIdPartition = tuple[uuid.UUID, int]


def group_state_root(group_id: str) -> str:
    """Where the store keeps what a share group consumed (the group id URL-encoded as Kafka's Sanitizer does)."""
    return f"{SHARE_GROUP_STATE_ROOT}/{sanitize_group(group_id)}"


def state_path(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group_state_root(group_id)}/{format_topic_id(topic_id)}-{partition}"


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT32_MAX else epoch + 1


@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    partitions: set[TopicIdPartition] = field(default_factory=set)
    connection: object = None


@dataclass(eq=False)
class _Held:
    """A share-partition with the bookkeeping of its persistence."""

    sp: SharePartition
    topic_id: uuid.UUID
    leader_epoch: int
    stored_version: int = 0
    writing: asyncio.Task | None = None
    #: the store's version of the state node as this share-partition last read or wrote it (None: no node
    #: then); every write is a compare-and-set on it (see :meth:`ShareManager._store_write`)
    node_version: int | None = None
    #: the state epoch it read (0 for a new state): AlterShareGroupOffsets makes the next one
    state_epoch: int = 0


class _Fenced(Exception):
    """The state node changed under a share-partition: it is dropped and read again at the next fetch."""


class ShareManager:
    """See the module docstring."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._held: dict[tuple[str, str, int], _Held] = {}
        self._loading: dict[tuple[str, str, int], asyncio.Future] = {}

    def held(self) -> list:
        """The share-partitions held in memory (for the metrics)."""
        return list(self._held.values())

    # -- group settings (group configs over the broker's) -------------------------------------------
    def _group_value(self, group_id: str, name: str):
        """The group's setting: its group config, else the broker's default (:mod:`broker.server.group_configs`)."""
        return self.broker.group_configs.value(group_id, name)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group_value(group_id, "share.record.lock.duration.ms"))

    def delivery_limit(self, group_id: str) -> int:
        return int(self._group_value(group_id, "share.delivery.count.limit"))

    def max_in_flight(self, group_id: str) -> int:
        return int(self._group_value(group_id, "share.partition.max.record.locks"))

    def read_committed(self, group_id: str) -> bool:
        return self._group_value(group_id, "share.isolation.level") == "read_committed"

    # -- sessions --------------------------------------------------------------------------------
    def open_session(self, group_id: str, member_id: str, connection) -> ShareSession | None:
        """A new session (epoch 0): the member's old one ends. None when the cache is full."""
        key = (group_id, member_id)
        old = self.sessions.pop(key, None)
        if old is not None:
            self._release_session(old)
        if len(self.sessions) >= self.broker.config["group.share.max.share.sessions"]:
            return None
        session = self.sessions[key] = ShareSession(group_id, member_id, 1, connection=connection)
        closed = getattr(connection, "closed", None)
        if isinstance(closed, asyncio.Future):
            closed.add_done_callback(lambda _f, s=session: self.close_session(s))
        return session

    def session_error(self, group_id: str, member_id: str, epoch: int) -> tuple[int, ShareSession | None]:
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != -1 and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return ErrorCode.NONE, session

    def close_session(self, session: ShareSession) -> None:
        """The session ends (closed, replaced, or its connection closed): its member's records go back."""
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
            self._release_session(session)
            self.forget_group(session.group_id)

    def _release_session(self, session: ShareSession) -> None:
        for tip in list(session.partitions):
            self.release(session.group_id, session.member_id, tip)

    def release(self, group_id: str, member_id: str, tip: TopicIdPartition) -> None:
        name = self.broker.metadata_cache.topic_name(tip[0])
        held = self._held.get((group_id, name, tip[1])) if name is not None else None
        if held is not None and held.sp.release_member(member_id, self.delivery_limit(group_id)):
            self._changed(held)

    # -- share-partitions ------------------------------------------------------------------------
    async def share_partition(self, group_id: str, topic_id: uuid.UUID, name: str, index: int,
                              partition) -> _Held:
        """The group's share-partition of ``name``-``index`` (this broker leads it), made or loaded if need be."""
        key = (group_id, name, index)
        held = self._held.get(key)
        if held is not None and held.leader_epoch == partition.leader_epoch and held.topic_id == topic_id:
            return held
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        future = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            held = await self._load(group_id, topic_id, name, index, partition)
            self._held[key] = held
            self._changed(held)  # a new share-partition's start is stored at once (DescribeShareGroupOffsets)
            future.set_result(held)
            return held
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters see it raised
            raise
        finally:
            del self._loading[key]

    async def _load(self, group_id: str, topic_id: uuid.UUID, name: str, index: int, partition) -> _Held:
        path = state_path(group_id, topic_id, index)
        found = await self.broker.run_blocking(self.broker.metadata.store.get_or_none, path)
        if found is not None:
            sp = SharePartition(group_id, name, index, 0)
            stored = json.loads(found[0])
            sp.restore(stored)
            held = _Held(sp, topic_id, partition.leader_epoch, node_version=found[1].version,
                         state_epoch=int(stored.get("state_epoch", 0)))
            log.info("share group %s: %s-%d resumed at offset %d", group_id, name, index, sp.start_offset)
        else:
            start = self._initial_offset(group_id, partition)
            held = _Held(SharePartition(group_id, name, index, start), topic_id, partition.leader_epoch)
            held.sp.version = 1
            log.info("share group %s: %s-%d starts at offset %d", group_id, name, index, start)
        held.sp.move_start(partition.log_start_offset)
        return held

    def _initial_offset(self, group_id: str, partition) -> int:
        reset = str(self._group_value(group_id, "share.auto.offset.reset"))
        if reset == "earliest":
            return partition.log_start_offset
        duration_ms = auto_offset_reset_duration_ms(reset)
        if duration_ms is not None:
            since = int(time.time() * 1000) - duration_ms
            found = partition.offset_for_timestamp(since)
            return found[0] if found is not None else partition.high_watermark
        return partition.high_watermark

    def _current(self, held: _Held) -> bool:
        """Whether ``held`` is the share-partition in use (not one replaced after a leader change, or dropped)."""
        return self._held.get((held.sp.group_id, held.sp.topic, held.sp.partition)) is held

    def _changed(self, held: _Held) -> None:
        """Persist in the background (lock expiries, releases); wake fetches waiting on the partition."""
        if not self._current(held):
            return  # a replaced one never writes over the state its successor keeps
        self.broker.replicas.purgatory.notify((held.sp.topic, held.sp.partition))
        if held.writing is None and held.stored_version < held.sp.version:
            held.writing = asyncio.get_running_loop().create_task(self._write(held))

    async def persist(self, held: _Held) -> bool:
        """Wait until the state as it is now is stored; False when the store refused it."""
        target = held.sp.version
        while held.stored_version < target:
            if held.writing is None:
                held.writing = asyncio.get_running_loop().create_task(self._write(held))
            if not await asyncio.shield(held.writing):
                return False
        return True

    async def _write(self, held: _Held) -> bool:
        if not self._current(held):
            held.writing = None
            return False
        version = held.sp.version
        data = json.dumps({"version": 1, **held.sp.snapshot(), "state_epoch": held.state_epoch,
                           "leader_epoch": held.leader_epoch}, separators=(",", ":")).encode()
        path = state_path(held.sp.group_id, held.topic_id, held.sp.partition)
        try:
            held.node_version = await self.broker.run_blocking(self._store_write, path, data, held.node_version,
                                                               held.state_epoch, held.leader_epoch)
            held.stored_version = max(held.stored_version, version)
            return True
        except _Fenced:
            log.info("share group %s: the stored state of %s-%d was changed elsewhere (offsets altered or "
                     "deleted); read again at the next fetch", held.sp.group_id, held.sp.topic, held.sp.partition)
            self._drop(held)
            return False
        except Exception as exc:  # the store is unreachable: the state stays in memory, written at the next change
            log.warning("share group %s: state of %s-%d not stored: %s", held.sp.group_id, held.sp.topic,
                        held.sp.partition, exc)
            return False
        finally:
            held.writing = None
            if held.stored_version < held.sp.version:
                self._changed(held)

    def _store_write(self, path: str, data: bytes, node_version: int | None, state_epoch: int,
                     leader_epoch: int) -> int:
        """Blocking: write the state node as a compare-and-set on ``node_version`` (None: create it); the node's
        new version. When the node changed meanwhile, whoever changed it decides, as Kafka's share coordinator
        fences by state and leader epoch:

        * removed (offsets or the group deleted), or another state epoch (offsets altered), or written by a
          leader of a later epoch: this share-partition is stale, :class:`_Fenced`;
        * written by a leader of an earlier epoch (a former leader's last write, lock expiries it still ran)
          or of this one (a write of ours whose answer was lost): this leader's state wins, written over it.
        """
        store = self.broker.metadata.store
        for _attempt in range(5):
            try:
                if node_version is None:
                    store.create(path, data, make_parents=True)
                    return 0
                return store.set(path, data, version=node_version).version
            except NoNodeError as exc:
                raise _Fenced() from exc
            except (NodeExistsError, BadVersionError) as exc:
                found = store.get_or_none(path)
                if found is None:
                    raise _Fenced() from exc
                other = json.loads(found[0])
                if (int(other.get("state_epoch", 0)) != state_epoch
                        or int(other.get("leader_epoch", -1)) > leader_epoch):
                    raise _Fenced() from exc
                node_version = found[1].version
        raise _Fenced()

    def _drop(self, held: _Held) -> None:
        """``held`` leaves memory if it is still the one in use; its records in flight are forgotten."""
        key = (held.sp.group_id, held.sp.topic, held.sp.partition)
        if self._held.get(key) is held:
            del self._held[key]
            self.broker.replicas.purgatory.notify((held.sp.topic, held.sp.partition))

    # -- acquiring -------------------------------------------------------------------------------
    async def acquire(self, held: _Held, partition, member_id: str, max_records: int, max_bytes: int,
                      min_one: bool, record_limit: bool = False) -> tuple[list, bytes, int]:
        """Acquire from the log for ``member_id``: (AcquiredRecords, the batches' bytes, records acquired)."""
        sp = held.sp
        group_id = sp.group_id
        if partition.log_start_offset > sp.start_offset:
            sp.move_start(partition.log_start_offset)
        start = sp.first_to_read()
        read_committed = self.read_committed(group_id)
        try:
            # the bytes are copied to find the batches' offsets: read what ``max_records`` may need, not MaxBytes
            # (50 MB by default): a first batch larger than that still comes whole (``min_one``)
            window = min(max(max_bytes, 0), max(READ_WINDOW_BYTES, max_records * 4096))
            piece = partition.read(start, window, min_one_batch=min_one, read_committed=read_committed)
        except OffsetOutOfRange:
            sp.move_start(partition.log_start_offset)
            return [], b"", 0
        if piece.length == 0:
            return [], b"", 0
        data = await self.broker.run_blocking(piece.read_bytes)
        aborted = ([(a.producer_id, a.first_offset) for a in partition.aborted_transactions(start, partition.high_watermark)]
                   if read_committed else [])
        batches = list(_log_batches(data, aborted))
        duration_ms = self.lock_duration_ms(group_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + duration_ms / 1000
        runs, offsets, span = sp.acquire(member_id, batches, max_records, self.max_in_flight(group_id), deadline,
                                         record_limit)
        if offsets:
            loop.call_later(duration_ms / 1000, self._expire, held, member_id, offsets)
        if held.stored_version < sp.version and not offsets:
            self._changed(held)  # control batches archived: worth storing
        if span is None:
            return [], b"", 0
        return [{"first_offset": a, "last_offset": b, "delivery_count": c} for a, b, c in runs], \
            data[span[0]:span[1]], len(offsets)

    def _expire(self, held: _Held, member_id: str, offsets: list[int]) -> None:
        loop = asyncio.get_running_loop()
        if held.sp.expire(member_id, offsets, loop.time() + 0.001, self.delivery_limit(held.sp.group_id)):
            self._changed(held)

    def acknowledge(self, held: _Held, member_id: str, batches: list[dict], renew: bool = False) -> int:
        """Apply one partition's acknowledgements (the caller persists); the partition's error code. Renewed
        records (``renew``, v2) keep their lock for another lock duration."""
        reason = check_batches(batches, renew)
        if reason is not None:
            return ErrorCode.INVALID_REQUEST
        group_id = held.sp.group_id
        loop = asyncio.get_running_loop()
        duration = self.lock_duration_ms(group_id) / 1000
        try:
            renewed = held.sp.acknowledge(member_id, batches, self.delivery_limit(group_id), loop.time() + duration)
        except AckError as exc:
            log.debug("share group %s: acknowledgement of %s-%d refused: %s", group_id, held.sp.topic,
                      held.sp.partition, exc)
            return exc.code
        if renewed:
            loop.call_later(duration, self._expire, held, member_id, renewed)
        return ErrorCode.NONE

    def stored_offsets(self, group_id: str) -> dict[tuple[uuid.UUID, int], dict]:
        """Blocking: what the metadata store keeps of the group, (topic id, partition) -> its snapshot."""
        store = self.broker.metadata.store
        root = group_state_root(group_id)
        try:
            children = store.get_children(root)
        except Exception:  # no node: the group has consumed nothing
            return {}
        out = {}
        for child in children:
            text, _, index = child.rpartition("-")
            found = store.get_or_none(f"{root}/{child}")
            if found is not None:
                try:
                    out[(parse_topic_id(text), int(index))] = json.loads(found[0])
                except ValueError:
                    log.warning("share group %s: unreadable state node %s", group_id, child)
        return out

    def forget_group(self, group_id: str, stored_or_not: bool = False) -> None:
        """No session of the group is left on this broker: its share-partitions whose state is stored leave
        memory (Kafka's ``onGroupEmpty``); the next fetch reads them again. ``stored_or_not``: all of them
        (the group was deleted: nothing of it may be written again)."""
        if not stored_or_not and any(g == group_id for g, _m in self.sessions):
            return
        for key in [k for k in self._held if k[0] == group_id]:
            held = self._held[key]
            if stored_or_not or (held.writing is None and held.stored_version >= held.sp.version):
                del self._held[key]

    def alter_stored_offsets(self, group_id: str, starts: dict[TopicIdPartition, int]) -> None:
        """Blocking (AlterShareGroupOffsets): each partition's state becomes its new start offset with nothing in
        flight, in the next state epoch, so a leader's share-partition that read the old state is fenced at its
        next write (:meth:`_store_write`)."""
        store = self.broker.metadata.store
        for (topic_id, index), start in starts.items():
            path = state_path(group_id, topic_id, index)
            while True:
                found = store.get_or_none(path)
                epoch = int(json.loads(found[0]).get("state_epoch", 0)) + 1 if found is not None else 1
                data = json.dumps({"version": 1, "start_offset": start, "state_batches": [], "state_epoch": epoch,
                                   "leader_epoch": -1}, separators=(",", ":")).encode()
                try:
                    if found is None:
                        store.create(path, data, make_parents=True)
                    else:
                        store.set(path, data, version=found[1].version)
                    break
                except (NodeExistsError, BadVersionError, NoNodeError):
                    continue  # a leader wrote meanwhile: read its state epoch again

    def delete_stored_topics(self, group_id: str, topic_ids: set[uuid.UUID]) -> set[uuid.UUID]:
        """Blocking (DeleteShareGroupOffsets): remove the group's state of every partition of ``topic_ids``; the
        topics that had any. The next fetch starts those partitions at ``share.auto.offset.reset``."""
        store = self.broker.metadata.store
        root = group_state_root(group_id)
        try:
            children = store.get_children(root)
        except NoNodeError:
            return set()
        found = set()
        for child in children:
            text, _, _index = child.rpartition("-")
            try:
                topic_id = parse_topic_id(text)
            except ValueError:
                continue
            if topic_id in topic_ids:
                try:
                    store.delete(f"{root}/{child}")
                except NoNodeError:
                    pass
                found.add(topic_id)
        return found

    def forget_topics(self, group_id: str, names: set[str]) -> None:
        """The group's share-partitions of ``names`` leave memory on this broker (their stored state was altered
        or deleted); records in flight there are forgotten, and the next fetch reads the state again."""
        for key in [k for k in self._held if k[0] == group_id and k[1] in names]:
            self._drop(self._held[key])

    def stored_groups(self) -> list[str]:
        """Blocking: every share group the store keeps state of (the groups that outlive their members and a
        coordinator restart, as Kafka's empty share groups do)."""
        try:
            children = self.broker.metadata.store.get_children(SHARE_GROUP_STATE_ROOT)
        except NoNodeError:
            return []
        return [desanitize_user(child) for child in children]

    def has_stored_state(self, group_id: str) -> bool:
        """Blocking: whether the store keeps anything of the group."""
        return self.broker.metadata.store.exists(group_state_root(group_id)) is not None

    def delete_stored_state(self, group_id: str) -> bool:
        """Blocking: remove what the store keeps of the group; whether there was anything."""
        store = self.broker.metadata.store
        root = group_state_root(group_id)
        if store.exists(root) is None:
            return False
        store.delete(root, recursive=True)
        return True


def _log_batches(data: bytes, aborted: list[tuple[int, int]]):
    """The batches of ``data`` as :class:`LogBatch`. With ``aborted`` ((producer id, first offset) of the aborted
    transactions in range, read_committed) the batches of those transactions are marked to skip, by the
    consumer's rule: a producer's batches are aborted from its transaction's first offset to its marker."""
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    for view in iter_batch_views(data):
        base = view.base_offset
        last = base + view.last_offset_delta
        attributes = view.attributes
        control = bool(attributes & CONTROL_MASK)
        while pending and pending[0][1] <= last:
            active.add(pending.pop(0)[0])
        skip = control
        if attributes & TRANSACTIONAL_MASK and view.producer_id in active:
            if control:
                active.discard(view.producer_id)  # the transaction's marker ends it
            else:
                skip = True
        yield LogBatch(base, last, skip, view.pos, view.size)
