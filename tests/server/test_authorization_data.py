"""What the data and admin APIs enforce with the ACL authorizer on (Kafka 2.7's KafkaApis): Produce, Fetch,
ListOffsets, Metadata, OffsetForLeaderEpoch, CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs, AlterReplicaLogDirs,
DescribeCluster, ElectLeaders and the partition reassignments.

Every broker is a real process with ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``,
``super.users=User:admin`` and a SASL_PLAINTEXT listener whose PLAIN users are admin, alice and bob (its
PLAINTEXT listener, the first, serves ``User:ANONYMOUS``). ACLs are made by admin with librdkafka's admin
client; the clients are librdkafka's, and raw requests (:class:`tests.server.wire.Wire`, after a PLAIN
exchange) where the exact answer matters.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.protocol import ApiKey, ErrorCode
from tests.security import acl_broker

from .wire import Wire, make_batch

pytestmark = pytest.mark.clients

TAF, CAF, TXNAF = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
NOT_ASKED = -(2**31)
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def _conf(broker, user: str, **extra) -> dict:
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret", "log_level": 0,
            **extra}


def _admin(broker, user: str = "admin") -> AdminClient:
    return AdminClient(_conf(broker, user))


def _acl(rtype, name: str, principal: str, operation, permission=AclPermissionType.ALLOW,
         pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", operation, permission)


def _grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=15)


def _topics(admin: AdminClient, *names: str, partitions: int = 1) -> None:
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(timeout=30)


def _code(future) -> int:
    """The error code a librdkafka admin future ends with (0 when it succeeds)."""
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        return exc.args[0].code()
    return 0


def _produce(conf: dict, topic: str, values: list[bytes], **extra) -> list:
    """Delivery results (None or a KafkaError per record) of a librdkafka producer writing partition 0."""
    results = []
    producer = Producer({**conf, "acks": "all", "message.timeout.ms": 20000, **extra})
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, _msg: results.append(err))
    producer.flush(30)
    return results


def _consume(conf: dict, topic: str, count: int, within: float = 30) -> tuple[list[bytes], list[KafkaError]]:
    """Read partition 0 from the start (assign, no subscription): the values, or the first errors."""
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, errors = [], []
    deadline = time.monotonic() + within
    try:
        while len(got) < count and not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error())
            else:
                got.append(msg.value())
    finally:
        consumer.close()
    return got, errors


def _wire(broker, user: str | None) -> Wire:
    """A raw connection as ``user`` (PLAIN), or as User:ANONYMOUS on the PLAINTEXT listener (None)."""
    if user is None:
        return Wire(broker.bootstrap)
    w = Wire(broker.sasl_bootstrap)
    assert w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    body = w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": f"\0{user}\0{user}-secret".encode()})
    assert body["error_code"] == 0, body
    return w


def _produce_raw(w: Wire, topic: str, batch: bytes, transactional_id: str | None = None, partitions=(0,),
                 acks: int = -1) -> list[int]:
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": batch} for p in partitions]}]}
    response = w.call(ApiKey.PRODUCE, 8, body)
    return [p["error_code"] for t in response["responses"] for p in t["partition_responses"]]


def _fetch_raw(w: Wire, topics: dict[str, list[int]], replica_id: int = -1) -> dict:
    body = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": t, "partitions": [{"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                                                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                                                   for p in ps]} for t, ps in topics.items()]}
    return {(t["topic"], p["partition_index"]): p for t in w.call(ApiKey.FETCH, 11, body)["responses"]
            for p in t["partitions"]}


def _metadata(w: Wire, names: list[str] | None, auto: bool = False, version: int = 9, **flags) -> dict:
    body = {"topics": None if names is None else [{"name": n} for n in names], "allow_auto_topic_creation": auto,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False, **flags}
    return w.call(ApiKey.METADATA, version, body)


def test_produce_needs_write_and_consume_needs_read(broker_factory):
    broker = acl_broker(broker_factory)
    admin = _admin(broker)
    _topics(admin, "t", "other", partitions=2)
    _grant(admin,
           _acl(ResourceType.TOPIC, "t", "User:alice", AclOperation.WRITE),
           _acl(ResourceType.TOPIC, "t", "User:alice", AclOperation.READ),
           _acl(ResourceType.TOPIC, "t", "User:bob", AclOperation.DESCRIBE),
           _acl(ResourceType.GROUP, "g-", "User:*", AclOperation.READ, pattern=ResourcePatternType.PREFIXED))
    values = [b"v%d" % i for i in range(5)]
    assert _produce(_conf(broker, "alice"), "t", values) == [None] * 5
    # bob may describe t (Metadata answers) but not write it: the Produce is refused
    results = _produce(_conf(broker, "bob"), "t", [b"x"])
    assert [r.code() for r in results] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # no ACL on "other" for alice: Metadata already refuses it, and librdkafka reports it
    results = _produce(_conf(broker, "alice"), "other", [b"x"])
    assert [r.code() for r in results] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _consume(_conf(broker, "alice"), "t", 5) == (values, [])
    got, errors = _consume(_conf(broker, "bob"), "t", 5)
    assert got == [] and [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    # the exact answers: one topic refused, the other served, in one request
    with _wire(broker, "alice") as w:
        batch = make_batch([b"raw"])
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": "other", "partition_data": [{"index": 0, "records": batch}, {"index": 1, "records": batch}]},
            {"name": "t", "partition_data": [{"index": 1, "records": batch}]}]}
        response = w.call(ApiKey.PRODUCE, 8, body)["responses"]
        assert [(p["error_code"], p["base_offset"], p["error_message"]) for p in response[0]["partition_responses"]] \
            == [(TAF, -1, None), (TAF, -1, None)]
        assert response[1]["partition_responses"][0]["error_code"] == 0
        # an unauthorized topic that does not exist is not created, and says TOPIC_AUTHORIZATION_FAILED
        assert _produce_raw(w, "nowhere", batch) == [TAF]
        fetched = _fetch_raw(w, {"other": [0, 1], "t": [0, 1]})
        assert [(fetched["other", p]["error_code"], fetched["other", p]["high_watermark"]) for p in (0, 1)] == [
            (TAF, -1), (TAF, -1)]
        assert fetched["t", 0]["error_code"] == 0 and fetched["t", 0]["high_watermark"] == 5
        assert fetched["t", 1]["high_watermark"] == 1
    with _wire(broker, "admin") as w:
        names = [t["name"] for t in _metadata(w, None)["topics"]]
        assert "nowhere" not in names and {"t", "other"} <= set(names)
    with _wire(broker, "bob") as w:  # DESCRIBE only: ListOffsets and OffsetForLeaderEpoch answer, Fetch does not
        fetched = _fetch_raw(w, {"t": [0]})
        assert fetched["t", 0]["error_code"] == TAF and fetched["t", 0]["records"] in (b"", None)
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": n, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1,
                                        "max_num_offsets": 1}]} for n in ("t", "other")]}
        topics = {t["name"]: t["partitions"][0] for t in w.call(ApiKey.LIST_OFFSETS, 5, body)["topics"]}
        assert (topics["t"]["error_code"], topics["t"]["offset"]) == (0, 5)
        assert (topics["other"]["error_code"], topics["other"]["offset"], topics["other"]["timestamp"]) == (
            TAF, -1, -1)
        body = {"replica_id": -1, "topics": [{"topic": n, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]} for n in ("t", "other")]}
        topics = {t["topic"]: t["partitions"][0] for t in w.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body)["topics"]}
        assert (topics["t"]["error_code"], topics["t"]["end_offset"]) == (0, 5)
        assert (topics["other"]["error_code"], topics["other"]["leader_epoch"], topics["other"]["end_offset"]) == (
            TAF, -1, -1)
    with _wire(broker, None) as w:  # User:ANONYMOUS, no ACL at all
        assert _produce_raw(w, "t", make_batch([b"anon"])) == [TAF]
        assert _fetch_raw(w, {"t": [0]})["t", 0]["error_code"] == TAF


def test_prefixed_acls_and_a_deny_beats_an_allow(broker_factory):
    broker = acl_broker(broker_factory)
    admin = _admin(broker)
    _topics(admin, "pre.a", "pre.b", "prefix", "d")
    _grant(admin,
           _acl(ResourceType.TOPIC, "pre.", "User:alice", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
           _acl(ResourceType.TOPIC, "pre.", "User:alice", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
           _acl(ResourceType.TOPIC, "d", "User:*", AclOperation.ALL),
           _acl(ResourceType.TOPIC, "d", "User:alice", AclOperation.WRITE, AclPermissionType.DENY),
           _acl(ResourceType.GROUP, "g-", "User:*", AclOperation.READ, pattern=ResourcePatternType.PREFIXED))
    alice = _conf(broker, "alice")
    assert _produce(alice, "pre.a", [b"a"]) == [None]
    assert _produce(alice, "pre.b", [b"b"]) == [None]
    assert [r.code() for r in _produce(alice, "prefix", [b"p"])] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _consume(alice, "pre.b", 1) == ([b"b"], [])
    # on "d" everyone may do everything, but alice is denied WRITE: her READ (and DESCRIBE) stand
    assert _produce(_conf(broker, "bob"), "d", [b"bob"]) == [None]
    assert [r.code() for r in _produce(alice, "d", [b"alice"])] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _consume(alice, "d", 1) == ([b"bob"], [])
    with _wire(broker, "alice") as w:
        assert _produce_raw(w, "d", make_batch([b"x"])) == [TAF]
        assert _produce_raw(w, "pre.a", make_batch([b"x"])) == [0]


def test_metadata_hides_topics_without_describe_and_auto_creation_needs_create(broker_factory):
    broker = acl_broker(broker_factory)
    admin = _admin(broker)
    _topics(admin, "seen", "hidden")
    _grant(admin,
           _acl(ResourceType.TOPIC, "seen", "User:alice", AclOperation.DESCRIBE),
           _acl(ResourceType.TOPIC, "new-", "User:alice", AclOperation.DESCRIBE, pattern=ResourcePatternType.PREFIXED),
           _acl(ResourceType.TOPIC, "new-yes", "User:alice", AclOperation.CREATE))
    assert set(_admin(broker, "alice").list_topics(timeout=15).topics) == {"seen"}
    assert {"seen", "hidden"} <= set(admin.list_topics(timeout=15).topics)
    with _wire(broker, "alice") as w:
        assert [t["name"] for t in _metadata(w, None)["topics"]] == ["seen"]
        assert [t["name"] for t in _metadata(w, [], version=0)["topics"]] == ["seen"]
        topics = {t["name"]: t for t in _metadata(w, ["hidden", "seen", "missing"])["topics"]}
        assert topics["seen"]["error_code"] == 0 and topics["seen"]["partitions"]
        for name in ("hidden", "missing"):  # refused alike: whether it exists is not told
            assert (topics[name]["error_code"], topics[name]["partitions"], topics[name]["is_internal"]) == (
                TAF, [], False)
        # auto-creation: DESCRIBE and CREATE on the topic (or CREATE on the cluster)
        topics = {t["name"]: t for t in _metadata(w, ["new-no", "new-yes"], auto=True)["topics"]}
        assert topics["new-no"]["error_code"] == TAF
        assert topics["new-yes"]["error_code"] == 0 and topics["new-yes"]["partitions"]
        # not made: without auto-creation DESCRIBE shows it unknown
        assert _metadata(w, ["new-no"])["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # authorized operations (v8+): only when asked; the cluster's are 0 without DESCRIBE on it
        body = _metadata(w, ["seen", "new-yes"], include_topic_authorized_operations=True,
                         include_cluster_authorized_operations=True, version=8)
        ops = {t["name"]: t["topic_authorized_operations"] for t in body["topics"]}
        assert ops == {"seen": 1 << 8, "new-yes": (1 << 8) | (1 << 5)}
        assert body["cluster_authorized_operations"] == 0
        body = _metadata(w, ["seen"])
        assert body["topics"][0]["topic_authorized_operations"] == NOT_ASKED
        body = w.call(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
        assert (body["error_code"], body["cluster_authorized_operations"]) == (0, 0)
    with _wire(broker, None) as w:
        assert _metadata(w, None)["topics"] == []
        assert _produce_raw(w, "new-anon", make_batch([b"x"])) == [TAF]
    with _wire(broker, "admin") as w:
        names = {t["name"] for t in _metadata(w, None)["topics"]}
        assert "new-no" not in names and "new-anon" not in names and "new-yes" in names
        body = _metadata(w, ["seen"], include_cluster_authorized_operations=True, version=8)
        assert body["cluster_authorized_operations"] == ALL_CLUSTER_OPERATIONS
        body = w.call(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
        assert body["cluster_authorized_operations"] == ALL_CLUSTER_OPERATIONS


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_admin_apis_are_refused_without_their_acl_and_served_with_it(broker_factory):
    broker = acl_broker(broker_factory)
    admin = _admin(broker)
    alice = _admin(broker, "alice")
    _topics(admin, "kept")
    _grant(admin, _acl(ResourceType.TOPIC, "c1", "User:alice", AclOperation.DESCRIBE))

    assert _code(alice.create_topics([NewTopic("c1", 1, 1)])["c1"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(admin, _acl(ResourceType.TOPIC, "c1", "User:alice", AclOperation.CREATE))
    assert _code(alice.create_topics([NewTopic("c1", 1, 1)])["c1"]) == 0

    assert _code(alice.create_partitions([NewPartitions("c1", 2)])["c1"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(admin, _acl(ResourceType.TOPIC, "c1", "User:alice", AclOperation.ALTER))
    assert _code(alice.create_partitions([NewPartitions("c1", 2)])["c1"]) == 0

    resource = ConfigResource(ResourceType.TOPIC, "c1")
    (future,) = alice.describe_configs([resource]).values()
    assert _code(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    (future,) = alice.alter_configs([ConfigResource(ResourceType.TOPIC, "c1",
                                                    set_config={"retention.ms": "3600000"})]).values()
    assert _code(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    incremental = ConfigResource(ResourceType.TOPIC, "c1", incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    (future,) = alice.incremental_alter_configs([incremental]).values()
    assert _code(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(admin, _acl(ResourceType.TOPIC, "c1", "User:alice", AclOperation.DESCRIBE_CONFIGS))
    (future,) = alice.describe_configs([resource]).values()
    assert future.result(timeout=15)["retention.ms"].value == "604800000"
    (future,) = alice.incremental_alter_configs([incremental]).values()
    assert _code(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED  # DESCRIBE_CONFIGS does not allow altering
    _grant(admin, _acl(ResourceType.TOPIC, "c1", "User:alice", AclOperation.ALTER_CONFIGS))
    (future,) = alice.incremental_alter_configs([incremental]).values()
    assert _code(future) == 0
    (future,) = admin.describe_configs([resource]).values()
    assert future.result(timeout=15)["retention.ms"].value == "7200000"
    (future,) = alice.alter_configs([ConfigResource(ResourceType.TOPIC, "c1",
                                                    set_config={"retention.ms": "3600000"})]).values()
    assert _code(future) == 0
    # broker configs are the cluster's
    (future,) = alice.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    assert _code(future) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    assert _code(future) == 0

    assert _produce(_conf(broker, "admin"), "c1", [b"a", b"b", b"c"]) == [None] * 3
    (future,) = alice.delete_records([TopicPartition("c1", 0, 2)]).values()
    assert _code(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _code(alice.delete_topics(["c1"])["c1"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(admin, _acl(ResourceType.TOPIC, "c1", "User:alice", AclOperation.DELETE))
    (future,) = alice.delete_records([TopicPartition("c1", 0, 2)]).values()
    assert future.result(timeout=15).low_watermark == 2
    assert _code(alice.delete_topics(["kept"])["kept"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _code(alice.delete_topics(["c1"])["c1"]) == 0
    assert "kept" in admin.list_topics(timeout=15).topics

    with _wire(broker, "alice") as w:
        # CREATE without DESCRIBE_CONFIGS: made, but answered without its configs (v5+)
        _grant(admin, _acl(ResourceType.TOPIC, "c2", "User:alice", AclOperation.CREATE))
        body = {"topics": [{"name": n, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
                           for n in ("c2", "c3")], "timeout_ms": 10000, "validate_only": False}
        topics = {t["name"]: t for t in w.call(ApiKey.CREATE_TOPICS, 5, body)["topics"]}
        assert (topics["c2"]["error_code"], topics["c2"]["num_partitions"], topics["c2"]["replication_factor"],
                topics["c2"]["configs"], topics["c2"]["topic_config_error_code"]) == (0, -1, -1, [], TAF)
        assert (topics["c3"]["error_code"], topics["c3"]["error_message"], topics["c3"]["num_partitions"]) == (
            TAF, "Authorization failed.", -1)
        body = {"topics": [{"name": "kept", "count": 3, "assignments": None}], "timeout_ms": 5000,
                "validate_only": False}
        (result,) = w.call(ApiKey.CREATE_PARTITIONS, 2, body)["results"]
        assert result["error_code"] == TAF
        body = {"topics": [{"name": "kept", "partitions": [{"partition_index": 0, "offset": -1}]}], "timeout_ms": 5000}
        (p,) = w.call(ApiKey.DELETE_RECORDS, 1, body)["topics"][0]["partitions"]
        assert (p["error_code"], p["low_watermark"]) == (TAF, -1)
        body = {"topic_names": ["kept", "absent"], "timeout_ms": 5000}
        codes = {r["name"]: r["error_code"] for r in w.call(ApiKey.DELETE_TOPICS, 4, body)["responses"]}
        assert codes == {"kept": TAF, "absent": TAF}
        body = {"resources": [{"resource_type": 2, "resource_name": "kept", "configuration_keys": None},
                              {"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        results = w.call(ApiKey.DESCRIBE_CONFIGS, 3, body)["results"]
        assert [(r["error_code"], r["error_message"], r["configs"]) for r in results] == [
            (TAF, "Topic authorization failed.", []), (CAF, "Cluster authorization failed.", [])]
        body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.cleaner.threads", "value": "2"}]}], "validate_only": True}
        assert w.call(ApiKey.ALTER_CONFIGS, 1, body)["responses"][0]["error_code"] == CAF


def test_cluster_apis_need_their_cluster_acl(broker_factory):
    broker = acl_broker(broker_factory)
    admin = _admin(broker)
    _topics(admin, "t")
    _grant(admin, _acl(ResourceType.TOPIC, "t", "User:alice", AclOperation.ALL))
    log_dir = str(broker.data_dir)
    with _wire(broker, "alice") as w:
        body = w.call(ApiKey.DESCRIBE_LOG_DIRS, 3, {"topics": None})
        assert (body["error_code"], body["results"]) == (CAF, [])
        body = w.call(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})
        assert body["results"] == []
        body = {"dirs": [{"path": log_dir, "topics": [{"name": "t", "partitions": [0]}]}]}
        (result,) = w.call(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, body)["results"]
        assert (result["topic_name"], result["partitions"]) == ("t", [{"partition_index": 0, "error_code": CAF}])
        body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partition_id": [0]}], "timeout_ms": 5000}
        body = w.call(ApiKey.ELECT_LEADERS, 1, body)
        assert body["error_code"] == CAF
        assert [(p["partition_id"], p["error_code"]) for p in body["replica_election_results"][0]["partition_result"]] \
            == [(0, CAF)]
        body = {"timeout_ms": 5000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]}]}]}
        body = w.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)
        assert body["error_code"] == CAF and body["error_message"]
        assert [(p["partition_index"], p["error_code"]) for p in body["responses"][0]["partitions"]] == [(0, CAF)]
        body = w.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 5000, "topics": None})
        assert (body["error_code"], body["topics"]) == (CAF, [])
        # a follower's Fetch needs CLUSTER_ACTION: refused per partition, as Kafka (TOPIC_AUTHORIZATION_FAILED)
        fetched = _fetch_raw(w, {"t": [0]}, replica_id=0)
        assert (fetched["t", 0]["error_code"], fetched["t", 0]["high_watermark"]) == (TAF, -1)
        assert _fetch_raw(w, {"t": [0]})["t", 0]["error_code"] == 0  # as a consumer, READ on t is enough
    with _wire(broker, "admin") as w:
        body = w.call(ApiKey.DESCRIBE_LOG_DIRS, 3, {"topics": None})
        assert body["error_code"] == 0 and [r["error_code"] for r in body["results"]] == [0]
        body = w.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 5000, "topics": None})
        assert (body["error_code"], body["topics"]) == (0, [])
        body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partition_id": [0]}], "timeout_ms": 5000}
        body = w.call(ApiKey.ELECT_LEADERS, 1, body)
        assert body["error_code"] == 0
        assert body["replica_election_results"][0]["partition_result"][0]["error_code"] != CAF
    _grant(admin, _acl(ResourceType.BROKER, "kafka-cluster", "User:bob", AclOperation.DESCRIBE))
    with _wire(broker, "bob") as w:
        body = w.call(ApiKey.DESCRIBE_LOG_DIRS, 3, {"topics": None})
        assert body["error_code"] == 0 and len(body["results"]) == 1
        body = w.call(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
        assert body["cluster_authorized_operations"] == 1 << 8


def test_idempotent_and_transactional_produce_need_their_acls(broker_factory):
    broker = acl_broker(broker_factory)
    admin = _admin(broker)
    _topics(admin, "t")
    _grant(admin, _acl(ResourceType.TOPIC, "t", "User:alice", AclOperation.WRITE))
    idempotent = make_batch([b"i"])
    idempotent = _with_producer(idempotent, producer_id=7)
    transactional = _with_producer(make_batch([b"x"]), producer_id=8, transactional=True)
    with _wire(broker, "alice") as w:
        assert _produce_raw(w, "t", idempotent, partitions=(0,)) == [CAF]
        assert _produce_raw(w, "t", transactional, transactional_id="tx") == [TXNAF]
        assert _produce_raw(w, "t", transactional) == [TXNAF]  # a transactional batch without an id
        assert _produce_raw(w, "t", make_batch([b"plain"])) == [0]
        w.send(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": idempotent}]}]})
        assert w.is_closed_by_peer()  # acks=0: no answer to carry the error, the connection closes
    # librdkafka's idempotent producer: refused its producer id (InitProducerId), a fatal error
    errors = []
    producer = Producer({**_conf(broker, "alice"), "enable.idempotence": True,
                         "error_cb": lambda error: errors.append(error)})
    producer.produce("t", b"idem", partition=0)
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        try:
            producer.poll(0.2)
        except (KafkaException, SystemError) as exc:  # the fatal error may surface from the callback
            errors.append(exc.args[0] if isinstance(exc, KafkaException) else exc)
    assert any(isinstance(e, KafkaError) and e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
               for e in errors), errors
    del producer
    _grant(admin, _acl(ResourceType.BROKER, "kafka-cluster", "User:alice", AclOperation.IDEMPOTENT_WRITE))
    assert _produce(_conf(broker, "alice"), "t", [b"idem"], **{"enable.idempotence": True}) == [None]
    _grant(admin, _acl(ResourceType.TRANSACTIONAL_ID, "tx", "User:alice", AclOperation.WRITE))
    with _wire(broker, "alice") as w:
        # authorized for the id: the topic check follows (and the batch then meets the log's own rules)
        assert _produce_raw(w, "t", transactional, transactional_id="tx") != [TXNAF]


def _with_producer(batch: bytes, producer_id: int, transactional: bool = False) -> bytes:
    """``batch`` rebuilt as a producer with that id (epoch 0, sequence 0) would send it."""
    from broker.records import BatchBuilder, decode_batch

    decoded = decode_batch(memoryview(batch))
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=transactional)
    for record in decoded.records:
        builder.append(timestamp=decoded.timestamp_of(record), key=record.key, value=record.value)
    return builder.build()


def test_allow_everyone_if_no_acl_found(broker_factory):
    broker = acl_broker(broker_factory, **{"allow.everyone.if.no.acl.found": "true"})
    admin = _admin(broker)
    _topics(admin, "free", "guarded")
    _grant(admin, _acl(ResourceType.TOPIC, "guarded", "User:alice", AclOperation.ALL))
    bob = _conf(broker, "bob")
    assert _produce(bob, "free", [b"b"]) == [None]
    assert _consume(bob, "free", 1) == ([b"b"], [])
    assert [r.code() for r in _produce(bob, "guarded", [b"b"])] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _produce(_conf(broker, "alice"), "guarded", [b"a"]) == [None]
    with _wire(broker, None) as w:
        assert _produce_raw(w, "free", make_batch([b"anon"])) == [0]
        names = [t["name"] for t in _metadata(w, None)["topics"]]
        assert "free" in names and "guarded" not in names
