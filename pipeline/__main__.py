"""``python -m pipeline load ...``, or ``spark-submit pipeline/__main__.py load ...``.

Exit codes: 0 loaded (or nothing new), 1 the load failed (one-line reason on
stderr, nothing committed), 2 bad arguments. ``--metrics-file PATH`` writes
each run's figures (also a failed run's) for node_exporter's textfile
collector (:mod:`pipeline.metrics`). ``--command-config FILE`` is a Kafka
tool's client properties file (``security.protocol``, ``ssl.*``, ``sasl.*``
including OAUTHBEARER's ``sasl.oauthbearer.*``, ``client.id`` ...): every
client of the job uses it (the driver's, and the Spark tasks' through the
source's ``kafka.*`` options); a file or setting the client cannot use is
exit 2 before Spark starts, naming it. ``--delegation-token``: the Spark
tasks authenticate with a delegation token the driver creates with those
settings, and no credential of the file reaches them (:mod:`pipeline.loader`).
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
    load.add_argument("--command-config", metavar="FILE",
                      help="client properties file (security.protocol, ssl.*, sasl.* ...), as Kafka's tools take")
    load.add_argument("--delegation-token", action="store_true",
                      help="the Spark tasks authenticate with a delegation token the driver creates (and expires at "
                           "the end), not with the command config's credentials")
    load.add_argument("--token-mechanism", default="SCRAM-SHA-512", choices=("SCRAM-SHA-256", "SCRAM-SHA-512"),
                      help="the SCRAM mechanism the tasks authenticate with the token over (default SCRAM-SHA-512)")
    return p


def client_properties(path) -> dict[str, str]:
    """The client settings of a ``--command-config`` file, each checked by the clients the job uses (admin and
    consumer in the driver and the tasks, producer for writes); raises ValueError with one line naming the
    file and the setting."""
    from broker import properties
    from broker.client import AdminConfig, ConsumerConfig, build_config
    from broker.client.errors import ConfigError

    try:
        props = {key: value for key, (_line, value) in properties.load(path).items()}
    except properties.PropertiesError as exc:
        raise ValueError(str(exc)) from None
    if "bootstrap.servers" in props:
        raise ValueError(f"{path}: bootstrap.servers is --bootstrap-server's")
    for cls in (AdminConfig, ConsumerConfig):
        try:
            build_config(cls, {"bootstrap.servers": "127.0.0.1:9092", **props}, {})
        except ConfigError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return props


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
    try:
        args.client_props = client_properties(args.command_config) if args.command_config else {}
    except ValueError as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 2
    if args.delegation_token:
        from pipeline.loader import check_token_protocol

        try:
            check_token_protocol(args.client_props)
        except ValueError as exc:
            print(f"pipeline: --delegation-token needs SASL in --command-config: {exc}", file=sys.stderr)
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
                      args.max_records_per_partition, client_props=args.client_props, progress=progress,
                      delegation_token=args.delegation_token, token_mechanism=args.token_mechanism)
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
