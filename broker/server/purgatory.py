"""The purgatory: requests parked until something they wait for happens.

A long-poll fetch that has too few bytes parks on the partitions it reads;
an append to any of them (or a high-watermark move) calls :meth:`Purgatory.notify`
and the fetch wakes and looks again. Nothing polls. Keys are any hashable
values; the broker uses ``(topic, partition)``.

Loop-only (not thread-safe): call ``notify`` from the event loop thread (use
``loop.call_soon_threadsafe`` from elsewhere).
"""

from __future__ import annotations

import asyncio
from typing import Hashable, Iterable


class Purgatory:
    """Futures keyed by what they wait for."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future]] = {}
        self._closed = False

    def __len__(self) -> int:
        return sum(len(s) for s in self._waiters.values())

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
