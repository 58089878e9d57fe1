"""Record-level produce errors (KIP-467): the whole batch fails, the answer names each bad record."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError, InvalidTimestampError
from kafka.errors import KafkaError as KafkaPythonError

from broker.protocol import ApiKey, ErrorCode

from .test_api import fetch
from .wire import Wire, make_batch

WAIT_S = 30  # a guard against a hang, not a performance assertion


def _topics(broker, **configs: dict) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=config) for name, config in configs.items()])
    for future in futures.values():
        future.result(WAIT_S)


def _produce(w: Wire, topic: str, batch: bytes, version: int) -> dict:
    body = w.call(ApiKey.PRODUCE, version, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return body["responses"][0]["partition_responses"][0]


def test_raw_answer_names_every_keyless_record_and_every_bad_timestamp(broker):
    _topics(broker, compacted={"cleanup.policy": "compact"},
            windowed={"message.timestamp.difference.max.ms": "60000"})
    now = int(time.time() * 1000)
    with Wire(broker.bootstrap) as w:
        answer = _produce(w, "compacted", make_batch([b"a", b"b", b"c", b"d"], keys=[b"k", None, b"k", None]), 9)
        assert answer["error_code"] == ErrorCode.INVALID_RECORD
        assert answer["error_message"] == "One or more records have been rejected"
        assert [e["batch_index"] for e in answer["record_errors"]] == [1, 3]
        assert all(e["batch_index_error_message"] == "Compacted topic cannot accept message without key in "
                   "topic partition compacted-0." for e in answer["record_errors"])

        stamps = [now, now - 3_600_000, now, now + 3_600_000, -1]
        answer = _produce(w, "windowed", make_batch([b"%d" % i for i in range(5)], timestamps=stamps), 8)
        assert answer["error_code"] == ErrorCode.INVALID_TIMESTAMP
        assert answer["error_message"] == "One or more records have been rejected due to invalid timestamp"
        assert [e["batch_index"] for e in answer["record_errors"]] == [1, 3]  # -1 (no timestamp) is not checked
        assert str(now - 3_600_000) in answer["record_errors"][0]["batch_index_error_message"]

        # v7 has no room for the details: the error code alone
        answer = _produce(w, "compacted", make_batch([b"a"]), 7)
        assert answer["error_code"] == ErrorCode.INVALID_RECORD
        # nothing of the failed batches was written; a good batch still is
        assert _produce(w, "compacted", make_batch([b"a"], keys=[b"k"]), 9)["base_offset"] == 0
        assert _produce(w, "windowed", make_batch([b"a", b"b"], timestamps=[now, -1]), 9)["base_offset"] == 0
        assert fetch(w, "windowed", 2)["high_watermark"] == 2


def test_librdkafka_fails_the_whole_batch(broker):
    _topics(broker, compacted={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "retries": 0})
    reports = []
    for i, key in enumerate([b"k0", None, b"k2"]):  # one batch: linger holds them together
        producer.produce("compacted", value=b"%d" % i, key=key, partition=0,
                         on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(WAIT_S) == 0
    # librdkafka (2.16) reports the error code for every record of the batch; it does not pass
    # the record-level messages on
    assert len(reports) == 3 and {err.code() for err in reports if err is not None} == {KafkaError.INVALID_RECORD}
    assert all(err is not None for err in reports)
    with Wire(broker.bootstrap) as w:
        assert fetch(w, "compacted", 0)["high_watermark"] == 0  # nothing of the batch was written


def test_kafka_python_fails_the_bad_record_with_its_reason_and_the_others_as_innocent(broker):
    _topics(broker, compacted={"cleanup.policy": "compact"},
            windowed={"message.timestamp.difference.max.ms": "60000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, linger_ms=200)
    try:
        # one batch: a keyed record, then a keyless one
        good = producer.send("compacted", key=b"k", value=b"v", partition=0)
        bad = producer.send("compacted", value=b"v", partition=0)
        errors = []
        for future in (good, bad):
            try:
                future.get(WAIT_S)
            except KafkaPythonError as exc:
                errors.append(exc)
        # Both fail (the batch is one unit), but the client tells them apart: the bad record
        # with the broker's reason for it, the good one as an innocent member of a failed batch.
        assert len(errors) == 2, errors
        assert not isinstance(errors[0], InvalidRecordError) and "part of a batch" in str(errors[0])
        assert isinstance(errors[1], InvalidRecordError)
        assert "Compacted topic cannot accept message without key in topic partition compacted-0." in str(errors[1])
        future = producer.send("windowed", value=b"v", partition=0, timestamp_ms=1_000_000_000_000)
        try:
            future.get(WAIT_S)
        except InvalidTimestampError:
            pass
        else:
            raise AssertionError("a record from 2001 was accepted with a one-minute window")
    finally:
        producer.close()
