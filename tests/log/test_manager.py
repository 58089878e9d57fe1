"""LogManager: JBOD placement, restart, checkpoints, deletion, background flush/retention."""

from __future__ import annotations

import os
import threading
import time

from broker.log import LogConfig, LogManager, parse_topic_partition
from broker.log.checkpoint import (
    read_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from log_helpers import make_batch, read_all


def test_parse_topic_partition_splits_on_last_dash():
    assert parse_topic_partition("my-topic-12") == ("my-topic", 12)
    assert parse_topic_partition("__consumer_offsets-3") == ("__consumer_offsets", 3)
    assert parse_topic_partition("t-0.0a1b-delete") is None
    assert parse_topic_partition("nodash") is None


def test_checkpoint_round_trip(tmp_path):
    p = tmp_path / "recovery-point-offset-checkpoint"
    data = {("a-b", 0): 5, ("x", 3): 12}
    write_offset_checkpoint(p, data)
    assert p.read_text().splitlines()[:2] == ["0", "2"]
    assert "a-b 0 5" in p.read_text()
    assert read_offset_checkpoint(p) == data
    assert read_offset_checkpoint(tmp_path / "missing") == {}


def test_restart_keeps_everything_and_deleted_logs_stay_gone(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    cfg = LogConfig(segment_bytes=500)
    m = LogManager(dirs, cfg)
    m.startup()
    m.ensure_meta_properties(broker_id=1, cluster_id="abc")
    logs = {}
    for p in range(4):
        logs[p] = m.create_log("my-topic", p)
        for i in range(p + 3):
            logs[p].append(make_batch(2, value=b"x" * 100), leader_epoch=p)
    assert {m.log_dir_of(("my-topic", p)) for p in range(4)} == set(dirs)  # spread over both dirs
    logs[1].delete_records(2)
    doomed = logs[3].dir
    assert m.delete_log("my-topic", 3)
    assert not doomed.exists()
    # high watermarks are the replica layer's; the manager checkpoints what it is told (None: not written)
    m.high_watermark_of = {("my-topic", 0): 3, ("my-topic", 1): 99}.get
    m.shutdown()
    assert all((d / ".kafka_cleanshutdown").exists() for d in dirs)
    assert read_meta_properties(dirs[0])["cluster.id"] == "abc"
    assert not any(n.endswith("-delete") for d in dirs for n in os.listdir(d))

    m2 = LogManager(dirs, cfg)
    m2.startup()
    assert sorted(m2.logs()) == [("my-topic", 0), ("my-topic", 1), ("my-topic", 2)]
    # read back, clamped to each log's range
    assert m2.checkpointed_high_watermarks == {("my-topic", 0): 3, ("my-topic", 1): 8}
    for p in range(3):
        log = m2.get_log(("my-topic", p))
        assert log.log_end_offset == 2 * (p + 3)
        assert log.recovery_point == log.log_end_offset
    assert m2.get_log(("my-topic", 1)).log_start_offset == 2
    assert [e.offset for e in read_all(m2.get_log(("my-topic", 2)))] == list(range(10))
    assert read_epoch_checkpoint(m2.get_log(("my-topic", 2)).dir / "leader-epoch-checkpoint") == [(2, 0)]
    m2.shutdown()


def test_unclean_restart_recovers_from_checkpoint(tmp_path):
    m = LogManager([tmp_path], LogConfig())
    m.startup()
    log = m.create_log("t", 0)
    for _ in range(3):
        log.append(make_batch(1))
    log.flush()
    m.checkpoint()
    log.append(make_batch(1))
    seg = log.segments[-1].log_path
    log.close()  # no shutdown: no clean-shutdown marker
    with open(seg, "ab") as f:
        f.write(b"\x00" * 20)
    m2 = LogManager([tmp_path], LogConfig())
    m2.startup()
    log = m2.get_log(("t", 0))
    assert log.log_end_offset == 4 and log.recovery_report.truncated
    m2.shutdown()


def test_background_flush_by_messages_and_retention(tmp_path):
    cfg = LogConfig(flush_messages=2, segment_bytes=400, retention_ms=1000, file_delete_delay_ms=0)
    m = LogManager([tmp_path], cfg, retention_check_interval_ms=10, checkpoint_interval_ms=10)
    m.startup()
    log = m.create_log("t", 0)
    m.high_watermark_of = lambda tp: m.get_log(tp).log_end_offset  # what a single node's replica layer says
    flushed = threading.Event()
    orig = log.flush

    def flush(up_to=None):
        orig(up_to)
        if log.recovery_point >= 2:
            flushed.set()

    log.flush = flush
    m.start_background(scheduler_tick_ms=10)
    for i in range(8):
        log.append(make_batch(1, ts=1, value=b"x" * 100))
    assert flushed.wait(10)
    deadline = threading.Event()
    for _ in range(500):
        if len(log.segments) == 1 and log.log_start_offset == log.segments[0].base_offset:
            break
        deadline.wait(0.01)
    assert len(log.segments) == 1 and log.log_start_offset == log.segments[0].base_offset
    m.shutdown()
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint")[("t", 0)] == log.log_start_offset


def test_the_scheduler_sleeps_until_a_flush_ms_flush_is_due(tmp_path):
    """The scheduler sleeps up to its longest tick (here 30 s) unless a duty is due sooner: a log
    with flush.ms 100 is flushed about 100 ms after its first unflushed append, and again after the
    next one, each time without the scheduler having been woken."""
    cfg = LogConfig(flush_ms=100)
    m = LogManager([tmp_path], cfg, retention_check_interval_ms=60_000, checkpoint_interval_ms=60_000)
    m.startup()
    log = m.create_log("t", 0)
    m.start_background(scheduler_tick_ms=30_000)
    try:
        for expected in (1, 2):
            log.append(make_batch(1))
            deadline = time.monotonic() + 5
            while log.recovery_point < expected and time.monotonic() < deadline:
                time.sleep(0.01)
            assert log.recovery_point == expected, "flush.ms flush not done within 5 s"
    finally:
        m.shutdown()


def test_a_preferred_log_dir_is_used_once_for_a_new_log(tmp_path):
    """AlterReplicaLogDirs before the replica exists: its log is made in that dir (an empty broker would
    pick the first), once; the next new log goes by the fewest-partitions rule again."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, LogConfig())
    m.startup()
    m.set_preferred_log_dir(("t", 0), dirs[1])
    m.create_log("t", 0)
    assert m.log_dir_of(("t", 0)) == dirs[1] and (dirs[1] / "t-0").is_dir() and not (dirs[0] / "t-0").exists()
    m.create_log("t", 1)
    assert m.log_dir_of(("t", 1)) == dirs[0]
    m.shutdown()


def test_the_cleaner_threads_resize_while_running(tmp_path):
    m = LogManager([tmp_path], LogConfig(), cleaner_backoff_ms=20, cleaner_threads=2)
    m.resize_cleaner(3)  # before start_background: only the number changes
    assert m.cleaner_threads_alive == 0
    m.startup()
    m.start_background(scheduler_tick_ms=10)
    assert m.cleaner_threads_alive == 3
    m.resize_cleaner(1)
    deadline = time.monotonic() + 10  # a guard against a hang: they end at their next wake-up (20 ms)
    while m.cleaner_threads_alive != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    m.resize_cleaner(2)
    assert m.cleaner_threads_alive == 2
    m.shutdown()
    assert m.cleaner_threads_alive == 0
