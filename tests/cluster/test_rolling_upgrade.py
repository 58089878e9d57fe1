"""A rolling upgrade across the release that brought topic ids (KIP-516): a cluster with a broker of the
release before it (run from this repository's history) keeps working, whichever broker is controller.

The older broker serves LeaderAndIsr up to v4 and UpdateMetadata up to v6; a controller of this release
sends it those versions (without topic ids), and the older controller's v4/v6 requests are served here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from broker.protocol import ApiKey
from broker.protocol.schema import ZERO_UUID

from .conftest import WAIT_S, wait_until
from .workload import read_all
from tests.server.wire import Wire

REPO = Path(__file__).resolve().parents[2]


def release_before_topic_ids(dest: Path) -> Path:
    """The source tree of the commit before the one that added ``broker/topic_ids.py``, unpacked in ``dest``.
    A shallow clone gets its history from its origin first."""
    shallow = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"], capture_output=True,
                             text=True, timeout=60)
    if shallow.stdout.strip() == "true":
        subprocess.run(["git", "-C", str(REPO), "fetch", "--quiet", "--unshallow"], capture_output=True, timeout=300)
    found = subprocess.run(["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--",
                            "broker/topic_ids.py"], capture_output=True, text=True, timeout=60)
    assert found.returncode == 0 and found.stdout.split(), (
        f"this test needs the repository's history (a git clone): {found.stderr.strip()}")
    added = found.stdout.split()[-1]
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", f"{added}~1", "broker"],
                             capture_output=True, timeout=120, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True, timeout=120)
    assert not (dest / "broker" / "topic_ids.py").exists()
    return dest


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(WAIT_S) == 0


def high_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    except KafkaException:  # no leader answers yet
        return -1
    finally:
        consumer.close()


def topic_id_via(broker, topic: str, version: int = 12):
    with Wire(broker.bootstrap) as w:
        [entry] = w.call(ApiKey.METADATA, version, {"topics": [{"name": topic, "topic_id": ZERO_UUID}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})["topics"]
    return entry


def test_a_cluster_with_a_broker_of_the_release_before_topic_ids(cluster_factory, tmp_path):
    old_tree = release_before_topic_ids(tmp_path / "older")
    # broker 1 runs the older release and starts first, so it is the first controller
    cluster = cluster_factory(3, min_insync_replicas=2,
                              command_prefix={1: ["env", f"PYTHONPATH={old_tree}"]})
    assert cluster.controller_id() == 1
    with Wire(cluster.broker(1).bootstrap) as w:  # it is the older release indeed
        versions = {e["api_key"]: e["max_version"] for e in w.call(ApiKey.API_VERSIONS, 0, {})["api_keys"]}
    assert versions[ApiKey.LEADER_AND_ISR] == 4 and versions[ApiKey.METADATA] == 9

    cluster.create_topic("ledger", partitions=1, replication_factor=3)
    first = [b"a-%d" % i for i in range(100)]
    produce(cluster.bootstrap, "ledger", first)

    # a broker of this release becomes controller: it names the topic's id and tells broker 1 in v4/v6
    cluster.kill(1)
    wait_until(lambda: cluster.controller_id() in (2, 3), "a controller of this release")
    doc = wait_until(lambda: cluster._json("/brokers/topics/ledger").get("topic_id") and
                     cluster._json("/brokers/topics/ledger"), "the new controller to give the topic its id")
    cluster.start(1)
    cluster.wait_for_isr("ledger", 0, [1, 2, 3])  # broker 1 follows again: LeaderAndIsr v4 reached it
    assert "no usable version" not in cluster.broker(2).stderr_text() + cluster.broker(3).stderr_text()
    for broker_id in (2, 3):
        entry = topic_id_via(cluster.broker(broker_id), "ledger")
        assert entry["error_code"] == 0 and len(doc["topic_id"]) == 22 and entry["topic_id"] != ZERO_UUID
    assert topic_id_via(cluster.broker(1), "ledger", version=9)["error_code"] == 0  # answered from v6's news

    second = [b"b-%d" % i for i in range(100)]
    produce(cluster.bootstrap, "ledger", second)
    # the older broker leads: every record is there
    cluster.kill(2)
    cluster.kill(3)
    cluster.start(2)
    wait_until(lambda: cluster.leader("ledger", 0, via=2) in (1, 2), "a leader")
    # a new leader's high watermark is the one it knew as a follower until its ISR has fetched to its log end
    wait_until(lambda: high_watermark(cluster.bootstrap, "ledger") == len(first + second),
               "the high watermark to cover every acknowledged record")
    assert [v for _p, _o, v in read_all(cluster.bootstrap, "ledger")] == first + second
