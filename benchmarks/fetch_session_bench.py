"""What incremental fetch sessions (KIP-227) save the broker: kafka-python's consumer reading many partitions
with sessions (its default) and without, against one broker in the same run.

``python -m benchmarks.fetch_session_bench [--short] [--reps N] [--partitions N] [--seconds S] [--json FILE]``

One broker (``python -m broker``), one topic of ``partitions`` partitions. Each repetition, A B A B over
``sessions`` and ``full requests``: librdkafka produces a trickle (``RATE`` records of 100 bytes a second,
spread over every partition) while a kafka-python consumer assigned every partition reads for ``seconds``
(``fetch_max_wait_ms`` 500, its default; ``enable_incremental_fetch_sessions`` true or false); the producer
runs in a process of its own, so that this process's CPU time is the consumer's. Reported per case,
medians: Fetch requests answered per second, the broker's CPU time per Fetch (the trickle's Produce
requests included, the same in both cases) and per second, the consumer's CPU time per Fetch, and the
records read (every record produced is read in both cases).

Then replication: two clusters of three brokers on ZooKeeper, the same but that one keeps no fetch sessions
(``max.incremental.fetch.session.cache.slots=0``: every follower Fetch is full), each with a topic of
``replicated`` partitions of replication factor 3; A B A B, the same trickle produced with acks=all for
``seconds``. Reported: the followers' Fetch requests per second and the three brokers' CPU per second.

``--short``: 200 partitions, 4 s, 60 replicated partitions, one repetition (default: 1,000 partitions,
10 s, 300 replicated partitions, 3 repetitions).
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
import urllib.request

from benchmarks import _load
from benchmarks._procs import OurBroker
from benchmarks._runs import alternate, arguments, write_json

RATE = 200  # records/s of the trickle
SIZE = 100


def _fetches(broker: OurBroker) -> float:
    """Fetch requests the broker has answered so far (its /metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(r'^kafkapy_requests_total\{api="Fetch"\} ([\d.e+]+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


_TRICKLE = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, partitions, rate, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
print("ready", flush=True)
sys.stdin.readline()
sent, next_at, interval = 0, time.monotonic(), 1.0 / rate
while True:
    producer.produce(topic, b"x" * size, partition=sent % partitions)
    sent += 1
    producer.poll(0)
    next_at += interval
    time.sleep(max(0.0, next_at - time.monotonic()))
    if sys.stdin in __import__("select").select([sys.stdin], [], [], 0)[0]:
        break
producer.flush(30)
print(sent, flush=True)
"""


def _measure(broker: OurBroker, topic: str, partitions: int, seconds: float, sessions: bool) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             enable_incremental_fetch_sessions=sessions)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_end()
    for p in range(partitions):  # settle the positions before the window
        consumer.position(TopicPartition(topic, p))
    consumer.poll(timeout_ms=200)
    # the producer in a process of its own: this process's CPU time is the consumer's
    trickle = subprocess.Popen([sys.executable, "-c", _TRICKLE, broker.bootstrap, topic, str(partitions),
                                str(RATE), str(SIZE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if trickle.stdout.readline().strip() != "ready":
            raise RuntimeError("the producer did not start")
        fetches0, cpu0, client0 = _fetches(broker), broker.stats.snapshot().cpu_s, time.process_time()
        started = time.monotonic()
        trickle.stdin.write("go\n")
        trickle.stdin.flush()
        read = 0
        while time.monotonic() - started < seconds:
            read += sum(len(m) for m in consumer.poll(timeout_ms=200).values())
        elapsed = time.monotonic() - started
        fetches, cpu = _fetches(broker) - fetches0, broker.stats.snapshot().cpu_s - cpu0
        client = time.process_time() - client0
        trickle.stdin.write("stop\n")
        trickle.stdin.flush()
        produced = int(trickle.stdout.readline())
    finally:
        trickle.kill()
        trickle.wait()
    deadline = time.monotonic() + 30  # the rest of what was produced, outside the window
    while read < produced and time.monotonic() < deadline:
        read += sum(len(m) for m in consumer.poll(timeout_ms=200).values())
    consumer.close()
    if read != produced:
        raise RuntimeError(f"read {read} of {produced} records (sessions={sessions})")
    return {"fetches_per_s": fetches / elapsed, "cpu_us_per_fetch": cpu / max(fetches, 1) * 1e6,
            "cpu_ms_per_s": cpu / elapsed * 1e3, "client_ms_per_s": client / elapsed * 1e3,
            "client_us_per_fetch": client / max(fetches, 1) * 1e6, "records": read}


def _replication(clusters: dict, topic: str, partitions: int, seconds: float, name: str) -> dict:
    """The trickle into a cluster's RF 3 topic (acks=all) for ``seconds``: its brokers' Fetch requests
    (followers') and CPU per second."""
    from confluent_kafka import Producer

    cluster = clusters[name]
    brokers = list(cluster.brokers.values())
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})
    fetches0 = sum(_fetches(b) for b in brokers)
    cpu0 = sum(b.stats.snapshot().cpu_s for b in brokers)
    started = next_at = time.monotonic()
    sent = 0
    while time.monotonic() - started < seconds:
        producer.produce(topic, b"x" * SIZE, partition=sent % partitions)
        sent += 1
        producer.poll(0)
        next_at += 1.0 / RATE
        time.sleep(max(0.0, next_at - time.monotonic()))
    if producer.flush(30):
        raise RuntimeError(f"{name}: records not acknowledged")
    elapsed = time.monotonic() - started
    fetches = sum(_fetches(b) for b in brokers) - fetches0
    cpu = sum(b.stats.snapshot().cpu_s for b in brokers) - cpu0
    return {"fetches_per_s": fetches / elapsed, "cpu_ms_per_s": cpu / elapsed * 1e3}


def main(argv: list[str] | None = None) -> int:
    parser = arguments("fetch_session_bench", "200 partitions, 4 s, 60 replicated partitions, one repetition")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--replicated", type=int, help="partitions of the clusters' RF 3 topic")
    args = parser.parse_args(argv)
    partitions = args.partitions or (200 if args.short else 1000)
    seconds = args.seconds or (4.0 if args.short else 10.0)
    reps = args.reps or (1 if args.short else 3)
    replicated = args.replicated or (60 if args.short else 300)

    broker = OurBroker({"metrics.port": 0})
    try:
        broker.start()
        _load.create_topic(broker.bootstrap, "fetch-sessions", partitions)
        runs = alternate({"sessions": True, "full requests": False}, reps,
                         lambda name, sessions, rep: _measure(broker, "fetch-sessions", partitions, seconds, sessions))
    finally:
        broker.stop()

    from benchmarks.cluster_bench import Cluster, create

    # two clusters of three: the same, but for sessions (slots 0: every follower Fetch is a full one)
    clusters = {"replication, sessions": Cluster(3, {"metrics.port": 0}),
                "replication, full requests": Cluster(3, {"metrics.port": 0,
                                                          "max.incremental.fetch.session.cache.slots": 0})}
    try:
        for cluster in clusters.values():
            cluster.start()
            create(cluster.bootstrap, "replicated", replicated, 3)
        replication = alternate({name: name for name in clusters}, reps,
                                lambda name, _case, rep: _replication(clusters, "replicated", replicated, seconds, name))
    finally:
        for cluster in clusters.values():
            cluster.stop()

    medians = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    print(f"\nkafka-python consumer, {partitions:,} partitions, a trickle of {RATE} records/s, {seconds:g} s; "
          f"{reps} repetition(s), medians\n")
    print("| case | Fetch requests/s | broker CPU us per Fetch | broker CPU ms/s | consumer CPU us per Fetch | "
          "records read |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in medians.items():
        print(f"| {name} | {m['fetches_per_s']:,.1f} | {m['cpu_us_per_fetch']:,.0f} | {m['cpu_ms_per_s']:,.1f} | "
              f"{m['client_us_per_fetch']:,.0f} | {m['records']:,.0f} |")
    on, off = medians["sessions"], medians["full requests"]
    print(f"\nsessions / full requests: broker CPU per Fetch {on['cpu_us_per_fetch'] / off['cpu_us_per_fetch']:.2f}x, "
          f"consumer CPU per Fetch {on['client_us_per_fetch'] / off['client_us_per_fetch']:.2f}x")
    rep_medians = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                   for name, rows in replication.items()}
    print(f"\nthree brokers, {replicated:,} partitions of replication factor 3, the same trickle with acks=all, "
          f"{seconds:g} s; {reps} repetition(s), medians\n")
    print("| case | Fetch requests/s (followers) | CPU of the three brokers ms/s |")
    print("|---|---:|---:|")
    for name, m in rep_medians.items():
        print(f"| {name} | {m['fetches_per_s']:,.1f} | {m['cpu_ms_per_s']:,.1f} |")
    on, off = rep_medians["replication, sessions"], rep_medians["replication, full requests"]
    print(f"\nreplication: sessions / full requests: brokers' CPU {on['cpu_ms_per_s'] / off['cpu_ms_per_s']:.2f}x")
    write_json(args.json, {"partitions": partitions, "seconds": seconds, "reps": reps, "runs": runs,
                           "medians": medians, "replicated": replicated, "replication": replication,
                           "replication_medians": rep_medians})
    return 0


if __name__ == "__main__":
    sys.exit(main())
