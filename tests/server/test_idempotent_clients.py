"""Idempotent producers of three client libraries while the broker stalls and is SIGKILLed mid-send.

Each producer sends numbered records to one partition with acks=all and
retries. After a third of them the broker is stopped (SIGSTOP) for longer
than the client's request timeout: the client gives up on its in-flight
requests, reconnects and sends them again, while the broker, once continued,
still reads and writes the first copies. After two thirds the broker is
killed with SIGKILL and started again on the same data: batches written
before the kill but not acknowledged come again too, and the broker, with
its producer state rebuilt from the log, must know them. Either way the
retries carry their original sequence numbers and are answered as
duplicates: the partition holds every record exactly once, in the order sent
(without the producer state, the stall alone writes hundreds of records twice).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

from .test_idempotence import values_of
from .wire import Wire

RECORDS = 3000
LIMIT_S = 120
REQUEST_TIMEOUT_MS = 1500


def read_values(broker, topic: str) -> list[bytes]:
    with Wire(broker.bootstrap) as w:
        return values_of(w, topic)


def _wait_for(acked: list, count: int) -> None:
    deadline = time.monotonic() + LIMIT_S
    while len(acked) < count:
        assert time.monotonic() < deadline, f"only {len(acked)} records acknowledged"
        time.sleep(0.002)


def stall_then_kill(broker, acked: list, stall_s: float = REQUEST_TIMEOUT_MS / 1000 * 2) -> None:
    """SIGSTOP past the clients' request timeout, SIGCONT; later SIGKILL and a restart on the same data."""
    _wait_for(acked, RECORDS // 3)
    os.kill(broker.pid, signal.SIGSTOP)
    try:
        time.sleep(stall_s)
    finally:
        os.kill(broker.pid, signal.SIGCONT)
    _wait_for(acked, 2 * RECORDS // 3)
    broker.kill()
    broker.start()


def assert_exactly_once_in_order(broker, topic: str, acked: list, errors: list) -> None:
    assert errors == []
    assert len(acked) == RECORDS
    assert read_values(broker, topic) == [b"%06d" % i for i in range(RECORDS)]


def test_librdkafka_idempotent_producer_across_sigkill(broker):
    import confluent_kafka

    acked, errors = [], []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "batch.num.messages": 50, "message.timeout.ms": LIMIT_S * 1000, "retry.backoff.ms": 50,
        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
        "socket.timeout.ms": REQUEST_TIMEOUT_MS, "request.timeout.ms": REQUEST_TIMEOUT_MS})

    def on_delivery(err, msg):
        (errors if err is not None else acked).append(err or msg.value())

    def send():
        for i in range(RECORDS):
            while True:
                try:
                    producer.produce("rdk", b"%06d" % i, partition=0, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            time.sleep(0.0002)  # spread the sends over the restart
        producer.flush(LIMIT_S)

    sender = threading.Thread(target=send)
    sender.start()
    stall_then_kill(broker, acked)
    sender.join(LIMIT_S)
    assert not sender.is_alive()
    assert_exactly_once_in_order(broker, "rdk", acked, errors)


def test_kafka_python_idempotent_producer_across_sigkill(broker):
    import kafka

    acked, errors = [], []
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all",
                                   linger_ms=5, batch_size=2048, retries=1_000_000, retry_backoff_ms=50,
                                   reconnect_backoff_ms=50, reconnect_backoff_max_ms=200,
                                   request_timeout_ms=REQUEST_TIMEOUT_MS, delivery_timeout_ms=LIMIT_S * 1000)

    def send():
        for i in range(RECORDS):
            future = producer.send("kpy", b"%06d" % i, partition=0)
            future.add_callback(lambda md, v=b"%06d" % i: acked.append(v))
            future.add_errback(errors.append)
            time.sleep(0.0002)
        producer.flush(LIMIT_S)

    sender = threading.Thread(target=send)
    sender.start()
    stall_then_kill(broker, acked)
    sender.join(LIMIT_S)
    producer.close(5)
    assert not sender.is_alive()
    assert_exactly_once_in_order(broker, "kpy", acked, errors)


def test_aiokafka_idempotent_producer_across_sigkill(broker):
    import aiokafka

    acked, errors = [], []

    async def produce_all():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                                             acks="all", linger_ms=5, max_batch_size=2048, retry_backoff_ms=50,
                                             request_timeout_ms=REQUEST_TIMEOUT_MS)
        await producer.start()
        try:
            pending = []
            for i in range(RECORDS):
                while True:
                    try:
                        pending.append(await producer.send("aio", b"%06d" % i, partition=0))
                        break
                    except aiokafka.errors.KafkaTimeoutError:  # no room in its buffer while the broker stalls
                        pass
                pending[-1].add_done_callback(
                    lambda f, v=b"%06d" % i: (errors.append(f.exception()) if f.exception() else acked.append(v)))
                await asyncio.sleep(0.0002)
            await asyncio.wait(pending, timeout=LIMIT_S)
        finally:
            await producer.stop()

    sender = threading.Thread(target=lambda: asyncio.run(produce_all()))
    sender.start()
    stall_then_kill(broker, acked)
    sender.join(LIMIT_S)
    assert not sender.is_alive()
    assert_exactly_once_in_order(broker, "aio", acked, errors)


def test_our_client_is_idempotent_by_default_across_sigkill(broker):
    from broker.client import Producer

    acked, errors = [], []
    producer = Producer(bootstrap_servers=broker.bootstrap, linger_ms=5, batch_size=2048, retry_backoff_ms=50,
                        request_timeout_ms=REQUEST_TIMEOUT_MS, delivery_timeout_ms=LIMIT_S * 1000)
    assert producer.config.enable_idempotence  # not asked for: the default

    def send():
        for i in range(RECORDS):
            value = b"%06d" % i
            producer.send("ours", value, partition=0,
                          on_delivery=lambda err, md, v=value: (errors if err is not None else acked).append(err or v))
            time.sleep(0.0002)
        producer.flush(LIMIT_S)

    sender = threading.Thread(target=send)
    sender.start()
    stall_then_kill(broker, acked, stall_s=REQUEST_TIMEOUT_MS / 1000 + 7)  # it waits request_timeout_ms + 5 s
    sender.join(LIMIT_S)
    producer.close(5)
    assert not sender.is_alive()
    assert_exactly_once_in_order(broker, "ours", acked, errors)
