"""Incremental fetch sessions (KIP-227) on a real broker: the protocol's rules over the wire (what a
session holds, which partitions an incremental answer carries, epochs, forgetting, closing, the cache's
limit, a throttled answer), and kafka-python, whose consumer uses sessions by default, reading many
partitions through them, across a broker restart that loses every session.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from broker.protocol import ApiKey, ErrorCode
from tests.server.test_api import produce
from tests.server.test_quotas import FAST_WINDOWS, scrape, set_quota
from tests.server.wire import Wire, make_batch

pytestmark = pytest.mark.clients

F = ApiKey.FETCH


def create_topic(broker, name: str, partitions: int) -> None:
    with Wire(broker.bootstrap) as w:
        response = w.call(ApiKey.CREATE_TOPICS, 5, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": []}], "timeout_ms": 30000, "validate_only": False})
    assert response["topics"][0]["error_code"] == 0, response


def partitions_body(topic: str, offsets: dict[int, int]) -> list[dict]:
    return [{"topic": topic, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
         "partition_max_bytes": 1 << 20} for p, o in sorted(offsets.items())]}] if offsets else []


def fetch(w: Wire, session_id: int, epoch: int, topics: list[dict], forgotten: list[dict] = (),
          max_wait_ms: int = 0, version: int = 12) -> dict:
    return w.call(F, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "topics": topics,
        "forgotten_topics_data": list(forgotten), "rack_id": ""})


def answered(response: dict) -> dict[tuple[str, int], dict]:
    return {(t["topic"], p["partition_index"]): p for t in response["responses"] for p in t["partitions"]}


def sessions(broker, name: str = "kafkapy_fetch_sessions") -> float | None:
    """An unlabelled gauge's value in a scrape."""
    for line in scrape(broker).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def records_in(p: dict) -> int:
    return len(p["records"] or b"")


@pytest.fixture
def topic(broker):
    create_topic(broker, "sessions", 4)
    with Wire(broker.bootstrap) as w:
        for p in range(4):
            produce(w, "sessions", make_batch([b"a", b"b"]), partition=p)
    return "sessions"


def test_a_full_request_opens_a_session_and_an_incremental_one_answers_only_what_changed(broker, topic):
    with Wire(broker.bootstrap) as w:
        first = fetch(w, 0, 0, partitions_body(topic, {p: 0 for p in range(4)}))
        assert first["error_code"] == 0 and first["session_id"] != 0
        sid = first["session_id"]
        assert sorted(answered(first)) == [(topic, p) for p in range(4)]
        assert all(records_in(p) > 0 and p["high_watermark"] == 2 for p in answered(first).values())
        assert sessions(broker) == 1
        assert sessions(broker, "kafkapy_fetch_session_partitions") == 4
        # the fetcher moves its offsets to 2 (sent, as they changed): nothing new, nothing answered
        second = fetch(w, sid, 1, partitions_body(topic, {p: 2 for p in range(4)}))
        assert (second["error_code"], second["session_id"], second["responses"]) == (0, sid, [])
        # one partition gets a record: only it is answered, though the request names none
        produce(w, topic, make_batch([b"c"]), partition=2)
        third = fetch(w, sid, 2, [])
        assert list(answered(third)) == [(topic, 2)]
        assert answered(third)[(topic, 2)]["high_watermark"] == 3 and records_in(answered(third)[(topic, 2)]) > 0
        # the fetcher has not moved partition 2's offset: its records are answered again, nothing else
        assert list(answered(fetch(w, sid, 3, []))) == [(topic, 2)]
        assert answered(fetch(w, sid, 4, partitions_body(topic, {2: 3}))) == {}


def test_an_empty_incremental_request_waits_out_max_wait(broker, topic):
    with Wire(broker.bootstrap) as w:
        sid = fetch(w, 0, 0, partitions_body(topic, {p: 2 for p in range(4)}))["session_id"]
        started = time.monotonic()
        response = fetch(w, sid, 1, [], max_wait_ms=500)
        assert response["responses"] == [] and time.monotonic() - started >= 0.45
        w.send(F, 12, {"replica_id": -1, "max_wait_ms": 10000, "min_bytes": 1, "max_bytes": 1 << 20,
                       "isolation_level": 0, "session_id": sid, "session_epoch": 2, "topics": [],
                       "forgotten_topics_data": [], "rack_id": ""})
        with Wire(broker.bootstrap) as producer:  # a record on any partition of the session ends the wait
            produce(producer, topic, make_batch([b"late"]), partition=3)
        _cid, woken = w.receive(F, 12)
        assert list(answered(woken)) == [(topic, 3)]


def test_epochs_unknown_ids_and_closing(broker, topic):
    with Wire(broker.bootstrap) as w:
        sessionless = fetch(w, 0, -1, partitions_body(topic, {0: 0}))
        assert sessionless["session_id"] == 0 and list(answered(sessionless)) == [(topic, 0)]
        sid = fetch(w, 0, 0, partitions_body(topic, {0: 0, 1: 0}))["session_id"]
        wrong = fetch(w, sid, 5, [])
        assert (wrong["error_code"], wrong["session_id"], wrong["responses"]) == (
            ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
        unknown = fetch(w, sid + 1 if sid < 2**31 - 1 else 1, 1, [])
        assert unknown["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert fetch(w, sid, 1, [])["error_code"] == 0  # the right epoch still works after the errors
        assert fetch(w, sid, 1, [])["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH  # a replay
        # a full request naming the session closes it, and opens another
        again = fetch(w, sid, 0, partitions_body(topic, {3: 0}))
        assert again["session_id"] not in (0, sid)
        assert fetch(w, sid, 2, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # a session from another connection is the same session (sessions belong to the broker)
        with Wire(broker.bootstrap) as other:
            assert fetch(other, again["session_id"], 1, [])["error_code"] == 0
        # forgetting every partition closes the session: the answer has no session id
        closed = fetch(w, again["session_id"], 2, [], forgotten=[{"topic": topic, "partitions": [3]}])
        assert (closed["error_code"], closed["session_id"]) == (0, 0)
        assert fetch(w, again["session_id"], 3, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert sessions(broker) == 0


def test_added_and_forgotten_partitions(broker, topic):
    with Wire(broker.bootstrap) as w:
        sid = fetch(w, 0, 0, partitions_body(topic, {0: 2}))["session_id"]
        added = fetch(w, sid, 1, partitions_body(topic, {1: 0}))  # added: answered with its records
        assert list(answered(added)) == [(topic, 1)]
        forgot = fetch(w, sid, 2, partitions_body(topic, {1: 2}), forgotten=[{"topic": topic, "partitions": [0]}])
        assert answered(forgot) == {}
        produce(w, topic, make_batch([b"x"]), partition=0)  # forgotten: its news is not answered
        produce(w, topic, make_batch([b"y"]), partition=1)
        assert list(answered(fetch(w, sid, 3, []))) == [(topic, 1)]


def test_a_moved_log_start_offset_is_answered_without_records(broker, topic):
    with Wire(broker.bootstrap) as w:
        sid = fetch(w, 0, 0, partitions_body(topic, {p: 2 for p in range(4)}))["session_id"]
        result = w.call(ApiKey.DELETE_RECORDS, 1, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 1, "offset": 1}]}], "timeout_ms": 10000})
        assert result["topics"][0]["partitions"][0]["error_code"] == 0
        changed = answered(fetch(w, sid, 1, []))
        assert list(changed) == [(topic, 1)]
        assert changed[(topic, 1)]["log_start_offset"] == 1 and records_in(changed[(topic, 1)]) == 0


def test_the_cache_limit_answers_without_a_session(broker_factory):
    broker = broker_factory({"max.incremental.fetch.session.cache.slots": 2})
    create_topic(broker, "few", 1)
    with Wire(broker.bootstrap) as w:
        ids = [fetch(w, 0, 0, partitions_body("few", {0: 0}))["session_id"] for _ in range(3)]
    assert ids[0] and ids[1] and ids[2] == 0  # two fresh sessions are not evicted for a third
    assert sessions(broker) == 2
    none = broker_factory({"max.incremental.fetch.session.cache.slots": 0})
    create_topic(none, "few", 1)
    with Wire(none.bootstrap) as w:
        response = fetch(w, 0, 0, partitions_body("few", {0: 0}))
    assert response["session_id"] == 0 and response["error_code"] == 0


def test_a_throttled_full_request_keeps_no_session(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    create_topic(broker, "held", 1)
    with Wire(broker.bootstrap) as w:
        produce(w, "held", make_batch([b"v" * 50_000] * 4))
    set_quota(broker, [("client-id", "wire")], consumer_byte_rate=1000)
    with Wire(broker.bootstrap) as w:
        response = fetch(w, 0, 0, partitions_body("held", {0: 0}))
    assert response["throttle_time_ms"] > 0 and response["responses"] == []
    assert response["session_id"] == 0
    assert sessions(broker) == 0


# -- kafka-python, whose consumer fetches through sessions ------------------------------------------


def test_kafka_python_reads_many_partitions_through_a_session_across_a_restart(broker_factory):
    broker = broker_factory({"num.partitions": 24})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    expected = {}
    for i in range(480):
        value = b"v-%d" % i
        producer.produce("many", value, partition=i % 24)
        expected.setdefault(i % 24, []).append(value)
    assert producer.flush(30) == 0

    def consume(consumer, want: int) -> dict[int, list[bytes]]:
        got: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + 60
        while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                got.setdefault(tp.partition, []).extend(m.value for m in messages)
        return got

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    consumer.assign([TopicPartition("many", p) for p in range(24)])
    consumer.seek_to_beginning()
    try:
        assert consume(consumer, 480) == expected
        assert sessions(broker) == 1  # one session for the consumer's fetches
        assert sessions(broker, "kafkapy_fetch_session_partitions") == 24
        # new records on two partitions only reach the consumer through its incremental requests
        producer.produce("many", b"late-3", partition=3)
        producer.produce("many", b"late-17", partition=17)
        assert producer.flush(30) == 0
        assert consume(consumer, 2) == {3: [b"late-3"], 17: [b"late-17"]}
        # the consumer's session went on through incremental requests (its epoch counts the accepted ones)
        handler, = consumer._fetcher._session_handlers.values()
        assert handler.next_metadata.session_id != 0 and handler.next_metadata.epoch >= 2
        # a restart loses every session: the consumer is told so and starts a new one
        broker.restart()
        producer.produce("many", b"after-restart", partition=9)
        assert producer.flush(30) == 0
        assert consume(consumer, 1) == {9: [b"after-restart"]}
        assert sessions(broker) == 1
    finally:
        consumer.close()
