"""Hand-written frames: helpers for the byte-vector tests of the inter-broker, transaction and
replica placement APIs.

Hex is grouped one field a group. Non-flexible versions: int16-length strings, int32-count
arrays. Flexible versions: unsigned varint length+1 strings and count+1 arrays, and a tagged
field section (``00`` = none) closing every struct and the header.
"""

from __future__ import annotations

import uuid

from broker.protocol import RequestHeader, decode_request, decode_response, encode_request
from broker.protocol import encode_response

CORRELATION_ID = 42
TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def h(*groups: str) -> bytes:
    return bytes.fromhex("".join(groups))


def header_v1(key: int, version: int) -> bytes:
    """Request header v1: api_key, api_version, correlation_id, client_id "c"."""
    return h(f"{key:04x}", f"{version:04x}", "0000002a", "0001" "63")


def header_v2(key: int, version: int) -> bytes:
    """Request header v2: v1, then an empty tagged field section."""
    return header_v1(key, version) + h("00")


def assert_subset(got, sent, path="body"):
    """Every value of ``sent`` is in ``got`` (which also holds the defaults of unsent fields)."""
    if isinstance(sent, dict):
        for name, value in sent.items():
            assert name in got, f"{path}.{name} missing"
            assert_subset(got[name], value, f"{path}.{name}")
    elif isinstance(sent, list) and sent and isinstance(sent[0], dict):
        assert len(got) == len(sent), path
        for i, (g, s) in enumerate(zip(got, sent)):
            assert_subset(g, s, f"{path}[{i}]")
    else:
        assert got == sent, f"{path}: {got!r} != {sent!r}"


def check_request(key: int, version: int, body: dict, header: bytes, expected_body: bytes,
                  client_id: str | None = "c"):
    frame = encode_request(key, version, CORRELATION_ID, client_id, body)
    expected = header + expected_body
    assert frame == len(expected).to_bytes(4, "big") + expected
    got_header, got = decode_request(expected)
    assert got_header == RequestHeader(key, version, CORRELATION_ID, client_id)
    assert_subset(got, body)


def check_response(key: int, version: int, body: dict, expected_body: bytes, flexible: bool):
    header = h("0000002a", "00" if flexible else "")
    parts = encode_response(RequestHeader(key, version, CORRELATION_ID, "c"), body)
    expected = header + expected_body
    assert parts == [len(expected).to_bytes(4, "big") + expected]
    correlation_id, got = decode_response(key, version, expected)
    assert correlation_id == CORRELATION_ID
    assert_subset(got, body)
