"""Admin APIs driven by confluent-kafka's AdminClient (librdkafka) against a broker process.

``alter_configs`` (replace-all) is deprecated in librdkafka in favour of ``incremental_alter_configs``;
it is still tested here because Kafka 2.7 clients and tools use it.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")

WAIT_S = 30  # a guard against a hang, not a performance assertion


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def result(future):
    return future.result(timeout=WAIT_S)


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=WAIT_S)
    return info.value.args[0]


def topic_configs(client: AdminClient, topic: str) -> dict:
    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return result(future)


def produce(broker, topic: str, count: int, size: int = 100, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, value=b"%06d" % i + b"x" * (size - 6), partition=partition)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0


def segment_files(broker, topic: str, partition: int = 0) -> list[str]:
    return sorted(p.name for p in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def wait_until(condition, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def test_create_topics_with_configs_validate_only_and_errors(broker):
    client = admin(broker)
    futures = client.create_topics([
        NewTopic("orders", 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        NewTopic("bad name!", 1, 1),
        NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}),
        NewTopic("unknown-config", 1, 1, config={"no.such.config": "1"}),
        NewTopic("too-many-replicas", 1, 2),
    ])
    assert result(futures["orders"]) is None
    assert error_of(futures["bad name!"]).code() == KafkaError.TOPIC_EXCEPTION
    bad = error_of(futures["bad-config"])
    assert bad.code() == KafkaError.INVALID_CONFIG and "retention.ms" in bad.str()
    assert error_of(futures["unknown-config"]).code() == KafkaError.INVALID_CONFIG
    assert error_of(futures["too-many-replicas"]).code() == KafkaError.INVALID_REPLICATION_FACTOR

    again = client.create_topics([NewTopic("orders", 1, 1)])["orders"]
    assert error_of(again).code() == KafkaError.TOPIC_ALREADY_EXISTS
    collide = client.create_topics([NewTopic("my.topic", 1, 1), NewTopic("other", 1, 1)])
    result(collide["my.topic"])
    clash = client.create_topics([NewTopic("my_topic", 1, 1)])["my_topic"]
    assert error_of(clash).code() == KafkaError.TOPIC_EXCEPTION

    checked = client.create_topics([NewTopic("dry-run", 2, 1)], validate_only=True)["dry-run"]
    assert result(checked) is None
    dry_bad = client.create_topics([NewTopic("dry-bad", 1, 1, config={"segment.bytes": "1"})],
                                   validate_only=True)["dry-bad"]
    assert error_of(dry_bad).code() == KafkaError.INVALID_CONFIG

    metadata = client.list_topics(timeout=WAIT_S).topics
    assert "dry-run" not in metadata and "bad-config" not in metadata
    assert len(metadata["orders"].partitions) == 3
    assert sorted(p.name for p in broker.data_dir.iterdir() if p.name.startswith("orders-")) == [
        "orders-0", "orders-1", "orders-2"]
    configs = topic_configs(client, "orders")
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "compact"


def test_describe_configs_sources_synonyms_and_broker(broker_factory):
    broker = broker_factory(log_segment_bytes=2_000_000)
    client = admin(broker)
    result(client.create_topics([NewTopic("described", 1, 1, config={"retention.ms": "60000"})])["described"])
    configs = topic_configs(client, "described")
    assert {"cleanup.policy", "compression.type", "max.message.bytes", "min.insync.replicas", "retention.bytes",
            "retention.ms", "segment.bytes", "segment.ms", "message.timestamp.type"} <= set(configs)
    retention = configs["retention.ms"]
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and not retention.is_default
    segment = configs["segment.bytes"]
    assert segment.value == "2000000" and segment.source == ConfigSource.STATIC_BROKER_CONFIG.value
    policy = configs["cleanup.policy"]
    assert policy.value == "delete" and policy.source == ConfigSource.DEFAULT_CONFIG.value and policy.is_default
    assert not any(c.is_read_only or c.is_sensitive for c in configs.values())

    # librdkafka asks for synonyms and keys them by name
    synonyms = retention.synonyms
    assert synonyms["retention.ms"].value == "60000"
    assert synonyms["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert synonyms["log.retention.hours"].value == str(168 * 3600 * 1000)
    assert synonyms["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG.value
    assert segment.synonyms["log.segment.bytes"].source in (ConfigSource.STATIC_BROKER_CONFIG.value,
                                                             ConfigSource.DEFAULT_CONFIG.value)

    (future,) = client.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    broker_configs = result(future)
    assert broker_configs["log.segment.bytes"].value == "2000000"
    assert broker_configs["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker_configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    dynamic = {"leader.replication.throttled.rate", "follower.replication.throttled.rate", "num.replica.fetchers",
               "log.cleaner.threads", "unclean.leader.election.enable", "max.connections.per.ip",
               "max.connections.per.ip.overrides", "max.connections", "max.connection.creation.rate"}
    assert {name for name, c in broker_configs.items() if not c.is_read_only} == dynamic

    (missing,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, "nope")]).values()
    assert error_of(missing).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_configs_replaces_all_and_survives_restart(broker):
    client = admin(broker)
    result(client.create_topics([NewTopic("altered", 1, 1, config={"retention.ms": "60000"})])["altered"])
    resource = ConfigResource(ResourceType.TOPIC, "altered", set_config={"max.message.bytes": "2000"})
    (future,) = client.alter_configs([resource]).values()
    result(future)
    configs = topic_configs(client, "altered")
    assert configs["max.message.bytes"].value == "2000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # replaced, not merged

    # the new max.message.bytes is enforced by produce at once
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    errors = []
    producer.produce("altered", value=b"x" * 5000, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(WAIT_S)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    bad = ConfigResource(ResourceType.TOPIC, "altered", set_config={"cleanup.policy": "shred"})
    (future,) = client.alter_configs([bad]).values()
    assert error_of(future).code() == KafkaError.INVALID_CONFIG
    dry = ConfigResource(ResourceType.TOPIC, "altered", set_config={"retention.ms": "1"})
    (future,) = client.alter_configs([dry], validate_only=True).values()
    result(future)
    assert topic_configs(client, "altered")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    (future,) = client.alter_configs([ConfigResource(ResourceType.BROKER, "0",
                                                     set_config={"num.partitions": "3"})]).values()
    assert error_of(future).code() == KafkaError.INVALID_REQUEST

    broker.restart()
    assert topic_configs(admin(broker), "altered")["max.message.bytes"].value == "2000"


def test_incremental_alter_configs_set_delete_append_subtract(broker):
    client = admin(broker)
    result(client.create_topics([NewTopic("inc", 1, 1, config={"retention.ms": "60000"})])["inc"])

    def alter(*entries, validate_only=False):
        resource = ConfigResource(ResourceType.TOPIC, "inc", incremental_configs=list(entries))
        (future,) = client.incremental_alter_configs([resource], validate_only=validate_only).values()
        return future

    result(alter(ConfigEntry("segment.bytes", "100000", incremental_operation=AlterConfigOpType.SET)))
    configs = topic_configs(client, "inc")
    assert configs["segment.bytes"].value == "100000" and configs["retention.ms"].value == "60000"  # kept

    result(alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
                 ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)))
    configs = topic_configs(client, "inc")
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert sorted(configs["cleanup.policy"].value.split(",")) == ["compact", "delete"]

    result(alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)))
    assert topic_configs(client, "inc")["cleanup.policy"].value == "compact"

    wrong = alter(ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.APPEND))
    assert error_of(wrong).code() == KafkaError.INVALID_REQUEST
    assert error_of(alter(ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.SET))).code() \
        == KafkaError.INVALID_CONFIG
    result(alter(ConfigEntry("segment.bytes", "5000", incremental_operation=AlterConfigOpType.SET),
                 validate_only=True))
    assert topic_configs(client, "inc")["segment.bytes"].value == "100000"


def test_create_partitions(broker):
    client = admin(broker)
    result(client.create_topics([NewTopic("grow", 1, 1, config={"segment.bytes": "50000"})])["grow"])
    produce(broker, "grow", 5)
    result(client.create_partitions([NewPartitions("grow", 4)])["grow"])
    assert len(client.list_topics("grow", timeout=WAIT_S).topics["grow"].partitions) == 4
    assert (broker.data_dir / "grow-3").is_dir()
    assert topic_configs(client, "grow")["segment.bytes"].value == "50000"

    assert error_of(client.create_partitions([NewPartitions("grow", 2)])["grow"]).code() \
        == KafkaError.INVALID_PARTITIONS
    assert error_of(client.create_partitions([NewPartitions("grow", 4)])["grow"]).code() \
        == KafkaError.INVALID_PARTITIONS
    result(client.create_partitions([NewPartitions("grow", 8)], validate_only=True)["grow"])
    assert len(client.list_topics("grow", timeout=WAIT_S).topics["grow"].partitions) == 4
    assert error_of(client.create_partitions([NewPartitions("absent", 2)])["absent"]).code() \
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    bad = client.create_partitions([NewPartitions("grow", 5, replica_assignment=[[7]])])["grow"]
    assert error_of(bad).code() == KafkaError.INVALID_REPLICA_ASSIGNMENT

    # old data untouched, new partitions writable
    produce(broker, "grow", 3, partition=3)
    low, high = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"}).get_watermark_offsets(
        TopicPartition("grow", 0), timeout=WAIT_S)
    assert (low, high) == (0, 5)


def test_delete_topics_removes_files_and_stays_deleted_after_restart(broker):
    client = admin(broker)
    result(client.create_topics([NewTopic("doomed", 2, 1), NewTopic("kept", 1, 1)])["doomed"])
    produce(broker, "doomed", 10)
    result(client.delete_topics(["doomed"])["doomed"])
    assert "doomed" not in client.list_topics(timeout=WAIT_S).topics
    wait_until(lambda: not any(p.name.startswith("doomed-") for p in broker.data_dir.iterdir()),
               "the deleted partition directories to go")
    assert error_of(client.delete_topics(["doomed"])["doomed"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    broker.restart()
    client = admin(broker)
    topics = client.list_topics(timeout=WAIT_S).topics
    assert "doomed" not in topics and "kept" in topics
    assert not any(p.name.startswith("doomed") for p in broker.data_dir.iterdir())
    # the name is free again
    result(client.create_topics([NewTopic("doomed", 1, 1)])["doomed"])
    assert Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"}).get_watermark_offsets(
        TopicPartition("doomed", 0), timeout=WAIT_S) == (0, 0)


def test_delete_topics_disabled(broker_factory):
    broker = broker_factory(delete_topic_enable=False)
    client = admin(broker)
    result(client.create_topics([NewTopic("stays", 1, 1)])["stays"])
    assert error_of(client.delete_topics(["stays"])["stays"]).code() == KafkaError.TOPIC_DELETION_DISABLED
    assert "stays" in client.list_topics(timeout=WAIT_S).topics


def test_delete_records_moves_log_start_offset(broker):
    client = admin(broker)
    result(client.create_topics([NewTopic("trim", 1, 1, config={"segment.bytes": "1000"})])["trim"])
    produce(broker, "trim", 40)
    (future,) = client.delete_records([TopicPartition("trim", 0, 25)]).values()
    assert result(future).low_watermark == 25
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "trim",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    assert consumer.get_watermark_offsets(TopicPartition("trim", 0), timeout=WAIT_S) == (25, 40)
    consumer.assign([TopicPartition("trim", 0, 0)])  # below the log start: reset to earliest
    first = None
    while first is None:
        msg = consumer.poll(WAIT_S)
        assert msg is not None
        if msg.error() is None:
            first = msg
    assert first.offset() == 25 and first.value().startswith(b"000025")
    consumer.close()
    assert segment_files(broker, "trim")[0] > "00000000000000000000.log"  # whole segments below went

    (beyond,) = client.delete_records([TopicPartition("trim", 0, 41)]).values()
    assert error_of(beyond).code() == KafkaError.OFFSET_OUT_OF_RANGE
    (to_end,) = client.delete_records([TopicPartition("trim", 0, -1)]).values()
    assert result(to_end).low_watermark == 40
    broker.restart()
    watermarks = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"}).get_watermark_offsets(
        TopicPartition("trim", 0), timeout=WAIT_S)
    assert watermarks == (40, 40)


def test_altered_segment_bytes_rolls_new_segments(broker):
    client = admin(broker)
    result(client.create_topics([NewTopic("rolls", 1, 1)])["rolls"])
    produce(broker, "rolls", 20)
    assert len(segment_files(broker, "rolls")) == 1
    resource = ConfigResource(ResourceType.TOPIC, "rolls", incremental_configs=[
        ConfigEntry("segment.bytes", "1000", incremental_operation=AlterConfigOpType.SET)])
    result(list(client.incremental_alter_configs([resource]).values())[0])
    produce(broker, "rolls", 20)
    assert len(segment_files(broker, "rolls")) >= 3  # ~20 batches of ~170 bytes in 1000-byte segments


def test_altered_retention_bytes_deletes_old_segments(broker_factory):
    broker = broker_factory(props={"log.retention.check.interval.ms": 100})
    client = admin(broker)
    result(client.create_topics([NewTopic("retained", 1, 1, config={"segment.bytes": "1000"})])["retained"])
    produce(broker, "retained", 50)
    before = segment_files(broker, "retained")
    assert len(before) > 5
    resource = ConfigResource(ResourceType.TOPIC, "retained", set_config={"segment.bytes": "1000",
                                                                           "retention.bytes": "2000"})
    result(list(client.alter_configs([resource]).values())[0])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    low, high = wait_until(
        lambda: (w := consumer.get_watermark_offsets(TopicPartition("retained", 0), timeout=WAIT_S))[0] > 0 and w,
        "retention to move the log start offset")
    assert high == 50 and low > 30
    wait_until(lambda: segment_files(broker, "retained")[0] not in before[:2], "old segment files to go")
