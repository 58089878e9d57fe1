"""How written appends get back to the event loop, and the short wait that saves a pass of it.

The log dirs' writer threads (:class:`~broker.log.appender.LogAppender`) hand
their results to :meth:`AppendHandback.deliver`. Normally that is one
``call_soon_threadsafe``: the loop wakes on its self-pipe, publishes the
appends (:meth:`ReplicaManager.settle`) and resumes each waiting Produce in a
later pass, so an append costs the loop two passes, a task and the pipe's
write and read beyond the write itself.

At low rates that hand-back is most of a produce's time in the broker (about
a seventh of a 5 KB round trip here), and the loop has nothing else to do
meanwhile. So a Produce whose only append went to a writer that was idle
(nothing queued before it, see :meth:`LogAppender.submit`) may
:meth:`wait` for it on the loop thread, for a bounded time
(``PROMPT_WAIT_S``): the writer's result then comes straight back through
this object and is settled right there, the handler finds its append done and
answers in the same pass that read the request.

Invariants:

* every result is settled exactly once, on the loop thread, in delivery
  order across all writers: deliveries go into one list (under ``_mutex``),
  and whoever settles (the drain scheduled with ``call_soon_threadsafe`` when
  the list stops being empty, or a wait) takes the whole list. A wait first
  settles what was delivered before it, so a result handed back through a
  wait never overtakes one still queued for the drain, and a result arriving
  as a wait times out is neither lost nor settled twice;
* the loop never waits longer than the bound, and never waits for a writer
  that had work queued: a stalled or slow disk costs the loop at most one
  bound, after which :meth:`LogAppender.mark_slow` stops waits on that dir for
  ``SLOW_BACKOFF_S`` (the writer thread per log dir keeps its purpose: a stuck
  write never holds up the loop);
* results of other writers that arrive during a wait are settled in it too
  (they would have been settled on the loop anyway).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable

PROMPT_WAIT_S = 0.001  # a small append's write takes 10-100 us; a millisecond means the disk or the CPU is busy
PROMPT_MAX_BYTES = 128 * 1024  # larger appends are not waited for: their write would keep the loop from other work
SLOW_BACKOFF_S = 1.0  # after a wait that ran out, that log dir is not waited for again for this long


class AppendHandback:
    """Moves writer results to the loop; see the module docstring."""

    def __init__(self, settle: Callable[[list], Any]) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None  # set once the loop runs
        self._settle = settle
        self._mutex = threading.Lock()
        self._delivered: list[list] = []  # results not settled yet, in delivery order
        self._waiting = False  # the loop is blocked in wait()
        self._woken = False  # a delivery released _arrived during the current wait
        self._arrived = threading.Lock()  # the loop blocks on it in wait(); a delivery releases it
        self._arrived.acquire()

    def deliver(self, results: list) -> None:
        """On a writer thread: hand ``results`` to the loop (waking it if it waits)."""
        with self._mutex:
            delivered = self._delivered
            delivered.append(results)
            if self._waiting:  # the wait settles everything once it wakes
                if not self._woken:
                    self._woken = True
                    self._arrived.release()
                return
            if len(delivered) > 1:  # a drain is scheduled already (or a wait is about to take them)
                return
        loop = self.loop
        if loop is None:  # the broker appends only once its loop runs (and sets this)
            raise RuntimeError("append results delivered before the event loop was set")
        try:
            loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def _drain(self) -> None:
        """On the loop: settle everything delivered so far, in order."""
        with self._mutex:
            taken, self._delivered = self._delivered, []
        for results in taken:
            self._settle(results)

    def wait(self, fut: asyncio.Future, timeout: float) -> bool:
        """On the loop: wait up to ``timeout`` s until ``fut``'s append is written and settled.

        Returns whether ``fut`` is done. Everything delivered before or
        meanwhile is settled here, in delivery order (a drain scheduled for
        some of it then finds nothing left).
        """
        deadline = time.monotonic() + timeout
        arrived = self._arrived
        while True:
            self._drain()
            if fut.done():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._mutex:
                if self._delivered:  # arrived since the drain: settle it first
                    continue
                arrived.acquire(blocking=False)  # a release left over from a wait that ran out
                self._waiting, self._woken = True, False
            arrived.acquire(timeout=remaining)
            with self._mutex:
                self._waiting = False
