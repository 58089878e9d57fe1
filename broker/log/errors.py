"""Errors raised by the log, each carrying the Kafka error code it maps to.

``CorruptRecordError`` (code 2) comes from :mod:`broker.records.view` and is
re-exported here so callers of the log can catch everything from one place.
"""

from __future__ import annotations

from broker.records.view import CorruptRecordError

__all__ = [
    "CorruptRecordError",
    "KafkaStorageError",
    "LogError",
    "OffsetOutOfRange",
    "RecordTooLargeError",
    "InvalidTimestampError",
    "UnexpectedAppendOffsetError",
]


class LogError(Exception):
    """Base class of errors raised by :mod:`broker.log` (UNKNOWN_SERVER_ERROR, -1)."""

    error_code = -1


class OffsetOutOfRange(LogError):
    """The requested offset is outside ``[log_start_offset, log_end_offset]``.

    Maps to OFFSET_OUT_OF_RANGE (1). Carries the valid range so a consumer can
    reset to the earliest or the latest offset ("right now").
    """

    error_code = 1

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(LogError):
    """A batch is larger than ``max.message.bytes``. Maps to MESSAGE_TOO_LARGE (10)."""

    error_code = 10


class InvalidTimestampError(LogError):
    """A timestamp is invalid for the topic's settings. Maps to INVALID_TIMESTAMP (32)."""

    error_code = 32


class KafkaStorageError(LogError):
    """The log directory failed (I/O error). Maps to KAFKA_STORAGE_ERROR (56)."""

    error_code = 56


class UnexpectedAppendOffsetError(LogError):
    """A follower append (offsets kept) starts below the log end offset or is not increasing."""

    error_code = -1


class LogClosedError(LogError, ValueError):
    """The log was closed (its partition deleted or moved, or the broker stopping).

    Maps to NOT_LEADER_OR_FOLLOWER (6), which makes a client refresh its
    metadata and retry where the partition lives now. A ``ValueError`` too, as
    operations on a closed log have always raised.
    """

    error_code = 6
