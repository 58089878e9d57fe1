"""Log dir failures: Kafka's ``LogDirFailureChannel``.

Whoever does I/O in a log dir (the writer threads, the scheduler's flushes,
retention and checkpoints, the cleaner, a fetch's read) hands an error it met
to :meth:`LogDirFailureChannel.maybe_add_offline_log_dir`. An error that
:func:`is_log_dir_failure` counts (EIO, EROFS, a missing or unreadable file
system: any ``OSError`` except the two below) takes the dir offline once and
for all, until the broker is restarted: the first report wins and calls the
channel's ``on_offline(dir, reason)`` listener (the log manager's, which
closes the dir's logs, logs one line naming the dir, the error and the
partitions, and tells the broker). Later reports for the same dir are
ignored.

ENOSPC and EDQUOT (a full disk, a used-up quota) are not failures of the dir
here: the append that met them answers KAFKA_STORAGE_ERROR, nothing of it is
published, and appends succeed again once there is room. Apache Kafka 2.7
treats every ``IOException`` alike and would take a full dir offline; a full
disk is an operator's to fix without restarting the broker, so this broker
keeps the dir.

Thread-safe: reports may come from any thread at once.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Callable

#: errors that fail one operation but leave the dir usable (see the module docstring); EBADF is a file
#: closed under a reader by a deletion or a move on another thread, not the disk
NOT_DIR_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EBADF})


def io_error_of(exc: BaseException | None) -> OSError | None:
    """The ``OSError`` behind ``exc`` (itself, or the cause of a KafkaStorageError), or None."""
    while exc is not None and not isinstance(exc, OSError):
        exc = exc.__cause__
    return exc


def is_log_dir_failure(exc: BaseException | None) -> bool:
    """True if ``exc`` (or what caused it) is an I/O error that takes a log dir offline."""
    error = io_error_of(exc)
    return error is not None and error.errno not in NOT_DIR_FAILURES


class LogDirFailureChannel:
    """The offline log dirs of this broker; see the module docstring."""

    def __init__(self, on_offline: Callable[[Path, str], None] | None = None) -> None:
        self.on_offline = on_offline
        self._offline: dict[Path, str] = {}
        self._lock = threading.Lock()

    def maybe_add_offline_log_dir(self, log_dir: Path, what: str, exc: BaseException) -> bool:
        """Take ``log_dir`` offline if ``exc`` is a dir failure and it is not offline yet; True if this did."""
        if not is_log_dir_failure(exc):
            return False
        log_dir = Path(log_dir)
        reason = f"{what}: {io_error_of(exc)}"
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = reason
        if self.on_offline is not None:
            self.on_offline(log_dir, reason)
        return True

    def add_offline_at_start(self, log_dir: Path, reason: str) -> None:
        """A dir found broken before any log was loaded: offline from the start (no listener told, no
        partitions known in it)."""
        with self._lock:
            self._offline.setdefault(Path(log_dir), reason)

    def is_offline(self, log_dir: Path) -> bool:
        return Path(log_dir) in self._offline

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Each offline dir with the reason it went offline."""
        with self._lock:
            return dict(self._offline)
