"""``kafkactl produce`` and ``kafkactl consume`` end to end against a broker process;
records written by the CLI are checked with confluent-kafka, and the other way round."""

from __future__ import annotations

import base64
import signal
import subprocess
import sys

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer

from tests.kafkactl.conftest import Ctl, one_line_error


@pytest.fixture
def topic(ctl: Ctl) -> str:
    res = ctl("topics", "create", "events", "--partitions", "3")
    assert res.returncode == 0, res.stderr
    return "events"


def test_produce_keys_headers_and_consume_json(ctl: Ctl, topic: str, broker) -> None:
    lines = "".join(f"user-{i}:payload {i}\n" for i in range(30))
    delivered = ctl.lines("produce", topic, "--key-separator", ":", "--header", "source=cli", "--header", "v=2",
                          input=lines)
    assert len(delivered) == 30 and all(d["topic"] == topic for d in delivered)
    assert len({d["partition"] for d in delivered}) > 1  # keys spread over partitions

    records = ctl.lines("consume", topic, "--from-beginning", "--max-messages", "30")
    assert len(records) == 30
    by_key = {r["key"]: r for r in records}
    assert set(by_key) == {f"user-{i}" for i in range(30)}
    r7 = by_key["user-7"]
    assert r7["value"] == "payload 7"
    assert r7["headers"] == [{"key": "source", "value": "cli"}, {"key": "v", "value": "2"}]
    assert r7["timestamp_type"] == "CreateTime" and r7["timestamp"] > 0
    where = {(d["partition"], d["offset"]) for d in delivered}
    assert {(r["partition"], r["offset"]) for r in records} == where

    # confluent-kafka reads what the CLI wrote, partitioned the same way (murmur2)
    ck = CKProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    ck.produce(topic, b"from librdkafka", key=b"user-7")
    ck.flush(30)
    again = ctl.lines("consume", topic, "--partition", str(r7["partition"]), "--offset", "-1", "--max-messages", "1")
    assert again[0]["key"] == "user-7" and again[0]["value"] == "from librdkafka"


def test_binary_values_are_base64_in_json(ctl: Ctl, topic: str) -> None:
    raw = b"\xff\xfe\x00binary"
    res = ctl("produce", topic, "--partition", "2", "--key-separator", "|", input=b"k\x80|" + raw + b"\n")
    assert res.returncode == 0, res.stderr
    [rec] = ctl.lines("consume", topic, "--partition", "2", "--from-beginning", "--max-messages", "1")
    assert rec["partition"] == 2 and rec["offset"] == 0
    assert rec["value_encoding"] == "base64" and base64.b64decode(rec["value"]) == raw
    assert rec["key_encoding"] == "base64" and base64.b64decode(rec["key"]) == b"k\x80"
    # the table form never writes raw binary: non-UTF-8 bytes are shown as base64
    res = ctl("consume", topic, "--partition", "2", "--from-beginning", "--max-messages", "1", "--print-key",
              input=b"")
    assert res.stdout == b"base64:" + base64.b64encode(b"k\x80") + b"\tbase64:" + base64.b64encode(raw) + b"\n"
    ctl("produce", topic, "--partition", "2", input="caf\u00e9 \u2615\n".encode())
    res = ctl("consume", topic, "--partition", "2", "--offset", "1", "--max-messages", "1", input=b"")
    assert res.stdout.decode("utf-8") == "caf\u00e9 \u2615\n"  # UTF-8 text prints as text


def test_produce_from_file_with_compression_read_by_confluent(ctl: Ctl, topic: str, broker, tmp_path) -> None:
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"line {i}\r\n" for i in range(10)))
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        res = ctl("produce", topic, "--file", str(data), "--partition", "1", "--compression", codec, "--acks", "1")
        assert res.returncode == 0, res.stderr
        assert "produced 10 record(s) to events (partition 1)" in res.stderr
    consumer = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    for _ in range(200):  # a guard, not a timing assertion
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(msg.value())
        if len(values) == 40:
            break
    consumer.close()
    assert values == [f"line {i}".encode() for i in range(10)] * 4


def test_consume_text_format_and_positions(ctl: Ctl, topic: str) -> None:
    ctl("produce", topic, "--partition", "0", "--key-separator", "=", "--header", "h=1",
        input="".join(f"k{i}=v{i}\n" for i in range(5)))
    res = ctl("consume", topic, "--partition", "0", "--offset", "3", "--max-messages", "2", "--print-key",
              "--print-offset", "--print-headers", "--print-timestamp")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2
    ts, part, off, headers, key, value = lines[0].split("\t")
    assert ts.startswith("CreateTime:") and part == "Partition:0" and off == "Offset:3"
    assert (headers, key, value) == ("h:1", "k3", "v3")
    assert res.stderr.strip() == "Processed a total of 2 messages"

    res = ctl("consume", topic, "--partition", "0", "--offset", "earliest", "--max-messages", "5", "--separator", "|",
              "--print-key")
    assert res.stdout.splitlines() == [f"k{i}|v{i}" for i in range(5)]
    res = ctl("consume", topic, "--partition", "0", "--offset", "-2", "--timeout", "1")
    assert res.stdout.splitlines() == ["v3", "v4"]
    # --timeout with nothing new ends cleanly
    res = ctl("consume", topic, "--timeout", "0.5")
    assert res.returncode == 0 and res.stdout == "" and "total of 0 messages" in res.stderr


def test_consume_with_group_commits(ctl: Ctl, topic: str) -> None:
    ctl("produce", topic, input="".join(f"m{i}\n" for i in range(12)))
    first = ctl.lines("consume", topic, "--group", "readers", "--from-beginning", "--max-messages", "12")
    assert sorted(r["value"] for r in first) == sorted(f"m{i}" for i in range(12))
    [group] = ctl.json("groups", "describe", "readers")
    assert group["total_lag"] == 0
    assert sum(o["current_offset"] for o in group["offsets"]) == 12
    ctl("produce", topic, input="late\n")
    rest = ctl.lines("consume", topic, "--group", "readers", "--timeout", "1")
    assert [r["value"] for r in rest] == ["late"]


def test_produce_to_a_new_topic_the_broker_auto_creates(ctl: Ctl) -> None:
    res = ctl("produce", "fresh", "-X", "linger.ms=2", input="a\nb\n")
    assert res.returncode == 0, res.stderr
    assert "produced 2 record(s) to fresh" in res.stderr
    assert [r["value"] for r in ctl.lines("consume", "fresh", "--from-beginning", "--max-messages", "2")] == ["a", "b"]


def test_produce_to_an_unknown_topic_without_auto_creation(broker_factory) -> None:
    ctl = Ctl(broker_factory(auto_create_topics_enable=False).bootstrap)
    unknown = "kafkactl: unknown topic: nope (UNKNOWN_TOPIC_OR_PARTITION, 3)"
    assert one_line_error(ctl("produce", "nope", "-X", "max.block.ms=500", input="x\n"), 2) == unknown
    assert one_line_error(ctl("produce", "nope", "-X", "max.block.ms=soon", input="x\n"), 2).endswith(
        "configuration 'max.block.ms' must be an integer, not 'soon'")


def test_produce_consume_errors(ctl: Ctl, topic: str) -> None:
    unknown = "kafkactl: unknown topic: nope (UNKNOWN_TOPIC_OR_PARTITION, 3)"
    assert one_line_error(ctl("consume", "nope", "--max-messages", "1"), 2) == unknown
    assert "line 2 has no key separator ':'" in one_line_error(
        ctl("produce", topic, "--key-separator", ":", input="a:1\nb\n"), 2)
    assert "has no partition 7" in one_line_error(ctl("produce", topic, "--partition", "7", input="x\n"), 2)
    assert "has no partition 9" in one_line_error(ctl("consume", topic, "--partition", "9"), 2)
    assert "cannot be used with --group" in one_line_error(ctl("consume", topic, "--group", "g", "--offset", "1"), 2)
    assert "bad --offset 'soon'" in one_line_error(ctl("consume", topic, "--offset", "soon"), 2)
    assert "Invalid value for '--compression'" in one_line_error(
        ctl("produce", topic, "--compression", "brotli", input=""), 2)
    assert "no such file" in one_line_error(ctl("produce", topic, "--file", "/nonexistent/x"), 2)
    assert "unknown configuration 'no.such.property'" in one_line_error(
        ctl("produce", topic, "-X", "no.such.property=1", input="x\n"), 2)


def test_sigterm_stops_consume_cleanly_and_commits(ctl: Ctl, topic: str, broker) -> None:
    ctl("produce", topic, input="".join(f"r{i}\n" for i in range(6)))
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "-b", broker.bootstrap, "consume", topic,
                             "--group", "tail", "--from-beginning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = sorted(proc.stdout.readline().strip() for _ in range(6))
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert seen == [f"r{i}".encode() for i in range(6)]
    assert proc.returncode == 0 and err.decode().strip() == "Processed a total of 6 messages"
    [group] = ctl.json("groups", "describe", "tail")
    assert group["state"] == "Empty" and group["total_lag"] == 0
    assert sum(o["current_offset"] for o in group["offsets"]) == 6
