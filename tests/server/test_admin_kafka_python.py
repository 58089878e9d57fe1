"""Admin APIs driven by kafka-python's KafkaAdminClient against a broker process."""

from __future__ import annotations

import os

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidConfigurationError, TopicAlreadyExistsError


@pytest.fixture
def client(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    yield admin
    admin.close()


def test_create_describe_alter_delete(broker, client):
    created = client.create_topics([NewTopic("kp", 2, 1, topic_configs={"retention.ms": "120000"})])
    (entry,) = created["topics"]
    assert entry["error_code"] == 0 and entry["num_partitions"] == 2 and entry["replication_factor"] == 1
    assert entry["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    with pytest.raises(TopicAlreadyExistsError):
        client.create_topics([NewTopic("kp", 1, 1)])
    with pytest.raises(InvalidConfigurationError):
        client.create_topics([NewTopic("kp-bad", 1, 1, topic_configs={"min.insync.replicas": "0"})])

    described = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])  # modified only
    assert set(described["topic"]["kp"]) == {"retention.ms"}
    everything = client.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp", {"retention.ms": None, "segment.bytes": None})],
        include_synonyms=True, config_filter="all")["topic"]["kp"]
    assert set(everything) == {"retention.ms", "segment.bytes"}
    assert everything["segment.bytes"]["config_type"] == "INT"
    assert [s["name"] for s in everything["retention.ms"]["synonyms"]] == ["retention.ms", "log.retention.hours"]

    def modified():
        described = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])["topic"]["kp"]
        return {k: v["value"] for k, v in described.items()}

    # AlterConfigs: the client re-sends the other modified keys, since the broker replaces them all
    altered = client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp", {"segment.bytes": "100000"})],
                                   incremental=False)
    assert altered == {"topic": {"kp": "OK"}}
    assert modified() == {"retention.ms": "120000", "segment.bytes": "100000"}
    # IncrementalAlterConfigs
    client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp", {"retention.ms": ("DELETE", None),
                                                                          "max.message.bytes": "5000"})],
                         incremental=True)
    assert modified() == {"segment.bytes": "100000", "max.message.bytes": "5000"}

    client.create_partitions({"kp": NewPartitions(3)})
    assert (broker.data_dir / "kp-2").is_dir()

    deleted = client.delete_topics(["kp"])
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [("kp", 0)]
    assert "kp" not in client.list_topics()


def test_describe_log_dirs(broker, client):
    client.create_topics([NewTopic("sized", 2, 1), NewTopic("other", 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send("sized", value=b"v" * 1000, partition=1)
    producer.flush()
    producer.close()

    (per_broker,) = client.describe_log_dirs()
    (log_dir,) = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert os.path.samefile(log_dir["log_dir"], broker.data_dir)
    topics = {t["name"]: {p["partition_index"]: p for p in t["partitions"]} for t in log_dir["topics"]}
    assert set(topics) == {"sized", "other"}
    assert topics["sized"][0]["partition_size"] == 0
    on_disk = (broker.data_dir / "sized-1" / "00000000000000000000.log").stat().st_size
    assert topics["sized"][1]["partition_size"] == on_disk > 10 * 1000
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in topics["sized"].values())

    (filtered,) = client.describe_log_dirs({"sized": [1]})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in filtered["log_dirs"][0]["topics"]] \
        == [("sized", [1])]


def test_describe_cluster(broker, client):
    cluster = client.describe_cluster()
    host, port = broker.bootstrap.rsplit(":", 1)
    assert cluster["controller_id"] == 0
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(0, host, int(port))]
    assert len(cluster["cluster_id"]) == 22
    assert "DESCRIBE_CONFIGS" in cluster["authorized_operations"]
