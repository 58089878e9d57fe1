"""Partition reassignment throughput, with and without a throttle, against the raw produce rate of the same cluster.

    python -m benchmarks.reassign_bench [--short] [--records N] [--throttle BYTES_S] [--json FILE]

**Brokers.** A standalone ZooKeeper and four of our brokers (``broker.id`` 1-4,
as :mod:`benchmarks.cluster_bench` starts them), on 127.0.0.1, stopped by PID.

**Cases**, in one run on one cluster:

- raw produce: ``--records`` records of 1 KB into a topic of one partition on
  brokers [1, 2, 3] (replication factor 3), librdkafka ``acks=all``: MB/s from
  the first ``produce()`` to the end of ``flush()``. This fills the partition.
- move, unthrottled: AlterPartitionReassignments to [2, 3, 4]; the time until
  ListPartitionReassignments shows it no more, and the partition's bytes (the
  new replica's segment files) over that time.
- move, throttled: back to [1, 2, 3] with ``leader.replication.throttled.rate``
  and ``follower.replication.throttled.rate`` = ``--throttle`` on every broker and
  both throttled-replica lists ``*``, as ``kafkactl partitions reassign --throttle``
  sets them. Besides the average, the rate after the quota's first window (11 s,
  during which a burst of up to 10 s of quota may pass) is given when the move
  lasts longer than that: the rate a long move is held to.

The short form (``--short``: 20,000 records, throttle 1 MB/s) is a smoke test.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks._load import produce_throughput
from benchmarks._runs import LIMIT_S, arguments, wait_for, write_json
from benchmarks.cluster_bench import RECORD, Cluster
from broker.client import Admin, ConfigResource

WINDOW_S = 11  # the quota's window (broker.replica.quota)
TOPIC = "moved"


def replica_bytes(cluster: Cluster, broker_id: int) -> int:
    path = Path(cluster.brokers[broker_id].props["log.dirs"]) / f"{TOPIC}-0"
    return sum(f.stat().st_size for f in path.glob("*.log")) if path.exists() else 0


def move(cluster: Cluster, admin: Admin, target: list[int], added: int) -> dict:
    start = time.perf_counter()
    admin.alter_partition_reassignments({(TOPIC, 0): target})
    copied_at_window = None

    def done() -> bool:
        nonlocal copied_at_window
        if copied_at_window is None and time.perf_counter() - start >= WINDOW_S:
            copied_at_window = replica_bytes(cluster, added)
        return not admin.list_partition_reassignments([(TOPIC, 0)])

    wait_for(done, f"the move to {target}", 10 * LIMIT_S, 0.05)
    seconds = time.perf_counter() - start
    size = replica_bytes(cluster, added)
    out = {"seconds": seconds, "bytes": size, "mb_s": size / seconds / 1e6}
    if copied_at_window is not None:
        out["mb_s_after_window"] = (size - copied_at_window) / (seconds - WINDOW_S) / 1e6
    return out


def main(argv: list[str] | None = None) -> int:
    parser = arguments("reassign_bench", "fewer records, a smaller throttle")
    parser.add_argument("--records", type=int)
    parser.add_argument("--throttle", type=int, help="bytes/s for the throttled move")
    args = parser.parse_args(argv)
    count = args.records or (20_000 if args.short else 200_000)
    throttle = args.throttle or (1_000_000 if args.short else 5_000_000)

    cluster = Cluster(size=4)
    result: dict = {"records": count, "throttle_bytes_s": throttle}
    try:
        cluster.start()
        bootstrap = cluster.bootstrap
        client = AdminClient({"bootstrap.servers": bootstrap})
        client.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])],
                             request_timeout=60)[TOPIC].result(LIMIT_S)
        wait_for(lambda: len(client.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions[0].isrs) == 3,
                 "a full ISR")
        r = produce_throughput(bootstrap, TOPIC, size=RECORD, count=count, acks="all", max_s=10 * LIMIT_S)
        result["produce"] = {"mb_s": r.mb_s, "records_s": r.records_s, "errors": r.errors}
        print(f"raw produce, RF 3 acks=all: {r.mb_s:.1f} MB/s ({count:,} records of {RECORD} B)", flush=True)
        with Admin(bootstrap_servers=bootstrap) as admin:
            result["unthrottled"] = m = move(cluster, admin, [2, 3, 4], added=4)
            print(f"move [1,2,3] -> [2,3,4], no throttle: {m['bytes'] / 1e6:.1f} MB in {m['seconds']:.1f} s, "
                  f"{m['mb_s']:.1f} MB/s ({m['mb_s'] / r.mb_s:.2f} x produce)", flush=True)
            rates = {"leader.replication.throttled.rate": str(throttle),
                     "follower.replication.throttled.rate": str(throttle)}
            admin.incremental_alter_configs({ConfigResource("broker", str(b)): rates for b in cluster.brokers})
            admin.incremental_alter_configs({ConfigResource("topic", TOPIC): {
                "leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}})
            result["throttled"] = t = move(cluster, admin, [1, 2, 3], added=1)
            after = (f", {t['mb_s_after_window']:.1f} MB/s after the first {WINDOW_S} s"
                     if "mb_s_after_window" in t else "")
            print(f"move [2,3,4] -> [1,2,3], throttle {throttle / 1e6:g} MB/s: {t['bytes'] / 1e6:.1f} MB in "
                  f"{t['seconds']:.1f} s, {t['mb_s']:.1f} MB/s average{after}", flush=True)
    finally:
        cluster.stop()
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
