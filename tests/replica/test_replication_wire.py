"""Replication between real broker processes, driven by hand-built LeaderAndIsr requests over the wire.

No controller takes part: the test plays it, sending LeaderAndIsr (and
StopReplica) to each broker as Kafka's controller would. Each broker keeps its
own embedded metadata store; a topic created on each gives both the same
partition (state znode version 0), and the test's LeaderAndIsr requests then
make one broker lead it and the other follow. What is checked is what a
client and the disk see: acks=all answers, errors of followers, the bytes of
the segment files, and the ISR through min.insync.replicas.
"""

from __future__ import annotations

import signal
import struct
import threading
import time

from broker.protocol import ApiKey, ErrorCode

from tests.server.test_jbod import disks  # noqa: F401 - the fixture
from tests.server.wire import Wire, make_batch

TOPIC = "r"
CONTROLLER_EPOCH = 5


def leader_and_isr(w: Wire, *, leader: int, leader_epoch: int, isr, replicas, live, controller_epoch=CONTROLLER_EPOCH,
                   topic=TOPIC, partition=0, zk_version=0, version=4) -> dict:
    state = {"partition_index": partition, "controller_epoch": controller_epoch, "leader": leader,
             "leader_epoch": leader_epoch, "isr": list(isr), "zk_version": zk_version, "replicas": list(replicas),
             "adding_replicas": [], "removing_replicas": [], "is_new": False}
    body = {"controller_id": 99, "controller_epoch": controller_epoch, "broker_epoch": -1,
            "live_leaders": [{"broker_id": b.broker_id, "host_name": b.host, "port": b.port} for b in live]}
    if version <= 1:
        body["ungrouped_partition_states"] = [dict(state, topic_name=topic)]
    else:
        body["topic_states"] = [{"topic_name": topic, "partition_states": [state]}]
    return w.call(ApiKey.LEADER_AND_ISR, version, body)


def errors_of(response: dict) -> dict:
    return {(e["topic_name"], e["partition_index"]): e["error_code"] for e in response["partition_errors"]}


def produce(w: Wire, values, acks=-1, timeout_ms=10000) -> dict:
    body = {"acks": acks, "timeout_ms": timeout_ms, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": make_batch(values)}]}]}
    return w.call(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"][0]


def create_topic(w: Wire, configs=None) -> None:
    body = {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000, "validate_only": False}
    (result,) = w.call(ApiKey.CREATE_TOPICS, 5, body)["topics"]
    assert result["error_code"] == 0, result


def offset_for_epoch(w: Wire, epoch: int, current_leader_epoch=-1, replica_id=-1, version=4) -> dict:
    body = {"replica_id": replica_id, "topics": [{"topic": TOPIC, "partitions": [
        {"partition": 0, "current_leader_epoch": current_leader_epoch, "leader_epoch": epoch}]}]}
    return w.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)["topics"][0]["partitions"][0]


def list_latest(w: Wire, replica_id=-1, current_leader_epoch=-1) -> dict:
    body = {"replica_id": replica_id, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "current_leader_epoch": current_leader_epoch, "timestamp": -1}]}]}
    return w.call(ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]


def consumer_fetch(w: Wire, offset=0, version=10) -> dict:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    return w.call(ApiKey.FETCH, version, body)["responses"][0]["partitions"][0]


def segment_batches(broker, name: str = "00000000000000000000.log") -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, bytes) of every batch in one segment file of the partition (the first)."""
    path = broker.data_dir / f"{TOPIC}-0" / name
    if not path.exists():
        return []
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 17 <= len(data):
        base_offset, length, epoch = struct.unpack_from(">qii", data, pos)
        out.append((base_offset, epoch, data[pos:pos + 12 + length]))
        pos += 12 + length
    return out


def epoch_checkpoint(broker) -> list[str]:
    return (broker.data_dir / f"{TOPIC}-0" / "leader-epoch-checkpoint").read_text().split("\n")


def wait_until(condition, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def two_brokers(broker_factory, **props):
    a = broker_factory(broker_id=0, **props)
    b = broker_factory(broker_id=1, **props)
    a.broker_id, b.broker_id = 0, 1
    return a, b


def _lead_on_a(a, wa, wb) -> None:
    """Create the topic on both brokers and make ``a`` (broker 0) lead it, ``b`` (broker 1) follow."""
    create_topic(wa)
    create_topic(wb)
    for w in (wa, wb):
        leader_and_isr(w, leader=0, leader_epoch=1, isr=[0, 1], replicas=[0, 1], live=[a])


def test_leader_and_isr_rules_on_one_broker(broker_factory):
    (a,) = [broker_factory(broker_id=0)]
    a.broker_id = 0
    with Wire(a.bootstrap) as w:
        create_topic(w)
        # a newer leader epoch is applied; this broker leads
        assert errors_of(leader_and_isr(w, leader=0, leader_epoch=3, isr=[0], replicas=[0], live=[a])) == {
            (TOPIC, 0): ErrorCode.NONE}
        assert produce(w, [b"x"])["error_code"] == 0
        # the same or an older leader epoch: ignored, as Kafka 2.7 answers it
        for epoch in (3, 2):
            assert errors_of(leader_and_isr(w, leader=0, leader_epoch=epoch, isr=[0], replicas=[0], live=[a])) == {
                (TOPIC, 0): ErrorCode.STALE_CONTROLLER_EPOCH}
        # an older controller epoch: the whole request is refused
        stale = leader_and_isr(w, leader=0, leader_epoch=9, isr=[0], replicas=[0], live=[a], controller_epoch=4)
        assert stale["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
        # a partition whose replicas do not name this broker
        assert errors_of(leader_and_isr(w, leader=7, leader_epoch=9, isr=[7], replicas=[7], live=[],
                                        partition=1)) == {(TOPIC, 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # a partition no topic here knows: its log is made on demand (flat v0-1 partition states)
        assert errors_of(leader_and_isr(w, leader=0, leader_epoch=0, isr=[0], replicas=[0], live=[a],
                                        topic="fresh", version=1)) == {("fresh", 0): ErrorCode.NONE}
        assert (a.data_dir / "fresh-0").is_dir()
        # the epoch cache: epoch 3 started at 0 and is the latest
        assert offset_for_epoch(w, 3) == {"partition": 0, "error_code": 0, "leader_epoch": 3, "end_offset": 1}
        assert offset_for_epoch(w, 1) == {"partition": 0, "error_code": 0, "leader_epoch": 1, "end_offset": 0}
        assert offset_for_epoch(w, 4)["end_offset"] == -1
        assert offset_for_epoch(w, 3, current_leader_epoch=2)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
        assert offset_for_epoch(w, 3, current_leader_epoch=4)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
        # StopReplica v3 with a stale leader epoch is fenced; with delete the log goes
        body = {"controller_id": 99, "controller_epoch": CONTROLLER_EPOCH, "broker_epoch": -1,
                "topic_states": [{"topic_name": "fresh", "partition_states": [
                    {"partition_index": 0, "leader_epoch": 0, "delete_partition": True}]}]}
        stopped = w.call(ApiKey.STOP_REPLICA, 3, body)
        assert stopped["partition_errors"][0]["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
        body["topic_states"][0]["partition_states"][0]["leader_epoch"] = -2
        stopped = w.call(ApiKey.STOP_REPLICA, 3, body)
        assert stopped["error_code"] == 0 and stopped["partition_errors"][0]["error_code"] == 0
        wait_until(lambda: not (a.data_dir / "fresh-0").exists(), what="the stopped log to be deleted")


def test_a_follower_copies_the_leader_byte_for_byte_and_acks_all_waits_for_it(broker_factory):
    a, b = two_brokers(broker_factory)
    with Wire(a.bootstrap) as wa, Wire(b.bootstrap) as wb:
        create_topic(wa)
        create_topic(wb)
        for w in (wa, wb):
            assert errors_of(leader_and_isr(w, leader=0, leader_epoch=1, isr=[0, 1], replicas=[0, 1],
                                            live=[a])) == {(TOPIC, 0): 0}
        for i in range(5):
            assert produce(wa, [b"v%d" % i, b"w%d" % i])["error_code"] == 0  # acks=all: the follower has it
        assert list_latest(wa)["offset"] == 10
        # the follower answers neither producers nor consumers, nor ListOffsets
        assert produce(wb, [b"no"])["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert consumer_fetch(wb)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert list_latest(wb)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # its high watermark comes from the leader (a debugging ListOffsets asks any replica)
        wait_until(lambda: list_latest(wb, replica_id=-2)["offset"] == 10, what="the follower's high watermark")
        wait_until(lambda: segment_batches(b) == segment_batches(a), what="the same batches on both")
        assert [(base, epoch) for base, epoch, _ in segment_batches(b)] == [(i * 2, 1) for i in range(5)]
        assert epoch_checkpoint(b)[2:3] == ["1 0"]
        # DeleteRecords is the leader's; the follower's log start follows with its next fetch
        body = {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 4}]}], "timeout_ms": 5000}
        deleted = wb.call(ApiKey.DELETE_RECORDS, 1, body)["topics"][0]["partitions"][0]
        assert deleted["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert wa.call(ApiKey.DELETE_RECORDS, 1, body)["topics"][0]["partitions"][0]["low_watermark"] == 4
        assert produce(wa, [b"after"])["error_code"] == 0
        earliest = {"replica_id": -2, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]}
        wait_until(lambda: wb.call(ApiKey.LIST_OFFSETS, 5, earliest)["topics"][0]["partitions"][0]["offset"] == 4,
                   what="the follower's log start offset")


def test_divergent_logs_truncate_to_the_new_leader(broker_factory):
    a, b = two_brokers(broker_factory)
    with Wire(a.bootstrap) as wa, Wire(b.bootstrap) as wb:
        _lead_on_a(a, wa, wb)
        for i in range(3):
            assert produce(wa, [b"common%d" % i])["error_code"] == 0
        wait_until(lambda: segment_batches(b) == segment_batches(a), what="the follower to catch up")
        # b becomes leader in epoch 2 while a, cut off, still leads epoch 1 and takes acks=1 writes
        assert errors_of(leader_and_isr(wb, leader=1, leader_epoch=2, isr=[1], replicas=[0, 1], live=[b])) == {
            (TOPIC, 0): 0}
        for i in range(2):
            assert produce(wa, [b"lost%d" % i], acks=1)["error_code"] == 0
        for i in range(4):
            assert produce(wb, [b"new%d" % i])["error_code"] == 0
        assert list_latest(wa, replica_id=0)["offset"] == 5 and list_latest(wb)["offset"] == 7
        # a learns of epoch 2: it truncates its epoch-1 tail (offsets 3-4) and takes b's batches
        assert errors_of(leader_and_isr(wa, leader=1, leader_epoch=2, isr=[1], replicas=[0, 1], live=[b])) == {
            (TOPIC, 0): 0}
        wait_until(lambda: segment_batches(a) == segment_batches(b), what="a to hold b's log")
        assert [(base, epoch) for base, epoch, _ in segment_batches(a)] == [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2),
                                                                             (5, 2), (6, 2)]
        assert b"lost" not in b"".join(raw for _b, _e, raw in segment_batches(a))
        assert epoch_checkpoint(a)[2:4] == ["1 0", "2 3"]
        assert "truncating from 5 to 3" in a.stderr_text()


def test_isr_shrinks_on_sigstop_and_expands_on_sigcont(broker_factory):
    a, b = two_brokers(broker_factory, replica_lag_time_max_ms=3000)
    with Wire(a.bootstrap) as wa, Wire(b.bootstrap) as wb:
        create_topic(wa, {"min.insync.replicas": "2"})
        create_topic(wb, {"min.insync.replicas": "2"})
        for w in (wa, wb):
            leader_and_isr(w, leader=0, leader_epoch=1, isr=[0, 1], replicas=[0, 1], live=[a])
        assert produce(wa, [b"both"])["error_code"] == 0
        b.proc.send_signal(signal.SIGSTOP)
        try:
            # while the follower is still in the ISR acks=all waits for it: the append times out
            assert produce(wa, [b"waits"], timeout_ms=300)["error_code"] == ErrorCode.REQUEST_TIMED_OUT
            # after replica.lag.time.max.ms it leaves the ISR: below min.insync.replicas=2, acks=all is refused
            wait_until(lambda: produce(wa, [b"x"], timeout_ms=300)["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS,
                       timeout=20, what="the ISR to shrink")
            assert produce(wa, [b"acks=1 still works"], acks=1)["error_code"] == 0
        finally:
            b.proc.send_signal(signal.SIGCONT)
        # the follower catches up and rejoins: acks=all works again
        wait_until(lambda: produce(wa, [b"y"], timeout_ms=2000)["error_code"] == 0, timeout=20,
                   what="the ISR to expand")
        wait_until(lambda: segment_batches(b) == segment_batches(a), what="the follower to catch up")
        assert "shrinking ISR from [0, 1]" in a.stderr_text() and "expanding ISR from [0]" in a.stderr_text()


def _answered_at_once_when(a, b, wa, take_away) -> dict:
    """Produce acks=all to ``a`` (leading, ``b`` following but stopped), then ``take_away()`` the
    leadership or the replica from ``a`` while the append waits: the answer must come then, not at
    timeout_ms (30 s)."""
    assert produce(wa, [b"first"])["error_code"] == 0
    b.proc.send_signal(signal.SIGSTOP)
    try:
        result = {}
        waiting = threading.Thread(target=lambda: result.update(produce(wa, [b"waits"], timeout_ms=30000)))
        waiting.start()
        time.sleep(0.5)  # the append is written and waits for the follower
        assert waiting.is_alive()
        started = time.monotonic()
        take_away()
        waiting.join(20)
        assert time.monotonic() - started < 15, "answered at timeout_ms (30 s), not when the replica went"
        return result
    finally:
        b.proc.send_signal(signal.SIGCONT)


def test_an_acks_all_append_waiting_when_leadership_moves_gets_not_leader(broker_factory):
    a, b = two_brokers(broker_factory)
    with Wire(a.bootstrap) as wa, Wire(a.bootstrap) as controller, Wire(b.bootstrap) as wb:
        _lead_on_a(a, wa, wb)
        result = _answered_at_once_when(
            a, b, wa, lambda: leader_and_isr(controller, leader=1, leader_epoch=2, isr=[1], replicas=[0, 1],
                                             live=[b]))
        assert result["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_acks_all_append_waiting_when_its_replica_is_deleted_is_answered_at_once(broker_factory):
    a, b = two_brokers(broker_factory)
    with Wire(a.bootstrap) as wa, Wire(a.bootstrap) as controller, Wire(b.bootstrap) as wb:
        _lead_on_a(a, wa, wb)

        def delete():
            body = {"controller_id": 99, "controller_epoch": CONTROLLER_EPOCH, "broker_epoch": -1,
                    "topic_states": [{"topic_name": TOPIC, "partition_states": [
                        {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}]}
            assert controller.call(ApiKey.STOP_REPLICA, 3, body)["error_code"] == 0

        result = _answered_at_once_when(a, b, wa, delete)
        # the topic is still in the metadata: another broker may lead it now
        assert result["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER, result


def test_an_acks_all_append_waiting_when_its_log_dir_fails_gets_storage_error_at_once(  # noqa: F811
        disks, broker_factory):  # in this order: the brokers stop before the disks go
    """The failed disk closes the log under the waiting append; before, the append waited out its
    30 s timeout (no follower fetches a partition no longer served) and held up its connection."""
    made = disks(2)
    a = broker_factory(broker_id=0, log_dirs=",".join(str(d.mnt / "logs") for d in made))
    b = broker_factory(broker_id=1)
    a.broker_id, b.broker_id = 0, 1
    with Wire(a.bootstrap) as wa, Wire(a.bootstrap) as other, Wire(b.bootstrap) as wb:
        _lead_on_a(a, wa, wb)
        (disk,) = [d for d in made if (d.mnt / "logs" / f"{TOPIC}-0").is_dir()]

        def fail_the_disk():
            disk.fail()
            # the next write there meets the error and takes the dir offline
            assert produce(other, [b"after"], acks=1)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR

        result = _answered_at_once_when(a, b, wa, fail_the_disk)
        assert result["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR, result


def test_answers_due_after_the_client_left_are_dropped_quietly(broker_factory):
    """65 acks=all appends wait for a stopped follower; the client closes; their timeouts answer into a
    connection already gone. Nothing is written (asyncio logged "socket.send() raised exception." for each
    write after the fifth) and the broker goes on serving."""
    a, b = two_brokers(broker_factory)
    with Wire(a.bootstrap) as wa, Wire(b.bootstrap) as wb:
        _lead_on_a(a, wa, wb)
        b.proc.send_signal(signal.SIGSTOP)
        try:
            leaving = Wire(a.bootstrap)
            body = {"acks": -1, "timeout_ms": 1000, "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": 0, "records": make_batch([b"x" * 1000])}]}]}
            for _ in range(65):
                leaving.send(ApiKey.PRODUCE, 8, body)
            time.sleep(0.3)  # all appended, all waiting
            leaving.sock.close()
            time.sleep(1.5)  # their timeouts ran out
            assert produce(wa, [b"later"], acks=1)["error_code"] == 0
        finally:
            b.proc.send_signal(signal.SIGCONT)
    assert "socket.send() raised exception" not in a.stderr_text()


def test_a_follower_behind_the_leaders_log_start_starts_over_there(broker_factory):
    a, b = two_brokers(broker_factory)
    with Wire(a.bootstrap) as wa, Wire(b.bootstrap) as wb:
        create_topic(wa)
        create_topic(wb)
        # b is a replica but not in the ISR: the leader's high watermark follows its own log end
        leader_and_isr(wa, leader=0, leader_epoch=1, isr=[0], replicas=[0, 1], live=[a])
        for i in range(10):
            assert produce(wa, [b"r%d" % i])["error_code"] == 0
        body = {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 6}]}], "timeout_ms": 5000}
        assert wa.call(ApiKey.DELETE_RECORDS, 1, body)["topics"][0]["partitions"][0]["low_watermark"] == 6
        # b, empty, fetches from 0: OFFSET_OUT_OF_RANGE; the leader's log start is past b's log end
        leader_and_isr(wb, leader=0, leader_epoch=1, isr=[0], replicas=[0, 1], live=[a])
        wait_until(lambda: [(o, e) for o, e, _ in segment_batches(b, "00000000000000000006.log")]
                   == [(o, 1) for o in range(6, 10)], what="b to start its log at the leader's log start")
        earliest = {"replica_id": -2, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]}
        assert wb.call(ApiKey.LIST_OFFSETS, 5, earliest)["topics"][0]["partitions"][0]["offset"] == 6
        assert "starting the log there" in b.stderr_text()
