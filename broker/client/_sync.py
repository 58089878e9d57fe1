"""The event loop behind the blocking facades: one daemon thread per client
running its own asyncio loop; blocking methods submit coroutines to it and wait."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine

from .errors import KafkaTimeoutError


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.thread_id = threading.get_ident()
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()
        # drain what close() left behind
        pending = asyncio.all_tasks(self.loop)
        for t in pending:
            t.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()

    def in_loop(self) -> bool:
        return threading.get_ident() == self.thread_id

    def run(self, coro: Coroutine, timeout: float | None = None) -> Any:
        """Run ``coro`` on the loop and return its result (re-raising its exception)."""
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError(f"operation did not finish within {timeout} s") from None

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join(10)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass; True if set.

    Unlike ``wait_for(event.wait(), t)`` on Python 3.11, this never swallows a
    cancellation that arrives just as the event is set.
    """
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((waiter,), timeout=timeout)
    finally:
        waiter.cancel()
    return event.is_set()
