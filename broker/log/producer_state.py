"""Producer state of one partition: idempotent and transactional producers (Kafka's ProducerStateManager).

For every producer id that wrote to the partition the log keeps a
:class:`ProducerStateEntry`: the producer epoch, the last five batches'
sequence and offset ranges, the epoch of the transaction coordinator that
wrote its last marker and the first offset of its ongoing transaction. The
log (:mod:`broker.log.log`) asks :meth:`ProducerStateManager.check` before it
places a batch and calls :meth:`ProducerStateManager.update` once the batch is
placed, both on the writer thread under the log's lock, so the checks run in
append order. The checks are Apache Kafka 2.7's, by the origin of the append:

* ``CLIENT`` (a leader's produce, batches with a sequence): a batch equal to
  one of the last five (same epoch, same first and last sequence) is a
  duplicate: it is not written and the caller gets the first write's offsets;
  an epoch below the current one is INVALID_PRODUCER_EPOCH (47); a first
  sequence that does not follow the last one (``last + 1``, or 0 after
  2^31-1) is OUT_OF_ORDER_SEQUENCE_NUMBER (45), and so is a new epoch that does
  not start at 0; a non-transactional batch during the producer's ongoing
  transaction is INVALID_TXN_STATE (48). A producer the partition does not know
  (never seen, expired, or its batches deleted) may start at any sequence: from
  Kafka 2.5 on (KIP-360) the broker no longer answers UNKNOWN_PRODUCER_ID to a
  produce, and neither does this one;
* ``COORDINATOR`` (a batch with a producer id but no sequence, every control
  batch a leader appends, and the producer batches of the internal topics,
  which only coordinators write: a TxnOffsetCommit's carry sequence 0 each
  time, as in Kafka): the epoch check only, and for a COMMIT or
  ABORT marker a coordinator epoch below the last one is
  TRANSACTION_COORDINATOR_FENCED (52);
* ``REPLICATION`` (a follower's appends, and the log replayed at start): no
  check, the state just follows the log.

A control batch (COMMIT/ABORT marker) ends the producer's ongoing transaction.
:attr:`ProducerStateManager.ongoing_txns` maps the first offset of every
ongoing transaction to its producer id, in offset order.

Snapshot files, ``<20-digit offset>.snapshot`` in the partition directory,
hold the state of the log below that offset, in Kafka's format version 1
(big-endian)::

    version            int16   1
    crc                uint32  CRC-32C of everything after this field
    producer_entries   int32 count, then per producer:
        producer_id               int64
        epoch                     int16
        last_sequence             int32   -1 if the producer has no data batch
        last_offset               int64   -1 likewise
        offset_delta              int32   last offset - first offset of that batch
        timestamp                 int64   max timestamp of the producer's last write
        coordinator_epoch         int32
        current_txn_first_offset  int64   -1 if no transaction is ongoing

A snapshot keeps only the last batch of each producer (as Kafka's does): after
a restart a retry of one of the four batches before it is not recognised.
Snapshots are written at every segment roll (at the new segment's base
offset) and at close, never while a log opens (a broker start that fails
changes no file); the log opens by loading the newest snapshot that is
not above its log end offset and replaying the batches after it
(:meth:`ProducerStateManager.load`). A snapshot that fails its CRC or does not
parse is deleted and the next older one tried; with none left the whole log
is replayed. A snapshot is written to a ``.tmp`` file first and renamed, so a
crash leaves the old snapshot or the new one, never half of one. The log keeps
the snapshots of its last two segments (one truncation into the previous
segment needs no full replay) and deletes those below its log start offset
with their segments.

Producers expire (:meth:`ProducerStateManager.remove_expired_producers`)
after ``producer.id.expiration.ms`` (Kafka 2.7: ``transactional.id.expiration.ms``)
without a write, unless a transaction of theirs is ongoing.

Not thread-safe: the log calls it under its lock.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections import deque
from pathlib import Path
from typing import Iterable, NamedTuple

import crc32c

from broker.log.errors import LogError
from broker.records.view import CONTROL_MASK, LOG_OVERHEAD, TRANSACTIONAL_MASK, V2_HEADER, V2_HEADER_SIZE

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = (1 << 31) - 1
#: Kafka 2.7's transactional.id.expiration.ms default (7 days), which governs producer expiry there
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000

CLIENT = "client"
COORDINATOR = "coordinator"
REPLICATION = "replication"

_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers the entry count and the entries


class OutOfOrderSequenceError(LogError):
    """A batch's sequence does not follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    error_code = 45


class InvalidProducerEpochError(LogError):
    """A batch's producer epoch is older than the partition's (INVALID_PRODUCER_EPOCH)."""

    error_code = 47


class InvalidTxnStateError(LogError):
    """A non-transactional batch while the producer's transaction is ongoing (INVALID_TXN_STATE)."""

    error_code = 48


class TransactionCoordinatorFencedError(LogError):
    """A marker from an older transaction coordinator (TRANSACTION_COORDINATOR_FENCED)."""

    error_code = 52


class CorruptSnapshotError(ValueError):
    """A snapshot file fails its CRC, has an unknown version or does not parse."""


class BatchMetadata(NamedTuple):
    """One batch a producer wrote: its sequence range, its offset range, its max timestamp."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ActiveProducer(NamedTuple):
    """What DescribeProducers reports of one producer (a copy: safe outside the log's lock; -1: none)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record: sequences wrap from 2^31-1 to 0."""
    last = first_seq + last_offset_delta
    return last - INT32_MAX - 1 if last > INT32_MAX else last


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateEntry:
    """What the partition knows of one producer id (see the module docstring)."""

    __slots__ = ("producer_id", "producer_epoch", "batches", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 last_timestamp: int = -1, current_txn_first_offset: int | None = None) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        """A new epoch forgets the batches of the old one (their sequences start again at 0)."""
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
                f"coordinator_epoch={self.coordinator_epoch}, current_txn_first_offset="
                f"{self.current_txn_first_offset}, batches={list(self.batches)})")


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(dir: Path) -> list[int]:
    """The offsets of the snapshot files in ``dir``, ascending."""
    offsets = []
    for name in os.listdir(dir):
        if name.endswith(SNAPSHOT_SUFFIX) and len(name) == 20 + len(SNAPSHOT_SUFFIX) and name[:20].isdigit():
            offsets.append(int(name[:20]))
    return sorted(offsets)


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """A snapshot file's bytes (format in the module docstring)."""
    body = bytearray(_SNAPSHOT_HEAD.size)
    count = 0
    for e in entries:
        if e.batches:
            last = e.batches[-1]
            seq, offset, delta = last.last_seq, last.last_offset, last.last_offset - last.first_offset
        else:
            seq, offset, delta = NO_SEQUENCE, -1, 0
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _SNAPSHOT_ENTRY.pack(e.producer_id, e.producer_epoch, seq, offset, delta, e.last_timestamp,
                                     e.coordinator_epoch, txn)
        count += 1
    struct.pack_into(">i", body, _CRC_START, count)
    _SNAPSHOT_HEAD.pack_into(body, 0, SNAPSHOT_VERSION, crc32c.crc32c(body[_CRC_START:]), count)
    return bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """The entries of a snapshot file; :class:`CorruptSnapshotError` if it is not a valid one."""
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(f"{len(data)} bytes are too few for a snapshot header")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c.crc32c(data[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"CRC-32C mismatch (stored {crc}, computed {computed})")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"{count} entries do not fill {len(data)} bytes")
    entries = []
    for pos in range(_SNAPSHOT_HEAD.size, len(data), _SNAPSHOT_ENTRY.size):
        pid, epoch, seq, offset, delta, ts, coordinator_epoch, txn = _SNAPSHOT_ENTRY.unpack_from(data, pos)
        e = ProducerStateEntry(pid, epoch, coordinator_epoch, ts, txn if txn >= 0 else None)
        if offset >= 0:
            first_seq = seq - delta if seq >= delta else INT32_MAX - (delta - seq) + 1
            e.batches.append(BatchMetadata(first_seq, seq, offset - delta, offset, ts))
        entries.append(e)
    return entries


def _end_txn_marker(batch) -> tuple[bool, int] | None:
    """(is ABORT, coordinator epoch) of a control batch's marker; None for an empty control batch."""
    from broker.records import decode_batch
    from broker.records.control import ControlRecordType, decode_control_key, decode_end_txn_marker_value

    records = decode_batch(batch).records
    if not records:
        return None
    _version, record_type = decode_control_key(records[0].key)
    _version, coordinator_epoch = decode_end_txn_marker_value(records[0].value)
    return record_type == ControlRecordType.ABORT, coordinator_epoch


class ProducerStateManager:
    """The producer state of one partition; see the module docstring."""

    def __init__(self, dir: Path, producer_id_expiration_ms: int) -> None:
        self.dir = Path(dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        #: first offset of every ongoing transaction -> producer id, in offset order
        self.ongoing_txns: dict[int, int] = {}
        #: the state covers the log below this offset
        self.map_end_offset = 0
        self.last_snapshot_offset = 0

    # -- appends -----------------------------------------------------------------------
    def check(self, producer_id: int, producer_epoch: int, base_sequence: int, last_offset_delta: int,
              attributes: int, batch, origin: str) -> BatchMetadata | None:
        """Kafka's checks of a batch about to be appended (module docstring); changes nothing.

        Returns the earlier batch this one duplicates (it must not be written),
        else None; raises one of this module's errors if it must be refused.
        """
        if origin == REPLICATION:
            return None
        entry = self.producers.get(producer_id)
        current_epoch = NO_PRODUCER_EPOCH if entry is None else entry.producer_epoch
        control = attributes & CONTROL_MASK
        if origin == CLIENT and entry is not None and not control:
            duplicate = entry.find_duplicate(producer_epoch, base_sequence,
                                             last_sequence(base_sequence, last_offset_delta))
            if duplicate is not None:
                return duplicate
        if producer_epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}'s epoch {producer_epoch} is smaller than the last seen epoch {current_epoch}")
        if control:
            marker = _end_txn_marker(batch)
            if marker is not None and entry is not None and entry.coordinator_epoch > marker[1]:
                raise TransactionCoordinatorFencedError(
                    f"marker for producer {producer_id} from coordinator epoch {marker[1]}, "
                    f"older than {entry.coordinator_epoch}")
            return None
        if origin == CLIENT:
            if producer_epoch != current_epoch:
                if base_sequence != 0 and current_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id}'s new epoch {producer_epoch} starts at sequence {base_sequence}, "
                        f"not 0")
            elif current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq, base_sequence):
                raise OutOfOrderSequenceError(
                    f"out of order sequence for producer {producer_id}: {base_sequence} (incoming), "
                    f"{entry.last_seq} (current end)")
        if entry is not None and entry.current_txn_first_offset is not None and not attributes & TRANSACTIONAL_MASK:
            raise InvalidTxnStateError(f"producer {producer_id} wrote a non-transactional batch during its "
                                       f"transaction")
        return None

    def update(self, producer_id: int, producer_epoch: int, base_sequence: int, base_offset: int,
               last_offset_delta: int, max_timestamp: int, attributes: int, batch) -> CompletedTxn | None:
        """Take a placed batch into the state (after :meth:`check` let it through); the marker's txn if any."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if attributes & CONTROL_MASK:
            marker = _end_txn_marker(batch)
            if marker is None:  # every record of the transaction was cleaned away
                return None
            aborted, coordinator_epoch = marker
            first = entry.current_txn_first_offset
            if first is None:
                first = base_offset
            else:
                self.ongoing_txns.pop(first, None)
            entry.maybe_update_producer_epoch(producer_epoch)
            entry.current_txn_first_offset = None
            entry.coordinator_epoch = coordinator_epoch
            entry.last_timestamp = max_timestamp
            return CompletedTxn(producer_id, first, base_offset, aborted)
        entry.maybe_update_producer_epoch(producer_epoch)
        last_offset = base_offset + last_offset_delta
        entry.batches.append(BatchMetadata(base_sequence, last_sequence(base_sequence, last_offset_delta),
                                           base_offset, last_offset, max_timestamp))
        entry.last_timestamp = max_timestamp
        if attributes & TRANSACTIONAL_MASK and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = base_offset
            self.ongoing_txns[base_offset] = producer_id
        return None

    # -- transactions ------------------------------------------------------------------------
    @property
    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction."""
        return next(iter(self.ongoing_txns), None)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The last stable offset once ``completed``'s marker is written (after :meth:`update` took it)."""
        undecided = self.first_undecided_offset
        return completed.last_offset + 1 if undecided is None else undecided

    # -- expiry ------------------------------------------------------------------------------
    def active_producers(self) -> list[ActiveProducer]:
        """Every producer the partition keeps state for, by producer id (DescribeProducers)."""
        return [ActiveProducer(e.producer_id, e.producer_epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                               -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
                for _, e in sorted(self.producers.items())]

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer_id_expiration_ms`` with no ongoing transaction; how many."""
        limit = self.producer_id_expiration_ms
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= limit]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots ---------------------------------------------------------------------------
    def take_snapshot(self, offset: int) -> Path | None:
        """Write the state as of ``offset`` (it must cover exactly the log below it), unless a snapshot
        at or above ``offset`` was written since the last load."""
        self.map_end_offset = offset
        if offset <= self.last_snapshot_offset:
            return None
        path = self.dir / snapshot_file_name(offset)
        tmp = path.with_name(path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(encode_snapshot(self.producers.values()))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        self.last_snapshot_offset = offset
        return path

    def delete_snapshots(self, keep=lambda offset: False) -> None:
        """Delete every snapshot file whose offset ``keep`` refuses."""
        for offset in list_snapshots(self.dir):
            if not keep(offset):
                (self.dir / snapshot_file_name(offset)).unlink(missing_ok=True)

    def truncate_head(self, log_start_offset: int) -> None:
        """Segments below ``log_start_offset`` are gone: so are the snapshots below it."""
        self.delete_snapshots(lambda offset: offset >= log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.delete_snapshots()
        self.map_end_offset = offset
        self.last_snapshot_offset = 0

    def load(self, segments, log_start_offset: int, log_end_offset: int, now_ms: int,
             on_completed=None, on_replay_start=None) -> int:
        """Rebuild the state of the log ``[log_start_offset, log_end_offset)``; the snapshot offset used (-1: none).

        Snapshots above the log end or below the log start are deleted first.
        ``on_completed(segment, completed_txn, last_stable_offset)`` hears of
        every transaction a replayed marker ends; ``on_replay_start(offset)``
        hears where the replay starts, before it does.
        """
        self.producers.clear()
        self.ongoing_txns.clear()
        self.delete_snapshots(lambda offset: log_start_offset <= offset <= log_end_offset)
        used = -1
        for offset in reversed(list_snapshots(self.dir)):
            path = self.dir / snapshot_file_name(offset)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshotError) as exc:
                logger.warning("producer snapshot %s is not usable (%s): deleted, the log is replayed", path, exc)
                path.unlink(missing_ok=True)
                continue
            for e in entries:
                if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= self.producer_id_expiration_ms:
                    continue
                self.producers[e.producer_id] = e
                if e.current_txn_first_offset is not None:
                    self.ongoing_txns[e.current_txn_first_offset] = e.producer_id
            self.ongoing_txns = dict(sorted(self.ongoing_txns.items()))
            used = offset
            break
        start = log_start_offset if used < 0 else used
        self.last_snapshot_offset = max(used, 0)
        if on_replay_start is not None:
            on_replay_start(start)
        self.replay(segments, start, log_end_offset, on_completed)
        self.map_end_offset = log_end_offset
        return used

    def replay(self, segments, start: int, end: int, on_completed=None) -> int:
        """Take the batches of ``segments`` in ``[start, end)`` into the state, unchecked; how many."""
        n = 0
        for seg in segments:
            if seg.next_offset is not None and seg.next_offset <= start or seg.base_offset >= end:
                continue
            size = seg.size
            if size == 0:
                continue
            found = seg.find_batch(start, size) if start > seg.base_offset else None
            pos = found[0] if found is not None else 0
            with mmap.mmap(seg.fd, size, access=mmap.ACCESS_READ) as mm:
                buf = memoryview(mm)
                try:
                    while pos + V2_HEADER_SIZE <= size:
                        (base_offset, length, _ple, _magic, _crc, attributes, last_offset_delta, _base_ts,
                         max_timestamp, producer_id, producer_epoch, base_sequence, _count) = V2_HEADER.unpack_from(buf, pos)
                        entry_size = LOG_OVERHEAD + length
                        if base_offset >= end:
                            break
                        if producer_id >= 0 and base_offset + last_offset_delta >= start:
                            control = bytes(buf[pos:pos + entry_size]) if attributes & CONTROL_MASK else None
                            completed = self.update(producer_id, producer_epoch, base_sequence, base_offset,
                                                    last_offset_delta, max_timestamp, attributes, control)
                            if completed is not None and on_completed is not None:
                                on_completed(seg, completed, self.last_stable_offset(completed))
                            n += 1
                        pos += entry_size
                finally:
                    buf.release()
        return n
