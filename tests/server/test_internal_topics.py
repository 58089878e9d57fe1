"""Internal topics cannot be deleted: not by an admin client's DeleteTopics, not by kafkactl.

Deleting ``__consumer_offsets`` would lose every group's committed offsets at the
next restart; the tests check that the refusal leaves them there.
"""

from __future__ import annotations

import pytest

from broker.protocol import ApiKey
from tests.kafkactl.conftest import Ctl, one_line_error

from .wire import Wire

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

LIMIT_S = 30  # guards against a hang, not a timing assertion


def commit_offset(bootstrap: str, group: str, topic: str, offset: int) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(offset):
        producer.produce(topic, b"v%d" % i, partition=0)
    assert producer.flush(LIMIT_S) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([ck.TopicPartition(topic, 0)], timeout=LIMIT_S)[0].offset
    finally:
        consumer.close()


def test_delete_topics_refuses_internal_topics_and_keeps_the_offsets(broker):
    commit_offset(broker.bootstrap, "billing", "orders", 3)
    admin = admin_mod.AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_topics(["__consumer_offsets", "__transaction_state", "orders"], operation_timeout=10)
    for name in ("__consumer_offsets", "__transaction_state"):  # present or not: refused by name
        with pytest.raises(ck.KafkaException) as info:
            futures[name].result(LIMIT_S)
        assert info.value.args[0].code() == ck.KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, 17
    assert futures["orders"].result(LIMIT_S) is None  # the others in the request carry on
    topics = admin.list_topics(timeout=LIMIT_S).topics
    assert "__consumer_offsets" in topics and "orders" not in topics

    with Wire(broker.bootstrap) as w:  # v5+ carries the reason (librdkafka asks for an older version)
        resp = w.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["__consumer_offsets"], "timeout_ms": 10000})
    [result] = resp["responses"]
    assert (result["name"], result["error_code"], result["error_message"]) == (
        "__consumer_offsets", 17, "topic __consumer_offsets is internal and cannot be deleted")

    broker.restart()
    assert committed(broker.bootstrap, "billing", "orders") == 3


def test_kafkactl_refuses_to_delete_an_internal_topic_and_deletes_nothing(broker):
    commit_offset(broker.bootstrap, "billing", "orders", 2)
    ctl = Ctl(broker.bootstrap)
    line = one_line_error(ctl("topics", "delete", "orders", "__consumer_offsets"), 1)
    assert "refusing to delete internal topic __consumer_offsets" in line
    assert "orders" in ctl("topics", "list").stdout.split()
    assert "__consumer_offsets" in ctl("topics", "list", "--internal").stdout.split()
    assert committed(broker.bootstrap, "billing", "orders") == 2
