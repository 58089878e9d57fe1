"""Moving a log to another log dir of the same manager (AlterReplicaLogDirs' future replica), and restarts.

Real files in two dirs; the current log's lock is held by the test to keep the
move from swapping (its last step runs under that lock), so the future log can
be looked at while it exists. Waits are bounded guards, not timings.
"""

from __future__ import annotations

import os
import re
import time

from broker.log import LogConfig, LogManager
from broker.log.alter_dirs import parse_future_dir
from log_helpers import make_batch, read_all

WAIT_S = 30


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def filled_manager(tmp_path, batches: int = 300):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    m = LogManager(dirs, LogConfig(segment_bytes=4096))
    m.startup()
    log = m.create_log("mv-topic", 0, log_dir=dirs[0])
    for i in range(batches):
        log.append(make_batch(2, value=b"%05d" % i * 20), leader_epoch=i // 100)
    return m, dirs, log


def test_parse_future_dir():
    assert parse_future_dir("my-topic-3.0123abcd-future") == ("my-topic", 3)
    assert parse_future_dir("my-topic-3") is None and parse_future_dir("t-0.ab-delete") is None


def test_a_move_copies_while_the_current_log_serves_then_swaps(tmp_path):
    m, dirs, log = filled_manager(tmp_path)
    log.delete_records(10)  # the future log starts where the current one does
    expected = read_all(log)
    swapped = []
    with log.lock:  # holds the swap back: the copy runs, the last step waits for this lock
        assert m.move_log(("mv-topic", 0), dirs[1], lambda tp, new: swapped.append((tp, new)))
        (move,) = m.future_logs().values()
        assert re.fullmatch(r"mv-topic-0\.[0-9a-f]{32}-future", move.future.dir.name)
        assert move.future.dir.parent == dirs[1] and move.future.log_start_offset == 10
        wait_for(lambda: move.lag < 100, "the copy to get near the end")  # the last step is held back
        # the current log still takes appends, and the move picks them up
        log.append(make_batch(1, value=b"late"), leader_epoch=3)
        expected = read_all(log)
    wait_for(lambda: swapped, "the swap")
    ((tp, new),) = swapped
    assert tp == ("mv-topic", 0) and m.get_log(tp) is new and m.log_dir_of(tp) == dirs[1]
    assert new.dir == dirs[1] / "mv-topic-0" and log.closed
    assert read_all(new) == expected and new.log_start_offset == 10
    assert new.leader_epoch_cache.entries == log.leader_epoch_cache.entries
    assert m.future_logs() == {}
    m._remove_doomed_dirs()
    assert os.listdir(dirs[0]) == [n for n in os.listdir(dirs[0]) if not n.startswith("mv-topic")]
    m.shutdown()
    m2 = LogManager(dirs, LogConfig(segment_bytes=4096))
    m2.startup()
    assert m2.log_dir_of(("mv-topic", 0)) == dirs[1] and read_all(m2.get_log(("mv-topic", 0))) == expected
    m2.shutdown()


def test_a_restart_mid_move_abandons_the_future_log_and_keeps_the_current(tmp_path):
    m, dirs, log = filled_manager(tmp_path)
    expected = read_all(log)
    m.shutdown()
    # a crash mid-move leaves a partial future log in the destination (here: a copy of the first segments)
    future_dir = dirs[1] / "mv-topic-0.0123456789abcdef0123456789abcdef-future"
    future_dir.mkdir()
    for name in sorted(os.listdir(dirs[0] / "mv-topic-0"))[:3]:
        os.link(dirs[0] / "mv-topic-0" / name, future_dir / name)
    m2 = LogManager(dirs, LogConfig(segment_bytes=4096))
    m2.startup()
    assert m2.log_dir_of(("mv-topic", 0)) == dirs[0] and read_all(m2.get_log(("mv-topic", 0))) == expected
    assert not future_dir.exists() and m2.future_logs() == {}
    m2.shutdown()


def test_a_crash_between_the_swap_renames_keeps_one_copy(tmp_path):
    m, dirs, log = filled_manager(tmp_path)
    expected = read_all(log)
    m.shutdown()
    # the swap renamed the caught-up future into place but not yet the current one away
    os.system(f"cp -a {dirs[0] / 'mv-topic-0'} {dirs[1] / 'mv-topic-0'}")
    m2 = LogManager(dirs, LogConfig(segment_bytes=4096))
    m2.startup()
    assert read_all(m2.get_log(("mv-topic", 0))) == expected
    kept = m2.log_dir_of(("mv-topic", 0))
    other = dirs[1] if kept == dirs[0] else dirs[0]
    assert not (other / "mv-topic-0").exists()
    m2.shutdown()
