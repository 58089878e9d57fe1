"""Bad input never takes the broker down: garbage, truncated and oversized frames, unknown
api keys, handlers fed nonsense, slow readers. Each case closes (or answers) only the
offending connection; a healthy client on another connection carries on throughout."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import struct
import time

import pytest

from broker.protocol import ApiKey, decode_response, encode_request
from broker.records.batch import iter_records

from .wire import Wire, make_batch


def healthy(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.call(ApiKey.METADATA, 9, {"topics": None})["controller_id"] == 0


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def fetch_everything(topic: str) -> dict:
    """A Fetch v11 body for all of partition 0 of ``topic`` (up to 16 MiB), answered without waiting."""
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def slow_reader(broker) -> socket.socket:
    """A connection with a 4 KiB receive buffer (set before connecting, so its window stays small)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((broker.host, broker.port))
    return sock


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(struct.pack(">i", 2**31 - 1), id="huge-length-prefix"),
        pytest.param(struct.pack(">i", -5), id="negative-length-prefix"),
        pytest.param(frame(b"\x00"), id="shorter-than-a-header"),
        pytest.param(frame(struct.pack(">hhi", 999, 0, 1)), id="unknown-api-key"),
        pytest.param(frame(struct.pack(">hhih", ApiKey.PRODUCE, 8, 1, -1) + b"\xff" * 3), id="truncated-body"),
        pytest.param(frame(struct.pack(">hhih", ApiKey.METADATA, 9, 1, 50) + b"abc"), id="bad-client-id"),
        pytest.param(frame(struct.pack(">hhih", ApiKey.FETCH, 11, 1, -1) + b"\x7f" * 60), id="absurd-array-size"),
    ],
)
def test_bad_frames_close_only_that_connection(broker, data):
    with Wire(broker.bootstrap) as bystander:
        bystander.call(ApiKey.API_VERSIONS, 2, {})
        with Wire(broker.bootstrap) as bad:
            bad.send_raw(data)
            assert bad.is_closed_by_peer()
        assert bystander.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0
    healthy(broker)
    assert broker.running()
    assert "closing connection from" in broker.stderr_text()


def test_random_garbage_and_truncations(broker):
    rng = random.Random(1234)
    good = encode_request(ApiKey.PRODUCE, 8, 1, "fuzz", {
        "acks": 1, "timeout_ms": 100,
        "topic_data": [{"name": "fuzz", "partition_data": [{"index": 0, "records": make_batch([b"v"])}]}]})
    cases = [os.urandom(rng.randint(1, 300)) for _ in range(20)]
    cases += [good[:cut] for cut in sorted(rng.sample(range(1, len(good)), 15))]
    for _ in range(15):  # valid size prefix, flipped bytes in the body
        mutated = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(4, len(mutated))
            mutated[i] = rng.randrange(256)
        cases.append(bytes(mutated))
    for data in cases:
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            try:
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    healthy(broker)
    assert broker.running()
    assert "Traceback" not in broker.stderr_text()


def test_oversized_frame_against_socket_request_max_bytes(broker_factory):
    b = broker_factory(socket_request_max_bytes=10_000)
    with Wire(b.bootstrap) as w:
        w.send_raw(struct.pack(">i", 10_001) + b"\x00" * 100)
        assert w.is_closed_by_peer()
    with Wire(b.bootstrap) as w:  # a frame at the limit is fine
        body = {"acks": 1, "timeout_ms": 100, "topic_data": [
            {"name": "lim", "partition_data": [{"index": 0, "records": make_batch([b"x" * 9000])}]}]}
        assert w.call(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"][0]["error_code"] == 0


def test_slow_reader_does_not_hold_up_others(broker):
    with Wire(broker.bootstrap) as w:
        body = {"acks": 1, "timeout_ms": 100, "topic_data": [
            {"name": "slow", "partition_data": [{"index": 0, "records": make_batch([b"x" * 500_000])}]}]}
        w.call(ApiKey.PRODUCE, 8, body)
    slow = slow_reader(broker)
    fetch = fetch_everything("slow")
    # Many pipelined fetches that the slow client never reads: megabytes stuck in its socket.
    for i in range(200):
        slow.sendall(encode_request(ApiKey.FETCH, 11, i, "slow", fetch))
    for _ in range(5):
        healthy(broker)
    assert broker.running()
    slow.close()
    healthy(broker)


def test_topic_deleted_while_a_fetch_is_being_sent_to_a_slow_reader(broker):
    """The segment files of a fetch that is still being sent (``sendfile``, held up by
    a slow reader) are closed and deleted with their topic: the reader still gets
    every byte it was promised, intact, and nothing goes wrong inside the broker."""
    values = [os.urandom(900_000) for _ in range(12)]  # ~11 MB: far more than socket buffers hold
    with Wire(broker.bootstrap) as w:
        for value in values:
            body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
                {"name": "gone", "partition_data": [{"index": 0, "records": make_batch([value])}]}]}
            assert w.call(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"][0]["error_code"] == 0
    fetch = fetch_everything("gone")
    slow = slow_reader(broker)
    slow.settimeout(30)
    with slow:
        slow.sendall(encode_request(ApiKey.FETCH, 11, 7, "slow", fetch))
        received = bytearray(slow.recv(65536))
        time.sleep(0.5)  # the broker is stuck in sendfile: the reader's window is full
        with Wire(broker.bootstrap) as w:
            deleted = w.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["gone"], "timeout_ms": 10000})
            assert deleted["responses"][0]["error_code"] == 0
        assert not (broker.data_dir / "gone-0").exists()
        while len(received) < 4 or len(received) < 4 + struct.unpack(">i", received[:4])[0]:
            chunk = slow.recv(1 << 20)
            assert chunk, f"connection closed after {len(received)} bytes of the fetch response"
            received += chunk
    size = struct.unpack(">i", received[:4])[0]
    assert len(received) == 4 + size
    correlation_id, response = decode_response(ApiKey.FETCH, 11, bytes(received[4:]))
    assert correlation_id == 7
    records = response["responses"][0]["partitions"][0]["records"]
    assert [entry.value for entry in iter_records(records)] == values
    healthy(broker)
    assert "Traceback" not in broker.stderr_text()


def test_many_connections_open_and_vanish(broker):
    socks = [socket.create_connection((broker.host, broker.port)) for _ in range(100)]
    for i, s in enumerate(socks):
        if i % 2:
            s.sendall(struct.pack(">i", 1000) + b"partial")
        s.close()
    healthy(broker)


def stuck_in_sendfile(b) -> socket.socket:
    """Seven MB in topic ``stuck`` and a connection that asked for all of it and reads nothing: the broker is
    in ``sendfile`` to it, the reader's window full. The caller closes the socket."""
    with Wire(b.bootstrap) as w:
        for _ in range(8):
            body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
                {"name": "stuck", "partition_data": [{"index": 0, "records": make_batch([os.urandom(900_000)])}]}]}
            assert w.call(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"][0]["error_code"] == 0
    stuck = slow_reader(b)
    stuck.sendall(encode_request(ApiKey.FETCH, 11, 1, "stuck", fetch_everything("stuck")))
    time.sleep(0.5)
    return stuck


def test_shutdown_while_a_fetch_is_stuck_in_sendfile(broker_factory):
    """A broker stopped while it is sending a fetch response (``sendfile``) to a client that
    reads nothing gives up on that client after ``shutdown.timeout.ms`` and exits cleanly:
    status 0, no traceback. (CPython 3.11's sendfile must unwind before its transport is
    closed, or ``connection_lost`` fails inside the event loop.)"""
    b = broker_factory(shutdown_timeout_ms=500)
    with stuck_in_sendfile(b):
        healthy(b)
        assert b.stop() == 0
    text = b.stderr_text()
    assert "Traceback" not in text and "Exception in callback" not in text, text
    assert "shutdown step" not in text  # half a second: not a slow step


def test_a_slow_shutdown_step_is_named_in_the_log(broker_factory):
    """A stop held up (here 6 s by a client that reads nothing, ``shutdown.timeout.ms`` 6000) says which step
    took the time."""
    b = broker_factory(shutdown_timeout_ms=6000)
    with stuck_in_sendfile(b):
        assert b.stop() == 0
    slow = [line for line in b.stderr_text().splitlines() if "shutdown step" in line]
    assert len(slow) == 1 and " WARNING " in slow[0], slow
    assert re.search(r"broker 0: shutdown step listeners took (\d+\.\d) s$", slow[0]), slow
    assert 5.5 <= float(re.search(r"took (\S+) s", slow[0]).group(1)) < 30


def test_sigquit_dumps_every_thread_and_task_and_the_broker_serves_on(broker):
    """``kill -QUIT``: the stacks of every thread and every asyncio task go to stderr, as a JVM's thread dump
    does; the broker keeps serving and still stops cleanly (the fixture checks status 0)."""
    broker.proc.send_signal(signal.SIGQUIT)
    deadline = time.monotonic() + 10
    while "--- end of the dump ---" not in broker.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = broker.stderr_text()
    assert re.search(r"Current thread 0x[0-9a-f]+ \(most recent call first\):", text), text[-3000:]
    tasks = re.search(r"--- (\d+) asyncio task\(s\) ---", text)
    assert tasks and int(tasks.group(1)) >= 3, text[-3000:]
    assert "NetworkServer._accept" in text  # the listener's task, where it waits
    assert broker.running()
    healthy(broker)


def test_shutdown_while_a_request_waits_for_a_topic_being_created(broker_factory):
    """A group's first request creates ``__consumer_offsets`` and waits for its leaders; a broker stopped
    meanwhile answers it at once (its controller, which would give the leaders, is gone) instead of
    holding the shutdown for ``shutdown.timeout.ms``."""
    from confluent_kafka import Consumer, TopicPartition

    b = broker_factory()  # shutdown.timeout.ms: Kafka's 10 s
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "first-group"})
    try:
        with pytest.raises(Exception, match="Unknown partition"):  # "t" does not exist; the group matters
            consumer.get_watermark_offsets(TopicPartition("t", 0), timeout=5)
    finally:
        consumer.close()
    started = time.monotonic()
    assert b.stop() == 0
    assert time.monotonic() - started < 5
    assert "still busy" not in b.stderr_text()
