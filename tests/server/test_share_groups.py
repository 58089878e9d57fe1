"""Share groups (KIP-932) on one broker, with librdkafka's ShareConsumer (confluent-kafka) and on the wire:
records shared out without overlap, released and expired records delivered again with their delivery count,
rejected and acknowledged ones never again (across a broker restart too), the delivery limit, read_committed,
records held at close going to another member, and Kafka's session and membership errors.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from broker.protocol import ApiKey, ErrorCode

from .test_metrics import scrape
from .conftest import SHARE_LOCK_MS
from .wire import Wire

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

LIMIT_S = 30  # guards against a hang, not a timing assertion
LOCK_MS = SHARE_LOCK_MS  # the broker's record lock duration in these tests (the share_broker fixture)


def make_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"queue-{uuid.uuid4().hex[:8]}"
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([admin_mod.NewTopic(name, partitions, 1)])[name].result(LIMIT_S)
    return name


def earliest(bootstrap: str, group: str) -> None:
    """The group starts at the log start (share.auto.offset.reset, a group config; the default is latest)."""
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    resource = admin_mod.ConfigResource(admin_mod.ResourceType.GROUP, group, incremental_configs=[
        admin_mod.ConfigEntry("share.auto.offset.reset", "earliest",
                              incremental_operation=admin_mod.AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(LIMIT_S)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, **conf) -> list[bytes]:
    producer = ck.Producer({"bootstrap.servers": bootstrap, **conf})
    values = [b"rec-%d" % i for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(LIMIT_S) == 0
    return values


def share_consumer(bootstrap: str, group: str, topic: str, **conf):
    consumer = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumers, count: int, ack=None, limit: float = LIMIT_S) -> list[list]:
    """Poll each consumer in turn until ``count`` records arrived in all; ``ack`` acknowledges each."""
    got = [[] for _ in consumers]
    deadline = time.monotonic() + limit
    while sum(map(len, got)) < count and time.monotonic() < deadline:
        for consumer, bucket in zip(consumers, got):
            for msg in consumer.poll(timeout=0.2):
                if msg.error() is None:
                    bucket.append(msg)
                    if ack is not None:
                        consumer.acknowledge(msg, ack)
    return got


def test_two_members_share_the_records_once_each(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap, 2), "shared"
    earliest(bootstrap, group)
    values = produce(bootstrap, topic, 200, partitions=2)
    a, b = share_consumer(bootstrap, group, topic), share_consumer(bootstrap, group, topic)
    try:
        got = poll_until([a, b], 200)
        everything = sorted(m.value() for bucket in got for m in bucket)
        assert everything == sorted(values)  # every record, none twice
        assert all(m.delivery_count() == 1 for bucket in got for m in bucket)
        a.commit_sync()
        b.commit_sync()
    finally:
        a.close()
        b.close()
    # acknowledged (implicitly): a new member of the group gets nothing more
    c = share_consumer(bootstrap, group, topic)
    try:
        assert poll_until([c], 1, limit=3) == [[]]
    finally:
        c.close()


def test_released_and_expired_records_come_again_rejected_ones_never(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "redelivery"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 6)
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        [first] = poll_until([consumer], 6)
        assert [m.offset() for m in first] == list(range(6))
        for msg in first:
            kind = {0: ck.AcknowledgeType.RELEASE, 1: ck.AcknowledgeType.REJECT}.get(msg.offset(),
                                                                                  ck.AcknowledgeType.ACCEPT)
            consumer.acknowledge(msg, kind)
        consumer.commit_sync()
        [again] = poll_until([consumer], 1)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(0, 2)]  # released: delivered again
        # acknowledged after its lock expired: refused (INVALID_RECORD_STATE), and the record comes a third time
        time.sleep(LOCK_MS / 1000 * 2)
        consumer.acknowledge(again[0], ck.AcknowledgeType.ACCEPT)
        results = consumer.commit_sync()  # per partition: None, or a KafkaException
        assert {err.args[0].code() for err in results.values() if err is not None} == {
            ck.KafkaError.INVALID_RECORD_STATE}
        [third] = poll_until([consumer], 1)
        assert [(m.offset(), m.delivery_count()) for m in third] == [(0, 3)]
        consumer.acknowledge(third[0], ck.AcknowledgeType.ACCEPT)
        assert all(err is None for err in consumer.commit_sync().values())
        assert poll_until([consumer], 1, limit=3) == [[]]  # rejected and accepted: never again
    finally:
        consumer.close()


def test_records_held_at_close_go_to_another_member_and_acks_survive_a_restart(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "handover"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 10)
    first = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    [held] = poll_until([first], 10)
    for msg in held[:4]:
        first.acknowledge(msg, ck.AcknowledgeType.ACCEPT)
    first.commit_sync()
    first.close()  # the other 6 were never acknowledged: released at once, not at the lock's expiry
    share_broker.restart()  # what was acknowledged is stored: never delivered again
    second = share_consumer(bootstrap, group, topic)
    try:
        [rest] = poll_until([second], 6)
        assert sorted(m.offset() for m in rest) == list(range(4, 10))
        assert all(m.delivery_count() == 2 for m in rest)
    finally:
        second.close()


def test_a_record_released_delivery_limit_times_is_archived(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "poison"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 2)
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    counts = []
    try:
        for _ in range(5):  # group.share.delivery.count.limit: 5
            [batch] = poll_until([consumer], 1)
            poison = [m for m in batch if m.offset() == 0]
            assert poison, f"offset 0 not delivered again after {counts}"
            counts.append(poison[0].delivery_count())
            for msg in batch:
                consumer.acknowledge(msg, ck.AcknowledgeType.RELEASE if msg.offset() == 0
                                     else ck.AcknowledgeType.ACCEPT)
            consumer.commit_sync()
        assert counts == [1, 2, 3, 4, 5]
        assert poll_until([consumer], 1, limit=3) == [[]]  # archived after its fifth delivery
    finally:
        consumer.close()


def test_read_committed_skips_aborted_records(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "committed"
    earliest(bootstrap, group)
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    resource = admin_mod.ConfigResource(admin_mod.ResourceType.GROUP, group, incremental_configs=[
        admin_mod.ConfigEntry("share.isolation.level", "read_committed",
                              incremental_operation=admin_mod.AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(LIMIT_S)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-share"})
    producer.init_transactions(LIMIT_S)
    for outcome, values in (("abort", [b"gone-1", b"gone-2"]), ("commit", [b"kept-1", b"kept-2"])):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value)
        producer.flush(LIMIT_S)
        (producer.abort_transaction if outcome == "abort" else producer.commit_transaction)(LIMIT_S)
    consumer = share_consumer(bootstrap, group, topic)
    try:
        [got] = poll_until([consumer], 2)
        assert [m.value() for m in got] == [b"kept-1", b"kept-2"]
        assert poll_until([consumer], 1, limit=2) == [[]]
    finally:
        consumer.close()


def heartbeat(w: Wire, group: str, member: str, epoch: int, topics=None) -> dict:
    return w.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": epoch,
                                                    "rack_id": None, "subscribed_topic_names": topics})


def share_fetch(w: Wire, group: str, member: str, epoch: int, topics=(), max_wait_ms: int = 0) -> dict:
    return w.call(ApiKey.SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "topics": list(topics),
        "forgotten_topics_data": []})


def test_the_protocol_rules_on_the_wire(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "wire"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 3)
    with Wire(bootstrap) as w:
        joined = heartbeat(w, group, "m1", 0, [topic])
        assert joined["error_code"] == 0 and joined["member_epoch"] >= 1 and joined["heartbeat_interval_ms"] == 5000
        [assigned] = joined["assignment"]["topic_partitions"]
        topic_id = assigned["topic_id"]
        assert assigned["partitions"] == [0]
        steady = heartbeat(w, group, "m1", joined["member_epoch"])
        assert steady["error_code"] == 0 and steady["assignment"] is None  # unchanged: null
        assert heartbeat(w, group, "m1", joined["member_epoch"] + 5)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
        assert heartbeat(w, group, "nobody", 3)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(w, group, "m2", 0, None)["error_code"] == ErrorCode.INVALID_REQUEST
        # a second member: more members than partitions, so the partition is shared
        second = heartbeat(w, group, "m2", 0, [topic])
        assert second["assignment"]["topic_partitions"][0]["partitions"] == [0]

        wanted = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        assert share_fetch(w, group, "m1", 3)["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
        opened = share_fetch(w, group, "m1", 0, wanted)
        [part] = opened["responses"][0]["partitions"]
        assert part["acquired_records"] == [{"first_offset": 0, "last_offset": 2, "delivery_count": 1}]
        assert opened["acquisition_lock_timeout_ms"] == LOCK_MS
        assert share_fetch(w, group, "m1", 5)["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        # acknowledgements may not open a session
        acks = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}]}]}]
        assert share_fetch(w, group, "m1", 0, acks)["error_code"] == ErrorCode.INVALID_REQUEST
        # the session that epoch 0 just opened again takes them at epoch 1; another member may not
        other = share_fetch(w, group, "m2", 0, wanted)
        assert other["error_code"] == 0
        refused = w.call(ApiKey.SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m2", "share_session_epoch": 1,
                                                        "topics": acks})
        assert refused["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_RECORD_STATE
        assert w.call(ApiKey.SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m2", "share_session_epoch": 0,
                                                     "topics": acks})["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        left = heartbeat(w, group, "m1", -1)
        assert (left["error_code"], left["member_epoch"]) == (0, -1)
        metrics = scrape(share_broker)
        assert metrics[("kafkapy_share_groups", (("state", "Stable"),))] == 1
        assert metrics[("kafkapy_share_group_members", ())] == 1
        assert metrics[("kafkapy_share_sessions", ())] == 2  # m1's and m2's, on this connection
        assert metrics[("kafkapy_share_records", (("state", "acquired"),))] == 3  # held by m1

        listed = w.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["Share"]})["groups"]
        assert listed == [{"group_id": group, "protocol_type": "share", "group_state": "Stable", "group_type": "share"}]
        assert w.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]})["groups"] == []
        [offsets] = w.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [0, 7]}]}]})["groups"]
        [(p0, p7)] = [t["partitions"] for t in offsets["topics"]]
        assert (p0["start_offset"], p0["lag"], p0["error_code"]) == (0, 3, 0)  # all three still in flight
        assert p7["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        described = w.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
        [g] = described["groups"]
        assert (g["error_code"], g["group_state"], g["assignor_name"]) == (0, "Stable", "simple")
        assert [m["member_id"] for m in g["members"]] == ["m2"]
        assert g["members"][0]["assignment"]["topic_partitions"][0]["topic_name"] == topic

    # a consumer group's id is not a share group's
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "classic", "enable.auto.commit": False})
    consumer.commit(offsets=[ck.TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    with Wire(bootstrap) as w:
        assert heartbeat(w, "classic", "m1", 0, [topic])["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_share_groups_can_be_turned_off(broker_factory):
    broker = broker_factory({"group.share.enable": False})
    with Wire(broker.bootstrap) as w:
        keys = {e["api_key"] for e in w.call(ApiKey.API_VERSIONS, 0, {})["api_keys"]}
    assert not keys & {76, 77, 78, 79}


def test_deleting_a_topic_removes_what_share_groups_kept_of_it(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "cleanup"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 3)
    consumer = share_consumer(bootstrap, group, topic)
    try:
        poll_until([consumer], 3)
        consumer.commit_sync()
    finally:
        consumer.close()

    def state_nodes() -> list[str]:
        nodes = json.loads((share_broker.data_dir / "metadata-store.json").read_text())["nodes"]
        return [path for path in nodes if path.startswith(f"/share_group_state/{group}/")]
    [node] = state_nodes()
    assert json.loads(json.loads((share_broker.data_dir / "metadata-store.json").read_text())["nodes"][node]["data"]) \
        == {"version": 1, "start_offset": 3, "state_batches": [], "state_epoch": 0, "leader_epoch": 0}
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(LIMIT_S)
    deadline = time.monotonic() + LIMIT_S
    while state_nodes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state_nodes() == []


def test_delete_groups_removes_a_share_group_once_it_has_no_members(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "short-lived-workers"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 4)
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})

    def delete() -> int:
        try:
            admin.delete_consumer_groups([group], request_timeout=LIMIT_S)[group].result(LIMIT_S)
            return 0
        except ck.KafkaException as exc:
            return exc.args[0].code()

    consumer = share_consumer(bootstrap, group, topic)
    try:
        [got] = poll_until([consumer], 4)
        consumer.commit_sync()
        assert delete() == ck.KafkaError.NON_EMPTY_GROUP  # a member is there
    finally:
        consumer.close()
    deadline = time.monotonic() + LIMIT_S  # the member's leave heartbeat may still be under way
    while (code := delete()) == ck.KafkaError.NON_EMPTY_GROUP and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == 0
    nodes = json.loads((share_broker.data_dir / "metadata-store.json").read_text())["nodes"]
    assert not [p for p in nodes if p.startswith(f"/share_group_state/{group}")]
    assert delete() == ck.KafkaError.GROUP_ID_NOT_FOUND
    # the group starts over: with earliest (its group config stays), every record again, delivered once more
    again = share_consumer(bootstrap, group, topic)
    try:
        [second] = poll_until([again], 4)
        assert sorted(m.offset() for m in second) == [0, 1, 2, 3] and {m.delivery_count() for m in second} == {1}
    finally:
        again.close()


def test_acls_on_share_groups(broker_factory):
    """With the authorizer: READ on the group for the heartbeat and ShareFetch, DESCRIBE on the topics
    subscribed, READ on the topics fetched; a member without them is refused and gets nothing."""
    from tests.server.test_authorization_groups import _acl_broker, _allow, _conf, _create_topics

    broker = _acl_broker(broker_factory)
    admin = admin_mod.AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "guarded")
    resource = admin_mod.ConfigResource(admin_mod.ResourceType.GROUP, "guards", incremental_configs=[
        admin_mod.ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=admin_mod.AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(LIMIT_S)
    produce(broker.sasl_bootstrap, "guarded", 3, **{k: v for k, v in _conf(broker, "admin").items()
                                                    if k != "bootstrap.servers"})
    with Wire(broker.bootstrap) as w:  # User:ANONYMOUS, no ACL
        assert heartbeat(w, "guards", "m1", 0, ["guarded"])["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert share_fetch(w, "guards", "m1", 0)["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    # alice may read the group, not yet the topic: the consumer is told, and gets no record
    _allow(admin, "User:alice", admin_mod.ResourceType.GROUP, "guards", admin_mod.AclOperation.READ)
    _allow(admin, "User:alice", admin_mod.ResourceType.TOPIC, "guarded", admin_mod.AclOperation.DESCRIBE)
    alice = ck.ShareConsumer({**_conf(broker, "alice"), "group.id": "guards"})
    alice.subscribe(["guarded"])
    try:
        errors, records = set(), []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not errors:
            try:
                for msg in alice.poll(timeout=0.2):
                    (errors.add(msg.error().code()) if msg.error() else records.append(msg))
            except ck.KafkaException as exc:  # librdkafka raises the partition's error from poll()
                errors.add(exc.args[0].code())
        assert records == [] and errors == {ck.KafkaError.TOPIC_AUTHORIZATION_FAILED}
        _allow(admin, "User:alice", admin_mod.ResourceType.TOPIC, "guarded", admin_mod.AclOperation.READ)
        got = []
        deadline = time.monotonic() + LIMIT_S
        while len(got) < 3 and time.monotonic() < deadline:
            try:
                got += [m for m in alice.poll(timeout=0.2) if m.error() is None]
            except ck.KafkaException as exc:  # errors of fetches made before the ACL reached the broker
                assert exc.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert sorted(m.offset() for m in got) == [0, 1, 2]
    finally:
        alice.close()


def test_v2_renews_locks_and_acquires_at_most_max_records(share_broker):
    """ShareFetch and ShareAcknowledge v2 (Kafka 4.2's Java client): RENEW keeps records with a fresh lock
    (KIP-1222); the record_limit acquire mode splits a batch at MaxRecords (KIP-1206)."""
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "renewing"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 6, **{"linger.ms": 100})  # one batch
    with Wire(bootstrap) as w:
        topic_id = heartbeat(w, group, "m1", 0, [topic])["assignment"]["topic_partitions"][0]["topic_id"]
        wanted = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        body = {"group_id": group, "member_id": "m1", "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1,
                "max_bytes": 1 << 20, "max_records": 4, "batch_size": 4, "share_acquire_mode": 1,
                "is_renew_ack": False, "topics": wanted, "forgotten_topics_data": []}
        [part] = w.call(ApiKey.SHARE_FETCH, 2, body)["responses"][0]["partitions"]
        assert part["acquired_records"] == [{"first_offset": 0, "last_offset": 3, "delivery_count": 1}]

        def acks(types, first=0, last=3):
            return [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": last, "acknowledge_types": types}]}]}]
        # RENEW needs a request that says so, and one that fetches nothing
        refused = w.call(ApiKey.SHARE_ACKNOWLEDGE, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": 1,
                                                        "is_renew_ack": False, "topics": acks([4])})
        assert refused["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REQUEST
        assert w.call(ApiKey.SHARE_FETCH, 2, {**body, "share_session_epoch": 2, "is_renew_ack": True,
                                              "topics": acks([4])})["error_code"] == ErrorCode.INVALID_REQUEST
        for epoch in (2, 3, 4):  # renewed every half lock, three times: held for twice the lock duration
            time.sleep(LOCK_MS / 2000)
            renewed = w.call(ApiKey.SHARE_ACKNOWLEDGE, 2, {"group_id": group, "member_id": "m1",
                                                            "share_session_epoch": epoch, "is_renew_ack": True,
                                                            "topics": acks([4])})
            assert renewed["responses"][0]["partitions"][0]["error_code"] == 0
            assert renewed["acquisition_lock_timeout_ms"] == LOCK_MS
        accepted = w.call(ApiKey.SHARE_ACKNOWLEDGE, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": 5,
                                                         "is_renew_ack": False, "topics": acks([1])})
        assert accepted["responses"][0]["partitions"][0]["error_code"] == 0  # still held: accepted
        [rest] = w.call(ApiKey.SHARE_FETCH, 2, {**body, "share_session_epoch": 6, "topics": []})["responses"][0][
            "partitions"]
        assert rest["acquired_records"] == [{"first_offset": 4, "last_offset": 5, "delivery_count": 1}]
