"""A three-broker cluster against one broker, in the same run: throughput, latency, failover.

    python -m benchmarks.cluster_bench [--short] [--reps N] [--records N] [--latency-s S]
                                       [--failovers N] [--json FILE]

**Brokers.** A standalone ZooKeeper (Debian's ``zookeeper`` package, as the
tests start it) and three of our brokers (``broker.id`` 1-3, each its own
temporary log dir, ``zookeeper.connect`` on a chroot of their own,
``zookeeper.session.timeout.ms=6000``), against one broker alone with the
embedded defaults. All run on 127.0.0.1 as children of the benchmark and are
stopped by PID.

**Cases** (1 KB records, librdkafka in the benchmark process, idempotence off,
``linger.ms=5``; the baseline and the cluster alternate, A B A B, median of
``--reps``):

- throughput: ``--records`` records into one partition; the cluster's topic has
  replication factor 3 and the producer ``acks=all``, the baseline's replication
  factor 1 and ``acks=1``. Time from the first ``produce()`` to the end of
  ``flush()``. Target: cluster / baseline >= 0.33 (on two cores the cluster does
  three times the writing work).
- latency: a fixed 5,000 records/s for ``--latency-s`` seconds, each record's
  latency librdkafka's own (``Message.latency()``: produce() to delivery
  report), p50 and p99; cluster acks=all RF 3 against baseline acks=1 RF 1.
- failover (cluster only): a fresh RF 3 topic of three partitions under a
  steady 1,000 records/s acks=all; the leader of partition 0 gets SIGKILL; the
  figure is the time from the kill to the first acknowledgement of a record sent
  after it to a partition that broker led. The broker is started again (after its
  session expired) and the next failover waits for a full ISR (Metadata); if the
  ISR is not full again within two minutes the run says so and stops failing over. Target: < 8 s.

The short form (``--short``: 60,000 records, 2 s of latency, one repetition, one
failover) is a smoke test, not a measurement.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks._load import payloads, poll_until, produce_latency, produce_throughput
from benchmarks._procs import OurBroker
from benchmarks._runs import LIMIT_S, alternate, arguments, medians, wait_for, write_json

RECORD = 1024
SESSION_TIMEOUT_MS = 6000


class Cluster:
    """ZooKeeper and brokers 1..3 on a chroot of their own."""

    def __init__(self, size: int = 3, props: dict | None = None) -> None:
        from tests.zookeeper import ZooKeeperServer

        self.zookeeper = ZooKeeperServer(Path(tempfile.mkdtemp(prefix="bench-zk-"))).start()
        self.connect = f"{self.zookeeper.connect}/bench-{uuid.uuid4().hex[:8]}"
        self.brokers = {i: OurBroker({"broker.id": i, "zookeeper.connect": self.connect,
                                      "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                                      "offsets.topic.replication.factor": size, **(props or {})})
                        for i in range(1, size + 1)}

    def start(self) -> "Cluster":
        for b in self.brokers.values():
            b.start()
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running())

    def restart(self, broker_id: int) -> None:
        """Start a killed broker again once ZooKeeper has dropped its old registration."""
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.connect)
        zk.start(30)
        try:
            deadline = time.monotonic() + LIMIT_S
            while zk.exists(f"/brokers/ids/{broker_id}") and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            zk.stop()
            zk.close()
        self.brokers[broker_id].start()

    def stop(self) -> None:
        for b in self.brokers.values():
            b.stop()
        self.zookeeper.stop()
        shutil.rmtree(self.zookeeper.workdir, ignore_errors=True)


def create(bootstrap: str, topic: str, partitions: int, factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, factor)], request_timeout=60)[topic].result(LIMIT_S)
    wait_for(lambda: all(p.leader >= 0 and len(p.isrs) == factor for p in
                         admin.list_topics(topic, timeout=30).topics[topic].partitions.values()),
             f"{topic}: every partition led, ISR full")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return {p: m.leader for p, m in md.topics[topic].partitions.items()}


def cases(cluster: Cluster, single: OurBroker) -> dict[str, tuple[str, str, int]]:
    """The two cases alternated: (bootstrap, acks, replication factor)."""
    return {"single acks=1": (single.bootstrap, "1", 1), "cluster acks=all": (cluster.bootstrap, "all", 3)}


def throughput(cluster: Cluster, single: OurBroker, count: int, reps: int) -> dict:
    def measure(kind: str, case: tuple[str, str, int], rep: int) -> float:
        bootstrap, acks, factor = case
        topic = f"cb-{uuid.uuid4().hex[:8]}"
        create(bootstrap, topic, 1, factor)
        r = produce_throughput(bootstrap, topic, size=RECORD, count=count, acks=acks, max_s=LIMIT_S)
        print(f"  rep {rep + 1} {kind:17s} {r.records_s:10,.0f} records/s {r.mb_s:7.1f} MB/s"
              f"{f'  {r.errors} errors ({r.first_error})' if r.errors else ''}", flush=True)
        return r.records_s

    rates = alternate(cases(cluster, single), reps, measure)
    out: dict = medians(rates)
    out["ratio"] = out["cluster acks=all"] / out["single acks=1"]
    out["runs"] = rates
    return out


def latency(cluster: Cluster, single: OurBroker, seconds: float, reps: int) -> dict:
    def measure(kind: str, case: tuple[str, str, int], rep: int) -> tuple[float, float]:
        bootstrap, acks, factor = case
        topic = f"cl-{uuid.uuid4().hex[:8]}"
        create(bootstrap, topic, 1, factor)
        r = produce_latency(bootstrap, topic, rate=5000, duration_s=seconds, acks=acks)
        p50, p99 = r.percentile(0.5) * 1000, r.percentile(0.99) * 1000
        print(f"  rep {rep + 1} {kind:17s} at 5,000/s: p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  "
              f"(sent at {r.send_rate:,.0f}/s, {r.errors} errors)", flush=True)
        return p50, p99

    runs = alternate(cases(cluster, single), reps, measure)
    out: dict = {k: {"p50_ms": statistics.median(a for a, _ in v), "p99_ms": statistics.median(b for _, b in v)}
                 for k, v in runs.items()}
    out["p99_ratio"] = out["cluster acks=all"]["p99_ms"] / out["single acks=1"]["p99_ms"]
    return out


def failover_once(cluster: Cluster) -> tuple[float, bool]:
    topic = f"cf-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap, topic, 3, 3)
    led = leaders(cluster.bootstrap, topic)
    victim = led[0]
    its = {p for p, b in led.items() if b == victim}
    kill_at = [None]
    first_ack = [None]
    value = payloads(RECORD)[0]

    def on_delivery(err, msg, sent_at: float) -> None:
        # only a record sent after the kill counts: an answer the dead leader wrote just before it
        # died can still be read after the kill, and says nothing of the failover
        if (err is None and kill_at[0] is not None and sent_at >= kill_at[0] and first_ack[0] is None
                and msg.partition() in its):
            first_ack[0] = time.monotonic()

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": False, "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                         "topic.metadata.refresh.interval.ms": 1000})
    stop = threading.Event()

    def send() -> None:
        n, next_at = 0, time.monotonic()
        while not stop.is_set():
            try:
                sent_at = time.monotonic()
                producer.produce(topic, value, partition=n % 3,
                                 on_delivery=lambda err, msg, sent_at=sent_at: on_delivery(err, msg, sent_at))
                n += 1
            except BufferError:
                pass
            next_at += 0.001
            poll_until(producer, next_at, time.monotonic)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        time.sleep(2)  # steady state
        kill_at[0] = time.monotonic()
        cluster.brokers[victim].proc.kill()
        wait_for(lambda: first_ack[0] is not None, f"an acknowledgement on {topic} after broker {victim}'s kill")
    finally:
        stop.set()
        sender.join()
        producer.flush(30)
    seconds = first_ack[0] - kill_at[0]
    print(f"  failover: {seconds:.2f} s from broker {victim}'s SIGKILL to the first acknowledgement", flush=True)
    cluster.restart(victim)
    try:
        wait_for(lambda: all(len(p.isrs) == 3 for p in AdminClient({"bootstrap.servers": cluster.bootstrap})
                             .list_topics(topic, timeout=30).topics[topic].partitions.values()),
                 f"{topic}: broker {victim} back in every ISR")
    except RuntimeError as exc:  # the next failover would start from fewer in-sync replicas
        print(f"  no further failovers: {exc}", flush=True)
        return seconds, False
    return seconds, True


def main(argv: list[str] | None = None) -> int:
    parser = arguments("cluster_bench", "fewer records, one repetition, one failover")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--records", type=int)
    parser.add_argument("--latency-s", type=float)
    parser.add_argument("--failovers", type=int)
    args = parser.parse_args(argv)
    reps = args.reps or (1 if args.short else 3)
    count = args.records or (60_000 if args.short else 300_000)
    seconds = args.latency_s or (2 if args.short else 10)
    failovers = args.failovers or (1 if args.short else 3)

    single = OurBroker().start()
    cluster = Cluster()
    result: dict = {}
    try:
        cluster.start()
        print(f"throughput: {count:,} records of {RECORD} B, one partition, {reps} rep(s), A B A B", flush=True)
        result["throughput"] = t = throughput(cluster, single, count, reps)
        print(f"median: cluster acks=all RF 3 {t['cluster acks=all']:,.0f} records/s, single acks=1 "
              f"{t['single acks=1']:,.0f} records/s, ratio {t['ratio']:.2f} (target >= 0.33)", flush=True)
        print(f"latency: 5,000 records/s for {seconds:g} s", flush=True)
        result["latency"] = lat = latency(cluster, single, seconds, reps)
        print(f"median p99: cluster {lat['cluster acks=all']['p99_ms']:.1f} ms, single "
              f"{lat['single acks=1']['p99_ms']:.1f} ms, ratio {lat['p99_ratio']:.2f}", flush=True)
        times = []
        for _ in range(failovers):
            seconds, rejoined = failover_once(cluster)
            times.append(seconds)
            if not rejoined:
                break
        result["failover_s"] = {"runs": times, "median": statistics.median(times), "max": max(times)}
        print(f"failover: median {statistics.median(times):.2f} s, max {max(times):.2f} s (target < 8 s, "
              f"session timeout {SESSION_TIMEOUT_MS / 1000:g} s)", flush=True)
    finally:
        single.stop()
        cluster.stop()
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
