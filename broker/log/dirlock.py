"""One process per log dir: an exclusive lock on ``<log.dir>/.lock`` (Apache Kafka's file name).

A broker locks every one of its log dirs before it reads anything in them (the
metadata store, ``meta.properties``, checkpoints, segments) and holds the locks
for the life of the process. A second broker started on a dir that a running
one holds is refused before it has read or written anything, in any dir: the
locks it already took are released again.

The lock is a Linux open-file-description lock (``F_OFD_SETLK``) on the whole
file, taken without waiting:

* the kernel drops it when the process ends, however it ends (``kill -9``
  included), so a stale lock never needs cleaning up;
* it conflicts with the POSIX record lock the JVM takes for
  ``FileChannel.tryLock``, so an Apache Kafka broker on the same dir is
  refused too, and a dir that one of ours holds is refused to Kafka;
* unlike a POSIX record lock it also conflicts with a second lock taken in the
  same process (two brokers in one test process, a dir listed twice).

A dir that cannot be locked because of an I/O error (its disk failed, its
mount is gone or unwritable) is no refusal for :func:`lock_usable_log_dirs`:
the broker starts with that dir offline, unless every dir is broken.

Where OFD locks do not exist, a POSIX ``lockf`` lock is taken instead (the
first two properties hold, the third does not).

The ``.lock`` file is empty and is never removed: deleting it while another
process is about to lock it would let two processes lock two different files
of the same name.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path
from typing import Iterable

LOCK_FILE = ".lock"

_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
# struct flock {short l_type; short l_whence; off_t l_start; off_t l_len; pid_t l_pid;} with C's
# alignment and tail padding ("0q"); l_len 0 means "to the end of the file", l_pid must be 0.
_WHOLE_FILE_WRITE_LOCK = struct.pack("hhqqi0q", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)


class LogDirInUseError(OSError):
    """Another process (or another broker in this one) holds a log dir's lock."""


class LogDirLocks:
    """The locks of a broker's log dirs (see the module docstring). Not thread-safe."""

    def __init__(self, fds: dict[Path, int], failed: dict[Path, OSError] | None = None) -> None:
        self._fds = fds
        #: the dirs that could not be locked for an I/O error (see :func:`lock_usable_log_dirs`)
        self.failed: dict[Path, OSError] = dict(failed or {})

    def release_dir(self, log_dir: Path | str) -> None:
        """Drop one dir's lock (its disk failed: the open file must not keep the file system busy)."""
        fd = self._fds.pop(Path(log_dir), None)
        if fd is not None:
            os.close(fd)

    def release(self) -> None:
        """Drop every lock (closing the file drops it). Safe to call twice."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)


def _lock(fd: int) -> None:
    if _F_OFD_SETLK is not None:
        fcntl.fcntl(fd, _F_OFD_SETLK, _WHOLE_FILE_WRITE_LOCK)
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def lock_log_dirs(log_dirs: Iterable[Path | str]) -> LogDirLocks:
    """Lock every log dir (creating a missing dir and its ``.lock``), or none of them.

    Raises :class:`LogDirInUseError` naming the first dir that is held
    elsewhere, or the ``OSError`` that stopped a dir from being locked; either
    way no lock is held afterwards.
    """
    locks = lock_usable_log_dirs(log_dirs)
    if locks.failed:
        locks.release()
        raise next(iter(locks.failed.values()))
    return locks


def lock_usable_log_dirs(log_dirs: Iterable[Path | str]) -> LogDirLocks:
    """Lock every log dir that can be locked; the broken ones (an I/O error, a failed mount) are left out.

    A broker starts with a broken dir offline, as Kafka does: the result's
    ``failed`` maps each such dir to the ``OSError`` met. Refused, with no lock
    held afterwards: a dir held by another process (:class:`LogDirInUseError`),
    a dir listed twice, and every dir broken (the first one's ``OSError``).
    """
    taken: dict[Path, int] = {}
    failed: dict[Path, OSError] = {}
    dirs = [Path(d) for d in log_dirs]
    try:
        for d in dirs:
            if d.resolve() in {t.resolve() for t in taken}:
                raise LogDirInUseError(f"log dir {d} is listed twice in log.dirs")
            try:
                d.mkdir(parents=True, exist_ok=True)
                fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:  # the dir's disk or mount is broken: offline, not a refusal
                failed[d] = exc
                continue
            try:
                _lock(fd)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    raise LogDirInUseError(
                        f"log dir {d} is in use by another process (it holds the lock on {d / LOCK_FILE})"
                    ) from None
                raise
            taken[d] = fd
        if dirs and len(failed) == len(dirs):
            d, exc = next(iter(failed.items()))
            raise OSError(exc.errno, f"every log dir is broken; the first, {d}: {exc.strerror or exc}")
    except BaseException:
        LogDirLocks(taken).release()
        raise
    return LogDirLocks(taken, failed)
