"""Topic configs as Kafka 2.7 takes them: list configs under APPEND/SUBTRACT (an empty
``cleanup.policy`` keeps the log whole), ``message.format.version`` and
``message.downconversion.enable``. Driven by librdkafka's AdminClient and raw fetches."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from broker.protocol import ApiKey, ErrorCode
from broker.records import iter_records

from .test_api import fetch
from .wire import Wire

WAIT_S = 30  # a guard against a hang, not a performance assertion
OLD = 1_000_000_000_000  # 2001: far beyond any retention.ms used here
SET, APPEND, SUBTRACT = AlterConfigOpType.SET, AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT


def _alter(client: AdminClient, topic: str, *ops: tuple[str, str, AlterConfigOpType]):
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    (future,) = client.incremental_alter_configs([resource]).values()
    return future


def _error(future) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(WAIT_S)
    return info.value.args[0].code()


def _configs(client: AdminClient, topic: str) -> dict[str, str]:
    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {name: entry.value for name, entry in future.result(WAIT_S).items()}


def _earliest(client: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(WAIT_S).offset


def test_subtracting_the_last_cleanup_policy_keeps_the_log_whole(broker_factory):
    broker = broker_factory({"log.retention.check.interval.ms": 100})
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"cleanup.policy": "delete", "retention.ms": "1000", "segment.bytes": "100"}
    for topic in ("kept", "control"):
        client.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(WAIT_S)
    _alter(client, "kept", ("cleanup.policy", "delete", SUBTRACT)).result(WAIT_S)
    assert _configs(client, "kept")["cleanup.policy"] == ""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for topic in ("kept", "control"):
        for i in range(10):  # keyless and old: a compacted log refuses them, a deleting one drops them
            producer.produce(topic, value=b"%d" % i, partition=0, timestamp=OLD + i)
            assert producer.flush(WAIT_S) == 0
    deadline = time.monotonic() + WAIT_S
    while _earliest(client, "control") == 0:  # retention runs every 100 ms and empties the control topic
        assert time.monotonic() < deadline, "retention never ran on the control topic"
        time.sleep(0.1)
    time.sleep(0.5)  # several more retention passes
    assert _earliest(client, "kept") == 0
    with Wire(broker.bootstrap) as w:
        values = []
        while len(values) < 10:  # a fetch answers from one segment: read on from the next offset
            values += [r.value for r in iter_records(fetch(w, "kept", len(values))["records"])]
        assert values == [b"%d" % i for i in range(10)]
    # an empty policy survives a restart; APPEND builds it up again
    broker.restart()
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _configs(client, "kept")["cleanup.policy"] == ""
    _alter(client, "kept", ("cleanup.policy", "compact", APPEND)).result(WAIT_S)
    assert _configs(client, "kept")["cleanup.policy"] == "compact"


def test_append_and_subtract_on_throttled_replica_lists(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_topics([NewTopic("throttled", 2, 1)])["throttled"].result(WAIT_S)
    name = "leader.replication.throttled.replicas"
    assert _configs(client, "throttled")[name] == ""
    _alter(client, "throttled", (name, "0:0", APPEND)).result(WAIT_S)
    _alter(client, "throttled", (name, "1:0,0:0", APPEND),
           ("follower.replication.throttled.replicas", "*", SET)).result(WAIT_S)
    configs = _configs(client, "throttled")
    assert configs[name] == "0:0,1:0" and configs["follower.replication.throttled.replicas"] == "*"
    _alter(client, "throttled", (name, "0:0", SUBTRACT)).result(WAIT_S)
    assert _configs(client, "throttled")[name] == "1:0"
    assert _error(_alter(client, "throttled", (name, "partition-one", APPEND))) == KafkaError.INVALID_CONFIG
    assert _error(_alter(client, "throttled", ("retention.ms", "1", APPEND))) == KafkaError.INVALID_REQUEST
    assert _configs(client, "throttled")[name] == "1:0"  # a refused change changes nothing


def test_message_format_version_is_validated_and_the_log_stays_v2(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    _make(client, "fmt-default")
    assert _configs(client, "fmt-default")["message.format.version"] == "2.7-IV2"
    for version in ("0.10.2", "0.9.0", "0.11.0-IV2", "2.7.0", "1.0"):
        _alter(client, "fmt-default", ("message.format.version", version, SET)).result(WAIT_S)
        assert _configs(client, "fmt-default")["message.format.version"] == version
    for bad in ("0.10.9", "3.5", "latest"):
        refused = _alter(client, "fmt-default", ("message.format.version", bad, SET))
        assert _error(refused) == KafkaError.INVALID_CONFIG
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("fmt-default", value=b"v", key=b"k", headers=[("h", b"1")], partition=0)
    assert producer.flush(WAIT_S) == 0
    with Wire(broker.bootstrap) as w:
        (record,) = iter_records(fetch(w, "fmt-default", 0)["records"])
        assert [(h.key, h.value) for h in record.headers] == [("h", b"1")]  # still a v2 batch: headers kept


def _make(client: AdminClient, topic: str) -> str:
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
    return topic


def test_downconversion_disabled_fails_old_fetches_with_data_only(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_topics([NewTopic("no-downconvert", 1, 1, config={"message.downconversion.enable": "false"}),
                          NewTopic("downconvert", 1, 1)])["downconvert"].result(WAIT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for topic in ("no-downconvert", "downconvert"):
        producer.produce(topic, value=b"v", partition=0)
    assert producer.flush(WAIT_S) == 0
    with Wire(broker.bootstrap) as w:
        for version in (0, 2, 3):
            assert fetch(w, "no-downconvert", 0, version=version)["error_code"] == ErrorCode.UNSUPPORTED_VERSION
            # nothing to convert at the end of the log: no error, as in Kafka
            assert fetch(w, "no-downconvert", 1, version=version)["error_code"] == 0
            answer = fetch(w, "downconvert", 0, version=version)
            assert answer["error_code"] == 0 and len(answer["records"]) > 0
        answer = fetch(w, "no-downconvert", 0, version=4)
        assert answer["error_code"] == 0 and [r.value for r in iter_records(answer["records"])] == [b"v"]
        assert w.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0  # the connection carries on


def test_broker_wide_format_settings_are_the_topic_defaults(broker_factory):
    broker = broker_factory({"log.message.downconversion.enable": "false", "log.message.format.version": "0.10.2"})
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    _make(client, "from-broker")
    configs = _configs(client, "from-broker")
    assert configs["message.downconversion.enable"] == "false" and configs["message.format.version"] == "0.10.2"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("from-broker", value=b"v", partition=0)
    assert producer.flush(WAIT_S) == 0
    with Wire(broker.bootstrap) as w:
        assert fetch(w, "from-broker", 0, version=3)["error_code"] == ErrorCode.UNSUPPORTED_VERSION


def test_a_bad_broker_format_version_stops_the_start(broker_factory):
    with pytest.raises(RuntimeError) as info:
        broker_factory({"log.message.format.version": "0.10.9"})
    assert "log.message.format.version" in str(info.value)
