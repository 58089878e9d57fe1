"""What reading a topic as a queue costs: librdkafka's ShareConsumer (share groups, KIP-932) against its classic
consumer in a consumer group, the same records from the same broker in the same run.

``python -m benchmarks.share_bench [--short] [--reps N] [--count N] [--json FILE]``

One broker (``python -m broker``, data in a temporary directory) and one topic of 4 partitions holding
``count`` records of 100 bytes, written once. Each repetition reads all of them, from the beginning, with a new
group of each kind in turn (A B A B):

* ``consumer``: one confluent-kafka ``Consumer`` (``auto.offset.reset=earliest``, auto commit every 5 s);
* ``share``: one confluent-kafka ``ShareConsumer`` (``share.auto.offset.reset=earliest`` set as a group config),
  implicit acknowledgement: each poll accepts the previous batch, so every record is also acknowledged, and the
  broker stores the group's progress (the metadata store) before it answers each acknowledgement.

Reported per kind, medians over the repetitions: records per second (from the first ``poll`` to the last record)
and the broker's CPU per 1,000 records (from /proc, every thread), and their ratios to the classic consumer: the
figures that carry over between machines. A share group does per record what a consumer group does per
partition (a lock, a state, an acknowledgement), so it costs more; this says how much.

``--short``: 20,000 records, one repetition (default: 200,000, 3 repetitions).
"""

from __future__ import annotations

import statistics
import sys
import time

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from benchmarks._load import create_topic
from benchmarks._procs import OurBroker
from benchmarks._runs import alternate, arguments, write_json

TOPIC = "queue"
PARTITIONS = 4
LIMIT_S = 300.0


def _fill(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 1000})
    value = b"x" * 100
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(LIMIT_S):
        raise RuntimeError("the records were not all written")


def _read(kind: str, bootstrap: str, group: str, count: int) -> float:
    """Seconds from the first poll until ``count`` records were read by one member of a new group."""
    if kind == "share":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    else:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + LIMIT_S
    try:
        while got < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind}: {got} of {count} records in {LIMIT_S} s")
            if kind == "share":
                got += sum(1 for m in consumer.poll(timeout=1.0) if m.error() is None)
            else:
                got += sum(1 for m in consumer.consume(num_messages=1000, timeout=1.0) if m.error() is None)
        return time.perf_counter() - start
    finally:
        if kind == "share":
            consumer.commit_sync()
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = arguments("benchmarks.share_bench", "20,000 records, one repetition")
    parser.add_argument("--count", type=int, default=None, help="records in the topic (default 200,000)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each reader (default 3)")
    args = parser.parse_args(argv)
    count = args.count or (20_000 if args.short else 200_000)
    reps = 1 if args.short else args.reps
    broker = OurBroker().start()
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        _fill(broker.bootstrap, count)
        groups = iter(range(10**6))

        def measure(kind: str, _case, _rep: int) -> tuple[float, float]:
            before = broker.stats.snapshot().cpu_s
            seconds = _read(kind, broker.bootstrap, f"{kind}-{next(groups)}", count)
            cpu = broker.stats.snapshot().cpu_s - before
            return count / seconds, cpu * 1000 / count * 1000  # records/s, broker CPU ms per 1,000 records

        runs = alternate({"consumer": None, "share": None}, reps, measure)
    finally:
        broker.stop()
    rate = {k: statistics.median(r for r, _c in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _r, c in v) for k, v in runs.items()}
    print(f"{count:,} records of 100 bytes, {PARTITIONS} partitions, one member, {reps} repetition(s), medians")
    print(f"{'reader':<10} {'records/s':>12} {'ratio':>7} {'broker CPU ms / 1k records':>28} {'ratio':>7}")
    for kind in ("consumer", "share"):
        print(f"{kind:<10} {rate[kind]:>12,.0f} {rate[kind] / rate['consumer']:>6.2f}x "
              f"{cpu[kind]:>28.2f} {cpu[kind] / cpu['consumer']:>6.2f}x")
    write_json(args.json, {"count": count, "reps": reps, "records_per_s": rate, "broker_cpu_ms_per_1k": cpu,
                           "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
