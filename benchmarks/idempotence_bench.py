"""Idempotent against plain produce on our broker, measured in the same run.

``python -m benchmarks.idempotence_bench [--short] [--reps N] [--count N]``

One broker process (``python -m broker``, data in a temporary directory);
librdkafka (confluent-kafka) produces 1 KB records to a new one-partition
topic with acks=all and linger.ms=5, once with ``enable.idempotence=false``
and once with ``enable.idempotence=true``, alternating (A B A B ...) so that
drift of the machine hits both. The figure per mode is the median over the
repetitions; the ratio is idempotent / plain. Each producer first delivers
one untimed record (librdkafka takes up to half a second for an idempotent
producer's id). Idempotence costs the broker a
check of each batch's producer id, epoch and sequence on the log's writer
thread (and librdkafka at most five requests in flight per partition).

Then one topic is filled with the same number of records and read from
offset 0 with ``isolation.level`` read_committed and read_uncommitted,
alternating: read_committed costs the broker the last stable offset and the
aborted transactions of each fetch (no transaction here: the common case).

Targets: both ratios >= 0.95.
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks import _load
from benchmarks._procs import OurBroker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="a tenth of the records, three repetitions")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--count", type=int, default=None, help="records per run (default 200,000)")
    args = parser.parse_args(argv)
    count = args.count or (20_000 if args.short else 200_000)
    reps = args.reps or (3 if args.short else 5)
    figures: dict[bool, list[float]] = {False: [], True: []}
    broker = OurBroker().start()
    try:
        for rep in range(reps):
            for idempotence in (False, True) if rep % 2 == 0 else (True, False):
                topic = f"idem-{int(idempotence)}-{rep}"
                _load.create_topic(broker.bootstrap, topic, 1)
                result = _load.produce_throughput(broker.bootstrap, topic, size=1024, count=count, acks="all",
                                                  idempotence=idempotence, warmup=True)
                if result.errors:
                    raise SystemExit(f"{result.errors} delivery errors ({result.first_error})")
                figures[idempotence].append(result.records_s)
                _load.delete_topic(broker.bootstrap, topic)
                print(f"rep {rep}: idempotence={idempotence}: {result.records_s:,.0f} records/s "
                      f"({result.mb_s:.1f} MB/s)", flush=True)
        topic = "idem-consume"
        _load.create_topic(broker.bootstrap, topic, 1)
        filled = _load.produce_throughput(broker.bootstrap, topic, size=1024, count=count, acks="all")
        reads: dict[str, list[float]] = {"read_committed": [], "read_uncommitted": []}
        for rep in range(reps):
            for level in ("read_uncommitted", "read_committed")[::1 if rep % 2 == 0 else -1]:
                result = _load.consume_throughput(broker.bootstrap, topic, 1, filled.records, isolation_level=level)
                reads[level].append(result.records_s)
                print(f"rep {rep}: {level}: {result.records_s:,.0f} records/s ({result.mb_s:.1f} MB/s)", flush=True)
    finally:
        broker.stop()
    plain, idem = statistics.median(figures[False]), statistics.median(figures[True])
    print(f"1 KB acks=all, {count:,} records x {reps}: plain {plain:,.0f} records/s, idempotent {idem:,.0f} "
          f"records/s, ratio {idem / plain:.2f} (target >= 0.95)")
    uncommitted, committed = statistics.median(reads["read_uncommitted"]), statistics.median(reads["read_committed"])
    print(f"1 KB consume, {filled.records:,} records x {reps}: read_uncommitted {uncommitted:,.0f} records/s, "
          f"read_committed {committed:,.0f} records/s, ratio {committed / uncommitted:.2f} (target >= 0.95)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
