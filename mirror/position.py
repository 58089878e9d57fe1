"""Where the mirror stands: the provenance header and reading the target.

Every record the mirror writes carries one header, ``kafkapy.mirror``, whose
value is ASCII ``ORIGIN|SOURCE|OFFSET``:

* ORIGIN: the name of the cluster the record was first produced in (kept as
  the record travels on through further flows);
* SOURCE: the name of the cluster this copy was read from;
* OFFSET: the record's offset in its source partition (same partition number).

A header the record already had under that name is replaced; every other
header is kept as it was. The target partition itself is therefore the
mirror's checkpoint: the last record in it whose SOURCE is the flow's source
says how far the flow got (:meth:`TargetReader.last_copy`), and the first
record whose OFFSET is at or after a source offset is the translation of that
offset (:meth:`TargetReader.first_copy_at_or_after`). OFFSETs only increase
along a target partition because each has one writer per flow at a time.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

from broker.client import AsyncConsumer, TopicPartition
from broker.client.errors import KafkaTimeoutError

HEADER = "kafkapy.mirror"


class Provenance(NamedTuple):
    origin: str
    source: str
    offset: int

    def encode(self) -> bytes:
        return f"{self.origin}|{self.source}|{self.offset}".encode()


def provenance(headers) -> Provenance | None:
    """The record's mirror header, or None (a record produced where it is)."""
    for key, value in headers:
        if key == HEADER and value:
            try:
                origin, source, offset = value.decode().rsplit("|", 2)
                return Provenance(origin, source, int(offset))
            except (UnicodeDecodeError, ValueError):
                return None
    return None


class Copy(NamedTuple):
    """A mirrored record in the target: its target offset and its source offset."""

    target_offset: int
    source_offset: int


class TargetReader:
    """Reads a target partition's records by offset, for one flow's source cluster.

    One per flow; calls are serialized (one consumer, assigned one partition at a time).
    """

    def __init__(self, properties: dict, source: str) -> None:
        props = dict(properties)
        props.update({"fetch.max.wait.ms": 50, "max.partition.fetch.bytes": 262144,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        props.pop("group.id", None)
        self._consumer = AsyncConsumer(props)
        self._source = source
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        await self._consumer.start()

    async def close(self) -> None:
        await self._consumer.close()

    def _fresh(self, tp: TopicPartition, offset: int) -> None:
        c = self._consumer
        c.assign([])  # forget the last high watermark seen
        c.assign([tp])
        c.seek(tp, offset)

    async def _scan(self, tp: TopicPartition, start: int, first_at_or_after: int | None):
        """Walk records of ``tp`` from ``start`` to its high watermark; return the last copy from
        our source, or the first with source offset >= ``first_at_or_after`` when that is given."""
        c = self._consumer
        self._fresh(tp, start)
        last = None
        idle = 0
        while True:
            records = await c.poll(50)
            for r in records:
                p = provenance(r.headers)
                if p is None or p.source != self._source:
                    continue
                if first_at_or_after is not None:
                    if p.offset >= first_at_or_after:
                        return Copy(r.offset, p.offset)
                    continue
                last = Copy(r.offset, p.offset)
            high_watermark = c.highwater(tp)
            if high_watermark is not None and await c.position(tp) >= high_watermark:
                return last
            idle = 0 if records else idle + 1
            if idle >= 200:
                raise KafkaTimeoutError(f"reading {tp.topic}-{tp.partition} made no progress for 10 s")

    async def end_offset(self, tp: TopicPartition, start: int) -> int:
        """The partition's high watermark as its Fetch answers say (one foreign broker's
        ListOffsets answers less than that)."""
        async with self._lock:
            c = self._consumer
            self._fresh(tp, start)
            for _ in range(500):
                await c.poll(20, max_records=1)
                if c.highwater(tp) is not None:
                    return c.highwater(tp)
            raise KafkaTimeoutError(f"no Fetch answer for {tp.topic}-{tp.partition} within 10 s")

    async def last_copy(self, tp: TopicPartition, start: int) -> Copy | None:
        """The last record from ``start`` on that was copied from our source cluster."""
        async with self._lock:
            return await self._scan(tp, start, None)

    async def first_copy_at_or_after(self, tp: TopicPartition, start: int, end: int,
                                     source_offset: int) -> Copy | None:
        """The first record in [start, end) copied from source offset ``source_offset`` or later.

        A binary search over target offsets (source offsets of copies grow
        along the partition); each probe reads forward to the next copy.
        """
        async with self._lock:
            lo, hi, found = start, end, None
            while lo < hi:
                mid = (lo + hi) // 2
                probe = await self._scan(tp, mid, -1)
                if probe is None or probe.source_offset >= source_offset:
                    if probe is not None:
                        found = probe
                    hi = mid
                else:
                    lo = probe.target_offset + 1
            return found
