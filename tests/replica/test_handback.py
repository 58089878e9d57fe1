"""``AppendHandback``: writer results reach the loop exactly once, in order, waited for or not.

Real threads stand in for the log dirs' writers and a real event loop for the
broker's; ``settle`` records each delivery with the thread it ran on and
answers the futures, as ``ReplicaManager.settle`` does. Timeouts are bounds
the code under test must respect, never claims about how fast it is.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time

from broker.replica.handback import AppendHandback


class _Settled:
    """``settle``: record (thread, results) and answer each ``(future, value)`` pair."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list]] = []

    def __call__(self, results: list) -> None:
        self.calls.append((threading.current_thread().name, results))
        for fut, value in results:
            if not fut.done():
                fut.set_result(value)

    def values(self) -> list:
        return [value for _thread, results in self.calls for _fut, value in results]


def _deliver_later(handback: AppendHandback, results: list, delay: float) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        handback.deliver(results)
    t = threading.Thread(target=run, name="writer")
    t.start()
    return t


def test_a_wait_settles_the_result_on_the_loop_in_the_same_pass():
    async def main() -> None:
        settled = _Settled()
        handback = AppendHandback(settled)
        handback.loop = asyncio.get_running_loop()
        fut = handback.loop.create_future()
        writer = _deliver_later(handback, [(fut, "written")], 0.01)
        assert handback.wait(fut, 10.0) is True
        # done on return, settled by the loop's own thread, nothing left for a later pass
        assert fut.done() and fut.result() == "written"
        assert settled.calls == [(threading.current_thread().name, [(fut, "written")])]
        writer.join()
        await asyncio.sleep(0)
        assert len(settled.calls) == 1

    asyncio.run(main())


def test_a_wait_that_runs_out_leaves_the_result_to_the_loop_once():
    async def main() -> None:
        settled = _Settled()
        handback = AppendHandback(settled)
        loop = handback.loop = asyncio.get_running_loop()
        fut = loop.create_future()
        started = time.monotonic()
        assert handback.wait(fut, 0.05) is False
        assert time.monotonic() - started < 5  # bounded: a stuck writer never holds the loop
        assert not fut.done()
        writer = _deliver_later(handback, [(fut, "late")], 0.0)
        assert await asyncio.wait_for(fut, 10) == "late"  # through call_soon_threadsafe
        writer.join()
        await asyncio.sleep(0.05)
        assert settled.values() == ["late"]
        assert settled.calls[0][0] == threading.current_thread().name

    asyncio.run(main())


def test_other_writers_results_arriving_during_a_wait_are_settled_in_it():
    async def main() -> None:
        settled = _Settled()
        handback = AppendHandback(settled)
        loop = handback.loop = asyncio.get_running_loop()
        mine, other = loop.create_future(), loop.create_future()
        # another dir's writer delivers first, once the loop waits: the wait settles it and goes on
        # waiting for its own
        def other_dir() -> None:
            deadline = time.monotonic() + 10
            while not handback._waiting and time.monotonic() < deadline:
                time.sleep(0.001)
            handback.deliver([(other, "other dir")])
            time.sleep(0.05)
            handback.deliver([(mine, "mine")])
        writers = [threading.Thread(target=other_dir, name="writer")]
        writers[0].start()
        assert handback.wait(mine, 10.0) is True
        assert settled.values() == ["other dir", "mine"]
        for w in writers:
            w.join()

    asyncio.run(main())


def test_results_racing_waits_are_settled_exactly_once_and_in_order():
    """Deliveries at random moments against waits with tiny timeouts: nothing lost, doubled or reordered."""
    rounds = 400

    async def main() -> None:
        settled = _Settled()
        handback = AppendHandback(settled)
        loop = handback.loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(rounds)]
        go = [threading.Event() for _ in range(rounds)]
        rng = random.Random(7)

        def writer() -> None:
            for i in range(rounds):
                go[i].wait(10)
                if rng.random() < 0.5:
                    time.sleep(rng.random() / 2000)
                handback.deliver([(futures[i], i)])

        t = threading.Thread(target=writer, name="writer")
        t.start()
        for i in range(rounds):
            go[i].set()
            handback.wait(futures[i], rng.random() / 4000)  # sometimes in time, sometimes not
            await asyncio.sleep(0)
        await asyncio.wait_for(asyncio.gather(*futures), 30)
        t.join()
        await asyncio.sleep(0.05)
        assert settled.values() == list(range(rounds))
        assert all(thread == threading.current_thread().name for thread, _ in settled.calls)

    asyncio.run(main())
