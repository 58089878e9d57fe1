"""The core APIs over the wire against a broker process: exact request/response bodies."""

from __future__ import annotations

import struct
import threading
import time

import pytest

from broker.protocol import ApiKey, ErrorCode, api_versions_table, encode_request
from broker.records import decode_batch, decode_message_set, encode_message_set, iter_records
from broker.records.legacy import LegacyMessage
from broker.server.registry import load_apis

from .wire import Wire, make_batch

P, F, LO, MD = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA


def produce(w: Wire, topic: str, records, partition: int = 0, acks: int = -1, version: int = 8) -> dict:
    body = {"acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    response = w.call(P, version, body)
    return response["responses"][0]["partition_responses"][0]


def fetch_body(topic, offset, partition=0, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, part_max=1 << 20):
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                         "partition_max_bytes": part_max}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetch(w: Wire, topic, offset, version=11, **kw) -> dict:
    return w.call(F, version, fetch_body(topic, offset, **kw))["responses"][0]["partitions"][0]


def test_api_versions_is_exactly_the_registry(broker):
    expected = load_apis().versions()
    schema = api_versions_table()
    with Wire(broker.bootstrap) as w:
        for version in range(4):
            body = w.call(ApiKey.API_VERSIONS, version, {"client_software_name": "t", "client_software_version": "1"})
            assert body["error_code"] == 0
            table = {e["api_key"]: (e["min_version"], e["max_version"]) for e in body["api_keys"]}
            assert table == expected
            for key, (low, high) in table.items():
                assert schema[key][0] <= low <= high <= schema[key][1]
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA, P, F, LO, ApiKey.SASL_HANDSHAKE} <= set(expected)


def test_api_versions_of_unknown_version_answers_v0_with_error_35(broker):
    with Wire(broker.bootstrap) as w:
        frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 77, 5, -1) + b"\x00\x00\x00"
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        cid, body = w.receive(ApiKey.API_VERSIONS, 0)
        assert cid == 5 and body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert {e["api_key"] for e in body["api_keys"]} == set(load_apis().versions())
        # the connection stays usable
        assert w.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0


def test_unsupported_version_of_other_api_closes_only_that_connection(broker):
    with Wire(broker.bootstrap) as bad, Wire(broker.bootstrap) as good:
        frame = struct.pack(">hhih", MD, 99, 1, -1)
        bad.send_raw(struct.pack(">i", len(frame)) + frame)
        assert bad.is_closed_by_peer()
        assert good.call(MD, 9, {"topics": []})["controller_id"] == 0


def test_metadata_cluster_broker_topics_and_auto_create(broker):
    with Wire(broker.bootstrap) as w:
        body = w.call(MD, 9, {"topics": [{"name": "auto1"}], "allow_auto_topic_creation": True})
        assert len(body["cluster_id"]) == 22 and body["controller_id"] == 0
        assert body["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None}]
        (topic,) = body["topics"]
        assert topic["error_code"] == 0 and topic["name"] == "auto1" and not topic["is_internal"]
        assert topic["partitions"] == [{"error_code": 0, "partition_index": 0, "leader_id": 0, "leader_epoch": 0,
                                        "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []}]
        body = w.call(MD, 9, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": False})
        assert body["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        body = w.call(MD, 9, {"topics": [{"name": "bad/name"}, {"name": "x" * 250}, {"name": ".."}]})
        assert [t["error_code"] for t in body["topics"]] == [ErrorCode.INVALID_TOPIC_EXCEPTION] * 3
        assert [t["name"] for t in w.call(MD, 9, {"topics": None})["topics"]] == ["auto1"]
        assert [t["name"] for t in w.call(MD, 0, {"topics": []})["topics"]] == ["auto1"]
        assert w.call(MD, 1, {"topics": []})["topics"] == []
        # '.' and '_' collide
        body = w.call(MD, 9, {"topics": [{"name": "a.b"}]})
        assert body["topics"][0]["error_code"] == 0
        body = w.call(MD, 9, {"topics": [{"name": "a_b"}]})
        assert body["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        first = w.call(MD, 2, {"topics": None})["cluster_id"]
    broker.restart()
    with Wire(broker.bootstrap) as w:
        assert w.call(MD, 2, {"topics": None})["cluster_id"] == first


def test_produce_then_fetch_every_version(broker):
    with Wire(broker.bootstrap) as w:
        r = produce(w, "pf", make_batch([b"a", b"b", b"c"], keys=[b"1", None, b"3"]))
        assert (r["error_code"], r["base_offset"]) == (0, 0)
        r = produce(w, "pf", make_batch([b"d"]), version=3, acks=1)
        assert (r["error_code"], r["base_offset"]) == (0, 3)
        r = produce(w, "pf", make_batch([b"e"]), version=9)
        assert (r["error_code"], r["base_offset"], r["log_start_offset"]) == (0, 4, 0)
        for version in range(4, 13):
            p = fetch(w, "pf", 0, version=version)
            assert p["error_code"] == 0 and p["high_watermark"] == 5
            values = [e.value for e in iter_records(p["records"])]
            assert values == [b"a", b"b", b"c", b"d", b"e"], version
        p = fetch(w, "pf", 2, version=12)
        assert [e.offset for e in iter_records(p["records"])][0] <= 2
        assert p["last_stable_offset"] == 5 and p["log_start_offset"] == 0


@pytest.mark.parametrize("version, magic", [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_old_fetch_versions_get_down_converted_message_sets(broker, version, magic):
    with Wire(broker.bootstrap) as w:
        produce(w, "old", make_batch([b"x", b"y"], keys=[b"k", b"l"]))
        p = fetch(w, "old", 0, version=version)
        messages = decode_message_set(p["records"])
        assert [(m.offset, m.magic, m.key, m.value) for m in messages] == [
            (0, magic, b"k", b"x"), (1, magic, b"l", b"y")]


def test_legacy_produce_is_up_converted(broker):
    with Wire(broker.bootstrap) as w:
        for version, magic in ((0, 0), (2, 1)):
            msgs = [LegacyMessage(i, magic, 0, 1_700_000_000_000 if magic else -1, b"k", b"v%d" % i)
                    for i in range(2)]
            r = produce(w, "legacy", encode_message_set(msgs, magic), version=version)
            assert r["error_code"] == 0
        p = fetch(w, "legacy", 0)
        entries = list(iter_records(p["records"]))
        assert [e.offset for e in entries] == [0, 1, 2, 3]
        assert [e.value for e in entries] == [b"v0", b"v1", b"v0", b"v1"]
        assert all(decode_batch(p["records"]).magic == 2 for _ in [0])


def test_produce_errors_are_per_partition(broker_factory):
    b = broker_factory(message_max_bytes=2000)
    with Wire(b.bootstrap) as w:
        produce(w, "errs", make_batch([b"ok"]))
        good = make_batch([b"fine"])
        corrupt = bytearray(make_batch([b"broken"]))
        corrupt[-1] ^= 0xFF
        body = {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": "errs", "partition_data": [
            {"index": 0, "records": bytes(corrupt)},
            {"index": 7, "records": good},
            {"index": 0, "records": make_batch([b"z" * 3000])},
            {"index": 0, "records": good + good},
            {"index": 0, "records": encode_message_set([LegacyMessage(0, 1, 0, 1, None, b"v")], 1)},
            {"index": 0, "records": good[:40]},
            {"index": 0, "records": good},
        ]}]}
        parts = w.call(P, 8, body)["responses"][0]["partition_responses"]
        assert [p["error_code"] for p in parts] == [
            ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.MESSAGE_TOO_LARGE,
            ErrorCode.INVALID_RECORD, ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE, ErrorCode.NONE]
        assert parts[-1]["base_offset"] == 1
        bad_acks = produce(w, "errs", good, acks=2)
        assert bad_acks["error_code"] == ErrorCode.INVALID_REQUIRED_ACKS
        assert fetch(w, "errs", 0)["high_watermark"] == 2


def test_acks_zero_gets_no_response_and_a_failure_closes(broker):
    with Wire(broker.bootstrap) as w:
        w.send(P, 8, {"acks": 0, "timeout_ms": 1, "topic_data": [
            {"name": "a0", "partition_data": [{"index": 0, "records": make_batch([b"fire"])}]}]})
        # the next response on the connection is the metadata answer, not a produce answer
        body = w.call(MD, 9, {"topics": [{"name": "a0"}]})
        assert body["topics"][0]["error_code"] == 0
        assert fetch(w, "a0", 0)["high_watermark"] == 1
        w.send(P, 8, {"acks": 0, "timeout_ms": 1, "topic_data": [
            {"name": "a0", "partition_data": [{"index": 9, "records": make_batch([b"lost"])}]}]})
        assert w.is_closed_by_peer()


def test_log_append_time_and_min_insync(broker_factory):
    b = broker_factory(log_message_timestamp_type="LogAppendTime", min_insync_replicas=2)
    with Wire(b.bootstrap) as w:
        before = int(time.time() * 1000)
        r = produce(w, "lat", make_batch([b"v"], timestamp=5), acks=1)
        assert r["error_code"] == 0 and r["log_append_time_ms"] >= before
        (entry,) = iter_records(fetch(w, "lat", 0)["records"])
        assert entry.timestamp == r["log_append_time_ms"]
        assert produce(w, "lat", make_batch([b"v"]), acks=-1)["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS


def test_fetch_offset_out_of_range_and_unknown_partition(broker):
    with Wire(broker.bootstrap) as w:
        produce(w, "oor", make_batch([b"1"]))
        p = fetch(w, "oor", 5)
        assert p["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE and p["high_watermark"] == 1
        assert fetch(w, "oor", 1)["records"] in (b"", None)
        assert fetch(w, "oor", 0, partition=3)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        body = fetch_body("oor", 0)
        body["session_id"] = 1234  # a full request (epoch -1) naming a session closes it, if there is one
        assert (w.call(F, 11, body)["error_code"], w.call(F, 11, body)["session_id"]) == (0, 0)
        body["session_epoch"] = 1  # an incremental one needs the session
        assert w.call(F, 11, body)["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_limits_and_first_batch_always_returned(broker):
    with Wire(broker.bootstrap) as w:
        for i in range(5):
            produce(w, "lim", make_batch([bytes([i]) * 1000]))
        sizes = len(make_batch([b"x" * 1000]))
        p = fetch(w, "lim", 0, part_max=10)
        assert len(p["records"]) == sizes  # over the limit, but one batch so the consumer progresses
        p = fetch(w, "lim", 0, part_max=sizes * 2 + 5)
        assert len(p["records"]) == sizes * 2
        body = fetch_body("lim", 0, max_bytes=sizes * 3)
        body["topics"][0]["partitions"].append({"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20})
        parts = w.call(F, 11, body)["responses"][0]["partitions"]
        assert len(parts[0]["records"]) + len(parts[1]["records"]) == sizes * 3


def test_long_poll_is_woken_by_an_append(broker):
    with Wire(broker.bootstrap) as w, Wire(broker.bootstrap) as producer:
        produce(producer, "lp", make_batch([b"first"]))
        w.send(F, 11, fetch_body("lp", 1, max_wait_ms=30_000, min_bytes=1))
        result = {}

        def read():
            result["body"] = w.receive(F, 11)[1]

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(0.3)
        assert reader.is_alive()  # parked in the purgatory: nothing to return yet
        produce(producer, "lp", make_batch([b"second"]))
        reader.join(30)
        p = result["body"]["responses"][0]["partitions"][0]
        assert [e.value for e in iter_records(p["records"])] == [b"second"]


def test_long_poll_times_out_with_empty_records(broker):
    with Wire(broker.bootstrap) as w:
        produce(w, "lpt", make_batch([b"v"]))
        p = fetch(w, "lpt", 1, max_wait_ms=50, min_bytes=1)
        assert p["error_code"] == 0 and p["records"] in (b"", None)


def test_pipelined_requests_answer_in_order(broker):
    with Wire(broker.bootstrap) as w, Wire(broker.bootstrap) as other:
        produce(other, "pipe", make_batch([b"v"]))
        ids = [w.send(F, 11, fetch_body("pipe", 1, max_wait_ms=300, min_bytes=1))]
        ids += [w.send(ApiKey.API_VERSIONS, 2, {}) for _ in range(3)]
        ids += [w.send(P, 8, {"acks": 1, "timeout_ms": 1, "topic_data": [
            {"name": "pipe", "partition_data": [{"index": 0, "records": make_batch([b"%d" % i])}]}]})
            for i in range(20)]
        keys = [F] + [ApiKey.API_VERSIONS] * 3 + [P] * 20
        got = [w.receive(k, 11 if k == F else (2 if k == ApiKey.API_VERSIONS else 8)) for k in keys]
        assert [cid for cid, _ in got] == ids
        offsets = [b["responses"][0]["partition_responses"][0]["base_offset"] for _, b in got[4:]]
        assert offsets == list(range(1, 21))


def test_failing_acks_zero_closes_only_after_the_answers_ahead_of_it(broker):
    # One write: a long poll that parks, a metadata request answered at once, then an acks=0
    # produce that fails. The connection closes, but only after both earlier answers went out.
    with Wire(broker.bootstrap) as w:
        produce(w, "close-order", make_batch([b"v"]))
        w.correlation_id = 100
        w.send_raw(encode_request(F, 11, 101, "wire", fetch_body("close-order", 1, max_wait_ms=200, min_bytes=1))
                   + encode_request(MD, 9, 102, "wire", {"topics": [{"name": "close-order"}]})
                   + encode_request(P, 8, 103, "wire", {"acks": 0, "timeout_ms": 1, "topic_data": [
                       {"name": "close-order", "partition_data": [{"index": 7, "records": make_batch([b"x"])}]}]}))
        cid, body = w.receive(F, 11)
        assert cid == 101 and body["responses"][0]["partitions"][0]["records"] in (b"", None)
        cid, body = w.receive(MD, 9)
        assert cid == 102 and body["topics"][0]["error_code"] == 0
        assert w.is_closed_by_peer()


def test_list_offsets_earliest_latest_and_by_time(broker):
    with Wire(broker.bootstrap) as w:
        produce(w, "lo", make_batch([b"a", b"b"], timestamps=[1000, 2000]))
        produce(w, "lo", make_batch([b"c"], timestamps=[3000]))

        def ask(ts, version=5):
            body = {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "lo", "partitions": [{"partition_index": 0, "timestamp": ts, "max_num_offsets": 1,
                                               "current_leader_epoch": -1}]}]}
            return w.call(LO, version, body)["topics"][0]["partitions"][0]

        assert ask(-2)["offset"] == 0 and ask(-1)["offset"] == 3
        assert (ask(1500)["offset"], ask(1500)["timestamp"]) == (1, 2000)
        assert (ask(2500)["offset"], ask(2500)["timestamp"]) == (2, 3000)
        assert ask(9999)["offset"] == -1
        assert ask(-1, version=0)["old_style_offsets"] == [3]
        assert ask(1000, version=1)["offset"] == 0


def test_sasl_on_a_plaintext_listener_is_an_illegal_state_as_in_kafka(broker):
    with Wire(broker.bootstrap) as w:
        body = w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert body == {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        body = w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0a\0b"})
        assert body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        # the connection stays usable, as Kafka's
        assert w.call(ApiKey.METADATA, 1, {"topics": []})["brokers"]
