"""One Spark task's read of one offset range, as Arrow record batches.

:func:`read_range` runs in an executor. It sends its own Fetch requests for its
one partition (through the client's :class:`~broker.client._cluster.Cluster`:
metadata, leaders, connections) rather than polling a
:class:`~broker.client.Consumer`, because the consumer decodes every record into
an object and the task wants columns: each fetched answer goes whole to
:mod:`pipeline.columns`. The next Fetch is sent before the answer in hand is
decoded, so the broker's work and the decoding overlap. Fetches are as big as a
task can use (``max.partition.fetch.bytes`` 8 MiB unless the options say
otherwise); ``kafka.isolation.level`` and the other ``kafka.*`` client
properties apply as they would to a consumer, except that a task always reads
from the leader (it sends no rack, so no KIP-392 redirect to a follower).

Offsets deleted by retention while the range is read (OFFSET_OUT_OF_RANGE)
fail the task, or with ``failOnDataLoss=false`` are skipped to the log start.
A range that makes no progress for ``_READ_TIMEOUT_S`` fails the task naming it.
"""

from __future__ import annotations

import asyncio
import time

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from broker.client import TopicPartition
from broker.client._cluster import Cluster
from broker.client._config import ConsumerConfig, build_config
from broker.client._connection import Api
from broker.client._fetcher import EARLIEST_TIMESTAMP, Fetcher, SubscriptionState
from broker.client._serde import bytes_deserializer
from broker.client._sync import LoopThread
from broker.client.errors import KafkaError, error_for_code

from . import columns
from . import options as opt

_READ_TIMEOUT_S = 120  # a range the broker had when planned must arrive well within this
_OFFSET_OUT_OF_RANGE = 1
_STALE_METADATA = {3, 5, 6, 74, 75}
_TASK_FETCH = {"max.partition.fetch.bytes": 8 << 20, "fetch.max.bytes": 8 << 20}


class RangePartition(InputPartition):
    """One offset range to read; ``last`` marks the range that ends its Kafka partition's share."""

    def __init__(self, r: opt.OffsetRange, last: bool) -> None:
        super().__init__((r.topic, r.partition, r.start, r.end))
        self.range, self.last = r, last


def arrow_schema(include_headers: bool) -> pa.Schema:
    """Spark's Kafka source schema as Arrow (what Spark expects a Python source's batches in)."""
    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
              ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
    if include_headers:
        fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    return pa.schema(fields)


class _PartitionFetcher:
    """Fetch requests for one partition on a client event loop thread; not thread-safe."""

    def __init__(self, conf: dict, tp: TopicPartition) -> None:
        self.config = build_config(ConsumerConfig, {**_TASK_FETCH, **conf}, {})
        self.tp = tp
        self.thread = LoopThread("kafkapy-range")
        self.cluster = Cluster(self.config)

    def submit(self, offset: int):
        """Start the Fetch at ``offset``; ``.result()`` of the returned future is the partition's answer."""
        return asyncio.run_coroutine_threadsafe(self._fetch(offset), self.thread.loop)

    def earliest(self) -> int:
        """The partition's log start offset (ListOffsets)."""
        offsets = Fetcher(self.cluster, self.config, SubscriptionState(), bytes_deserializer, bytes_deserializer)
        return self.thread.run(offsets.list_offsets({self.tp: EARLIEST_TIMESTAMP}))[self.tp][0]

    async def _fetch(self, offset: int) -> dict:
        c, tp = self.config, self.tp
        deadline = time.monotonic() + _READ_TIMEOUT_S
        while True:
            await self.cluster.ensure_topics({tp.topic})
            leader = self.cluster.leader_for(tp)
            if leader >= 0:
                body = {
                    "replica_id": -1, "max_wait_ms": c.fetch_max_wait_ms, "min_bytes": c.fetch_min_bytes,
                    "max_bytes": c.fetch_max_bytes, "session_id": 0, "session_epoch": -1,
                    "isolation_level": 1 if c.isolation_level == "read_committed" else 0,
                    "topics": [{"topic": tp.topic, "partitions": [{
                        "partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": offset,
                        "log_start_offset": -1, "partition_max_bytes": c.max_partition_fetch_bytes}]}],
                    "forgotten_topics_data": [], "rack_id": "",
                }
                try:
                    conn = await self.cluster.fetch_connection(leader)
                    resp = await conn.request(Api.FETCH, body,
                                              timeout=c.request_timeout_ms / 1000 + c.fetch_max_wait_ms / 1000)
                except KafkaError:  # a lost connection: the leader may have moved
                    if time.monotonic() > deadline:
                        raise
                    self.cluster.drop_fetch_connection(leader)
                    resp = None
                if resp is not None and not resp.get("error_code"):
                    p = resp["responses"][0]["partitions"][0]
                    if p["error_code"] not in _STALE_METADATA:
                        return p
            if time.monotonic() > deadline:
                raise error_for_code(3, f"{tp.topic}-{tp.partition} has had no leader for {_READ_TIMEOUT_S}s")
            self.cluster.request_update()
            await asyncio.sleep(c.retry_backoff_ms / 1000)

    def close(self) -> None:
        try:
            self.thread.run(self.cluster.close(), timeout=10)
        finally:
            self.thread.stop()


def read_range(options: dict, part: RangePartition, include_headers: bool, commit_group: str | None):
    """Yield Arrow record batches of the records in ``part``'s range (runs in an executor)."""
    if not isinstance(part, RangePartition):
        return  # Spark reads one placeholder partition when the plan has none
    r = part.range
    tp = TopicPartition(r.topic, r.partition)
    schema = arrow_schema(include_headers)
    conf = opt.client_config(options)
    fail_on_loss = opt.flag(options, "failOnDataLoss", True)
    fetcher = _PartitionFetcher(conf, tp)
    position, deadline = r.start, time.monotonic() + _READ_TIMEOUT_S
    pending = None
    try:
        while position < r.end:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{r.topic}-{r.partition}: no progress at offset {position} "
                                   f"for {_READ_TIMEOUT_S}s (range {r.start}-{r.end})")
            p = (pending or fetcher.submit(position)).result()
            pending = None
            code = p["error_code"]
            if code == _OFFSET_OUT_OF_RANGE:
                msg = f"{r.topic}-{r.partition}: offset {position} is gone (deleted by retention while reading)"
                if fail_on_loss:
                    raise RuntimeError(msg + "; set failOnDataLoss=false to skip it")
                start = fetcher.earliest()
                if start > position:
                    position, deadline = start, time.monotonic() + _READ_TIMEOUT_S
                continue
            if code:
                raise error_for_code(code, context=f"Fetch {r.topic}-{r.partition}")
            aborted = [(a["first_offset"], a["producer_id"]) for a in p.get("aborted_transactions") or ()]
            scanned = columns.scan(p["records"] or b"", position, aborted)
            start = position
            if scanned.next_offset is not None and scanned.next_offset > position:
                position, deadline = scanned.next_offset, time.monotonic() + _READ_TIMEOUT_S
            if position < r.end:  # the broker works on the next answer while this one is decoded
                pending = fetcher.submit(position)
            batch = columns.to_record_batch(scanned, r.topic, r.partition, start, r.end, schema)
            if batch is not None:
                yield batch
    finally:
        if pending is not None:
            pending.cancel()
        fetcher.close()
    if commit_group and part.last:
        commit(conf, commit_group, {tp: r.end})


def commit(conf: dict, group: str, offsets: dict) -> None:
    """Commit ``offsets`` (``{TopicPartition: offset}``) to ``group`` for monitoring."""
    from broker.client import Admin
    with Admin(conf) as admin:
        admin.alter_group_offsets(group, offsets)
