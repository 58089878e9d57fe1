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

Each mode's CPU per 100,000 records is printed too, the broker's (from
/proc) and the client's (librdkafka's and Python's, from getrusage): on two
cores the client's CPU is taken from the broker's, so a mode that costs the
client more is slower against any broker.

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
import resource
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


def _produce_modes(broker, modes: tuple[str, ...], count: int, reps: int) -> dict[str, dict[str, float]]:
    """Per mode, medians over the repetitions (the modes' order rotating each repetition): ``rate``
    (records/s), and the CPU seconds per 100,000 records of the broker (``broker_cpu``, from /proc)
    and of this process (``client_cpu``: librdkafka's threads and Python's, from getrusage)."""
    figures: dict[str, dict[str, list[float]]] = {m: {"rate": [], "broker_cpu": [], "client_cpu": []} for m in modes}
    for rep in range(reps):
        for mode in modes[rep % len(modes):] + modes[:rep % len(modes)]:
            topic = f"{mode}-{rep}"
            _load.create_topic(broker.bootstrap, topic, 1)
            broker_before, client_before = broker.stats.snapshot().cpu_s, _client_cpu_s()
            result = _produce(broker, mode, topic, count)
            broker_cpu, client_cpu = broker.stats.snapshot().cpu_s - broker_before, _client_cpu_s() - client_before
            if result.errors:
                raise SystemExit(f"{broker.name} {mode}: {result.errors} delivery errors ({result.first_error})")
            per = 100_000 / result.records
            figures[mode]["rate"].append(result.records_s)
            figures[mode]["broker_cpu"].append(broker_cpu * per)
            figures[mode]["client_cpu"].append(client_cpu * per)
            if broker.deletes_topics:
                _load.delete_topic(broker.bootstrap, topic)
            commits = f", {result.transactions} commits" if result.transactions else ""
            print(f"{broker.name} rep {rep}: {mode}: {result.records_s:,.0f} records/s ({result.mb_s:.1f} MB/s)"
                  f"{commits}; CPU per 100,000 records: broker {broker_cpu * per:.3f} s, client {client_cpu * per:.3f} s",
                  flush=True)
    return {m: {k: statistics.median(v) for k, v in f.items()} for m, f in figures.items()}


def _client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _summary(name: str, figures: dict[str, dict[str, float]]) -> None:
    """Rates, ratios and CPU per 100,000 records of one broker's medians."""
    rate = {m: f["rate"] for m, f in figures.items()}
    print(f"{name}: plain {rate['plain']:,.0f} records/s, idempotent {rate['idempotent']:,.0f} records/s, ratio "
          f"{rate['idempotent'] / rate['plain']:.2f} (target >= 0.95); a commit every 100 ms "
          f"{rate['transactional-100ms']:,.0f} records/s, ratio to idempotent "
          f"{rate['transactional-100ms'] / rate['idempotent']:.2f} (target >= 0.8); 1,000 records per transaction "
          f"{rate['transactional']:,.0f} records/s, ratio to idempotent {rate['transactional'] / rate['idempotent']:.2f}, "
          f"cost of a transaction {_txn_cost_ms(rate):.2f} ms")
    print(f"{name}: CPU seconds per 100,000 records, broker / client: "
          + ", ".join(f"{m} {f['broker_cpu']:.3f} / {f['client_cpu']:.3f}" for m, f in figures.items()))


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
    print(f"1 KB acks=all, {count:,} records x {reps}, medians:")
    _summary("ours", ours)
    if tansu is not None:
        _summary("tansu", tansu)
    uncommitted, committed = statistics.median(reads["read_uncommitted"]), statistics.median(reads["read_committed"])
    print(f"1 KB consume, {filled.records:,} records x {reps}: read_uncommitted {uncommitted:,.0f} records/s, "
          f"read_committed {committed:,.0f} records/s, ratio {committed / uncommitted:.2f} (target >= 0.95)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
