"""The kafkapy Spark source and the loader, each against a baseline in the same run.

    python -m benchmarks.pipeline_bench [--short] [--records N] [--repeats R] [--json FILE]

One of our brokers runs as a child process; a 4-partition topic is filled once
with N (default 1,000,000; ``--short`` 100,000) 1 KB records by confluent-kafka.

* **read**: records/s of ``spark.read.format("kafkapy")...load()`` of the whole
  topic in ``local[2]``, forced with a ``count()`` of the rows (every record
  fetched and decoded into Arrow columns in a Python worker and handed to
  Spark), against our client alone (one blocking ``Consumer`` assigned all 4
  partitions, with the 8 MiB partition fetches the source's tasks use and
  polls of up to 20,000 records, polling until it has every record) in this
  process. Spark session start is not timed, nor a first read of 1,000
  records per partition that starts the Python workers (their imports) before
  the timed reads; then each is run ``--repeats`` times (default 3), A B A B
  ..., and the best kept, with the range. Beside the rates, the CPU seconds
  each read cost are read from /proc: the Spark read's in the JVM and its
  Python workers (every descendant of this process but the broker), the
  client's in this process, and the broker's for each. On a shared machine
  the CPU seconds per record do not depend on how much of the machine the run
  had; the 1-minute load average printed beside the figures says that.
* **load**: the loader (``pipeline.loader.load``: plan, read, Parquet files in
  date/hour directories, manifest, moves) end to end in the same session,
  against Spark writing the same rows (the same key, value, offsets and
  timestamps, built in memory beforehand and cached) to Parquet partitioned
  the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._load import fill_keyed
from benchmarks._procs import CLOCK_TICKS, OurBroker

PARTITIONS = 4
RECORD = 1024


def _cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of its children that it has waited for (/proc/PID/stat fields 14-17)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()
    return sum(int(f) for f in fields[11:15]) / CLOCK_TICKS


def _descendants(pid: int) -> list[int]:
    out = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids = [int(c) for c in children.read_text().split()]
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            continue
        for kid in kids:
            out += [kid, *_descendants(kid)]
    return out


def _cpu_by_pid(broker_pid: int) -> dict[str, dict[int, float]]:
    """CPU seconds so far: this process ("client"), its other descendants ("spark"), the broker."""
    return {"client": {os.getpid(): _cpu_s(os.getpid())}, "broker": {broker_pid: _cpu_s(broker_pid)},
            "spark": {p: _cpu_s(p) for p in set(_descendants(os.getpid())) - {broker_pid}}}


def _timed(read, broker_pid: int, side: str, count: int) -> tuple[float, float]:
    """Records/s of ``read()`` and its CPU seconds per million records (``side`` and the broker).

    A process's CPU is counted from before to after the read; one started
    meanwhile (a Spark Python worker) counts whole, one that ended meanwhile
    (an idle worker Spark stopped) not at all: Spark's daemon does not wait
    for its workers, so their CPU is not added to any parent's.
    """
    before = _cpu_by_pid(broker_pid)
    rate = read()
    after = _cpu_by_pid(broker_pid)
    cpu = sum(s - before[k].get(pid, 0.0) for k in (side, "broker") for pid, s in after[k].items())
    return rate, cpu * 1e6 / count


def _client_read(bootstrap: str, topic: str, count: int) -> float:
    from broker.client import Consumer, TopicPartition

    t0 = time.perf_counter()
    n = 0
    # the same fetch and poll sizes as the source's tasks use
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                  max_partition_fetch_bytes=8 << 20, max_poll_records=20000) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while n < count:
            n += len(c.poll(1000))
    return n / (time.perf_counter() - t0)


def _spark_read(spark, bootstrap: str, topic: str, count: int, ending: str = "latest") -> float:
    t0 = time.perf_counter()
    n = (spark.read.format("kafkapy").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("endingOffsets", ending).load().count())
    assert n == count, (n, count)
    return n / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pipeline_bench")
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--records", type=int)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    count = args.records or (100_000 if args.short else 1_000_000)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession, functions as F
    import pipeline
    from pipeline.loader import load
    from benchmarks._load import create_topic

    broker = OurBroker().start()
    results: dict = {"records": count, "record_bytes": RECORD, "partitions": PARTITIONS}
    spark = None
    try:
        topic = "pipeline-bench"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        t0 = time.perf_counter()
        fill_keyed(broker.bootstrap, topic, count, PARTITIONS, RECORD)
        print(f"filled {count} records in {time.perf_counter() - t0:.1f}s", flush=True)
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        pipeline.register(spark)
        warm = {topic: {str(p): 1000 for p in range(PARTITIONS)}}
        _spark_read(spark, broker.bootstrap, topic, 1000 * PARTITIONS, json.dumps(warm))
        runs: dict[str, list[tuple[float, float]]] = {"spark": [], "client": []}
        bpid = broker.proc.pid
        for _ in range(args.repeats):  # A B A B ...
            runs["spark"].append(_timed(lambda: _spark_read(spark, broker.bootstrap, topic, count), bpid,
                                        "spark", count))
            runs["client"].append(_timed(lambda: _client_read(broker.bootstrap, topic, count), bpid,
                                         "client", count))
        best = {side: max(r for r, _ in rs) for side, rs in runs.items()}
        results["read"] = {
            "spark_local2_records_s": best["spark"], "client_one_consumer_records_s": best["client"],
            "ratio": best["spark"] / best["client"],
            "runs": {side: [{"records_s": r, "cpu_s_per_million": c} for r, c in rs] for side, rs in runs.items()},
            "load_average": os.getloadavg()[0]}
        for side, rs in runs.items():
            print(f"read, {side}: " + ", ".join(f"{r:,.0f} records/s ({c:.2f} CPU s per million)" for r, c in rs),
                  flush=True)
        print(f"read: spark local[2] {best['spark']:,.0f} records/s, our client alone "
              f"{best['client']:,.0f} records/s, {results['read']['ratio']:.2f}x "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)

        with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
            t0 = time.perf_counter()
            result = load(spark, broker.bootstrap, topic, f"{tmp}/loaded", progress=lambda m: None)
            loader_s = time.perf_counter() - t0
            assert sum(result.records.values()) == count, result.records
            # the same rows, from memory: read once, cached and materialized before timing
            rows = (spark.read.format("kafkapy").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", topic).option("includeHeaders", "true").load()
                    .withColumn("date", F.date_format("timestamp", "yyyy-MM-dd"))
                    .withColumn("hour", F.date_format("timestamp", "HH")).cache())
            assert rows.count() == count
            t0 = time.perf_counter()
            rows.write.partitionBy("topic", "date", "hour").parquet(f"{tmp}/memory")
            memory_s = time.perf_counter() - t0
        results["load"] = {"loader_records_s": count / loader_s, "spark_from_memory_records_s": count / memory_s,
                           "ratio": memory_s / loader_s, "load_average": os.getloadavg()[0]}
        print(f"load to Parquet: loader {count / loader_s:,.0f} records/s end to end, Spark from an in-memory "
              f"DataFrame {count / memory_s:,.0f} records/s, loader/memory {memory_s / loader_s:.2f}x "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
