"""AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), as ``kafka-share-groups.sh --reset-offsets`` and
``--delete-offsets`` use them, against a broker process with librdkafka's ShareConsumer (confluent-kafka) and on the
wire: an empty group resumes where it was set (across a restart too), forgets what it consumed of a topic, and is
refused while it has members; share-partitions that held the old state forget it.
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck

from broker.protocol import ApiKey, ErrorCode

from .test_share_groups import (LIMIT_S, earliest, heartbeat, make_topic, poll_until, produce, share_consumer,
                                share_fetch)
from .wire import Wire


def alter(w: Wire, group: str, topics: dict[str, dict[int, int]]) -> dict:
    return w.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in parts.items()]}
        for t, parts in topics.items()]})


def delete(w: Wire, group: str, topics: list[str]) -> dict:
    return w.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": group,
                                                         "topics": [{"topic_name": t} for t in topics]})


def start_offsets(w: Wire, group: str) -> dict[tuple[str, int], int]:
    [g] = w.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"]
    return {(t["topic_name"], p["partition_index"]): p["start_offset"] for t in g["topics"] for p in t["partitions"]}


def consume_all(bootstrap: str, group: str, topic: str, count: int) -> list[tuple[int, int, int]]:
    """(partition, offset, delivery count) of ``count`` records, each accepted and committed, the consumer closed."""
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        [got] = poll_until([consumer], count, ack=ck.AcknowledgeType.ACCEPT)
        assert all(err is None for err in consumer.commit_sync().values())
    finally:
        consumer.close()
    return sorted((m.partition(), m.offset(), m.delivery_count()) for m in got)


def test_an_empty_group_resumes_where_its_offsets_were_reset(share_broker):
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap, partitions=2), "rewound"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 20, partitions=2)
    assert len(consume_all(bootstrap, group, topic, 20)) == 20
    with Wire(bootstrap) as w:
        assert start_offsets(w, group) == {(topic, 0): 10, (topic, 1): 10}
        answer = alter(w, group, {topic: {0: 4}})
        assert (answer["error_code"], answer["responses"][0]["partitions"]) == (
            0, [{"partition_index": 0, "error_code": 0, "error_message": None}])
        assert start_offsets(w, group) == {(topic, 0): 4, (topic, 1): 10}
    # the altered state is what the store keeps: a restart reads it, and the group is still there (Empty)
    share_broker.restart()
    with Wire(bootstrap) as w:
        deadline = time.monotonic() + LIMIT_S  # the coordinator loads its partitions after the restart
        while (answer := w.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
               )["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
            time.sleep(0.1)
        assert answer["groups"] == [{"group_id": group, "protocol_type": "share", "group_state": "Empty",
                                     "group_type": "share"}]
        [described] = w.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                               "include_authorized_operations": False})["groups"]
        assert (described["error_code"], described["group_state"], described["members"]) == (0, "Empty", [])
    # offsets 4..9 of partition 0 again, as new deliveries; nothing of partition 1
    assert consume_all(bootstrap, group, topic, 6) == [(0, o, 1) for o in range(4, 10)]


def test_refusals_and_partition_errors(share_broker):
    bootstrap = share_broker.bootstrap
    topic = make_topic(bootstrap)
    produce(bootstrap, topic, 5)
    classic = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "classic-one", "enable.auto.commit": False})
    classic.commit(offsets=[ck.TopicPartition(topic, 0, 1)], asynchronous=False)
    classic.close()
    with Wire(bootstrap) as w:
        # a group that does not exist yet is made, Empty, at the offsets given; bad partitions fail alone
        answer = alter(w, "fresh", {topic: {0: 3, 7: 0}, "no-such-topic": {0: 0}})
        assert answer["error_code"] == 0
        by_topic = {t["topic_name"]: {p["partition_index"]: p["error_code"] for p in t["partitions"]}
                    for t in answer["responses"]}
        assert by_topic == {topic: {0: 0, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
                            "no-such-topic": {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}}
        assert [t["topic_id"] for t in answer["responses"] if t["topic_name"] == "no-such-topic"] == [uuid.UUID(int=0)]
        negative = alter(w, "fresh", {topic: {0: -5}})
        assert negative["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REQUEST
        assert start_offsets(w, "fresh") == {(topic, 0): 3}
        listed = w.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})["groups"]
        assert [(g["group_id"], g["group_state"]) for g in listed] == [("fresh", "Empty")]
        # the group's next member starts there
        joined = heartbeat(w, "fresh", "m1", 0, [topic])
        topic_id = joined["assignment"]["topic_partitions"][0]["topic_id"]
        wanted = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        [part] = share_fetch(w, "fresh", "m1", 0, wanted)["responses"][0]["partitions"]
        assert part["acquired_records"] == [{"first_offset": 3, "last_offset": 4, "delivery_count": 1}]
        # with a member: both refused, nothing changed
        refused = alter(w, "fresh", {topic: {0: 0}})
        assert (refused["error_code"], refused["responses"]) == (ErrorCode.NON_EMPTY_GROUP, [])
        assert delete(w, "fresh", [topic])["error_code"] == ErrorCode.NON_EMPTY_GROUP
        assert start_offsets(w, "fresh") == {(topic, 0): 3}
        # a consumer group's id, an unknown group, no group id
        assert alter(w, "classic-one", {topic: {0: 0}})["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert delete(w, "classic-one", [topic])["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert delete(w, "never-seen", [topic])["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert alter(w, "", {topic: {0: 0}})["error_code"] == ErrorCode.INVALID_GROUP_ID


def test_deleted_offsets_start_the_topic_over(share_broker):
    bootstrap = share_broker.bootstrap
    topic, other, group = make_topic(bootstrap), make_topic(bootstrap), "forgetful"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 4)
    assert len(consume_all(bootstrap, group, topic, 4)) == 4
    with Wire(bootstrap) as w:
        answer = delete(w, group, [topic, other, "no-such-topic"])
        assert answer["error_code"] == 0
        results = {t["topic_name"]: (t["error_code"], t["error_message"]) for t in answer["responses"]}
        assert results == {topic: (0, None),
                           other: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."),
                           "no-such-topic": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             "This server does not host this topic-partition.")}
        assert start_offsets(w, group) == {}
    nodes = (share_broker.data_dir / "metadata-store.json").read_text()
    assert f"/share_group_state/{group}/" not in nodes
    # share.auto.offset.reset (earliest) again: every record, delivered for the first time
    assert consume_all(bootstrap, group, topic, 4) == [(0, o, 1) for o in range(4)]


def test_a_session_that_outlives_its_member_reads_the_altered_state(share_broker):
    """A member left but its share session is still open: the records it held at the old position are forgotten
    (acknowledging them is refused), and its next fetch starts at the new offset, not where the session was."""
    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap), "lingering"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 8)
    with Wire(bootstrap) as w:
        joined = heartbeat(w, group, "m1", 0, [topic])
        topic_id = joined["assignment"]["topic_partitions"][0]["topic_id"]
        wanted = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        [part] = share_fetch(w, group, "m1", 0, wanted)["responses"][0]["partitions"]
        assert part["acquired_records"] == [{"first_offset": 0, "last_offset": 7, "delivery_count": 1}]
        assert heartbeat(w, group, "m1", -1)["error_code"] == 0  # the group is empty; the session stays open
        assert alter(w, group, {topic: {0: 6}})["responses"][0]["partitions"][0]["error_code"] == 0
        acks = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 0, "last_offset": 7, "acknowledge_types": [1]}]}]}]
        acked = w.call(ApiKey.SHARE_ACKNOWLEDGE, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": 1,
                                                      "topics": acks})
        # refused: the new state has delivered nothing past offset 6, so these offsets were never delivered there
        assert acked["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REQUEST
        [part] = share_fetch(w, group, "m1", 2, wanted)["responses"][0]["partitions"]
        assert part["acquired_records"] == [{"first_offset": 6, "last_offset": 7, "delivery_count": 1}]


def test_acls_on_share_group_offsets(broker_factory):
    """With the authorizer, as Kafka's KafkaApis checks them: READ on the group to alter, DELETE on it to delete,
    READ on each topic for both."""
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

    from tests.server.test_authorization_groups import _acl_broker, _allow, _conf, _create_topics

    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _create_topics(admin, "ledger")
    anonymous = "User:ANONYMOUS"  # the plaintext listener's principal, which Wire connects as
    with Wire(broker.bootstrap) as w:
        assert alter(w, "ops", {"ledger": {0: 0}})["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert delete(w, "ops", ["ledger"])["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        _allow(admin, anonymous, ResourceType.GROUP, "ops", AclOperation.READ)
        denied = alter(w, "ops", {"ledger": {0: 0}})
        assert denied["error_code"] == 0
        assert denied["responses"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert start_offsets(w, "ops") == {}
        _allow(admin, anonymous, ResourceType.TOPIC, "ledger", AclOperation.READ)
        assert alter(w, "ops", {"ledger": {0: 0}})["responses"][0]["partitions"][0]["error_code"] == 0
        assert delete(w, "ops", ["ledger"])["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED  # READ only
        _allow(admin, anonymous, ResourceType.GROUP, "ops", AclOperation.DELETE)
        [deleted] = delete(w, "ops", ["ledger"])["responses"]
        assert (deleted["topic_name"], deleted["error_code"]) == ("ledger", 0)


def test_after_a_restart_offsets_wait_for_the_members_to_return(broker_factory):
    """Membership is not stored: a group known only from the store after a restart is taken as possibly having
    members until its session timeout has passed since this broker became its coordinator, as Kafka keeps
    members across a failover and expires silent ones after that timeout. A member that rejoins in that time
    keeps the group non-empty."""
    broker = broker_factory({"group.share.session.timeout.ms": 3000, "group.share.min.session.timeout.ms": 1000,
                             "group.share.heartbeat.interval.ms": 1000,
                             "group.share.min.heartbeat.interval.ms": 1000})
    bootstrap = broker.bootstrap
    topic, group = make_topic(bootstrap), "returning"
    earliest(bootstrap, group)
    produce(bootstrap, topic, 3)
    assert len(consume_all(bootstrap, group, topic, 3)) == 3
    broker.restart()
    with Wire(bootstrap) as w:
        deadline = time.monotonic() + LIMIT_S
        while (answer := alter(w, group, {topic: {0: 0}}))["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert answer["error_code"] == ErrorCode.NON_EMPTY_GROUP
        assert "share.session.timeout.ms" in answer["error_message"]
        assert delete(w, group, [topic])["error_code"] == ErrorCode.NON_EMPTY_GROUP
        # nobody came back: after the session timeout the group is taken as empty
        while (answer := alter(w, group, {topic: {0: 1}}))["error_code"] == ErrorCode.NON_EMPTY_GROUP:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert answer["error_code"] == 0 and start_offsets(w, group) == {(topic, 0): 1}


def test_a_member_joining_while_offsets_change_joins_after_the_change(share_broker):
    """The emptiness check and the change are one step, as in Kafka's coordinator: a heartbeat sent while the
    change is being stored (a new state for each of 200 partitions, a store write each) is answered only after
    the change, so a member never joins a group whose offsets are being replaced."""
    import threading

    bootstrap = share_broker.bootstrap
    topic, group = make_topic(bootstrap, partitions=200), "racing"
    answered = {}
    with Wire(bootstrap) as w1, Wire(bootstrap) as w2:
        started = time.monotonic()
        sent = w1.send(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": p, "start_offset": 0} for p in range(200)]}]})

        def read_alter():
            answered["alter"] = w1.receive(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0)
            answered["alter_at"] = time.monotonic()

        reader = threading.Thread(target=read_alter)
        reader.start()
        time.sleep(0.05)  # the alter has begun: its check is done, its writes go on
        joined = heartbeat(w2, group, "m1", 0, [topic])
        joined_at = time.monotonic()
        reader.join(LIMIT_S)
    cid, altered = answered["alter"]
    assert cid == sent and altered["error_code"] == 0
    assert all(p["error_code"] == 0 for p in altered["responses"][0]["partitions"])
    assert joined["error_code"] == 0
    took = answered["alter_at"] - started
    print(f"alter took {took:.3f} s; join answered {joined_at - answered['alter_at']:+.3f} s after it")
    assert took > 0.2, "the alter was too quick to tell the order"  # not a timing target: the test's premise
    assert joined_at >= answered["alter_at"] - 0.05  # answered after the alter, not while it was stored
