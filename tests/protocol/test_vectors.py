"""Frames captured from real clients (tests/vectors/protocol, see its README): every request
decodes with the expected api key, version and fields and re-encodes to identical bytes; every
response decodes, and what we encode from it decodes to the same values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.protocol import (ApiKey, ErrorCode, RequestHeader, UnsupportedVersionError, decode_request,
                             decode_response, encode_request, encode_response)

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "protocol"
TOPIC = "vectors-topic"
GROUP = "vectors-group"
_NAME = re.compile(r"^\d+-(\w+?)-v(\d+)-request\.bin$")

REQUESTS = sorted(VECTORS.glob("*/*-request.bin"))
# requests whose api key or version is outside our schemas (see the README)
UNSUPPORTED = {"kafka-python": {"ApiVersions-v4",
               "FindCoordinator-v6", "ListOffsets-v9"}}


def _ids(paths):
    return [f"{p.parent.name}/{p.name}" for p in paths]


def _api(path: Path):
    name, version = _NAME.match(path.name).groups()
    key = None if name.startswith("Api") and name[3:].isdigit() else ApiKey[
        re.sub(r"(?<!^)([A-Z])", r"_\1", name).upper()]
    return name, key, int(version)


def _unsupported(path: Path) -> bool:
    name, _key, version = _api(path)
    wanted = UNSUPPORTED.get(path.parent.name, set())
    return name in wanted or f"{name}-v{version}" in wanted


def _topic_names(body, version, key):
    """Topic names a request names, whatever the version calls the field."""
    if key == ApiKey.PRODUCE:
        return [t["name"] for t in body["topic_data"]]
    if key == ApiKey.FETCH:
        return [t["topic"] for t in body["topics"]]
    if key in (ApiKey.LIST_OFFSETS, ApiKey.CREATE_TOPICS, ApiKey.OFFSET_COMMIT,
               ApiKey.DELETE_RECORDS):
        return [t["name"] for t in body["topics"]]
    if key == ApiKey.DELETE_TOPICS:
        return [t["name"] for t in body["topics"]] if version >= 6 else body["topic_names"]
    if key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        return [r["resource_name"] for r in body["resources"]]
    return None


def test_vectors_present():
    clients = {p.parent.name for p in REQUESTS}
    assert clients == {"confluent-kafka", "kafka-python", "aiokafka", "kcat"}
    assert len(REQUESTS) > 50


@pytest.mark.parametrize("path", REQUESTS, ids=_ids(REQUESTS))
def test_captured_request(path: Path):
    frame = path.read_bytes()
    name, key, version = _api(path)
    if _unsupported(path):
        with pytest.raises(UnsupportedVersionError) as info:
            decode_request(frame)
        header = info.value.header
        assert (header.api_version, header.correlation_id) == (
            version, int.from_bytes(frame[4:8], "big", signed=True))
        assert header.client_id  # every client sends one; the server needs it to answer
        return
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version) == (key, version)
    assert header.client_id
    assert encode_request(key, version, header.correlation_id, header.client_id, body)[4:] == frame

    topics = _topic_names(body, version, key)
    if topics is not None and not (key == ApiKey.FETCH and version >= 13):
        assert set(topics) == {TOPIC}
    if key == ApiKey.FETCH and version >= 13:
        assert all(t["topic_id"].int != 0 for t in body["topics"])
    if key == ApiKey.CREATE_TOPICS:
        assert body["topics"][0]["num_partitions"] == 2
        assert body["topics"][0]["replication_factor"] == 1
    if key == ApiKey.PRODUCE:
        for topic in body["topic_data"]:
            for part in topic["partition_data"]:
                records = part["records"]
                assert isinstance(records, memoryview)
                assert records[16] == 2  # RecordBatch magic: records are a zero-copy slice
                assert int.from_bytes(records[8:12], "big") == len(records) - 12
    if key in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.OFFSET_COMMIT,
               ApiKey.LEAVE_GROUP):
        assert body["group_id"] == GROUP
    if key == ApiKey.JOIN_GROUP:
        assert body["protocol_type"] == "consumer"
        assert body["protocols"] and all(p["metadata"] for p in body["protocols"])
    if key == ApiKey.FIND_COORDINATOR:
        assert (body["coordinator_keys"] if version >= 4 else [body["key"]]) == [GROUP]
    if key == ApiKey.OFFSET_FETCH:
        groups = [g["group_id"] for g in body["groups"]] if version >= 8 else [body["group_id"]]
        assert groups == [GROUP]
    if key == ApiKey.INCREMENTAL_ALTER_CONFIGS:
        assert body["resources"][0]["resource_type"] == 2  # TOPIC
        assert body["resources"][0]["configs"] == [
            {"name": "retention.ms", "config_operation": 0, "value": "120000"}]
    if key == ApiKey.DELETE_RECORDS:
        assert body["topics"][0]["partitions"] == [{"partition_index": 0, "offset": 1}]
    if key == ApiKey.DELETE_GROUPS:
        assert body["groups_names"] == [GROUP]
    if key == ApiKey.API_VERSIONS and version >= 3:
        assert body["client_software_name"]


RESPONSES = [p for p in sorted(VECTORS.glob("*/*-response.bin"))
             if not _unsupported(Path(str(p).replace("-response", "-request")))]


@pytest.mark.parametrize("path", RESPONSES, ids=_ids(RESPONSES))
def test_captured_response(path: Path):
    request = decode_request(Path(str(path).replace("-response", "-request")).read_bytes())[0]
    frame = path.read_bytes()
    correlation_id, body = decode_response(request.api_key, request.api_version, frame)
    assert correlation_id == request.correlation_id
    if "error_code" in body:
        # a first JoinGroup is answered MEMBER_ID_REQUIRED (KIP-394); everything else succeeded
        assert ErrorCode(body["error_code"]) in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED)
    ours = b"".join(encode_response(RequestHeader(request.api_key, request.api_version,
                                                  correlation_id), body))
    assert decode_response(request.api_key, request.api_version, ours[4:]) == (correlation_id, body)
    if request.api_key == ApiKey.API_VERSIONS:
        keys = {entry["api_key"] for entry in body["api_keys"]}
        assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA} <= keys
    if request.api_key == ApiKey.CREATE_TOPICS:
        assert [t["name"] for t in body["topics"]] == [TOPIC]
