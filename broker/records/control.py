"""Control records: the transaction markers written by the transaction coordinator.

A control batch has the transactional (bit 4) and control (bit 5) attribute
bits set and holds exactly one record whose key and value are::

    key   => version int16 (0), type int16 (0 ABORT, 1 COMMIT)
    value => version int16 (0), coordinator_epoch int32

Consumers never see control records; ``read_committed`` consumers use them to
drop aborted data. Nothing here does I/O.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from broker.records.batch import BatchBuilder, RecordBatch
from broker.records.view import CorruptRecordError

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    type: ControlRecordType
    coordinator_epoch: int


def encode_control_key(record_type: int, version: int = CONTROL_KEY_VERSION) -> bytes:
    return _KEY.pack(version, record_type)


def decode_control_key(key: bytes | None) -> tuple[int, ControlRecordType]:
    """Returns ``(version, type)``; unknown types raise CorruptRecordError."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    version, record_type = _KEY.unpack_from(key)
    try:
        return version, ControlRecordType(record_type)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {record_type}") from None


def encode_end_txn_marker_value(coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION) -> bytes:
    return _VALUE.pack(version, coordinator_epoch)


def decode_end_txn_marker_value(value: bytes | None) -> tuple[int, int]:
    """Returns ``(version, coordinator_epoch)``."""
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("end transaction marker value shorter than 6 bytes")
    return _VALUE.unpack_from(value)


def build_end_txn_marker_batch(
    marker: EndTransactionMarker,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A complete control batch with one ABORT or COMMIT marker."""
    builder = BatchBuilder(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    builder.append(
        timestamp,
        encode_control_key(marker.type),
        encode_end_txn_marker_value(marker.coordinator_epoch),
    )
    return builder.build()


def end_txn_marker_of(batch: RecordBatch) -> EndTransactionMarker:
    """The marker a decoded control batch holds."""
    if not batch.is_control or len(batch.records) != 1:
        raise CorruptRecordError("not a control batch with exactly one record")
    record = batch.records[0]
    _, record_type = decode_control_key(record.key)
    _, epoch = decode_end_txn_marker_value(record.value)
    return EndTransactionMarker(record_type, epoch)
