"""Moving a replica to another log dir of the same broker: Kafka's future replica.

AlterReplicaLogDirs asks a broker to move its replica of a partition to
another of its log dirs (how an operator empties a disk before replacing it).
As in Kafka, the move builds a *future* log beside the current one and swaps
it in when it has caught up; the current log keeps serving all along.

1. start (:class:`ReplicaMove`): an empty log in
   ``<dest dir>/<topic>-<partition>.<uuid>-future`` (Kafka's name), starting at
   the current log's start offset;
2. copy (the move's thread, Kafka's ``ReplicaAlterLogDirsThread``): whole
   batches are read from the current log, up to its log end, and appended to
   the future log with their offsets and leader epochs kept (as a follower's
   appends), ``COPY_BYTES`` at a time;
3. swap, once what is left is no more than the last copy step brought: holding the
   current log's lock (its appends wait), the rest is copied, the future log
   is flushed and closed, its dir renamed to ``<dest dir>/<topic>-<partition>``
   and opened again there, the log manager serves it in place of the current
   one, whose dir is renamed ``...-delete`` and removed in the background;
   then ``on_swapped(tp, new_log)`` lets the replica layer read and append
   through the new log. Appends that were queued for the old log answer
   NOT_LEADER_OR_FOLLOWER, which makes a client retry (on the new log).

Crash safety (the log manager's start, :func:`settle_moves_at_start`): a
``-future`` dir left by a crash is abandoned (removed): the current log was
never touched, so nothing is lost and the operator asks again. A crash between
the two renames of the swap leaves the partition in two dirs holding the same
batches (appends were held): the one with the greater log end offset is kept
(the first found on a tie), the other is removed; a partition is never served
from two dirs.

An I/O error in either dir ends the move (the log manager's failure channel
decides whether the dir goes offline); the future dir is removed if it can be.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from broker.log.checkpoint import fsync_dir
from broker.log.errors import LogClosedError
from broker.log.log import Log

if TYPE_CHECKING:
    from broker.log.manager import LogManager

logger = logging.getLogger("broker.log")

FUTURE_DIR_SUFFIX = "-future"
COPY_BYTES = 1 << 20  # read from the current log per copy step (whole batches, at least one)
IDLE_S = 0.05  # the wait when nothing was copied (the current log is not ahead)

TopicPartition = tuple[str, int]


def future_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-future``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir(name: str) -> TopicPartition | None:
    """``my-topic-3.<uuid>-future`` -> ("my-topic", 3); None for other names."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    base, sep, _id = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    topic, dash, part = base.rpartition("-")
    if not sep or not dash or not topic or not part.isdigit():
        return None
    return topic, int(part)


class ReplicaMove:
    """One replica moving to ``dest_dir``; see the module docstring. ``start()`` runs its thread."""

    def __init__(self, manager: "LogManager", tp: TopicPartition, current: Log, dest_dir: Path,
                 on_swapped: Callable[[TopicPartition, Log], None]) -> None:
        self.manager = manager
        self.tp = tp
        self.current = current
        self.dest_dir = Path(dest_dir)
        self.on_swapped = on_swapped
        self.future = Log.open(self.dest_dir / future_dir_name(*tp), current.config, clock=current.clock)
        self.future.truncate_fully_and_start_at(current.log_start_offset)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"alter-log-dir-{tp[0]}-{tp[1]}", daemon=True)

    @property
    def lag(self) -> int:
        """Offsets the future log is behind the current one (DescribeLogDirs' ``offset_lag``)."""
        return max(0, self.current.log_end_offset - self.future.log_end_offset)

    def start(self) -> None:
        self._thread.start()

    def cancel(self, wait: bool = True) -> None:
        """Stop copying and remove the future log (the current one is untouched)."""
        self._stop.set()
        if wait and self._thread is not threading.current_thread():
            self._thread.join()
        self._discard()

    def _discard(self) -> None:
        self.future.close()
        shutil.rmtree(self.future.dir, ignore_errors=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                before = self.future.log_end_offset
                if not self._copy_step():
                    self._stop.wait(IDLE_S)
                    continue
                step = self.future.log_end_offset - before
                if self.current.log_end_offset - self.future.log_end_offset <= step:
                    # within one more step of the end: finish with the current log's appends held
                    with self.current.lock:
                        if self.current.closed:
                            raise LogClosedError(f"log {self.current.dir} is closed")
                        while self._copy_step():
                            pass
                        if not self._stop.is_set():
                            self._swap()
                            return
                    break  # cancelled meanwhile: cancel() removes the future log
        except LogClosedError:  # the partition was deleted or its dir went offline: nothing to move
            self._end(None)
        except OSError as exc:
            failed = self.dest_dir if str(getattr(exc, "filename", "") or "").startswith(str(self.dest_dir)) \
                else self.current.dir.parent
            self.manager.report_io_error(failed, f"moving {self.tp[0]}-{self.tp[1]} to {self.dest_dir}", exc)
            self._end(exc)
        except Exception as exc:  # noqa: BLE001 - a bug: the move ends, the current log serves on
            logger.exception("moving %s-%d to %s failed", *self.tp, self.dest_dir)
            self._end(exc)

    def _end(self, exc: BaseException | None) -> None:
        if exc is not None:
            logger.error("moving %s-%d to %s abandoned: %s", *self.tp, self.dest_dir, exc)
        self.manager._move_ended(self)
        self._discard()

    def _copy_step(self) -> bool:
        """Copy whole batches from the future's log end; False when there is nothing to copy."""
        offset = self.future.log_end_offset
        if offset >= self.current.log_end_offset:
            return False
        piece = self.current.read(offset, COPY_BYTES, max_offset=None, min_one_batch=True)
        data = piece.read_bytes()
        if not data:
            return False
        self.future.append(data, assign_offsets=False)
        return True

    def _swap(self) -> None:
        """Under the current log's lock, caught up: put the future log in its place (module docstring, 3)."""
        started = time.perf_counter()
        future, current = self.future, self.current
        future.flush()
        future.close()
        target = self.dest_dir / current.dir.name
        os.replace(future.dir, target)
        fsync_dir(self.dest_dir)
        new = Log.open(target, current.config, recovery_point=future.log_end_offset,
                       log_start_offset=current.log_start_offset, clock=current.clock, had_clean_shutdown=True)
        self.manager._swap_in(self, new)
        self.on_swapped(self.tp, new)
        logger.info("moved %s-%d from %s to %s (%d offsets, swapped in %.3f s)", *self.tp, current.dir.parent,
                    self.dest_dir, new.log_end_offset - new.log_start_offset, time.perf_counter() - started)


def settle_moves_at_start(log_dir: Path, name: str, doomed: list[Path]) -> bool:
    """At start: a ``-future`` dir is abandoned (queued in ``doomed``); True if ``name`` was one."""
    if parse_future_dir(name) is None:
        return False
    logger.warning("abandoning the unfinished move of %s into %s (its current log is kept)", name, log_dir)
    doomed.append(log_dir / name)
    return True
