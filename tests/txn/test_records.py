"""``__transaction_state`` key/value layouts against bytes written out by hand from Kafka 2.7's schema."""

from __future__ import annotations

import pytest

from broker.txn.records import (TransactionLogError, TransactionLogValue, decode_key, decode_transaction_log_record,
                                decode_value, encode_key, encode_value, partition_for)
from broker.txn.state import TransactionState


def test_key_and_ongoing_value_bytes():
    assert encode_key("tx") == b"\x00\x00" + b"\x00\x02tx"
    value = TransactionLogValue(producer_id=7, producer_epoch=3, transaction_timeout_ms=60000,
                                state=TransactionState.ONGOING, partitions={("b", 1), ("a", 2), ("a", 0)},
                                last_update_timestamp_ms=1000, start_timestamp_ms=900)
    expected = (b"\x00\x00" + (7).to_bytes(8, "big") + b"\x00\x03" + (60000).to_bytes(4, "big") + b"\x01"
                + b"\x00\x00\x00\x02"                                          # two topics, sorted
                + b"\x00\x01a" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02"
                + b"\x00\x01b" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
                + (1000).to_bytes(8, "big") + (900).to_bytes(8, "big"))
    assert encode_value(value) == expected
    assert decode_value(expected) == value and decode_key(encode_key("tx")) == "tx"


def test_empty_state_writes_null_partitions():
    value = TransactionLogValue(1, 0, 100, TransactionState.EMPTY, set(), 5, -1)
    raw = encode_value(value)
    assert raw[17:21] == b"\xff\xff\xff\xff" and decode_value(raw) == value
    decoded = decode_transaction_log_record(encode_key("x"), raw)
    assert decoded["value"]["state"] == "Empty" and decode_transaction_log_record(encode_key("x"), None)["value"] is None


def test_bad_bytes_and_the_partition_hash():
    with pytest.raises(TransactionLogError):
        decode_value(b"\x00\x01" + bytes(30))  # unknown value version
    assert "error" in decode_transaction_log_record(b"\x00\x00\x00\x09ab", b"")
    # Kafka: Utils.abs(String.hashCode) % partitions; "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("payments", 50) == 1382682413 % 50
