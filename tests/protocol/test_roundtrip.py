"""Every api key, every version, request and response: encode -> decode -> equal, and the bytes
re-encode identically. Bodies are generated from the schema with non-default values everywhere
and two entries in every array."""

from __future__ import annotations

import uuid

import pytest

from broker.protocol import (ApiKey, RequestHeader, api_versions_table, decode_request,
                             decode_response, encode_request, encode_response)
from broker.protocol.apis import SCHEMAS

_SAMPLES = {
    "int8": 7, "int16": 300, "int32": 70000, "int64": 1 << 40, "uint16": 65000,
    "uint32": 4000000000, "float64": 2.5, "uuid": uuid.UUID(int=(1 << 127) + 12345),
    "string": "caf\u00e9-topic", "bytes": b"\x00\x01payload", "records": b"RECORDS\x00\xff" * 3,
}


def _sample(fld, seed: int):
    """A non-default value for one field."""
    if fld.fields is not None:
        if fld.is_struct:
            return {sub.name: _sample(sub, seed + 1) for sub in fld.fields}
        return [{sub.name: _sample(sub, seed + i) for sub in fld.fields} for i in (1, 2)]
    base = fld.element_type or fld.type
    if base == "bool":
        value = not fld.default_value() if fld.element_type is None else True
    elif base in ("int8", "int16", "int32", "int64"):
        value = _SAMPLES[base] + seed
    elif base == "string":
        value = f"{_SAMPLES[base]}-{seed}"
    else:
        value = _SAMPLES[base]
    if fld.element_type is not None:
        return [value, value]
    return value


def body_for(fields, version: int, flexible: bool, everything: bool, seed: int = 0):
    """``everything``: every schema field set (what we encode); otherwise only those on the wire
    at ``version`` set and the rest at defaults (what decoding must give back)."""
    body = {}
    for fld in fields:
        on_wire = version in fld.versions and (
            fld.tag is None or version not in fld.tagged or flexible)
        if not (everything or on_wire):
            body[fld.name] = fld.default_value()
        elif fld.fields is not None:
            if fld.is_struct:
                body[fld.name] = body_for(fld.fields, version, flexible, everything, seed + 1)
            else:
                body[fld.name] = [body_for(fld.fields, version, flexible, everything, seed + i)
                                  for i in (1, 2)]
        else:
            body[fld.name] = _sample(fld, seed)
    return body


def plain(value):
    """memoryviews (records) to bytes, for comparison."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


CASES = [(key, v) for key, (lo, hi) in api_versions_table().items() for v in range(lo, hi + 1)]


def test_every_api_key_has_a_name_and_schema():
    assert {int(k) for k in ApiKey} == set(SCHEMAS)


@pytest.mark.parametrize("api_key,version", CASES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in CASES])
def test_round_trip(api_key, version):
    api = SCHEMAS[api_key]
    flexible = api.is_flexible(version)

    sent = body_for(api.request, version, flexible, everything=True)
    expected = body_for(api.request, version, flexible, everything=False)
    frame = encode_request(api_key, version, 42, "client-1", sent)
    header, got = decode_request(frame[4:])
    # ControlledShutdown v0's request header (v0) has no client id
    client_id = None if (api_key, version) == (ApiKey.CONTROLLED_SHUTDOWN, 0) else "client-1"
    assert header == RequestHeader(api_key, version, 42, client_id)
    assert plain(got) == expected
    assert encode_request(api_key, version, 42, "client-1", got) == frame

    sent = body_for(api.response, version, flexible, everything=True, seed=5)
    expected = body_for(api.response, version, flexible, everything=False, seed=5)
    parts = encode_response(header, sent)
    assert len(parts) == 1
    frame = parts[0]
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, got = decode_response(api_key, version, frame[4:])
    assert correlation_id == 42
    assert plain(got) == expected
    assert encode_response(header, got) == [frame]


@pytest.mark.parametrize("api_key,version", CASES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in CASES])
def test_defaults_round_trip_and_omit_tagged_fields(api_key, version):
    """An empty body encodes with every default; decoding gives every field back."""
    api = SCHEMAS[api_key]
    flexible = api.is_flexible(version)
    frame = encode_request(api_key, version, 1, None, {})
    header, got = decode_request(frame[4:])
    assert header.client_id is None
    assert set(got) == {fld.name for fld in api.request}
    defaults = {fld.name: fld.default_value() for fld in api.response}
    frame = encode_response(header, defaults)[0]
    _, got = decode_response(api_key, version, frame[4:])
    assert got == defaults
    if flexible and api_key != ApiKey.API_VERSIONS:
        # response header v1: correlation id, then an empty tagged-field section
        assert frame[8] == 0
    if flexible:
        assert frame.endswith(b"\x00"), "tagged fields at defaults must be omitted"
