"""All logs of a broker across its log dirs (JBOD), with the background work they need.

Layout of each log dir::

    .lock                                locked by the broker that owns the dir (broker.log.dirlock)
    meta.properties                      version=0, broker.id, cluster.id
    recovery-point-offset-checkpoint     \\
    log-start-offset-checkpoint           } text checkpoints, see broker.log.checkpoint
    replication-offset-checkpoint        /  (high watermarks: the replica layer's, kept here)
    cleaner-offset-checkpoint            first dirty offset of compacted logs
    .kafka_cleanshutdown                 present only after a clean shutdown (removed before the
                                         first append can happen; written back only by ``shutdown``)
    <topic>-<partition>/                 one Log each; topic names may contain '-'
    <topic>-<partition>.<uuid>-delete/   a deleted log waiting for removal
    <topic>-<partition>.<uuid>-future/   a replica moving here from another dir (broker.log.alter_dirs)

Background threads (``start_background``): a scheduler that flushes logs
(``flush.messages`` / ``flush.ms``, woken early by appends), applies retention
every ``retention_check_interval_ms``, writes checkpoints every
``checkpoint_interval_ms``, forgets producer ids idle longer than
``producer_id_expiration_ms`` every ``producer_id_expiration_check_interval_ms``
(Kafka's ten minutes), removes deleted segments and directories; and
``cleaner_threads`` cleaner threads (``log.cleaner.threads``) that compact
``cleanup.policy=compact`` logs, each log cleaned by one thread at a time.
:meth:`resize_cleaner` changes their number on a running broker (Kafka's
``LogCleaner.reconfigure``): new threads start at once, surplus ones end
after the log they are cleaning; ``cleaner_threads_alive`` counts them.

High watermarks are not the logs': whoever owns them (the broker's replica
layer) sets ``high_watermark_of`` (``(topic, partition) -> offset or None``).
Retention and the cleaner touch only what lies below a log's high watermark,
and ``checkpoint`` writes them to ``replication-offset-checkpoint``; a log
without one is neither retained nor cleaned. Until it is set (a manager used
on its own, by offline tools) the high watermarks are the ones :meth:`startup`
read from that file (``checkpointed_high_watermarks``, clamped to each log's
range).

Appends that should not run on the caller's thread go through a
:class:`~broker.log.appender.LogAppender`, one writer thread per log dir
(``appender_for``); shutdown writes what they hold before closing the logs.

Log dir failures (Kafka's ``LogDirFailureChannel``, :mod:`broker.log.failure`):
an I/O error that fails a dir (EIO, EROFS; not ENOSPC) met by an append, a
flush, retention, a checkpoint, the cleaner, a log creation or a read
(:meth:`report_io_error`) takes that dir offline for the life of the process:
its logs leave the table and are closed without a flush, nothing more is
written in it (no checkpoints, no clean-shutdown marker, no new logs), an
append still queued for it answers :class:`KafkaStorageError`, and
``on_log_dir_offline(dir, partitions, reason)`` tells the owner (the broker)
which partitions went with it. The other dirs carry on: their checkpoints are
still written. ``live_log_dirs`` are the dirs still online. A dir already
broken when the broker starts (:meth:`mark_offline_at_start`, before
:meth:`startup`) is offline from the start: nothing in it is read or written,
and a partition whose log no live dir has is refused rather than made anew
(:meth:`create_missing_log`).

Moving a replica between dirs (AlterReplicaLogDirs): :meth:`move_log` builds
a future log in the destination and swaps it in (:mod:`broker.log.alter_dirs`,
which also says what a restart does with an unfinished move); ``future_logs``
lists the moves under way. For a replica this broker does not hold yet,
:meth:`set_preferred_log_dir` names the dir its log is created in (Kafka's
``preferredLogDirs``, in memory, used once).

Thread-safety: the log table is guarded by ``self._lock``; every method may be
called from any thread. The per-log work is serialised by each Log's own locks.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

from broker.log.alter_dirs import ReplicaMove, settle_moves_at_start
from broker.log.appender import LogAppender
from broker.log.checkpoint import (
    CLEANER_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    fsync_dir,
    read_meta_properties,
    read_offset_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
)
from broker.log.config import LogConfig
from broker.log.errors import KafkaStorageError, LogClosedError
from broker.log.failure import LogDirFailureChannel, is_log_dir_failure
from broker.log.info import LogDirStartup, LogStartupReport
from broker.log.log import Log
from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]


def parse_topic_partition(dir_name: str) -> TopicPartition | None:
    """``my-topic-3`` -> ("my-topic", 3): split on the LAST '-'. None for other names."""
    topic, sep, part = dir_name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LogManager:
    """See the module docstring."""

    def __init__(self, log_dirs: list[Path], default_config: LogConfig, clock: Callable[[], float] = time.time,
                 *, retention_check_interval_ms: int = 300_000, checkpoint_interval_ms: int = 60_000,
                 cleaner_backoff_ms: int = 15_000, cleaner_offset_map_bytes: int = 64 * 1024 * 1024,
                 cleaner_threads: int = 1,
                 topic_config: Callable[[str], LogConfig | None] | None = None,
                 flush_timer: Callable[[float], None] | None = None,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 producer_id_expiration_check_interval_ms: int = 600_000) -> None:
        if not log_dirs:
            raise ValueError("log.dirs: at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.clock = clock
        self.topic_config = topic_config
        self.flush_timer = flush_timer  # called with the seconds each scheduled flush took (metrics)
        self.retention_check_interval_ms = retention_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.cleaner_offset_map_bytes = cleaner_offset_map_bytes
        self.cleaner_threads = cleaner_threads
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self._logs: dict[TopicPartition, tuple[Log, Path]] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._doomed_dirs: list[Path] = []
        self._first_dirty: dict[TopicPartition, int] = {}
        self._cleaner_lock = threading.Lock()  # guards the two below
        self._in_cleaning: set[TopicPartition] = set()  # logs a cleaner thread is cleaning now
        self._cleaners: list[tuple[threading.Thread, threading.Event]] = []  # running (thread, its stop)
        self._appenders: dict[Path, LogAppender] = {}
        self._appenders_lock = threading.Lock()
        self._moves: dict[TopicPartition, ReplicaMove] = {}
        self._cleaner_numbers = itertools.count(1)
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        #: How appenders hand results back (see LogAppender); the broker sets one for its event loop.
        self.append_deliver: Callable[[list], None] | None = None
        #: The high watermarks :meth:`startup` read, each clamped to its log's range.
        self.checkpointed_high_watermarks: dict[TopicPartition, int] = {}
        #: Where retention, the cleaner and ``checkpoint`` get a log's high watermark (see the module docstring).
        self.high_watermark_of: Callable[[TopicPartition], int | None] = self.checkpointed_high_watermarks.get
        self.failure_channel = LogDirFailureChannel(self._take_offline)
        #: Told, on the thread that met the error, of a dir gone offline: (dir, its partitions, reason).
        self.on_log_dir_offline: Callable[[Path, list[TopicPartition], str], None] | None = None

    @property
    def live_log_dirs(self) -> list[Path]:
        """The log dirs still online, in ``log.dirs`` order."""
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    def mark_offline_at_start(self, log_dir: Path, reason: str) -> None:
        """``log_dir`` was found broken before :meth:`startup`: offline, and never loaded."""
        self.failure_channel.add_offline_at_start(Path(log_dir), reason)
        logger.error("log dir %s is offline from the start: %s", log_dir, reason)

    def report_io_error(self, log_dir: Path, what: str, exc: BaseException) -> bool:
        """Hand an error met doing ``what`` in ``log_dir`` to the failure channel; True if it took the dir offline."""
        return self.failure_channel.maybe_add_offline_log_dir(log_dir, what, exc)

    def _take_offline(self, log_dir: Path, reason: str) -> None:
        """The channel's listener: drop and close the dir's logs, then tell the owner."""
        self._cancel_moves(lambda move: log_dir in (move.dest_dir, move.current.dir.parent))
        with self._lock:
            gone = {tp: log for tp, (log, d) in self._logs.items() if d == log_dir}
            for tp in gone:
                del self._logs[tp]
                self._first_dirty.pop(tp, None)
                self.checkpointed_high_watermarks.pop(tp, None)
            self._doomed_dirs = [p for p in self._doomed_dirs if p.parent != log_dir]
        for log in gone.values():
            log.close()  # no flush: the disk failed; closing trims indexes, which may fail too (logged)
        logger.error("log dir %s is offline (%s); nothing more is written there; partitions offline: %s", log_dir,
                     reason, ", ".join(f"{t}-{p}" for t, p in sorted(gone)) or "none")
        if self.on_log_dir_offline is not None:
            self.on_log_dir_offline(log_dir, sorted(gone), reason)

    # -- startup -------------------------------------------------------------------
    def startup(self, *, keep_clean_markers: bool = False) -> LogStartupReport:
        """Load every partition dir of every log dir, recovering from the checkpointed recovery points.

        The caller must hold the dirs' locks (:func:`~broker.log.dirlock.lock_log_dirs`).
        Then each dir's clean-shutdown marker is removed (as Kafka does), unless
        ``keep_clean_markers``: loading writes nothing a marker would make
        untrue, so a caller that can fail before it appends anything (the
        broker) keeps them and calls :meth:`unmark_clean_shutdown` itself.
        Logs the returned report's one-line summary.
        """
        started = time.perf_counter()
        report = LogStartupReport()
        for d in self.live_log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            marker = d / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            loaded = LogDirStartup(str(d), clean)
            report.dirs.append(loaded)
            recovery = _read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
            starts = _read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
            hws = _read_checkpoint(d / REPLICATION_CHECKPOINT)
            self._first_dirty.update(_read_checkpoint(d / CLEANER_CHECKPOINT))
            for name in sorted(os.listdir(d)):
                path = d / name
                if not path.is_dir():
                    continue
                if name.endswith(DELETE_DIR_SUFFIX):
                    self._doomed_dirs.append(path)
                    continue
                if settle_moves_at_start(d, name, self._doomed_dirs):
                    continue
                tp = parse_topic_partition(name)
                if tp is None:
                    continue
                config = self._config_for(tp[0])
                log = Log.open(path, config, recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp),
                               clock=self.clock, had_clean_shutdown=clean and tp in recovery,
                               producer_id_expiration_ms=self.producer_id_expiration_ms)
                if tp in hws:
                    self.checkpointed_high_watermarks[tp] = max(log.log_start_offset,
                                                                min(hws[tp], log.log_end_offset))
                rep = log.recovery_report
                loaded.logs += 1
                if rep is not None:
                    loaded.logs_recovered += bool(rep.segments_checked)
                    loaded.bytes_checked += rep.bytes_checked
                    loaded.cuts += [(name, cut) for cut in rep.cuts]
                    if rep.truncated:
                        logger.warning("recovery cut data: %s", rep.summary())
                twin = self._logs.get(tp)
                if twin is not None:  # a move's swap cut short between its renames: keep one copy
                    keep, drop = (log, twin[0]) if log.log_end_offset > twin[0].log_end_offset else (twin[0], log)
                    logger.warning("%s-%d is in two log dirs (a move cut short): keeping %s, removing %s",
                                   tp[0], tp[1], keep.dir, drop.dir)
                    drop.close()
                    self._doomed_dirs.append(drop.dir)
                    if keep is twin[0]:
                        continue
                self._register(tp, log, d)
        self._remove_doomed_dirs()
        if not keep_clean_markers:
            self.unmark_clean_shutdown()
        report.seconds = time.perf_counter() - started
        logger.info("%s", report.summary())
        return report
    def unmark_clean_shutdown(self) -> None:
        """Remove every dir's clean-shutdown marker (durably), before anything can be appended.

        From here on only :meth:`shutdown` marks a dir clean again. An offline dir is left alone.
        """
        for d in self.live_log_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE
            if marker.exists():
                marker.unlink()
                fsync_dir(d)

    def _config_for(self, topic: str) -> LogConfig:
        if self.topic_config is not None:
            cfg = self.topic_config(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    def _register(self, tp: TopicPartition, log: Log, d: Path) -> None:
        log.flush_hook = self._on_flush_needed
        with self._lock:
            self._logs[tp] = (log, d)

    # -- table ---------------------------------------------------------------------
    def get_log(self, tp: TopicPartition) -> Log | None:
        entry = self._logs.get(tuple(tp))
        return entry[0] if entry else None

    def logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return {tp: e[0] for tp, e in self._logs.items()}

    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        entry = self._logs.get(tuple(tp))
        return entry[1] if entry else None

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                   log_dir: Path | None = None) -> Log:
        """Create (or return the existing) log; without ``log_dir`` pick the dir with fewest partitions."""
        tp = (topic, partition)
        with self._lock:
            existing = self._logs.get(tp)
            if existing:
                return existing[0]
            live = self.live_log_dirs
            preferred = self._preferred_dirs.pop(tp, None)
            if log_dir is None and preferred in live:
                log_dir = preferred
            if log_dir is None:
                if not live:
                    raise KafkaStorageError(f"cannot create {topic}-{partition}: every log dir is offline")
                counts = {d: 0 for d in live}
                for _log, d in self._logs.values():
                    counts[d] = counts.get(d, 0) + 1
                log_dir = min(live, key=lambda d: (counts[d], live.index(d)))
            log_dir = Path(log_dir)
            if self.failure_channel.is_offline(log_dir):
                raise KafkaStorageError(f"cannot create {topic}-{partition}: log dir {log_dir} is offline")
            try:
                log = Log.open(log_dir / f"{topic}-{partition}", config or self._config_for(topic), clock=self.clock,
                               producer_id_expiration_ms=self.producer_id_expiration_ms)
            except OSError as exc:
                if self.report_io_error(log_dir, f"creating {topic}-{partition}", exc):
                    raise KafkaStorageError(f"cannot create {topic}-{partition} in {log_dir}: {exc}") from exc
                raise
            self._register(tp, log, log_dir)
            return log

    def set_preferred_log_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Create ``tp``'s log in ``log_dir`` (one of ``log_dirs``) when it is created without a dir named."""
        with self._lock:
            self._preferred_dirs[tuple(tp)] = Path(log_dir)

    def create_missing_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """A log this broker should hold but no live dir has (found at start): make it empty, or refuse.

        While a dir is offline the log may be in it: refused with
        :class:`KafkaStorageError` (Kafka refuses to create a log that is not
        new while a dir is offline), so a partition is never served from two
        dirs. Otherwise its dir was lost (a failed disk replaced by an empty
        one): an empty log is made, and a warning says its records are gone
        from this broker (a single node has no other copy).
        """
        offline = sorted(map(str, self.failure_channel.offline_dirs))
        if offline:
            raise KafkaStorageError(f"no log of {topic}-{partition} in a live log dir, and log dirs {offline} "
                                    "are offline: it may be there")
        log = self.create_log(topic, partition, config)
        logger.warning("%s-%d had no log in any log dir (a replaced or wiped disk): it starts empty in %s at "
                       "offset 0; its records on this broker are lost", topic, partition, log.dir.parent)
        return log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and rename its dir to ``<topic>-<partition>.<uuid>-delete`` for background removal."""
        tp = (topic, partition)
        self._cancel_moves(lambda move: move.tp == tp)
        with self._lock:
            entry = self._logs.pop(tp, None)
            self._first_dirty.pop(tp, None)
            self.checkpointed_high_watermarks.pop(tp, None)
        if entry is None:
            return False
        log, _d = entry
        log.close()
        target = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(log.dir, target)
        fsync_dir(target.parent)
        with self._lock:
            self._doomed_dirs.append(target)
        self._wake.set()
        return True

    # -- moves between log dirs ----------------------------------------------------------
    def move_log(self, tp: TopicPartition, dest_dir: Path,
                 on_swapped: Callable[[TopicPartition, Log], None]) -> bool:
        """Start moving ``tp``'s log to ``dest_dir`` (a live dir of ``log_dirs``); False if it is there already.

        A move of ``tp`` under way elsewhere is cancelled first; one to the same
        dir goes on. Raises :class:`KafkaStorageError` for an offline dir (or one
        failing now) and :class:`LogClosedError` when ``tp`` has no log here.
        """
        tp = tuple(tp)
        dest_dir = Path(dest_dir)
        if self.failure_channel.is_offline(dest_dir):
            raise KafkaStorageError(f"log dir {dest_dir} is offline")
        with self._lock:
            entry = self._logs.get(tp)
            if entry is None:
                raise LogClosedError(f"no log of {tp[0]}-{tp[1]} on this broker")
            moving = self._moves.get(tp)
            if moving is not None and moving.dest_dir == dest_dir:
                return True
        self._cancel_moves(lambda move: move.tp == tp)
        if entry[1] == dest_dir:
            return False
        try:
            move = ReplicaMove(self, tp, entry[0], dest_dir, on_swapped)
        except OSError as exc:
            self.report_io_error(dest_dir, f"creating the future log of {tp[0]}-{tp[1]}", exc)
            raise KafkaStorageError(f"cannot create a future log of {tp[0]}-{tp[1]} in {dest_dir}: {exc}") from exc
        with self._lock:
            self._moves[tp] = move
        move.start()
        logger.info("moving %s-%d from %s to %s", tp[0], tp[1], entry[1], dest_dir)
        return True

    def future_logs(self) -> dict[TopicPartition, ReplicaMove]:
        """The moves under way: each partition's :class:`ReplicaMove` (``dest_dir``, ``future``, ``lag``)."""
        with self._lock:
            return dict(self._moves)

    def _cancel_moves(self, which: Callable[[ReplicaMove], bool]) -> None:
        with self._lock:
            gone = [m for m in self._moves.values() if which(m)]
            for move in gone:
                del self._moves[move.tp]
        for move in gone:
            move.cancel(wait=threading.current_thread() is not move._thread)

    def _move_ended(self, move: ReplicaMove) -> None:
        """A move gave up (its thread): forget it."""
        with self._lock:
            if self._moves.get(move.tp) is move:
                del self._moves[move.tp]

    def _swap_in(self, move: ReplicaMove, new: Log) -> None:
        """A move's swap (its thread, holding the current log's lock): serve ``new``, doom the current dir."""
        current = move.current
        with self._lock:
            self._moves.pop(move.tp, None)
            self._register(move.tp, new, move.dest_dir)
        current.close()
        target = current.dir.with_name(f"{current.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(current.dir, target)
        fsync_dir(target.parent)
        with self._lock:
            self._doomed_dirs.append(target)
        self._wake.set()

    def _remove_doomed_dirs(self) -> None:
        with self._lock:
            doomed, self._doomed_dirs = self._doomed_dirs, []
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)

    # -- periodic work ---------------------------------------------------------------
    def _on_flush_needed(self, _log: Log) -> None:
        self._wake.set()

    def flush_dirty_logs(self) -> int:
        """Flush every log whose flush.messages / flush.ms is due; returns how many were flushed.

        A log that fails (its dir went bad, or it was closed by a topic deletion
        while we flushed it) is logged and skipped: the others still get flushed.
        """
        now_ms = int(self.clock() * 1000)
        timer = self.flush_timer
        n = 0
        for tp, log in self.logs().items():
            if log.closed or not log.flush_needed(now_ms):
                continue
            started = time.perf_counter()
            try:
                log.flush()
            except (OSError, ValueError) as exc:
                if not log.closed and not self.report_io_error(log.dir.parent, f"flushing {tp[0]}-{tp[1]}", exc):
                    logger.error("flushing %s-%d failed: %s", tp[0], tp[1], exc)
                continue
            if timer is not None:
                timer(time.perf_counter() - started)
            n += 1
        return n

    def cleanup_logs(self) -> int:
        """Apply retention to every log and remove segments whose delete delay has passed."""
        now_ms = int(self.clock() * 1000)
        n = 0
        for tp, log in self.logs().items():
            try:
                if not log.closed:
                    high_watermark = self.high_watermark_of(tp)
                    if high_watermark is not None:
                        n += log.delete_retention_segments(now_ms, high_watermark=high_watermark)
                    log.purge_deleted()
            except OSError as exc:
                if not self.report_io_error(log.dir.parent, f"retention of {tp[0]}-{tp[1]}", exc):
                    logger.error("retention of %s-%d failed: %s", tp[0], tp[1], exc)
        return n

    def checkpoint(self) -> list[Path]:
        """Write the recovery-point, log-start-offset, replication and cleaner checkpoints of every live dir.

        A dir whose checkpoints cannot be written is skipped (a failing disk
        goes offline, a full one is logged); the others are still written.
        Returns the dirs that failed.
        """
        with self._lock:
            entries = list(self._logs.items())
            dirty = dict(self._first_dirty)
        failed = []
        for d in self.live_log_dirs:
            mine = [(tp, log) for tp, (log, ld) in entries if ld == d]
            try:
                write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, {tp: log.recovery_point for tp, log in mine})
                write_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT,
                                        {tp: log.log_start_offset for tp, log in mine})
                hws = {tp: self.high_watermark_of(tp) for tp, _log in mine}
                write_offset_checkpoint(d / REPLICATION_CHECKPOINT, {tp: hw for tp, hw in hws.items() if hw is not None})
                write_offset_checkpoint(d / CLEANER_CHECKPOINT,
                                        {tp: dirty[tp] for tp, _log in mine if tp in dirty})
            except OSError as exc:
                if not self.report_io_error(d, "writing its checkpoints", exc):
                    logger.error("writing the checkpoints of log dir %s failed: %s", d, exc)
                failed.append(d)
        return failed

    def clean_logs(self, stop: threading.Event | None = None) -> int:
        """One cleaner pass over every compacted log that no other thread is cleaning (until ``stop`` is
        set); returns the number of logs cleaned."""
        n = 0
        for tp, log in self.logs().items():
            if stop is not None and stop.is_set():
                break
            if log.closed or not log.config.compact:
                continue
            with self._cleaner_lock:
                if tp in self._in_cleaning:
                    continue
                self._in_cleaning.add(tp)
            try:
                n += self._clean_log(tp, log)
            finally:
                with self._cleaner_lock:
                    self._in_cleaning.discard(tp)
        return n

    def _clean_log(self, tp: TopicPartition, log: Log) -> bool:
        from broker.log.cleaner import clean_log

        high_watermark = self.high_watermark_of(tp)
        if high_watermark is None:
            return False
        first_dirty = max(self._first_dirty.get(tp, 0), log.log_start_offset)
        try:
            result = clean_log(log, int(self.clock() * 1000), first_dirty_offset=first_dirty,
                               high_watermark=high_watermark, offset_map_bytes=self.cleaner_offset_map_bytes)
        except OSError as exc:
            if self.report_io_error(log.dir.parent, f"cleaning {tp[0]}-{tp[1]}", exc):
                return False
            raise
        if result is None:
            return False
        with self._lock:
            if tp in self._logs:
                self._first_dirty[tp] = result.next_dirty_offset
        return True

    def resize_cleaner(self, threads: int) -> None:
        """Run ``threads`` cleaner threads from now on (at once if the background work runs)."""
        with self._cleaner_lock:
            self.cleaner_threads = threads
            if not self._threads or self._stop.is_set():
                return  # start_background starts them
            while len(self._cleaners) > threads:
                _thread, stop = self._cleaners.pop()
                stop.set()  # it ends after the log it is cleaning
            while len(self._cleaners) < threads:
                self._start_cleaner()
            self._threads = [t for t in self._threads if t.is_alive()]

    def _start_cleaner(self) -> None:
        """Under ``_cleaner_lock``: one more cleaner thread."""
        stop = threading.Event()
        thread = threading.Thread(target=self._cleaner_loop, args=(stop,), daemon=True,
                                  name=f"log-cleaner-{next(self._cleaner_numbers)}")
        self._cleaners.append((thread, stop))
        self._threads.append(thread)
        thread.start()

    @property
    def cleaner_threads_alive(self) -> int:
        """Cleaner threads running (a retired one counts until it has finished its log)."""
        with self._cleaner_lock:
            return sum(t.is_alive() for t in self._threads if t.name.startswith("log-cleaner-"))

    def start_background(self, *, scheduler_tick_ms: int = 1000) -> None:
        """Start the scheduler and cleaner threads (daemon threads, stopped by ``shutdown``).

        The scheduler sleeps until its next duty is due (a retention check, a
        checkpoint, a producer expiry check, a log's flush or segment removal:
        :meth:`Log.next_duty`) or it is woken (``flush.messages`` reached, a log
        dir to remove), and at most ``scheduler_tick_ms``: a duty that arises
        without waking it (a segment deleted by DeleteRecords) is done that much
        late at most. Every pass costs the event loop the GIL for a walk over
        every log, so an idle broker does not tick faster than that.
        """
        if self._threads:
            return
        self._stop.clear()
        t1 = threading.Thread(target=self._scheduler_loop, args=(scheduler_tick_ms,), name="log-scheduler",
                              daemon=True)
        self._threads = [t1]
        t1.start()
        with self._cleaner_lock:
            for _ in range(self.cleaner_threads):
                self._start_cleaner()

    def _scheduler_loop(self, tick_ms: int) -> None:
        last_retention = last_checkpoint = last_expiry = time.monotonic()
        try:
            wait_s = self._scheduler_wait(tick_ms / 1000, 0, 0, 0)
        except Exception:  # the loop below keeps trying
            logger.exception("log scheduler task failed")
            wait_s = tick_ms / 1000
        while not self._stop.is_set():
            self._wake.wait(wait_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.flush_dirty_logs()
                now = time.monotonic()
                if (now - last_retention) * 1000 >= self.retention_check_interval_ms:
                    last_retention = now
                    self.cleanup_logs()
                else:
                    for log in self.logs().values():
                        log.purge_deleted()
                if (now - last_checkpoint) * 1000 >= self.checkpoint_interval_ms:
                    last_checkpoint = now
                    self.checkpoint()
                if (now - last_expiry) * 1000 >= self.producer_id_expiration_check_interval_ms:
                    last_expiry = now
                    for log in self.logs().values():
                        log.remove_expired_producers()
                self._remove_doomed_dirs()
                wait_s = self._scheduler_wait(tick_ms / 1000, now - last_retention, now - last_checkpoint,
                                              now - last_expiry)
            except Exception:  # keep the thread alive; a failing dir must not stop the others
                logger.exception("log scheduler task failed")
                wait_s = tick_ms / 1000

    def _scheduler_wait(self, longest: float, since_retention: float, since_checkpoint: float,
                        since_expiry: float) -> float:
        """Seconds until the scheduler's next duty (see :meth:`start_background`), at most ``longest``."""
        wait = min(longest, self.retention_check_interval_ms / 1000 - since_retention,
                   self.checkpoint_interval_ms / 1000 - since_checkpoint,
                   self.producer_id_expiration_check_interval_ms / 1000 - since_expiry)
        now = self.clock()
        for log in self.logs().values():
            due = log.next_duty()
            if due is not None and due - now < wait:
                wait = due - now
        return max(wait, 0.01)  # a duty overdue (a flush that keeps failing) must not spin the thread

    def _cleaner_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.cleaner_backoff_ms / 1000):
            try:
                self.clean_logs(stop)
            except Exception:
                logger.exception("log cleaner pass failed")

    # -- group writes -------------------------------------------------------------------
    def appender_for(self, log: Log) -> LogAppender:
        """The writer thread of the log dir holding ``log`` (started on first use).

        One per log dir: a slow or failing disk holds up only its own partitions,
        and the disks are written in parallel. Remembered on the log: a produce
        asks on every request.
        """
        appender = log.appender
        if appender is not None:
            return appender
        log_dir = log.dir.parent
        appender = self._appenders.get(log_dir)
        if appender is None:
            with self._appenders_lock:  # not self._lock: create_log holds that across disk I/O
                appender = self._appenders.get(log_dir)
                if appender is None:
                    appender = LogAppender(str(log_dir), lambda results: self._deliver_appends(log_dir, results))
                    self._appenders[log_dir] = appender
        log.appender = appender
        return appender

    def _deliver_appends(self, log_dir: Path, results: list) -> None:
        """On ``log_dir``'s writer: take the dir offline on a failed write, then hand the results on.

        An append queued before the dir went offline finds its log closed: it
        answers KAFKA_STORAGE_ERROR, as the dir's failure is why.
        """
        for i, (done, result) in enumerate(results):
            if isinstance(result, KafkaStorageError):
                self.report_io_error(log_dir, "appending", result)
            elif isinstance(result, LogClosedError) and self.failure_channel.is_offline(log_dir):
                results[i] = (done, KafkaStorageError(f"log dir {log_dir} is offline"))
        deliver = self.append_deliver
        if deliver is None:
            for done, result in results:
                done(result)
        else:
            deliver(results)

    def appender_stats(self) -> dict[Path, tuple[int, int, int, int, int]]:
        """Per log dir: (appends queued now, groups written, appends written, waits for a prompt append,
        those that ran out)."""
        return {d: (a.queued, a.groups, a.appends, a.waits, a.waits_timed_out)
                for d, a in list(self._appenders.items())}

    # -- shutdown ---------------------------------------------------------------------
    def shutdown(self) -> None:
        """Write what is queued, stop background threads, flush and checkpoint, close logs, mark a clean shutdown."""
        self._stop_writers()
        logs = self.logs()
        failed = set()
        for tp, log in logs.items():
            try:
                log.flush()
            except OSError as exc:
                if not self.report_io_error(log.dir.parent, f"flushing {tp[0]}-{tp[1]} at shutdown", exc):
                    logger.error("flushing %s-%d at shutdown failed: %s", tp[0], tp[1], exc)
                failed.add(log.dir.parent)
        failed.update(self.checkpoint())
        for log in logs.values():
            log.close()
        self._remove_doomed_dirs()
        failed.update(self.failure_channel.offline_dirs)
        for d in self.log_dirs:
            if d in failed:  # no marker: the next start recovers this dir's logs in full
                logger.error("log dir %s is not marked as cleanly shut down", d)
                continue
            try:
                (d / CLEAN_SHUTDOWN_FILE).touch()
                fsync_dir(d)
            except OSError as exc:
                logger.error("marking log dir %s as cleanly shut down failed: %s", d, exc)

    def abandon(self) -> None:
        """After a failed start: stop the threads and close the logs, marking nothing.

        No flush, no checkpoints, no producer snapshots, no clean-shutdown marker: the dirs stay as
        the failed start left them, and the next start recovers every log that
        was loaded from its checkpointed recovery point.
        """
        self._stop_writers()
        for log in self.logs().values():
            log.close(snapshot=False)

    def _stop_writers(self) -> None:
        self._cancel_moves(lambda move: True)  # a restart would abandon them anyway
        for appender in list(self._appenders.values()):
            appender.close()
        with self._cleaner_lock:
            self._stop.set()
            for _thread, stop in self._cleaners:
                stop.set()
            self._cleaners = []
            threads, self._threads = self._threads, []
        self._wake.set()
        for t in threads:
            t.join()

    # -- meta.properties --------------------------------------------------------------
    def ensure_meta_properties(self, broker_id: int, cluster_id: str | None) -> None:
        """Write meta.properties where missing (in the live dirs); raise ValueError if an existing one disagrees."""
        for d in self.live_log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            props = read_meta_properties(d)
            if props is None:
                write_meta_properties(d, broker_id=broker_id, cluster_id=cluster_id)
                continue
            if props.get("broker.id") not in (None, str(broker_id)):
                raise ValueError(f"{d}/meta.properties: broker.id={props['broker.id']} does not match {broker_id}")
            if cluster_id is not None and props.get("cluster.id") not in (None, cluster_id):
                raise ValueError(f"{d}/meta.properties: cluster.id={props['cluster.id']} does not match {cluster_id}")


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_offset_checkpoint(path)
    except ValueError as exc:
        logger.warning("ignoring unreadable checkpoint: %s", exc)
        return {}
