"""``log.cleaner.threads`` changed on a running broker (KIP-226, Kafka's ``LogCleaner.reconfigure``).

A real broker process: ``kafkactl configs set broker`` changes it, DescribeConfigs
reports the dynamic value, ``kafkapy_log_cleaner_threads`` on ``/metrics`` counts
the cleaner threads actually running, and the resized cleaner compacts several
topics written with confluent-kafka. Kafka's bounds (at least 1, within half and
double the current value) are one-line errors that change nothing.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.kafkactl.conftest import Ctl, one_line_error
from tests.server.test_metrics import scrape, value

TOPICS = ("compacted-a", "compacted-b", "compacted-c")
KEYS, ROUNDS = 10, 60
WAIT_S = 60  # a guard against a hang, not a performance figure


def wait_for(check, what: str, explain=lambda: ""):
    deadline = time.monotonic() + WAIT_S
    while (found := check()) is None or found is False:
        assert time.monotonic() < deadline, f"timed out waiting for {what}{explain()}"
        time.sleep(0.2)
    return found


def segments(broker, topic: str) -> str:
    """The partition's segment files with their sizes, and the cleaner threads' count: what a timeout shows."""
    files = sorted((broker.data_dir / f"{topic}-0").glob("*.log*"))
    return (f"\nsegments of {topic}-0: " + ", ".join(f"{f.name}={f.stat().st_size}" for f in files)
            + f"\ncleaner threads: {cleaner_threads(broker)}\nbroker log:\n{broker.stderr_tail()}")


def cleaner_threads(broker) -> float:
    return value(scrape(broker), "kafkapy_log_cleaner_threads")


def setting(ctl: Ctl) -> dict:
    (row,) = ctl.json("configs", "get", "broker", "0", "--key", "log.cleaner.threads")
    return row


def read_back(bootstrap: str, topic: str, end: int) -> tuple[dict[bytes, bytes], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    latest: dict[bytes, bytes] = {}
    offsets: list[int] = []
    deadline = time.monotonic() + WAIT_S
    while (not offsets or offsets[-1] < end - 1) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            latest[msg.key()] = msg.value()
            offsets.append(msg.offset())
    consumer.close()
    assert offsets and offsets[-1] == end - 1, f"{topic}: read up to {offsets[-1:]} of {end}"
    return latest, len(offsets)


def test_log_cleaner_threads_change_live(broker_factory):
    broker = broker_factory({"log.cleaner.backoff.ms": 100})
    ctl = Ctl(broker.bootstrap)
    assert setting(ctl)["value"] == "1" and setting(ctl)["source"] == "DEFAULT_CONFIG"
    assert cleaner_threads(broker) == 1

    res = ctl("configs", "set", "broker", "0", "log.cleaner.threads=2")
    assert res.returncode == 0, res.stderr
    row = setting(ctl)
    assert (row["value"], row["source"], row["read_only"]) == ("2", "DYNAMIC_BROKER_CONFIG", False)
    wait_for(lambda: cleaner_threads(broker) == 2, "a second cleaner thread")

    # Kafka's bounds, against this broker's current 2: one line each, nothing changed
    assert "cannot be increased to more than double the current value 2" in one_line_error(
        ctl("configs", "set", "broker", "0", "log.cleaner.threads=5"), 2)
    assert "should be at least 1" in one_line_error(ctl("configs", "set", "broker", "0", "log.cleaner.threads=0"), 2)
    assert setting(ctl)["value"] == "2" and cleaner_threads(broker) == 2

    # the two threads compact several topics: every key's last value stays, the overwritten ones go
    for topic in TOPICS:
        res = ctl("topics", "create", topic, "--config", "cleanup.policy=compact", "--config", "segment.bytes=1024",
                  "--config", "min.cleanable.dirty.ratio=0.01")
        assert res.returncode == 0, res.stderr
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    for r in range(ROUNDS):
        for topic in TOPICS:
            for k in range(KEYS):
                producer.produce(topic, key=b"k%d" % k, value=b"round %d of key %d" % (r, k))
        producer.flush(WAIT_S)  # one batch per topic and round: many segments
    assert len(producer) == 0
    end = ROUNDS * KEYS
    # what was produced, not the log's size now: the cleaner may already have been at work meanwhile
    written = {t: value(scrape(broker), "kafkapy_bytes_in_total", topic=t) for t in TOPICS}
    for topic in TOPICS:
        wait_for(lambda: value(scrape(broker), "kafkapy_log_size_bytes", topic=topic, partition="0")
                 < written[topic] / 3, f"{topic} to be compacted ({written[topic]:.0f} bytes written)",
                 lambda: segments(broker, topic))
        latest, records = read_back(broker.bootstrap, topic, end)
        assert latest == {b"k%d" % k: b"round %d of key %d" % (ROUNDS - 1, k) for k in range(KEYS)}
        assert records < end / 3

    res = ctl("configs", "set", "broker", "0", "--delete", "log.cleaner.threads")
    assert res.returncode == 0, res.stderr
    assert setting(ctl)["value"] == "1"
    wait_for(lambda: cleaner_threads(broker) == 1, "the surplus cleaner thread to end")
    assert "Traceback" not in broker.stderr_text()
