"""Exactly once through crashes: a transactional copier (``copier.py``, consume -> produce -> send
offsets -> commit, 100 records a transaction) SIGKILLed at random points, the broker SIGKILLed and
restarted at random too; the output read with read_committed holds exactly one copy of every input
record (what Kafka's system test ``transactions_test.py`` asserts).

Slow: three copier kills (one of them with a broker restart) by default, ten with KAFKAPY_LONG=1.
The random points come from a seeded generator, printed on failure. While kills are due the copier
pauses 0.2 s after each transaction, so the kills land mid-copy; the last run copies at full speed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .reading import read_committed
from .test_transactions import LIMIT_S, create_topic

ck = pytest.importorskip("confluent_kafka")

COPIER = Path(__file__).with_name("copier.py")
PARTITIONS = 2
LONG = os.environ.get("KAFKAPY_LONG") == "1"
PAUSE_S = 0.2
RUN_S = 120  # one copier run to the end: a guard against a hang, not a performance assertion


def fill_input(bootstrap: str, topic: str, total: int) -> list[bytes]:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    values = [b"record-%06d" % i for i in range(total)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(LIMIT_S) == 0
    return values


def start_copier(broker, total: int, log: Path, pause_s: float) -> subprocess.Popen:
    with log.open("a") as err:
        return subprocess.Popen([sys.executable, str(COPIER), broker.bootstrap, "input", "output", "copier-app",
                                 str(total), str(pause_s)], stdout=subprocess.DEVNULL, stderr=err)


def copy_with_kills(broker, tmp_path: Path, kills: int, total: int, seed: int) -> None:
    rng = random.Random(seed)
    create_topic(broker.bootstrap, "input", PARTITIONS)
    create_topic(broker.bootstrap, "output", PARTITIONS)
    values = fill_input(broker.bootstrap, "input", total)
    broker_rounds = {rng.randrange(kills)} | {i for i in range(kills) if rng.random() < 0.25}
    log = tmp_path / "copier.stderr"
    landed = 0
    for round_ in range(kills):
        copier = start_copier(broker, total, log, PAUSE_S)
        time.sleep(rng.uniform(0.5, 2.5))
        if round_ in broker_rounds:  # the broker dies under the running copier, and comes back
            broker.kill()
            broker.start()
            time.sleep(rng.uniform(0.2, 1.5))
        assert copier.poll() != 0, f"seed {seed}: the copier finished before kill {round_ + 1}: give it more input"
        if copier.poll() is None:
            copier.send_signal(signal.SIGKILL)
            landed += 1
        copier.wait()
    assert landed >= kills - len(broker_rounds), f"seed {seed}: only {landed} kills landed on a running copier"

    for _attempt in range(5):  # a run cut short by an error (exit 2) is started again, as a supervisor would
        copier = start_copier(broker, total, log, 0)
        try:
            code = copier.wait(RUN_S)
        except subprocess.TimeoutExpired:
            copier.kill()
            copier.wait()
            raise AssertionError(f"seed {seed}: the copier did not finish in {RUN_S} s:\n{log.read_text()[-3000:]}")
        if code == 0:
            break
    else:
        raise AssertionError(f"seed {seed}: the copier kept failing:\n{log.read_text()[-3000:]}")
    got = read_committed(broker.bootstrap, "output", PARTITIONS, total, wait_s=LIMIT_S)
    assert len(got) == total and sorted(got) == values, (
        f"seed {seed}: {len(got)} records read, {len(set(got))} distinct, {total} expected")


@pytest.mark.slow
def test_a_copier_killed_again_and_again_copies_every_record_exactly_once(broker, tmp_path):
    kills = 10 if LONG else 3
    # A round lasts at most 2.5 s, plus 1.5 s after a broker restart: at one transaction of 100 records
    # per PAUSE_S that is at most 2,000 records, so the input outlasts every round.
    copy_with_kills(broker, tmp_path, kills=kills, total=2500 * kills, seed=random.randrange(1 << 30))
