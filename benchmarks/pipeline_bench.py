"""The kafkapy Spark source and the loader, each against a baseline in the same run.

    python -m benchmarks.pipeline_bench [--short] [--records N] [--json FILE]

One of our brokers runs as a child process; a 4-partition topic is filled once
with N (default 1,000,000; ``--short`` 100,000) 1 KB records by confluent-kafka.

* **read**: records/s of ``spark.read.format("kafkapy")...load()`` of the whole
  topic in ``local[2]``, forced with a ``count()`` of the rows (every record
  fetched and decoded into Arrow columns in a Python worker and handed to
  Spark), against our client alone (one blocking ``Consumer`` assigned all 4
  partitions, with the 8 MiB partition fetches the source's tasks use and
  polls of up to 20,000 records, polling until it has every record) in this
  process. Spark session start is not timed; each is run twice, A B A B, and
  the better of the two kept. The 1-minute load average is printed beside the
  figures: on a shared machine it says how much the run had to itself.
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

from benchmarks._load import fill_keyed
from benchmarks._procs import OurBroker

PARTITIONS = 4
RECORD = 1024


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


def _spark_read(spark, bootstrap: str, topic: str, count: int) -> float:
    t0 = time.perf_counter()
    n = (spark.read.format("kafkapy").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).load().count())
    assert n == count, (n, count)
    return n / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pipeline_bench")
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--records", type=int)
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
                 .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        pipeline.register(spark)
        spark_rates, client_rates = [], []
        for _ in range(2):  # A B A B
            spark_rates.append(_spark_read(spark, broker.bootstrap, topic, count))
            client_rates.append(_client_read(broker.bootstrap, topic, count))
        results["read"] = {"spark_local2_records_s": max(spark_rates), "client_one_consumer_records_s": max(client_rates),
                           "ratio": max(spark_rates) / max(client_rates)}
        results["read"]["load_average"] = os.getloadavg()[0]
        print(f"read: spark local[2] {max(spark_rates):,.0f} records/s, our client alone "
              f"{max(client_rates):,.0f} records/s, {results['read']['ratio']:.2f}x "
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
