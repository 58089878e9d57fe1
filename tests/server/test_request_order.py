"""One connection, one order of effects: each request sees the effects of every earlier one.

Apache Kafka mutes a connection until its current request is answered; we run
pipelined Produces side by side (their appends queue in order) and every other
request only after the requests ahead of it finished. Driven by real clients
that pipeline (librdkafka's AdminClient and consumer) and by raw sockets.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition

from broker.protocol import ApiKey, encode_request
from broker.records import iter_records

from .test_api import fetch_body, produce
from .test_disk_stall import (  # noqa: F401 - ext4_mount is a fixture
    WAIT_S as STALL_WAIT_S,
    answered,
    create_split_topic,
    ext4_mount,
    frozen,
    produce_body,
    two_dir_broker,
)
from .wire import Wire, make_batch

P, F, LO, DR = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.DELETE_RECORDS
OC, OF = ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH
WAIT_S = 30  # a guard against a hang, not a performance assertion


def _fill(broker, topic: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0


def test_admin_list_offsets_right_after_delete_records_sees_the_new_log_start(broker):
    _fill(broker, "dr-lo", 200)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition("dr-lo", 0)
    # Until the admin client knows the leader, each call looks it up on its own and the two
    # requests may reach the broker in either order; one answered call warms its cache.
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(WAIT_S).offset == 0
    for offset in range(10, 200, 10):
        # Both requests go out at once on the admin client's connection to the leader.
        deleted = admin.delete_records([TopicPartition("dr-lo", 0, offset)])
        listed = admin.list_offsets({tp: OffsetSpec.earliest()})
        earliest = listed[tp].result(WAIT_S).offset
        assert deleted[tp].result(WAIT_S).low_watermark == offset
        assert earliest == offset


def test_consumer_committed_right_after_an_async_commit_sees_it(broker):
    _fill(broker, "commit-fetch", 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "commit-fetch",
                         "enable.auto.commit": False})
    try:
        tp = TopicPartition("commit-fetch", 0)
        consumer.assign([tp])
        # A first commit that waits: the client then knows its coordinator and sends the
        # next requests at once, in call order, on its connection to it.
        consumer.commit(offsets=[TopicPartition("commit-fetch", 0, 0)], asynchronous=False)
        for offset in range(1, 40):
            consumer.commit(offsets=[TopicPartition("commit-fetch", 0, offset)], asynchronous=True)
            (got,) = consumer.committed([tp], timeout=WAIT_S)
            assert got.offset == offset
    finally:
        consumer.close()


def _list_offset(w: Wire, topic: str, spec: int) -> None:
    w.send(LO, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": spec, "current_leader_epoch": -1}]}]})


def test_pipelined_raw_requests_see_every_earlier_effect(broker):
    with Wire(broker.bootstrap) as w:
        # 20 produces, a ListOffsets LATEST, a fetch, a DeleteRecords and a ListOffsets EARLIEST, all in one write.
        frames = [encode_request(P, 8, i, "wire", {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "raw-order", "partition_data": [{"index": 0, "records": make_batch([b"%d" % i])}]}]})
            for i in range(20)]
        frames.append(encode_request(LO, 5, 20, "wire", {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "raw-order", "partitions": [{"partition_index": 0, "timestamp": -1,
                                                  "current_leader_epoch": -1}]}]}))
        frames.append(encode_request(F, 11, 21, "wire", fetch_body("raw-order", 0)))
        frames.append(encode_request(DR, 1, 22, "wire", {"timeout_ms": 5000, "topics": [
            {"name": "raw-order", "partitions": [{"partition_index": 0, "offset": 15}]}]}))
        frames.append(encode_request(LO, 5, 23, "wire", {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "raw-order", "partitions": [{"partition_index": 0, "timestamp": -2,
                                                  "current_leader_epoch": -1}]}]}))
        w.send_raw(b"".join(frames))
        offsets = []
        for i in range(20):
            cid, body = w.receive(P, 8)
            assert cid == i
            offsets.append(body["responses"][0]["partition_responses"][0]["base_offset"])
        assert offsets == list(range(20))
        assert w.receive(LO, 5)[1]["topics"][0]["partitions"][0]["offset"] == 20
        records = w.receive(F, 11)[1]["responses"][0]["partitions"][0]["records"]
        assert [r.value for r in iter_records(records)] == [b"%d" % i for i in range(20)]
        assert w.receive(DR, 1)[1]["topics"][0]["partitions"][0]["low_watermark"] == 15
        assert w.receive(LO, 5)[1]["topics"][0]["partitions"][0]["offset"] == 15


def test_pipelined_offset_fetch_sees_the_commit_before_it(broker):
    with Wire(broker.bootstrap) as w:
        produce(w, "raw-commit", make_batch([b"v"]))
        frames = []
        for i in range(1, 30):
            frames.append(encode_request(OC, 8, 2 * i, "wire", {
                "group_id": "raw-commit", "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": "raw-commit", "partitions": [
                    {"partition_index": 0, "committed_offset": i, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}]}))
            frames.append(encode_request(OF, 7, 2 * i + 1, "wire", {
                "group_id": "raw-commit", "topics": [{"name": "raw-commit", "partition_indexes": [0]}],
                "require_stable": False}))
        w.send_raw(b"".join(frames))
        for i in range(1, 30):
            assert w.receive(OC, 8)[1]["topics"][0]["partitions"][0]["error_code"] == 0
            cid, body = w.receive(OF, 7)
            assert cid == 2 * i + 1 and body["topics"][0]["partitions"][0]["committed_offset"] == i


def test_produce_behind_a_long_poll_waits_for_its_answer_and_is_not_stalled(broker):
    max_wait_ms = 1000
    with Wire(broker.bootstrap) as w:
        produce(w, "poll-then-produce", make_batch([b"first"]))
        started = time.monotonic()
        # A long poll at the end of the log, then a produce to the same partition, in one write.
        w.send_raw(encode_request(F, 11, 1, "wire", fetch_body("poll-then-produce", 1, max_wait_ms=max_wait_ms))
                   + encode_request(P, 8, 2, "wire", {"acks": -1, "timeout_ms": 5000, "topic_data": [
                       {"name": "poll-then-produce", "partition_data": [
                           {"index": 0, "records": make_batch([b"second"])}]}]}))
        cid, body = w.receive(F, 11)
        polled = time.monotonic() - started
        # As in Kafka, the produce starts after the fetch answered: the fetch waited its full
        # max_wait_ms and saw nothing of the later request.
        assert cid == 1 and body["responses"][0]["partitions"][0]["records"] in (b"", None)
        assert polled >= max_wait_ms / 1000 * 0.9
        cid, body = w.receive(P, 8)
        assert cid == 2 and body["responses"][0]["partition_responses"][0]["base_offset"] == 1
        # No stall beyond the poll: the produce is answered long before a second max_wait_ms would end
        # (generous: 10 s covers a loaded machine; a request stuck behind the poll would hang).
        assert time.monotonic() - started < max_wait_ms / 1000 + 10


def test_kafka_python_committed_right_after_commit_async_sees_it(broker):
    _fill(broker, "commit-fetch-kp", 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="commit-fetch-kp",
                             enable_auto_commit=False)
    try:
        tp = KafkaTopicPartition("commit-fetch-kp", 0)
        consumer.assign([tp])
        for offset in range(1, 40):
            # kafka-python sends the OffsetFetch without waiting for the commit's answer.
            consumer.commit_async({tp: OffsetAndMetadata(offset, "", -1)})
            assert consumer.committed(tp) == offset
    finally:
        consumer.close()


def test_a_produce_behind_a_stalled_produce_is_appended_meanwhile(ext4_mount, broker_factory, tmp_path):
    # Pipelined produce overlaps: a Produce behind one whose append is queued starts at once,
    # while any other request waits. Partition 1 lives on a disk that is frozen.
    b, dirs = two_dir_broker(broker_factory, tmp_path, ext4_mount)
    with Wire(b.bootstrap, timeout=STALL_WAIT_S) as w:
        create_split_topic(w, "overlap", dirs)
    with Wire(b.bootstrap, timeout=STALL_WAIT_S) as pipelined:
        with frozen(ext4_mount):
            pipelined.send(P, 8, produce_body("overlap", 1, make_batch([b"stalled"])))
            pipelined.send(P, 8, produce_body("overlap", 0, make_batch([b"behind"])))
            _list_offset(pipelined, "overlap", -1)
            with Wire(b.bootstrap, timeout=STALL_WAIT_S) as other:
                deadline = time.monotonic() + STALL_WAIT_S
                while True:  # the second produce lands on the healthy disk while the first is stuck
                    _list_offset(other, "overlap", -1)
                    if other.receive(LO, 5)[1]["topics"][0]["partitions"][0]["offset"] == 1:
                        break
                    assert time.monotonic() < deadline, "the produce behind a stalled one never started"
                    time.sleep(0.05)
            assert not answered(pipelined)  # answers stay in request order: none before the first
        for partition in (1, 0):
            (r,) = pipelined.receive(P, 8)[1]["responses"][0]["partition_responses"]
            assert (r["index"], r["error_code"], r["base_offset"]) == (partition, 0, 0)
        assert pipelined.receive(LO, 5)[1]["topics"][0]["partitions"][0]["offset"] == 1
