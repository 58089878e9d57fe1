"""Record formats of the ``__consumer_offsets`` topic (Apache Kafka's layouts), sans-I/O.

Every record has a key and a value that both start with an int16 *version*;
the key version says what the record is. Strings are int16-length-prefixed
UTF-8 (length -1 = null where nullable), bytes are int32-length-prefixed, arrays
are an int32 count followed by the elements. All integers are big-endian.

Offset commit (key version 0 or 1; Kafka 2.7 writes 1)::

    key    version:int16  group:string  topic:string  partition:int32
    value  version:int16  offset:int64
           [leader_epoch:int32]              v3 only
           metadata:string
           commit_timestamp:int64
           [expire_timestamp:int64]          v1 only

    Kafka 2.7 writes value v1 when the commit carried a retention time (an expire
    timestamp: OffsetCommit v2-v4 with retention_time_ms != -1) and v3 otherwise.

Group metadata (key version 2; value versions 0-3, Kafka 2.7 writes 3)::

    key    version:int16  group:string
    value  version:int16  protocol_type:string  generation:int32
           protocol:nullable string  leader:nullable string
           [current_state_timestamp:int64]   v2+
           members:[member]
    member member_id:string
           [group_instance_id:nullable string]  v3+
           client_id:string  client_host:string
           [rebalance_timeout:int32]            v1+
           session_timeout:int32  subscription:bytes  assignment:bytes

A record with a null value is a *tombstone*: it deletes the committed offset
(offset key) or the whole group (group key) once the log is compacted.

The group -> partition mapping is Kafka's (``GroupMetadataManager.partitionFor``):
``Utils.abs(java_string_hashcode(group_id)) % partitions``, where ``Utils.abs`` is
the absolute value with ``Integer.MIN_VALUE`` mapped to 0. (Before this was fixed
the sign bit was masked off instead, which puts a group with a negative hash on
another partition than Kafka's; the coordinator moves such groups when it loads
a partition, see :mod:`broker.coordinator.coordinator`.)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from broker.coordinator import consumer_group_records as cgr
from broker.coordinator.consumer_group_records import ConsumerGroupKey

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class OffsetsRecordError(ValueError):
    """Bytes that are not a valid ``__consumer_offsets`` key or value."""


# -- the group -> partition mapping ---------------------------------------------------------
def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed int32."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` of a signed int32: ``Integer.MIN_VALUE`` gives 0, not itself."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id`` (Kafka's mapping)."""
    return java_abs(java_string_hashcode(group_id)) % num_partitions


# -- values ---------------------------------------------------------------------------------
@dataclass(slots=True)
class OffsetAndMetadata:
    """One committed offset. ``leader_epoch`` -1 and ``expire_timestamp`` -1 mean absent."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberMetadata:
    """One member as stored in a group metadata value."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    """A group's persisted state: the current generation and its members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


# -- writer/reader helpers ------------------------------------------------------------------
def _str(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise OffsetsRecordError(f"string of {len(data)} bytes is too long for an int16 length")
    return _I16.pack(len(data)) + data


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return _I32.pack(-1)
    return _I32.pack(len(value)) + bytes(value)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise OffsetsRecordError(f"truncated at byte {self.pos}: need {n} more of {len(self.buf)}")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise OffsetsRecordError(f"negative string length {n} at byte {self.pos - 2}")
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OffsetsRecordError(f"string is not UTF-8: {exc}") from None

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        return bytes(self._take(n))


# -- keys -----------------------------------------------------------------------------------
def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _str(group) + _str(topic) + _I32.pack(partition)


def group_metadata_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _str(group)


@dataclass(frozen=True, slots=True)
class OffsetKey:
    version: int
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    version: int
    group: str


def decode_key(key: bytes) -> "OffsetKey | GroupKey | ConsumerGroupKey":
    """Decode a ``__consumer_offsets`` key; OffsetsRecordError for an unknown version. Keys 3-8 and 16 are a
    consumer group's of the consumer protocol (:mod:`broker.coordinator.consumer_group_records`)."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(version, r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(version, r.string())
    if version in cgr.KEY_VERSIONS:
        return cgr.decode_key_fields(version, r.string)
    raise OffsetsRecordError(f"unknown __consumer_offsets key version {version}")


# -- offset values --------------------------------------------------------------------------
def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    """Encode as Kafka 2.7 does: v1 when an expire timestamp is set, else v3."""
    if om.expire_timestamp != -1:
        return (_I16.pack(1) + _I64.pack(om.offset) + _str(om.metadata) + _I64.pack(om.commit_timestamp)
                + _I64.pack(om.expire_timestamp))
    return (_I16.pack(3) + _I64.pack(om.offset) + _I32.pack(om.leader_epoch) + _str(om.metadata)
            + _I64.pack(om.commit_timestamp))


def encode_offset_value(om: OffsetAndMetadata, version: int) -> bytes:
    """Encode at an explicit value version 0-3 (for tests and tools)."""
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"unknown offset commit value version {version}")
    out = _I16.pack(version) + _I64.pack(om.offset)
    if version == 3:
        out += _I32.pack(om.leader_epoch)
    out += _str(om.metadata) + _I64.pack(om.commit_timestamp)
    if version == 1:
        out += _I64.pack(om.expire_timestamp)
    return out


def decode_offset_value(value: bytes) -> OffsetAndMetadata:
    r = _Reader(value)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"unknown offset commit value version {version}")
    offset = r.i64()
    leader_epoch = r.i32() if version == 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


# -- group metadata values ------------------------------------------------------------------
def group_metadata_value(g: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    """Encode a group metadata value at ``version`` (0-3; Kafka 2.7 writes 3)."""
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"unknown group metadata value version {version}")
    parts = [_I16.pack(version), _str(g.protocol_type), _I32.pack(g.generation), _str(g.protocol), _str(g.leader)]
    if version >= 2:
        parts.append(_I64.pack(g.current_state_timestamp))
    parts.append(_I32.pack(len(g.members)))
    for m in g.members:
        parts.append(_str(m.member_id))
        if version >= 3:
            parts.append(_str(m.group_instance_id))
        parts.append(_str(m.client_id))
        parts.append(_str(m.client_host))
        if version >= 1:
            parts.append(_I32.pack(m.rebalance_timeout))
        parts.append(_I32.pack(m.session_timeout))
        parts.append(_bytes(m.subscription))
        parts.append(_bytes(m.assignment))
    return b"".join(parts)


def decode_group_value(value: bytes) -> tuple[int, GroupMetadataValue]:
    """(version, value) of a group metadata value."""
    r = _Reader(value)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"unknown group metadata value version {version}")
    g = GroupMetadataValue(r.string(), r.i32(), r.string(nullable=True), r.string(nullable=True))
    if version >= 2:
        g.current_state_timestamp = r.i64()
    count = r.i32()
    for _ in range(max(count, 0)):
        member_id = r.string()
        instance = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        g.members.append(MemberMetadata(member_id, instance, client_id, client_host,
                                        rebalance_timeout if version >= 1 else session_timeout,
                                        session_timeout, r.bytes_(), r.bytes_()))
    return version, g


# -- the log dump decoder -------------------------------------------------------------------
def decode_offsets_record(key: bytes | None, value: bytes | None) -> dict:
    """A JSON-ready description of one ``__consumer_offsets`` record (for ``kafkactl log dump``).

    Bytes fields (subscription, assignment) are given as hex. Undecodable input
    gives ``{"error": ...}`` rather than raising, so one odd record does not stop a dump.
    """
    if key is None:
        return {"error": "record has no key"}
    try:
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            out: dict = {"type": "offset_commit", "key_version": k.version, "group": k.group,
                         "topic": k.topic, "partition": k.partition}
            if value is None:
                out["value"] = None
            else:
                version = _I16.unpack_from(value, 0)[0] if len(value) >= 2 else None
                om = decode_offset_value(value)
                out["value"] = {"version": version, "offset": om.offset, "leader_epoch": om.leader_epoch,
                                "metadata": om.metadata, "commit_timestamp": om.commit_timestamp,
                                "expire_timestamp": om.expire_timestamp}
            return out
        if isinstance(k, ConsumerGroupKey):
            names = {3: "consumer_group_metadata", 4: "consumer_group_partition_metadata",
                     5: "consumer_group_member_metadata", 6: "consumer_group_target_assignment_metadata",
                     7: "consumer_group_target_assignment_member", 8: "consumer_group_current_member_assignment",
                     16: "consumer_group_regular_expression"}
            out = {"type": names[k.version], "key_version": k.version, "group": k.group}
            if k.member is not None:
                out["regex" if k.version == cgr.REGULAR_EXPRESSION else "member"] = k.member
            out["value"] = None if value is None else _jsonable(cgr.decode_value(k.version, value))
            return out
        out = {"type": "group_metadata", "key_version": k.version, "group": k.group}
        if value is None:
            out["value"] = None
        else:
            version, g = decode_group_value(value)
            out["value"] = {
                "version": version, "protocol_type": g.protocol_type, "generation": g.generation,
                "protocol": g.protocol, "leader": g.leader, "current_state_timestamp": g.current_state_timestamp,
                "members": [
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                     "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
                     "session_timeout": m.session_timeout, "subscription": m.subscription.hex(),
                     "assignment": m.assignment.hex()}
                    for m in g.members
                ],
            }
        return out
    except (OffsetsRecordError, struct.error, ValueError, IndexError) as exc:
        return {"error": str(exc)}


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if hasattr(v, "hex") and hasattr(v, "int"):  # a uuid
        return str(v)
    return v
