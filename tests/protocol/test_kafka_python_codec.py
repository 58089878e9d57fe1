"""Our schemas against kafka-python's codec, which is generated from Apache Kafka's own JSON
message definitions: for every API both know and every version of ours, a body with a
non-default value in every field (see :mod:`.test_roundtrip`) that we encode, kafka-python
decodes to the same values and re-encodes to the same bytes. A field of ours with the wrong
type, order, version range, nullability or tag shows up as a decode error or a difference.

kafka-python knows neither the inter-broker APIs (LeaderAndIsr, UpdateMetadata, ...) nor
AlterIsr; those are checked against hand-written frames in :mod:`.test_controller_vectors`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import uuid
from collections import Counter

import kafka.protocol
import pytest
from kafka.protocol.api_message import ApiMessage

from broker.protocol import ApiKey
from broker.protocol.apis import SCHEMAS
from broker.protocol.messages import body_codec

from .test_roundtrip import body_for


def _kafka_python_messages() -> dict[tuple[int, str], type]:
    """(api key, "request" | "response") -> kafka-python's message class."""
    found = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (inspect.isclass(value) and issubclass(value, ApiMessage) and value is not ApiMessage
                    and getattr(value, "_json", None)):
                found[(value.API_KEY, value.type)] = value
    return found


MESSAGES = _kafka_python_messages()
CASES = [(key, kind, version)
         for key, api in sorted(SCHEMAS.items())
         # ApiVersions responses are special-cased by both sides (v0 body on error, v0 header)
         if key != ApiKey.API_VERSIONS
         for kind in ("request", "response") if (key, kind) in MESSAGES
         for version in range(api.version_range[0], api.version_range[1] + 1)]


def _on_wire(fld, version: int, flexible: bool) -> bool:
    return version in fld.versions and (fld.tag is None or version not in fld.tagged or flexible)


def _our_leaves(fields, body: dict, version: int, flexible: bool):
    """Every primitive value on the wire at ``version``, arrays flattened."""
    for fld in fields:
        if not _on_wire(fld, version, flexible):
            continue
        value = body[fld.name]
        if value is None:
            yield None
        elif fld.fields is not None:
            for element in ([value] if fld.is_struct else value):
                yield from _our_leaves(fld.fields, element, version, flexible)
        elif fld.element_type is not None:
            yield from value
        else:
            yield value


def _their_leaves(value):
    if isinstance(value, dict):
        for sub in value.values():
            yield from _their_leaves(sub)
    elif isinstance(value, list):
        for sub in value:
            yield from _their_leaves(sub)
    else:
        yield value


def _plain(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (set, frozenset)):  # kafka-python turns authorized operations into a set
        return sum(1 << bit for bit in value)
    return value


def test_the_new_apis_are_cross_checked():
    keys = {key for key, _kind, _version in CASES}
    for name in ("ADD_PARTITIONS_TO_TXN", "ADD_OFFSETS_TO_TXN", "END_TXN", "WRITE_TXN_MARKERS",
                 "TXN_OFFSET_COMMIT", "DESCRIBE_PRODUCERS", "DESCRIBE_TRANSACTIONS",
                 "LIST_TRANSACTIONS", "ALTER_REPLICA_LOG_DIRS", "ELECT_LEADERS",
                 "ALTER_PARTITION_REASSIGNMENTS", "LIST_PARTITION_REASSIGNMENTS",
                 "OFFSET_FOR_LEADER_EPOCH", "FETCH", "INIT_PRODUCER_ID", "DESCRIBE_LOG_DIRS"):
        assert ApiKey[name] in keys, name


@pytest.mark.parametrize("api_key,kind,version", CASES,
                         ids=[f"{ApiKey(k).name}-{kind}-v{v}" for k, kind, v in CASES])
def test_kafka_python_reads_what_we_write(api_key, kind, version):
    api = SCHEMAS[api_key]
    message = MESSAGES[(api_key, kind)]
    assert version <= message.max_version, f"kafka-python stops at v{message.max_version}"
    flexible = api.is_flexible(version)
    assert message.flexible_version_q(version) == flexible
    fields = api.request if kind == "request" else api.response
    body = body_for(fields, version, flexible, everything=True)
    parts: list = []
    body_codec(api_key, version, kind == "response")[1](parts, body)
    data = b"".join(bytes(part) for part in parts)

    decoded = message.decode(data, version=version)
    decoded._header = None  # a decoded body has no header slot set; encode reads it
    assert decoded.encode(version=version) == data
    ours = Counter(_plain(v) for v in _our_leaves(fields, body, version, flexible))
    theirs = Counter(_plain(v) for v in _their_leaves(decoded.to_dict(json=False)))
    assert ours == theirs
