"""Controlled shutdown of a broker leading a third of 300 partitions, against a plain clean shutdown.

    python -m benchmarks.shutdown_bench [--short] [--partitions N] [--reps N] [--json FILE]

**Brokers.** ZooKeeper and three of our brokers as in ``cluster_bench``
(``zookeeper.session.timeout.ms=6000``), with ``auto.leader.rebalance.enable``
off so that only the benchmark moves leaders. One topic of ``--partitions``
(300) partitions, replication factor 3: each broker is the preferred leader of
a third.

**Cases** (broker 2 is stopped with SIGTERM, then started again; preferred
leaders are restored with ElectLeaders and every ISR is full again before the
next stop; the two cases alternate, A B A B):

- controlled: ``controlled.shutdown.enable=true`` (the default): the broker asks
  the controller to move its leaderships before it closes;
- baseline: ``controlled.shutdown.enable=false``: the broker just closes; the
  controller moves the leaderships when its registration goes.

Figures per case: the time from SIGTERM to the process's exit, and the
longest time any partition the broker led went without a usable leader,
measured as the time from SIGTERM until broker 1's Metadata (polled every 20
ms over one connection) names a new leader for it: an upper bound, since the
old leader may still serve during part of it. Targets: under 1 s per
partition and under 10 s for the whole shutdown.

``--short``: 60 partitions, one repetition: a smoke test, not a measurement.
"""

from __future__ import annotations

import asyncio
import signal
import statistics
import sys
import threading
import time

from benchmarks._runs import LIMIT_S, alternate, arguments, wait_for, write_json
from benchmarks.cluster_bench import Cluster, create
from broker.client import Admin
from broker.client._connection import BrokerConnection
from broker.protocol import ApiKey

TOPIC = "shutdown-bench"
VICTIM, WATCHER = 2, 1
POLL_S = 0.02


class LeaderWatch:
    """Polls the watcher broker's Metadata in a thread; records when each partition got a new leader."""

    def __init__(self, host: str, port: int, partitions: set[int], old_leader: int, started: float) -> None:
        self.host, self.port, self.partitions, self.old_leader, self.started = host, port, partitions, old_leader, started
        self.moved_after: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        conn = BrokerConnection(self.host, self.port, request_timeout_ms=10000)
        await conn.connect()
        try:
            while not self._stop.is_set() and len(self.moved_after) < len(self.partitions):
                body = await conn.request(ApiKey.METADATA, {"topics": [{"name": TOPIC}],
                                                            "allow_auto_topic_creation": False}, version=9)
                now = time.monotonic() - self.started
                for p in body["topics"][0]["partitions"]:
                    index = p["partition_index"]
                    if index in self.partitions and index not in self.moved_after and \
                            p["leader_id"] not in (-1, self.old_leader):
                        self.moved_after[index] = now
                await asyncio.sleep(POLL_S)
        finally:
            conn.close()

    def stop(self) -> dict[int, float]:
        self._thread.join(LIMIT_S)
        self._stop.set()
        return self.moved_after


def leaders(cluster: Cluster) -> dict[int, int]:
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        meta = admin.describe_topics([TOPIC])[TOPIC]
    return {p: m.leader for p, m in meta.partitions.items()}


def settle(cluster: Cluster, count: int) -> None:
    """Preferred leaders back (ElectLeaders) and every ISR full."""
    def done() -> bool:
        with Admin(bootstrap_servers=cluster.bootstrap) as admin:
            admin.elect_leaders("preferred", [(TOPIC, p) for p in range(count)])
            meta = admin.describe_topics([TOPIC])[TOPIC]
        return all(m.leader == m.replicas[0] and len(m.isr) == 3 for m in meta.partitions.values())
    wait_for(done, "preferred leaders and full ISRs")


def stop_once(cluster: Cluster, controlled: bool, count: int) -> dict:
    """Stop the victim (started with ``controlled``); start it again set for the next case (the other)."""
    victim = cluster.brokers[VICTIM]
    led = {p for p, leader in leaders(cluster).items() if leader == VICTIM}
    watcher = cluster.brokers[WATCHER]
    started = time.monotonic()
    watch = LeaderWatch("127.0.0.1", watcher.port, led, VICTIM, started)
    victim.proc.send_signal(signal.SIGTERM)
    victim.proc.wait(LIMIT_S)
    exited = time.monotonic() - started
    moved = watch.stop()
    missing = led - set(moved)
    result = {"controlled": controlled, "partitions_led": len(led), "exit_s": round(exited, 3),
              "max_leaderless_s": round(max(moved.values(), default=0.0), 3),
              "median_leaderless_s": round(statistics.median(moved.values()), 3) if moved else None,
              "not_moved": len(missing)}
    victim.props["controlled.shutdown.enable"] = not controlled
    cluster.restart(VICTIM)
    settle(cluster, count)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = arguments("shutdown_bench", "60 partitions, one repetition")
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--reps", type=int)
    args = parser.parse_args(argv)
    count = args.partitions or (60 if args.short else 300)
    reps = args.reps or (1 if args.short else 3)

    cluster = Cluster()
    for b in cluster.brokers.values():
        b.props["auto.leader.rebalance.enable"] = False
    cluster.brokers[VICTIM].props["controlled.shutdown.enable"] = True

    def measure(name: str, controlled: bool, rep: int) -> dict:
        run = stop_once(cluster, controlled, count)
        print(f"{name:10s} rep {rep + 1}: broker {VICTIM} led "
              f"{run['partitions_led']} partitions; SIGTERM to exit {run['exit_s']:.2f} s, longest "
              f"without a new leader {run['max_leaderless_s']:.2f} s (median "
              f"{run['median_leaderless_s']} s), not moved {run['not_moved']}", flush=True)
        return run

    by_case: dict[str, list[dict]] = {}
    try:
        cluster.start()
        create(cluster.bootstrap, TOPIC, count, 3)
        settle(cluster, count)
        by_case = alternate({"controlled": True, "baseline": False}, reps, measure)
    finally:
        cluster.stop()
    runs = [run for pair in zip(*by_case.values()) for run in pair]
    summary = {name: {"exit_s": statistics.median(r["exit_s"] for r in mine),
                      "max_leaderless_s": statistics.median(r["max_leaderless_s"] for r in mine)}
               for name, mine in by_case.items() if mine}
    print("median: " + "; ".join(f"{name} exit {s['exit_s']:.2f} s, longest leaderless {s['max_leaderless_s']:.2f} s"
                                 for name, s in summary.items())
          + " (targets: < 1 s per partition, < 10 s whole shutdown)", flush=True)
    write_json(args.json, {"partitions": count, "runs": runs, "median": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
