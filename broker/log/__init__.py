"""Segmented commit-log storage: append, read file slices, roll, retain, compact, flush, recover.

Depends only on :mod:`broker.records` and the standard library; it knows
nothing of the network or the cluster (ARCHITECTURE decision 5).

Public names::

    Log, LogConfig, LogManager, AppendInfo, FetchSlice, OffsetOutOfRange,
    LogRecoveryReport, RecoveryCut, LogSegment, LeaderEpochCache, LogAppender,
    RecordTooLargeError, CorruptRecordError, KafkaStorageError, LogClosedError,
    LogStartupReport, lock_log_dirs, lock_usable_log_dirs, LogDirLocks, LogDirInUseError
"""

from broker.log.appender import LogAppender
from broker.log.checkpoint import LeaderEpochCache
from broker.log.config import LogConfig
from broker.log.dirlock import LogDirInUseError, LogDirLocks, lock_log_dirs, lock_usable_log_dirs
from broker.log.errors import (
    CorruptRecordError,
    KafkaStorageError,
    LogClosedError,
    LogError,
    OffsetOutOfRange,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from broker.log.info import AppendInfo, FetchSlice, LogRecoveryReport, LogStartupReport, RecoveryCut
from broker.log.log import Log
from broker.log.manager import LogManager, parse_topic_partition
from broker.log.segment import LogSegment

__all__ = [
    "AppendInfo",
    "CorruptRecordError",
    "FetchSlice",
    "KafkaStorageError",
    "LeaderEpochCache",
    "Log",
    "LogClosedError",
    "LogAppender",
    "LogConfig",
    "LogDirInUseError",
    "LogDirLocks",
    "LogError",
    "LogManager",
    "LogStartupReport",
    "lock_log_dirs",
    "lock_usable_log_dirs",
    "parse_topic_partition",
    "LogRecoveryReport",
    "LogSegment",
    "OffsetOutOfRange",
    "RecordTooLargeError",
    "RecoveryCut",
    "UnexpectedAppendOffsetError",
]
