"""Idempotent and transactional against plain produce, measured in the same run.

``python -m benchmarks.idempotence_bench [--short] [--reps N] [--count N] [--no-tansu]``

One broker process (``python -m broker``, data in a temporary directory);
librdkafka (confluent-kafka) produces 1 KB records to a new one-partition
topic with acks=all and linger.ms=5, in four modes taken in turn, the order
rotating each repetition so that drift of the machine hits all: plain
(``enable.idempotence=false``), idempotent (``enable.idempotence=true``),
transactional (a ``transactional.id``, a commit every 1,000 records, the
commits timed) and transactional-100ms (a commit once a transaction has been
open 100 ms, the commit interval at which KIP-98 measured Kafka's cost of
transactions: 3 % for 1 KB records at full speed). The figure per mode is the
median over the repetitions.

A transaction's cost is what 1,000 records take in a transaction beyond what
they take idempotent: ``1000 / transactional - 1000 / idempotent`` seconds,
from the two medians. It holds the client's fixed work per transaction and
the overlap of client and broker that a commit interrupts, so it is larger
against a broker that keeps up with the client.
Each producer first delivers one untimed record (librdkafka takes up to half
a second for an idempotent producer's id). Idempotence costs the broker a
check of each batch's producer id, epoch and sequence on the log's writer
thread, and librdkafka at most five requests in flight per partition.

The same three modes against tansu (``.cache/tansu``, unless ``--no-tansu``),
in the same run: if tansu shows the same ratio, the gap is the client's. A
transaction costs librdkafka's commit (a flush, EndTxn) and the next
transaction's AddPartitionsToTxn, sent from a 1 ms timer after the first
record, before any of its records may leave: round trips no broker removes.

Then one topic is filled with the same number of records and read from
offset 0 with ``isolation.level`` read_committed and read_uncommitted,
alternating: read_committed costs the broker the last stable offset and the
aborted transactions of each fetch (no transaction here: the common case).

Targets: idempotent / plain >= 0.95, transactional-100ms / idempotent >= 0.8,
read_committed / read_uncommitted >= 0.95. (Transactional at 1,000 records per
transaction against idempotent is printed too, with tansu's, but is the
client's figure more than the broker's: at 600,000 records/s 1,000 records
take 1.7 ms, less than librdkafka's own per-transaction work, its 1 ms timer
before AddPartitionsToTxn among it.)
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks import _load
from benchmarks._procs import OurBroker, TansuBroker


MODES = ("plain", "idempotent", "transactional", "transactional-100ms")


def _txn_cost_ms(figures: dict[str, float]) -> float:
    """The cost of a transaction in ms: what 1,000 records take beyond their time idempotent."""
    return 1000 * (1000 / figures["transactional"] - 1000 / figures["idempotent"])


def _produce(broker, mode: str, topic: str, count: int):
    if mode == "transactional":
        return _load.produce_transactional_throughput(broker.bootstrap, topic, size=1024, count=count)
    if mode == "transactional-100ms":
        return _load.produce_transactional_throughput(broker.bootstrap, topic, size=1024, count=count,
                                                      interval_s=0.1)
    return _load.produce_throughput(broker.bootstrap, topic, size=1024, count=count, acks="all",
                                    idempotence=mode == "idempotent", warmup=True)


def _produce_modes(broker, modes: tuple[str, ...], count: int, reps: int) -> dict[str, float]:
    """Median records/s per mode, the modes' order rotating each repetition."""
    figures: dict[str, list[float]] = {m: [] for m in modes}
    for rep in range(reps):
        for mode in modes[rep % len(modes):] + modes[:rep % len(modes)]:
            topic = f"{mode}-{rep}"
            _load.create_topic(broker.bootstrap, topic, 1)
            result = _produce(broker, mode, topic, count)
            if result.errors:
                raise SystemExit(f"{broker.name} {mode}: {result.errors} delivery errors ({result.first_error})")
            figures[mode].append(result.records_s)
            if broker.deletes_topics:
                _load.delete_topic(broker.bootstrap, topic)
            commits = f", {result.transactions} commits" if result.transactions else ""
            print(f"{broker.name} rep {rep}: {mode}: {result.records_s:,.0f} records/s ({result.mb_s:.1f} MB/s)"
                  f"{commits}", flush=True)
    return {m: statistics.median(f) for m, f in figures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="a tenth of the records, three repetitions")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--count", type=int, default=None, help="records per run (default 200,000)")
    parser.add_argument("--no-tansu", action="store_true", help="no comparison run against tansu")
    args = parser.parse_args(argv)
    count = args.count or (20_000 if args.short else 200_000)
    reps = args.reps or (3 if args.short else 5)
    broker = OurBroker().start()
    try:
        ours = _produce_modes(broker, MODES, count, reps)
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
    tansu = None
    if not args.no_tansu:
        other = TansuBroker().start()
        try:
            tansu = _produce_modes(other, MODES, count, reps)
        finally:
            other.stop()
    print(f"1 KB acks=all, {count:,} records x {reps}, ours: plain {ours['plain']:,.0f} records/s, idempotent "
          f"{ours['idempotent']:,.0f} records/s, ratio {ours['idempotent'] / ours['plain']:.2f} (target >= 0.95)")
    print(f"transactional, a commit every 100 ms {ours['transactional-100ms']:,.0f} records/s, ratio to idempotent "
          f"{ours['transactional-100ms'] / ours['idempotent']:.2f} (target >= 0.8)")
    print(f"transactional, 1,000 records per transaction {ours['transactional']:,.0f} records/s, ratio to idempotent "
          f"{ours['transactional'] / ours['idempotent']:.2f}; cost of a transaction {_txn_cost_ms(ours):.2f} ms")
    if tansu is not None:
        print(f"tansu: plain {tansu['plain']:,.0f} records/s, idempotent {tansu['idempotent']:,.0f} records/s, "
              f"ratio {tansu['idempotent'] / tansu['plain']:.2f}; a commit every 100 ms "
              f"{tansu['transactional-100ms']:,.0f} records/s, ratio {tansu['transactional-100ms'] / tansu['idempotent']:.2f}; "
              f"1,000 records per transaction {tansu['transactional']:,.0f} records/s, ratio "
              f"{tansu['transactional'] / tansu['idempotent']:.2f}; cost of a transaction "
              f"{_txn_cost_ms(tansu):.2f} ms")
    uncommitted, committed = statistics.median(reads["read_uncommitted"]), statistics.median(reads["read_committed"])
    print(f"1 KB consume, {filled.records:,} records x {reps}: read_uncommitted {uncommitted:,.0f} records/s, "
          f"read_committed {committed:,.0f} records/s, ratio {committed / uncommitted:.2f} (target >= 0.95)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
