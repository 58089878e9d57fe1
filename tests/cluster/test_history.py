"""The history checker (``tests/cluster/history.py``) on hand-made histories: each anomaly
is found, and a clean history passes."""

from __future__ import annotations

from types import SimpleNamespace

from tests.cluster.history import Recorder, check

ACKED = [(0, 0, b"a"), (0, 1, b"b"), (1, 0, b"c"), (0, 2, b"d")]
CLEAN_READ = [(0, 0, b"a"), (1, 0, b"c"), (0, 1, b"b"), (0, 2, b"d")]


def test_a_clean_history_passes():
    report = check(ACKED, CLEAN_READ)
    assert report.valid(), str(report)
    assert (report.acknowledged, report.read) == (4, 4)
    assert str(report) == "4 acknowledged, 0 indeterminate, 4 read"


def test_indeterminate_values_may_be_read_or_not():
    read = CLEAN_READ + [(0, 3, b"maybe-written")]
    report = check(ACKED, read, indeterminate=[b"maybe-written", b"maybe-not"])
    assert report.valid(), str(report)


def test_an_acknowledged_value_never_read_is_lost():
    report = check(ACKED, CLEAN_READ[:-1])
    assert report.lost == [(0, 2, b"d")]
    assert not report.valid()
    assert "lost: 1: (0, 2, b'd')" in str(report)


def test_an_acknowledged_offset_read_with_another_value_is_divergent():
    # b was acknowledged at 0-1, then truncated away and 0-1 reused for x (a failed send):
    # b is also lost, and the offset holds two values.
    read = [(0, 0, b"a"), (0, 1, b"x"), (0, 2, b"d"), (1, 0, b"c")]
    report = check(ACKED, read, indeterminate=[b"x"])
    assert report.divergent == {(0, 1): {b"b", b"x"}}
    assert report.lost == [(0, 1, b"b")]
    assert not report.valid()


def test_two_acknowledgements_of_one_offset_are_divergent():
    # A stale leader and the new one both acknowledged offset 2 of partition 0.
    acked = ACKED + [(0, 2, b"e")]
    report = check(acked, CLEAN_READ + [(0, 3, b"e")])
    assert report.divergent == {(0, 2): {b"d", b"e"}}
    assert report.moved == {b"e": ((0, 2), [(0, 3)])}


def test_two_readers_disagreeing_on_an_offset_are_divergent():
    report = check(ACKED, {"replica1": CLEAN_READ, "replica2": [(0, 0, b"a"), (0, 1, b"z")]},
                   indeterminate=[b"z"])
    assert report.divergent == {(0, 1): {b"b", b"z"}}
    assert not report.valid()


def test_an_acknowledged_value_read_elsewhere_has_moved():
    read = [(0, 0, b"a"), (0, 1, b"b"), (1, 0, b"c"), (0, 3, b"d")]
    report = check(ACKED, read)
    assert report.moved == {b"d": ((0, 2), [(0, 3)])}
    assert report.lost == [] and report.divergent == {}
    assert not report.valid()


def test_a_value_at_two_offsets_is_a_duplicate():
    # A retry without idempotence: the first attempt was written, its answer lost.
    read = CLEAN_READ + [(0, 3, b"b")]
    report = check(ACKED, read)
    assert report.duplicates == {b"b": [(0, 1), (0, 3)]}
    assert not report.valid()
    assert report.valid(allow_duplicates=True), str(report)


def test_offsets_going_back_in_one_read_are_non_monotonic():
    read = [(0, 0, b"a"), (0, 1, b"b"), (0, 2, b"d"), (1, 0, b"c"), (0, 1, b"b")]
    report = check(ACKED, read)
    assert report.non_monotonic == [("read", 0, 2, 1)]
    assert not report.valid(allow_duplicates=True)
    # Offsets interleaved across partitions are fine: the order is per partition.
    assert check(ACKED, CLEAN_READ).non_monotonic == []


def test_a_value_nobody_sent_is_unexpected():
    report = check(ACKED, CLEAN_READ + [(1, 1, b"ghost")])
    assert report.unexpected == [(1, 1, b"ghost")]
    assert not report.valid()


def test_the_recorder_files_delivery_reports():
    def msg(p, o, v):
        return SimpleNamespace(partition=lambda: p, offset=lambda: o, value=lambda: v)

    err = SimpleNamespace(name=lambda: "NOT_ENOUGH_REPLICAS")
    recorder = Recorder()
    recorder.on_delivery(None, msg(0, 0, b"a"))
    recorder.on_delivery(err, msg(0, -1, b"b"))
    recorder.on_delivery(None, msg(0, 1, b"c"))
    assert recorder.acknowledged == [(0, 0, b"a"), (0, 1, b"c")]
    assert recorder.indeterminate == {b"b"}
    assert dict(recorder.errors) == {"NOT_ENOUGH_REPLICAS": 1}
    assert recorder.check([(0, 0, b"a"), (0, 1, b"c")], extra_indeterminate=[b"unsent"]).valid()
    assert recorder.check([(0, 0, b"a")]).lost == [(0, 1, b"c")]
