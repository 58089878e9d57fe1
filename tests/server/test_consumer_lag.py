"""Consumer lag from the broker itself (kafka_exporter's names) and from a real lag monitor (Debian's Burrow).

Both must agree with what was committed and with the partitions' log ends.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import urllib.request
import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.conftest import wait_until
from tests.zookeeper import free_port

from .test_metrics import scrape

BURROW = shutil.which("Burrow") or "/usr/bin/Burrow"
PRODUCED = {0: 30, 1: 12}
COMMITTED = {0: 10, 1: 12}


def _produce_and_commit(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for p, n in PRODUCED.items():
        for i in range(n):
            producer.produce("lagging", value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "slow", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("lagging", p, o) for p, o in COMMITTED.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def _create(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer: its handle owns the future
    admin.create_topics([NewTopic("lagging", 2, 1)])["lagging"].result(30)


def test_group_coordinator_exports_lag_under_kafka_exporter_names(broker):
    _create(broker.bootstrap)
    _produce_and_commit(broker.bootstrap)
    s = scrape(broker)
    for p in PRODUCED:
        labels = (("consumergroup", "slow"), ("partition", str(p)), ("topic", "lagging"))
        assert s[("kafka_consumergroup_current_offset", labels)] == COMMITTED[p]
        assert s[("kafka_consumergroup_lag", labels)] == PRODUCED[p] - COMMITTED[p]
        assert s[("kafkapy_log_end_offset", (("partition", str(p)), ("topic", "lagging")))] == PRODUCED[p]
    group_topic = (("consumergroup", "slow"), ("topic", "lagging"))
    assert s[("kafka_consumergroup_lag_sum", group_topic)] == 20
    assert s[("kafka_consumergroup_current_offset_sum", group_topic)] == 22
    assert s[("kafka_consumergroup_members", (("consumergroup", "slow"),))] == 0
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "lagging"),))] == 42
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "lagging"),))] == \
        s[("kafkapy_bytes_in_total", (("topic", "lagging"),))]


@pytest.fixture
def burrow(tmp_path, broker, zookeeper):
    """Burrow pointed at ``broker`` (its own state on the session's ZooKeeper): ``url``, ``log_tail()``."""
    if not shutil.which(BURROW):
        pytest.fail("Burrow is not installed (./dev test installs Debian's burrow)")
    port = free_port()
    (tmp_path / "burrow.toml").write_text(f"""
[general]
pidfile="{tmp_path}/burrow.pid"
[logging]
level="info"
[zookeeper]
servers=["{zookeeper.connect}"]
timeout=6
root-path="/burrow-{uuid.uuid4().hex[:8]}"
[client-profile.p]
client-id="burrow-test"
kafka-version="2.0.0"
[cluster.local]
class-name="kafka"
servers=["{broker.bootstrap}"]
client-profile="p"
topic-refresh=1
offset-refresh=1
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{broker.bootstrap}"]
client-profile="p"
[httpserver.default]
address="127.0.0.1:{port}"
[storage.default]
class-name="inmemory"
intervals=10
min-distance=1
""")
    log = open(tmp_path / "burrow.log", "wb")
    proc = subprocess.Popen([BURROW, "--config-dir", str(tmp_path)], stdout=log, stderr=subprocess.STDOUT,
                            cwd=tmp_path)
    log_path = tmp_path / "burrow.log"
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}",
                              log_tail=lambda: "\n".join(log_path.read_text(errors="replace").splitlines()[-30:]))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_burrow_reads_the_same_lag(broker, burrow):
    _create(broker.bootstrap)
    _produce_and_commit(broker.bootstrap)

    def burrow_lag():
        status = _get(f"{burrow.url}/v3/kafka/local/consumer/slow/lag")["status"]
        got = {p["partition"]: (p["end"]["offset"], p["current_lag"]) for p in status["partitions"]
               if p["end"] is not None}
        return got if len(got) == 2 and got[0][0] == COMMITTED[0] and got[1][1] == 0 else None

    try:  # a guard against a hang, not a performance assertion: Burrow reads __consumer_offsets from the start
        got = wait_until(burrow_lag, "Burrow to report the group's lag", limit=180, interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nBurrow's log:\n{burrow.log_tail()}") from None
    s = scrape(broker)
    for p in PRODUCED:
        labels = (("consumergroup", "slow"), ("partition", str(p)), ("topic", "lagging"))
        assert got[p] == (s[("kafka_consumergroup_current_offset", labels)], s[("kafka_consumergroup_lag", labels)])
        assert got[p] == (COMMITTED[p], PRODUCED[p] - COMMITTED[p])
