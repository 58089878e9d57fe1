"""Headers, version rules, error paths and zero-copy records of the request/response codec."""

from __future__ import annotations

import random
import struct
import uuid
from pathlib import Path

import pytest

from broker.protocol import (ApiKey, EncodeError, InvalidRequestError, RequestHeader,
                             UnsupportedVersionError, api_versions_table, decode_request,
                             decode_response, encode_request, encode_response)

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "protocol"


def test_flexible_request_header_v2_by_hand():
    frame = encode_request(ApiKey.HEARTBEAT, 4, 1, "abc",
                           {"group_id": "g", "generation_id": 5, "member_id": "m"})
    assert frame.hex() == (
        "00000018" "000c" "0004" "00000001" "0003616263" "00"  # header v2: client_id int16 len
        "0267" "00000005" "026d" "00" "00")                      # compact strings, null, tags
    header, body = decode_request(frame[4:])
    assert body == {"group_id": "g", "generation_id": 5, "member_id": "m",
                    "group_instance_id": None}


def test_non_flexible_request_header_v1_by_hand():
    frame = encode_request(ApiKey.HEARTBEAT, 0, 2, None,
                           {"group_id": "g", "generation_id": -1, "member_id": ""})
    assert frame.hex() == "00000013" "000c0000" "00000002" "ffff" "000167" "ffffffff" "0000"


def test_flexible_response_header_v1_and_api_versions_v0_exception():
    parts = encode_response(RequestHeader(ApiKey.HEARTBEAT, 4, 9, "c"), {"error_code": 27})
    assert parts == [bytes.fromhex("0000000c" "00000009" "00" "00000000" "001b" "00")]
    # ApiVersions v3 is flexible, yet its response header is v0: error_code follows the id
    frame = encode_response(RequestHeader(ApiKey.API_VERSIONS, 3, 9, "c"), {"error_code": 35})[0]
    assert frame[4:10] == bytes.fromhex("00000009" "0023")


def test_api_versions_above_range_is_answered_at_v0():
    frame = encode_request(ApiKey.API_VERSIONS, 3, 11, "c", {})
    raw = bytearray(frame[4:])
    raw[2:4] = struct.pack(">h", 99)  # a future ApiVersions version
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(bytes(raw))
    header = info.value.header
    assert header == RequestHeader(ApiKey.API_VERSIONS, 99, 11, "c")
    table = [{"api_key": k, "min_version": lo, "max_version": hi}
             for k, (lo, hi) in api_versions_table().items()]
    frame = b"".join(encode_response(header, {"error_code": 35, "api_keys": table}))
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, frame[4:])
    assert correlation_id == 11 and body["error_code"] == 35 and body["api_keys"] == table


def test_api_versions_table_covers_kafka_2_7():
    kafka_2_7 = {0: 8, 1: 12, 2: 5, 3: 9, 8: 8, 9: 7, 10: 3, 11: 7, 12: 4, 13: 4, 14: 5, 15: 5,
                 16: 4, 17: 1, 18: 3, 19: 6, 20: 5, 21: 2, 22: 4, 23: 3, 32: 3, 33: 1, 35: 2,
                 37: 3, 42: 2, 44: 1, 47: 0, 60: 0,
                 # inter-broker, transaction and replica placement APIs
                 4: 4, 5: 3, 6: 6, 7: 3, 24: 2, 25: 2, 26: 2, 27: 0, 28: 3, 34: 1, 43: 2, 45: 0,
                 46: 0, 56: 0}
    table = api_versions_table()
    for key, high in kafka_2_7.items():
        assert table[key][0] == 0 and table[key][1] >= high, ApiKey(key).name


def test_unknown_api_key_keeps_header():
    frame = struct.pack(">hhih", 999, 0, 77, 2) + b"id"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.header == RequestHeader(999, 0, 77, "id")
    assert info.value.error_code == 35


def _produce_frame(records=b"R" * 40):
    body = {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    return body, encode_request(ApiKey.PRODUCE, 9, 3, "p", body)[4:]


def test_records_decode_to_zero_copy_slice():
    _, frame = _produce_frame()
    _, body = decode_request(frame)
    records = body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is frame
    assert bytes(records) == b"R" * 40


class FileSlice:
    """Stands in for the log's file slice: only ``length`` matters to the codec."""

    def __init__(self, length):
        self.length = length


def test_records_that_are_not_bytes_become_their_own_part():
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 10, "records": FileSlice(1000)},
        {"partition_index": 1, "records": b"x" * 7},
        {"partition_index": 2, "records": FileSlice(5)}]}]}
    for version in (4, 12):
        parts = encode_response(RequestHeader(ApiKey.FETCH, version, 5, "c"), body)
        tail = [bytes] if version >= 12 else []  # flexible: tagged sections follow the records
        assert [type(p) for p in parts] == [bytes, FileSlice, bytes, FileSlice] + tail
        assert parts[1] is body["responses"][0]["partitions"][0]["records"]
        size = struct.unpack(">i", parts[0][:4])[0]
        assert size == sum(p.length if isinstance(p, FileSlice) else len(p) for p in parts) - 4
        # filling the slices with bytes gives the frame a decoder reads back
        filled = b"".join(b"Z" * p.length if isinstance(p, FileSlice) else p for p in parts)
        _, got = decode_response(ApiKey.FETCH, version, filled[4:])
        assert [bytes(p["records"]) for p in got["responses"][0]["partitions"]] == [
            b"Z" * 1000, b"x" * 7, b"Z" * 5]


def test_every_truncation_is_invalid_request():
    for path in sorted(VECTORS.glob("*/*-Produce-*-request.bin")) + sorted(
            VECTORS.glob("*/*-Fetch-*-request.bin")):
        frame = path.read_bytes()
        for cut in range(len(frame)):
            with pytest.raises(InvalidRequestError):
                decode_request(frame[:cut])


def test_garbage_never_escapes_as_another_exception():
    rng = random.Random(1234)
    keys = list(api_versions_table().items())
    for _ in range(3000):
        key, (lo, hi) = rng.choice(keys)
        head = struct.pack(">hhi", key, rng.randint(lo, hi), 1)
        tail = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 60)))
        try:
            decode_request(head + tail)
        except InvalidRequestError as exc:
            assert exc.header.api_key == key
    for _ in range(500):
        junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 30)))
        try:
            decode_request(junk)
        except (InvalidRequestError, UnsupportedVersionError):
            pass


def test_huge_counts_are_rejected_without_allocating():
    # CreateTopics v0: topics array claiming 2**31-1 entries in an 8-byte body
    frame = struct.pack(">hhih", 19, 0, 1, -1) + struct.pack(">i", 2**31 - 1) + b"\x00" * 4
    with pytest.raises(InvalidRequestError):
        decode_request(frame)


def test_unknown_tagged_fields_are_skipped():
    frame = bytearray(encode_request(ApiKey.API_VERSIONS, 3, 1, "c",
                                     {"client_software_name": "n", "client_software_version": "1"}))
    assert frame[-1] == 0
    frame[-1:] = b"\x01" + b"\x63" + b"\x03" + b"abc"  # one field, tag 99, 3 bytes
    _, body = decode_request(bytes(frame[4:]))
    assert body == {"client_software_name": "n", "client_software_version": "1"}


def test_tagged_fields_only_when_not_default():
    header = RequestHeader(ApiKey.PRODUCE, 10, 1, "c")
    part = {"index": 0, "base_offset": 5, "current_leader": {"leader_id": -1, "leader_epoch": -1}}
    body = {"responses": [{"name": "t", "partition_responses": [part]}]}
    plain = encode_response(header, body)[0]
    part["current_leader"] = {"leader_id": 3, "leader_epoch": 7}
    tagged = encode_response(header, body)[0]
    # one tagged field: tag 0, size 9 (two int32 and the struct's own empty tag section)
    assert len(tagged) == len(plain) + 11
    assert bytes.fromhex("01" "00" "09" "00000003" "00000007" "00") in tagged
    _, got = decode_response(ApiKey.PRODUCE, 10, tagged[4:])
    assert got["responses"][0]["partition_responses"][0]["current_leader"] == {
        "leader_id": 3, "leader_epoch": 7}


def test_uuid_and_defaults_on_decode():
    topic_id = uuid.uuid4()
    frame = encode_request(ApiKey.METADATA, 12, 1, "c", {"topics": [{"topic_id": topic_id}]})
    _, body = decode_request(frame[4:])
    # a nullable string without a schema default defaults to "" (as in Kafka): send None
    assert body["topics"] == [{"topic_id": topic_id, "name": ""}]
    assert body["allow_auto_topic_creation"] is True  # schema default on a v12 request
    _, body = decode_request(encode_request(ApiKey.METADATA, 0, 1, "c",
                                            {"topics": [{"name": "a"}]})[4:])
    assert body["topics"] == [{"topic_id": uuid.UUID(int=0), "name": "a"}]
    assert body["allow_auto_topic_creation"] is True  # absent in v0: default


def test_encode_errors_are_our_misuse():
    with pytest.raises(EncodeError):
        encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {"group_id": None})
    with pytest.raises(EncodeError):
        encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {"generation_id": "x"})
    with pytest.raises(EncodeError):
        encode_request(ApiKey.HEARTBEAT, 99, 1, "c", {})
    with pytest.raises(EncodeError):
        encode_response(RequestHeader(ApiKey.PRODUCE, 3, 1, "c"), {"responses": [1]})
    with pytest.raises(EncodeError):  # a non-nullable array, plain and compact
        encode_request(ApiKey.PRODUCE, 8, 1, "c", {"acks": 1, "timeout_ms": 1, "topic_data": None})
    with pytest.raises(EncodeError):
        encode_request(ApiKey.PRODUCE, 9, 1, "c", {"acks": 1, "timeout_ms": 1, "topic_data": None})
    with pytest.raises(EncodeError):  # int16 length
        encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {"group_id": "g" * 32768})
    encode_request(ApiKey.HEARTBEAT, 4, 1, "c", {"group_id": "g" * 32768})  # compact: a varint length


def test_null_and_empty_are_told_apart():
    """Nullable strings, arrays and records: null and empty each survive encoding, plain and compact."""
    for version in (3, 9):
        for txn_id in (None, "", "t"):
            for records in (None, b"", b"abc"):
                body = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5,
                        "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": records}]}]}
                _, got = decode_request(encode_request(ApiKey.PRODUCE, version, 1, "c", body)[4:])
                got_records = got["topic_data"][0]["partition_data"][0]["records"]
                assert got["transactional_id"] == txn_id
                assert (None if got_records is None else bytes(got_records)) == records
    for version in (1, 9):  # Metadata: a null topic list (all topics) is not an empty one (none)
        for topics in (None, []):
            _, got = decode_request(encode_request(ApiKey.METADATA, version, 1, "c", {"topics": topics})[4:])
            assert got["topics"] == topics
