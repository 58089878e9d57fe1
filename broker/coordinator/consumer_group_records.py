"""The records a consumer group of the consumer protocol (KIP-848) keeps in ``__consumer_offsets``: Kafka 4.x's
layouts, so that a new coordinator (ours, or Kafka's reading the same log) finds the members, their epochs and
their assignments. Sans-I/O.

Keys are non-flexible: ``version:int16`` (which record it is) then int16-length strings. Values start with
``version:int16`` (0) and are flexible (compact strings and arrays, uvarint lengths + 1, a tagged-field
section ending each struct)::

    key 3  group                      ConsumerGroupMetadata          epoch:int32  [tag 0: metadata_hash:int64]
    key 4  group                      ConsumerGroupPartitionMetadata (Kafka 3.x; read and ignored)
    key 5  group member               ConsumerGroupMemberMetadata    instance_id rack_id client_id client_host
                                                                     subscribed_topic_names subscribed_topic_regex
                                                                     rebalance_timeout_ms:int32 server_assignor
                                                                     [tag 0: classic_member_metadata {session_timeout_ms
                                                                      supported_protocols [name metadata:bytes]}]
    key 6  group                      ConsumerGroupTargetAssignmentMetadata  assignment_epoch:int32
    key 7  group member               ConsumerGroupTargetAssignmentMember    topic_partitions [topic_id:uuid [int32]]
    key 8  group member               ConsumerGroupCurrentMemberAssignment   member_epoch previous_member_epoch:int32
                                                                     state:int8 assigned_partitions
                                                                     partitions_pending_revocation
    key 16 group regex                ConsumerGroupRegularExpression (read and ignored: resolved again here)

A null value is a tombstone. Member states (key 8): 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.protocol.codec import struct_codec
from broker.protocol.schema import f

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION = 6, 7, 8, 16
KEY_VERSIONS = frozenset((3, 4, 5, 6, 7, 8, 16))
_WITH_MEMBER = frozenset((MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT))

STATES = {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2}
STATE_NAMES = {v: k for k, v in STATES.items()}


def _partitions():
    return [f("topic_id", "uuid"), f("partitions", "[]int32")]


VALUES = {
    GROUP_METADATA: (f("epoch", "int32"), f("metadata_hash", "int64", default=0, tag=0, tagged="0+")),
    MEMBER_METADATA: (
        f("instance_id", "string", nullable="0+", default=None),
        f("rack_id", "string", nullable="0+", default=None),
        f("client_id", "string"),
        f("client_host", "string"),
        f("subscribed_topic_names", "[]string"),
        f("subscribed_topic_regex", "string", nullable="0+", default=None),
        f("rebalance_timeout_ms", "int32", default=-1),
        f("server_assignor", "string", nullable="0+", default=None),
        f("classic_member_metadata", "{}", nullable="0+", default=None, tag=0, tagged="0+", fields=[
            f("session_timeout_ms", "int32"),
            f("supported_protocols", "[]", fields=[f("name", "string"), f("metadata", "bytes")]),
        ]),
    ),
    TARGET_METADATA: (f("assignment_epoch", "int32"),),
    TARGET_MEMBER: (f("topic_partitions", "[]", fields=_partitions()),),
    CURRENT_ASSIGNMENT: (
        f("member_epoch", "int32"),
        f("previous_member_epoch", "int32"),
        f("state", "int8"),
        f("assigned_partitions", "[]", fields=_partitions()),
        f("partitions_pending_revocation", "[]", fields=_partitions()),
    ),
}

_I16 = struct.Struct(">h")


def _str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A key of one of the records above; ``member`` for keys 5, 7 and 8, the regex for key 16, else None."""

    version: int
    group: str
    member: str | None = None


def key(version: int, group: str, member: str | None = None) -> bytes:
    return _I16.pack(version) + _str(group) + (_str(member) if version in _WITH_MEMBER else b"")


def decode_key_fields(version: int, read_string) -> ConsumerGroupKey:
    """The rest of a key whose version is in :data:`KEY_VERSIONS` (``read_string`` reads one int16 string)."""
    group = read_string()
    second = read_string() if version in _WITH_MEMBER or version == REGULAR_EXPRESSION else None
    return ConsumerGroupKey(version, group, second)


def value(version: int, body: dict) -> bytes:
    out: list[bytes] = [_I16.pack(0)]
    struct_codec(VALUES[version], 0, True)[1](out, body)
    return b"".join(out)


def decode_value(version: int, data: bytes) -> dict:
    """The value of a record of key ``version`` (ValueError when it does not parse)."""
    if version not in VALUES:
        return {}
    if len(data) < 2:
        raise ValueError("value shorter than its version")
    body, _pos = struct_codec(VALUES[version], 0, True)[0](data, 2)
    return body


def partitions_body(assignment) -> list[dict]:
    """topic id -> partitions, as the records' ``[topic_id [partitions]]``."""
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))
            if ps]


def partitions_from(body: list[dict]) -> dict:
    out: dict = {}
    for tp in body:
        out[tp["topic_id"]] = out.get(tp["topic_id"], frozenset()) | frozenset(tp["partitions"])
    return out
