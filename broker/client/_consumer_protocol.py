"""The "consumer" embedded protocol: what JoinGroup carries as member metadata
and SyncGroup as member assignment (Kafka's ConsumerProtocol, versions 0 and 1).

All integers are big-endian; ``string`` is int16 length + UTF-8; ``bytes`` is
int32 length + data, -1 for null; arrays are int32 count + elements::

    Subscription v0:  version int16 | topics [string] | user_data bytes
    Subscription v1:  v0 fields    | owned_partitions [topic string, partitions [int32]]
    Assignment v0/v1: version int16 | assigned_partitions [topic string, partitions [int32]]
                      | user_data bytes

Newer peers may send higher versions with fields appended; a decoder reads the
fields it knows and ignores the rest, as Kafka's own does. We write v1 (owned
partitions are what cooperative rebalancing needs).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ._types import TopicPartition
from .errors import ProtocolError

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    version: int = SUBSCRIPTION_VERSION


@dataclass
class Assignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


def _w_string(out: bytearray, s: str) -> None:
    b = s.encode()
    out += _I16.pack(len(b)) + b


def _w_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(b)) + b


def _w_topic_partitions(out: bytearray, tps) -> None:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _I32.pack(len(by_topic))
    for topic in sorted(by_topic):
        _w_string(out, topic)
        parts = sorted(by_topic[topic])
        out += _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)


class _Reader:
    def __init__(self, data) -> None:
        self.buf = memoryview(bytes(data))
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolError("truncated consumer protocol data")
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str:
        return bytes(self._take(self.i16())).decode()

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    def topic_partitions(self) -> list[TopicPartition]:
        out = []
        for _ in range(max(self.i32(), 0)):
            topic = self.string()
            for _ in range(max(self.i32(), 0)):
                out.append(TopicPartition(topic, self.i32()))
        return out

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)


def encode_subscription(sub: Subscription) -> bytes:
    out = bytearray(_I16.pack(sub.version))
    out += _I32.pack(len(sub.topics))
    for t in sub.topics:
        _w_string(out, t)
    _w_bytes(out, sub.user_data)
    if sub.version >= 1:
        _w_topic_partitions(out, sub.owned_partitions)
    return bytes(out)


def decode_subscription(data) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    topics = [r.string() for _ in range(max(r.i32(), 0))]
    user_data = r.bytes_()
    owned = r.topic_partitions() if version >= 1 and not r.at_end() else []
    return Subscription(topics, user_data, owned, version)


def encode_assignment(a: Assignment) -> bytes:
    out = bytearray(_I16.pack(a.version))
    _w_topic_partitions(out, a.partitions)
    _w_bytes(out, a.user_data)
    return bytes(out)


def decode_assignment(data) -> Assignment:
    if not data:
        return Assignment([], None, 0)
    r = _Reader(data)
    version = r.i16()
    parts = r.topic_partitions()
    user_data = r.bytes_() if not r.at_end() else None
    return Assignment(parts, user_data, version)
