"""Ctrl-C during a blocking poll: poll stops, close() still finishes.

The interrupt is a real SIGINT sent to this process while the main thread is
blocked in ``poll``. The join guards below bound a hang, they time nothing.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

from broker.client import Consumer, TopicPartition

from .conftest import create_topic

HANG_GUARD_S = 60


@pytest.fixture(autouse=True)
def sigint_raises():
    """SIGINT raises KeyboardInterrupt here even when the suite was started with SIGINT
    ignored (a shell starts background jobs so, and Python then leaves it ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _close_in_thread(consumer: Consumer) -> threading.Thread:
    closer = threading.Thread(target=consumer.close, daemon=True)
    closer.start()
    closer.join(HANG_GUARD_S)
    return closer


def _sigint_soon() -> threading.Timer:
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.parametrize("group", [False, True], ids=["assign", "group"])
def test_keyboard_interrupt_during_poll_then_close(kafka, group):
    topic = create_topic(kafka)
    consumer = Consumer(bootstrap_servers=kafka.bootstrap, session_timeout_ms=6000,
                        group_id=f"g-{topic}" if group else None)
    if group:
        consumer.subscribe([topic])
    else:
        consumer.assign([TopicPartition(topic, 0)])
    timer = _sigint_soon()
    with pytest.raises(KeyboardInterrupt):
        consumer.poll(HANG_GUARD_S * 1000)  # an empty topic: poll blocks until interrupted
    timer.join()
    closer = _close_in_thread(consumer)
    assert not closer.is_alive(), "close() hung after an interrupted poll"
    assert not consumer._thread.thread.is_alive()


def test_keyboard_interrupt_in_rebalance_callback(kafka):
    """An interrupt raised by a callback reaches the caller and leaves the loop usable for close."""
    topic = create_topic(kafka)
    consumer = Consumer(bootstrap_servers=kafka.bootstrap, session_timeout_ms=6000, group_id=f"g-{topic}")

    def on_assign(partitions):
        raise KeyboardInterrupt

    consumer.subscribe([topic], on_assign=on_assign)
    with pytest.raises(KeyboardInterrupt):
        consumer.poll(HANG_GUARD_S * 1000)
    closer = _close_in_thread(consumer)
    assert not closer.is_alive(), "close() hung after an interrupted rebalance callback"
