"""Record formats of the ``__transaction_state`` topic (Apache Kafka 2.7's layouts), sans-I/O.

One record per transactional id: the key names the id, the value is the whole
transaction metadata as last written (the topic is compacted, so the last value
of a key is its state). Both start with an int16 *version* (0). Strings are
int16-length-prefixed UTF-8, arrays an int32 count (-1 = null) followed by the
elements; all integers big-endian::

    key    version:int16 (0)  transactional_id:string
    value  version:int16 (0)
           producer_id:int64
           producer_epoch:int16
           transaction_timeout_ms:int32
           transaction_status:int8          TransactionState.value (Empty 0 ... PrepareEpochFence 7)
           transaction_partitions:nullable [topic:string  partition_ids:[int32]]
                                            null when the state is Empty
           transaction_last_update_timestamp_ms:int64
           transaction_start_timestamp_ms:int64    -1 before the first partition is added

A null value is a tombstone: the transactional id expired
(``transactional.id.expiration.ms``) and is forgotten once the log is compacted.

The transactional id -> partition mapping is Kafka's: the absolute value of
Java's ``String.hashCode`` (``Integer.MIN_VALUE`` -> 0) modulo the partition count.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.coordinator.records import java_string_hashcode
from broker.txn.state import TransactionState

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer_id, producer_epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")


class TransactionLogError(ValueError):
    """Bytes that are not a valid ``__transaction_state`` key or value."""


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition that holds ``transactional_id`` (Kafka's ``Utils.abs``)."""
    h = java_string_hashcode(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(slots=True)
class TransactionLogValue:
    """A decoded value: ``partitions`` is a set of (topic, partition)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: set[tuple[str, int]]
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def _str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _str(transactional_id)


def encode_value(v: TransactionLogValue) -> bytes:
    parts = [_VALUE_HEAD.pack(VALUE_VERSION, v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
                              int(v.state))]
    if v.state is TransactionState.EMPTY:
        if v.partitions:
            raise TransactionLogError("an Empty transaction has no partitions")
        parts.append(_I32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(v.partitions):
            by_topic.setdefault(topic, []).append(partition)
        parts.append(_I32.pack(len(by_topic)))
        for topic, ids in by_topic.items():
            parts.append(_str(topic) + _I32.pack(len(ids)) + b"".join(_I32.pack(p) for p in ids))
    parts.append(_TIMESTAMPS.pack(v.last_update_timestamp_ms, v.start_timestamp_ms))
    return b"".join(parts)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def take(self, s: struct.Struct) -> tuple:
        if self.pos + s.size > len(self.buf):
            raise TransactionLogError(f"record ends at byte {len(self.buf)}, inside a field at {self.pos}")
        out = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return out

    def string(self) -> str:
        (n,) = self.take(_I16)
        if n < 0 or self.pos + n > len(self.buf):
            raise TransactionLogError(f"bad string length {n} at byte {self.pos - 2}")
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TransactionLogError(f"string at byte {self.pos - n} is not UTF-8") from exc


def decode_key(key: bytes) -> str:
    """The transactional id of a key; TransactionLogError for anything else."""
    r = _Reader(key)
    (version,) = r.take(_I16)
    if version != KEY_VERSION:
        raise TransactionLogError(f"unknown __transaction_state key version {version}")
    return r.string()


def decode_value(value: bytes) -> TransactionLogValue:
    r = _Reader(value)
    version, producer_id, epoch, timeout, status = r.take(_VALUE_HEAD)
    if version != VALUE_VERSION:
        raise TransactionLogError(f"unknown __transaction_state value version {version}")
    try:
        state = TransactionState(status)
    except ValueError:
        raise TransactionLogError(f"unknown transaction status {status}") from None
    partitions: set[tuple[str, int]] = set()
    (count,) = r.take(_I32)
    for _ in range(max(count, 0)):
        topic = r.string()
        (n,) = r.take(_I32)
        for _ in range(max(n, 0)):
            partitions.add((topic, r.take(_I32)[0]))
    last_update, start = r.take(_TIMESTAMPS)
    return TransactionLogValue(producer_id, epoch, timeout, state, partitions, last_update, start)


def decode_transaction_log_record(key: bytes | None, value: bytes | None) -> dict:
    """A JSON-ready description of one ``__transaction_state`` record (for ``kafkactl log dump``).

    Undecodable input gives ``{"error": ...}`` rather than raising, so one odd record does not stop a dump.
    """
    if key is None:
        return {"error": "record has no key"}
    try:
        out: dict = {"transactional_id": decode_key(key)}
        if value is None:
            out["value"] = None
            return out
        v = decode_value(value)
        out["value"] = {
            "producer_id": v.producer_id, "producer_epoch": v.producer_epoch,
            "transaction_timeout_ms": v.transaction_timeout_ms, "state": v.state.label,
            "partitions": [f"{t}-{p}" for t, p in sorted(v.partitions)],
            "last_update_timestamp_ms": v.last_update_timestamp_ms, "start_timestamp_ms": v.start_timestamp_ms,
        }
        return out
    except TransactionLogError as exc:
        return {"error": str(exc)}
