"""The load generator: confluent-kafka (librdkafka) runs in this process, the
broker in another.

The measurements, each against one bootstrap address and one existing topic:

* :func:`produce_throughput` sends ``count`` records (or stops adding after
  ``max_s``) as fast as librdkafka accepts them and flushes; throughput is the
  number of acknowledged records over the time from the first ``produce()`` to
  the end of ``flush()``. Delivery reports are requested for errors only, so
  Python does no per-record work beyond ``produce()``.
* :func:`produce_transactional_throughput` does the same from a transactional
  producer committing every ``per_txn`` records or every ``interval_s`` seconds
  (the commits are timed).
* :func:`consume_throughput` reads ``count`` records from offset 0 of the given
  partitions with ``assign()`` (no group, so no JoinGroup/SyncGroup is timed)
  and ``consume(num_messages=...)`` batches; time runs from ``assign()`` to the
  last record. (confluent-kafka insists on a ``group.id``; with ``assign()``
  and auto-commit off it is never joined.)
* :func:`produce_latency` sends at a fixed rate (records are scheduled at
  ``t0 + i / rate``; each loop iteration sends every record that is due and then
  sleeps until the next one is, while a second thread serves delivery reports
  the moment they arrive; neither spins)
  and takes each record's delivery-report latency from librdkafka
  (``Message.latency()``: from the ``produce()`` call to the delivery report).
  Because the sender never waits for acknowledgements, a slow broker shows up as
  growing latency, not as a silently lower rate; the achieved send rate is
  reported too. librdkafka's own statistics (``statistics.interval.ms``, one
  window a second) give the request round trip it measured to the partition's
  broker (``brokers.*.rtt``: from a request's send to its response, no linger
  or queueing): the median over the windows of their p50 and p99, the part of
  the latency the broker decides.
* :func:`end_to_end_latency` sends one record at a time, as Apache Kafka's
  EndToEndLatency tool does: ``produce()`` with linger 0, ``flush()`` until it
  is acknowledged, then ``poll()`` on a consumer assigned the partition from its
  end until the record arrives; each sample runs from the ``produce()`` to the
  record in hand, and a short pause follows. The consumer keeps librdkafka's
  default ``fetch.wait.max.ms`` (500): its fetch waits at the broker, and how soon
  the broker answers it once the record is there is most of the figure. It stops
  after ``count`` records or ``max_s`` seconds, and at the first record not
  acknowledged or not read within ``record_limit_s`` (counted as an error).
* :func:`produce_round_trips` times the broker alone: one Produce request
  (acks=all, one v2 batch of ``records`` records) at a time over a plain
  socket, sent at a fixed request rate, each timed from the send to the whole
  response. No client library's threads or linger sit in the figure.

Payloads are random ASCII letters (compressible the way text is, as Kafka's own
perf tool makes them), a pool of 64 distinct values drawn from a fixed seed.
"""

from __future__ import annotations

import json
import random
import socket
import statistics
import string
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

POOL = 64


def payloads(size: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    letters = string.ascii_letters.encode()
    return [bytes(rng.choices(letters, k=size)) for _ in range(POOL)]


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> int:
    """Create ``topic`` with AdminClient and wait until its leaders are known.

    Returns the partition count the broker reports. A broker without
    CreateTopics gets the topic auto-created by a Metadata request instead (with
    its own ``num.partitions``): the caller compares the returned count. Raises
    ``KafkaException`` when creation fails.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout_s, request_timeout=timeout_s)
    try:
        futures[topic].result(timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._UNSUPPORTED_FEATURE:
            raise
        Producer({"bootstrap.servers": bootstrap, "allow.auto.create.topics": True}).list_topics(
            topic, timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if md is not None and md.error is None and md.partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return len(md.partitions)
        time.sleep(0.05)
    raise KafkaException(f"topic {topic} has no leaders after {timeout_s}s")


def delete_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> None:
    """Delete ``topic`` with AdminClient (frees tansu's memory and our disk between cases)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=timeout_s, request_timeout=timeout_s)[topic].result(timeout_s)


@dataclass
class ProduceResult:
    records: int
    bytes: int
    elapsed_s: float
    errors: int = 0
    first_error: str = ""
    transactions: int = 0  # commits timed (transactional producers only)

    @property
    def records_s(self) -> float:
        return self.records / self.elapsed_s

    @property
    def mb_s(self) -> float:
        return self.bytes / self.elapsed_s / 1e6


def poll_until(producer, due: float, clock=time.perf_counter) -> None:
    """Serve ``producer``'s callbacks until ``clock()`` reaches ``due``, sleeping, not spinning.

    confluent-kafka's ``poll(timeout)`` truncates the timeout to whole
    milliseconds, so ``poll(0.0009)`` returns at once: a sender that polls for
    the time to its next record (under 1 ms at 1,000 records/s and above)
    would spin a whole CPU and leave the broker under test, on a small
    machine, one CPU fewer. Waits of a millisecond or more block in ``poll``
    (serving reports as they come), shorter ones sleep; once ``due`` is
    reached, ``poll(0)`` serves what arrived meanwhile.
    """
    while (wait := due - clock()) > 0:
        if wait >= 0.001:
            producer.poll(wait)
        else:
            time.sleep(wait)
    producer.poll(0)


def _producer(bootstrap: str, acks: str, compression: str, linger_ms: float, **extra) -> Producer:
    config = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "compression.type": compression,
        "linger.ms": linger_ms,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": False,
        **extra,
    }
    return Producer(config)


class _Errors:
    """A producer's ``on_delivery`` with reports for errors only: counts them, keeps the first."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""

    def __call__(self, err, _msg) -> None:
        if err is not None:
            if not self.count:
                self.first = str(err)
            self.count += 1


def _send(producer: Producer, topic: str, values: list[bytes], sent: int, end: int, stop_at: float) -> int:
    """Produce records ``sent`` .. ``end - 1`` as fast as librdkafka takes them; returns the new ``sent``.

    Python does nothing per record beyond ``produce()``: callbacks are served
    every 1,024 records (and whenever the queue is full), which is also when
    the time is checked: past ``stop_at`` no more are added.
    """
    produce, poll = producer.produce, producer.poll
    while sent < end:
        try:
            produce(topic, values[sent & (POOL - 1)])
        except BufferError:
            poll(0.005)
            continue
        sent += 1
        if not sent & 0x3FF:
            poll(0)
            if time.perf_counter() > stop_at:
                break
    return sent


def produce_throughput(bootstrap: str, topic: str, *, size: int, count: int, acks: str = "1",
                       compression: str = "none", linger_ms: float = 5, max_s: float = 60.0,
                       idempotence: bool = False, warmup: bool = False,
                       client: dict | None = None) -> ProduceResult:
    """librdkafka sends ``count`` records as fast as it takes them; ``warmup`` first delivers one untimed
    record (an idempotent producer's first needs its producer id: librdkafka takes up to 0.5 s for it).
    ``client``: more librdkafka properties (TLS settings, say)."""
    errors = _Errors()
    producer = _producer(bootstrap, acks, compression, linger_ms, **{
        "delivery.report.only.error": True, "on_delivery": errors, "enable.idempotence": idempotence,
        **(client or {})})
    producer.list_topics(topic, timeout=30)
    values = payloads(size)
    if warmup:
        producer.produce(topic, values[0])
        producer.flush(max_s)
    start = time.perf_counter()
    sent = _send(producer, topic, values, 0, count, start + max_s)
    left = producer.flush(max_s)
    elapsed = time.perf_counter() - start
    ok = sent - errors.count - left
    return ProduceResult(ok, ok * size, elapsed, errors.count + left, errors.first)


def produce_transactional_throughput(bootstrap: str, topic: str, *, size: int, count: int, per_txn: int = 1000,
                                     interval_s: float | None = None, linger_ms: float = 5,
                                     max_s: float = 60.0) -> ProduceResult:
    """As :func:`produce_throughput` with acks=all, from a librdkafka transactional producer that commits
    every ``per_txn`` records, or, with ``interval_s``, once a transaction has been open that long (the
    time is checked every 1,024 records, as in :func:`_send`); the time includes every commit, and
    ``transactions`` counts them. ``init_transactions`` and one committed warm-up transaction of one
    record are not timed."""
    errors = _Errors()
    producer = _producer(bootstrap, "all", "none", linger_ms, **{
        "delivery.report.only.error": True, "on_delivery": errors, "enable.idempotence": True,
        "transactional.id": f"bench-{topic}"})
    producer.list_topics(topic, timeout=30)
    producer.init_transactions(max_s)
    values = payloads(size)
    producer.begin_transaction()
    producer.produce(topic, values[0])
    producer.commit_transaction(max_s)
    sent = transactions = 0
    start = time.perf_counter()
    stop_at = start + max_s
    while sent < count and time.perf_counter() < stop_at:
        producer.begin_transaction()
        if interval_s is None:
            sent = _send(producer, topic, values, sent, min(count, sent + per_txn), stop_at)
        else:
            sent = _send(producer, topic, values, sent, count, min(stop_at, time.perf_counter() + interval_s))
        producer.commit_transaction(max_s)
        transactions += 1
    elapsed = time.perf_counter() - start
    ok = sent - errors.count
    return ProduceResult(ok, ok * size, elapsed, errors.count, errors.first, transactions=transactions)


@dataclass
class ConsumeResult:
    records: int
    bytes: int
    elapsed_s: float
    errors: int = 0

    @property
    def records_s(self) -> float:
        return self.records / self.elapsed_s

    @property
    def mb_s(self) -> float:
        return self.bytes / self.elapsed_s / 1e6


def consume_throughput(bootstrap: str, topic: str, partitions: int, count: int,
                       max_s: float = 60.0, isolation_level: str | None = None,
                       client: dict | None = None) -> ConsumeResult:
    """librdkafka reads ``count`` records from offset 0; ``isolation_level`` None keeps its default
    (read_committed); ``client``: more librdkafka properties."""
    consumer = Consumer({
        **(client or {}),
        **({"isolation.level": isolation_level} if isolation_level else {}),
        "bootstrap.servers": bootstrap,
        "group.id": "bench-unused",  # assign() only: no JoinGroup, no commits
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 100,
        "queued.max.messages.kbytes": 262144,
    })
    try:
        consumer.list_topics(topic, timeout=30)
        got = nbytes = errors = 0
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        stop_at = start + max_s
        while got < count and time.perf_counter() < stop_at:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None:
                    got += 1
                    nbytes += len(msg.value())
                else:
                    errors += 1
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return ConsumeResult(got, nbytes, elapsed, errors)


def produce_and_consume_row(broker, address: str, topic: str, *, size: int, count: int, client: dict,
                            label: str) -> dict:
    """librdkafka produces ``count`` records of ``size`` bytes (acks=1) to a new one-partition ``topic`` at
    ``address`` and reads them back; the row of records/s, MB/s and ``broker``'s CPU seconds per GB moved
    (``broker.stats``, ``broker.bootstrap`` creates the topic), printed under ``label``. Raises when a send
    failed or a record is missing."""
    create_topic(broker.bootstrap, topic, 1)
    before = broker.stats.snapshot()
    produced = produce_throughput(address, topic, size=size, count=count, acks="1", client=client)
    consumed = consume_throughput(address, topic, 1, count, client=client)
    after = broker.stats.snapshot()
    if produced.errors or consumed.records != count:
        raise RuntimeError(f"{label}: {produced.errors} failed sends ({produced.first_error}), "
                           f"{consumed.records} of {count} records read")
    moved_gb = (produced.bytes + consumed.bytes) / 1e9
    row = {"produce_rps": produced.records / produced.elapsed_s, "produce_mbs": produced.mb_s,
           "consume_rps": consumed.records / consumed.elapsed_s, "consume_mbs": consumed.mb_s,
           "cpu_s_per_gb": (after.cpu_s - before.cpu_s) / moved_gb}
    print(f"{label}: produce {row['produce_rps']:,.0f} records/s ({row['produce_mbs']:,.1f} MB/s), consume "
          f"{row['consume_rps']:,.0f} records/s ({row['consume_mbs']:,.1f} MB/s), broker CPU "
          f"{row['cpu_s_per_gb']:.2f} s/GB", flush=True)
    return row


@dataclass
class LatencyResult:
    rate: int
    sent: int
    send_rate: float  # achieved records/s of produce() calls
    latencies_s: list = field(repr=False, default_factory=list)
    errors: int = 0
    rtt_s: tuple[float, float] | None = None  # librdkafka's request round trip, (p50, p99); see the module docstring

    def percentile(self, q: float) -> float:
        if not self.latencies_s:
            return float("nan")
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def produce_latency(bootstrap: str, topic: str, *, rate: int, duration_s: float, size: int = 1024,
                    acks: str = "all", linger_ms: float = 5, warmup: int = 200) -> LatencyResult:
    samples: list[float] = []
    errors = [0]
    record = samples.append

    def on_delivery(err, msg) -> None:
        if err is None:
            record(msg.latency())
        else:
            errors[0] += 1

    rtt_windows: list[tuple[int, int]] = []  # (p50, p99) in microseconds, one per statistics window

    def on_stats(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            if broker["nodeid"] >= 0 and broker["rtt"]["cnt"]:
                rtt_windows.append((broker["rtt"]["p50"], broker["rtt"]["p99"]))

    producer = _producer(bootstrap, acks, "none", linger_ms, on_delivery=on_delivery,
                         **{"statistics.interval.ms": 1000, "stats_cb": on_stats})
    producer.list_topics(topic, timeout=30)
    value = payloads(size)[0]
    produce, clock = producer.produce, time.perf_counter
    for _ in range(warmup):
        produce(topic, value)
    producer.flush(30)
    samples.clear()
    errors[0] = 0
    rtt_windows.clear()

    count = int(rate * duration_s)
    interval = 1.0 / rate
    sent = 0
    # Delivery reports are served by a thread of their own, blocked in poll() until one arrives:
    # Message.latency() runs to the moment the report is served, so serving them any later (say at
    # the next record's due time) would add that wait to every sample. The sending thread sleeps
    # until each record is due; neither thread spins (see poll_until).
    serving = threading.Event()
    serving.set()
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            while serving.is_set():
                producer.poll(0.1)
        except BaseException as exc:  # a callback raised: the run is void, and says why below
            failed.append(exc)

    server = threading.Thread(target=serve, name="delivery-reports", daemon=True)
    server.start()
    start = clock()
    due = start
    try:
        while sent < count and not failed:
            now = clock()
            while due <= now and sent < count:
                try:
                    produce(topic, value)
                except BufferError:  # the queue is full: let the reports drain it
                    time.sleep(0.001)
                    break
                sent += 1
                due += interval
            wait = due - clock()
            if wait > 0:
                time.sleep(wait)
        send_elapsed = clock() - start
    finally:
        serving.clear()
        server.join()
    if failed:
        raise RuntimeError("serving delivery reports failed") from failed[0]
    producer.flush(60)
    windows = rtt_windows[1:] or rtt_windows  # the first window may still hold the warm-up's requests
    rtt = (statistics.median(w[0] for w in windows) / 1e6, statistics.median(w[1] for w in windows) / 1e6) \
        if windows else None
    return LatencyResult(rate, sent, sent / send_elapsed, samples, errors[0], rtt)


def end_to_end_latency(bootstrap: str, topic: str, *, count: int, max_s: float, size: int = 1024,
                       acks: str = "all", fetch_wait_ms: int = 500, pause_s: float = 0.002,
                       record_limit_s: float = 5.0) -> LatencyResult:
    """One record at a time through the broker, as Kafka's EndToEndLatency tool (see the module docstring)."""
    failed: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))

    producer = _producer(bootstrap, acks, "none", 0, on_delivery=on_delivery)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-e2e", "enable.auto.commit": False,
                         "fetch.wait.max.ms": fetch_wait_ms, "fetch.min.bytes": 1})
    clock = time.perf_counter
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        # Until the consumer reads a record sent after its assignment, its position may still be unsettled.
        deadline = time.monotonic() + 30
        while True:
            producer.produce(topic, b"warm-up", partition=0)
            producer.flush(10)
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the consumer read nothing within 30 s")
        while consumer.poll(0.5) is not None:  # drain the warm-up records
            pass
        failed.clear()
        value = payloads(size)[0]
        samples: list[float] = []
        errors = 0
        start = clock()
        sent = 0
        while sent < count and clock() - start < max_s:
            key = b"%d" % sent
            begin = clock()
            producer.produce(topic, value, key, partition=0)
            if producer.flush(record_limit_s) != 0 or failed:  # not acknowledged in time, or refused
                errors += 1
                break
            sent += 1
            msg = None
            while msg is None and clock() - begin < record_limit_s:
                msg = consumer.poll(max(0.001, record_limit_s - (clock() - begin)))
            if msg is None or msg.error() or msg.key() != key:
                errors += 1
                break
            samples.append(clock() - begin)
            time.sleep(pause_s)
        elapsed = clock() - start
    finally:
        consumer.close()
        producer.flush(10)
    return LatencyResult(0, sent, sent / elapsed if elapsed else 0.0, samples, errors)


def produce_round_trips(bootstrap: str, topic: str, *, rate: float, count: int, records: int = 5,
                        size: int = 1024, warmup: int = 20) -> LatencyResult:
    """Round trips of single Produce requests (v8, acks=all), one in flight; see the module docstring."""
    from broker.protocol import ApiKey, decode_response, encode_request
    from broker.records import BatchBuilder

    builder = BatchBuilder()
    for value in payloads(size)[:records]:
        builder.append(timestamp=int(time.time() * 1000), key=None, value=value)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": builder.build()}]}]}
    host, port = bootstrap.rsplit(":", 1)
    samples: list[float] = []
    errors = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def call(correlation_id: int) -> int:
            sock.sendall(encode_request(ApiKey.PRODUCE, 8, correlation_id, "round-trips", body))
            size_bytes = _recv_exact(sock, 4)
            _cid, response = decode_response(ApiKey.PRODUCE, 8, _recv_exact(sock, int.from_bytes(size_bytes, "big")))
            return response["responses"][0]["partition_responses"][0]["error_code"]

        for i in range(warmup):
            call(i)
        clock, interval = time.perf_counter, 1.0 / rate
        start = due = clock()
        for i in range(count):
            wait = due - clock()
            if wait > 0:
                time.sleep(wait)
            sent_at = clock()
            if call(warmup + i) == 0:
                samples.append(clock() - sent_at)
            else:
                errors += 1
            due += interval
        elapsed = clock() - start
    return LatencyResult(int(rate), count, count / elapsed, samples, errors)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def fill_keyed(bootstrap: str, topic: str, count: int, partitions: int, record_size: int,
               with_headers: bool = False) -> None:
    """Produce ``count`` keyed records (``key-<i>``) round-robin over ``partitions``, acks=1, as fast as
    librdkafka takes them; with ``with_headers`` each carries a header ``n`` = its index."""
    from confluent_kafka import Producer

    values = payloads(record_size)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1048576, "acks": "1",
                  "queue.buffering.max.messages": 1000000})
    for i in range(count):
        headers = [("n", str(i).encode())] if with_headers else None
        while True:
            try:
                p.produce(topic, values[i % len(values)], f"key-{i:012d}".encode(), partition=i % partitions,
                          headers=headers)
                break
            except BufferError:
                p.poll(0.01)
    p.flush()
