"""ListOffsets v6-v7: MAX_TIMESTAMP (KIP-734) through librdkafka, and specs we do not serve."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from broker.protocol import ApiKey, ErrorCode

from .wire import Wire, make_batch

LO, P = ApiKey.LIST_OFFSETS, ApiKey.PRODUCE
WAIT_S = 30  # a guard against a hang, not a performance assertion


def _list(admin: AdminClient, topic: str, spec) -> tuple[int, int]:
    tp = TopicPartition(topic, 0)
    info = admin.list_offsets({tp: spec})[tp].result(WAIT_S)
    return info.offset, info.timestamp


def _produce_raw(w: Wire, topic: str, batch: bytes) -> None:
    body = w.call(P, 8, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    assert body["responses"][0]["partition_responses"][0]["error_code"] == 0


def _ask(w: Wire, topic: str, spec: int, version: int) -> dict:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": spec, "max_num_offsets": 1,
                                        "current_leader_epoch": -1}]}]}
    return w.call(LO, version, body)["topics"][0]["partitions"][0]


def test_max_timestamp_through_librdkafka_across_segments_and_a_restart(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Small segments: the largest timestamp sits in a middle segment, in the middle of its batch.
    admin.create_topics([NewTopic("maxts", 1, 1, config={"segment.bytes": "100"})])["maxts"].result(WAIT_S)
    assert _list(admin, "maxts", OffsetSpec.max_timestamp()) == (-1, -1)  # empty: no record, no result
    with Wire(broker.bootstrap) as w:
        _produce_raw(w, "maxts", make_batch([b"a", b"b"], timestamps=[1000, 2000]))
        _produce_raw(w, "maxts", make_batch([b"c", b"d", b"e"], timestamps=[3000, 9000, 9000]))
        _produce_raw(w, "maxts", make_batch([b"f"], timestamps=[4000]))
    assert len(list((broker.data_dir / "maxts-0").glob("*.log"))) == 3
    assert _list(admin, "maxts", OffsetSpec.max_timestamp()) == (3, 9000)
    assert _list(admin, "maxts", OffsetSpec.earliest())[0] == 0
    assert _list(admin, "maxts", OffsetSpec.latest())[0] == 6
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _list(admin, "maxts", OffsetSpec.max_timestamp()) == (3, 9000)


def test_max_timestamp_on_a_log_append_time_topic_is_the_newest_batch(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("maxts-lat", 1, 1, config={"message.timestamp.type": "LogAppendTime"})]
                        )["maxts-lat"].result(WAIT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(3):
        producer.produce("maxts-lat", value=b"%d" % i, partition=0, timestamp=10_000_000_000_000 - i)
        assert producer.flush(WAIT_S) == 0
        time.sleep(0.01)  # appends in distinct milliseconds: equal timestamps would name the first of them
    offset, timestamp = _list(admin, "maxts-lat", OffsetSpec.max_timestamp())
    # The producer's timestamps are replaced by the broker's clock: the last append is the newest.
    assert offset == 2 and timestamp < 10_000_000_000_000 - 2


@pytest.mark.parametrize(("spec", "version", "error"), [
    (-3, 5, ErrorCode.UNSUPPORTED_VERSION),  # MAX_TIMESTAMP needs v7
    (-3, 6, ErrorCode.UNSUPPORTED_VERSION),
    (-4, 7, ErrorCode.UNSUPPORTED_VERSION),  # EARLIEST_LOCAL_TIMESTAMP (v8): not served
    (-5, 7, ErrorCode.UNSUPPORTED_VERSION),  # LATEST_TIERED_TIMESTAMP (v9): not served
    (-9, 7, ErrorCode.INVALID_REQUEST),
    (-3, 0, ErrorCode.UNSUPPORTED_VERSION),
])
def test_a_spec_we_do_not_serve_is_an_error_not_offset_zero(broker, spec, version, error):
    with Wire(broker.bootstrap) as w:
        _produce_raw(w, "specs", make_batch([b"a", b"b"], timestamps=[1000, 2000]))
        answer = _ask(w, "specs", spec, version)
        assert answer["error_code"] == error
        assert answer.get("offset", -1) == -1 and answer.get("old_style_offsets", []) == []
        # the other specs still answer on that connection
        assert _ask(w, "specs", -3, 7)["offset"] == 1
        assert _ask(w, "specs", -1, 6)["offset"] == 2
