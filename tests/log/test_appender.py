"""``LogAppender``: a writer thread that groups queued appends per log.

Real logs in tmp_path, real threads. The writer is held (where a test needs
appends to queue up) by a ``deliver`` function that waits on an event: it runs
on the writer thread, so while it waits nothing else is taken from the queue.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

import pytest

from broker.log import AppendInfo, Log, LogClosedError, LogConfig
from broker.log.appender import MAX_GROUP, LogAppender

from log_helpers import dir_files, log_state, make_batch, read_all

CONFIG = LogConfig(segment_bytes=8000, segment_index_bytes=80, index_interval_bytes=200)


def _clock() -> float:
    return 1_700_000_000.0


class _HeldWriter:
    """A ``deliver`` that records each call and holds the writer in its first call until released."""

    def __init__(self) -> None:
        self.calls: list[list] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, pairs: list) -> None:
        if threading.current_thread().name.startswith("log-appender"):
            self.calls.append(list(pairs))
            self.entered.set()
            self.release.wait()
        for done, result in pairs:  # what submit refuses at once comes on the caller's thread, unheld
            done(result)


def test_threads_and_logs_concurrently(tmp_path):
    logs = [Log.open(tmp_path / f"t-{p}", CONFIG, clock=_clock) for p in range(3)]
    appender = LogAppender("d0")
    results: list = []  # (thread, log, seq, result); list.append is atomic
    per_thread = 150

    def producer(t: int) -> None:
        for i in range(per_thread):
            p = (t + i) % len(logs)
            data = make_batch(1 + i % 3, ts=10_000 + i, value=f"{t}:{i}".encode())
            buf = bytearray(data) if i % 2 else data
            appender.submit(logs[p], buf, t, lambda r, t=t, p=p, i=i: results.append((t, p, i, r)))

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        appender.close()
        # every done exactly once, every result a success
        submitted = Counter((t, i) for t in range(4) for i in range(per_thread))
        assert Counter((t, i) for t, _p, i, _r in results) == submitted
        assert all(isinstance(r, AppendInfo) for *_x, r in results)
        assert appender.appends == 4 * per_thread
        assert 3 <= appender.groups <= appender.appends
        for p, log in enumerate(logs):
            mine = sorted((r.first_offset, t, i) for t, q, i, r in results if q == p)
            # offsets: disjoint, consecutive, and in submit order within each thread
            nxt = 0
            for first, t, i in mine:
                assert first == nxt
                nxt = first + 1 + i % 3
            assert log.log_end_offset == nxt
            for t in range(4):
                seq = [i for _f, u, i in mine if u == t]
                assert seq == sorted(seq)
            values = [r.value.decode() for r in read_all(log)]
            assert Counter(values) == Counter(f"{t}:{i}" for _f, t, i in mine for _k in range(1 + i % 3))
    finally:
        appender.close()
        for log in logs:
            log.close()


def test_single_submitter_matches_sequential_appends(tmp_path):
    """With one submitting thread the order per log is fixed: files equal plain ``Log.append`` calls."""
    names = [f"t-{p}" for p in range(3)]
    grouped = [Log.open(tmp_path / "grouped" / n, CONFIG, clock=_clock) for n in names]
    reference = [Log.open(tmp_path / "reference" / n, CONFIG, clock=_clock) for n in names]
    appender = LogAppender("d0")
    got: list = []
    try:
        for i in range(600):
            p = i * 7 % 3
            data = make_batch(1 + i % 4, ts=10_000 + i * 10, size=i % 150)
            epoch = i // 200
            appender.submit(grouped[p], bytearray(data) if i % 3 else data, epoch, got.append)
            reference[p].append(bytearray(data), leader_epoch=epoch)
        appender.close()
        assert len(got) == 600 and all(isinstance(r, AppendInfo) for r in got)
        for g, r in zip(grouped, reference):
            assert log_state(g) == log_state(r)
    finally:
        appender.close()
        for log in grouped + reference:
            log.close()
    for n in names:
        assert dir_files(tmp_path / "grouped" / n) == dir_files(tmp_path / "reference" / n)


def test_close_drains_the_queue(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    appender = LogAppender("d0")
    got: list = []
    try:
        for i in range(3000):
            appender.submit(log, make_batch(1, ts=i), 0, got.append)
        appender.close()  # returns only once all 3000 are written and delivered
        assert len(got) == 3000
        assert sorted(r.first_offset for r in got) == list(range(3000))
        assert [r.first_offset for r in got] == list(range(3000))  # delivered in submit order
        assert log.log_end_offset == 3000
        assert appender.queued == 0
    finally:
        log.close()


def test_submit_after_close(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    appender = LogAppender("d0")
    appender.close()
    got: list = []
    appender.submit(log, make_batch(1), 0, lambda r: got.append((threading.current_thread(), r)))
    try:
        assert len(got) == 1
        thread, error = got[0]
        assert thread is threading.current_thread()  # at once, on the caller's thread
        assert isinstance(error, LogClosedError) and error.error_code == 6
        assert log.log_end_offset == 0
    finally:
        log.close()


def test_log_closed_while_queued(tmp_path):
    keep = Log.open(tmp_path / "keep-0", LogConfig(), clock=_clock)
    gone = Log.open(tmp_path / "gone-0", LogConfig(), clock=_clock)
    held = _HeldWriter()
    appender = LogAppender("d0", deliver=held)
    got: dict = {}
    try:
        appender.submit(keep, make_batch(1), 0, lambda r: got.setdefault("first", r))
        held.entered.wait()  # the writer is inside deliver: what follows queues up
        for i in range(5):
            appender.submit(gone, make_batch(1, ts=i), 0, lambda r, i=i: got.setdefault(("gone", i), r))
            appender.submit(keep, make_batch(1, ts=i), 0, lambda r, i=i: got.setdefault(("keep", i), r))
        assert appender.queued == 10
        gone.close()
    finally:
        held.release.set()
        appender.close()
    try:
        assert len(got) == 11
        for i in range(5):
            error = got[("gone", i)]
            assert isinstance(error, LogClosedError) and error.error_code == 6
            assert got[("keep", i)].first_offset == i + 1
        assert gone.log_end_offset == 0
        assert (gone.dir / "00000000000000000000.log").stat().st_size == 0  # nothing written
        assert keep.log_end_offset == 6
        # one deliver call per wake-up: the first append alone, then both logs' groups together
        assert [len(c) for c in held.calls] == [1, 10]
        assert (appender.groups, appender.appends) == (3, 11)
    finally:
        keep.close()


def test_wake_up_takes_at_most_max_group(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    held = _HeldWriter()
    appender = LogAppender("d0", deliver=held)
    got: list = []
    extra = 2 * MAX_GROUP + 100
    try:
        appender.submit(log, make_batch(1), 0, got.append)
        held.entered.wait()
        for i in range(extra):
            appender.submit(log, make_batch(1, ts=i), 0, got.append)
    finally:
        held.release.set()
        appender.close()
    try:
        assert [len(c) for c in held.calls] == [1, MAX_GROUP, MAX_GROUP, 100]
        assert [r.first_offset for r in got] == list(range(extra + 1))
        assert (appender.groups, appender.appends) == (4, extra + 1)
    finally:
        log.close()


def test_errors_go_to_their_own_callers(tmp_path):
    """A bad item fails alone; the others in the same group are written.

    A CRC mismatch is found by ``submit`` itself, on the caller's thread, and
    answered at once; an oversize batch is refused by the log inside the group.
    """
    log = Log.open(tmp_path / "t-0", LogConfig(max_message_bytes=2000), clock=_clock)
    held = _HeldWriter()
    appender = LogAppender("d0", deliver=held)
    got: dict = {}
    bad_crc = bytearray(make_batch(1))
    bad_crc[-1] ^= 0xFF
    try:
        appender.submit(log, make_batch(1), 0, lambda r: got.__setitem__("first", r))
        held.entered.wait()
        items = {"ok1": make_batch(1), "bad_crc": bad_crc, "too_large": make_batch(1, size=3000), "ok2": make_batch(2)}
        for name, data in items.items():
            appender.submit(log, data, 0, lambda r, name=name: got.__setitem__(name, r))
        assert list(got) == ["bad_crc"]  # answered before the writer was even released
    finally:
        held.release.set()
        appender.close()
    try:
        assert {k: type(r).__name__ for k, r in got.items()} == {
            "first": "AppendInfo", "ok1": "AppendInfo", "bad_crc": "CorruptRecordError",
            "too_large": "RecordTooLargeError", "ok2": "AppendInfo"}
        assert [got[k].first_offset for k in ("first", "ok1", "ok2")] == [0, 1, 2]
        assert (got["bad_crc"].error_code, got["too_large"].error_code) == (2, 10)
        assert log.log_end_offset == 4
        assert len(held.calls) == 2  # the refused one never reached the writer
    finally:
        log.close()


def test_submit_refuses_what_is_not_a_buffer(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    appender = LogAppender("d0")
    try:
        with pytest.raises(TypeError):
            appender.submit(log, None, 0, lambda r: None)
        got: list = []
        appender.submit(log, make_batch(1), 0, got.append)
        appender.close()
        assert got[0].first_offset == 0
    finally:
        appender.close()
        log.close()


class _FailingLog(Log):
    """A real log whose group append raises, as an unexpected bug would (fault injection)."""

    def append_group(self, items, **kw):
        if any(item[0] == b"boom" for item in items):
            raise RuntimeError("injected failure")
        return super().append_group(items, **kw)


def test_unexpected_exception_reaches_every_caller_and_writer_survives(tmp_path):
    """``append_group`` raising fails that log's group (every caller hears of it); later groups work."""
    log = _FailingLog.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    other = Log.open(tmp_path / "t-1", LogConfig(), clock=_clock)
    held = _HeldWriter()
    appender = LogAppender("d0", deliver=held)
    got: list = []
    second_group_done = threading.Event()
    try:
        appender.submit(log, make_batch(1), 0, got.append)
        held.entered.wait()
        appender.submit(log, make_batch(1), 0, lambda r: got.append(("a", r)))
        appender.submit(log, b"boom", 0, lambda r: got.append(("b", r)))
        appender.submit(other, make_batch(1), 0, lambda r: (got.append(("c", r)), second_group_done.set()))
    finally:
        held.release.set()
    try:
        second_group_done.wait()  # the next submit is a wake-up of its own
        after: list = []
        appender.submit(log, make_batch(1), 0, after.append)
        appender.close()
        results = dict(got[1:])
        assert isinstance(results["a"], RuntimeError) and isinstance(results["b"], RuntimeError)
        assert results["c"].first_offset == 0
        assert log.log_end_offset == 2 and after[0].first_offset == 1  # nothing of the failed group was written
    finally:
        appender.close()
        log.close()
        other.close()


def test_failing_deliver_does_not_stop_the_writer(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    seen: list = []

    def deliver(pairs):
        seen.append(len(pairs))
        raise RuntimeError("callback bug")

    appender = LogAppender("d0", deliver=deliver)
    try:
        for i in range(3):
            appender.submit(log, make_batch(1), 0, lambda r: None)
        appender.close()
        assert sum(seen) == 3
        assert log.log_end_offset == 3
    finally:
        appender.close()
        log.close()


def test_submit_racing_close_gets_exactly_one_result(tmp_path):
    """An append whose CRC check is still running when ``close`` finishes is refused, not lost.

    ``submit`` checks the CRC with the GIL released; a 64 MiB batch keeps it
    there for milliseconds, while this thread closes the idle appender. Either
    order must give the append exactly one result.
    """
    log = Log.open(tmp_path / "t-0", LogConfig(max_message_bytes=128 << 20), clock=_clock)
    huge = make_batch(1, size=64 << 20)
    try:
        outcomes = Counter()
        for _round in range(5):
            appender = LogAppender("d0")
            results: list = []
            checking = threading.Event()

            def producer() -> None:
                checking.set()
                appender.submit(log, huge, 0, results.append)

            t = threading.Thread(target=producer)
            t.start()
            checking.wait()
            threading.Event().wait(0.002)  # let the submit reach its CRC check (no assertion on time)
            appender.close()
            t.join()
            assert len(results) == 1, results
            assert isinstance(results[0], (AppendInfo, LogClosedError))
            assert appender.queued == 0
            outcomes[type(results[0]).__name__] += 1
        assert sum(outcomes.values()) == 5
    finally:
        log.close()


def test_submit_says_whether_the_append_is_prompt(tmp_path):
    """Prompt: the writer was idle and this append is alone in the queue (and the dir not marked slow)."""
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    held = _HeldWriter()
    appender = LogAppender("d0", deliver=held)
    got: list = []
    try:
        # an idle writer takes the first append at once, alone
        assert appender.submit(log, make_batch(1), 0, got.append) is True
        held.entered.wait()
        # held in its delivery: it says it is idle, so the next append is alone too; the one after is queued
        assert appender.submit(log, make_batch(1, ts=1), 0, got.append) is True
        assert appender.submit(log, make_batch(1, ts=2), 0, got.append) is False
    finally:
        held.release.set()

    def delivered(n: int) -> None:  # wait (bounded) until n results are in and the writer sleeps again
        for _ in range(200):
            if len(got) == n and appender._idle and not appender.queued:
                return
            threading.Event().wait(0.01)
        raise AssertionError(f"{len(got)} of {n} appends delivered")

    try:
        delivered(3)
        assert [r.first_offset for r in got] == [0, 1, 2]
        appender.mark_slow(60)
        assert appender.submit(log, make_batch(1, ts=3), 0, got.append) is False
        delivered(4)
        appender.mark_slow(0)
        assert appender.submit(log, make_batch(1, ts=4), 0, got.append) is True
        delivered(5)
        # an append refused at once (its CRC is wrong) is never prompt
        corrupt = bytearray(make_batch(1, ts=5))
        corrupt[-1] ^= 0xFF
        assert appender.submit(log, corrupt, 0, got.append) is False
    finally:
        appender.close()
        log.close()
    assert [r.first_offset for r in got[:5]] == [0, 1, 2, 3, 4]
    assert type(got[5]).__name__ == "CorruptRecordError"


def test_a_waited_for_prompt_append_is_written_on_the_callers_cpu(tmp_path):
    """Co-location: pinned to the submitter's CPU while appends are waited for, then its own CPUs again."""
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=_clock)
    during: list[set[int]] = []  # the writer's affinity while it delivers each group

    def deliver(pairs: list) -> None:
        during.append(os.sched_getaffinity(0))
        for done, result in pairs:
            done(result)

    appender = LogAppender("d0", deliver=deliver)
    writer = appender._thread.native_id
    own = os.sched_getaffinity(writer)
    mine = os.sched_getaffinity(0)
    cpu = max(mine)
    got: list = []

    def written(n: int) -> None:
        for _ in range(500):
            if len(got) == n and appender._idle:
                return
            threading.Event().wait(0.01)
        raise AssertionError(f"{len(got)} of {n} appends delivered")

    try:
        written(0)
        os.sched_setaffinity(0, {cpu})  # the submitting thread runs on one known CPU
        try:
            for i in range(3):  # waited for, one at a time: written on the caller's CPU, pinned throughout
                assert appender.submit(log, make_batch(1, ts=i), 0, got.append, will_wait=True) is True
                written(i + 1)
                assert during[i] == {cpu}
                assert os.sched_getaffinity(writer) == {cpu}
            # one nobody waits for: the writer has its own CPUs back before it is woken
            assert appender.submit(log, make_batch(1, ts=3), 0, got.append) is True
            written(4)
            assert during[3] == own
            assert os.sched_getaffinity(writer) == own
        finally:
            os.sched_setaffinity(0, mine)
    finally:
        appender.close()
        log.close()
    assert [r.first_offset for r in got] == [0, 1, 2, 3]
