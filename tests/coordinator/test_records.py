"""__consumer_offsets key/value layouts: byte vectors written out by hand from Kafka's
message definitions, round trips at every version, the group -> partition hash."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.records import (GroupMetadataValue, GroupKey, MemberMetadata, OffsetAndMetadata, OffsetKey,
                                        OffsetsRecordError, decode_group_value, decode_key, decode_offset_value,
                                        decode_offsets_record, encode_offset_value, group_metadata_key,
                                        group_metadata_value, java_string_hashcode, offset_commit_key,
                                        offset_commit_value, partition_for)


def s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text.encode())) + text.encode()


def test_offset_commit_key_bytes():
    assert offset_commit_key("g", "t", 3) == b"\x00\x01" + s("g") + s("t") + b"\x00\x00\x00\x03"
    assert decode_key(offset_commit_key("g", "t", 3)) == OffsetKey(1, "g", "t", 3)
    # key version 0 has the same layout
    assert decode_key(b"\x00\x00" + s("g") + s("t") + b"\x00\x00\x00\x07") == OffsetKey(0, "g", "t", 7)


def test_group_metadata_key_bytes():
    assert group_metadata_key("grp") == b"\x00\x02" + s("grp")
    assert decode_key(group_metadata_key("grp")) == GroupKey(2, "grp")


def test_unknown_key_version():
    with pytest.raises(OffsetsRecordError):
        decode_key(b"\x00\x05" + s("g"))


def test_offset_value_v3_is_written_without_expire_timestamp():
    om = OffsetAndMetadata(42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    expected = b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 5) + s("m") + struct.pack(">q", 1000)
    assert offset_commit_value(om) == expected
    assert decode_offset_value(expected) == om


def test_offset_value_v1_is_written_with_expire_timestamp():
    om = OffsetAndMetadata(7, leader_epoch=9, metadata="", commit_timestamp=10, expire_timestamp=20)
    expected = b"\x00\x01" + struct.pack(">q", 7) + s("") + struct.pack(">q", 10) + struct.pack(">q", 20)
    assert offset_commit_value(om) == expected
    # v1 has no leader epoch
    assert decode_offset_value(expected) == OffsetAndMetadata(7, -1, "", 10, 20)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_offset_value_roundtrip_every_version(version):
    om = OffsetAndMetadata(123456789012, leader_epoch=3 if version == 3 else -1, metadata="meta\u00e9",
                           commit_timestamp=1_600_000_000_000, expire_timestamp=1_700_000_000_000 if version == 1 else -1)
    data = encode_offset_value(om, version)
    assert struct.unpack(">h", data[:2])[0] == version
    assert decode_offset_value(data) == om


def _group(members: int = 2) -> GroupMetadataValue:
    return GroupMetadataValue(
        "consumer", 7, "range", "m-0", 1234,
        [MemberMetadata(f"m-{i}", f"inst-{i}", "client", "/127.0.0.1", 30000, 6000, b"sub%d" % i, b"asg%d" % i)
         for i in range(members)])


def test_group_value_v3_bytes():
    g = _group(1)
    expected = (b"\x00\x03" + s("consumer") + struct.pack(">i", 7) + s("range") + s("m-0") + struct.pack(">q", 1234)
                + struct.pack(">i", 1) + s("m-0") + s("inst-0") + s("client") + s("/127.0.0.1")
                + struct.pack(">i", 30000) + struct.pack(">i", 6000)
                + struct.pack(">i", 4) + b"sub0" + struct.pack(">i", 4) + b"asg0")
    assert group_metadata_value(g) == expected


def test_empty_group_value_has_null_protocol_and_leader():
    g = GroupMetadataValue("consumer", 3, None, None, 99, [])
    data = group_metadata_value(g)
    assert data == b"\x00\x03" + s("consumer") + struct.pack(">i", 3) + s(None) + s(None) + struct.pack(">q", 99) \
        + struct.pack(">i", 0)
    assert decode_group_value(data) == (3, g)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_value_roundtrip_every_version(version):
    g = _group()
    version_read, back = decode_group_value(group_metadata_value(g, version))
    assert version_read == version
    assert back.protocol_type == "consumer" and back.generation == 7 and back.protocol == "range"
    assert back.leader == "m-0"
    assert back.current_state_timestamp == (1234 if version >= 2 else -1)
    for original, m in zip(g.members, back.members):
        assert m.member_id == original.member_id
        assert m.group_instance_id == (original.group_instance_id if version >= 3 else None)
        assert m.rebalance_timeout == (30000 if version >= 1 else 6000)
        assert (m.session_timeout, m.subscription, m.assignment) == (6000, original.subscription, original.assignment)


def test_truncated_values_raise():
    data = offset_commit_value(OffsetAndMetadata(1, 0, "x", 2))
    for cut in range(len(data)):
        with pytest.raises(OffsetsRecordError):
            decode_offset_value(data[:cut])


def test_decode_offsets_record_for_log_dump():
    key = offset_commit_key("g", "t", 0)
    out = decode_offsets_record(key, offset_commit_value(OffsetAndMetadata(5, 1, "md", 10)))
    assert out == {"type": "offset_commit", "key_version": 1, "group": "g", "topic": "t", "partition": 0,
                   "value": {"version": 3, "offset": 5, "leader_epoch": 1, "metadata": "md",
                             "commit_timestamp": 10, "expire_timestamp": -1}}
    assert decode_offsets_record(key, None)["value"] is None
    out = decode_offsets_record(group_metadata_key("grp"), group_metadata_value(_group(1)))
    assert out["type"] == "group_metadata" and out["value"]["members"][0]["subscription"] == b"sub0".hex()
    assert "error" in decode_offsets_record(b"\x00\x09", b"")
    assert "error" in decode_offsets_record(None, b"")


@pytest.mark.parametrize("text,expected", [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -(1 << 31)),      # Integer.MIN_VALUE: the mask maps it to 0
    ("\u00e9", 233), ("\U0001F600", 55357 * 31 + 56832),  # a surrogate pair counts as two chars
])
def test_java_string_hashcode(text, expected):
    assert java_string_hashcode(text) == expected


def test_partition_for_is_kafkas_abs_of_the_hash():
    # Kafka: Utils.abs(groupId.hashCode) % partitions, Utils.abs(Integer.MIN_VALUE) == 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hashcode("billing") == -109829509
    assert partition_for("billing", 50) == 9          # masking the sign bit instead gave 39
    assert all(0 <= partition_for(f"group-{i}", 7) < 7 for i in range(200))
