"""``Log.append_group`` has exactly the effects of ``Log.append`` once per item.

Log A gets every item with ``append``; log B gets the same items with
``append_group`` over a random chunking. After every chunk both logs must hold
the same segment files, indexes, timestamps, leader epochs and log end offset,
and every item must have the same result. Small segments and indexes make
size rolls, index-full rolls and ``segment.ms`` rolls happen inside groups.

Also here: groups longer than one ``pwritev`` takes, groups larger than a
segment, ``_write_rest`` on a real file, and a real ENOSPC on a tiny tmpfs.
"""

from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.log import AppendInfo, KafkaStorageError, Log, LogConfig
from broker.log.segment import _IOV_MAX, _write_rest

from log_helpers import dir_files, log_state, make_batch, read_all, with_bad_crc, with_head
from tests.mounts import tmpfs

SEGMENT_MS = 60_000
CREATE_TIME = LogConfig(segment_bytes=4000, segment_index_bytes=48, index_interval_bytes=150,
                        segment_ms=SEGMENT_MS, max_message_bytes=1500, file_delete_delay_ms=0)
APPEND_TIME = LogConfig(segment_bytes=4000, segment_index_bytes=48, index_interval_bytes=150,
                        segment_ms=SEGMENT_MS, max_message_bytes=1500, file_delete_delay_ms=0,
                        message_timestamp_type="LogAppendTime")


def _clock() -> float:
    return 1_700_000_000.0  # fixed: segment.ms rolls then depend on batch timestamps only


@dataclass
class Item:
    """One append: ``data`` delivered as ``kind`` (bytes, bytearray or memoryview), or a config switch."""

    data: bytes
    epoch: int
    kind: str = "bytes"
    config: LogConfig | None = None  # set: not an append, both logs switch to this config here

    def buffer(self):
        """A fresh buffer each time: a writable one is patched in place by the append."""
        if self.kind == "bytearray":
            return bytearray(self.data)
        if self.kind == "memoryview":
            return memoryview(self.data)
        return bytes(self.data)


def _random_items(rnd: random.Random, count: int, *, switch_configs: bool) -> list[Item]:
    """Valid single batches mostly, plus multi-batch buffers, errors and far-apart timestamps."""
    items: list[Item] = []
    ts, epoch = 10_000, 0
    for _ in range(count):
        r = rnd.random()
        if r < 0.05:
            ts += 3 * SEGMENT_MS  # far apart: the next batch rolls by segment.ms
        elif r < 0.08:
            ts -= rnd.randrange(1, 5000)  # older than what is there: no new time index entry
        else:
            ts += rnd.randrange(0, 50)
        r = rnd.random()
        if r < 0.06:
            epoch += rnd.choice((1, 2))
        elif r < 0.09:
            epoch = max(0, epoch - 1)  # a stale epoch: appended, but no cache entry
        kind = rnd.choice(("bytes", "bytearray", "bytearray", "memoryview"))
        batch_ts = -1 if rnd.random() < 0.05 else ts
        one = make_batch(rnd.randrange(1, 6), ts=batch_ts, size=rnd.randrange(0, 260))
        r = rnd.random()
        if switch_configs and r < 0.03:
            items.append(Item(b"", 0, config=rnd.choice((CREATE_TIME, APPEND_TIME))))
            continue
        if r < 0.12:  # several batches in one buffer: the general path
            data = b"".join(make_batch(rnd.randrange(1, 4), ts=ts + k, size=rnd.randrange(0, 200))
                            for k in range(rnd.randrange(2, 4)))
        elif r < 0.17:
            data = with_bad_crc(one)
        elif r < 0.21:
            data = make_batch(1, size=1600)  # over max.message.bytes
        elif r < 0.23:
            data = one[:16] + b"\x01" + one[17:]  # magic 1
        elif r < 0.25:
            data = one[:-5]  # torn
        elif r < 0.26:
            data = b""
        else:
            data = one
        items.append(Item(data, epoch, kind))
    return items


def _chunks(rnd: random.Random, items: list[Item]) -> list[list[Item]]:
    """Random consecutive chunks; a config switch always stands alone."""
    out: list[list[Item]] = []
    i = 0
    while i < len(items):
        if items[i].config is not None:
            out.append([items[i]])
            i += 1
            continue
        n = rnd.choice((1, 2, 3, 5, 8, 13, 40, len(items)))
        chunk = []
        while i < len(items) and len(chunk) < n and items[i].config is None:
            chunk.append(items[i])
            i += 1
        out.append(chunk)
    return out


def _same_result(a, b) -> bool:
    if isinstance(a, AppendInfo):
        return isinstance(b, AppendInfo) and a == b
    return type(a) is type(b) and str(a) == str(b) and getattr(a, "error_code", None) == b.error_code


def _run_equivalence(tmp_path: Path, items: list[Item], chunks: list[list[Item]], config: LogConfig, *,
                     assign_offsets: bool = True, append_time_ms: int | None = None) -> list:
    a = Log.open(tmp_path / "single-0", config, clock=_clock)
    b = Log.open(tmp_path / "group-0", config, clock=_clock)
    results = []
    try:
        for chunk in chunks:
            if chunk[0].config is not None:
                a.update_config(chunk[0].config)
                b.update_config(chunk[0].config)
                continue
            expected = []
            for item in chunk:
                try:
                    expected.append(a.append(item.buffer(), leader_epoch=item.epoch, assign_offsets=assign_offsets,
                                             append_time_ms=append_time_ms))
                except Exception as exc:  # noqa: BLE001 - compared with the group's result below
                    expected.append(exc)
            got = b.append_group([(item.buffer(), item.epoch) for item in chunk], assign_offsets=assign_offsets,
                                 append_time_ms=append_time_ms)
            assert len(got) == len(chunk)
            for x, y in zip(expected, got):
                assert _same_result(x, y), (x, y)
            assert log_state(a) == log_state(b)
            results.extend(got)
        assert [(r.offset, r.timestamp, r.key, r.value) for r in read_all(a)] == \
            [(r.offset, r.timestamp, r.key, r.value) for r in read_all(b)]
    finally:
        a.close()
        b.close()
    assert dir_files(a.dir) == dir_files(b.dir)  # trimmed indexes and epoch checkpoint too
    again = Log.open(b.dir, config, clock=_clock)  # recovery (full CRC scan) agrees with what was written
    try:
        assert again.log_end_offset == b.log_end_offset
        assert again.recovery_report.cuts == []
    finally:
        again.close()
    return results


def _check_offsets(results: list) -> None:
    """Independent of log A: successful appends take consecutive offsets, in item order."""
    nxt = 0
    for r in results:
        if isinstance(r, AppendInfo):
            assert r.first_offset == nxt
            nxt = r.last_offset + 1


@pytest.mark.parametrize("seed", range(8))
def test_group_equals_one_append_per_item(tmp_path, seed):
    rnd = random.Random(seed)
    items = _random_items(rnd, 160, switch_configs=seed % 2 == 1)
    results = _run_equivalence(tmp_path, items, _chunks(rnd, items), CREATE_TIME)
    _check_offsets(results)
    kinds = {type(r).__name__ for r in results}
    assert {"AppendInfo", "CorruptRecordError", "RecordTooLargeError"} <= kinds


def test_group_equals_one_append_per_item_log_append_time(tmp_path):
    rnd = random.Random(99)
    items = _random_items(rnd, 120, switch_configs=False)
    results = _run_equivalence(tmp_path, items, _chunks(rnd, items), APPEND_TIME, append_time_ms=1_234_567)
    _check_offsets(results)
    assert all(r.log_append_time == 1_234_567 for r in results if isinstance(r, AppendInfo))


def test_rolls_inside_one_group(tmp_path):
    """One group over all items: index-full, segment.bytes and segment.ms rolls happen mid-group."""
    items = []
    ts = 10_000
    for i in range(120):
        ts += 3 * SEGMENT_MS if i % 37 == 36 else 1
        items.append(Item(make_batch(1 + i % 3, ts=ts, size=40 + (i * 53) % 300), i // 30,
                          ("bytes", "bytearray")[i % 2]))
    _run_equivalence(tmp_path, items, [items], CREATE_TIME)
    # what made the rolls: the state is the same, so look at the group's log only
    log = Log.open(tmp_path / "group-0", CREATE_TIME, clock=_clock)
    try:
        segs = log.segments
        assert len(segs) >= 10
        assert any(s.index.entries == s.index.max_entries for s in segs[:-1])  # an index filled up
        assert log.leader_epoch_cache.entries == [(e, sum(1 + i % 3 for i in range(30 * e))) for e in range(4)]
    finally:
        log.close()


def test_follower_group_keeps_offsets(tmp_path):
    """assign_offsets=False: offsets from the batches, gaps, a stale offset, a jump past int32 from the base."""
    rnd = random.Random(11)
    items = []
    offset, epoch = 0, 0
    for i in range(120):
        n = rnd.randrange(1, 4)
        batch = make_batch(n, ts=10_000 + i, size=rnd.randrange(0, 200))
        if i == 60:
            offset += (1 << 31) + 5  # must roll: relative offsets are int32
        elif rnd.random() < 0.1:
            offset += rnd.randrange(1, 10)  # a gap (compacted leader)
        at = offset - 3 if rnd.random() < 0.05 and offset >= 3 else offset  # below the end: rejected
        if rnd.random() < 0.08:
            epoch += 1
        items.append(Item(with_head(batch, at, epoch), 0, rnd.choice(("bytes", "bytearray"))))
        if at == offset:
            offset += n
    results = _run_equivalence(tmp_path, items, _chunks(rnd, items), CREATE_TIME, assign_offsets=False)
    assert any(not isinstance(r, AppendInfo) for r in results)
    firsts = [r.first_offset for r in results if isinstance(r, AppendInfo)]
    assert firsts == sorted(firsts) and firsts[-1] > 1 << 31


def test_read_only_buffers_are_not_modified(open_log):
    log = open_log(LogConfig())
    data = [make_batch(2, ts=10_000 + i) for i in range(10)]
    before = [bytes(d) for d in data]
    views = [memoryview(d) for d in data[5:]]
    results = log.append_group([(d, 3) for d in data[:5]] + [(v, 3) for v in views])
    assert data == before
    assert [r.first_offset for r in results] == list(range(0, 20, 2))
    on_disk = log.read(0, 1 << 20).read_bytes()
    assert on_disk == b"".join(with_head(d, 2 * i, 3) for i, d in enumerate(before))


def test_more_batches_than_one_pwritev_takes(tmp_path):
    """3000 single batches (read-only ones are two iovecs each) in one group and one segment."""
    cfg = LogConfig(index_interval_bytes=1000)
    items = [Item(make_batch(1, ts=10_000 + i, value=b"%d" % i), 0, ("bytes", "bytearray")[i % 2])
             for i in range(3 * _IOV_MAX)]
    results = _run_equivalence(tmp_path, items, [items], cfg)
    assert [r.first_offset for r in results] == list(range(len(items)))
    log = Log.open(tmp_path / "group-0", cfg, clock=_clock)
    try:
        assert len(log.segments) == 1
        assert [int(r.value) for r in read_all(log)] == list(range(len(items)))
    finally:
        log.close()


def test_group_larger_than_a_segment(tmp_path):
    cfg = LogConfig(segment_bytes=20_000, index_interval_bytes=500)
    items = [Item(make_batch(2, ts=10_000 + i, size=50 + i % 100), i // 400, ("bytes", "bytearray")[i % 2])
             for i in range(1500)]
    results = _run_equivalence(tmp_path, items, [items[:700], items[700:]], cfg)
    _check_offsets(results)
    log = Log.open(tmp_path / "group-0", cfg, clock=_clock)
    try:
        assert len(log.segments) > 5
        assert all(s.size <= 20_000 for s in log.segments)
        assert log.leader_epoch_cache.entries == [(0, 0), (1, 800), (2, 1600), (3, 2400)]
    finally:
        log.close()


# -- _write_rest on a real file ------------------------------------------------------------------------------


def _buffers(rnd: random.Random, count: int) -> list:
    out = []
    for i in range(count):
        raw = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40)))
        out.append((bytes, bytearray, memoryview)[i % 3](raw))
    return out


@pytest.mark.parametrize("where", ["none", "inside", "boundary", "all", "past_first_chunk"])
def test_write_rest(tmp_path, where):
    rnd = random.Random(where)
    buffers = _buffers(rnd, 2 * _IOV_MAX + 300)
    data = b"".join(bytes(b) for b in buffers)
    ends, at = [], 0
    for b in buffers:
        at += len(b)
        ends.append(at)
    if where == "none":
        written = 0
    elif where == "inside":
        k = next(i for i in range(10, len(buffers)) if len(buffers[i]) > 2)
        written = ends[k - 1] + 1  # one byte into buffer k
    elif where == "boundary":
        written = ends[40]
    elif where == "past_first_chunk":
        k = next(i for i in range(_IOV_MAX + 5, len(buffers)) if len(buffers[i]) > 2)
        written = ends[k - 1] + 2
    else:
        written = len(data)
    position = 100
    path = tmp_path / "f"
    # what pwritev "already wrote" is a marker, so a rewrite of it shows
    path.write_bytes(b"P" * position + b"W" * written)
    copy = list(buffers)
    fd = os.open(path, os.O_RDWR)
    try:
        _write_rest(fd, copy, position, written)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"P" * position + b"W" * written + data[written:]


# -- a real ENOSPC ------------------------------------------------------------------------------------------


def _disk_bytes(log: Log) -> bytes:
    """Every batch from the log start to the log end, as the log serves them."""
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 24).read_bytes()
        out += chunk
        pos = 0
        while pos < len(chunk):  # the next read starts after the chunk's last batch
            base_offset, length = struct.unpack_from(">qi", chunk, pos)
            offset = base_offset + struct.unpack_from(">i", chunk, pos + 23)[0] + 1
            pos += 12 + length
    return out


def _fill_until_enospc(log: Log, rnd: random.Random, acked: list, expected: list) -> list:
    """Append groups of same-size batches until one fails; returns the failing group's results."""
    template = [make_batch(1, ts=10_000 + i, size=900, value=bytes([65 + i])) for i in range(26)]
    for g in range(1000):
        group = [template[(g + k) % 26] for k in range(rnd.randrange(4, 12))]
        bufs = [bytearray(d) if k % 2 else d for k, d in enumerate(group)]
        results = log.append_group([(b, 0) for b in bufs])
        for d, r in zip(group, results):
            if isinstance(r, AppendInfo):
                acked.append(r)
                expected.append(with_head(d, r.first_offset, 0))
        if any(isinstance(r, KafkaStorageError) for r in results):
            return results
    raise AssertionError("the tmpfs never filled up")


def _assert_storage_failure_pattern(results: list) -> None:
    first_bad = next(i for i, r in enumerate(results) if not isinstance(r, AppendInfo))
    assert all(isinstance(r, AppendInfo) for r in results[:first_bad])
    for r in results[first_bad:]:
        assert isinstance(r, KafkaStorageError) and r.error_code == 56, r


def _enospc_scenario(mnt: Path, cfg: LogConfig, *, continue_after: bool) -> tuple[list, list]:
    """Fill the tmpfs through a log until a group fails; optionally go on, free space and append once more.

    Checks the failing groups' results and the live log; returns the acknowledged
    appends and their bytes as they must be on disk. The log is closed on return.
    """
    (mnt / "ballast").write_bytes(b"\0" * 64 * 1024)
    log = Log.open(mnt / "topic-0", cfg)
    rnd = random.Random(1)
    acked: list = []
    expected: list = []
    try:
        _assert_storage_failure_pattern(_fill_until_enospc(log, rnd, acked, expected))
        assert log.log_end_offset == acked[-1].last_offset + 1
        assert log.active_segment.size == sum(len(e) for e in expected)
        assert _disk_bytes(log) == b"".join(expected)
        if continue_after:
            # the next groups first fill the pages the torn write took, then fail again
            _assert_storage_failure_pattern(_fill_until_enospc(log, rnd, acked, expected))
            leo = log.log_end_offset
            assert leo == acked[-1].last_offset + 1
            assert _disk_bytes(log) == b"".join(expected)
            (mnt / "ballast").unlink()
            one = make_batch(1, ts=20_000, size=900, value=b"z")
            info = log.append(one)
            assert info.first_offset == leo  # appends continue right at the log end offset
            acked.append(info)
            expected.append(with_head(one, leo, 0))
            assert _disk_bytes(log) == b"".join(expected)
    finally:
        if (mnt / "ballast").exists():
            (mnt / "ballast").unlink()  # room for close's index writes
        log.close()
    return acked, expected


ENOSPC_CONFIG = LogConfig(segment_bytes=1 << 20, segment_index_bytes=4096, index_interval_bytes=4096)


@pytest.mark.parametrize("continue_after", [False, True], ids=["fail", "fail-twice-free-append"])
def test_enospc_mid_group(tmp_path, continue_after):
    with tmpfs(tmp_path / "mnt", "size=256k") as mnt:
        _enospc_scenario(mnt, ENOSPC_CONFIG, continue_after=continue_after)


@pytest.mark.parametrize("continue_after", [False, True], ids=["fail", "fail-twice-free-append"])
def test_enospc_then_reopen_finds_only_acknowledged(tmp_path, continue_after):
    with tmpfs(tmp_path / "mnt", "size=256k") as mnt:
        acked, expected = _enospc_scenario(mnt, ENOSPC_CONFIG, continue_after=continue_after)
        reopened = Log.open(mnt / "topic-0", ENOSPC_CONFIG)
        try:
            assert reopened.log_end_offset == acked[-1].last_offset + 1, reopened.recovery_report.summary()
            assert _disk_bytes(reopened) == b"".join(expected)
        finally:
            reopened.close()


def test_enospc_on_multi_batch_item_fails_the_rest_of_the_group(tmp_path):
    with tmpfs(tmp_path / "mnt", "size=256k") as mnt:
        (mnt / "ballast").write_bytes(b"\0" * 16 * 1024)
        log = Log.open(mnt / "topic-0", ENOSPC_CONFIG)
        try:
            _fill_until_enospc(log, random.Random(3), [], [])
            leo = log.log_end_offset
            big = b"".join(make_batch(1, ts=30_000 + k, size=900) for k in range(40))  # more than is left
            results = log.append_group([(big, 0), (make_batch(1, ts=40_000), 0)])
            assert isinstance(results[0], KafkaStorageError) and results[0].error_code == 56
            assert log.log_end_offset == leo
            _assert_storage_failure_pattern(results)
        finally:
            (mnt / "ballast").unlink()  # room for close's index writes
            log.close()


def test_close_on_a_full_disk_closes_every_segment(tmp_path):
    """Trimming an index can fail with ENOSPC at close: the log still closes every file, and reopens whole."""
    with tmpfs(tmp_path / "mnt", "size=256k") as mnt:
        config = LogConfig(segment_bytes=16 * 1024, segment_index_bytes=4096, index_interval_bytes=1024)
        (mnt / "ballast").write_bytes(b"\0" * 32 * 1024)
        log = Log.open(mnt / "topic-0", config)
        acked, expected = [], []
        _fill_until_enospc(log, random.Random(5), acked, expected)
        segments = log.segments
        assert len(segments) > 1
        log.close()  # no exception, whatever the indexes' trims did
        assert log.closed
        assert all(seg.file is None for seg in segments)
        (mnt / "ballast").unlink()  # recovery rebuilds indexes: it needs room to write them
        reopened = Log.open(mnt / "topic-0", config)
        try:
            assert reopened.log_end_offset == acked[-1].last_offset + 1
            assert _disk_bytes(reopened) == b"".join(expected)
        finally:
            reopened.close()
