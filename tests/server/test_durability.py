"""Durability across restarts: graceful SIGTERM, restart during a produce stream, kill -9
with and without a torn tail. Every acknowledged record must come back."""

from __future__ import annotations

import threading
import time

import pytest

from broker.protocol import ApiKey
from broker.records import iter_records

from .test_api import fetch, produce
from .wire import Wire, make_batch

POLL_LIMIT_S = 60


def read_all(broker, topic, partition=0) -> list[bytes]:
    values = []
    offset = 0
    with Wire(broker.bootstrap) as w:
        while True:
            p = fetch(w, topic, offset, partition=partition)
            assert p["error_code"] == 0
            entries = [e for e in iter_records(p["records"]) if e.offset >= offset]
            if not entries:
                return values
            values += [e.value for e in entries]
            offset = entries[-1].offset + 1


def test_sigterm_is_graceful_and_restart_keeps_everything(broker):
    with Wire(broker.bootstrap) as w:
        for i in range(20):
            assert produce(w, "keep", make_batch([b"v%d" % i]))["error_code"] == 0
        cluster_id = w.call(ApiKey.METADATA, 9, {"topics": None})["cluster_id"]
    assert broker.stop() == 0
    data = broker.data_dir
    assert (data / ".kafka_cleanshutdown").exists()
    assert "keep 0 20" in (data / "recovery-point-offset-checkpoint").read_text()
    assert (data / "meta.properties").read_text().count(cluster_id) == 1
    assert (data / "keep-0" / "00000000000000000000.log").exists()
    broker.start()
    assert read_all(broker, "keep") == [b"v%d" % i for i in range(20)]
    with Wire(broker.bootstrap) as w:
        assert w.call(ApiKey.METADATA, 9, {"topics": None})["cluster_id"] == cluster_id
        assert produce(w, "keep", make_batch([b"after"]))["base_offset"] == 20


def test_restart_during_a_produce_stream_keeps_every_acked_record(broker):
    ck = pytest.importorskip("confluent_kafka")
    acked: list[bytes] = []
    stop = threading.Event()
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                            "message.timeout.ms": 60_000, "retry.backoff.ms": 50,
                            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value())

    def run():
        i = 0
        while not stop.is_set():
            try:
                producer.produce("stream", b"%08d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)
        producer.flush(POLL_LIMIT_S)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + POLL_LIMIT_S
    while len(acked) < 2000 and time.monotonic() < deadline:
        time.sleep(0.01)
    broker.restart()
    before = len(acked)
    while len(acked) < before + 2000 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join()
    assert len(acked) > before  # the producer carried on after the restart
    stored = set(read_all(broker, "stream"))
    missing = [v for v in acked if v not in stored]
    assert missing == []


def test_kill_9_then_restart_recovers_and_cuts_a_torn_tail(broker_factory):
    b = broker_factory(log_flush_interval_messages=1)
    with Wire(b.bootstrap) as w:
        for i in range(50):
            assert produce(w, "crash", make_batch([b"r%d" % i, b"s%d" % i]))["error_code"] == 0
    b.kill()
    segment = b.data_dir / "crash-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    with open(segment, "ab") as fh:  # a torn write: half a batch after the last good one
        fh.write(make_batch([b"torn" * 50])[:70])
    assert not (b.data_dir / ".kafka_cleanshutdown").exists()
    b.start()
    assert segment.stat().st_size == size
    values = read_all(b, "crash")
    assert values == [v for i in range(50) for v in (b"r%d" % i, b"s%d" % i)]
    with Wire(b.bootstrap) as w:
        assert produce(w, "crash", make_batch([b"next"]))["base_offset"] == 100
