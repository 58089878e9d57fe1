"""``kafkactl perf``: producer and consumer throughput tests on our client
(the counterparts of Apache Kafka's ``kafka-producer-perf-test`` and
``kafka-consumer-perf-test``).

``perf produce TOPIC --num-records N --record-size S [--throughput R]``: sends N
records of S random upper-case ASCII bytes (null keys), at most R records/s
when R > 0, and times each record from ``send`` to its delivery callback.
Report: ``records``, ``records_per_sec``, ``mb_per_sec`` (MB = 2**20 bytes,
as Kafka's tool), ``avg_latency_ms``, ``max_latency_ms``, ``p50_ms``,
``p95_ms``, ``p99_ms``, ``p99_9_ms``, ``errors``.

``perf consume TOPIC --messages N``: reads N records from the beginning of
every partition (or through ``--group``), stopping early when ``--timeout``
seconds pass without a record. Report: ``records``, ``data_consumed_mb``,
``mb_per_sec``, ``records_per_sec`` over the whole run, ``rebalance_time_ms``
(until the first record), and ``fetch_time_ms`` / ``fetch_mb_per_sec`` /
``fetch_records_per_sec`` after it. Fewer records than asked is exit 1.
"""

from __future__ import annotations

import random
import string
import time
from typing import List, Optional

import typer

from broker.client import Consumer, Producer, TopicPartition
from kafkactl._common import (admin_client, client_config, cluster_errors, output_format, parse_pairs,
                              require_topics)
from kafkactl.errors import EXIT_PROBLEM, CliError
from kafkactl.output import OutputFormat, emit
from kafkactl.produce import Acks, Compression, producer_options

app = typer.Typer(help="Producer and consumer throughput tests.", no_args_is_help=True)

MB = 1024 * 1024


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0..1) of a sorted list (nearest rank, as Kafka's tool)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(int(len(sorted_values) * fraction), len(sorted_values) - 1)]


def _throttle(sent: int, started: float, throughput: float) -> None:
    """Sleep while ``sent`` records are ahead of ``throughput`` records/s since ``started``."""
    if throughput <= 0:
        return
    ahead = sent / throughput - (time.monotonic() - started)
    if ahead > 0.001:
        time.sleep(ahead)


@app.command("produce")
def perf_produce(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic to write to."),
    num_records: int = typer.Option(..., "--num-records", "-n", min=1, help="Records to send."),
    record_size: int = typer.Option(100, "--record-size", "-s", min=0, help="Value size in bytes."),
    throughput: float = typer.Option(-1, "--throughput", help="At most this many records/s (<= 0: no limit)."),
    acks: Optional[Acks] = typer.Option(None, "--acks", help="0, 1 or all (default: all)."),
    compression: Optional[Compression] = typer.Option(None, "--compression", "-z",
                                                      help="Batch compression codec (default: none)."),
    producer_property: Optional[List[str]] = typer.Option(
        None, "--producer-property", "-X", help="Producer config NAME=VALUE, Kafka names (repeatable)."),
) -> None:
    """Send records as fast as allowed and report throughput and latency."""
    props = parse_pairs(producer_property, "producer property")
    with admin_client(ctx) as admin:
        require_topics(admin, [topic])
    payload = "".join(random.choices(string.ascii_uppercase, k=record_size)).encode()
    latencies: list[float] = []
    failures: list[BaseException] = []

    def record_delivery(start: float):
        def done(error, _metadata) -> None:
            if error is not None:
                failures.append(error)
            else:
                latencies.append((time.monotonic() - start) * 1000)
        return done

    with cluster_errors(ctx):
        producer = Producer(**client_config(ctx, "producer", props, defaults={"acks": "all", "compression_type": "none"},
                                            **producer_options(acks, compression)))
        try:
            started = time.monotonic()
            for i in range(num_records):
                producer.send(topic, payload, on_delivery=record_delivery(time.monotonic()))
                if throughput > 0 and i % 16 == 0:
                    _throttle(i + 1, started, throughput)
            producer.flush()
            elapsed = time.monotonic() - started
        finally:
            producer.close()
    latencies.sort()
    ok = len(latencies)
    report = {
        "records": ok,
        "records_per_sec": round(ok / elapsed, 1) if elapsed else 0.0,
        "mb_per_sec": round(ok * record_size / MB / elapsed, 2) if elapsed else 0.0,
        "avg_latency_ms": round(sum(latencies) / ok, 2) if ok else 0.0,
        "max_latency_ms": round(latencies[-1], 2) if ok else 0.0,
        "p50_ms": round(percentile(latencies, 0.5), 2),
        "p95_ms": round(percentile(latencies, 0.95), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "p99_9_ms": round(percentile(latencies, 0.999), 2),
        "errors": len(failures),
    }
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit(report, fmt)
    else:
        print(f"{ok} records sent, {report['records_per_sec']} records/sec ({report['mb_per_sec']} MB/sec), "
              f"{report['avg_latency_ms']} ms avg latency, {report['max_latency_ms']} ms max latency, "
              f"{report['p50_ms']} ms 50th, {report['p95_ms']} ms 95th, {report['p99_ms']} ms 99th, "
              f"{report['p99_9_ms']} ms 99.9th.")
    if failures:
        raise CliError(f"{len(failures)} record(s) failed, first: {failures[0]}", EXIT_PROBLEM)


@app.command("consume")
def perf_consume(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic to read."),
    messages: int = typer.Option(..., "--messages", "-n", min=1, help="Records to read."),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Read as this group (default: assign every partition)."),
    timeout: float = typer.Option(10, "--timeout", "-t", min=0, help="Give up after this many seconds without a record."),
    consumer_property: Optional[List[str]] = typer.Option(
        None, "--consumer-property", "-X", help="Consumer config NAME=VALUE, Kafka names (repeatable)."),
) -> None:
    """Read records as fast as possible and report throughput."""
    props = parse_pairs(consumer_property, "consumer property")
    with admin_client(ctx) as admin:
        meta = require_topics(admin, [topic])[topic]
    count = size = 0
    with cluster_errors(ctx):
        consumer = Consumer(**client_config(ctx, "consumer", props, group_id=group, auto_offset_reset="earliest",
                                            enable_auto_commit=group is not None))
        try:
            if group is None:
                consumer.assign([TopicPartition(topic, p) for p in sorted(meta.partitions)])
            else:
                consumer.subscribe([topic])
            started = time.monotonic()
            first = last = None
            while count < messages:
                records = consumer.poll(min(500, timeout * 1000), max_records=messages - count)
                now = time.monotonic()
                if not records:
                    if now - (last or started) >= timeout:
                        break
                    continue
                if first is None:
                    first = now
                last = now
                count += len(records)
                size += sum(len(r.value or b"") + len(r.key or b"") for r in records)
        finally:
            consumer.close()
    end = last or time.monotonic()
    total = max(end - started, 1e-9)
    fetch = max(end - (first or end), 1e-9)
    report = {
        "records": count,
        "data_consumed_mb": round(size / MB, 4),
        "mb_per_sec": round(size / MB / total, 2),
        "records_per_sec": round(count / total, 1),
        "rebalance_time_ms": round(((first or end) - started) * 1000, 1),
        "fetch_time_ms": round(fetch * 1000, 1),
        "fetch_mb_per_sec": round(size / MB / fetch, 2) if first else 0.0,
        "fetch_records_per_sec": round(count / fetch, 1) if first else 0.0,
    }
    emit(report, output_format(ctx))
    if count < messages:
        raise CliError(f"read {count} of {messages} records: no record for {timeout} s", EXIT_PROBLEM)
