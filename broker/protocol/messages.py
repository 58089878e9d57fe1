"""Request and response messages: headers plus schema bodies, without the 4-byte size prefix
unless said otherwise.

Request header (version chosen by the API version: flexible -> v2, otherwise v1; v0 only for
ControlledShutdown v0, whose header has no client id):

    v0: api_key int16 | api_version int16 | correlation_id int32
    v1: v0 + client_id nullable string (int16 length, -1 = null)
    v2: v1 + tagged fields          (client_id stays a NON-compact nullable string)

Response header (flexible -> v1, otherwise v0; ApiVersions responses ALWAYS use v0 so that a
client that sent a version we do not know can still read the error and our version table):

    v0: correlation_id int32
    v1: v0 + tagged fields

A frame on the wire is ``size int32`` followed by ``size`` bytes of header and body.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from functools import lru_cache

from .apis import SCHEMAS
from .codec import struct_codec
from .errors import EncodeError, InvalidRequestError, InvalidResponseError, UnsupportedVersionError
from .types import Truncated, read_uvarint, string_codec

_HEAD = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
_read_client_id, _write_client_id = string_codec(flexible=False, nullable=True)
_DECODE_ERRORS = (struct.error, ValueError, IndexError, TypeError, UnicodeDecodeError)
_ENCODE_ERRORS = (struct.error, ValueError, TypeError, AttributeError, OverflowError, KeyError)


class ApiKey(enum.IntEnum):
    """The api keys that have a schema in :mod:`broker.protocol.apis`."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_ISR = 56
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass
class RequestHeader:
    """A parsed request header. ``client_id`` is None when null or not read."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def api_versions_table() -> dict[int, tuple[int, int]]:
    """Schema version ranges: api key -> (min_version, max_version)."""
    return {key: api.version_range for key, api in sorted(SCHEMAS.items())}


def _in_range(api_key: int, api_version: int) -> bool:
    api = SCHEMAS.get(api_key)
    if api is None:
        return False
    low, high = api.version_range
    return low <= api_version <= high


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if SCHEMAS[api_key].is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if SCHEMAS[api_key].is_flexible(api_version) else 0


@lru_cache(maxsize=None)
def body_codec(api_key: int, api_version: int, response: bool):
    """Compiled ``(read, write)`` for one body; compiled once, then cached."""
    api = SCHEMAS[api_key]
    fields = api.response if response else api.request
    return struct_codec(tuple(fields), api_version, api.is_flexible(api_version))


def _skip_tagged(buf, pos):
    if pos < len(buf) and buf[pos] == 0:  # no tagged fields: nearly always
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise Truncated("buffer ends inside a tagged field")
    return pos


@lru_cache(maxsize=None)
def _request_plan(api_key: int, api_version: int) -> tuple[int, object] | None:
    """(request header version, body reader) for one request version; None when we have no schema for it."""
    if not _in_range(api_key, api_version):
        return None
    return request_header_version(api_key, api_version), body_codec(api_key, api_version, False)[0]


def decode_request(frame) -> tuple[RequestHeader, dict]:
    """Parse one request frame (without size prefix) into its header and body dict.

    Raises UnsupportedVersionError (with ``.header``) for an unknown api key or a version out of
    the schema range, InvalidRequestError for a malformed or truncated header or body.
    """
    buf = memoryview(frame)
    if len(buf) < _HEAD.size:
        raise InvalidRequestError(f"request of {len(buf)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
    header = RequestHeader(api_key, api_version, correlation_id, None)
    plan = _request_plan(api_key, api_version)
    if plan is None:
        try:
            header.client_id, _ = _read_client_id(buf, _HEAD.size)
        except _DECODE_ERRORS:
            pass
        raise UnsupportedVersionError(
            f"api key {api_key} version {api_version} is not supported", header)
    header_version, read = plan
    try:
        pos = _HEAD.size
        if header_version >= 1:
            header.client_id, pos = _read_client_id(buf, pos)
        if header_version == 2:
            pos = _skip_tagged(buf, pos)
    except _DECODE_ERRORS as exc:
        raise InvalidRequestError(f"bad request header: {exc}", header) from None
    try:
        body, _ = read(buf, pos)
    except _DECODE_ERRORS as exc:
        name = SCHEMAS[api_key].name
        raise InvalidRequestError(f"bad {name} v{api_version} request: {exc}", header) from None
    return header, body


def _frame(parts: list) -> list:
    """Put the size prefix in ``parts[0]`` (a placeholder) and merge runs of bytes-like parts.

    Other objects (file slices, with an int ``length``) stay parts of their own. Each byte of
    the frame is copied once: an all-bytes frame (most answers) is joined into a bytearray whose
    prefix is patched in place; otherwise sizes are summed before anything is joined.
    """
    parts[0] = b"\0\0\0\0"
    try:
        frame = bytearray().join(parts)
    except TypeError:  # a file slice among the parts
        parts[0] = b""
    else:
        _I32.pack_into(frame, 0, len(frame) - 4)
        return [frame]
    groups: list = []
    run: list = []
    size = 0
    for part in parts:
        kind = type(part)
        if kind is bytes or kind is bytearray:
            size += len(part)
            run.append(part)
        elif isinstance(part, (bytes, bytearray, memoryview)):
            size += memoryview(part).nbytes
            run.append(part)
        else:
            size += part.length
            if run:
                groups.append(run)
                run = []
            groups.append(part)
    if run:
        groups.append(run)
    groups[0][0] = _I32.pack(size - len(parts[0]))
    return [b"".join(g) if type(g) is list else g for g in groups]


@lru_cache(maxsize=None)
def _response_plan(api_key: int, version: int) -> tuple[int, bool, object]:
    """(version answered at, tagged response header?, body writer) for one request version."""
    if api_key == ApiKey.API_VERSIONS and not _in_range(api_key, version):
        version = 0
    if not _in_range(api_key, version):
        raise EncodeError(f"no schema for api key {api_key} version {version}")
    return version, response_header_version(api_key, version) == 1, body_codec(api_key, version, True)[1]


def encode_response(header: RequestHeader, body: dict) -> list:
    """Encode a response to ``header``'s request; returns the parts of one frame.

    The first part starts with the int32 size prefix. Bytes parts are merged; a records value
    that is not bytes-like (an object with an int ``length``) is its own part, untouched, and its
    length is counted in the prefix. An ApiVersions request of a version above our range is
    answered at v0, as the protocol requires.
    """
    api_key = header.api_key
    version, tagged_header, write = _response_plan(api_key, header.api_version)
    parts = [b"", _I32.pack(header.correlation_id)]
    if tagged_header:
        parts.append(b"\x00")
    try:
        write(parts, body)
    except _ENCODE_ERRORS as exc:
        name = SCHEMAS[api_key].name
        raise EncodeError(f"cannot encode {name} v{version} response: {exc!r}") from None
    return _frame(parts)


def encode_request(api_key: int, api_version: int, correlation_id: int,
                   client_id: str | None, body: dict) -> bytes:
    """Encode one request frame, size prefix included."""
    if not _in_range(api_key, api_version):
        raise EncodeError(f"no schema for api key {api_key} version {api_version}")
    parts = [b"", _HEAD.pack(api_key, api_version, correlation_id)]
    header_version = request_header_version(api_key, api_version)
    try:
        if header_version >= 1:
            _write_client_id(parts, client_id)
        if header_version == 2:
            parts.append(b"\x00")
        body_codec(api_key, api_version, False)[1](parts, body)
    except _ENCODE_ERRORS as exc:
        name = SCHEMAS[api_key].name
        raise EncodeError(f"cannot encode {name} v{api_version} request: {exc!r}") from None
    for part in parts:
        if not isinstance(part, (bytes, bytearray, memoryview)):
            raise EncodeError("a request body can carry only bytes-like records")
    data = b"".join(parts)
    return _I32.pack(len(data)) + data


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, dict]:
    """Parse one response frame (without size prefix): ``(correlation_id, body)``."""
    if not _in_range(api_key, api_version):
        raise UnsupportedVersionError(f"api key {api_key} version {api_version} is not supported")
    buf = memoryview(frame)
    try:
        (correlation_id,) = _I32.unpack_from(buf, 0)
        pos = 4
        if response_header_version(api_key, api_version) == 1:
            pos = _skip_tagged(buf, pos)
        body, _ = body_codec(api_key, api_version, True)[0](buf, pos)
    except _DECODE_ERRORS as exc:
        name = SCHEMAS[api_key].name
        raise InvalidResponseError(f"bad {name} v{api_version} response: {exc}") from None
    return correlation_id, body
