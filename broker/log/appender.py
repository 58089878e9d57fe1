"""Group writes: one writer thread per log directory appends what its callers queued.

The broker's request handlers run on one event loop, and a write to the page
cache is usually quick but not always: the kernel throttles writers when
dirty pages pile up, and a failing disk can hold a ``pwrite`` for seconds.
A :class:`LogAppender` moves appends off the caller's thread. Each log
directory (each JBOD disk) gets its own appender, so a slow disk holds up
only the partitions that live on it, and the directories write in parallel.

While the writer is busy, new requests queue up. When it comes back it takes
everything queued, groups it by log (keeping each log's order) and hands each
log its group at once (:meth:`Log.append_group`), which writes consecutive
batches with one ``pwritev``. Under load the writer thus makes fewer, larger
writes, and the CRC checks on one side overlap with writes on the other
(``crc32c`` and ``pwritev`` release the GIL).

Guarantees:
- a log's appends happen in :meth:`submit` order, each exactly once;
- every submitted append gets exactly one result (an ``AppendInfo`` or the
  error it failed with), delivered after its bytes are written (or failed);
- :meth:`close` stops taking appends and returns once everything queued
  before it has been written and delivered.

Results are handed to ``deliver`` on the writer thread, one call per wake-up
(covering every log's group from it) with ``[(done, result), ...]``: the
broker passes a function that moves them to its event loop with a single
``call_soon_threadsafe``, and its ``done`` tokens are futures. The default
calls each ``done(result)`` right there.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable

from broker.log.errors import LogClosedError

log = logging.getLogger(__name__)

Done = Callable[[Any], None]

MAX_GROUP = 512  # appends taken per wake-up: bounds the time a log's lock is held and a group's latency


def _call_each(pairs: list[tuple[Done, Any]]) -> None:
    for done, result in pairs:
        done(result)


class LogAppender:
    """A writer thread that appends queued buffers to logs; see the module docstring."""

    def __init__(self, name: str, deliver: Callable[[list[tuple[Done, Any]]], None] | None = None) -> None:
        self.name = name
        self._deliver = deliver or _call_each
        self._queue: deque = deque()  # (log, records, leader_epoch, done)
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self.groups = 0  # groups written (one per log per wake-up); with ``appends``, the mean group size
        self.appends = 0
        self._thread = threading.Thread(target=self._run, name=f"log-appender-{name}", daemon=True)
        self._thread.start()

    def submit(self, log, records, leader_epoch: int, done: Done) -> None:
        """Queue ``records`` (a buffer of whole v2 batches) for ``log``; ``done(result)`` follows.

        The buffer must stay untouched until ``done`` is called (a writable one
        is patched in place). After :meth:`close`, ``done`` gets a
        :class:`LogClosedError` at once, on the caller's thread.
        """
        with self._cond:
            if not self._closed:
                self._queue.append((log, records, leader_epoch, done))
                if len(self._queue) == 1:
                    self._cond.notify()
                return
        done(LogClosedError(f"log appender {self.name} is closed"))

    @property
    def queued(self) -> int:
        """Appends waiting for the writer (not counting the group being written)."""
        return len(self._queue)

    def close(self, timeout: float | None = None) -> None:
        """Stop taking appends; return when everything queued so far is written and delivered."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        queue, cond = self._queue, self._cond
        while True:
            with cond:
                while not queue:
                    if self._closed:
                        return
                    cond.wait()
                if len(queue) <= MAX_GROUP:
                    taken = list(queue)
                    queue.clear()
                else:
                    taken = [queue.popleft() for _ in range(MAX_GROUP)]
            try:
                self._write(taken)
            except BaseException:  # pragma: no cover - _write hands every error to its caller
                log.exception("log appender %s failed", self.name)

    def _write(self, taken: list) -> None:
        by_log: dict[int, list] = {}
        for entry in taken:
            by_log.setdefault(id(entry[0]), []).append(entry)
        delivered: list[tuple[Done, Any]] = []
        for entries in by_log.values():
            target = entries[0][0]
            try:
                results = target.append_group([(records, epoch) for _log, records, epoch, _done in entries])
            except Exception as exc:  # noqa: BLE001 - a bug or an unexpected error: every caller hears of it
                log.exception("append to %s failed", getattr(target, "dir", target))
                results = [exc] * len(entries)
            delivered.extend((entry[3], result) for entry, result in zip(entries, results))
            self.groups += 1
        self.appends += len(taken)
        try:
            self._deliver(delivered)
        except Exception:  # noqa: BLE001 - a failing callback must not stop the writer
            log.exception("delivering append results of %s failed", self.name)
