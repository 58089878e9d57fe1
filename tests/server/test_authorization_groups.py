"""ACLs on the group, offset, transaction and controller-to-broker APIs (Kafka 2.7's AclAuthorizer).

Every broker is a real process (``broker_factory``) with
``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``, ``super.users=User:admin`` and two
listeners: PLAINTEXT (the harness's; its principal is ``User:ANONYMOUS``, not a super user) and
SASL_PLAINTEXT with PLAIN users admin, alice and bob. ACLs are made by admin with confluent_kafka's
``AdminClient.create_acls``; the clients are librdkafka's (confluent_kafka), and the exact answers of each
API are read over a raw socket (:class:`tests.server.wire.Wire`, as ``User:ANONYMOUS``).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.protocol import ApiKey, ErrorCode
from tests.zookeeper import free_port

from .wire import Wire

pytestmark = pytest.mark.clients

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
ANONYMOUS = "User:ANONYMOUS"
WAIT_S = 30


def _acl_broker(broker_factory, **props):
    port = free_port()
    base = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
            "num.partitions": 1}
    base.update(props)
    broker = broker_factory(base)
    broker.sasl_bootstrap = f"127.0.0.1:{port}"
    return broker


def _conf(broker, user: str, **extra) -> dict:
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret", "log_level": 0,
            **extra}


def _allow(admin: AdminClient, principal: str, resource_type: ResourceType, name: str, *operations: AclOperation,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> None:
    bindings = [AclBinding(resource_type, name, pattern, principal, "*", op, AclPermissionType.ALLOW)
                for op in operations]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=15)


def _create_topics(admin: AdminClient, *names: str, partitions: int = 1) -> None:
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(timeout=15)


def _produce(conf: dict, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({**conf, "acks": "all"})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


def _error_code(exc: KafkaException) -> int:
    return exc.args[0].code()


def _first_consumer_error(conf: dict, group: str, topics: list[str], within: float = WAIT_S) -> KafkaError:
    """The first error a consumer of ``group`` subscribed to ``topics`` reports (through poll or error_cb)."""
    errors: list[KafkaError] = []
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "error_cb": errors.append})
    consumer.subscribe(topics)
    try:
        deadline = time.monotonic() + within
        while not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())
            assert msg is None or msg.error() is not None, "a refused consumer got a record"
    finally:
        consumer.close()
    assert errors, f"no error within {within} s"
    return errors[0]


def _consume(conf: dict, group: str, topic: str, count: int) -> tuple[Consumer, list[bytes]]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.3)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg.value())
    return consumer, got


def _partition_errors(call) -> set[int]:
    """The error codes of a commit()/committed() that may raise or answer per partition."""
    try:
        return {tp.error.code() if tp.error is not None else 0 for tp in call()}
    except KafkaException as exc:
        return {_error_code(exc)}


def _commit_offsets(conf: dict, group: str, offsets: list[TopicPartition]) -> None:
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        result = consumer.commit(offsets=offsets, asynchronous=False)
        assert all(tp.error is None for tp in result), result
    finally:
        consumer.close()


def _group_offsets(admin: AdminClient, group: str) -> list[tuple[str, int, int]]:
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=15)
    return [(tp.topic, tp.partition, tp.offset) for tp in offsets.topic_partitions]


# -- consumer groups with librdkafka -------------------------------------------------------------------------

def test_a_consumer_needs_read_on_its_group_and_on_its_topic(broker_factory):
    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "orders", "secret")
    values = [b"order-%d" % i for i in range(20)]
    _produce(_conf(broker, "admin"), "orders", values)
    alice = _conf(broker, "alice")
    _allow(admin, "User:alice", ResourceType.TOPIC, "orders", AclOperation.READ)

    # no ACL on the group: FindCoordinator is refused; DESCRIBE alone: JoinGroup is
    assert _first_consumer_error(alice, "g1", ["orders"]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(admin, "User:alice", ResourceType.GROUP, "g1", AclOperation.DESCRIBE)
    assert _first_consumer_error(alice, "g1", ["orders"]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    _allow(admin, "User:alice", ResourceType.GROUP, "g1", AclOperation.READ)
    consumer, got = _consume(alice, "g1", "orders", len(values))
    try:
        assert got == values
        committed = consumer.commit(asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed] == [("orders", 0, 20, None)]
        assert [(tp.offset, tp.error) for tp in consumer.committed([TopicPartition("orders", 0)], timeout=15)] == [
            (20, None)]
        # a topic alice may not READ: its offsets can be neither committed nor fetched
        assert _partition_errors(lambda: consumer.commit(offsets=[TopicPartition("secret", 0, 3)],
                                                         asynchronous=False)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
        assert _partition_errors(lambda: consumer.committed([TopicPartition("secret", 0)], timeout=15)) == {
            KafkaError.TOPIC_AUTHORIZATION_FAILED}
    finally:
        consumer.close()
    # the group's offsets are what alice committed, and nothing for the refused topic
    assert _group_offsets(admin, "g1") == [("orders", 0, 20)]


def test_describe_list_and_delete_groups_see_only_what_is_allowed(broker_factory):
    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "t1", "t2")
    for group in ("ga", "gb"):
        _commit_offsets(_conf(broker, "admin"), group, [TopicPartition("t1", 0, 5), TopicPartition("t2", 0, 7)])
    everything = {g.group_id for g in admin.list_consumer_groups().result(timeout=15).valid}
    assert {"ga", "gb"} <= everything

    alice = AdminClient(_conf(broker, "alice"))
    assert {g.group_id for g in alice.list_consumer_groups().result(timeout=15).valid} == set()
    _allow(admin, "User:alice", ResourceType.GROUP, "ga", AclOperation.DESCRIBE)
    _allow(admin, "User:alice", ResourceType.TOPIC, "t1", AclOperation.DESCRIBE)
    assert {g.group_id for g in alice.list_consumer_groups().result(timeout=15).valid} == {"ga"}
    described = alice.describe_consumer_groups(["ga", "gb"])
    assert described["ga"].result(timeout=15).group_id == "ga"
    with pytest.raises(KafkaException) as refused:
        described["gb"].result(timeout=15)
    assert _error_code(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # the group's offsets, all partitions: the topic alice may not DESCRIBE is left out
    assert _group_offsets(alice, "ga") == [("t1", 0, 5)]

    # DESCRIBE on the cluster lists every group
    bob = AdminClient(_conf(broker, "bob"))
    _allow(admin, "User:bob", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
    assert {g.group_id for g in bob.list_consumer_groups().result(timeout=15).valid} == everything

    # deleting needs DELETE
    with pytest.raises(KafkaException) as refused:
        alice.delete_consumer_groups(["ga"])["ga"].result(timeout=15)
    assert _error_code(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert "ga" in {g.group_id for g in admin.list_consumer_groups().result(timeout=15).valid}
    _allow(admin, "User:alice", ResourceType.GROUP, "ga", AclOperation.DELETE)
    alice.delete_consumer_groups(["ga"])["ga"].result(timeout=15)
    assert {g.group_id for g in admin.list_consumer_groups().result(timeout=15).valid} == everything - {"ga"}


# -- producers with librdkafka --------------------------------------------------------------------------------

def test_a_transactional_producer_needs_write_on_its_id_and_topics_and_read_on_the_group(broker_factory):
    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "txin", "txout")
    bob = _conf(broker, "bob")

    def producer() -> Producer:
        return Producer({**bob, "transactional.id": "tx-1", "transaction.timeout.ms": 30_000})

    with pytest.raises(KafkaException) as refused:
        producer().init_transactions(WAIT_S)
    assert _error_code(refused.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    _allow(admin, "User:bob", ResourceType.TRANSACTIONAL_ID, "tx-1", AclOperation.WRITE)
    _allow(admin, "User:bob", ResourceType.TOPIC, "txout", AclOperation.DESCRIBE)
    p = producer()
    p.init_transactions(WAIT_S)
    # the topic is known (DESCRIBE) but not writable: AddPartitionsToTxn refuses it
    p.begin_transaction()
    reports: list = []
    p.produce("txout", b"refused", on_delivery=lambda err, msg: reports.append(err))
    with pytest.raises(KafkaException) as refused:
        p.commit_transaction(WAIT_S)
    assert refused.value.args[0].txn_requires_abort()
    assert _error_code(refused.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # (librdkafka would now send EndTxn for a transaction the coordinator never saw begin, which Kafka
    # refuses with INVALID_TXN_STATE: a new producer of the id starts afresh instead)
    p = producer()
    p.init_transactions(WAIT_S)

    _allow(admin, "User:bob", ResourceType.TOPIC, "txout", AclOperation.WRITE)
    _allow(admin, "User:bob", ResourceType.TOPIC, "txin", AclOperation.READ)
    group = Consumer({**bob, "group.id": "txg"})
    # offsets to a group bob may not READ: AddOffsetsToTxn refuses them
    p.begin_transaction()
    p.produce("txout", b"kept-out")
    with pytest.raises(KafkaException) as refused:
        p.send_offsets_to_transaction([TopicPartition("txin", 0, 5)], group.consumer_group_metadata(), WAIT_S)
    assert _error_code(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    p.abort_transaction(WAIT_S)

    _allow(admin, "User:bob", ResourceType.GROUP, "txg", AclOperation.READ)
    p.begin_transaction()
    p.produce("txout", b"committed")
    p.send_offsets_to_transaction([TopicPartition("txin", 0, 5)], group.consumer_group_metadata(), WAIT_S)
    p.commit_transaction(WAIT_S)
    group.close()
    # the offsets take effect when the coordinator has the transaction's marker, which EndTxn's answer does not
    # wait for (as in Kafka): look until they are there
    deadline = time.monotonic() + WAIT_S
    while _group_offsets(admin, "txg") == [] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group_offsets(admin, "txg") == [("txin", 0, 5)]
    reader, got = _consume(_conf(broker, "admin", **{"isolation.level": "read_committed"}), "reader", "txout", 1)
    reader.close()
    assert got == [b"committed"]


def test_an_idempotent_producer_needs_idempotent_write_on_the_cluster(broker_factory):
    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "idem")
    _allow(admin, "User:alice", ResourceType.TOPIC, "idem", AclOperation.WRITE)
    alice = _conf(broker, "alice")

    # a plain producer writes; an idempotent one is refused its producer id
    _produce(alice, "idem", [b"plain"])
    errors: list[KafkaError] = []
    producer = Producer({**alice, "enable.idempotence": True, "error_cb": errors.append})
    producer.produce("idem", b"idempotent")
    deadline = time.monotonic() + WAIT_S
    while not errors and time.monotonic() < deadline:
        try:
            producer.poll(0.2)
        except KafkaException as exc:  # the fatal error, raised by poll after error_cb saw it
            errors.append(exc.args[0])
    assert errors and errors[0].fatal() and errors[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, errors

    _allow(admin, "User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
    producer = Producer({**alice, "enable.idempotence": True})
    producer.produce("idem", b"idempotent")
    assert producer.flush(30) == 0


# -- the exact answers, over a raw socket as User:ANONYMOUS ---------------------------------------------------

def test_each_group_and_transaction_api_answers_kafkas_refusal(broker_factory):
    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "mine", "theirs")
    _commit_offsets(_conf(broker, "admin"), "gx", [TopicPartition("mine", 0, 3), TopicPartition("theirs", 0, 4)])
    w = Wire(broker.bootstrap)
    try:
        # FindCoordinator: each key type its own error and message, no node
        r = w.call(ApiKey.FIND_COORDINATOR, 3, {"key": "gx", "key_type": 0})
        assert (r["error_code"], r["error_message"], r["node_id"], r["host"], r["port"]) == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1)
        r = w.call(ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
        assert (r["error_code"], r["error_message"]) == (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                         "Transactional Id authorization failed.")
        _allow(admin, ANONYMOUS, ResourceType.GROUP, "gx", AclOperation.DESCRIBE)
        r = w.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["gx", "gy"]})
        assert [(c["key"], c["error_code"]) for c in r["coordinators"]] == [
            ("gx", ErrorCode.NONE), ("gy", ErrorCode.GROUP_AUTHORIZATION_FAILED)]

        # membership needs READ: DESCRIBE is not enough
        join = {"group_id": "gx", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}], "reason": None}
        r = w.call(ApiKey.JOIN_GROUP, 5, join)
        assert (r["error_code"], r["member_id"], r["generation_id"], r["members"]) == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED, "", -1, [])
        r = w.call(ApiKey.SYNC_GROUP, 5, {"group_id": "gx", "generation_id": 1, "member_id": "m",
                                          "group_instance_id": None, "protocol_type": "consumer",
                                          "protocol_name": "range", "assignments": []})
        assert (r["error_code"], r["assignment"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, b"")
        r = w.call(ApiKey.HEARTBEAT, 4, {"group_id": "gx", "generation_id": 1, "member_id": "m",
                                         "group_instance_id": None})
        assert r["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        r = w.call(ApiKey.LEAVE_GROUP, 4, {"group_id": "gx", "members": [{"member_id": "m",
                                                                           "group_instance_id": None}]})
        assert (r["error_code"], r["members"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])

        # OffsetCommit needs READ on the group, else every partition is refused
        commit = {"group_id": "gx", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                  "topics": [{"name": "mine", "partitions": [{"partition_index": 0, "committed_offset": 9,
                                                              "committed_leader_epoch": -1,
                                                              "committed_metadata": ""}]},
                             {"name": "theirs", "partitions": [{"partition_index": 0, "committed_offset": 9,
                                                                "committed_leader_epoch": -1,
                                                                "committed_metadata": ""}]}]}
        r = w.call(ApiKey.OFFSET_COMMIT, 8, commit)
        assert [p["error_code"] for t in r["topics"] for p in t["partitions"]] == [
            ErrorCode.GROUP_AUTHORIZATION_FAILED] * 2
        _allow(admin, ANONYMOUS, ResourceType.GROUP, "gx", AclOperation.READ)
        _allow(admin, ANONYMOUS, ResourceType.TOPIC, "mine", AclOperation.READ)
        r = w.call(ApiKey.OFFSET_COMMIT, 8, commit)
        assert [(t["name"], p["error_code"]) for t in r["topics"] for p in t["partitions"]] == [
            ("mine", ErrorCode.NONE), ("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]

        # OffsetFetch: per partition for named ones, the others left out for all of them
        named = [{"name": "mine", "partition_indexes": [0]}, {"name": "theirs", "partition_indexes": [0]}]
        r = w.call(ApiKey.OFFSET_FETCH, 5, {"group_id": "gx", "topics": named, "require_stable": False})
        assert r["error_code"] == ErrorCode.NONE
        assert [(t["name"], p["committed_offset"], p["error_code"]) for t in r["topics"] for p in t["partitions"]] == [
            ("mine", 9, ErrorCode.NONE), ("theirs", -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
        r = w.call(ApiKey.OFFSET_FETCH, 5, {"group_id": "gx", "topics": None, "require_stable": False})
        assert [(t["name"], p["committed_offset"]) for t in r["topics"] for p in t["partitions"]] == [("mine", 9)]
        r = w.call(ApiKey.OFFSET_FETCH, 1, {"group_id": "gy", "topics": named})
        assert [p["error_code"] for t in r["topics"] for p in t["partitions"]] == [
            ErrorCode.GROUP_AUTHORIZATION_FAILED] * 2
        r = w.call(ApiKey.OFFSET_FETCH, 5, {"group_id": "gy", "topics": named, "require_stable": False})
        assert (r["error_code"], r["topics"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
        r = w.call(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "gx", "topics": None},
                                                       {"group_id": "gy", "topics": None}], "require_stable": False})
        assert [(g["group_id"], g["error_code"], [t["name"] for t in g["topics"]]) for g in r["groups"]] == [
            ("gx", ErrorCode.NONE, ["mine"]), ("gy", ErrorCode.GROUP_AUTHORIZATION_FAILED, [])]

        # DescribeGroups per group, with the operations allowed on it; ListGroups only the described ones
        r = w.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["gx", "gb"], "include_authorized_operations": True})
        gx, gb = r["groups"]
        assert (gx["error_code"], gx["group_state"], gx["authorized_operations"]) == (
            ErrorCode.NONE, "Empty", (1 << AclOperation.READ.value) | (1 << AclOperation.DESCRIBE.value))
        assert (gb["group_id"], gb["error_code"], gb["group_state"], gb["members"]) == (
            "gb", ErrorCode.GROUP_AUTHORIZATION_FAILED, "", [])
        r = w.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert [g["group_id"] for g in r["groups"]] == ["gx"]

        # OffsetDelete needs DELETE on the group; DeleteGroups DELETE on each group
        delete = {"group_id": "gx", "topics": [{"name": "mine", "partitions": [{"partition_index": 0}]},
                                               {"name": "theirs", "partitions": [{"partition_index": 0}]}]}
        r = w.call(ApiKey.OFFSET_DELETE, 0, delete)
        assert (r["error_code"], r["topics"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
        r = w.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["gx", "gb", "gx"]})
        assert [(g["group_id"], g["error_code"]) for g in r["results"]] == [
            ("gx", ErrorCode.GROUP_AUTHORIZATION_FAILED), ("gb", ErrorCode.GROUP_AUTHORIZATION_FAILED)]
        _allow(admin, ANONYMOUS, ResourceType.GROUP, "gx", AclOperation.DELETE)
        r = w.call(ApiKey.OFFSET_DELETE, 0, delete)
        assert r["error_code"] == ErrorCode.NONE
        assert [(t["name"], p["error_code"]) for t in r["topics"] for p in t["partitions"]] == [
            ("mine", ErrorCode.NONE), ("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
        assert _group_offsets(admin, "gx") == [("theirs", 0, 4)]  # "mine" went, "theirs" was kept
        r = w.call(ApiKey.OFFSET_FETCH, 5, {"group_id": "gx", "topics": None, "require_stable": False})
        assert r["topics"] == []

        # producers: an idempotent one needs IDEMPOTENT_WRITE, a transactional one WRITE on its id
        init = {"transactional_id": None, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1}
        r = w.call(ApiKey.INIT_PRODUCER_ID, 4, init)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                                              -1, -1)
        r = w.call(ApiKey.INIT_PRODUCER_ID, 4, {**init, "transactional_id": "tx"})
        assert (r["error_code"], r["producer_id"]) == (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
        txn = {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 0}
        assert w.call(ApiKey.END_TXN, 3, {**txn, "committed": True})["error_code"] == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        r = w.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {**txn, "topics": [{"name": "mine", "partitions": [0]}]})
        assert r["results"][0]["results"][0]["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert w.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**txn, "group_id": "gy"})["error_code"] == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        txn_commit = {**txn, "group_id": "gy", "generation_id": -1, "member_id": "", "group_instance_id": None,
                      "topics": [{"name": "mine", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                  "committed_leader_epoch": -1,
                                                                  "committed_metadata": ""}]}]}
        r = w.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit)
        assert r["topics"][0]["partitions"][0]["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # with WRITE on the id: the group comes next, then the topics (an internal one is never added)
        _allow(admin, ANONYMOUS, ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
        assert w.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**txn, "group_id": "gy"})["error_code"] == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED)
        r = w.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit)
        assert r["topics"][0]["partitions"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        r = w.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {**txn, "topics": [{"name": "mine", "partitions": [0]},
                                                                       {"name": "__consumer_offsets",
                                                                        "partitions": [0]}]})
        assert [(t["name"], t["results"][0]["error_code"]) for t in r["results"]] == [
            ("mine", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("__consumer_offsets", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]

        # KIP-664's views
        r = w.call(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "theirs", "partition_indexes": [0]}]})
        assert r["topics"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        r = w.call(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "mine", "partition_indexes": [0]}]})
        assert r["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
        r = w.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["other"]})
        assert r["transaction_states"][0]["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        r = w.call(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
        assert r["error_code"] == ErrorCode.NONE
    finally:
        w.close()


def test_a_client_cannot_send_what_only_the_controller_sends(broker_factory):
    """LeaderAndIsr, UpdateMetadata, StopReplica, WriteTxnMarkers and ControlledShutdown from User:ANONYMOUS
    (not in super.users, no CLUSTER_ACTION) get CLUSTER_AUTHORIZATION_FAILED and change nothing."""
    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "held")
    _produce(_conf(broker, "admin"), "held", [b"a", b"b", b"c"])
    lead = {"controller_id": 0, "controller_epoch": 99, "broker_epoch": -1,
            "topic_states": [{"topic_name": "held", "partition_states": [{
                "partition_index": 0, "controller_epoch": 99, "leader": 5, "leader_epoch": 1000, "isr": [5, 0],
                "zk_version": 99, "replicas": [5, 0], "adding_replicas": [], "removing_replicas": [],
                "is_new": False}]}],
            "live_leaders": [{"broker_id": 5, "host_name": "127.0.0.1", "port": 1}]}
    stop = {"controller_id": 0, "controller_epoch": 99, "broker_epoch": -1,
            "topic_states": [{"topic_name": "held", "partition_states": [
                {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}]}
    update = {"controller_id": 0, "controller_epoch": 99, "broker_epoch": -1, "topic_states": [],
              "live_brokers": []}
    markers = {"markers": [{"producer_id": 1234, "producer_epoch": 0, "transaction_result": False,
                            "topics": [{"name": "held", "partition_indexes": [0]}], "coordinator_epoch": 0}]}
    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with Wire(broker.bootstrap) as w:
        r = w.call(ApiKey.LEADER_AND_ISR, 4, lead)
        assert (r["error_code"], [p["error_code"] for p in r["partition_errors"]]) == (refused, [refused])
        r = w.call(ApiKey.STOP_REPLICA, 3, stop)
        assert (r["error_code"], [p["error_code"] for p in r["partition_errors"]]) == (refused, [refused])
        assert w.call(ApiKey.UPDATE_METADATA, 6, update)["error_code"] == refused
        r = w.call(ApiKey.WRITE_TXN_MARKERS, 1, markers)
        assert [p["error_code"] for m in r["markers"] for t in m["topics"] for p in t["partitions"]] == [refused]
        r = w.call(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 0, "broker_epoch": -1})
        assert (r["error_code"], r["remaining_partitions"]) == (refused, [])

    # nothing changed: the broker still leads "held" with its records (no marker), and knows itself
    metadata = admin.list_topics("held", timeout=15)
    assert [b.id for b in metadata.brokers.values()] == [0]
    assert metadata.topics["held"].partitions[0].leader == 0
    assert (broker.data_dir / "held-0").is_dir()
    reader, got = _consume(_conf(broker, "admin"), "after", "held", 3)
    try:
        assert got == [b"a", b"b", b"c"]
        assert reader.get_watermark_offsets(TopicPartition("held", 0), timeout=15) == (0, 3)
    finally:
        reader.close()
    _produce(_conf(broker, "admin"), "held", [b"d"])
    # one WARNING a minute per host and principal, however many such requests come (no log flood)
    lines = [line for line in broker.stderr_text().splitlines()
             if "refused with CLUSTER_AUTHORIZATION_FAILED: principal User:ANONYMOUS may not CLUSTER_ACTION" in line]
    assert len(lines) == 1 and "LeaderAndIsr from 127.0.0.1:" in lines[0], lines


def test_without_an_authorizer_nothing_is_checked(broker_factory):
    """The same raw requests on a broker without ``authorizer.class.name``: answered as before."""
    broker = broker_factory()
    with Wire(broker.bootstrap) as w:
        r = w.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60_000,
                                                "producer_id": -1, "producer_epoch": -1})
        assert r["error_code"] == ErrorCode.NONE and r["producer_id"] >= 0
        r = w.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert r["error_code"] in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        r = w.call(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": "nowhere", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_metadata": ""}]}]})
        assert r["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # asked for, the operations on a group are all of them (READ, DESCRIBE, DELETE), as Kafka answers
        r = w.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": True})
        assert (r["groups"][0]["error_code"], r["groups"][0]["authorized_operations"]) == (
            ErrorCode.NONE, (1 << 3) | (1 << 6) | (1 << 8))
        r = w.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False})
        assert r["groups"][0]["authorized_operations"] == -(2**31)
