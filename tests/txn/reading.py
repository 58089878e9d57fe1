"""Reading a topic back as a read_committed application does (confluent-kafka)."""

from __future__ import annotations

import time

import confluent_kafka as ck


def read_committed(bootstrap: str, topic: str, partitions: int, count: int, *, wait_s: float,
                   settle_s: float = 1.0) -> list[bytes]:
    """The values a read_committed consumer reads from offset 0 of every partition.

    It polls until ``count`` values came or ``wait_s`` passed, then ``settle_s``
    more: anything read then would be a copy or aborted data, so the caller's
    comparison catches it.
    """
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "rc", "enable.auto.commit": False,
                            "isolation.level": "read_committed", "fetch.queue.backoff.ms": 10})
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + wait_s
        while len(out) < count and time.monotonic() < deadline:
            _poll_into(consumer, out)
        quiet = time.monotonic() + settle_s
        while time.monotonic() < quiet:
            _poll_into(consumer, out)
        return out
    finally:
        consumer.close()


def _poll_into(consumer, out: list[bytes]) -> None:
    msg = consumer.poll(0.2)
    if msg is not None and not msg.error():
        out.append(msg.value())
