"""Zero-copy views over record batches as they sit in a buffer.

Both on-disk/on-wire formats start with the same 17 bytes, which is what lets a
reader tell them apart before it knows which one it holds::

    offset  size  RecordBatch v2 (magic 2)      Message v0/v1 (magic 0/1)
    0       8     baseOffset                    offset
    8       4     batchLength                   message_size
    12      4     partitionLeaderEpoch          crc (CRC-32 of magic..end)
    16      1     magic = 2                     magic = 0 or 1
    17      4     crc (CRC-32C of 21..end)      attributes (1) / ...
    21      2     attributes
    23      4     lastOffsetDelta
    27      8     baseTimestamp (firstTimestamp)
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordsCount
    61      ...   records (possibly compressed)

A whole entry occupies ``12 + batchLength`` bytes (``LOG_OVERHEAD`` is 12).
``baseOffset`` and ``partitionLeaderEpoch`` lie outside the v2 CRC, so a broker
may patch them in place without recomputing the checksum; :class:`BatchView`
does exactly that and nothing else that would touch the record bytes.

Attributes (v2, int16): bits 0-2 compression codec (0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd), bit 3 timestamp type (0 CreateTime, 1 LogAppendTime), bit 4
transactional, bit 5 control batch, bit 6 delete horizon set (compaction).

Views are not thread-safe when they write; reading views of an immutable buffer
may be shared freely.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

import crc32c as _crc32c

LOG_OVERHEAD = 12  # offset (8) + size (4)
MAGIC_OFFSET = 16
V2_HEADER_SIZE = 61
V2_CRC_OFFSET = 17
V2_ATTRIBUTES_OFFSET = 21  # also where the CRC-32C's coverage starts (it runs to the entry's end)

# The v2 header layouts, declared here only (every reader and writer of batch headers uses these):
#: the whole 61-byte header, every field of the table above in order
V2_HEADER = struct.Struct(">qiiBIhiqqqhii")
#: baseOffset, batchLength, partitionLeaderEpoch: the bytes outside the CRC that an append patches
V2_ENTRY_HEAD = struct.Struct(">qii")
#: baseOffset .. crc: the 17 bytes before what the CRC covers
V2_HEAD_TO_CRC = struct.Struct(">qiiBI")
#: attributes .. recordsCount: the CRC-covered part of the header
V2_CRC_COVERED_HEAD = struct.Struct(">hiqqqhii")
#: what an append reads: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, lastOffsetDelta,
#: maxTimestamp, recordsCount (pads skip the rest)
V2_APPEND_FIELDS = struct.Struct(">qiiBI2xi8xq14xi")
#: the producer fields an append checks, read from the attributes on: attributes, producerId, producerEpoch,
#: baseSequence
V2_APPEND_PRODUCER_FIELDS = struct.Struct(">h20xqhi")
#: what a segment scan reads: baseOffset, batchLength, magic, crc, lastOffsetDelta, maxTimestamp
V2_SCAN_FIELDS = struct.Struct(">qi4xBI2xi8xq")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class CorruptRecordError(ValueError):
    """The bytes are not a valid batch (bad size, magic or CRC).

    Maps to Kafka error CORRUPT_MESSAGE (2). ``position`` is the byte position
    of the offending entry within the buffer that was being read.
    """

    error_code = 2

    def __init__(self, message: str, position: int = 0) -> None:
        super().__init__(message)
        self.position = position


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded fixed header of a RecordBatch v2 (see the module docstring)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int


class BatchView:
    """A view of one v2 batch at ``buf[pos:pos + size]``, without copying.

    ``buf`` may be any writable or read-only buffer (bytes, bytearray, mmap,
    memoryview). The setters need a writable buffer. The view does not check
    anything on construction; call :meth:`validate` for size, magic and CRC.
    """

    __slots__ = ("_buf", "pos", "size")

    def __init__(self, buf, pos: int = 0, size: int | None = None) -> None:
        self._buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        if size is None:
            size = LOG_OVERHEAD + _I32.unpack_from(self._buf, pos + 8)[0]
        self.size = size

    # -- header fields -----------------------------------------------------
    @property
    def base_offset(self) -> int:
        return _I64.unpack_from(self._buf, self.pos)[0]

    @base_offset.setter
    def base_offset(self, value: int) -> None:
        _I64.pack_into(self._buf, self.pos, value)

    @property
    def batch_length(self) -> int:
        return self.size - LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        return _I32.unpack_from(self._buf, self.pos + 12)[0]

    @partition_leader_epoch.setter
    def partition_leader_epoch(self, value: int) -> None:
        _I32.pack_into(self._buf, self.pos + 12, value)

    @property
    def magic(self) -> int:
        return self._buf[self.pos + MAGIC_OFFSET]

    @property
    def crc(self) -> int:
        return _U32.unpack_from(self._buf, self.pos + V2_CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return struct.unpack_from(">h", self._buf, self.pos + V2_ATTRIBUTES_OFFSET)[0]

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_offset_delta(self) -> int:
        return _I32.unpack_from(self._buf, self.pos + 23)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return _I64.unpack_from(self._buf, self.pos + 27)[0]

    @property
    def max_timestamp(self) -> int:
        return _I64.unpack_from(self._buf, self.pos + 35)[0]

    @property
    def producer_id(self) -> int:
        return _I64.unpack_from(self._buf, self.pos + 43)[0]

    @property
    def producer_epoch(self) -> int:
        return struct.unpack_from(">h", self._buf, self.pos + 51)[0]

    @property
    def base_sequence(self) -> int:
        return _I32.unpack_from(self._buf, self.pos + 53)[0]

    @property
    def records_count(self) -> int:
        return _I32.unpack_from(self._buf, self.pos + 57)[0]

    def header(self) -> BatchHeader:
        return BatchHeader(*V2_HEADER.unpack_from(self._buf, self.pos))

    def buffer(self) -> memoryview:
        """The whole entry, ``12 + batchLength`` bytes, as a memoryview."""
        return self._buf[self.pos : self.pos + self.size]

    def records_buffer(self) -> memoryview:
        """The (possibly compressed) records section after the 61-byte header."""
        return self._buf[self.pos + V2_HEADER_SIZE : self.pos + self.size]

    # -- checks -----------------------------------------------------------
    def compute_crc(self) -> int:
        return _crc32c.crc32c(self._buf[self.pos + V2_ATTRIBUTES_OFFSET : self.pos + self.size])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        """Raise :class:`CorruptRecordError` unless magic is 2, sizes fit and the CRC matches."""
        if self.magic != 2:
            raise CorruptRecordError(f"expected magic 2, found {self.magic}", self.pos)
        if self.size < V2_HEADER_SIZE:
            raise CorruptRecordError(f"batch of {self.size} bytes is smaller than its header", self.pos)
        if self.pos + self.size > len(self._buf):
            raise CorruptRecordError("batch extends past the end of the buffer", self.pos)
        if not self.is_valid():
            raise CorruptRecordError(
                f"CRC-32C mismatch: stored {self.crc:#010x}, computed {self.compute_crc():#010x}", self.pos
            )


def entry_size_at(buf, pos: int) -> int:
    """Size in bytes of the entry (v2 batch or legacy message) starting at ``pos``."""
    return LOG_OVERHEAD + _I32.unpack_from(buf, pos + 8)[0]


def iter_batch_views(buf, start: int = 0, end: int | None = None) -> Iterator[BatchView]:
    """Yield a :class:`BatchView` for each whole v2 entry in ``buf[start:end]``.

    Stops silently at a trailing partial entry (as a fetch response may end in
    one). Raises :class:`CorruptRecordError` for an entry whose declared size is
    impossible or whose magic is not 2. CRCs are not checked here.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv) if end is None else end
    pos = start
    while pos + LOG_OVERHEAD <= end:
        length = _I32.unpack_from(mv, pos + 8)[0]
        if length < V2_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch length {length} is smaller than the v2 header", pos)
        size = LOG_OVERHEAD + length
        if pos + size > end:
            return
        if mv[pos + MAGIC_OFFSET] != 2:
            raise CorruptRecordError(f"expected magic 2, found {mv[pos + MAGIC_OFFSET]}", pos)
        yield BatchView(mv, pos, size)
        pos += size
