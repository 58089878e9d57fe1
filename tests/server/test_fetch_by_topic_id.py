"""Fetch v13-16 on a broker process: topics named by id (KIP-516) in requests, forgotten topics, sessions and
answers; an id the broker does not know (a topic deleted and made again under its name) answered
UNKNOWN_TOPIC_ID; sessions that serve only the way of naming they were made with; v15's ReplicaState; and
librdkafka (which fetches at v16 and produces at v10) reading and writing through them.
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.schema import ZERO_UUID
from tests.server.test_fetch_sessions import create_topic
from tests.server.wire import Wire

LIMIT_S = 30  # guards against a hang, not a timing assertion


def topic_id(w: Wire, name: str) -> uuid.UUID:
    [t] = w.call(ApiKey.METADATA, 12, {"topics": [{"topic_id": ZERO_UUID, "name": name}],
                                       "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})["topics"]
    assert t["error_code"] == 0, t
    return t["topic_id"]


def by_id(tid: uuid.UUID, offsets: dict[int, int]) -> list[dict]:
    return [{"topic_id": tid, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
         "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in sorted(offsets.items())]}]


def fetch(w: Wire, version: int, topics: list[dict], session_id: int = 0, epoch: int = -1,
          forgotten: list[dict] = ()) -> dict:
    return w.call(ApiKey.FETCH, version, {
        "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1}, "max_wait_ms": 0,
        "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0, "session_id": session_id,
        "session_epoch": epoch, "topics": topics, "forgotten_topics_data": list(forgotten), "rack_id": ""})


def remake(broker, name: str, partitions: int, old_id: uuid.UUID) -> uuid.UUID:
    """Delete topic ``name`` and make it again under its name; the new topic's id, once Metadata gives it."""
    with Wire(broker.bootstrap) as w:
        deleted = w.call(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": ZERO_UUID}],
                                                   "timeout_ms": 30000})
        assert deleted["responses"][0]["error_code"] == 0
    create_topic(broker, name, partitions)
    with Wire(broker.bootstrap) as w:
        deadline = time.monotonic() + LIMIT_S
        while (new_id := topic_id(w, name)) == old_id:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    return new_id


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, b"rec-%d" % i, partition=i % partitions)
    assert producer.flush(LIMIT_S) == 0


def test_fetch_names_topics_by_id_and_refuses_an_unknown_one(broker):
    create_topic(broker, "by-id", 2)
    produce(broker.bootstrap, "by-id", 6, partitions=2)
    with Wire(broker.bootstrap) as w:
        tid = topic_id(w, "by-id")
        for version in (13, 15, 16):
            answer = fetch(w, version, by_id(tid, {0: 0, 1: 1}))
            assert answer["error_code"] == 0
            [t] = answer["responses"]
            assert t["topic_id"] == tid
            parts = {p["partition_index"]: p for p in t["partitions"]}
            assert {i: (p["error_code"], p["high_watermark"]) for i, p in parts.items()} == {0: (0, 3), 1: (0, 3)}
            assert all(len(p["records"]) > 0 for p in parts.values())
        stranger = uuid.uuid4()
        answer = fetch(w, 13, by_id(stranger, {0: 0}) + by_id(tid, {0: 3}))
        codes = {t["topic_id"]: [p["error_code"] for p in t["partitions"]] for t in answer["responses"]}
        assert codes == {stranger: [ErrorCode.UNKNOWN_TOPIC_ID], tid: [0]}

    # the topic deleted and made again under its name: the old id is unknown, the new one reads the new log
    new_id = remake(broker, "by-id", 2, tid)
    with Wire(broker.bootstrap) as w:
        [old] = fetch(w, 13, by_id(tid, {0: 0}))["responses"]
        assert [p["error_code"] for p in old["partitions"]] == [ErrorCode.UNKNOWN_TOPIC_ID]
        [new] = fetch(w, 13, by_id(new_id, {0: 0}))["responses"]
        assert [(p["error_code"], p["high_watermark"]) for p in new["partitions"]] == [(0, 0)]


def test_a_session_serves_only_the_way_of_naming_topics_it_was_made_with(broker):
    create_topic(broker, "sessioned", 2)
    produce(broker.bootstrap, "sessioned", 4, partitions=2)
    with Wire(broker.bootstrap) as w:
        tid = topic_id(w, "sessioned")
        stranger = uuid.uuid4()
        full = fetch(w, 16, by_id(tid, {0: 2, 1: 2}) + by_id(stranger, {0: 0}), epoch=0)  # from the end
        session = full["session_id"]
        assert session != 0
        assert {t["topic_id"] for t in full["responses"]} == {tid, stranger}
        # nothing new: only the unknown id, which answers its error every time
        [quiet] = fetch(w, 16, [], session, 1)["responses"]
        assert (quiet["topic_id"], [p["error_code"] for p in quiet["partitions"]]) == (
            stranger, [ErrorCode.UNKNOWN_TOPIC_ID])
        # a name-based request may not use this session
        by_name = w.call(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session, "session_epoch": 2, "topics": [], "forgotten_topics_data": [], "rack_id": ""})
        assert by_name["error_code"] == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        # forgotten by id; new records reach the partition still in the session
        produce(broker.bootstrap, "sessioned", 2, partitions=2)  # one more record on each partition
        answer = fetch(w, 16, [], session, 2, forgotten=[{"topic_id": tid, "partitions": [1]},
                                                         {"topic_id": stranger, "partitions": [0]}])
        [t] = answer["responses"]
        assert (t["topic_id"], [(p["partition_index"], p["high_watermark"]) for p in t["partitions"]]) == (
            tid, [(0, 3)])
        # and a session made by names refuses an id-based request
        named = w.call(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": 0, "forgotten_topics_data": [], "rack_id": "", "topics": [
                {"topic": "sessioned", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                       "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
        assert named["session_id"] != 0
        assert fetch(w, 13, [], named["session_id"], 1)["error_code"] == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_librdkafka_produces_at_v10_and_fetches_at_v16(broker):
    """librdkafka takes the highest versions both sides serve: the records it wrote come back whole."""
    create_topic(broker, "modern", 3)
    logs: list[str] = []
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "debug": "protocol", "logger": _Log(logs)})
    values = [b"m-%d" % i for i in range(300)]
    for i, value in enumerate(values):
        producer.produce("modern", value, key=b"k%d" % i, partition=i % 3)
    assert producer.flush(LIMIT_S) == 0
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "modern", "debug": "protocol",
                            "auto.offset.reset": "earliest", "logger": _Log(logs)})
    consumer.subscribe(["modern"])
    got = []
    deadline = time.monotonic() + LIMIT_S
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)
    assert any("Sent ProduceRequest (v10" in line for line in logs)
    assert any("Sent FetchRequest (v16" in line for line in logs)


class _Log:
    """A logger librdkafka writes its debug lines to."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def log(self, _level, fmt, *args) -> None:
        self.lines.append(fmt % args if args else fmt)

    def __getattr__(self, _name):
        return self.log


def test_a_session_never_reads_a_topic_made_again_under_the_name_of_one_it_holds(broker):
    """Kafka keys a session by topic id: once the topic is deleted, or deleted and made again under its name, the
    session's partitions answer UNKNOWN_TOPIC_ID under the old id, never the new topic's records."""
    create_topic(broker, "remade", 1)
    produce(broker.bootstrap, "remade", 3)
    with Wire(broker.bootstrap) as w:
        tid = topic_id(w, "remade")
        full = fetch(w, 16, by_id(tid, {0: 3}), epoch=0)  # from the end
        session = full["session_id"]
        assert session != 0
    remake(broker, "remade", 1, tid)
    produce(broker.bootstrap, "remade", 5)  # the new topic holds more records than the session's offset
    with Wire(broker.bootstrap) as w:
        answer = fetch(w, 16, [], session, 1)
        assert answer["error_code"] == 0 and answer["session_id"] == session
        [t] = answer["responses"]
        assert (t["topic_id"], [(p["error_code"], len(p["records"])) for p in t["partitions"]]) == (
            tid, [(ErrorCode.UNKNOWN_TOPIC_ID, 0)])
        # forgotten by its old id: the session is empty, so closed
        closed = fetch(w, 16, [], session, 2, forgotten=[{"topic_id": tid, "partitions": [0]}])
        assert (closed["error_code"], closed["session_id"], closed["responses"]) == (0, 0, [])
