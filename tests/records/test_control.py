"""Control batches: transaction markers."""

import struct

import pytest

from broker.records import (
    BatchView,
    ControlRecordType,
    CorruptRecordError,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    decode_batch,
    decode_control_key,
    decode_end_txn_marker_value,
    encode_control_key,
    encode_end_txn_marker_value,
    end_txn_marker_of,
)


@pytest.mark.parametrize("kind", list(ControlRecordType))
def test_marker_batch(kind):
    raw = build_end_txn_marker_batch(EndTransactionMarker(kind, 17), producer_id=4000, producer_epoch=2,
                                     timestamp=1_700_000_000_000, base_offset=99, partition_leader_epoch=6)
    view = BatchView(raw)
    view.validate()
    assert view.is_control and view.is_transactional and view.records_count == 1
    batch = decode_batch(raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_offset) == (4000, 2, 99)
    assert end_txn_marker_of(batch) == EndTransactionMarker(kind, 17)
    assert batch.records[0].key == struct.pack(">hh", 0, kind)
    assert batch.records[0].value == struct.pack(">hi", 0, 17)


def test_key_and_value_codecs():
    assert decode_control_key(encode_control_key(ControlRecordType.ABORT)) == (0, ControlRecordType.ABORT)
    assert decode_end_txn_marker_value(encode_end_txn_marker_value(-1)) == (0, -1)
    for bad in (None, b"\x00", struct.pack(">hh", 0, 7)):
        with pytest.raises(CorruptRecordError):
            decode_control_key(bad)
    with pytest.raises(CorruptRecordError):
        decode_end_txn_marker_value(b"\x00\x00")
