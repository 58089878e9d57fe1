"""The single-batch append path and the general path leave the same log behind.

``Log.append`` takes a lean path for a buffer holding exactly one valid batch and
the general path for everything else (several batches, LogAppendTime, errors).
These tests drive both with the same batches and compare what ends up on disk,
in the indexes, in the leader-epoch cache and in the returned ``AppendInfo``.
"""

from __future__ import annotations

import random
import struct

import pytest

from broker.log import AppendInfo, CorruptRecordError, LogConfig, RecordTooLargeError
from broker.log.index import OffsetIndex, TimeIndex

from log_helpers import make_batch, read_all


def _state(log):
    segs = log.segments
    return {
        "bytes": [open(s.log_path, "rb").read() for s in segs],
        "bases": [s.base_offset for s in segs],
        "index": [(list(s.index.relative_offsets), list(s.index.positions)) for s in segs],
        "time": [(list(s.time_index.timestamps), list(s.time_index.relative_offsets)) for s in segs],
        "max_ts": [(s.max_timestamp, s.offset_of_max_timestamp, s.rolling_based_timestamp) for s in segs],
        "leo": log.log_end_offset,
        "epochs": list(log.leader_epoch_cache.entries),
        "unflushed": log.unflushed_messages,
    }


def test_fast_and_general_paths_agree(open_log):
    # small segments and indexes so that size rolls and index-full rolls both happen
    cfg = LogConfig(segment_bytes=3000, segment_index_bytes=48, index_interval_bytes=100)
    rnd = random.Random(7)
    batches = [make_batch(rnd.randrange(1, 5), ts=rnd.choice([-1, 1000 + i, 5000 + i]), size=rnd.randrange(0, 300))
               for i in range(80)]
    fast, general = open_log(cfg, name="fast-0"), open_log(cfg, name="general-0")
    for i, b in enumerate(batches):
        epoch = i // 20
        a = fast.append(bytearray(b), leader_epoch=epoch)
        # the general path: the same batch, preceded by nothing, forced through _append_batches
        g = general._append_batches(memoryview(bytearray(b)), epoch, True, None)
        assert isinstance(a, AppendInfo) and a == g
    assert _state(fast) == _state(general)
    assert len(fast.segments) > 3
    assert [r.value for r in read_all(fast)] == [r.value for r in read_all(general)]


def test_read_only_input_is_not_modified_and_lands_patched(open_log):
    log = open_log()
    log.append(make_batch(2))
    data = make_batch(3, ts=2000)
    before = bytes(data)
    info = log.append(data, leader_epoch=4)  # bytes: written with a patched head, never copied or modified
    assert data == before
    assert (info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp) == (2, 4, 2002, 4)
    on_disk = log.read(2, 1 << 20).read_bytes()
    assert struct.unpack_from(">qii", on_disk) == (2, len(data) - 12, 4)
    assert on_disk[16:] == data[16:]
    assert log.leader_epoch_cache.entries == [(0, 0), (4, 2)]


def test_fast_path_errors_match_general_path(open_log):
    log = open_log(LogConfig(max_message_bytes=500))
    good = bytearray(make_batch(1))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(bad_crc)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(1, size=600))
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        log.append(bad_magic)
    with pytest.raises(CorruptRecordError):
        log.append(good[:-3])
    assert log.log_end_offset == 0
    assert log.append(good).first_offset == 0


def test_follower_single_batch_keeps_offsets_and_epoch(open_log):
    log = open_log()
    leader = open_log(name="leader-0")
    for epoch in (0, 0, 3, 3, 5):
        leader.append(make_batch(2), leader_epoch=epoch)
    data = leader.read(0, 1 << 20).read_bytes()
    pos = 0
    while pos < len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        log.append(data[pos:pos + size], assign_offsets=False)
        pos += size
    assert log.leader_epoch_cache.entries == leader.leader_epoch_cache.entries == [(0, 0), (3, 4), (5, 8)]
    assert log.read(0, 1 << 20).read_bytes() == data


@pytest.mark.parametrize("cls,columns", [(OffsetIndex, ("relative_offsets", "positions")),
                                         (TimeIndex, ("timestamps", "relative_offsets"))])
def test_index_encoding_is_kafkas_layout(tmp_path, cls, columns):
    rnd = random.Random(3)
    idx = cls(tmp_path / "x", 100, 4096)
    fmt = ">ii" if cls is OffsetIndex else ">qi"
    firsts = sorted(rnd.sample(range(1 << 40), 50)) if cls is TimeIndex else [i * 3 for i in range(50)]
    entries = [(a, i * 7) for i, a in enumerate(firsts)]
    for a, b in entries:
        getattr(idx, columns[0]).append(a)
        getattr(idx, columns[1]).append(b)
    assert idx.to_bytes() == b"".join(struct.pack(fmt, a, b) for a, b in entries)
    idx.write_all()
    again = cls(tmp_path / "x", 100, 4096)
    assert again.load(1 << 31) if cls is TimeIndex else again.load(1 << 20)
    assert list(getattr(again, columns[0])) == [a for a, _ in entries]
    assert list(getattr(again, columns[1])) == [b for _, b in entries]
