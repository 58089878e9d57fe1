"""``kafkactl log dump|verify|recover`` end to end, as a subprocess on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.log import Log, LogConfig
from broker.records import BatchBuilder, Compression, Header


def kafkactl(*args: str, prefix: list[str] = []) -> subprocess.CompletedProcess:  # noqa: B006 - never mutated
    """``python -m kafkactl ARGS``, run through ``prefix`` (a command that execs it) when given."""
    return subprocess.run([*prefix, sys.executable, "-m", "kafkactl", *args], capture_output=True, text=True,
                          timeout=60)


def make_log(pdir: Path, batches: int = 12, segment_bytes: int = 1500) -> None:
    log = Log.open(pdir, LogConfig(segment_bytes=segment_bytes, index_interval_bytes=200))
    try:
        for i in range(batches):
            codec = list(Compression)[i % len(Compression)]
            b = BatchBuilder(compression=codec)
            for j in range(3):
                b.append(1_700_000_000_000 + i, f"key-{j}".encode(), f"value-{i}-{j}".encode(), [Header("h", b"\xff\x00")])
            log.append(b.build())
    finally:
        log.close()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    make_log(tmp_path / "orders-0")
    make_log(tmp_path / "my-topic-with-dashes-3", batches=4)
    return tmp_path


def segments(pdir: Path) -> list[Path]:
    return sorted(pdir.glob("*.log"))


def test_dump_prints_batches_and_records(log_dir: Path) -> None:
    res = kafkactl("log", "dump", str(log_dir / "orders-0"), "--records")
    assert res.returncode == 0, res.stderr
    assert "baseOffset: 0 lastOffset: 2 count: 3" in res.stdout
    assert "compresscodec: zstd" in res.stdout and "compresscodec: snappy" in res.stdout
    assert "| offset: 35 timestamp: 1700000000011 key: key-2 payload: value-11-2" in res.stdout
    assert res.stdout.count("isvalid: true") == 12


def test_dump_json_is_one_object_per_batch(log_dir: Path) -> None:
    res = kafkactl("--output", "json", "log", "dump", str(log_dir / "orders-0"), "--records")
    assert res.returncode == 0, res.stderr
    items = [json.loads(line) for line in res.stdout.splitlines()]
    assert [i["base_offset"] for i in items] == list(range(0, 36, 3))
    rec = items[4]["records"][1]
    assert rec == {"offset": 13, "timestamp": 1_700_000_000_004, "key": "key-1", "value": "value-4-1",
                   "headers": [{"key": "h", "value": "/wA=", "value_encoding": "base64"}]}
    assert {i["compression"] for i in items} == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_dump_index_files(log_dir: Path) -> None:
    seg = segments(log_dir / "orders-0")[0]
    res = kafkactl("-o", "json", "log", "dump", str(seg.with_suffix(".index")))
    assert res.returncode == 0, res.stderr
    entries = [json.loads(line) for line in res.stdout.splitlines()]
    assert entries, "an index with interval 200 bytes has entries"
    assert all(e["position"] < seg.stat().st_size for e in entries)


def test_verify_clean_log_dir(log_dir: Path) -> None:
    res = kafkactl("log", "verify", str(log_dir))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 partition(s) checked, 0 corrupt" in res.stdout


def test_verify_reports_garbage_and_changes_nothing(log_dir: Path) -> None:
    last = segments(log_dir / "orders-0")[-1]
    with open(last, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63\x00\x00\x01\x00garbage")
    before = last.read_bytes()
    res = kafkactl("log", "verify", str(log_dir))
    assert res.returncode == 1
    assert "CORRUPT" in res.stdout and last.name in res.stdout
    assert last.read_bytes() == before


def test_verify_flipped_byte_is_crc_mismatch(log_dir: Path) -> None:
    first = segments(log_dir / "orders-0")[0]
    data = bytearray(first.read_bytes())
    data[80] ^= 0xFF  # inside the first batch's CRC-covered bytes
    first.write_bytes(bytes(data))
    res = kafkactl("-o", "json", "log", "verify", str(log_dir / "orders-0"))
    assert res.returncode == 1
    report = json.loads(res.stdout)
    cuts = report["partitions"][0]["corruption"]
    assert cuts[0]["segment"] == first.name and cuts[0]["position"] == 0
    assert "CRC" in cuts[0]["reason"]
    assert report["corrupt"] is True


def test_missing_index_is_reported_but_not_corruption(log_dir: Path) -> None:
    seg = segments(log_dir / "orders-0")[0]
    seg.with_suffix(".index").unlink()
    res = kafkactl("log", "verify", str(log_dir / "orders-0"))
    assert res.returncode == 0, res.stdout
    assert "missing" in res.stdout and seg.with_suffix(".index").name in res.stdout


def test_recover_dry_run_then_recover(log_dir: Path) -> None:
    pdir = log_dir / "orders-0"
    last = segments(pdir)[-1]
    good = last.read_bytes()
    torn = good[: len(good) - 7]  # a torn tail: the last batch lost its last 7 bytes
    last.write_bytes(torn)
    dry = kafkactl("log", "recover", "--dry-run", str(pdir))
    assert dry.returncode == 0, dry.stderr
    assert "would cut" in dry.stdout
    assert last.read_bytes() == torn
    res = kafkactl("-o", "json", "log", "recover", str(pdir))
    assert res.returncode == 0, res.stderr
    cut = json.loads(res.stdout)["partitions"][0]["cuts"][0]
    assert cut["segment"] == last.name and cut["bytes_removed"] > 0
    assert kafkactl("log", "verify", str(pdir)).returncode == 0
    log = Log.open(pdir, LogConfig())
    try:
        assert log.log_end_offset == 33  # the torn 12th batch (offsets 33..35) is gone
        b = BatchBuilder()
        b.append(1, b"k", b"v")
        assert log.append(b.build()).first_offset == 33
    finally:
        log.close()


@pytest.mark.parametrize("args, message", [
    (["log", "dump", "/no/such/path"], "no such file or directory"),
    (["log", "verify", "/no/such/dir"], "no such file or directory"),
    (["log", "recover", "/no/such/dir"], "no such file or directory"),
])
def test_bad_paths_one_line_no_traceback(args, message) -> None:
    res = kafkactl(*args)
    assert res.returncode == 2
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_non_log_inputs(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    res = kafkactl("log", "dump", str(text))
    assert res.returncode == 2 and "not a log segment" in res.stderr
    res = kafkactl("log", "verify", str(text))
    assert res.returncode == 2 and "not a directory" in res.stderr
    (tmp_path / "random").mkdir()
    res = kafkactl("log", "recover", str(tmp_path / "random"))
    assert res.returncode == 2 and "neither a partition dir" in res.stderr
    assert not any((tmp_path / "random").iterdir()), "recover must not create files in a non-log dir"


# Root passes every permission check through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, and CI runs as
# root: the unreadable-path cases run kafkactl without those two capabilities (util-linux's setpriv), so
# the permission checks apply to it as to any other user, whoever runs the tests.
WITHOUT_DAC = (["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else [])


def assert_unusable_path(res: subprocess.CompletedProcess, path: Path, *wordings: str) -> None:
    """Exit 2 (bad input, as a missing path) with one line naming ``path``: no traceback, no exception name."""
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert len(lines) == 1 and str(path) in lines[0] and any(w in lines[0] for w in wordings), lines
    assert "Error" not in lines[0], lines


def test_unreadable_paths_are_bad_input(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    make_log(pdir)
    first = pdir / "00000000000000000000.log"
    sizes = {p.name: p.stat().st_size for p in pdir.iterdir()}
    # a segment this user may not read: every command names it (verify's exit 1 would say "corrupt")
    first.chmod(0)
    for args in (["verify"], ["recover", "--dry-run"], ["recover"], ["dump"]):
        res = kafkactl("log", *args, str(pdir), prefix=WITHOUT_DAC)
        assert_unusable_path(res, first, "permission denied")
    assert {p.name: p.stat().st_size for p in pdir.iterdir()} == sizes, "recover must change nothing it cannot read"
    first.chmod(0o644)
    # the partition dir itself unreadable, and a segment inside it named directly
    pdir.chmod(0)
    try:
        for args in (["verify"], ["recover"], ["dump"]):
            res = kafkactl("log", *args, str(pdir), prefix=WITHOUT_DAC)
            assert_unusable_path(res, pdir, "permission denied", "not readable")
        res = kafkactl("log", "dump", str(first), prefix=WITHOUT_DAC)
        assert_unusable_path(res, first, "permission denied")
    finally:
        pdir.chmod(0o755)
    assert kafkactl("log", "verify", str(pdir)).returncode == 0
