"""Append, read, indexes, rolling, timestamps, OffsetOutOfRange: against real segment files."""

from __future__ import annotations

import os
import random
import struct

import pytest

from broker.log import LogConfig, OffsetOutOfRange, RecordTooLargeError
from broker.log.errors import CorruptRecordError, UnexpectedAppendOffsetError
from broker.records.batch import iter_batches
from log_helpers import make_batch, read_all


def test_append_assigns_offsets_and_reads_back(open_log):
    log = open_log()
    info = log.append(make_batch(3, ts=100))
    assert (info.first_offset, info.last_offset, info.num_records, info.num_batches) == (0, 2, 3, 1)
    assert info.max_timestamp == 102 and info.log_append_time == -1
    info = log.append(make_batch(2, ts=200) + make_batch(4, ts=300), leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.num_batches) == (3, 8, 2)
    assert log.log_end_offset == 9
    assert [e.offset for e in read_all(log)] == list(range(9))
    batches = list(iter_batches(log.read(3, 1 << 20).read_bytes()))
    assert [b.partition_leader_epoch for b in batches] == [5, 5]
    assert log.leader_epoch_cache.entries == [(0, 0), (5, 3)]


def test_bytearray_input_patched_in_place_bytes_input_copied(open_log):
    log = open_log()
    log.append(make_batch(1))
    buf = bytearray(make_batch(1))
    log.append(buf)
    assert struct.unpack_from(">q", buf)[0] == 1
    raw = make_batch(1)
    log.append(raw)
    assert struct.unpack_from(">q", raw)[0] == 0


def test_log_append_time(open_log):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(make_batch(2, ts=5), append_time_ms=777)
    assert info.log_append_time == 777 and info.max_timestamp == 777
    (b,) = iter_batches(log.read(0, 1000).read_bytes())  # CRC recomputed: decode validates it
    assert b.max_timestamp == 777 and b.timestamp_type == 1


def test_rejects_corrupt_and_too_large(open_log):
    log = open_log(LogConfig(max_message_bytes=500))
    bad = bytearray(make_batch(1))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(bad)
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(1)[:-3])
    with pytest.raises(RecordTooLargeError) as exc:
        log.append(make_batch(1, value=b"x" * 600))
    assert exc.value.error_code == 10
    assert log.log_end_offset == 0


def test_follower_append_keeps_offsets(open_log):
    log = open_log()
    b = bytearray(make_batch(2))
    struct.pack_into(">q", b, 0, 10)
    log.append(b, assign_offsets=False)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append(b, assign_offsets=False)
    assert log.log_end_offset == 12
    assert read_all(log, 10)[0].offset == 10


def test_offset_out_of_range_carries_range(open_log):
    log = open_log()
    log.append(make_batch(5))
    with pytest.raises(OffsetOutOfRange) as exc:
        log.read(6, 100)
    assert (exc.value.log_start_offset, exc.value.log_end_offset, exc.value.error_code) == (0, 5, 1)
    empty = log.read(5, 100)
    assert empty.length == 0 and os.fstat(empty.file.fileno())
    log.delete_records(3)
    with pytest.raises(OffsetOutOfRange) as exc:
        log.read(2, 100)
    assert exc.value.log_start_offset == 3


def test_read_first_batch_whole_and_batch_boundaries(open_log):
    log = open_log()
    for i in range(5):
        log.append(make_batch(1, value=b"x" * 1000))
    size = len(make_batch(1, value=b"x" * 1000))
    s = log.read(0, 10)
    assert s.length == size  # larger than max_bytes, returned whole
    assert log.read(0, 10, min_one_batch=False).length == 0
    s = log.read(1, size * 2 + 5)
    assert (s.position, s.length, s.first_offset) == (size, 2 * size, 1)
    s = log.read(0, 1 << 20, max_offset=3)
    assert s.length == 3 * size
    assert log.read(3, 1 << 20, max_offset=3).length == 0


def test_reads_across_segment_boundaries(open_log):
    log = open_log(LogConfig(segment_bytes=1024, index_interval_bytes=100))
    for i in range(50):
        log.append(make_batch(i % 3 + 1, ts=i * 10, value=b"v%d" % i))
    assert len(log.segments) >= 4
    assert [e.offset for e in read_all(log)] == list(range(log.log_end_offset))
    for seg in log.segments[1:]:
        s = log.read(seg.base_offset, 1 << 20)
        assert s.segment_base_offset == seg.base_offset and s.first_offset == seg.base_offset
        assert s.position == 0
        assert s.length == seg.size  # a slice never spans two segments
    names = sorted(os.listdir(log.dir))
    assert "00000000000000000000.log" in names and "leader-epoch-checkpoint" in names
    for seg in log.segments[:-1]:
        assert os.path.getsize(seg.index.path) % 8 == 0 and os.path.getsize(seg.time_index.path) % 12 == 0
    active = log.segments[-1]
    assert os.path.getsize(active.index.path) == LogConfig().segment_index_bytes  # preallocated


def test_index_lookups_match_sorted_list(open_log):
    rnd = random.Random(7)
    log = open_log(LogConfig(segment_bytes=8000, index_interval_bytes=200))
    starts = []  # (base_offset, last_offset) of every batch
    for i in range(300):
        n = rnd.randint(1, 4)
        info = log.append(make_batch(n, ts=i, value=b"x" * rnd.randint(1, 150)))
        starts.append((info.first_offset, info.last_offset))
    for target in [0, log.log_end_offset - 1] + [rnd.randrange(log.log_end_offset) for _ in range(300)] + \
            [s.base_offset for s in log.segments] + [s.base_offset - 1 for s in log.segments[1:]]:
        expected = next(b for b, last in starts if last >= target)
        s = log.read(target, 1)
        assert s.first_offset == expected
        (batch,) = iter_batches(s.read_bytes())
        assert batch.base_offset <= target <= batch.last_offset


def test_roll_by_size_time_and_index_full(open_log):
    log = open_log(LogConfig(segment_bytes=500))
    for _ in range(6):
        log.append(make_batch(1, value=b"x" * 150))
    assert len(log.segments) == 3 and all(s.size <= 500 for s in log.segments)

    log2 = open_log(LogConfig(segment_ms=1000), name="time-0")
    log2.append(make_batch(1, ts=10_000))
    log2.append(make_batch(1, ts=10_500))
    assert len(log2.segments) == 1
    log2.append(make_batch(1, ts=11_001))
    assert [s.base_offset for s in log2.segments] == [0, 2]

    log3 = open_log(LogConfig(segment_index_bytes=16, index_interval_bytes=0), name="idx-0")
    for i in range(6):
        log3.append(make_batch(1, ts=i))
    assert len(log3.segments) >= 2 and all(s.index.entries <= 2 for s in log3.segments)
    assert [e.offset for e in read_all(log3)] == list(range(6))


def test_offset_for_timestamp(open_log):
    log = open_log(LogConfig(segment_bytes=700, index_interval_bytes=50))
    records = []
    for i in range(40):
        info = log.append(make_batch(3, ts=1000 + i * 10, compression=(i % 2) * 4))
        records += [(info.first_offset + j, 1000 + i * 10 + j) for j in range(3)]
    assert len(log.segments) > 3
    for target in [0, 999, 1000, 1001, 1003, 1155, 1392, 1400]:
        exp = next(((o, t) for o, t in records if t >= target), None)
        assert log.offset_for_timestamp(target) == exp


def test_truncate_to_and_fully(open_log):
    log = open_log(LogConfig(segment_bytes=400))
    for i in range(10):
        log.append(make_batch(2, value=b"y" * 100), leader_epoch=i // 4)
    assert log.truncate_to(8)
    assert log.log_end_offset == 8
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 8)][:1]
    assert log.append(make_batch(1)).first_offset == 8
    assert [e.offset for e in read_all(log)] == list(range(9))
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (100, 100, 1)
    assert log.append(make_batch(1)).first_offset == 100


def test_end_offset_for_epoch_answers_as_kafkas_epoch_cache(open_log):
    log = open_log()
    assert log.end_offset_for_epoch(0) == (-1, -1)  # no epochs yet
    log.append(make_batch(2), leader_epoch=2)  # epoch 2: offsets 0-1
    log.assign_epoch_start_offset(4, 2)  # a new leader in epoch 4 starts at the log end
    log.append(make_batch(3), leader_epoch=4)  # epoch 4: offsets 2-4
    log.assign_epoch_start_offset(3, 5)  # older than the latest: ignored
    assert log.leader_epoch_cache.entries == [(2, 0), (4, 2)]
    assert log.latest_epoch == 4
    assert log.end_offset_for_epoch(4) == (4, 5)  # the latest: the log end
    assert log.end_offset_for_epoch(3) == (2, 2)  # unknown epoch: the epoch below it, ending where 4 starts
    assert log.end_offset_for_epoch(2) == (2, 2)
    assert log.end_offset_for_epoch(1) == (1, 0)  # older than every epoch: it ends where the first starts
    assert log.end_offset_for_epoch(5) == (-1, -1)  # newer than any
    assert log.end_offset_for_epoch(-1) == (-1, -1)
