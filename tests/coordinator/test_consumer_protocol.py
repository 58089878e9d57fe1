"""The consumer rebalance protocol (KIP-848) against a broker process: librdkafka's ``group.protocol=consumer``
members sharing partitions, leaving and crashing (SIGKILL), a regex subscription following new topics, offsets
kept when a group changes protocol, and Kafka 4.x's rules on the wire (epochs, revocation before reassignment,
static members, validation, OffsetCommit/OffsetFetch v9, DescribeGroups and ListGroups)."""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey, ErrorCode
from tests.coordinator.helpers import start_member
from tests.server.test_metrics import scrape
from tests.server.wire import Wire

E = ErrorCode
LIMIT_S = 60  # guards against a hang, never what a test asserts
SESSION_MS = 6000

#: the group session and heartbeat short enough for a test (Kafka's minimums are 45 s and 5 s)
FAST = {"group.consumer.min.session.timeout.ms": SESSION_MS, "group.consumer.session.timeout.ms": SESSION_MS,
        "group.consumer.min.heartbeat.interval.ms": 500, "group.consumer.heartbeat.interval.ms": 500,
        "group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def fast_broker(broker_factory):
    return broker_factory(FAST)


def create_topic(bootstrap: str, partitions: int, name: str | None = None) -> str:
    name = name or f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(LIMIT_S)
    return name


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> set[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap})
    values = {b"%s-%d" % (topic.encode(), i) for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(LIMIT_S) == 0
    return values


def consumer(bootstrap: str, group: str, **conf) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})


def poll_until(consumers, done, limit: float = LIMIT_S) -> dict[int, list]:
    """Poll every consumer in turn until ``done(got)``; got: index -> records."""
    got: dict[int, list] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + limit
    while not done(got) and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                got[i].append(msg)
    return got


def assignments(consumers) -> list[set[int]]:
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def wait_split(consumers, partitions: int, limit: float = LIMIT_S) -> list[set[int]]:
    """Poll until the members hold every partition between them, none twice, each at least one."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        held = assignments(consumers)
        every = [p for ps in held for p in ps]
        if sorted(every) == list(range(partitions)) and all(held):
            return held
    raise AssertionError(f"never split: {assignments(consumers)}")


def describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer: a dropped client never answers
    return admin.describe_consumer_groups([group])[group].result(LIMIT_S)


# -- with librdkafka ------------------------------------------------------------------------------------------
def test_members_split_the_partitions_and_consume_every_record_once(fast_broker):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 6)
    group = f"g-{uuid.uuid4().hex[:6]}"
    members = [consumer(bootstrap, group) for _ in range(3)]
    try:
        for c in members:
            c.subscribe([topic])
        held = wait_split(members, 6)
        assert sorted(len(ps) for ps in held) == [2, 2, 2]  # the uniform assignor balances
        values = produce(bootstrap, topic, 300, 6)
        got = poll_until(members, lambda g: sum(map(len, g.values())) >= 300)
        seen = [m.value() for ms in got.values() for m in ms]
        assert len(seen) == len(set(seen)) and set(seen) == values
        for i, ms in got.items():  # each record came to the member holding its partition
            assert {m.partition() for m in ms} <= held[i]
        samples = scrape(fast_broker)
        assert samples[("kafka_consumergroup_members", (("consumergroup", group),))] == 3
        assert samples[("kafkapy_groups", (("state", "Stable"),))] >= 1
        description = describe(bootstrap, group)
        assert description.type == ConsumerGroupType.CONSUMER
        assert str(description.state).endswith("STABLE") and len(description.members) == 3
        assert sorted(len(m.assignment.topic_partitions) for m in description.members) == [2, 2, 2]
        for c in members:
            c.commit(asynchronous=False)
        committed = members[0].committed([TopicPartition(topic, p) for p in range(6)], timeout=LIMIT_S)
        assert sum(tp.offset for tp in committed) == 300
    finally:
        for c in members:
            c.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(LIMIT_S).valid}
    assert listed[group].type == ConsumerGroupType.CONSUMER and str(listed[group].state).endswith("EMPTY")


def test_a_member_that_leaves_or_is_killed_loses_its_partitions_to_the_others(fast_broker, tmp_path):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    procs = [start_member("confluent", bootstrap, group, topic, "consumer-protocol", tmp_path / f"m{i}.log")
             for i in range(3)]
    try:
        def members_holding() -> dict[str, list[int]]:
            d = describe(bootstrap, group)
            return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in d.members}

        def wait_for(count: int) -> dict[str, list[int]]:
            deadline = time.monotonic() + LIMIT_S
            last = None
            while time.monotonic() < deadline:
                last = members_holding()
                every = sorted(p for ps in last.values() for p in ps)
                if len(last) == count and every == [0, 1, 2, 3]:
                    return last
                time.sleep(0.2)
            raise AssertionError(f"never {count} members holding all 4 partitions: {last}")

        wait_for(3)
        procs[0].send_signal(signal.SIGTERM)  # leaves: heartbeat with epoch -1
        assert procs[0].wait(30) == 0
        wait_for(2)
        procs[1].send_signal(signal.SIGKILL)  # only the session timeout notices
        procs[1].wait(30)
        killed_at = time.monotonic()
        survivor = wait_for(1)
        assert list(survivor.values()) == [[0, 1, 2, 3]]
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.5  # it waited for the session to end
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(30)


def test_a_regex_subscription_follows_new_topics(fast_broker):
    bootstrap = fast_broker.bootstrap
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first = create_topic(bootstrap, 2, f"{prefix}-a")
    c = consumer(bootstrap, f"g-{prefix}")
    try:
        c.subscribe([f"^{prefix}-.*"])
        produce(bootstrap, first, 10, 2)
        got = poll_until([c], lambda g: len(g[0]) >= 10)
        assert len(got[0]) == 10
        second = create_topic(bootstrap, 3, f"{prefix}-b")
        values = produce(bootstrap, second, 12, 3)
        got = poll_until([c], lambda g: len(g[0]) >= 12)
        assert {m.value() for m in got[0]} == values
        assert {(tp.topic, tp.partition) for tp in c.assignment()} == {
            (first, 0), (first, 1), (second, 0), (second, 1), (second, 2)}
    finally:
        c.close()


def test_an_empty_group_keeps_its_offsets_when_it_changes_protocol(fast_broker):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    produce(bootstrap, topic, 40, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False})
    classic.subscribe([topic])
    got = poll_until([classic], lambda g: len(g[0]) >= 40)
    assert len(got[0]) == 40
    classic.commit(asynchronous=False)
    classic.close()
    later = produce(bootstrap, topic, 10, 2)
    modern = consumer(bootstrap, group)
    try:
        modern.subscribe([topic])
        got = poll_until([modern], lambda g: len(g[0]) >= 10, limit=15)
        assert {m.value() for m in got[0]} == later  # from the committed offsets, not the beginning
        modern.commit(asynchronous=False)
    finally:
        modern.close()
    last = produce(bootstrap, topic, 6, 2)
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False})
    try:
        classic.subscribe([topic])
        got = poll_until([classic], lambda g: len(g[0]) >= 6, limit=20)
        assert {m.value() for m in got[0]} == last
    finally:
        classic.close()


# -- on the wire ---------------------------------------------------------------------------------------------
def heartbeat_body(group: str, member: str, epoch: int, topics=None, owned=None, **extra) -> dict:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000 if epoch == 0 else -1, "subscribed_topic_names": topics,
            "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": ([] if epoch == 0 else None) if owned is None else owned}
    body.update(extra)
    return body


def owned(topic_id, partitions) -> list[dict]:
    return [{"topic_id": topic_id, "partitions": sorted(partitions)}]


def held(response) -> set[int]:
    return {p for tp in response["assignment"]["topic_partitions"] for p in tp["partitions"]}


def topic_id(w: Wire, topic: str):
    r = w.call(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                      "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return r["topics"][0]["topic_id"]


def test_partitions_move_only_after_their_holder_revoked_them(fast_broker):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Wire(bootstrap) as w:
        tid = topic_id(w, topic)
        a = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "a", 0, [topic]))
        assert a["error_code"] == E.NONE and held(a) == {0, 1, 2, 3} and a["member_epoch"] == 1
        assert a["heartbeat_interval_ms"] == 500
        b = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "b", 0, [topic]))
        assert b["member_epoch"] == 2 and held(b) == set()  # a still holds them
        a = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "a", 1))
        keep = held(a)
        assert a["member_epoch"] == 1 and len(keep) == 2  # told to give two up, still at its epoch
        b = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "b", 2))
        assert b["assignment"] is None  # nothing for b yet
        # a heartbeat that still owns them does not release them
        a = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "a", 1, owned=owned(tid, range(4))))
        assert a["member_epoch"] == 1
        a = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "a", 1, owned=owned(tid, keep)))
        assert a["member_epoch"] == 2 and a["assignment"] is None  # revoked: on to the target, same partitions
        b = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "b", 2))
        assert held(b) == {0, 1, 2, 3} - keep and b["member_epoch"] == 2
        r = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})
        g = r["groups"][0]
        assert (g["error_code"], g["group_state"], g["group_epoch"], g["assignment_epoch"], g["assignor_name"]) == (
            E.NONE, "Stable", 2, 2, "uniform")
        assert {m["member_id"]: {p for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]}
                for m in g["members"]} == {"a": keep, "b": {0, 1, 2, 3} - keep}
        assert all(m["assignment"]["topic_partitions"][0]["topic_name"] == topic for m in g["members"])


def test_epoch_rules_and_validation(fast_broker):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
    with Wire(bootstrap) as w:
        tid = topic_id(w, topic)

        def call(body, version=1):
            return w.call(hb, version, body)

        for body, code, message in [
            (heartbeat_body("", "m", 0, [topic]), E.INVALID_REQUEST, "GroupId can't be empty."),
            (heartbeat_body(group, "", 0, [topic]), E.INVALID_REQUEST, "MemberId can't be empty."),
            (heartbeat_body(group, "m", 0, [topic], rebalance_timeout_ms=-1), E.INVALID_REQUEST,
             "RebalanceTimeoutMs must be provided in first request."),
            (heartbeat_body(group, "m", 0, [topic], owned=owned(tid, [0])), E.INVALID_REQUEST,
             "TopicPartitions must be empty when (re-)joining."),
            (heartbeat_body(group, "m", 0, None), E.INVALID_REQUEST,
             "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
            (heartbeat_body(group, "m", -2), E.INVALID_REQUEST, "InstanceId can't be null."),
            (heartbeat_body(group, "m", -3), E.INVALID_REQUEST, "MemberEpoch is invalid."),
            (heartbeat_body(group, "m", 0, [topic], server_assignor="sticky"), E.UNSUPPORTED_ASSIGNOR,
             "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
            (heartbeat_body(group, "m", 0, None, subscribed_topic_regex="(unclosed"), E.INVALID_REGULAR_EXPRESSION,
             "SubscribedTopicRegex `(unclosed` is not a valid regular expression"),
            (heartbeat_body(group, "m", 3), E.UNKNOWN_MEMBER_ID, f"Member m is not a member of group {group}."),
        ]:
            r = call(body)
            assert (r["error_code"], r["heartbeat_interval_ms"]) == (code, 0) and r["error_message"].startswith(message)
        # v0: the coordinator makes the member id
        r = call(heartbeat_body(group, "", 0, [topic]), version=0)
        assert r["error_code"] == E.NONE and len(r["member_id"]) == 36
        first = r["member_id"]
        m = call(heartbeat_body(group, "m", 0, [topic], server_assignor="range"))
        epoch = m["member_epoch"]
        assert call(heartbeat_body(group, "ghost", 5))["error_code"] == E.UNKNOWN_MEMBER_ID
        assert call(heartbeat_body(group, "m", epoch + 1))["error_code"] == E.FENCED_MEMBER_EPOCH
        # the first member leaves: m moves to the next epoch with both partitions
        assert call(heartbeat_body(group, first, -1))["error_code"] == E.NONE
        m = call(heartbeat_body(group, "m", epoch, owned=[]))
        assert (m["error_code"], m["member_epoch"], held(m)) == (E.NONE, epoch + 1, {0, 1})
        # the previous epoch is accepted only with a subset of what the member was given (a lost answer)
        r = call(heartbeat_body(group, "m", epoch))
        assert r["error_code"] == E.FENCED_MEMBER_EPOCH and "smaller member epoch" in r["error_message"]
        r = call(heartbeat_body(group, "m", epoch, owned=owned(tid, [0])))
        assert r["error_code"] == E.NONE and r["member_epoch"] == epoch + 1
        epoch += 1
        # OffsetCommit v9: the member epoch is the generation
        commit = {"group_id": group, "member_id": "m", "generation_id_or_member_epoch": epoch,
                  "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                      {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                       "committed_metadata": ""}]}]}

        def commit_error(version=9, **change):
            return w.call(ApiKey.OFFSET_COMMIT, version, commit | change)["topics"][0]["partitions"][0]["error_code"]

        assert commit_error(generation_id_or_member_epoch=epoch - 1) == E.STALE_MEMBER_EPOCH
        assert commit_error(generation_id_or_member_epoch=epoch + 1) == E.STALE_MEMBER_EPOCH  # either way, as Kafka
        assert commit_error(member_id="", generation_id_or_member_epoch=-1) == E.UNKNOWN_MEMBER_ID  # not empty
        assert commit_error(version=8) == E.UNSUPPORTED_VERSION
        assert commit_error() == E.NONE

        def fetch(member_id, member_epoch):
            r = w.call(ApiKey.OFFSET_FETCH, 9, {"groups": [{"group_id": group, "member_id": member_id,
                                                            "member_epoch": member_epoch,
                                                            "topics": [{"name": topic, "partition_indexes": [0]}]}],
                                                "require_stable": False})
            return r["groups"][0]

        assert fetch("m", epoch)["topics"][0]["partitions"][0]["committed_offset"] == 7
        assert fetch(None, -1)["topics"][0]["partitions"][0]["committed_offset"] == 7  # an admin's fetch
        assert fetch("m", epoch - 1)["error_code"] == E.STALE_MEMBER_EPOCH
        assert fetch("ghost", 1)["error_code"] == E.UNKNOWN_MEMBER_ID
        # DescribeGroups sees no classic group; ListGroups sees a consumer group; a member blocks deletion
        r = w.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
        assert (r["groups"][0]["error_code"], r["groups"][0]["group_state"], r["groups"][0]["members"]) == (
            E.NONE, "Dead", [])
        r = w.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["Consumer"]})
        assert [(g["group_id"], g["group_type"], g["protocol_type"]) for g in r["groups"]] == [
            (group, "consumer", "consumer")]
        r = w.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
        assert r["results"][0]["error_code"] == E.NON_EMPTY_GROUP
        r = call(heartbeat_body(group, "m", -1))
        assert (r["error_code"], r["member_epoch"], r["member_id"]) == (E.NONE, -1, "m")
        for m_id in [g["member_id"] for g in w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
                "group_ids": [group], "include_authorized_operations": False})["groups"][0]["members"]]:
            call(heartbeat_body(group, m_id, -1))
        r = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group, "nope"],
                                                      "include_authorized_operations": False})
        assert r["groups"][0]["group_state"] == "Empty"
        assert (r["groups"][1]["error_code"], r["groups"][1]["error_message"]) == (
            E.GROUP_ID_NOT_FOUND, "Group nope not found.")
        r = w.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
        assert r["results"][0]["error_code"] == E.NONE


def test_static_members_leave_for_now_and_come_back_to_their_partitions(fast_broker):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
    with Wire(bootstrap) as w:
        tid = topic_id(w, topic)
        a = w.call(hb, 1, heartbeat_body(group, "a1", 0, [topic], instance_id="alpha"))
        b = w.call(hb, 1, heartbeat_body(group, "b", 0, [topic]))
        a = w.call(hb, 1, heartbeat_body(group, "a1", a["member_epoch"], instance_id="alpha"))
        alpha = held(a)  # what a1 keeps
        a = w.call(hb, 1, heartbeat_body(group, "a1", a["member_epoch"], owned=owned(tid, alpha),
                                         instance_id="alpha"))
        b = w.call(hb, 1, heartbeat_body(group, "b", b["member_epoch"]))
        assert len(alpha) == 2 and held(b) == {0, 1, 2, 3} - alpha
        before = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                           "include_authorized_operations": False})["groups"][0]
        r = w.call(hb, 1, heartbeat_body(group, "a1", -2, instance_id="alpha"))
        assert (r["error_code"], r["member_epoch"]) == (E.NONE, -2)
        # its instance id is released: another id joining with it takes its place and partitions, no rebalance
        r = w.call(hb, 1, heartbeat_body(group, "a2", 0, [topic], instance_id="alpha"))
        assert r["error_code"] == E.NONE and held(r) == alpha and r["member_epoch"] == before["group_epoch"]
        after = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                          "include_authorized_operations": False})["groups"][0]
        assert after["group_epoch"] == before["group_epoch"]
        assert {m["member_id"] for m in after["members"]} == {"a2", "b"}
        # while a2 holds the instance id, a third cannot take it; a1 is gone
        r = w.call(hb, 1, heartbeat_body(group, "a3", 0, [topic], instance_id="alpha"))
        assert r["error_code"] == E.UNRELEASED_INSTANCE_ID
        r = w.call(hb, 1, heartbeat_body(group, "a1", 3, instance_id="alpha"))
        assert r["error_code"] == E.FENCED_INSTANCE_ID


def test_a_member_that_does_not_revoke_in_time_is_removed(fast_broker):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
    with Wire(bootstrap) as w:
        tid = topic_id(w, topic)
        a = w.call(hb, 1, heartbeat_body(group, "a", 0, [topic], rebalance_timeout_ms=1000))
        b = w.call(hb, 1, heartbeat_body(group, "b", 0, [topic]))
        a = w.call(hb, 1, heartbeat_body(group, "a", a["member_epoch"], owned=owned(tid, [0, 1])))
        assert len(held(a)) == 1  # told to give one up
        epoch = b["member_epoch"]
        deadline = time.monotonic() + LIMIT_S
        while time.monotonic() < deadline:  # b keeps heartbeating; a never revokes
            b = w.call(hb, 1, heartbeat_body(group, "b", epoch))
            assert b["error_code"] == E.NONE
            epoch = b["member_epoch"]
            if b["assignment"] is not None and held(b) == {0, 1}:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("b never got both partitions")
        r = w.call(hb, 1, heartbeat_body(group, "a", a["member_epoch"]))
        assert r["error_code"] == E.UNKNOWN_MEMBER_ID


def test_the_consumer_protocol_can_be_turned_off(broker_factory):
    """As in Kafka, the APIs stay advertised and answer UNSUPPORTED_VERSION, which librdkafka reports as a
    fatal error naming the heartbeat (without them advertised it would look for a coordinator forever)."""
    broker = broker_factory({"group.coordinator.rebalance.protocols": "classic"})
    topic = create_topic(broker.bootstrap, 1)
    with Wire(broker.bootstrap) as w:
        r = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body("g", "m", 0, [topic]))
        assert r["error_code"] == E.UNSUPPORTED_VERSION
        r = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g"], "include_authorized_operations": False})
        assert r["groups"][0]["error_code"] == E.UNSUPPORTED_VERSION
    c = consumer(broker.bootstrap, "g")
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + LIMIT_S
        error = None
        while error is None and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is not None:
                error = msg.error()
        assert error is not None and error.code() == KafkaError._FATAL and "ConsumerGroupHeartbeat" in error.str()
    finally:
        c.close()


def test_a_transaction_commits_the_offsets_of_a_consumer_protocol_member(fast_broker):
    """Consume-transform-produce (KIP-447) with a member of the consumer protocol: its group metadata (member
    id and epoch) goes with the offsets, and the committed offsets are the consumer's position."""
    bootstrap = fast_broker.bootstrap
    source, sink = create_topic(bootstrap, 1), create_topic(bootstrap, 1)
    produce(bootstrap, source, 25, 1)
    c = consumer(bootstrap, f"g-{uuid.uuid4().hex[:6]}")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    try:
        c.subscribe([source])
        got = poll_until([c], lambda g: len(g[0]) >= 25)
        assert len(got[0]) == 25
        producer.init_transactions(LIMIT_S)
        producer.begin_transaction()
        for m in got[0]:
            producer.produce(sink, m.value())
        position = c.position(c.assignment())
        producer.send_offsets_to_transaction(position, c.consumer_group_metadata(), LIMIT_S)
        producer.commit_transaction(LIMIT_S)
        committed = c.committed(c.assignment(), timeout=LIMIT_S)
        assert [tp.offset for tp in committed] == [25]
    finally:
        c.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_running_group_moves_to_the_consumer_protocol_and_back(fast_broker, strategy):
    """Kafka 4.x's online migration: a classic group gains a consumer-protocol member (it becomes a consumer
    group whose classic member keeps using JoinGroup/SyncGroup), loses its classic member, gains another, and
    becomes classic again when the consumer-protocol member leaves. At every step the members split the
    partitions and every record produced meanwhile is consumed; offsets committed along the way are kept."""
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def classic_member() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "partition.assignment.strategy": strategy, "heartbeat.interval.ms": 500,
                      "session.timeout.ms": SESSION_MS, "enable.auto.commit": False})
        c.subscribe([topic])
        return c

    def step(members, expected_type):
        wait_split(members, 4)
        if len(members) == 2:
            assert sorted(map(len, assignments(members))) == [2, 2]
        values = produce(bootstrap, topic, 40, 4)
        got = poll_until(members, lambda g: {m.value() for ms in g.values() for m in ms} >= values)
        assert {m.value() for ms in got.values() for m in ms} >= values
        for c in members:
            c.commit(asynchronous=False)
        assert admin.describe_consumer_groups([group])[group].result(LIMIT_S).type == expected_type

    members = [classic_member()]
    step(members, ConsumerGroupType.CLASSIC)
    members.append(consumer(bootstrap, group))
    members[-1].subscribe([topic])
    step(members, ConsumerGroupType.CONSUMER)
    members.pop(0).close()
    step(members, ConsumerGroupType.CONSUMER)
    members.append(classic_member())
    step(members, ConsumerGroupType.CONSUMER)
    members.pop(0).close()
    step(members, ConsumerGroupType.CLASSIC)
    committed = members[0].committed([TopicPartition(topic, p) for p in range(4)], timeout=LIMIT_S)
    assert sum(tp.offset for tp in committed) == 200  # every step's records, whoever committed them
    members[0].close()


def test_upgrading_a_group_of_another_protocol_type_is_refused(fast_broker):
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Wire(bootstrap) as w:
        r = w.call(ApiKey.JOIN_GROUP, 3, {"group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000,
                                         "member_id": "", "protocol_type": "connect",
                                         "protocols": [{"name": "default", "metadata": b"x"}]})
        assert r["error_code"] == E.NONE
        r = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(group, "m", 0, [topic]))
        assert r["error_code"] == E.GROUP_ID_NOT_FOUND
        assert r["error_message"] == (f"Cannot upgrade classic group {group} to consumer group because the group "
                                      f"does not use the consumer embedded protocol.")


def test_a_disabled_migration_policy_keeps_the_protocols_apart(broker_factory):
    broker = broker_factory({**FAST, "group.consumer.migration.policy": "disabled"})
    topic = create_topic(broker.bootstrap, 1)
    subscription = b"\x00\x00" + b"\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode() + b"\xff\xff\xff\xff"
    join = {"session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription}]}
    with Wire(broker.bootstrap) as w:
        classic, modern = f"c-{uuid.uuid4().hex[:6]}", f"m-{uuid.uuid4().hex[:6]}"
        assert w.call(ApiKey.JOIN_GROUP, 3, {"group_id": classic, **join})["error_code"] == E.NONE
        r = w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(classic, "m", 0, [topic]))
        assert r["error_code"] == E.GROUP_ID_NOT_FOUND and r["error_message"] == (
            f"Cannot upgrade classic group {classic} to consumer group because online upgrade is disabled.")
        assert w.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(modern, "m", 0, [topic]))["error_code"] == E.NONE
        r = w.call(ApiKey.JOIN_GROUP, 3, {"group_id": modern, **join})
        assert r["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_members_epochs_and_assignments_survive_a_broker_crash(fast_broker):
    """The group's records (Kafka 4.x's layouts in __consumer_offsets) bring it back after kill -9: the members
    carry on at their epochs without joining again, a member mid-revocation still owes its revocation, and the
    records decode in ``kafkactl log dump``'s decoder."""
    bootstrap = fast_broker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
    with Wire(bootstrap) as w:
        tid = topic_id(w, topic)
        a = w.call(hb, 1, heartbeat_body(group, "a", 0, [topic], instance_id="alpha", server_assignor="range"))
        b = w.call(hb, 1, heartbeat_body(group, "b", 0, [topic]))
        a = w.call(hb, 1, heartbeat_body(group, "a", a["member_epoch"]))  # told to give two up; has not yet
        keep = held(a)
        before = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                           "include_authorized_operations": False})["groups"][0]
    fast_broker.kill()
    fast_broker.start()
    with Wire(fast_broker.bootstrap) as w:
        deadline = time.monotonic() + LIMIT_S
        while True:
            after = w.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                              "include_authorized_operations": False})["groups"][0]
            if after["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for field in ("error_code", "group_state", "group_epoch", "assignment_epoch", "assignor_name"):
            assert after[field] == before[field], field
        assert sorted(after["members"], key=lambda m: m["member_id"]) == sorted(before["members"],
                                                                                 key=lambda m: m["member_id"])
        assert after["group_state"] == "Reconciling"
        # b still waits for a's two partitions; a still owes them, at its epoch
        r = w.call(hb, 1, heartbeat_body(group, "b", b["member_epoch"]))
        assert r["error_code"] == E.NONE and r["member_epoch"] == b["member_epoch"]
        r = w.call(hb, 1, heartbeat_body(group, "a", a["member_epoch"], owned=owned(tid, keep)))
        assert r["error_code"] == E.NONE and r["member_epoch"] == before["group_epoch"]
        r = w.call(hb, 1, heartbeat_body(group, "b", b["member_epoch"]))
        assert held(r) == {0, 1, 2, 3} - keep
    # the log holds the group's records, which the dump decoder reads
    from broker.coordinator.records import decode_offsets_record, partition_for
    from broker.records import iter_batches
    pdir = fast_broker.data_dir / f"__consumer_offsets-{partition_for(group, 50)}"
    kinds = set()
    for seg in sorted(pdir.glob("*.log")):
        for batch in iter_batches(seg.read_bytes()):
            for rec in batch.records:
                decoded = decode_offsets_record(rec.key, rec.value)
                assert "error" not in decoded
                if decoded.get("group") == group:
                    kinds.add(decoded["type"])
    assert kinds == {"consumer_group_metadata", "consumer_group_member_metadata",
                     "consumer_group_target_assignment_metadata", "consumer_group_target_assignment_member",
                     "consumer_group_current_member_assignment"}


def test_a_regex_subscription_gets_only_the_topics_its_principal_may_describe(broker_factory):
    """Kafka 4.x matches a group's regexes with the requesting member's principal and leaves out the topics it
    may not DESCRIBE (librdkafka would not consume a topic it cannot see, but the partitions would be the
    member's, and its name shown to it); a super user's group with the same regex gets them all."""
    from confluent_kafka.admin import AclOperation, ResourceType

    from tests.server.test_authorization_groups import _acl_broker, _allow, _conf, _create_topics, _produce

    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "ev-visible", "ev-hidden")
    _allow(admin, "User:alice", ResourceType.GROUP, "rx-alice", AclOperation.READ)
    _allow(admin, "User:alice", ResourceType.TOPIC, "ev-visible", AclOperation.READ)  # READ implies DESCRIBE
    _produce(_conf(broker, "admin"), "ev-visible", [b"seen"])
    _produce(_conf(broker, "admin"), "ev-hidden", [b"secret"])

    def assigned(user: str, group: str, want: int) -> tuple[list[bytes], set[str]]:
        """What ``user``'s consumer reads, and the topics the coordinator assigned to it (as a super user sees
        them with ConsumerGroupDescribe)."""
        consumer = Consumer(_conf(broker, user, **{"group.id": group, "group.protocol": "consumer",
                                                   "auto.offset.reset": "earliest"}))
        consumer.subscribe(["^ev-.*"])
        values = []
        try:
            deadline = time.monotonic() + LIMIT_S
            while len(values) < want and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    values.append(msg.value())
            (member,) = admin.describe_consumer_groups([group])[group].result(LIMIT_S).members
            return sorted(values), {tp.topic for tp in member.assignment.topic_partitions}
        finally:
            consumer.close()

    assert assigned("alice", "rx-alice", 1) == ([b"seen"], {"ev-visible"})
    assert assigned("admin", "rx-admin", 2) == ([b"secret", b"seen"], {"ev-visible", "ev-hidden"})
