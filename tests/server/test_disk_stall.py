"""Appends on a stalled or a full disk (JBOD): only that disk's partitions notice.

Each log dir has its own writer thread (``LogAppender``), so a disk whose
writes block holds up only the produce requests of its own partitions, and a
write that fails answers KAFKA_STORAGE_ERROR (56) for that partition without
publishing any of its bytes.

The disks are real: an ext4 file system on a loop device frozen with
``fsfreeze -f`` (writes then block in the kernel until ``fsfreeze -u``), and a
small tmpfs that runs out of space (writes fail with ENOSPC). Both need root
and the util-linux tools; the tests skip with the reason otherwise. Every
mount, freeze and loop device is undone in a ``finally``.

The broker is a real process (``broker_factory``) with two log dirs: the first
(which also holds the embedded metadata store) on the ordinary test directory,
the second on the special disk. A new partition goes to the dir holding the
fewest, so a two-partition topic puts partition 0 on the first dir and
partition 1 on the second; the tests check that with DescribeLogDirs.

Waits are bounded (``WAIT_S``) guards against a hung broker, never assertions
on how fast something happens.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
from pathlib import Path

import pytest

from broker.protocol import ApiKey, ErrorCode

from .test_admin_wire import create, new_topic
from .test_api import produce
from .test_durability import read_all
from .test_metrics import scrape, value
from .wire import Wire, make_batch
from ..mounts import tmpfs, umount

WAIT_S = 10  # the longest any answer may take before the test calls the broker hung

TOOLS = ("losetup", "mkfs.ext4", "fsfreeze", "mount", "umount", "truncate")


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def _require_root_and_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts a loop device / tmpfs and freezes a file system")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs the util-linux tools {missing}")


@pytest.fixture
def ext4_mount(tmp_path):
    """A fresh 64 MiB ext4 file system on a loop device, mounted; yields the mount point."""
    _require_root_and_tools(*TOOLS)
    image, mnt = tmp_path / "ext4.img", tmp_path / "ext4"
    mnt.mkdir()
    _run("truncate", "-s", "64M", str(image))
    try:
        device = _run("losetup", "-f", "--show", str(image))
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"no loop device available: {exc.stderr.strip()}")
    mounted = False
    try:
        _run("mkfs.ext4", "-q", device)
        _run("mount", device, str(mnt))
        mounted = True
        yield mnt
    finally:
        # The broker (torn down before this fixture) has closed its files by now.
        subprocess.run(["fsfreeze", "-u", str(mnt)], capture_output=True)
        if mounted:
            umount(mnt)
        subprocess.run(["losetup", "-d", device], capture_output=True)


@pytest.fixture
def tmpfs_mount(tmp_path):
    """A 2 MiB tmpfs, mounted; yields the mount point."""
    with tmpfs(tmp_path / "tmpfs", "size=2m") as mnt:
        yield mnt


@contextlib.contextmanager
def frozen(mnt: Path):
    """``fsfreeze -f`` the file system at ``mnt`` for the block; always thawed on the way out."""
    _run("fsfreeze", "-f", str(mnt))
    try:
        yield
    finally:
        subprocess.run(["fsfreeze", "-u", str(mnt)], capture_output=True)


def two_dir_broker(broker_factory, tmp_path, special: Path):
    """A broker whose log dirs are ``<tmp>/plain`` and ``<special>/logs`` (in that order)."""
    dirs = [tmp_path / "plain", special / "logs"]
    return broker_factory(log_dirs=",".join(str(d) for d in dirs)), dirs


def partitions_by_dir(w: Wire, topic: str) -> dict[str, set[int]]:
    """DescribeLogDirs v1: which partitions of ``topic`` each log dir holds."""
    body = w.call(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})
    out = {}
    for result in body["results"]:
        assert result["error_code"] == ErrorCode.NONE
        out[result["log_dir"]] = {p["partition_index"] for t in result["topics"] if t["name"] == topic
                                  for p in t["partitions"]}
    return out


def create_split_topic(w: Wire, topic: str, dirs: list[Path]) -> None:
    """Create ``topic`` with two partitions and check partition 0 is on dirs[0], partition 1 on dirs[1]."""
    (result,) = create(w, new_topic(topic, 2))
    assert result["error_code"] == ErrorCode.NONE, result
    assert partitions_by_dir(w, topic) == {os.path.abspath(dirs[0]): {0}, os.path.abspath(dirs[1]): {1}}
    assert (dirs[1] / f"{topic}-1").is_dir() and (dirs[0] / f"{topic}-0").is_dir()


def produce_body(topic: str, partition: int, records: bytes, acks: int = 1) -> dict:
    return {"acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def answered(w: Wire) -> bool:
    """True if the broker has sent something on ``w`` (without waiting)."""
    return bool(select.select([w.sock], [], [], 0)[0])


def still_serving(address: str, topic: str) -> None:
    """ApiVersions and Metadata are answered on a fresh connection (each within WAIT_S)."""
    with Wire(address, timeout=WAIT_S) as w:
        assert w.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                               "client_software_version": "1"})["error_code"] == 0
        body = w.call(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        (t,) = body["topics"]
        assert t["error_code"] == 0 and sorted(p["partition_index"] for p in t["partitions"]) == [0, 1]


def test_a_stalled_disk_holds_up_only_its_own_partitions(ext4_mount, broker_factory, tmp_path):
    b, dirs = two_dir_broker(broker_factory, tmp_path, ext4_mount)
    topic = "stall"
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        # some data on both partitions before the freeze: the stalled append must continue after it
        assert produce(w, topic, make_batch([b"h0", b"h1"]), partition=0, acks=1)["base_offset"] == 0
        assert produce(w, topic, make_batch([b"f0", b"f1", b"f2"]), partition=1, acks=1)["base_offset"] == 0

    with Wire(b.bootstrap, timeout=WAIT_S) as stalled:
        with frozen(ext4_mount):
            # two produces pipelined on one connection to the partition on the frozen disk
            stalled.send(ApiKey.PRODUCE, 8, produce_body(topic, 1, make_batch([b"s0", b"s1"])))
            stalled.send(ApiKey.PRODUCE, 8, produce_body(topic, 1, make_batch([b"s2"])))
            # the healthy disk's partition keeps taking appends, and is readable, meanwhile
            with Wire(b.bootstrap, timeout=WAIT_S) as w:
                for i in range(5):
                    r = produce(w, topic, make_batch([b"h%d" % (2 + i)]), partition=0, acks=1)
                    assert (r["error_code"], r["base_offset"]) == (0, 2 + i)
                r = produce(w, topic, make_batch([b"h7"]), partition=0, acks=-1)
                assert (r["error_code"], r["base_offset"]) == (0, 7)
            assert read_all(b, topic, partition=0) == [b"h%d" % i for i in range(8)]
            still_serving(b.bootstrap, topic)
            # what the frozen disk held before the freeze can still be read
            assert read_all(b, topic, partition=1) == [b"f0", b"f1", b"f2"]
            # everything above was answered, yet the stalled produces were not: their write is blocked
            assert not answered(stalled)
            assert b.running()
            # the first stalled produce found the writer idle and waited for it on the loop, once, in vain
            frozen_dir = os.path.abspath(dirs[1])
            assert value(scrape(b), "kafkapy_log_appender_prompt_waits_timed_out_total", log_dir=frozen_dir) == 1
        # thawed: the stalled appends complete, in order, at the offsets after the earlier data
        for expected_offset in (3, 5):
            _cid, body = stalled.receive(ApiKey.PRODUCE, 8)
            (r,) = body["responses"][0]["partition_responses"]
            assert (r["index"], r["error_code"], r["base_offset"]) == (1, 0, expected_offset)
    assert read_all(b, topic, partition=0) == [b"h%d" % i for i in range(8)]
    assert read_all(b, topic, partition=1) == [b"f0", b"f1", b"f2", b"s0", b"s1", b"s2"]


def test_a_full_disk_answers_storage_error_and_loses_nothing_acknowledged(tmpfs_mount, broker_factory, tmp_path):
    b, dirs = two_dir_broker(broker_factory, tmp_path, tmpfs_mount)
    topic = "full"
    ballast = tmpfs_mount / "ballast"
    ballast.write_bytes(b"\xa5" * (1 << 20))  # most of the 2 MiB: freed later to make room again
    acked: list[bytes] = []
    healthy: list[bytes] = []
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        failed = None
        for i in range(64):  # 64 x 32 KiB is far more than the tmpfs has left
            values = [b"%06d" % i + bytes([i % 251]) * (32 * 1024)]
            r = produce(w, topic, make_batch(values), partition=1, acks=1)
            if r["error_code"] != 0:
                failed = r
                break
            assert r["base_offset"] == len(acked)
            acked += values
        assert failed is not None, "the tmpfs never filled up"
        assert failed["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR and failed["base_offset"] == -1
        assert acked, "nothing fitted before the disk was full"
        # still full: a second try fails the same way, and publishes nothing either
        r = produce(w, topic, make_batch([b"again" * 8000]), partition=1, acks=-1)
        assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        # the broker keeps serving: the other disk's partition, metadata, reads of the full one
        for i in range(3):
            r = produce(w, topic, make_batch([b"ok%d" % i]), partition=0, acks=-1)
            assert (r["error_code"], r["base_offset"]) == (0, i)
            healthy.append(b"ok%d" % i)
        still_serving(b.bootstrap, topic)
        assert read_all(b, topic, partition=1) == acked
        # room again: appends to the full disk's partition go on right after the last acknowledged one
        ballast.unlink()
        for i in range(3):
            value = b"after%d" % i
            r = produce(w, topic, make_batch([value]), partition=1, acks=-1)
            assert (r["error_code"], r["base_offset"]) == (0, len(acked))
            acked.append(value)
    assert b.running()
    b.kill()
    b.start()
    assert read_all(b, topic, partition=1) == acked
    assert read_all(b, topic, partition=0) == healthy
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        r = produce(w, topic, make_batch([b"restarted"]), partition=1, acks=-1)
        assert (r["error_code"], r["base_offset"]) == (0, len(acked))


def fill_inodes(mnt: Path) -> list[Path]:
    """Create empty files on ``mnt`` until it has no inode left; returns them (delete to make room)."""
    made = []
    while True:
        path = mnt / f"ballast-{len(made)}"
        try:
            path.touch()
        except OSError:
            return made
        made.append(path)


@pytest.fixture
def tmpfs_few_inodes(tmp_path):
    """A tmpfs with room for data but only 64 inodes: a new segment's files cannot be created."""
    with tmpfs(tmp_path / "tmpfs", "size=4m,nr_inodes=64") as mnt:
        yield mnt


def test_a_segment_roll_on_a_full_disk_is_a_storage_error(tmpfs_few_inodes, broker_factory, tmp_path):
    b, dirs = two_dir_broker(broker_factory, tmp_path, tmpfs_few_inodes)
    topic = "roll"
    acked = []
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        (result,) = create(w, new_topic(topic, 2, configs={"segment.bytes": "1024"}))
        assert result["error_code"] == ErrorCode.NONE
        assert partitions_by_dir(w, topic)[os.path.abspath(dirs[1])] == {1}
        # before the inodes run out: the first append also writes the leader-epoch-checkpoint
        r = produce(w, topic, make_batch([b"a" * 700]), partition=1, acks=1)
        assert (r["error_code"], r["base_offset"]) == (0, 0)
        acked.append(b"a" * 700)
        ballast = fill_inodes(tmpfs_few_inodes)
        # the segment is full: the roll must create files, and there is no inode for them
        for _ in range(2):
            r = produce(w, topic, make_batch([b"b" * 700]), partition=1, acks=1)
            assert (r["error_code"], r["base_offset"]) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        still_serving(b.bootstrap, topic)
        for path in ballast:
            path.unlink()
        for i in range(2):
            r = produce(w, topic, make_batch([b"c%d" % i]), partition=1, acks=1)
            assert (r["error_code"], r["base_offset"]) == (0, len(acked))
            acked.append(b"c%d" % i)
    b.kill()
    b.start()
    assert read_all(b, topic, partition=1) == acked  # broker_factory also checks its log has no traceback


def test_a_failed_leader_epoch_checkpoint_write_publishes_nothing(tmpfs_few_inodes, broker_factory, tmp_path):
    b, dirs = two_dir_broker(broker_factory, tmp_path, tmpfs_few_inodes)
    topic = "epoch"
    acked = []
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        ballast = fill_inodes(tmpfs_few_inodes)  # the first append's epoch checkpoint cannot be written
        r = produce(w, topic, make_batch([b"first"]), partition=1, acks=1)
        if r["error_code"] == 0:
            acked.append(b"first")
        else:
            assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        for path in ballast:
            path.unlink()
        r = produce(w, topic, make_batch([b"second"]), partition=1, acks=1)
        assert (r["error_code"], r["base_offset"]) == (0, len(acked))
        acked.append(b"second")
        assert read_all(b, topic, partition=1) == acked
    b.kill()
    b.start()
    assert read_all(b, topic, partition=1) == acked


def fill_space(mnt: Path) -> Path:
    """Write a file on ``mnt`` until not one more byte fits; returns it."""
    path = mnt / "ballast-space"
    with open(path, "wb", buffering=0) as fh:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError:
                pass
    return path


def fill_partition_until_full(w: Wire, topic: str, partition: int) -> None:
    for i in range(400):
        r = produce(w, topic, make_batch([b"%04d" % i * 4000]), partition=partition, acks=1)
        if r["error_code"] != 0:
            assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
            return
    raise AssertionError("the disk never filled up")


def broker_with_a_full_dir(broker_factory, tmp_path, mnt: Path, topic: str):
    """A two-dir broker whose ``topic`` has b"p0" in partition 0 and partition 1's dir (``mnt``) full."""
    b, dirs = two_dir_broker(broker_factory, tmp_path, mnt)
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        assert produce(w, topic, make_batch([b"p0"]), partition=0, acks=1)["error_code"] == 0
        fill_partition_until_full(w, topic, 1)
    return b, dirs


def test_a_crash_with_a_full_disk_takes_only_its_partitions_offline(tmpfs_mount, broker_factory, tmp_path):
    topic = "crash"
    b, _dirs = broker_with_a_full_dir(broker_factory, tmp_path, tmpfs_mount, topic)
    b.kill()
    fill_space(tmpfs_mount)  # still full when the broker comes back
    b.start()
    assert read_all(b, topic, partition=0) == [b"p0"]
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        r = produce(w, topic, make_batch([b"p1"]), partition=0, acks=1)
        assert (r["error_code"], r["base_offset"]) == (0, 1)


def test_sigterm_with_a_full_disk_still_shuts_down_cleanly(tmpfs_mount, broker_factory, tmp_path):
    b, dirs = broker_with_a_full_dir(broker_factory, tmp_path, tmpfs_mount, "shutdown")
    fill_space(tmpfs_mount)
    assert b.stop() == 0, b.stderr_tail()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()


def latest_offset(w: Wire, topic: str, partition: int) -> int:
    """ListOffsets LATEST: the high watermark as consumers see it."""
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1, "max_num_offsets": 1,
                                        "current_leader_epoch": -1}]}]}
    return w.call(ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]["offset"]


def broker_with_a_record(broker_factory, tmp_path, mnt: Path, topic: str):
    """A two-dir broker whose ``topic`` holds b"a" at offset 0 of partition 1 (the dir on ``mnt``)."""
    b, dirs = two_dir_broker(broker_factory, tmp_path, mnt)
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        create_split_topic(w, topic, dirs)
        assert produce(w, topic, make_batch([b"a"]), partition=1, acks=1)["base_offset"] == 0
    return b, dirs


def test_a_producer_gone_during_a_stall_still_moves_the_high_watermark(ext4_mount, broker_factory, tmp_path):
    """The append lands after the thaw although nobody waits for it: consumers must see it at once."""
    topic = "gone"
    b, _dirs = broker_with_a_record(broker_factory, tmp_path, ext4_mount, topic)
    with frozen(ext4_mount):
        with Wire(b.bootstrap, timeout=WAIT_S) as gone:
            gone.send(ApiKey.PRODUCE, 8, produce_body(topic, 1, make_batch([b"b", b"c"])))
            # the request is in (the broker answers a later request on another connection) ...
            still_serving(b.bootstrap, topic)
        # ... and its connection is closed before the write could happen
    # thawed: the write completes; with no producer left, only the delivery can publish it
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        for _ in range(200):  # bounded: the append is written right after the thaw
            if latest_offset(w, topic, 1) == 3:
                break
            select.select([], [], [], 0.05)
        assert latest_offset(w, topic, 1) == 3
    assert read_all(b, topic, partition=1) == [b"a", b"b", b"c"]


def test_a_config_change_during_a_stall_does_not_stall_the_broker(ext4_mount, broker_factory, tmp_path):
    """Changing the topic's config takes no lock the stalled writer holds."""
    topic = "cfgstall"
    b, dirs = broker_with_a_record(broker_factory, tmp_path, ext4_mount, topic)
    with Wire(b.bootstrap, timeout=WAIT_S) as stalled:
        with frozen(ext4_mount):
            stalled.send(ApiKey.PRODUCE, 8, produce_body(topic, 1, make_batch([b"b"])))
            still_serving(b.bootstrap, topic)  # the produce has reached the writer, which is blocked
            with Wire(b.bootstrap, timeout=WAIT_S) as w:
                resource = {"resource_type": 2, "resource_name": topic, "configs": [
                    {"name": "segment.bytes", "config_operation": 0, "value": "2048"}]}
                (r,) = w.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
                              {"resources": [resource], "validate_only": False})["responses"]
                assert r["error_code"] == 0
                r = produce(w, topic, make_batch([b"p0"]), partition=0, acks=1)
                assert (r["error_code"], r["base_offset"]) == (0, 0)
            still_serving(b.bootstrap, topic)
            assert not answered(stalled)
        _cid, body = stalled.receive(ApiKey.PRODUCE, 8)
        (r,) = body["responses"][0]["partition_responses"]
        assert (r["error_code"], r["base_offset"]) == (0, 1)
    # the new segment.bytes is in force: enough data rolls partition 1's log
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        for i in range(4):
            assert produce(w, topic, make_batch([b"x" * 1000]), partition=1, acks=1)["error_code"] == 0
    assert len(list((dirs[1] / f"{topic}-1").glob("*.log"))) > 1
