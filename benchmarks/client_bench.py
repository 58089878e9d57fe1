"""Producer and consumer throughput of our client beside kafka-python and confluent-kafka.

    python -m benchmarks.client_bench [--short] [--broker tansu|ours|HOST:PORT] [--json]

Every client writes (and then reads) the same number of records of 100 B and
1 KB values, no key, no compression, against the same broker. Producers use
``linger.ms=5`` and ``batch.size=64 KiB``; each run ends when every record is
acknowledged (flush). Consumers read a topic filled beforehand from offset 0
until they have every record. Figures are records/s (and MB/s of values).

``--broker tansu`` starts the tansu binary (``$TANSU_BIN``, PATH or
``.cache/tansu/tansu``), ``ours`` starts ``python -m broker`` in a temporary
directory, ``HOST:PORT`` uses a running broker.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINGER_MS = 5
BATCH_SIZE = 64 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("broker exited during start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("broker did not start")


@contextmanager
def broker(kind: str):
    if ":" in kind:
        yield kind
        return
    tmp = tempfile.mkdtemp(prefix="client-bench-")
    if kind == "tansu":
        binary = next((c for c in (os.environ.get("TANSU_BIN"), shutil.which("tansu"),
                                   str(REPO / ".cache" / "tansu" / "tansu")) if c and os.access(c, os.X_OK)), None)
        if binary is None:
            sys.exit("tansu binary not found (set TANSU_BIN)")
        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        proc = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                 "--storage-engine", "memory://tansu/"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(port, proc)
        bootstrap = f"127.0.0.1:{port}"
    elif kind == "ours":
        import yaml

        cfg = Path(tmp) / "broker.yaml"
        cfg.write_text(yaml.safe_dump({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0",
                                       "log.dirs": str(Path(tmp) / "data"), "metrics.port": -1,
                                       "offsets.topic.replication.factor": 1}))
        proc = subprocess.Popen([sys.executable, "-m", "broker", "--config", str(cfg)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp)
        line = proc.stdout.readline().decode()
        if "listener=" not in line:
            proc.kill()
            sys.exit(f"our broker did not start: {line!r}")
        bootstrap = line.split("listener=")[1].split()[0]
    else:
        sys.exit(f"unknown broker {kind!r}")
    try:
        yield bootstrap
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def create_topic(bootstrap: str) -> str:
    from broker.client import Admin, NewTopic

    name = f"bench-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1)])
    return name


# -- producers ------------------------------------------------------------------------
def produce_ours(bootstrap, topic, value, n):
    from broker.client import Producer

    p = Producer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS, batch_size=BATCH_SIZE, acks=1)
    p.send(topic, value).result(30)  # connect and fetch metadata outside the timing
    start = time.perf_counter()
    send = p.send
    for _ in range(n):
        send(topic, value)
    p.flush()
    elapsed = time.perf_counter() - start
    p.close()
    return elapsed


def produce_kafka_python(bootstrap, topic, value, n):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS, batch_size=BATCH_SIZE, acks=1)
    p.send(topic, value).get(30)
    start = time.perf_counter()
    for _ in range(n):
        p.send(topic, value)
    p.flush()
    elapsed = time.perf_counter() - start
    p.close()
    return elapsed


def produce_confluent(bootstrap, topic, value, n):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS, "batch.size": BATCH_SIZE,
                  "acks": 1, "queue.buffering.max.messages": 1_000_000})
    p.produce(topic, value)
    p.flush(30)
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    p.flush(120)
    return time.perf_counter() - start


# -- consumers ------------------------------------------------------------------------
def consume_ours(bootstrap, topic, n):
    from broker.client import Consumer, TopicPartition

    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_poll_records=5000)
    c.assign([TopicPartition(topic, 0)])
    start = time.perf_counter()
    got = 0
    while got < n:
        got += len(c.poll(1000))
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def consume_kafka_python(bootstrap, topic, n):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                      max_poll_records=5000)
    c.assign([TopicPartition(topic, 0)])
    start = time.perf_counter()
    got = 0
    while got < n:
        for records in c.poll(1000).values():
            got += len(records)
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def consume_confluent(bootstrap, topic, n):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex[:6],
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    start = time.perf_counter()
    got = 0
    while got < n:
        got += sum(1 for m in c.consume(5000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


CLIENTS = {
    "ours": (produce_ours, consume_ours),
    "kafka-python": (produce_kafka_python, consume_kafka_python),
    "confluent-kafka": (produce_confluent, consume_confluent),
}


def run(bootstrap: str, short: bool) -> list[dict]:
    sizes = {100: 20_000 if short else 200_000, 1000: 10_000 if short else 50_000}
    results = []
    for size, n in sizes.items():
        value = b"x" * size
        for client, (produce, consume) in CLIENTS.items():
            topic = create_topic(bootstrap)
            elapsed = produce(bootstrap, topic, value, n)
            results.append({"client": client, "op": "produce", "size": size, "records": n,
                            "records_per_s": n / elapsed, "mb_per_s": n * size / elapsed / 1e6})
            elapsed = consume(bootstrap, topic, n)
            results.append({"client": client, "op": "consume", "size": size, "records": n,
                            "records_per_s": n / elapsed, "mb_per_s": n * size / elapsed / 1e6})
    return results


def table(results: list[dict]) -> str:
    lines = [f"{'op':8} {'size':>5} {'client':16} {'records/s':>11} {'MB/s':>7} {'vs kafka-python':>16}"]
    base = {(r["op"], r["size"]): r["records_per_s"] for r in results if r["client"] == "kafka-python"}
    for r in sorted(results, key=lambda r: (r["op"] != "produce", r["size"], r["client"])):
        ratio = r["records_per_s"] / base[(r["op"], r["size"])]
        lines.append(f"{r['op']:8} {r['size']:>5} {r['client']:16} {r['records_per_s']:>11,.0f} "
                     f"{r['mb_per_s']:>7.1f} {ratio:>15.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="fewer records (a quick check)")
    parser.add_argument("--broker", default="tansu", help="tansu, ours or HOST:PORT (default tansu)")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    args = parser.parse_args(argv)
    with broker(args.broker) as bootstrap:
        results = run(bootstrap, args.short)
    print(json.dumps(results, indent=1) if args.json else f"broker: {args.broker}\n" + table(results))


if __name__ == "__main__":
    main()
