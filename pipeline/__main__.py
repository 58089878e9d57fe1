"""``python -m pipeline load ...``, or ``spark-submit pipeline/__main__.py load ...``.

Exit codes: 0 loaded (or nothing new), 1 the load failed (one-line reason on
stderr, nothing committed), 2 bad arguments. ``--metrics-file PATH`` writes
each run's figures (also a failed run's) for node_exporter's textfile
collector (:mod:`pipeline.metrics`).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time

FORMATS = ("parquet", "orc", "json")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline", description="Kafka topics into Spark/Hadoop storage")
    sub = p.add_subparsers(dest="command", required=True)
    load = sub.add_parser("load", help="load everything new in the matching topics, exactly once")
    load.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...]")
    load.add_argument("--topics", required=True, help="regex matched in full against topic names")
    load.add_argument("--output", required=True, help="directory URI (file://, hdfs://, s3a://, or a path)")
    load.add_argument("--format", default="parquet", choices=FORMATS)
    load.add_argument("--group", help="consumer group the loaded offsets are committed to (monitoring)")
    load.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    load.add_argument("--max-records-per-partition", type=int, metavar="N",
                      help="load at most N offsets of each partition in this run")
    load.add_argument("--metrics-file", metavar="PATH",
                      help="write the run's figures here for node_exporter's textfile collector")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        re.compile(args.topics)
    except re.error as exc:
        print(f"pipeline: --topics is not a valid regex: {exc}", file=sys.stderr)
        return 2
    if args.max_records_per_partition is not None and args.max_records_per_partition <= 0:
        print("pipeline: --max-records-per-partition must be positive", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from pipeline.metrics import write_run_metrics

    started = time.time()
    code, result = _load(args)
    if args.metrics_file:
        write_run_metrics(args.metrics_file, None if result is None else result.records, started, time.time())
    return code


def _load(args):
    """(exit code, the LoadResult or None if the run failed)."""
    from pipeline.loader import load, session, summary

    spark = session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        def progress(message: str) -> None:
            print(message, flush=True)

        result = load(spark, args.bootstrap_server, args.topics, args.output, args.format, args.group,
                      args.max_records_per_partition, progress=progress)
    except Exception as exc:  # one line for scripts; Spark's own errors are long
        print(f"pipeline: load failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}",
              file=sys.stderr)
        return 1, None
    finally:
        spark.stop()
    print(summary(result), flush=True)
    return 0, result


if __name__ == "__main__":
    sys.exit(main())
