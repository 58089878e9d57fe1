"""The producer state in the log: checks in append order, snapshots, rebuilds, truncation, expiry."""

from __future__ import annotations

import time

import pytest

from broker.log import Log, LogConfig
from broker.log.producer_state import (
    BatchMetadata,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
    TransactionCoordinatorFencedError,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
    snapshot_file_name,
)
from broker.records import BatchBuilder
from broker.records.control import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch

INT32_MAX = (1 << 31) - 1


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(pid: int, seq: int, n: int = 1, epoch: int = 0, transactional: bool = False, ts: int | None = None,
          base_offset: int = 0) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional,
                     base_offset=base_offset)
    for i in range(n):
        b.append(now_ms() if ts is None else ts, b"k", b"v%d" % (seq + i))
    return b.build()


def marker(pid: int, epoch: int, kind: ControlRecordType, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker_batch(EndTransactionMarker(kind, coordinator_epoch), pid, epoch, now_ms())


def test_checks_run_in_append_order_within_one_group(open_log):
    log = open_log()
    items = [(batch(1, 0, 2), 0), (batch(1, 2, 3), 0), (batch(1, 0, 2), 0), (batch(1, 9), 0), (batch(1, 5), 0)]
    first, second, dup, gap, third = log.append_group(items)
    assert (first.first_offset, second.first_offset, third.first_offset) == (0, 2, 5)
    assert (dup.first_offset, dup.last_offset, dup.num_records) == (0, 1, 0)  # the first write's offsets
    assert isinstance(gap, OutOfOrderSequenceError) and gap.error_code == 45
    assert log.log_end_offset == 6


def test_epochs_and_transactions(open_log):
    log = open_log()
    log.append(batch(1, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        log.append(batch(1, 1, epoch=2))
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch starts at 0
        log.append(batch(1, 5, epoch=4))
    log.append(batch(1, 0, epoch=4, transactional=True))
    state = log.producer_state
    assert state.first_undecided_offset == 1
    with pytest.raises(InvalidTxnStateError):
        log.append(batch(1, 1, epoch=4))
    log.append(marker(1, 4, ControlRecordType.COMMIT, coordinator_epoch=2))
    assert state.first_undecided_offset is None and state.producers[1].coordinator_epoch == 2
    log.append(batch(1, 1, epoch=4, transactional=True))
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append(marker(1, 4, ControlRecordType.ABORT, coordinator_epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        log.append(marker(1, 3, ControlRecordType.ABORT, coordinator_epoch=2))
    log.append(marker(1, 5, ControlRecordType.ABORT, coordinator_epoch=2))  # a bumped epoch ends it too
    assert state.first_undecided_offset is None and state.producers[1].producer_epoch == 5


def test_follower_appends_are_taken_without_checks(open_log):
    log = open_log()
    log.append(batch(1, 0, base_offset=0), assign_offsets=False)
    log.append(batch(1, 7, base_offset=1), assign_offsets=False)  # a gap: the leader decided, not us
    log.append(batch(1, 0, epoch=0, base_offset=2) + batch(2, 0, base_offset=3), assign_offsets=False)
    assert log.producer_state.producers[1].last_seq == 0 and 2 in log.producer_state.producers


def test_sequence_wraps_around(open_log):
    log = open_log()
    log.append(batch(1, INT32_MAX - 1, 3))  # INT32_MAX-1, INT32_MAX, 0
    assert log.producer_state.producers[1].last_seq == 0
    assert log.append(batch(1, INT32_MAX - 1, 3)).num_records == 0  # duplicate across the wrap
    assert log.append(batch(1, 1)).first_offset == 3


def test_snapshot_format_round_trip():
    e = ProducerStateEntry(42, 3, 7, 1234, current_txn_first_offset=100)
    e.batches.append(BatchMetadata(INT32_MAX - 1, 1, 98, 101, 1234))  # a wrapped batch
    empty = ProducerStateEntry(43, 0, 1, 99)  # a marker only
    data = encode_snapshot([e, empty])
    assert data[:2] == b"\x00\x01" and len(data) == 10 + 2 * 46
    back = decode_snapshot(data)
    assert back[0].batches[-1] == e.batches[-1] and back[0].current_txn_first_offset == 100
    assert (back[1].producer_id, back[1].last_seq, list(back[1].batches)) == (43, -1, [])


def test_roll_writes_snapshots_and_keeps_those_of_the_last_two_segments(open_log, tmp_path):
    log = open_log(LogConfig(segment_bytes=200))
    for seq in range(6):
        log.append(batch(1, seq))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    assert list_snapshots(log.dir) == bases[-2:]
    entries = decode_snapshot((log.dir / snapshot_file_name(bases[-1])).read_bytes())
    assert entries[0].last_seq == bases[-1] - 1  # the state of the log below that offset


def test_reopen_loads_snapshot_and_replays_after_it(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append(batch(1, 0, 2))
    log.close()  # snapshot at 2
    assert list_snapshots(log.dir) == [2]
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append(batch(1, 2, 2))
    log.append(batch(2, 0))
    # no close: the next open replays from the snapshot at 2
    again = Log.open(tmp_path / "t-0", LogConfig())
    assert again.append(batch(1, 2, 2)).first_offset == 2  # recognised
    assert again.producer_state.producers[2].last_seq == 0
    log.close()
    again.close()


@pytest.mark.parametrize("damage", ["flip", "delete", "truncate"])
def test_a_damaged_snapshot_is_deleted_and_the_log_replayed(tmp_path, damage):
    log = Log.open(tmp_path / "t-0", LogConfig())
    for seq in range(3):
        log.append(batch(1, seq))
    log.close()
    path = log.dir / snapshot_file_name(3)
    if damage == "flip":
        data = bytearray(path.read_bytes())
        data[12] ^= 1
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:-3])
    else:
        path.unlink()
    again = Log.open(tmp_path / "t-0", LogConfig())
    assert again.producer_state.producers[1].last_seq == 2
    assert again.append(batch(1, 2)).num_records == 0
    again.close()
    assert decode_snapshot(path.read_bytes())[0].last_seq == 2  # written anew at close


def test_truncation_reloads_the_state_of_what_is_left(open_log):
    log = open_log(LogConfig(segment_bytes=200))
    for seq in range(8):
        log.append(batch(1, seq))
    log.truncate_to(5)
    assert log.producer_state.producers[1].last_seq == 4
    assert all(offset <= 5 for offset in list_snapshots(log.dir))
    assert log.append(batch(1, 5)).first_offset == 5
    log.truncate_fully_and_start_at(20)
    assert log.producer_state.producers == {} and list_snapshots(log.dir) == []


def test_deleted_segments_take_their_snapshots_with_them(open_log):
    log = open_log(LogConfig(segment_bytes=200, file_delete_delay_ms=0))
    for seq in range(8):
        log.append(batch(1, seq))
    log.delete_records(log.segments[-1].base_offset)
    left = list_snapshots(log.dir)
    assert left and all(offset >= log.log_start_offset for offset in left)


def test_idle_producers_expire_but_not_during_a_transaction(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), producer_id_expiration_ms=1000)
    old = now_ms() - 5000
    log.append(batch(1, 0, ts=old))
    log.append(batch(2, 0, ts=old, transactional=True))
    log.append(batch(3, 0))
    assert log.remove_expired_producers() == 1
    assert set(log.producer_state.producers) == {2, 3}
    # a forgotten producer may start again anywhere (Kafka 2.5+: no UNKNOWN_PRODUCER_ID)
    assert log.append(batch(1, 17)).num_records == 1
    log.close()
    # expired entries are not loaded from a snapshot either
    again = Log.open(tmp_path / "t-0", LogConfig(), producer_id_expiration_ms=1000)
    assert 2 in again.producer_state.producers
    again.close()


def test_last_stable_offset_and_transaction_index(open_log):
    from broker.log.txn_index import read_entries, txn_index_path

    log = open_log(LogConfig(segment_bytes=400))
    log.append(batch(1, 0, transactional=True))  # 0: producer 1's transaction starts
    log.append(batch(9, 0))  # 1
    log.append(batch(2, 0, transactional=True))  # 2: producer 2's starts
    assert log.first_unstable_offset(high_watermark=3) == 0
    log.append(marker(1, 0, ControlRecordType.ABORT))  # 3
    # the marker is not below the high watermark yet: still unstable from 0
    assert log.first_unstable_offset(high_watermark=3) == 0
    assert log.first_unstable_offset(high_watermark=4) == 2
    [entry] = read_entries(txn_index_path(log.active_segment.log_path))
    assert (entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset) == (1, 0, 3, 2)
    log.append(marker(2, 0, ControlRecordType.COMMIT))  # 4: commits are not indexed
    assert log.first_unstable_offset(high_watermark=5) is None
    assert [t.producer_id for t in log.collect_aborted_transactions(0, 5)] == [1]
    assert log.collect_aborted_transactions(4, 5) == []


def test_transaction_index_rebuilt_from_the_log(tmp_path):
    from broker.log.txn_index import read_entries, txn_index_path

    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for pid in (1, 2, 3):
        log.append(batch(pid, 0, transactional=True))
    for pid in (1, 2):
        log.append(marker(pid, 0, ControlRecordType.ABORT))
    before = [e for s in log.segments for e in read_entries(txn_index_path(s.log_path))]
    assert [e.producer_id for e in before] == [1, 2]
    log.close()
    for path in list(log.dir.iterdir()):
        if path.suffix in (".txnindex", ".snapshot"):
            path.unlink()
    again = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    after = [e for s in again.segments for e in read_entries(txn_index_path(s.log_path))]
    assert after == before
    assert again.first_unstable_offset(again.log_end_offset) == 2  # producer 3's is still open
    again.truncate_to(4)  # cuts producer 2's marker
    after = [e for s in again.segments for e in read_entries(txn_index_path(s.log_path))]
    assert [e.producer_id for e in after] == [1]
    assert again.first_unstable_offset(again.log_end_offset) == 1
    again.close()


def test_compaction_keeps_the_aborted_transactions_of_the_segments_it_replaces(open_log):
    from broker.log.cleaner import clean_log
    from broker.log.txn_index import read_entries, txn_index_path

    log = open_log(LogConfig(segment_bytes=300, cleanup_policy="compact", file_delete_delay_ms=0))
    log.append(batch(1, 0, transactional=True))
    log.append(marker(1, 0, ControlRecordType.ABORT))
    for seq in range(4):
        log.append(batch(2, seq))
    log.roll()
    before = [e for s in log.segments for e in read_entries(txn_index_path(s.log_path))]
    assert [e.producer_id for e in before] == [1]
    result = clean_log(log, now_ms=now_ms(), high_watermark=log.log_end_offset, first_dirty_offset=0, force=True)
    assert result.records_removed > 0 and result.segments_before > 0
    after = [e for s in log.segments for e in read_entries(txn_index_path(s.log_path))]
    assert after == before
    assert [t.producer_id for t in log.collect_aborted_transactions(0, log.log_end_offset)] == [1]
