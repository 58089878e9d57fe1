"""Replication on a three-broker cluster (real processes on a real ZooKeeper): RF=3, acks=all, the ISR.

Each test ends with the history checker over what the producers were told and
what a consumer read back (plus, where it matters, every replica's segment
files compared batch by batch).
"""

from __future__ import annotations

import struct
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.cluster.conftest import wait_until
from tests.cluster.history import check


def produce(cluster, topic: str, values, acks: str = "all", timeout: float = 30):
    """Send ``values`` with librdkafka; returns (acknowledged triples, values that failed with their errors)."""
    acked, failed = [], {}

    def report(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            failed[msg.value()] = err

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 5,
                         "enable.idempotence": False, "message.timeout.ms": int(timeout * 1000),
                         "retries": 0})
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=report)
        producer.poll(0)
    producer.flush(timeout + 10)
    return acked, failed


def read_all(cluster, topic: str) -> list[tuple[int, int, bytes]]:
    """Everything in partition 0 up to its high watermark, read with librdkafka from the leader."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10})
    _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        def done():
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    out.append((msg.partition(), msg.offset(), msg.value()))
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consumer error {msg.error()}")
            return high == 0 or (out and out[-1][1] >= high - 1)
        wait_until(done, f"{topic} read back up to offset {high}")
    finally:
        consumer.close()
    return out


def segment_batches(broker, topic: str) -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, bytes) of every batch in a replica's first segment file."""
    data = (broker.data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()
    out, pos = [], 0
    while pos + 17 <= len(data):
        base_offset, length, epoch = struct.unpack_from(">qii", data, pos)
        out.append((base_offset, epoch, data[pos:pos + 12 + length]))
        pos += 12 + length
    return out


def assert_replicas_identical(cluster, topic: str, ids) -> None:
    def same():
        batches = [segment_batches(cluster.broker(i), topic) for i in ids]
        return all(b == batches[0] for b in batches)
    wait_until(same, f"every replica of {topic} to hold the same batches")


def test_rf3_acks_all_is_on_every_replica(cluster_factory):
    cluster = cluster_factory(3)
    cluster.create_topic("rep", partitions=1, replication_factor=3)
    values = [b"v%05d" % i for i in range(500)]
    acked, failed = produce(cluster, "rep", values)
    assert not failed and len(acked) == len(values)
    assert_replicas_identical(cluster, "rep", cluster.ids)
    report = check(acked, read_all(cluster, "rep"))
    assert report.valid(), str(report)


def test_isr_shrinks_on_sigstop_and_expands_on_sigcont(cluster_factory):
    cluster = cluster_factory(3, replica_lag_time_max_ms=3000)
    cluster.create_topic("isr", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    leader = cluster.wait_for_leader("isr")
    followers = [i for i in cluster.ids if i != leader]
    acked, failed = produce(cluster, "isr", [b"before-%d" % i for i in range(50)])
    assert not failed
    # one follower stopped: it leaves the ISR; acks=all goes on with two
    cluster.pause(followers[0])
    cluster.wait_for_isr("isr", 0, [leader, followers[1]])
    more, failed = produce(cluster, "isr", [b"one-down-%d" % i for i in range(50)])
    assert not failed
    acked += more
    # both stopped: below min.insync.replicas=2, acks=all is refused and acks=1 still works. The leader
    # applies a shrink once ZooKeeper has it, so a request arriving in between is appended and then
    # refused with NOT_ENOUGH_REPLICAS_AFTER_APPEND (as Kafka answers an append the ISR shrank under);
    # once the leader has the new ISR, it refuses up front with NOT_ENOUGH_REPLICAS.
    cluster.pause(followers[1])
    cluster.wait_for_isr("isr", 0, [leader])
    indeterminate, refused, codes = [], [], set()

    def refused_up_front():
        acked_now, failed = produce(cluster, "isr", [b"refused-%d-%d" % (len(indeterminate), i) for i in range(5)],
                                    timeout=5)
        refused.extend(acked_now)
        indeterminate.extend(failed)
        codes.update(e.code() for e in failed.values())
        return KafkaError.NOT_ENOUGH_REPLICAS in {e.code() for e in failed.values()}
    wait_until(refused_up_front, "acks=all to be refused with NOT_ENOUGH_REPLICAS", 30)
    assert not refused and codes <= {KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                     KafkaError._MSG_TIMED_OUT}
    ones, failed = produce(cluster, "isr", [b"acks1-%d" % i for i in range(20)], acks="1")
    assert not failed and len(ones) == 20
    # both back: they catch up and rejoin
    cluster.resume(followers[0])
    cluster.resume(followers[1])
    cluster.wait_for_isr("isr", 0)
    last, failed = produce(cluster, "isr", [b"after-%d" % i for i in range(50)])
    assert not failed
    acked += ones + last
    assert_replicas_identical(cluster, "isr", cluster.ids)
    report = check(acked, read_all(cluster, "isr"), indeterminate)
    assert report.valid(), str(report)


def test_a_returning_leader_truncates_what_only_it_had(cluster_factory):
    cluster = cluster_factory(3)
    cluster.create_topic("div", partitions=1, replication_factor=3)
    old = cluster.wait_for_leader("div")
    acked, failed = produce(cluster, "div", [b"common-%d" % i for i in range(30)])
    assert not failed
    assert_replicas_identical(cluster, "div", cluster.ids)
    # the followers stop; the leader alone takes acks=1 writes, then dies
    followers = [i for i in cluster.ids if i != old]
    for f in followers:
        cluster.pause(f)
    # a follower's fetch parked at the leader would still carry the next append to it: let those end
    # (replica.fetch.wait.max.ms is 500 ms), so what follows reaches no follower
    time.sleep(1.5)
    lonely, failed = produce(cluster, "div", [b"lonely-%d" % i for i in range(10)], acks="1")
    assert not failed and len(lonely) == 10
    cluster.kill(old)
    for f in followers:
        cluster.resume(f)
    new = cluster.wait_for_leader("div", not_in=[old])
    later, failed = produce(cluster, "div", [b"later-%d" % i for i in range(20)])
    assert not failed
    # the old leader returns as a follower: its lonely tail goes, the new leader's batches come
    cluster.start(old)
    cluster.wait_for_isr("div", 0)
    assert_replicas_identical(cluster, "div", cluster.ids)
    assert b"lonely" not in b"".join(raw for _o, _e, raw in segment_batches(cluster.broker(old), "div"))
    # acks=1 writes of a lost leader are lost (Kafka's contract); everything acks=all is there
    report = check(acked + later, read_all(cluster, "div"), [v for _p, _o, v in lonely])
    assert report.valid(), str(report)
    assert new != old


def test_a_broker_that_does_not_host_a_partition_answers_as_kafka(cluster_factory):
    """Kafka's getPartitionOrError: NOT_LEADER_OR_FOLLOWER for a partition the cluster has elsewhere.

    Clients refresh their metadata and retry on it; UNKNOWN_TOPIC_OR_PARTITION,
    kept for a partition the cluster does not have, makes librdkafka give up on
    a ListOffsets (a consumer with a stale leader, e.g. after a reassignment).
    """
    from broker.protocol import ApiKey, ErrorCode
    from tests.server.wire import Wire

    cluster = cluster_factory(2)
    cluster.create_topic("elsewhere", assignment={0: [1]})
    wait_until(lambda: cluster.partition_meta("elsewhere", 0, via=2), "broker 2 to know elsewhere-0")

    def errors(w: Wire, topic: str) -> dict:
        offsets = w.call(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
        epochs = w.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        fetch = w.call(ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
        return {"list_offsets": offsets["topics"][0]["partitions"][0]["error_code"],
                "offset_for_leader_epoch": epochs["topics"][0]["partitions"][0]["error_code"],
                "fetch": fetch["responses"][0]["partitions"][0]["error_code"]}

    with Wire(cluster.broker(2).bootstrap) as w:
        assert errors(w, "elsewhere") == dict.fromkeys(
            ("list_offsets", "offset_for_leader_epoch", "fetch"), ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert errors(w, "nowhere") == dict.fromkeys(
            ("list_offsets", "offset_for_leader_epoch", "fetch"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    with Wire(cluster.broker(1).bootstrap) as w:
        assert errors(w, "elsewhere") == dict.fromkeys(("list_offsets", "offset_for_leader_epoch", "fetch"), 0)
