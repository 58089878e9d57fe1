"""Crash simulations on real files: torn tails at every byte, garbage, flipped bytes, bad indexes."""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from broker.log import Log, LogConfig
from log_helpers import make_batch, read_all

CFG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def build(path, n=12):
    log = Log.open(path, CFG)
    for i in range(n):
        log.append(make_batch(i % 2 + 1, ts=1000 + i, value=b"value-%d" % i))
    log.close()
    return log


def last_segment_batches(path):
    """[(end position, next offset)] of every batch of the last segment."""
    log = Log.open(path, CFG)
    seg = log.segments[-1]
    out, pos = [], 0
    data = open(seg.log_path, "rb").read()
    while pos < len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        last = struct.unpack_from(">q", data, pos)[0] + struct.unpack_from(">i", data, pos + 23)[0]
        pos += size
        out.append((pos, last + 1))
    log.close()
    return seg.log_path.name, seg.base_offset, out


def test_torn_tail_at_every_byte(tmp_path):
    src = tmp_path / "src" / "t-0"
    build(src)
    name, base, batches = last_segment_batches(src)
    assert len(batches) >= 2 and base > 0
    total = batches[-1][0]
    start = batches[-3][0] if len(batches) >= 3 else 0
    for cut in range(start, total + 1):
        work = tmp_path / "w" / "t-0"
        shutil.rmtree(work.parent, ignore_errors=True)
        shutil.copytree(src, work)
        os.truncate(work / name, cut)
        valid_end, leo = max(((e, o) for e, o in batches if e <= cut), default=(0, base))
        log = Log.open(work, CFG)
        try:
            assert log.log_end_offset == leo, cut
            assert log.segments[-1].size == valid_end
            rep = log.recovery_report
            assert rep.truncated == (cut != valid_end)
            if rep.truncated:
                assert rep.cuts[0].segment == name and rep.cuts[0].position == valid_end
                assert rep.cuts[0].bytes_removed == cut - valid_end
            assert log.append(make_batch(1)).first_offset == leo
            assert [e.offset for e in read_all(log)] == list(range(leo + 1))
        finally:
            log.close()


@pytest.mark.parametrize("garbage", [
    b"\x00" * 37,
    os.urandom(300),
    # looks like an entry header: offset, plausible length, epoch, magic 2, then junk (CRC cannot match)
    struct.pack(">qiib", 99, 80, 0, 2) + b"\xab" * 80,
    # a length prefix pointing past the end of the file
    struct.pack(">qi", 12, 10_000) + b"\x00" * 60,
])
def test_garbage_appended_past_last_batch(tmp_path, garbage):
    path = tmp_path / "t-0"
    build(path)
    name, _base, batches = last_segment_batches(path)
    with open(path / name, "ab") as f:
        f.write(garbage)
    log = Log.open(path, CFG)
    assert log.log_end_offset == batches[-1][1]
    assert log.recovery_report.cuts[0].bytes_removed == len(garbage)
    assert os.path.getsize(path / name) == batches[-1][0]
    assert log.append(make_batch(1)).first_offset == batches[-1][1]
    log.close()


def test_flipped_byte_cuts_at_that_batch_and_drops_later_segments(tmp_path):
    path = tmp_path / "t-0"
    build(path, n=20)
    log = Log.open(path, CFG)
    segs = [(s.log_path.name, s.base_offset) for s in log.segments]
    log.close()
    assert len(segs) >= 3
    name, base = segs[1]
    data = bytearray((path / name).read_bytes())
    size0 = 12 + struct.unpack_from(">i", data, 8)[0]
    data[size0 + 70] ^= 0x01  # inside the second batch's records: CRC mismatch
    (path / name).write_bytes(data)
    log = Log.open(path, CFG, recovery_point=base)
    rep = log.recovery_report
    assert rep.cuts[0].segment == name and rep.cuts[0].position == size0 and "CRC" in rep.cuts[0].reason
    assert {c.segment for c in rep.cuts[1:]} == {n for n, _ in segs[2:]}
    first_next = struct.unpack_from(">q", data, 0)[0] + struct.unpack_from(">i", data, 23)[0] + 1
    assert log.log_end_offset == first_next and len(log.segments) == 2
    assert sorted(p for p in os.listdir(path) if p.endswith(".log")) == [segs[0][0], name]
    log.close()


def test_segments_before_recovery_point_are_not_checked(tmp_path):
    path = tmp_path / "t-0"
    build(path, n=20)
    log = Log.open(path, CFG)
    segs = log.segments
    last_base = segs[-1].base_offset
    leo = log.log_end_offset
    log.close()
    log = Log.open(path, CFG, recovery_point=leo)
    assert log.recovery_report.segments_checked == [segs[-1].log_path.name]
    assert log.log_end_offset == leo and last_base == log.segments[-1].base_offset
    log.close()


@pytest.mark.parametrize("damage", ["missing", "garbage", "zeros", "misaligned"])
def test_bad_index_is_rebuilt_never_refused(tmp_path, damage):
    path = tmp_path / "t-0"
    build(path, n=20)
    log = Log.open(path, CFG)
    expected = [e.offset for e in read_all(log)]
    leo = log.log_end_offset
    first = log.segments[0]
    entries = first.index.entries
    log.close()
    assert entries > 0
    idx, tidx = first.index.path, first.time_index.path
    if damage == "missing":
        idx.unlink()
        tidx.unlink()
    elif damage == "garbage":
        idx.write_bytes(os.urandom(64))
        tidx.write_bytes(os.urandom(60))
    elif damage == "zeros":
        with open(idx, "ab") as f:
            f.write(b"\x00" * 800)
    else:
        with open(idx, "ab") as f:
            f.write(b"\x01\x02\x03")
    log = Log.open(path, CFG, recovery_point=leo)
    assert [e.offset for e in read_all(log)] == expected
    assert log.segments[0].index.entries == entries
    assert log.offset_for_timestamp(1005) is not None
    log.close()
    assert os.path.getsize(idx) == entries * 8


def test_clean_shutdown_skips_crc_but_finds_tail(tmp_path):
    path = tmp_path / "t-0"
    build(path, n=9)
    log = Log.open(path, CFG, had_clean_shutdown=True)
    assert log.recovery_report.segments_checked == []
    assert log.log_end_offset == 9 + 4 and log.append(make_batch(1)).first_offset == 13
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_an_empty_last_segment_with_a_preallocated_index_opens(tmp_path, clean):
    """A segment rolled and never written, left with its index preallocated (zeros; the process ended
    before trimming it): the log opens with that segment empty, and appends go on in it."""
    path = tmp_path / "t-0"
    build(path, n=5)
    log = Log.open(path, CFG)
    leo = log.log_end_offset
    log.close()
    name = f"{leo:020d}"
    (path / f"{name}.log").write_bytes(b"")
    (path / f"{name}.index").write_bytes(b"\x00" * 4096)
    (path / f"{name}.timeindex").write_bytes(b"\x00" * 4092)
    log = Log.open(path, CFG, recovery_point=leo, had_clean_shutdown=clean)
    assert log.log_end_offset == leo and log.segments[-1].base_offset == leo
    assert log.segments[-1].index.entries == 0
    assert log.append(make_batch(1)).first_offset == leo
    log.close()
