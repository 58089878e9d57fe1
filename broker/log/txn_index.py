"""The transaction index: the aborted transactions whose ABORT marker lies in one segment.

File ``<20-digit base offset>.txnindex`` beside the segment's ``.log``, Kafka's
layout: a plain sequence of 34-byte entries, big-endian, no header::

    version              int16   0
    producer_id          int64
    first_offset         int64   first offset of the transaction
    last_offset          int64   offset of its ABORT marker
    last_stable_offset   int64   the partition's last stable offset once the marker was written

An entry is appended when an ABORT marker is written (:meth:`TransactionIndex.append`);
a read_committed fetch asks for the aborted transactions that overlap what it
returns (:func:`collect_aborted`) and hands them to the consumer, which drops
their records. Like the other indexes it is derived data: the log rebuilds
the entries of every offset it replays into the producer state at open, and a
torn tail (a size that is not a whole number of entries) is cut.

Each call opens the file anew: appends are rare (one per aborted transaction)
and readers are read_committed fetches only. Thread-safe as far as the file
system is: the log appends under its lock, readers read whole entries.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def txn_index_path(log_path: Path) -> Path:
    """The transaction index beside a segment's ``.log`` (any suffix after it is kept)."""
    return log_path.with_name(log_path.name.replace(".log", TXN_INDEX_SUFFIX, 1))


def read_entries(path: Path) -> list[AbortedTxn]:
    """The whole entries of ``path`` (none if it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        _version, producer_id, first, last, lso = _ENTRY.unpack_from(data, pos)
        out.append(AbortedTxn(producer_id, first, last, lso))
    return out


def append(path: Path, txn: AbortedTxn) -> None:
    with open(path, "ab") as f:
        f.write(_ENTRY.pack(VERSION, *txn))


def write_entries(path: Path, entries: list[AbortedTxn]) -> None:
    """Replace ``path`` with ``entries`` (a new file renamed over the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(_ENTRY.pack(VERSION, *e) for e in entries))
    os.replace(tmp, path)


def truncate_from(path: Path, offset: int) -> None:
    """Drop the entries whose marker is at or above ``offset``, and a torn tail."""
    entries = read_entries(path)
    kept = [e for e in entries if e.last_offset < offset]
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if len(kept) == len(entries) and size == len(entries) * ENTRY_SIZE:
        return
    if not kept:
        path.unlink(missing_ok=True)
        return
    write_entries(path, kept)


def collect_aborted(log_paths, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions that overlap ``[fetch_offset, upper_bound)``, from the segments' indexes.

    ``log_paths`` are the ``.log`` paths from the segment holding ``fetch_offset``
    on. A transaction's marker may lie past ``upper_bound`` (another
    transaction held the last stable offset back), so the search goes on
    until an entry whose last stable offset reaches ``upper_bound``: every
    marker after it was written once ``upper_bound`` was stable (Kafka's rule).
    """
    out = []
    for log_path in log_paths:
        for e in read_entries(txn_index_path(log_path)):
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return out
    return out
