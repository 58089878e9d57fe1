"""JBOD: a failed disk takes only its own partitions offline; every disk failing stops the broker.

The disks are real: XFS file systems on loop devices, failed under a running
broker with ``xfs_io -x -c shutdown`` (every later I/O on them gets EIO), and
"replaced" by unmounting, making a new empty file system and mounting it
again. Needs root and xfsprogs; the tests skip with the reason otherwise.
Every mount and loop device is undone in a ``finally``.

The broker is a real process (``broker_factory``) with two log dirs: the first
(which also holds the embedded metadata store) on the ordinary test directory,
the second on the XFS disk; a two-partition topic puts partition 0 on the first
and partition 1 on the second (checked with DescribeLogDirs). Producers and
consumers are librdkafka's (confluent-kafka) and our own wire helpers.

Waits are bounded guards against a hung broker, never assertions on speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from broker.protocol import ApiKey, ErrorCode

from .test_admin_wire import create, new_topic
from .test_api import produce
from .test_disk_stall import WAIT_S, create_split_topic, produce_body
from .test_durability import read_all
from .wire import Wire, make_batch
from ..mounts import umount

TOOLS = ("losetup", "mkfs.xfs", "xfs_io", "mount", "umount", "truncate")


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=120).stdout.strip()


class XfsDisk:
    """A 300 MiB XFS file system on a loop device (the smallest mkfs.xfs makes), mounted on ``mnt``."""

    def __init__(self, image: Path, mnt: Path) -> None:
        self.image, self.mnt = image, mnt
        self.device: str | None = None

    def make(self) -> "XfsDisk":
        """A new, empty file system (a new disk in the same slot)."""
        self.mnt.mkdir(exist_ok=True)
        self.image.unlink(missing_ok=True)
        _run("truncate", "-s", "300M", str(self.image))
        self.device = _run("losetup", "-f", "--show", str(self.image))
        _run("mkfs.xfs", "-q", "-f", self.device)
        _run("mount", self.device, str(self.mnt))
        return self

    def fail(self) -> None:
        """Shut the file system down: from now on every read and write on it gets EIO."""
        _run("xfs_io", "-x", "-c", "shutdown", str(self.mnt))

    def remove(self) -> None:
        umount(self.mnt)
        if self.device is not None:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
            self.device = None


@pytest.fixture
def disks(tmp_path):
    """``disks(n)``: n fresh XFS disks; all unmounted and detached afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts loop devices and shuts file systems down")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {missing} (util-linux, xfsprogs)")
    made: list[XfsDisk] = []

    def make(n: int) -> list[XfsDisk]:
        for _ in range(n):
            disk = XfsDisk(tmp_path / f"disk{len(made)}.img", tmp_path / f"disk{len(made)}")
            made.append(disk)
            try:
                disk.make()
            except subprocess.CalledProcessError as exc:
                pytest.skip(f"cannot make a loop-device file system here: {exc.stderr.strip()}")
        return made[-n:]

    try:
        yield make
    finally:
        for disk in made:
            disk.remove()


def describe_log_dirs(w: Wire) -> dict[str, tuple[int, set[tuple[str, int]]]]:
    """DescribeLogDirs v1: each dir's error code and the partitions it reports."""
    body = w.call(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})
    return {r["log_dir"]: (r["error_code"], {(t["name"], p["partition_index"]) for t in r["topics"]
                                             for p in t["partitions"]}) for r in body["results"]}


class SteadyProducer:
    """librdkafka producing acks=all to both partitions in a thread; records what each partition acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: dict[int, list[bytes]] = {0: [], 1: []}
        self.failed: dict[int, list[int]] = {0: [], 1: []}
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                   "message.timeout.ms": 4000, "retry.backoff.ms": 100})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _done(self, err, msg) -> None:
        if err is None:
            self.acked[msg.partition()].append(msg.value())
        else:
            self.failed[msg.partition()].append(err.code())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for partition in (0, 1):
                self._producer.produce(self.topic, b"p%d-%06d" % (partition, i), partition=partition,
                                       on_delivery=self._done)
            i += 1
            self._producer.poll(0.005)
        self._producer.flush(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the producer did not finish"


def wait_for(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def consume_partition(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    """Read ``count`` records of one partition from the start with librdkafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jbod-check", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            if msg.error() is None:
                values.append(msg.value())
        return values
    finally:
        consumer.close()


def test_a_failed_disk_takes_only_its_partitions_offline_and_a_new_disk_starts_clean(disks, broker_factory,
                                                                                      tmp_path):
    (disk,) = disks(1)
    dirs = [tmp_path / "plain", disk.mnt / "logs"]
    b = broker_factory(log_dirs=",".join(map(str, dirs)))
    topic = "jbod"
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        (other,) = create(w, new_topic("elsewhere", 2))  # a tie puts 0 on the first dir, then 1 on the disk
        assert other["error_code"] == ErrorCode.NONE
        assert ("elsewhere", 1) in describe_log_dirs(w)[os.path.abspath(dirs[1])][1]

    producer = SteadyProducer(b.bootstrap, topic)
    try:
        wait_for(lambda: len(producer.acked[1]) >= 200 and len(producer.acked[0]) >= 200, "acks before the failure")
        disk.fail()
        wait_for(lambda: "is offline" in b.stderr_text(), "the broker to notice the failed disk")
        before = len(producer.acked[0])
        wait_for(lambda: len(producer.acked[0]) >= before + 300, "partition 0 to keep taking records")
    finally:
        producer.stop()
    assert b.running()
    acked0, acked1 = producer.acked[0], producer.acked[1]
    assert producer.failed[0] == []
    assert producer.failed[1], "nothing failed on the failed disk"

    failed_dir, healthy_dir = os.path.abspath(dirs[1]), os.path.abspath(dirs[0])
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        r = produce(w, topic, make_batch([b"late"]), partition=1, acks=-1)
        assert (r["error_code"], r["base_offset"]) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        r = produce(w, "elsewhere", make_batch([b"late"]), partition=1, acks=1)
        assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        body = w.call(ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 1, "current_leader_epoch": -1,
                                                          "fetch_offset": 0, "log_start_offset": -1,
                                                          "partition_max_bytes": 1 << 20}]}]})
        assert body["responses"][0]["partitions"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        logdirs = describe_log_dirs(w)
        assert logdirs[failed_dir] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
        assert logdirs[healthy_dir] == (ErrorCode.NONE, {(topic, 0), ("elsewhere", 0)})
        meta = w.call(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        parts = {p["partition_index"]: p for p in meta["topics"][0]["partitions"]}
        assert (parts[0]["error_code"], parts[0]["leader_id"]) == (ErrorCode.NONE, 0)
        assert (parts[1]["error_code"], parts[1]["leader_id"], parts[1]["offline_replicas"]) == (
            ErrorCode.LEADER_NOT_AVAILABLE, -1, [0])
        r = produce(w, topic, make_batch([b"after"]), partition=0, acks=-1)
        assert (r["error_code"], r["base_offset"]) == (ErrorCode.NONE, len(acked0))
    acked0.append(b"after")
    assert consume_partition(b.bootstrap, topic, 0, len(acked0)) == acked0
    offline_lines = [line for line in b.stderr_text().splitlines() if "is offline" in line]
    assert len(offline_lines) == 1 and str(dirs[1]) in offline_lines[0] and "Input/output error" in offline_lines[0]
    assert f"{topic}-1" in offline_lines[0] and "elsewhere-1" in offline_lines[0]

    # graceful stop: the healthy dir is checkpointed and marked clean; nothing is written in the failed one
    assert b.stop() == 0, b.stderr_tail()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()
    assert f"{topic} 0 {len(acked0)}" in (dirs[0] / "recovery-point-offset-checkpoint").read_text()

    # the disk is replaced by an empty one: the broker starts clean there, saying what was lost
    disk.remove()
    disk.make()
    b.start()
    assert read_all(b, topic, partition=0) == acked0
    assert read_all(b, topic, partition=1) == []
    lost = [line for line in b.stderr_text().splitlines() if "records on this broker are lost" in line]
    assert any(f"{topic}-1 " in line for line in lost) and any("elsewhere-1 " in line for line in lost)
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        r = produce(w, topic, make_batch([b"new disk"]), partition=1, acks=-1)
        assert (r["error_code"], r["base_offset"]) == (ErrorCode.NONE, 0)
        now = describe_log_dirs(w)
        assert now[failed_dir][0] == ErrorCode.NONE and now[healthy_dir][0] == ErrorCode.NONE
        # The lost partitions start empty in whichever live dir holds fewest logs: the new disk, unless
        # the group of consume_partition made __consumer_offsets as the broker stopped (its logs are
        # then made at this start too, and share the dirs out).
        placed = [d for d, (_error, held) in now.items() for tp in held if tp in {(topic, 1), ("elsewhere", 1)}]
        assert len(placed) == 2 and set(placed) <= {failed_dir, healthy_dir}
        assert {(topic, 1), ("elsewhere", 1)} <= now[failed_dir][1] or any(
            tp[0] == "__consumer_offsets" for tp in now[failed_dir][1])
    assert acked1, "partition 1 acknowledged nothing before its disk failed"


def test_every_disk_failing_stops_the_broker(disks, broker_factory):
    first, second = disks(2)
    dirs = [first.mnt / "logs", second.mnt / "logs"]
    b = broker_factory(log_dirs=",".join(map(str, dirs)))
    topic = "both"
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        for p in (0, 1):
            assert produce(w, topic, make_batch([b"x"]), partition=p, acks=-1)["error_code"] == ErrorCode.NONE
    second.fail()
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        # the failure is found by the next write there; the other disk serves on
        r = w.call(ApiKey.PRODUCE, 8, produce_body(topic, 1, make_batch([b"y"])))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        assert produce(w, topic, make_batch([b"y"]), partition=0, acks=1)["error_code"] == ErrorCode.NONE
    assert b.running()
    first.fail()
    with contextlib.suppress(OSError), Wire(b.bootstrap, timeout=WAIT_S) as w:
        w.send(ApiKey.PRODUCE, 8, produce_body(topic, 0, make_batch([b"z"])))
    b.proc.wait(WAIT_S * 3)
    assert b.proc.returncode == 1, b.stderr_tail()
    text = b.stderr_text()
    assert "broker: stopped: every log dir has failed" in text
    assert "Traceback" not in text


def notifications_made(zk) -> int:
    """How many ``log_dir_event_N`` nodes were ever made: each one's create and delete bump the parent's
    cversion (a watch on the children could miss one the controller takes at once)."""
    return zk.exists("/log_dir_event_notification").cversion // 2


def test_a_failed_disk_is_announced_to_the_controller_in_zookeeper(disks, broker_factory, tmp_path, zk_connect, zk):
    """The broker writes Kafka's ``log_dir_event_N``; its controller (itself) takes it and leaves the
    partition on the failed disk without a leader (no other replica), the other one led as before."""
    from broker.cluster.znodes import LogDirEventNotificationZNode

    assert json.loads(LogDirEventNotificationZNode.encode(7)) == {"version": 1, "broker": 7, "event": 1}
    (disk,) = disks(1)
    dirs = [tmp_path / "plain", disk.mnt / "logs"]
    b = broker_factory({"zookeeper.connect": zk_connect, "broker.id": 7}, log_dirs=",".join(map(str, dirs)))
    topic = "announced"
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        assert not zk.get_children("/log_dir_event_notification")
        before = notifications_made(zk)
        disk.fail()
        r = produce(w, topic, make_batch([b"x"]), partition=1, acks=1)
        assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR

    def state(p):
        return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
    wait_for(lambda: state(1)["leader"] == -1, "the controller to take partition 1's leadership away")
    wait_for(lambda: notifications_made(zk) > before and not zk.get_children("/log_dir_event_notification"),
             "the notification to be written and taken")
    assert state(1)["isr"] == [7] and state(0)["leader"] == 7  # the last ISR member stays (a clean election later)


def test_a_broker_starts_with_a_still_broken_disk_offline_and_serves_the_others(disks, broker_factory, tmp_path,
                                                                                zk_connect, zk):
    """Kafka's start with a failed dir: that dir offline (DescribeLogDirs says so, the controller is told),
    its partitions offline (never made anew elsewhere), the other dir served."""
    (disk,) = disks(1)
    dirs = [tmp_path / "plain", disk.mnt / "logs"]
    b = broker_factory({"zookeeper.connect": zk_connect, "broker.id": 8}, log_dirs=",".join(map(str, dirs)))
    topic = "still-broken"
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        for p in (0, 1):
            assert produce(w, topic, make_batch([b"before"]), partition=p, acks=-1)["error_code"] == ErrorCode.NONE
    assert b.stop() == 0, b.stderr_tail()
    disk.fail()  # the disk breaks while the broker is down, and is still broken when it starts
    before = notifications_made(zk)
    b.start()
    failed_dir, healthy_dir = os.path.abspath(dirs[1]), os.path.abspath(dirs[0])
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        logdirs = describe_log_dirs(w)
        assert logdirs[failed_dir] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
        assert logdirs[healthy_dir][0] == ErrorCode.NONE
        assert (topic, 0) in logdirs[healthy_dir][1] and (topic, 1) not in logdirs[healthy_dir][1]
        r = produce(w, topic, make_batch([b"after"]), partition=0, acks=-1)
        assert (r["error_code"], r["base_offset"]) == (ErrorCode.NONE, 1)
        r = produce(w, topic, make_batch([b"nowhere"]), partition=1, acks=1)
        # offline here; once the controller took the leadership away, not led here
        assert r["error_code"] in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert read_all(b, topic, partition=0) == [b"before", b"after"]
    wait_for(lambda: notifications_made(zk) > before, "the log dir event notification")
    text = b.stderr_text()
    assert f"log dir {dirs[1]} is offline from the start" in text and "Traceback" not in text


def test_a_broker_whose_every_disk_is_broken_refuses_to_start(disks, broker_factory):
    first, second = disks(2)
    dirs = [first.mnt / "logs", second.mnt / "logs"]
    b = broker_factory(log_dirs=",".join(map(str, dirs)))
    assert b.stop() == 0, b.stderr_tail()
    first.fail()
    second.fail()
    with pytest.raises(RuntimeError, match="broker did not get ready"):
        b.start()
    b.proc.wait(WAIT_S)
    assert b.proc.returncode == 1
    assert "broker: cannot start: " in b.stderr_text() and "Traceback" not in b.stderr_text()
