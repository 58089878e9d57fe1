"""Offline reading of log files for ``kafkactl log``: no broker, nothing changed.

Reads ``.log`` segments entry by entry (RecordBatch v2 and legacy v0/v1
messages alike, told apart by the magic byte at position 16) and the
``.index`` / ``.timeindex`` files, and turns them into plain dicts that the
CLI prints as text or JSON. Corrupt entries end the walk of a file with a
``problem`` dict that says where and why.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from broker.records import (
    LOG_OVERHEAD,
    V2_HEADER_SIZE,
    BatchView,
    CorruptRecordError,
    decode_batch,
    decode_message,
    iter_legacy_entries,
)
from broker.records.legacy import MIN_MESSAGE_SIZE
from broker.records.view import MAGIC_OFFSET
from kafkactl.encoding import headers_as_json, put_bytes
from kafkactl.errors import CliError

SEGMENT_RE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

RecordDecoder = Callable[[bytes | None, bytes | None], dict]


@dataclass
class DumpOptions:
    records: bool = False
    decoder: RecordDecoder | None = None  # e.g. the __consumer_offsets key/value decoder


def _map(path: Path) -> memoryview | bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise CliError(f"no such file or directory: {path}") from None
    except IsADirectoryError:
        raise CliError(f"is a directory: {path}") from None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    finally:
        os.close(fd)


def segment_files(path: Path, suffix: str = "log") -> list[Path]:
    """The segment files of a partition dir in offset order, or ``[path]`` for a file."""
    if not path.exists():
        raise CliError(f"no such file or directory: {path}")
    if path.is_file():
        if not SEGMENT_RE.match(path.name):
            raise CliError(f"not a log segment or index file (expected NNNNNNNNNNNNNNNNNNNN.log/.index/.timeindex): {path}")
        return [path]
    # a dir this user may not read raises PermissionError: kafkactl.main reports every one alike
    return sorted(p for p in path.iterdir() if (m := SEGMENT_RE.match(p.name)) and m.group(2) == suffix)


_PARTITION_FILE_RE = re.compile(
    r"^(\d{20}\.(log|index|timeindex|snapshot|txnindex)(\.(deleted|cleaned|swap))?|leader-epoch-checkpoint(\.tmp)?|partition\.metadata)$"
)


def _is_partition_dir(path: Path) -> bool:
    """A ``<topic>-<partition>`` dir holding nothing but Kafka partition files."""
    if not PARTITION_DIR_RE.match(path.name):
        return False
    try:
        return all(_PARTITION_FILE_RE.match(p.name) for p in path.iterdir())
    except OSError:
        return False


def partition_dirs(path: Path) -> list[Path]:
    """``[path]`` for a partition dir, or every partition dir of a log dir."""
    if not path.exists():
        raise CliError(f"no such file or directory: {path}")
    if not path.is_dir():
        raise CliError(f"not a directory: {path}")
    if not os.access(path, os.R_OK | os.X_OK):
        raise CliError(f"permission denied: {path}")
    if _is_partition_dir(path):
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and _is_partition_dir(p))
    if not found:
        raise CliError(f"neither a partition dir (<topic>-<partition>) nor a log dir holding any: {path}")
    return found


def _batch_dict(view: BatchView, path: Path, opts: DumpOptions) -> dict:
    h = view.header()
    item = {
        "file": str(path),
        "position": view.pos,
        "base_offset": h.base_offset,
        "last_offset": h.base_offset + h.last_offset_delta,
        "count": h.records_count,
        "size": view.size,
        "magic": 2,
        "partition_leader_epoch": h.partition_leader_epoch,
        "compression": COMPRESSION_NAMES.get(h.attributes & 7, f"unknown({h.attributes & 7})"),
        "timestamp_type": "LogAppendTime" if h.attributes & 8 else "CreateTime",
        "base_timestamp": h.base_timestamp,
        "max_timestamp": h.max_timestamp,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "is_transactional": bool(h.attributes & 0x10),
        "is_control": bool(h.attributes & 0x20),
        "crc": h.crc,
        "crc_valid": view.is_valid(),
    }
    if opts.records:
        batch = decode_batch(view.buffer())
        records = []
        for r in batch.records:
            rec = {"offset": batch.offset_of(r), "timestamp": batch.timestamp_of(r)}
            put_bytes(rec, "key", r.key)
            put_bytes(rec, "value", r.value)
            rec["headers"] = headers_as_json(r.headers)
            if opts.decoder is not None and not batch.is_control:
                rec["decoded"] = opts.decoder(r.key, r.value)
            records.append(rec)
        item["records"] = records
    return item


def _legacy_dict(buf, pos: int, path: Path, opts: DumpOptions) -> tuple[dict, int]:
    msg, next_pos = decode_message(buf, pos)
    item = {
        "file": str(path),
        "position": pos,
        "offset": msg.offset,
        "size": next_pos - pos,
        "magic": msg.magic,
        "compression": COMPRESSION_NAMES.get(msg.attributes & 7, "unknown"),
        "timestamp_type": {-1: None, 0: "CreateTime", 1: "LogAppendTime"}[msg.timestamp_type],
        "timestamp": msg.timestamp,
        "crc": msg.crc,
        "crc_valid": True,
    }
    if opts.records:
        records = []
        for _outer, inner in iter_legacy_entries(buf[pos:next_pos]):
            rec = {"offset": inner.offset, "timestamp": inner.timestamp}
            put_bytes(rec, "key", inner.key)
            put_bytes(rec, "value", inner.value)
            rec["headers"] = []
            records.append(rec)
        item["records"] = records
    return item, next_pos


def iter_segment(path: Path, opts: DumpOptions) -> Iterator[dict]:
    """Yield one dict per entry of a ``.log`` file; a final ``{"problem": ...}`` if it is corrupt."""
    buf = _map(path)
    end = len(buf)
    pos = 0
    while pos < end:
        problem = None
        if end - pos < LOG_OVERHEAD + 5:
            problem = f"{end - pos} trailing bytes, too few for an entry header"
        else:
            size = LOG_OVERHEAD + struct.unpack_from(">i", buf, pos + 8)[0]
            magic = buf[pos + MAGIC_OFFSET]
            if magic == 2 and size < V2_HEADER_SIZE or magic in (0, 1) and size < LOG_OVERHEAD + MIN_MESSAGE_SIZE[magic]:
                problem = f"entry size {size} is too small"
            elif pos + size > end:
                problem = f"entry of {size} bytes extends past the end of the file ({end - pos} bytes left)"
            elif magic not in (0, 1, 2):
                problem = f"invalid magic byte {magic}"
        if problem is None:
            try:
                if magic == 2:
                    view = BatchView(buf, pos, size)
                    item = _batch_dict(view, path, opts)
                    yield item
                    if not item["crc_valid"]:
                        yield {"file": str(path), "position": pos, "problem": "CRC-32C mismatch"}
                        return
                    pos += size
                else:
                    item, pos = _legacy_dict(buf, pos, path, opts)
                    yield item
                continue
            except CorruptRecordError as exc:
                problem = str(exc)
        yield {"file": str(path), "position": pos, "problem": problem, "bytes_left": end - pos}
        return


def iter_index(path: Path) -> Iterator[dict]:
    """Entries of an ``.index`` (offset, position) or ``.timeindex`` (timestamp, offset) file.

    Preallocated zero tails (an active segment's index) are skipped, as Kafka does.
    """
    base = int(path.name[:20])
    buf = _map(path)
    if path.suffix == ".index":
        for i in range(len(buf) // 8):
            rel, position = struct.unpack_from(">ii", buf, i * 8)
            if i > 0 and rel == 0 and position == 0:
                break
            yield {"offset": base + rel, "position": position}
    else:
        for i in range(len(buf) // 12):
            ts, rel = struct.unpack_from(">qi", buf, i * 12)
            if i > 0 and ts == 0 and rel == 0:
                break
            yield {"timestamp": ts, "offset": base + rel}
