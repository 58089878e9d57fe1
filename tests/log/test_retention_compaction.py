"""Retention (time, size, DeleteRecords), deferred deletion, and compaction on real segments."""

from __future__ import annotations

import os
import time

from broker.log import LogConfig
from broker.log.cleaner import clean_log
from log_helpers import make_batch, read_all, read_batches


def test_time_retention_by_largest_timestamp_never_active(open_log):
    log = open_log(LogConfig(segment_bytes=400, retention_ms=1000, file_delete_delay_ms=0))
    for i in range(12):
        log.append(make_batch(1, ts=10_000 + i * 100, value=b"x" * 100))
    segs = log.segments
    assert len(segs) >= 4
    # nothing older than 1000 ms at t=10_500 relative to the segments' largest timestamps
    assert log.delete_retention_segments(now_ms=10_000, high_watermark=log.log_end_offset) == 0
    n = log.delete_retention_segments(now_ms=10_000 + 1000 + 500, high_watermark=log.log_end_offset)
    assert n >= 1 and log.log_start_offset == log.segments[0].base_offset
    for seg in segs[:n]:
        assert log.segments[0].base_offset > seg.base_offset
    # everything expired: all but the active segment go
    log.delete_retention_segments(now_ms=10**9, high_watermark=log.log_end_offset)
    assert len(log.segments) == 1 and log.segments[0] is segs[-1]
    assert [e.offset for e in read_all(log)] == list(range(log.log_start_offset, 12))


def test_size_retention(open_log):
    log = open_log(LogConfig(segment_bytes=400, retention_bytes=800, retention_ms=-1, file_delete_delay_ms=0))
    for i in range(12):
        log.append(make_batch(1, value=b"x" * 100))
    before = log.size_in_bytes
    n = log.delete_retention_segments(now_ms=0, high_watermark=log.log_end_offset)
    assert n > 0 and log.size_in_bytes <= 800 + log.segments[0].size
    assert log.size_in_bytes < before


def test_compact_policy_skips_delete_retention(open_log):
    log = open_log(LogConfig(segment_bytes=400, retention_ms=1, cleanup_policy="compact"))
    for i in range(8):
        log.append(make_batch(1, ts=1, value=b"x" * 100))
    assert log.delete_retention_segments(now_ms=10**9, high_watermark=log.log_end_offset) == 0


def test_deleted_segment_files_stay_readable_until_delay(open_log):
    clock = [1000.0]
    log = open_log(LogConfig(segment_bytes=400, file_delete_delay_ms=5000), clock=lambda: clock[0])
    for i in range(6):
        log.append(make_batch(1, value=b"x" * 100))
    s = log.read(0, 1 << 20)
    first = log.segments[0]
    target = log.segments[1].base_offset
    assert log.delete_records(target) == target
    assert first not in log.segments
    assert first.log_path.name.endswith(".log.deleted") and first.log_path.exists()
    assert s.read_bytes()  # an in-flight slice still reads the renamed file
    assert log.purge_deleted() == 0
    clock[0] += 6
    assert log.purge_deleted() == 1 and not first.log_path.exists()


def test_delete_records_limits(open_log):
    """The log checks only its own range; the high watermark is the replica layer's (tests/replica)."""
    log = open_log()
    log.append(make_batch(5))
    import pytest
    from broker.log import OffsetOutOfRange
    for bad in (6, -1):
        with pytest.raises(OffsetOutOfRange):
            log.delete_records(bad)
    assert log.delete_records(3) == 3
    assert [e.offset for e in read_all(log)] == [3, 4]


def test_retention_and_compaction_never_pass_the_high_watermark(open_log):
    log = open_log(LogConfig(segment_bytes=400, retention_ms=1000, file_delete_delay_ms=0))
    for i in range(12):
        log.append(make_batch(1, ts=1, value=b"x" * 100))
    second = log.segments[1]
    # expired everywhere, but only the first segment lies wholly below the high watermark
    assert log.delete_retention_segments(now_ms=10**9, high_watermark=second.base_offset) == 1
    assert log.segments[0] is second and log.log_start_offset == second.base_offset
    assert log.delete_retention_segments(now_ms=10**9, high_watermark=second.base_offset) == 0
    compacted = open_log(LogConfig(segment_bytes=400, cleanup_policy="compact", file_delete_delay_ms=0), name="c-0")
    for i in range(12):
        compacted.append(make_batch(1, ts=1, key=b"k", value=b"x" * 100))
    assert clean_log(compacted, 10**9, high_watermark=0, first_dirty_offset=0, force=True) is None
    assert [e.offset for e in read_all(compacted)] == list(range(12))


def _keys_values(log):
    return [(e.offset, e.key, e.value) for e in read_all(log)]


def test_compaction_keeps_latest_per_key_and_active_untouched(open_log):
    cfg = LogConfig(segment_bytes=500, cleanup_policy="compact", file_delete_delay_ms=0,
                    delete_retention_ms=10_000)
    log = open_log(cfg)
    for i in range(30):
        log.append(make_batch(1, ts=1000 + i, key=b"k%d" % (i % 4), value=b"v%d" % i, compression=(i % 3) * 1))
    active = log.segments[-1]
    active_bytes = active.log_path.read_bytes()
    res = clean_log(log, 2000, high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    assert res is not None and res.records_removed > 0
    assert log.segments[-1] is active and active.log_path.read_bytes() == active_bytes
    got = _keys_values(log)
    cleaned = [g for g in got if g[0] < active.base_offset]
    latest = {}
    for i in range(active.base_offset):
        latest[b"k%d" % (i % 4)] = i
    for off, key, value in cleaned:
        assert latest[key] == off or any(o >= active.base_offset and k == key for o, k, _ in got)
    assert [g for g in got if g[0] >= active.base_offset] == \
        [(i, b"k%d" % (i % 4), b"v%d" % i) for i in range(active.base_offset, 30)]
    # offsets are preserved and recovery accepts the rewritten segments
    log.close()
    from broker.log import Log
    again = Log.open(log.dir, cfg)
    assert _keys_values(again) == got and not again.recovery_report.truncated
    assert again.append(make_batch(1)).first_offset == 30
    again.close()


def test_tombstones_removed_after_delete_retention(open_log):
    cfg = LogConfig(segment_bytes=300, cleanup_policy="compact", file_delete_delay_ms=0, delete_retention_ms=1000)
    log = open_log(cfg)
    log.append(make_batch(1, ts=100, key=b"a", value=b"1"))
    log.append(make_batch(1, ts=101, key=b"b", value=b"2"))
    log.append(make_batch(1, ts=102, key=b"a", value=None))
    for i in range(6):
        log.append(make_batch(1, ts=103 + i, key=b"c", value=b"x" * 60))
    log.roll()
    clean_log(log, now_ms=500, high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    kv = _keys_values(log)
    assert (2, b"a", None) in kv and all(k != b"a" or v is None for _o, k, v in kv)
    clean_log(log, now_ms=5000, high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    kv = _keys_values(log)
    assert all(k != b"a" for _o, k, _v in kv) and (1, b"b", b"2") in kv


def test_empty_batch_kept_for_producer_state(open_log):
    cfg = LogConfig(segment_bytes=300, cleanup_policy="compact", file_delete_delay_ms=0)
    log = open_log(cfg)
    log.append(make_batch(1, key=b"a", value=b"old", producer_id=7))
    log.append(make_batch(1, key=b"b", value=b"old", producer_id=8))
    log.append(make_batch(1, key=b"b", value=b"new", producer_id=9))
    log.append(make_batch(1, key=b"a", value=b"new", producer_id=9, base_sequence=1))
    log.roll()
    clean_log(log, now_ms=10**6, high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    from broker.records.batch import iter_batches
    batches = list(iter_batches(log.read(0, 1 << 20).read_bytes()))
    by_pid = {b.producer_id: b for b in batches}
    assert by_pid[7].records == [] and by_pid[7].base_offset == 0  # last batch of producer 7: kept empty
    assert by_pid[8].records == []
    assert [b.producer_id for b in batches] == [7, 8, 9, 9]


def test_compaction_offset_map_bounded_in_passes(open_log):
    cfg = LogConfig(segment_bytes=400, cleanup_policy="compact", file_delete_delay_ms=0)
    log = open_log(cfg)
    for i in range(40):
        log.append(make_batch(1, ts=i, key=b"k%d" % i, value=b"v"))
    log.append(make_batch(1, ts=99, key=b"k0", value=b"v2"))
    log.roll()
    res = clean_log(log, 10**6, high_watermark=log.log_end_offset, first_dirty_offset=0, offset_map_bytes=24 * 5,
                    force=True)
    assert res.next_dirty_offset < 41
    dirty = res.next_dirty_offset
    while dirty < 41:
        res = clean_log(log, 10**6, high_watermark=log.log_end_offset, first_dirty_offset=dirty,
                        offset_map_bytes=24 * 5, force=True)
        dirty = res.next_dirty_offset
    keys = [k for _o, k, _v in _keys_values(log)]
    assert keys.count(b"k0") == 1 and len(keys) == 40
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log.dir))


def test_retention_and_flush_in_a_thread_while_appends_roll(open_log):
    # The scheduler thread's work (retention without the writer lock, flush outside it) racing
    # appends that roll segments: no error in either thread, and the log stays contiguous.
    import threading

    log = open_log(LogConfig(segment_bytes=300, retention_bytes=900, retention_ms=-1, file_delete_delay_ms=0))
    errors = []
    stop = threading.Event()

    def background():
        try:
            while not stop.is_set():
                log.delete_retention_segments(high_watermark=log.log_end_offset)
                log.flush()
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=background)
    worker.start()
    try:
        for i in range(400):
            log.append(make_batch(1, value=b"x" * 60))
    finally:
        stop.set()
        worker.join()
    assert errors == []
    log.delete_retention_segments(high_watermark=log.log_end_offset)
    assert log.size_in_bytes <= 900 + log.segments[0].size
    offsets = [e.offset for e in read_all(log)]
    assert offsets == list(range(log.log_start_offset, 400))
    assert sorted(p.suffix for p in log.dir.iterdir() if p.suffix == ".deleted") == []


def test_flush_of_a_closed_log_is_a_no_op(open_log):
    log = open_log(LogConfig(flush_messages=1))
    log.append(make_batch(3))
    log.close()
    log.flush()  # the flusher can race a topic deletion: nothing to sync, nothing raised
    assert log.recovery_point == 0


NOW = int(time.time() * 1000)  # producers expire by their last write's time: write as of now


def _txn_batch(pid: int, seq: int, ts: int, *pairs: tuple[bytes, bytes], transactional: bool = True) -> bytes:
    from broker.records import BatchBuilder

    b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=transactional)
    for key, value in pairs:
        b.append(NOW + ts, key, value)
    return b.build()


def _marker(pid: int, kind, ts: int) -> bytes:
    from broker.records.control import EndTransactionMarker, build_end_txn_marker_batch

    return build_end_txn_marker_batch(EndTransactionMarker(kind, 0), pid, 0, NOW + ts)


def test_compaction_removes_aborted_transactions_and_keeps_markers_while_needed(open_log):
    from broker.log import Log
    from broker.log.txn_index import read_entries, txn_index_path
    from broker.records.control import ControlRecordType as Kind

    cfg = LogConfig(segment_bytes=250, cleanup_policy="compact", file_delete_delay_ms=0, delete_retention_ms=1000)
    log = open_log(cfg)
    log.append(_txn_batch(1, 0, 100, (b"a", b"committed"), (b"b", b"committed")))  # 0-1
    log.append(_marker(1, Kind.COMMIT, 101))  # 2
    log.append(_txn_batch(2, 0, 102, (b"a", b"aborted"), (b"c", b"aborted")))  # 3-4
    log.append(_marker(2, Kind.ABORT, 103))  # 5
    log.append(_txn_batch(2, 2, 104, (b"d", b"plain"), transactional=False))  # 6: pid 2 goes on
    log.append(_txn_batch(3, 0, 105, (b"e", b"open"), transactional=True))  # 7: still undecided
    for i in range(4):
        log.append(make_batch(1, ts=NOW + 106 + i, key=b"f", value=b"x" * 60))
    log.roll()
    assert log.collect_aborted_transactions(0, log.log_end_offset)

    def batches():
        return read_batches(log)

    def data():
        return [(r.key, r.value) for b in batches() if not b.is_control for r in b.records]

    # the first pass stops before the open transaction; the aborted records go, their marker stays
    clean_log(log, now_ms=NOW + 500, high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    assert data()[:3] == [(b"a", b"committed"), (b"b", b"committed"), (b"d", b"plain")]
    assert (b"e", b"open") in data()
    assert [b.base_offset for b in batches() if b.is_control] == [2, 5]
    entries = [e for s in log.segments for e in read_entries(txn_index_path(s.log_path))]
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == [(2, 3, 5)]
    # nothing of the aborted transaction left: past delete.retention.ms its marker goes, and its index entry;
    # the COMMIT marker stays while its transaction's records do
    clean_log(log, now_ms=NOW + 5000, high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    assert [b.base_offset for b in batches() if b.is_control] == [2]
    assert not [e for s in log.segments for e in read_entries(txn_index_path(s.log_path))]
    assert data()[:3] == [(b"a", b"committed"), (b"b", b"committed"), (b"d", b"plain")]
    # the producer state survives a reload: producer 2 goes on at sequence 3, producer 3's transaction is open
    log.close()
    again = Log.open(log.dir, cfg)
    try:
        assert again.producer_state.producers[2].last_seq == 2
        assert again.producer_state.first_undecided_offset == 7
        again.append(_txn_batch(2, 3, 200, (b"g", b"after"), transactional=False))
    finally:
        again.close()


def test_an_aborted_transaction_that_is_its_producers_last_write_stays_as_an_empty_batch(open_log):
    from broker.log import Log
    from broker.records.control import ControlRecordType as Kind

    cfg = LogConfig(segment_bytes=250, cleanup_policy="compact", file_delete_delay_ms=0, delete_retention_ms=0)
    log = open_log(cfg)
    log.append(_txn_batch(5, 0, 100, (b"a", b"aborted"), (b"b", b"aborted")))
    log.append(_marker(5, Kind.ABORT, 101))
    for i in range(4):
        log.append(make_batch(1, ts=NOW + 102 + i, key=b"f", value=b"x" * 60))
    log.roll()
    for _ in range(2):
        clean_log(log, now_ms=NOW + 10**6, high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    kept = [b for b in read_batches(log) if b.producer_id == 5]
    # the emptied batch keeps the sequence and its marker stays, or a reload would see an open transaction
    assert [(b.base_offset, b.records, b.is_control) for b in kept][0] == (0, [], False)
    assert [b.base_offset for b in kept] == [0, 2]
    log.close()
    again = Log.open(log.dir, cfg)
    try:
        assert again.producer_state.producers[5].last_seq == 1
        assert again.producer_state.first_undecided_offset is None
    finally:
        again.close()
