"""Topic ids (KIP-516) on one broker: made at creation, kept across restarts, in every partition dir, answered
by Metadata v10-12 and CreateTopics v7, looked up by Metadata v12 and DeleteTopics v6, and a log whose
``partition.metadata`` names another topic is never served.
"""

from __future__ import annotations

import base64
import uuid

import pytest

from broker.log.checkpoint import read_partition_metadata
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.schema import ZERO_UUID
from broker.topic_ids import format_topic_id, parse_topic_id

from tests.cluster.workload import read_all

from .wire import Wire, make_batch

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

LIMIT_S = 30  # guards against a hang, not a timing assertion


def create(w: Wire, name: str, partitions: int = 2) -> dict:
    [answer] = w.call(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 30000, "validate_only": False})["topics"]
    assert answer["error_code"] == 0, answer
    return answer


def metadata(w: Wire, version: int, topics: list[dict] | None) -> list[dict]:
    return w.call(ApiKey.METADATA, version, {"topics": topics, "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})["topics"]


def test_a_topic_id_is_made_once_answered_everywhere_and_kept(broker):
    with Wire(broker.bootstrap) as w:
        created = create(w, "orders")
        topic_id = created["topic_id"]
        assert topic_id != ZERO_UUID
        [by_name] = metadata(w, 12, [{"name": "orders", "topic_id": ZERO_UUID}])
        assert (by_name["name"], by_name["topic_id"], by_name["error_code"]) == ("orders", topic_id, 0)
        [v10] = metadata(w, 10, [{"name": "orders"}])
        assert v10["topic_id"] == topic_id
        [by_id] = metadata(w, 12, [{"name": None, "topic_id": topic_id}])
        assert (by_id["name"], by_id["topic_id"], by_id["error_code"]) == ("orders", topic_id, 0)
        assert sorted(p["partition_index"] for p in by_id["partitions"]) == [0, 1]
        everything = {t["name"]: t["topic_id"] for t in metadata(w, 12, None)}
        assert everything["orders"] == topic_id

        unknown = uuid.uuid4()
        [missing] = metadata(w, 12, [{"name": None, "topic_id": unknown}])
        assert (missing["name"], missing["topic_id"], missing["error_code"]) == (
            None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)
        # ids are v12's: v10 and v11 refuse a request naming one, as Kafka does
        [refused] = metadata(w, 11, [{"name": "orders", "topic_id": topic_id}])
        assert refused["error_code"] == ErrorCode.INVALID_REQUEST
        assert "orders" not in {t["name"] for t in metadata(w, 12, [{"name": None, "topic_id": unknown}])}

    for p in (0, 1):  # Kafka's partition.metadata in each partition dir
        text = (broker.data_dir / f"orders-{p}" / "partition.metadata").read_text()
        assert text == f"version: 0\ntopic_id: {format_topic_id(topic_id)}"

    # librdkafka's view (it reads Metadata v12): the same id
    admin = admin_mod.AdminClient({"bootstrap.servers": broker.bootstrap})
    [described] = admin.describe_topics(ck.TopicCollection(["orders"]))["orders"].result(LIMIT_S),
    # librdkafka prints a uuid in standard base64 (Kafka's Java client in the URL-safe alphabet): the same 16 bytes
    assert base64.b64decode(str(described.topic_id) + "==") == topic_id.bytes

    broker.restart()
    with Wire(broker.bootstrap) as w:
        [again] = metadata(w, 12, [{"name": None, "topic_id": topic_id}])
        assert (again["name"], again["error_code"]) == ("orders", 0)


def test_delete_topics_by_id(broker):
    with Wire(broker.bootstrap) as w:
        topic_id = create(w, "short-lived", 1)["topic_id"]
        unknown = uuid.uuid4()
        answers = w.call(ApiKey.DELETE_TOPICS, 6, {"topics": [
            {"name": None, "topic_id": unknown},
            {"name": "short-lived", "topic_id": topic_id},  # both: Kafka refuses
        ], "timeout_ms": 30000})["responses"]
        assert [(a["topic_id"], a["error_code"]) for a in answers] == [
            (unknown, ErrorCode.UNKNOWN_TOPIC_ID), (topic_id, ErrorCode.INVALID_REQUEST)]
        [deleted] = w.call(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": topic_id}],
                                                     "timeout_ms": 30000})["responses"]
        assert (deleted["name"], deleted["topic_id"], deleted["error_code"]) == ("short-lived", topic_id, 0)
        assert metadata(w, 12, [{"name": None, "topic_id": topic_id}])[0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        # a new topic of the same name is another topic
        assert create(w, "short-lived", 1)["topic_id"] not in (topic_id, ZERO_UUID)


def test_a_log_of_another_topic_id_is_not_served(broker):
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce("ledger", b"kept-%d" % i, partition=0)
    assert producer.flush(LIMIT_S) == 0
    with Wire(broker.bootstrap) as w:
        [meta] = metadata(w, 12, [{"name": "ledger", "topic_id": ZERO_UUID}])
    topic_id = meta["topic_id"]
    part = broker.data_dir / "ledger-0"
    assert read_partition_metadata(part) == topic_id
    broker.stop()
    other = uuid.uuid4()  # as a log a deleted topic of the same name left behind would name
    (part / "partition.metadata").write_text(f"version: 0\ntopic_id: {format_topic_id(other)}")
    broker.start()
    with Wire(broker.bootstrap) as w:
        [produce] = w.call(ApiKey.PRODUCE, 8, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "ledger", "partition_data": [{"index": 0, "records": make_batch([b"x"])}]}]})["responses"]
        assert produce["partition_responses"][0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert parse_topic_id((part / "partition.metadata").read_text().split("topic_id: ")[1]) == other  # untouched
    assert "belongs to another topic than id" in broker.stderr_text()
    assert "INCONSISTENT_TOPIC_ID" in broker.stderr_text()

    # the operator puts the right file back: served again, every record there
    (part / "partition.metadata").write_text(f"version: 0\ntopic_id: {format_topic_id(topic_id)}")
    broker.restart()
    assert [v for _p, _o, v in read_all(broker.bootstrap, "ledger")] == [b"kept-%d" % i for i in range(5)]

