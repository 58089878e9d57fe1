"""Exactly once into the target across SIGKILLs of the mirror (4 kills; 20 with
KAFKAPY_LONG=1), and two mirror processes sharing a flow's partitions with one
of them killed."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

import pytest

from .conftest import create_topic, mirror_config, mirrored_count, produce_records, read_all, wait_for

LONG = os.environ.get("KAFKAPY_LONG") == "1"


class Background:
    """Produces numbered records into ``topic`` until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.sent = 0
        self._stop = threading.Event()
        self._args = (bootstrap, topic, partitions)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        bootstrap, topic, partitions = self._args
        while not self._stop.is_set():
            produce_records(bootstrap, topic, 200, partitions=partitions, start=self.sent)
            self.sent += 200
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()



def _assert_same(src, dst, topic):
    expected, got = read_all(src.bootstrap, topic), read_all(dst.bootstrap, topic)
    assert len(got) == len(expected), f"target holds {len(got)} records, source {len(expected)}"
    assert got == expected


@pytest.mark.slow
def test_sigkill_at_random_moments(broker_factory, mirror_factory):
    kills = 20 if LONG else 4
    src, dst = broker_factory(), broker_factory()
    topic = f"eo-{uuid.uuid4().hex[:8]}"
    create_topic(src.bootstrap, topic, 3)
    cfg = mirror_config({"a": src.bootstrap, "b": dst.bootstrap}, [{"source": "a", "target": "b", "topics": topic}])
    rnd = random.Random()
    with Background(src.bootstrap, topic, 3):
        mirror = mirror_factory(cfg)
        for _ in range(kills):
            # kill while it copies: after it took its partitions, at a random moment
            wait_for(lambda: "resumes at" in mirror.log_text(), 60, "the mirror to own partitions")
            time.sleep(rnd.uniform(0.0, 2.0))
            mirror.kill()
            mirror = mirror_factory(cfg)
        wait_for(lambda: "resumes at" in mirror.log_text(), 60, "the last mirror to own partitions")
        time.sleep(1)
    total = mirrored_count(src.bootstrap, topic)
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) >= total, 90, "the target to catch up")
    time.sleep(1)  # anything extra would show as a duplicate now
    _assert_same(src, dst, topic)


def test_two_processes_one_killed(broker_factory, mirror_factory):
    src, dst = broker_factory(), broker_factory()
    topic = f"share-{uuid.uuid4().hex[:8]}"
    create_topic(src.bootstrap, topic, 4)
    cfg = mirror_config({"a": src.bootstrap, "b": dst.bootstrap}, [{"source": "a", "target": "b", "topics": topic}])
    with Background(src.bootstrap, topic, 4) as bg:
        first = mirror_factory(cfg)
        second = mirror_factory(cfg)
        wait_for(lambda: "resumes at" in first.log_text() and "resumes at" in second.log_text(), 60,
                 "both processes to own partitions")
        time.sleep(1.5)
        owned_before = first.log_text().count("resumes at")
        second.kill()
        # production goes on while the dead process's partitions move to the survivor
        wait_for(lambda: first.log_text().count("resumes at") > owned_before, 60,
                 "the survivor to take the dead process's partitions")
        time.sleep(1)
    total = mirrored_count(src.bootstrap, topic)
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) >= total, 90, "the survivor to catch up")
    time.sleep(1)
    _assert_same(src, dst, topic)
