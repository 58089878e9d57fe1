"""What client quotas cost, and how closely a quota holds a producer: librdkafka against three brokers in the
same run.

``python -m benchmarks.quota_bench [--short] [--reps N] [--count N] [--json FILE]``

Brokers (``python -m broker``, data in temporary directories), started together:

* ``none``: no quota anywhere (nothing is measured: one attribute test per request);
* ``measured``: producer and consumer quotas for every client id (``quota.producer.default`` and
  ``quota.consumer.default``) far above what is reached, so every Produce and Fetch is counted against a
  rate and never throttled: the bookkeeping alone;
* ``held``: a producer quota of ``HELD_MB_S`` MB/s for every client id, measured over 3 windows of 1 s.

Each repetition, A B A B over ``none`` and ``measured``: librdkafka produces ``count`` records of 1 KB with
acks=1 into a new topic of one partition, then reads them back. Reported per broker, medians: records/s
and the broker's CPU seconds per GB moved. Then, once, librdkafka produces ``held_count`` records as fast
as it can into ``held``: the rate it achieved over the whole run against the quota (a ratio near 1 means
the quota holds the client to its rate; above 1 by the burst the first windows let through).

``--short``: 20,000 records, one repetition, 30 MB into ``held`` (default: 300,000 records, 3
repetitions, 60 MB).
"""

from __future__ import annotations

import statistics
import sys

from benchmarks import _load
from benchmarks._procs import OurBroker
from benchmarks._runs import alternate, arguments, write_json

SIZE = 1024
HELD_MB_S = 5
UNREACHED = 10**12  # bytes/s: a quota no client here comes near


def main(argv: list[str] | None = None) -> int:
    parser = arguments("quota_bench", "20,000 records, one repetition, 30 MB into the held broker")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--count", type=int)
    args = parser.parse_args(argv)
    count = args.count or (20_000 if args.short else 300_000)
    reps = args.reps or (1 if args.short else 3)
    held_count = 30_000 if args.short else 60_000

    brokers = {
        "none": OurBroker(),
        "measured": OurBroker({"quota.producer.default": UNREACHED, "quota.consumer.default": UNREACHED}),
        "held": OurBroker({"quota.producer.default": HELD_MB_S * 1_000_000, "quota.window.num": 3,
                           "quota.window.size.seconds": 1}),
    }
    try:
        for broker in brokers.values():
            broker.start()

        def measure(name: str, client: dict, rep: int) -> dict:
            broker = brokers[name]
            return _load.produce_and_consume_row(broker, broker.bootstrap, f"quota-bench-{name}-{rep}", size=SIZE,
                                                 count=count, client=client, label=f"{name:8s} rep {rep + 1}")

        runs = alternate({"none": {}, "measured": {}}, reps, measure)
        held = brokers["held"]
        _load.create_topic(held.bootstrap, "quota-bench-held", 1)
        produced = _load.produce_throughput(held.bootstrap, "quota-bench-held", size=SIZE, count=held_count,
                                            acks="1", client={})
        if produced.errors:
            raise RuntimeError(f"held: {produced.errors} failed sends ({produced.first_error})")
    finally:
        for broker in brokers.values():
            broker.stop()

    medians = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    none, measured = medians["none"], medians["measured"]
    print(f"\n{count:,} records of 1 KB, acks=1, one partition; {reps} repetition(s), medians\n")
    print("| broker | produce records/s | consume records/s | broker CPU s/GB |")
    print("|---|---:|---:|---:|")
    for name, m in medians.items():
        print(f"| {name} | {m['produce_rps']:,.0f} | {m['consume_rps']:,.0f} | {m['cpu_s_per_gb']:.2f} |")
    print(f"\nmeasured / none: produce {measured['produce_rps'] / none['produce_rps']:.2f}x, "
          f"consume {measured['consume_rps'] / none['consume_rps']:.2f}x, "
          f"broker CPU per GB {measured['cpu_s_per_gb'] / none['cpu_s_per_gb']:.2f}x")
    held_mb_s = produced.bytes / 1e6 / produced.elapsed_s
    print(f"held: {produced.bytes / 1e6:,.0f} MB in {produced.elapsed_s:.1f} s, {held_mb_s:.2f} MB/s against a "
          f"quota of {HELD_MB_S} MB/s ({held_mb_s / HELD_MB_S:.2f}x)")
    write_json(args.json, {"count": count, "reps": reps, "runs": runs, "medians": medians,
                           "held": {"quota_mb_s": HELD_MB_S, "mb": produced.bytes / 1e6,
                                    "seconds": produced.elapsed_s, "mb_s": held_mb_s}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
