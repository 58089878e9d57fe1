"""Capture the `records` bytes that real Kafka clients put into Produce requests.

Usage::

    python -m tests.vectors.capture_records --tansu PATH_TO_TANSU_BINARY [--out DIR]

(from the repository's root, so that ``tests`` is importable).

Starts a tansu broker (a Kafka-compatible broker, memory storage) on an
ephemeral 127.0.0.1 port, puts a small TCP proxy in front of it
(``tests/tcp_gate.py``; tansu advertises the proxy's address, so every client
connection goes through it), and has each client produce a fixed set of
records. A recorder parses the client-to-broker stream just enough to pull
out the ``records`` field of every Produce request; each scenario's records
are written to ``DIR/<scenario>.bin`` and described in ``DIR/vectors.json``
together with the records the client was asked to send, so the tests can
check both.

Scenarios: confluent-kafka (librdkafka, RecordBatch v2) with every codec, and
kafka-python with ``api_version=(0, 9)`` (message format v0) and
``(0, 10)`` (v1). This is a developer tool, run by hand; the tests only read
its output.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.tcp_gate import TcpGate, frames
from tests.zookeeper import free_port

TOPIC = "vectors"
BASE_TS = 1_700_000_000_000

# (key, value, headers, timestamp offset from BASE_TS)
V2_RECORDS = [
    (b"key-0", b"value-0", [("h1", b"v1")], 0),
    (None, b"value-1" * 10, [("h-null", None), ("h2", b"")], 5),
    (b"", None, [], -3),
    (b"k3", bytes(range(256)) * 4, [], 100),
]
LEGACY_RECORDS = [
    (b"key-0", b"value-0", 0),
    (None, b"value-1" * 10, 5),
    (b"", None, -3),
    (b"k3", bytes(range(256)) * 4, 100),
]


# -- just enough of the Produce request to find its records -------------------
class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        s = struct.Struct(">" + fmt)
        value = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return value[0] if len(value) == 1 else value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def skip(self, n: int) -> None:
        self.pos += n

    def string(self) -> None:
        n = self.take("h")
        self.skip(max(n, 0))

    def compact(self) -> bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        value = self.data[self.pos : self.pos + n]
        self.pos += n
        return value

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.skip(self.uvarint())


def produce_records(frame: bytes) -> list[bytes]:
    """The records fields of a Produce request frame (without the size prefix)."""
    r = _Reader(frame)
    api_key, version = r.take("hh")
    if api_key != 0:
        return []
    r.take("i")  # correlation_id
    r.string()  # client_id
    flexible = version >= 9
    if flexible:
        r.tagged_fields()
    if version >= 3:
        r.compact() if flexible else r.string()  # transactional_id
    r.take("hi")  # acks, timeout_ms
    out = []
    topics = r.uvarint() - 1 if flexible else r.take("i")
    for _ in range(topics):
        r.compact() if flexible else r.string()
        partitions = r.uvarint() - 1 if flexible else r.take("i")
        for _ in range(partitions):
            r.take("i")
            if flexible:
                records = r.compact()
                r.tagged_fields()
            else:
                n = r.take("i")
                records = r.data[r.pos : r.pos + max(n, 0)] if n >= 0 else None
                r.skip(max(n, 0))
            if records:
                out.append(bytes(records))
        if flexible:
            r.tagged_fields()
    return out


class Recorder:
    """The records of every Produce request the clients send, parsed from each connection's stream."""

    def __init__(self) -> None:
        self.captured: list[tuple[int, bytes]] = []  # (produce version, records)
        self.lock = threading.Lock()

    def take(self) -> list[tuple[int, bytes]]:
        with self.lock:
            out, self.captured = self.captured, []
        return out

    def tap(self):
        """The ``TcpGate`` tap for one client connection: its requests, frame by frame."""
        return frames(self._request), None

    def _request(self, frame: bytes) -> None:
        if frame[:2] == b"\x00\x00":  # Produce
            version = struct.unpack_from(">h", frame, 2)[0]
            with self.lock:
                self.captured += [(version, rec) for rec in produce_records(frame)]


# -- clients ------------------------------------------------------------------
def confluent_scenario(bootstrap: str, codec: str, extra: dict | None = None) -> None:
    import confluent_kafka

    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 200,
            "enable.idempotence": False, **(extra or {})}
    producer = confluent_kafka.Producer(conf)
    for key, value, headers, dt in V2_RECORDS:
        producer.produce(TOPIC, key=key, value=value, headers=headers, timestamp=BASE_TS + dt, partition=0)
    producer.flush(15)


def kafka_python_scenario(bootstrap: str, codec: str, api_version: tuple[int, int]) -> None:
    import kafka

    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, api_version=api_version, linger_ms=200,
        compression_type=None if codec == "none" else codec, retries=0, request_timeout_ms=5000,
    )
    for key, value, dt in LEGACY_RECORDS:
        kwargs = {"timestamp_ms": BASE_TS + dt} if api_version >= (0, 10) else {}
        producer.send(TOPIC, key=key, value=value, partition=0, **kwargs)
    try:
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=2)


def _hexish(b: bytes | None):
    return None if b is None else b.hex()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tansu", required=True)
    parser.add_argument("--out", default=str(Path(__file__).parent / "records"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    broker_port = free_port()
    recorder = Recorder()
    proxy = TcpGate(broker_port, tap=recorder.tap)
    tansu = subprocess.Popen(
        [args.tansu, "broker", "--listener-url", f"tcp://127.0.0.1:{broker_port}",
         "--advertised-listener-url", f"tcp://127.0.0.1:{proxy.port}", "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    manifest = {"topic": TOPIC, "base_timestamp": BASE_TS, "vectors": []}
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", broker_port)).close()
                break
            except OSError:
                time.sleep(0.1)
        bootstrap = f"127.0.0.1:{proxy.port}"
        import confluent_kafka.admin

        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, 1, 1)]).values():
            try:
                f.result(10)
            except Exception as exc:  # already exists is fine
                print("create_topics:", exc, file=sys.stderr)

        scenarios = []
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            scenarios.append((f"librdkafka_v2_{codec}", "confluent-kafka", 2, codec,
                              lambda c=codec: confluent_scenario(bootstrap, c)))
        for api, magic in (((0, 9), 0), ((0, 10), 1)):
            for codec in ("none", "gzip", "snappy", "lz4"):
                scenarios.append((f"kafka_python_v{magic}_{codec}", "kafka-python", magic, codec,
                                  lambda c=codec, a=api: kafka_python_scenario(bootstrap, c, a)))
        for name, client, magic, codec, run in scenarios:
            recorder.take()
            try:
                run()
            except Exception as exc:
                print(f"{name}: client error {exc!r}", file=sys.stderr)
            time.sleep(0.3)
            captured = recorder.take()
            if not captured:
                print(f"{name}: nothing captured", file=sys.stderr)
                continue
            versions = sorted({v for v, _ in captured})
            # A retry resends the same bytes: keep the first request's records only.
            data = captured[0][1]
            (out / f"{name}.bin").write_bytes(data)
            expected = (
                [{"key": _hexish(k), "value": _hexish(v), "headers": [[hk, _hexish(hv)] for hk, hv in h],
                  "timestamp": BASE_TS + dt} for k, v, h, dt in V2_RECORDS]
                if magic == 2 else
                [{"key": _hexish(k), "value": _hexish(v), "headers": [],
                  "timestamp": BASE_TS + dt if magic == 1 else -1} for k, v, dt in LEGACY_RECORDS]
            )
            manifest["vectors"].append({
                "file": f"{name}.bin", "client": client, "client_version": _client_version(client),
                "produce_versions": versions, "magic": magic, "codec": codec, "records": expected,
            })
            print(f"{name}: {len(data)} bytes, produce v{versions}")
    finally:
        tansu.terminate()
        tansu.wait(10)
        proxy.close()
    (out / "vectors.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


def _client_version(client: str) -> str:
    if client == "confluent-kafka":
        import confluent_kafka

        return f"confluent-kafka {confluent_kafka.version()[0]}, librdkafka {confluent_kafka.libversion()[0]}"
    import kafka

    return f"kafka-python {kafka.__version__}"


if __name__ == "__main__":
    sys.exit(main())
