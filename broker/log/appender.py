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
batches together (``pwritev`` calls of up to 1 MiB). Under load the writer
thus makes fewer, larger writes, and the CRC checks on the submitting side
overlap with the writes on the other (``crc32c`` and ``pwritev`` release the
GIL).

A leader's appends get their offsets here (``assign_offsets``); a follower's
(``submit(..., as_follower=True)``) keep the offsets and leader epochs the
leader gave them, and are still validated (CRC, sizes, offsets above the log
end). A log's leader and follower appends are never written in one group.

Guarantees:
- a log's appends happen in :meth:`submit` order, each exactly once;
- every submitted append gets exactly one result (an ``AppendInfo`` or the
  error it failed with), delivered after its bytes are written (or failed);
- :meth:`close` stops taking appends and returns once everything queued
  before it has been written and delivered.

Results are handed to ``deliver`` on the writer thread, one call per wake-up
(covering every log's group from it) with ``[(done, result), ...]``: the
broker passes its :class:`~broker.replica.handback.AppendHandback`, which
moves them to its event loop (a single ``call_soon_threadsafe``, or straight
to a loop that waits for them), and its ``done`` tokens are futures. The
default calls each ``done(result)`` right there.

Co-location: when a caller will wait for a prompt append (``submit(...,
will_wait=True)``: the writer idle, nothing else queued), the writer is pinned
to the caller's CPU before it is woken. The caller blocks right after waking
it, so the write runs on the CPU the caller leaves, with that CPU's caches
warm, instead of waking an idle one (on a virtual machine an idle vCPU takes
tens of microseconds to wake): measured here, a 5 KB acks=all round trip
falls from 0.26-0.28 ms to 0.19-0.22 ms. The two threads never need two CPUs
at once then (the caller sleeps until the write is done). The pin stays while
appends keep coming that way (at low rates, every one: no system call per
append) and follows the caller to another CPU; the first append that does not
(one queued behind others, one nobody waits for) gives the writer its own
affinity back before it is woken. Where ``sched_getcpu`` or
``sched_setaffinity`` is missing or refused, appends are simply not co-located.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections import deque
from typing import Any, Callable

from broker.log.errors import LogClosedError
from broker.log.log import check_single_batch
from broker.records.view import CorruptRecordError

log = logging.getLogger(__name__)

Done = Callable[[Any], None]

def _find_sched_getcpu() -> Callable[[], int] | None:
    """glibc's ``sched_getcpu`` (the CPU this thread runs on), or None where there is none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return fn if fn() >= 0 else None


_sched_getcpu = _find_sched_getcpu()

MAX_GROUP = 128  # appends taken per wake-up: bounds how long the writer holds the GIL and a log's lock


def _call_each(pairs: list[tuple[Done, Any]]) -> None:
    for done, result in pairs:
        done(result)


class LogAppender:
    """A writer thread that appends queued buffers to logs; see the module docstring."""

    def __init__(self, name: str, deliver: Callable[[list[tuple[Done, Any]]], None] | None = None) -> None:
        self.name = name
        self._deliver = deliver or _call_each
        self._queue: deque = deque()  # (records, leader_epoch, done, log, assign_offsets)
        # The writer sleeps on this lock (held while nobody asked to wake it); a submitter that sees
        # it idle releases it. A bare lock costs a fraction of a Condition's wait/notify in Python.
        self._wake = threading.Lock()
        self._wake.acquire()
        self._closed = False
        self._idle = False  # set by the writer before it looks at the queue a last time and sleeps
        self._slow_until = 0.0  # time.monotonic() before which no append is prompt (see submit)
        self._colocate = _sched_getcpu is not None
        self._pinned_to = -1  # the CPU the writer is pinned to (see "Co-location"), -1 when not
        self.groups = 0  # groups written (one per log per wake-up); with ``appends``, the mean group size
        self.appends = 0
        self.waits = 0  # prompt appends submitted with will_wait, and waits that ran out (mark_slow)
        self.waits_timed_out = 0
        self._thread = threading.Thread(target=self._run, name=f"log-appender-{name}", daemon=True)
        self._cpus: set[int] = set()
        self._thread.start()
        try:
            self._cpus = os.sched_getaffinity(self._thread.native_id)  # the writer's own, given back after pins
        except OSError:
            self._colocate = False

    def submit(self, log, records, leader_epoch: int, done: Done, *, as_follower: bool = False,
               will_wait: bool = False) -> bool:
        """Queue ``records`` (a buffer of whole v2 batches) for ``log``; ``done`` gets the result later.

        As a leader (the default) the batches get the next offsets and
        ``leader_epoch``; ``as_follower`` keeps the offsets and epochs they carry.

        The buffer must stay untouched until then (a writable one is patched in
        place). After :meth:`close`, ``done`` gets a :class:`LogClosedError` at
        once, through ``deliver`` on the caller's thread.

        A buffer holding one v2 batch has its CRC-32C checked here, on the
        caller's thread (a mismatch is delivered at once): the writer thread
        then only places and writes, and the checks of the next appends
        overlap with the writes of the previous ones.

        No lock on the way in: ``deque.append`` is atomic, and the writer only
        needs waking when it said it is idle (it re-checks the queue after
        saying so, so no append is missed).

        Returns whether the append is *prompt*: the writer was idle and this is
        the only append queued, so it is written at once and alone, and the
        dir has not been slow lately (:meth:`mark_slow`). Only a prompt append
        is worth a short wait on the caller's side (see
        :mod:`broker.replica.handback`). ``will_wait`` says the caller then
        waits for it: the writer is woken on the caller's CPU for this one
        write (see "Co-location" in the module docstring).
        """
        if self._closed:
            self._deliver([(done, LogClosedError(f"log appender {self.name} is closed"))])
            return False
        try:
            check_single_batch(records)
        except CorruptRecordError as exc:
            self._deliver([(done, exc)])
            return False
        queue = self._queue
        queue.append((records, leader_epoch, done, log, not as_follower))
        if self._closed:
            # close() ran meanwhile (the CRC check released the GIL): the writer may be gone
            # already, so refuse what is left; each entry is popped by one side only.
            self._refuse_queued()
        elif self._idle:
            prompt = len(queue) == 1 and time.monotonic() >= self._slow_until
            if prompt and will_wait:
                self.waits += 1
                if self._colocate:
                    cpu = _sched_getcpu()
                    if cpu != self._pinned_to:
                        self._pin(cpu)
            elif self._pinned_to >= 0:
                self._pin(-1)
            # Woken at once, the writer waits for the GIL this thread holds, but its wake-up
            # overlaps with the rest of this thread's work (waking it later was slower).
            self._wake_writer()
            return prompt
        elif self._pinned_to >= 0:  # appends queue up: the writer may need a CPU of its own again
            self._pin(-1)
        return False

    def _pin(self, cpu: int) -> None:
        """Pin the writer to ``cpu``, or give it its own CPUs back (-1); see "Co-location"."""
        try:
            os.sched_setaffinity(self._thread.native_id, self._cpus if cpu < 0 else {cpu})
            self._pinned_to = cpu
        except (OSError, ValueError) as exc:  # a cpuset that changed under us, a CPU gone: stop trying
            self._colocate = False
            log.info("log appender %s: not co-locating the writer any more: %s", self.name, exc)

    def mark_slow(self, seconds: float) -> None:
        """Say no append of this dir is prompt for ``seconds`` (a wait for one ran out)."""
        self.waits_timed_out += 1
        self._slow_until = time.monotonic() + seconds

    @property
    def queued(self) -> int:
        """Appends waiting for the writer (not counting the group being written)."""
        return len(self._queue)

    def close(self, timeout: float | None = None) -> None:
        """Stop taking appends; return when everything queued so far is written and delivered."""
        self._closed = True
        self._wake_writer()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._refuse_queued()

    def _wake_writer(self) -> None:
        try:
            self._wake.release()
        except RuntimeError:  # released already (another submitter, or close): the writer will look
            pass

    def _refuse_queued(self) -> None:
        """Answer every queued append with LogClosedError (appends that raced close)."""
        while True:
            try:
                done = self._queue.popleft()[2]
            except IndexError:
                return
            self._deliver([(done, LogClosedError(f"log appender {self.name} is closed"))])

    def _run(self) -> None:
        queue, wake = self._queue, self._wake
        self._idle = True
        while True:
            # _idle is set: said first, then looked, so a submitter either finds it set (and
            # wakes us) or appended before this check. An extra wake-up only costs a pass.
            if not queue:
                if self._closed:
                    return  # closed and drained
                wake.acquire()
                continue
            self._idle = False
            if len(queue) <= MAX_GROUP:
                taken = list(queue)
                for _ in range(len(taken)):
                    queue.popleft()
            else:
                taken = [queue.popleft() for _ in range(MAX_GROUP)]
            try:
                delivered = self._write(taken)
            except BaseException:  # pragma: no cover - _write hands every error to its caller
                log.exception("log appender %s failed", self.name)
                delivered = []
            # Idle before delivering, and asleep right after: the thread woken by the delivery
            # (the event loop) then rarely has to wait for the GIL this writer still holds.
            self._idle = True
            try:
                self._deliver(delivered)
            except Exception:  # noqa: BLE001 - a failing callback must not stop the writer
                log.exception("delivering append results of %s failed", self.name)

    def _write(self, taken: list) -> list[tuple[Done, Any]]:
        """Append what was taken, one group per log and mode (each log's entries in order); the results."""
        first, mode = taken[0][3], taken[0][4]
        if len(taken) == 1 or all(entry[3] is first and entry[4] is mode for entry in taken):
            groups = [taken]
        else:
            groups = self._by_log(taken)
        delivered: list[tuple[Done, Any]] = []
        for entries in groups:
            target = entries[0][3]
            try:
                results = target.append_group(entries, assign_offsets=entries[0][4], crc_checked=True)
            except Exception as exc:  # noqa: BLE001 - a bug or an unexpected error: every caller hears of it
                log.exception("append to %s failed", getattr(target, "dir", target))
                results = [exc] * len(entries)
            delivered += [(entry[2], result) for entry, result in zip(entries, results)]
            self.groups += 1
        self.appends += len(taken)
        return delivered

    @staticmethod
    def _by_log(taken: list) -> list[list]:
        """Each log's entries in order, cut where the mode changes (leader and follower appends apart)."""
        by_log: dict[int, list[list]] = {}
        for entry in taken:
            runs = by_log.setdefault(id(entry[3]), [])
            if runs and runs[-1][-1][4] is entry[4]:
                runs[-1].append(entry)
            else:
                runs.append([entry])
        return [run for runs in by_log.values() for run in runs]
