"""The mirror's throughput and replication latency, against our client copying
the same records with no mirror logic, in the same run.

    python -m benchmarks.mirror_bench [--short] [--reps N] [--json FILE]

Two of our brokers (source and target) run as child processes. The source
topic (6 partitions) is filled once with 1 KB records (16-byte keys, one
header, CreateTime timestamps) by confluent-kafka. Then, A B A B (median of
``--reps``), each copier copies the whole topic into a new target topic, in a
process of its own:

* **mirror**: ``python -m mirror`` with one flow (its group, provenance header,
  one Produce request at a time per partition, topic sync);
* **baseline**: our client alone (``AsyncConsumer`` reading every partition
  from offset 0, ``AsyncProducer.send`` of each record to the same partition
  with its key, value, headers and timestamp; ``linger.ms`` 5, ``batch.size``
  512 KiB like the mirror's batches), no group, nothing else.

Throughput is measured the same way for both, from outside: the target's end
offsets are polled every 50 ms; the rate is the records copied between the
first poll that sees any and the poll that sees all, over that time (start-up
and group joining are not timed).

Latency: a fresh source topic gets 1 KB records at a steady 10,000 records/s
(confluent-kafka, paced) for ``--latency-s`` seconds while each copier runs;
the target topic is created beforehand with ``message.timestamp.type =
LogAppendTime``, so each copy's timestamp is the target's append time, and the
record's value starts with the source timestamp. Latency = target append time
minus source timestamp (milliseconds), p50 and p99 over every record.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from benchmarks._load import create_topic, fill_keyed, payloads, poll_until
from benchmarks._procs import OurBroker
from benchmarks._runs import alternate, arguments, medians, wait_for, write_json

PARTITIONS = 6
RECORD = 1024


def _target_total(admin, topic: str) -> int:
    from broker.client import TopicPartition

    try:
        res = admin.list_offsets({TopicPartition(topic, p): -1 for p in range(PARTITIONS)})
    except Exception:
        return 0
    return sum(off for off, _ in res.values())


def _timed(target: str, topic: str, count: int, limit_s: float) -> tuple[float, int]:
    """Poll the target until ``count`` records are there; (seconds, records) between first and last sight."""
    from broker.client import Admin

    with Admin(bootstrap_servers=target) as admin:
        first = None

        def copied() -> tuple[float, int] | None:
            nonlocal first
            n = _target_total(admin, topic)
            now = time.monotonic()
            if n and first is None:
                first = (now, n)
            return (now - first[0], n - first[1]) if n >= count else None

        return wait_for(copied, f"the copy of {topic}", limit_s, 0.05)


def _start_mirror(workdir: Path, source: str, target: str, topic: str, rename: str, tag: str) -> subprocess.Popen:
    cfg = {"clusters": {f"s{tag}": {"bootstrap.servers": source}, f"t{tag}": {"bootstrap.servers": target}},
           "flows": [{"source": f"s{tag}", "target": f"t{tag}", "topics": topic, "topic.rename": rename,
                      "groups": "none"}],
           "metrics.port": -1}
    path = workdir / f"mirror-{tag}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.Popen([sys.executable, "-m", "mirror", "--config", str(path), "--log-level", "WARNING"],
                            stdout=subprocess.DEVNULL, stderr=open(workdir / f"mirror-{tag}.log", "wb"))


def _start_baseline(source: str, target: str, topic: str, target_topic: str, count: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "benchmarks.mirror_bench", "--copy", source, target, topic,
                             target_topic, str(count)])


async def _copy(source: str, target: str, topic: str, target_topic: str, count: int) -> None:
    """The baseline copier: consume then produce with our client, nothing else."""
    from broker.client import AsyncConsumer, AsyncProducer, TopicPartition

    consumer = AsyncConsumer(bootstrap_servers=source, auto_offset_reset="earliest", enable_auto_commit=False,
                             max_partition_fetch_bytes=4 * 1024 * 1024)
    producer = AsyncProducer(bootstrap_servers=target, linger_ms=5, batch_size=512 * 1024, acks=-1)
    await consumer.start()
    await producer.start()
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    done = 0
    while done < count:
        for r in await consumer.poll(200, max_records=20000):
            await producer.send(target_topic, r.value, r.key, partition=r.partition, timestamp_ms=r.timestamp,
                                headers=r.headers)
            done += 1
    await producer.flush()
    await producer.close()
    await consumer.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def throughput(src: OurBroker, dst: OurBroker, workdir: Path, count: int, reps: int) -> dict:
    topic = f"mb-{uuid.uuid4().hex[:8]}"
    create_topic(src.bootstrap, topic, PARTITIONS)
    t0 = time.monotonic()
    fill_keyed(src.bootstrap, topic, count, PARTITIONS, RECORD, with_headers=True)
    print(f"filled {topic}: {count} records of {RECORD} B in {time.monotonic() - t0:.1f} s", flush=True)

    def measure(kind: str, _case: None, rep: int) -> float:
        tag = f"{rep}{kind[0]}"
        target_topic = f"r{tag}.{topic}"
        if kind == "mirror":
            proc = _start_mirror(workdir, src.bootstrap, dst.bootstrap, topic, f"r{tag}.{{topic}}", tag)
        else:
            create_topic(dst.bootstrap, target_topic, PARTITIONS)
            proc = _start_baseline(src.bootstrap, dst.bootstrap, topic, target_topic, count)
        try:
            seconds, records = _timed(dst.bootstrap, target_topic, count, 600)
        finally:
            _stop(proc)
        rate = records / seconds
        print(f"  rep {rep + 1} {kind:8s} {rate:10,.0f} records/s  {rate * RECORD / 1e6:7.1f} MB/s", flush=True)
        return rate

    rates = alternate({"mirror": None, "baseline": None}, reps, measure)
    out: dict = medians(rates)
    out["ratio"] = out["mirror"] / out["baseline"]
    out["runs"] = rates
    return out


def _paced(bootstrap: str, topic: str, rate: int, seconds: float) -> int:
    from confluent_kafka import Producer

    pad = payloads(RECORD - 8)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "1"})
    total = int(rate * seconds)
    t0 = time.monotonic()
    for i in range(total):
        poll_until(p, t0 + i / rate, time.monotonic)
        now_ms = int(time.time() * 1000)
        p.produce(topic, struct.pack(">q", now_ms) + pad[i % len(pad)], partition=i % PARTITIONS, timestamp=now_ms)
    p.flush()
    return total


def _latencies(bootstrap: str, topic: str, count: int) -> list[int]:
    from broker.client import Consumer, TopicPartition

    out = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                  fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 120
        while len(out) < count and time.monotonic() < deadline:
            for r in c.poll(500):
                out.append(r.timestamp - struct.unpack(">q", r.value[:8])[0])
    return out


def latency(src: OurBroker, dst: OurBroker, workdir: Path, rate: int, seconds: float) -> dict:
    from broker.client import Admin, NewTopic

    def measure(kind: str, _case: None, _rep: int) -> dict:
        tag = f"lat{kind[0]}"
        topic = f"ml-{uuid.uuid4().hex[:8]}"
        target_topic = f"r{tag}.{topic}"
        create_topic(src.bootstrap, topic, PARTITIONS)
        with Admin(bootstrap_servers=dst.bootstrap) as admin:
            admin.create_topics([NewTopic(target_topic, PARTITIONS, 1, {"message.timestamp.type": "LogAppendTime"})])
        count = int(rate * seconds)
        if kind == "mirror":
            proc = _start_mirror(workdir, src.bootstrap, dst.bootstrap, topic, f"r{tag}.{{topic}}", tag)
            time.sleep(3)  # group joined, partitions taken: measure the steady state only
        else:
            proc = _start_baseline(src.bootstrap, dst.bootstrap, topic, target_topic, count)
            time.sleep(1)
        try:
            _paced(src.bootstrap, topic, rate, seconds)
            _timed(dst.bootstrap, target_topic, count, 120)
        finally:
            _stop(proc)
        lat = sorted(_latencies(dst.bootstrap, target_topic, count))
        out = {"p50_ms": lat[len(lat) // 2], "p99_ms": lat[int(len(lat) * 0.99)], "records": len(lat)}
        print(f"  {kind:8s} at {rate}/s: p50 {out['p50_ms']} ms  p99 {out['p99_ms']} ms", flush=True)
        return out

    return {kind: runs[0] for kind, runs in alternate({"mirror": None, "baseline": None}, 1, measure).items()}


def main(argv: list[str] | None = None) -> int:
    parser = arguments("mirror_bench", "fewer records, one repetition")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--records", type=int)
    parser.add_argument("--latency-s", type=float)
    parser.add_argument("--copy", nargs=5, metavar=("SOURCE", "TARGET", "TOPIC", "TARGET_TOPIC", "COUNT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.copy:
        s, t, topic, target_topic, count = args.copy
        asyncio.run(_copy(s, t, topic, target_topic, int(count)))
        return 0
    reps = args.reps or (1 if args.short else 3)
    count = args.records or (60_000 if args.short else 300_000)
    seconds = args.latency_s or (5 if args.short else 20)
    workdir = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    src, dst = OurBroker().start(), OurBroker().start()
    try:
        print(f"throughput: {count} records of {RECORD} B, {PARTITIONS} partitions, {reps} rep(s), A B A B",
              flush=True)
        result = {"throughput": throughput(src, dst, workdir, count, reps)}
        r = result["throughput"]
        print(f"median: mirror {r['mirror']:,.0f} records/s, baseline {r['baseline']:,.0f} records/s, "
              f"mirror / baseline {r['ratio']:.2f}", flush=True)
        print(f"latency: 10,000 records/s for {seconds:.0f} s", flush=True)
        result["latency"] = latency(src, dst, workdir, 10_000, seconds)
    finally:
        src.stop()
        dst.stop()
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
