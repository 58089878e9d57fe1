"""Topic ids (KIP-516) on a ZooKeeper cluster: one id per topic, the same on every broker and in every replica's
``partition.metadata``; a topic written in Kafka 2.7's layout (no id) gets one from the controller.
"""

from __future__ import annotations

import json

from broker.log.checkpoint import read_partition_metadata
from broker.protocol import ApiKey
from broker.protocol.schema import ZERO_UUID
from broker.topic_ids import parse_topic_id

from .conftest import wait_until
from tests.server.wire import Wire


def ids_everywhere(cluster, topic: str) -> set:
    """The topic id each broker answers in Metadata v12."""
    found = set()
    for broker_id in cluster.ids:
        with Wire(cluster.broker(broker_id).bootstrap) as w:
            [entry] = w.call(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": ZERO_UUID}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})["topics"]
        found.add(entry["topic_id"] if entry["error_code"] == 0 else None)
    return found


def test_one_id_on_every_broker_and_replica(cluster_factory):
    cluster = cluster_factory(3)
    cluster.create_topic("orders", partitions=2, replication_factor=3)
    doc = json.loads(cluster.zk.get("/brokers/topics/orders")[0])
    topic_id = parse_topic_id(doc["topic_id"])
    assert wait_until(lambda: ids_everywhere(cluster, "orders") == {topic_id}, "every broker to answer the id")
    for broker_id in cluster.ids:
        for p in (0, 1):
            assert read_partition_metadata(cluster.broker(broker_id).data_dir / f"orders-{p}") == topic_id

    # a new controller reads the same id (nothing is made twice)
    cluster.kill(cluster.controller_id())
    wait_until(lambda: cluster.controller_id() in cluster.live_ids(), "a new controller")
    assert json.loads(cluster.zk.get("/brokers/topics/orders")[0])["topic_id"] == doc["topic_id"]


def test_a_topic_in_kafka_27_layout_gets_an_id(cluster_factory):
    cluster = cluster_factory(3)
    # as Kafka 2.7's AdminZkClient (kafka-topics.sh --zookeeper) writes a topic: config first, then the assignment
    cluster.zk.create("/config/topics/legacy", b'{"version":1,"config":{}}', makepath=True)
    cluster.zk.create("/brokers/topics/legacy", json.dumps({
        "version": 2, "partitions": {"0": [1, 2], "1": [2, 3]}, "adding_replicas": {},
        "removing_replicas": {}}).encode(), makepath=True)
    doc = wait_until(lambda: (d := json.loads(cluster.zk.get("/brokers/topics/legacy")[0])).get("topic_id") and d,
                     "the controller to give the topic an id")
    assert doc["version"] == 3 and doc["partitions"] == {"0": [1, 2], "1": [2, 3]}
    topic_id = parse_topic_id(doc["topic_id"])
    for p in (0, 1):
        cluster.wait_for_leader("legacy", p)
    assert wait_until(lambda: ids_everywhere(cluster, "legacy") == {topic_id}, "every broker to answer the id")
    for broker_id, partitions in ((1, [0]), (2, [0, 1]), (3, [1])):
        for p in partitions:
            path = cluster.broker(broker_id).data_dir / f"legacy-{p}"
            assert wait_until(lambda path=path: read_partition_metadata(path), f"{path.name} on broker {broker_id}") \
                == topic_id
