"""The purgatory: requests parked until a condition on a partition holds.

A long-poll fetch parks until enough bytes are available; an acks=all produce
until the high watermark passes its append (later: a follower's fetch until
the leader's log end moves). Each waits on the partitions it concerns, and
whatever changes a partition (an append, a high-watermark move, a follower's
fetch, a leadership change) calls :meth:`Purgatory.notify` with its key: every
waiter on it checks its condition again. Nothing polls. Keys are any hashable
values; the replica layer uses ``(topic, partition)``.

Loop-only (not thread-safe): call ``notify`` from the event loop thread (use
``loop.call_soon_threadsafe`` from elsewhere).
"""

from __future__ import annotations

import asyncio
from typing import Callable, Hashable, Iterable


class Purgatory:
    """Futures keyed by what they wait for."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future]] = {}
        self._closed = False

    def __len__(self) -> int:
        return sum(len(s) for s in self._waiters.values())

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until one of ``keys`` is notified (True) or ``timeout`` seconds pass (False)."""
        if self._closed or timeout <= 0:
            return False
        keys = list(keys)
        future = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiters[key]

    async def wait_until(self, keys: Iterable[Hashable], condition: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``condition()`` holds (True), checked now and at every notify of ``keys``.

        False when ``timeout`` seconds pass first or the purgatory is closed
        (shutdown) with the condition still false.
        """
        if condition():
            return True
        keys = list(keys)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self._closed:
            if not await self.wait(keys, deadline - loop.time()):
                break
            if condition():
                return True
        return condition()

    def notify(self, key: Hashable) -> None:
        """Wake every request waiting on ``key``."""
        waiting = self._waiters.get(key)
        if waiting:
            for future in waiting:
                if not future.done():
                    future.set_result(None)

    def close(self) -> None:
        """Wake everyone and refuse new waits (shutdown: answer long polls now)."""
        self._closed = True
        for waiting in self._waiters.values():
            for future in waiting:
                if not future.done():
                    future.set_result(None)
