"""An idle broker sleeps: its threads wake about once a second, not tens of times.

Every wake-up of a Python thread takes the GIL from the event loop (a request
that arrives meanwhile waits for it), and the log scheduler's pass walks every
log. Counted from the kernel's per-thread voluntary context switches, over a
window in which nothing talks to the broker.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from broker.protocol import ApiKey

from .wire import Wire, make_batch


def _wake_ups(pid: int) -> dict[str, int]:
    """Voluntary context switches of each thread of ``pid``, by thread id."""
    counts = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                counts[task.name] = int(line.split()[1])
    return counts


def test_an_idle_broker_wakes_about_once_a_second(broker_factory):
    b = broker_factory()
    with Wire(b.bootstrap) as w:  # some logs, and the writer thread started
        for topic in ("idle-a", "idle-b"):
            body = {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": make_batch([b"x"])}]}]}
            assert w.call(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"][0]["error_code"] == 0
    with urllib.request.urlopen(b.metrics_url, timeout=30) as response:  # the metrics server has served
        assert b"kafkapy_requests_total" in response.read()
    time.sleep(1)
    before = _wake_ups(b.proc.pid)
    window = 6.0
    time.sleep(window)
    after = _wake_ups(b.proc.pid)
    woken = sum(after[t] - before.get(t, 0) for t in after)
    # The scheduler's once a second, plus a little slack for the loop's own timers.
    assert woken <= 3 * window, f"{woken} wake-ups in {window} s idle: {before} -> {after}"
