"""Zigzag varints: boundaries, properties, and malformed input."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong
from broker.records.view import CorruptRecordError


@pytest.mark.parametrize(
    "value, encoded",
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
     (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**31), b"\xff\xff\xff\xff\x0f")],
)
def test_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert encode_varlong(value) == encoded


def test_varlong_extremes():
    for value in (2**63 - 1, -(2**63)):
        enc = encode_varlong(value)
        assert len(enc) == 10
        assert decode_varlong(enc + b"tail") == (value, 10)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value):
    assert decode_varint(b"\xaa" + encode_varint(value), 1) == (value, 1 + len(encode_varint(value)))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value):
    enc = encode_varlong(value)
    assert decode_varlong(enc) == (value, len(enc))


def test_out_of_range_values_are_refused():
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(-(2**63) - 1)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff"])
def test_truncated(data):
    with pytest.raises(CorruptRecordError):
        decode_varint(data)
    with pytest.raises(CorruptRecordError):
        decode_varlong(data)


def test_too_long():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 5 + b"\x01")
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\x7f")  # 5 bytes but more than 32 bits
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 10 + b"\x01")
