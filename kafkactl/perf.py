"""``kafkactl perf``: producer and consumer throughput tests and an end-to-end
latency test on our client (the counterparts of Apache Kafka's
``kafka-producer-perf-test``, ``kafka-consumer-perf-test`` and
``kafka.tools.EndToEndLatency``).

``perf produce TOPIC --num-records N --record-size S [--throughput R]``: sends N
records of S random upper-case ASCII bytes (null keys), at most R records/s
when R > 0, and times each record from ``send`` to its delivery callback.
Report: ``records`` (acknowledged), ``elapsed_ms`` (first send to last
acknowledgement), ``records_per_sec``, ``mb_per_sec`` (MB = 2**20 bytes, as
Kafka's tool), ``avg_latency_ms``, ``max_latency_ms``, ``p50_ms``, ``p95_ms``,
``p99_ms``, ``p99_9_ms``, ``errors``. It stops sending at the first record that
fails; then it says how many records were acknowledged, and exits as the
failure's kind says (3 when the cluster went away).

``perf consume TOPIC --messages N``: reads N records from the beginning of
every partition (or through ``--group``), stopping early when ``--timeout``
seconds pass without a record. Report: ``records``, ``data_consumed_mb``,
``mb_per_sec``, ``records_per_sec`` over the whole run, ``rebalance_time_ms``
(until the group gave the consumer its partitions; 0 without ``--group``), and
``fetch_time_ms`` / ``fetch_mb_per_sec`` / ``fetch_records_per_sec`` from then
to the last record, as Kafka's tool splits them. Fewer records than asked is
exit 1.

``perf e2e TOPIC --num-records N --record-size S``: one record at a time, as
Kafka's EndToEndLatency: a consumer assigned every partition of TOPIC from its
end, then for each record a send that waits for its acknowledgement (linger 0,
``--acks`` 1 or all) and polls until the consumer has it. Each record's latency
runs from the send to the consumer holding it; each must be the one record
read, with the value sent (random upper-case ASCII, new for every record), or
the run stops with exit 1, as it does when a record is acknowledged but not
read within ``--timeout`` seconds; a send not acknowledged within it is exit 3
(the cluster did not answer), as any cluster error. Either way the command
says how many records went end to end and does not wait for the one it
abandons. Report: ``records``, ``avg_latency_ms``, ``p50_ms``,
``p99_ms``, ``p99_9_ms``, ``max_latency_ms``, and ``ack_p50_ms`` /
``ack_p99_ms`` (send to acknowledgement: the rest is the fetch). Unlike
Kafka's tool the consumer keeps its own ``fetch.max.wait.ms`` (default 500)
instead of 0: a waiting fetch is what consumers run, so the figure shows how
soon a broker answers it when a record arrives, without a consumer that spins
on fetches taking a core; ``--consumer-property fetch.max.wait.ms=0`` gives
Kafka's setting.

All three print a progress line on stderr every ``--reporting-interval`` ms (5000,
as Kafka's tools; 0 for none) about the records of that window, so the report
on stdout stays one document. A rate over less than :data:`MIN_MEASURABLE_S`
is not a measurement (one record acknowledged in a millisecond is not "1,000
records/s"): such rates are ``null`` and the table says the run was too short.
"""

from __future__ import annotations

import contextlib
import random
import string
import sys
import threading
import time
from typing import Callable, List, Optional

import typer

from broker.client import Consumer, Producer, TopicPartition, errors
from kafkactl._common import (admin_client, client_config, cluster_errors, error_for, output_format, parse_pairs,
                              require_topics)
from kafkactl.errors import EXIT_PROBLEM, CliError
from kafkactl.output import OutputFormat, emit
from kafkactl.produce import Acks, Compression, producer_options

app = typer.Typer(help="Producer and consumer throughput tests, end-to-end latency.", no_args_is_help=True)

MB = 1024 * 1024
# Below this, timer, scheduling and GIL noise on a busy machine are the same size as the
# run itself: a rate computed from it would say more about the machine than the cluster.
MIN_MEASURABLE_S = 0.001
REPORTING_INTERVAL_OPT = typer.Option(5000, "--reporting-interval", min=0, metavar="MS",
                                      help="Print a progress line on stderr every MS ms (0: none).")


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0..1) of a sorted list (nearest rank, as Kafka's tool)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(int(len(sorted_values) * fraction), len(sorted_values) - 1)]


def latency_summary(latencies_ms: list[float], digits: int, p95: bool = False) -> dict:
    """``avg_latency_ms``, ``max_latency_ms`` and the percentiles of a run (sorts the list in place)."""
    latencies_ms.sort()
    n = len(latencies_ms)
    points = [("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99), ("p99_9_ms", 0.999)]
    return {
        "avg_latency_ms": round(sum(latencies_ms) / n, digits) if n else 0.0,
        "max_latency_ms": round(latencies_ms[-1], digits) if n else 0.0,
        **{name: round(percentile(latencies_ms, q), digits) for name, q in points if p95 or name != "p95_ms"},
    }


def rate(amount: float, seconds: float | None, digits: int) -> float | None:
    """``amount / seconds`` rounded, or None when ``seconds`` is too short to measure."""
    if seconds is None or seconds < MIN_MEASURABLE_S:
        return None
    return round(amount / seconds, digits)


def _throttle(sent: int, started: float, throughput: float) -> None:
    """Sleep while ``sent`` records are ahead of ``throughput`` records/s since ``started``."""
    if throughput <= 0:
        return
    ahead = sent / throughput - (time.monotonic() - started)
    if ahead > 0.001:
        time.sleep(ahead)


class _Window:
    """Records (and their bytes and latencies) since the last progress line; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset(time.monotonic())

    def _reset(self, now: float) -> None:
        self.started, self.records, self.bytes, self.latency_sum, self.latency_max = now, 0, 0, 0.0, 0.0

    def add(self, records: int, size: int, latency_ms: float = 0.0) -> None:
        with self._lock:
            self.records += records
            self.bytes += size
            self.latency_sum += latency_ms
            self.latency_max = max(self.latency_max, latency_ms)

    def take(self) -> tuple[int, int, float, float, float]:
        """``(records, bytes, seconds, latency sum, latency max)`` of the window, starting the next."""
        with self._lock:
            now = time.monotonic()
            out = (self.records, self.bytes, now - self.started, self.latency_sum, self.latency_max)
            self._reset(now)
            return out


class _Progress:
    """Prints ``line()`` on stderr every ``interval_ms`` from a daemon thread until stopped."""

    def __init__(self, interval_ms: int, line: Callable[[], str]) -> None:
        self._interval = interval_ms / 1000
        self._line = line
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perf-progress", daemon=True)

    def __enter__(self) -> "_Progress":
        if self._interval > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            print(self._line(), file=sys.stderr, flush=True)


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
    reporting_interval: int = REPORTING_INTERVAL_OPT,
) -> None:
    """Send records as fast as allowed and report throughput and latency."""
    props = parse_pairs(producer_property, "producer property")
    with admin_client(ctx) as admin:
        require_topics(admin, [topic])
    payload = "".join(random.choices(string.ascii_uppercase, k=record_size)).encode()
    latencies: list[float] = []
    failures: list[BaseException] = []
    window = _Window()
    last_ack = [0.0]

    def record_delivery(start: float):
        def done(error, _metadata) -> None:
            if error is not None:
                failures.append(error)
                return
            now = time.monotonic()
            latency = (now - start) * 1000
            latencies.append(latency)
            last_ack[0] = now
            window.add(1, record_size, latency)
        return done

    def progress() -> str:
        n, size, seconds, latency_sum, latency_max = window.take()
        return (f"{n} records sent, {n / seconds:.1f} records/sec ({size / MB / seconds:.2f} MB/sec), "
                f"{latency_sum / n if n else 0:.1f} ms avg latency, {latency_max:.1f} ms max latency.")

    sent = 0
    with cluster_errors(ctx):
        producer = Producer(**client_config(ctx, "producer", props, defaults={"acks": "all", "compression_type": "none"},
                                            **producer_options(acks, compression)))
        try:
            with _Progress(reporting_interval, progress):
                started = time.monotonic()
                try:
                    while sent < num_records and not failures:
                        producer.send(topic, payload, on_delivery=record_delivery(time.monotonic()))
                        sent += 1
                        if throughput > 0 and sent % 16 == 1:
                            _throttle(sent, started, throughput)
                    producer.flush()
                except errors.KafkaError as exc:
                    failures.append(exc)
        finally:
            producer.close()
    ok = len(latencies)
    elapsed = last_ack[0] - started if ok else None
    report = {
        "records": ok,
        "elapsed_ms": None if elapsed is None else round(elapsed * 1000, 1),
        "records_per_sec": rate(ok, elapsed, 1),
        "mb_per_sec": rate(ok * record_size / MB, elapsed, 2),
        **latency_summary(latencies, 2, p95=True),
        "errors": len(failures),
    }
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit(report, fmt)
    else:
        if report["records_per_sec"] is None:
            speed = f"in {report['elapsed_ms']} ms: too short to measure a rate"
        else:
            speed = f"{report['records_per_sec']} records/sec ({report['mb_per_sec']} MB/sec)"
        print(f"{ok} records sent, {speed}, "
              f"{report['avg_latency_ms']} ms avg latency, {report['max_latency_ms']} ms max latency, "
              f"{report['p50_ms']} ms 50th, {report['p95_ms']} ms 95th, {report['p99_ms']} ms 99th, "
              f"{report['p99_9_ms']} ms 99.9th.")
    if failures:
        cause = error_for(ctx, failures[0])
        raise CliError(f"{ok} of {num_records} records acknowledged, {len(failures)} failed; first: {cause}",
                       cause.exit_code)


@app.command("consume")
def perf_consume(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic to read."),
    messages: int = typer.Option(..., "--messages", "-n", min=1, help="Records to read."),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Read as this group (default: assign every partition)."),
    timeout: float = typer.Option(10, "--timeout", "-t", min=0, help="Give up after this many seconds without a record."),
    consumer_property: Optional[List[str]] = typer.Option(
        None, "--consumer-property", "-X", help="Consumer config NAME=VALUE, Kafka names (repeatable)."),
    reporting_interval: int = REPORTING_INTERVAL_OPT,
) -> None:
    """Read records as fast as possible and report throughput."""
    props = parse_pairs(consumer_property, "consumer property")
    with admin_client(ctx) as admin:
        meta = require_topics(admin, [topic])[topic]
    count = size = 0
    window = _Window()
    assigned: list[float] = []

    def progress() -> str:
        n, nbytes, seconds, _, _ = window.take()
        return (f"{n} records consumed ({nbytes / MB:.2f} MB) in the last {seconds:.1f} s, "
                f"{n / seconds:.1f} records/sec ({nbytes / MB / seconds:.2f} MB/sec); {count} in total.")

    with cluster_errors(ctx):
        consumer = Consumer(**client_config(ctx, "consumer", props, group_id=group, auto_offset_reset="earliest",
                                            enable_auto_commit=group is not None))
        try:
            started = time.monotonic()
            if group is None:
                consumer.assign([TopicPartition(topic, p) for p in sorted(meta.partitions)])
                assigned.append(started)
            else:
                consumer.subscribe([topic], on_assign=lambda _tps: assigned.append(time.monotonic()))
            last = None
            with _Progress(reporting_interval, progress):
                while count < messages:
                    records = consumer.poll(min(500, timeout * 1000), max_records=messages - count)
                    now = time.monotonic()
                    if not records:
                        if now - (last or started) >= timeout:
                            break
                        continue
                    last = now
                    nbytes = sum(len(r.value or b"") + len(r.key or b"") for r in records)
                    count += len(records)
                    size += nbytes
                    window.add(len(records), nbytes)
        finally:
            consumer.close()
    end = last or time.monotonic()
    fetch_start = assigned[0] if assigned else end
    fetch = end - fetch_start if last else None
    report = {
        "records": count,
        "data_consumed_mb": round(size / MB, 4),
        "mb_per_sec": rate(size / MB, end - started, 2),
        "records_per_sec": rate(count, end - started, 1),
        "rebalance_time_ms": round((fetch_start - started) * 1000, 1),
        "fetch_time_ms": None if fetch is None else round(fetch * 1000, 1),
        "fetch_mb_per_sec": rate(size / MB, fetch, 2),
        "fetch_records_per_sec": rate(count, fetch, 1),
    }
    emit(report, output_format(ctx))
    if count < messages:
        raise CliError(f"read {count} of {messages} records: no record for {timeout} s", EXIT_PROBLEM)


@app.command("e2e")
def perf_e2e(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic to write to and read from."),
    num_records: int = typer.Option(..., "--num-records", "-n", min=1, help="Records to send, one at a time."),
    record_size: int = typer.Option(100, "--record-size", "-s", min=1, help="Value size in bytes."),
    acks: Optional[Acks] = typer.Option(None, "--acks",
                                        help="1 or all (default: all): each send waits for its acknowledgement."),
    timeout: float = typer.Option(60, "--timeout", "-t", min=0.001,
                                  help="Give up when a record is not read this many seconds after its send."),
    producer_property: Optional[List[str]] = typer.Option(
        None, "--producer-property", help="Producer config NAME=VALUE, Kafka names (repeatable)."),
    consumer_property: Optional[List[str]] = typer.Option(
        None, "--consumer-property", help="Consumer config NAME=VALUE, Kafka names (repeatable)."),
    reporting_interval: int = REPORTING_INTERVAL_OPT,
) -> None:
    """Send one record at a time, read it back, and report the end-to-end latency."""
    producer_config = client_config(ctx, "producer", parse_pairs(producer_property, "producer property"),
                                    defaults={"acks": "all"}, **producer_options(acks, None), linger_ms=0)
    if str(producer_config.get("acks")).strip() == "0":  # from --acks, --producer-property, --command-config or the file
        raise CliError("end-to-end latency needs each send acknowledged: acks 1 or all")
    consumer_config = client_config(ctx, "consumer", parse_pairs(consumer_property, "consumer property"),
                                    group_id=None, enable_auto_commit=False, auto_offset_reset="latest")
    with admin_client(ctx) as admin:
        meta = require_topics(admin, [topic])[topic]
    rng = random.Random()
    letters = string.ascii_uppercase.encode()
    latencies: list[float] = []
    acked: list[float] = []
    window = _Window()

    def progress() -> str:
        n, _, seconds, latency_sum, latency_max = window.take()
        return (f"{n} records end to end in the last {seconds:.1f} s, {latency_sum / n if n else 0:.3f} ms avg "
                f"latency, {latency_max:.3f} ms max latency; {len(latencies)} in total.")

    def failed(what: str, code: int = EXIT_PROBLEM) -> CliError:
        return CliError(f"{len(latencies)} of {num_records} records went end to end; then {what}", code)

    finished = False
    consumer = None
    with cluster_errors(ctx):
        producer = Producer(**producer_config)
        try:
            consumer = Consumer(**consumer_config)
            partitions = [TopicPartition(topic, p) for p in sorted(meta.partitions)]
            consumer.assign(partitions)
            consumer.seek_to_end(*partitions)
            for tp in partitions:  # the seek is lazy: settle each position before the first send
                consumer.position(tp)
            with _Progress(reporting_interval, progress):
                for _ in range(num_records):
                    value = bytes(rng.choices(letters, k=record_size))
                    try:
                        begin = time.perf_counter()
                        producer.send(topic, value).result(timeout)
                        sent = time.perf_counter()
                        records: list = []
                        while not records:
                            left = timeout - (time.perf_counter() - begin)
                            if left <= 0:
                                raise failed(f"the record sent was not read within {timeout:g} s")
                            records = consumer.poll(left * 1000)
                        elapsed = (time.perf_counter() - begin) * 1000
                    except errors.KafkaError as exc:
                        cause = error_for(ctx, exc)
                        raise failed(str(cause), cause.exit_code) from exc
                    if len(records) != 1 or records[0].value != value:
                        first = records[0]
                        what = (f"{len(records)} records were read for one sent" if len(records) != 1 else
                                "the record read is not the one sent")
                        raise failed(f"{what} (first at {first.topic}-{first.partition} offset {first.offset})")
                    latencies.append(elapsed)
                    acked.append((sent - begin) * 1000)
                    window.add(1, record_size, elapsed)
            finished = True
        finally:
            # After a failure the record in flight is abandoned: waiting for it could take the
            # producer's whole delivery timeout, and the run has already failed.
            with contextlib.suppress(errors.KafkaError):
                producer.close(None if finished else 0)
            if consumer is not None:
                consumer.close()  # no group: nothing to commit or leave
    n = len(latencies)
    acked.sort()
    report = {
        "records": n,
        **latency_summary(latencies, 3),
        "ack_p50_ms": round(percentile(acked, 0.5), 3),
        "ack_p99_ms": round(percentile(acked, 0.99), 3),
    }
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit(report, fmt)
    else:
        print(f"{n} records end to end, {report['avg_latency_ms']} ms avg latency, "
              f"{report['p50_ms']} ms 50th, {report['p99_ms']} ms 99th, {report['p99_9_ms']} ms 99.9th, "
              f"{report['max_latency_ms']} ms max; acknowledged in {report['ack_p50_ms']} ms 50th, "
              f"{report['ack_p99_ms']} ms 99th.")
