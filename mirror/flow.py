"""One flow: source cluster -> target cluster.

The flow's processes share the source partitions through a consumer group on
the source (``kafkapy-mirror.SOURCE.TARGET``). A process owning a partition
copies it into the same partition of the target topic, one Produce request at
a time per partition (the next is sent only after the previous one was
acknowledged), so the target partition's copies are in source order and a
failed request leaves nothing behind it. What the process does with a
partition, in order:

1. on assignment: make sure the target topic exists (:mod:`mirror.topics`),
   then find the resume point (:meth:`FlowRunner._resume_point`) and seek there;
2. copy what the consumer returns; a record whose provenance says it came from
   the target cluster is not copied back (active-active without loops);
3. every second, commit the position to the flow's group on the source, with
   the target offset after the last copy as the commit's metadata (a hint
   where to start reading the target next time, and the mirror's progress
   for group offset translation and ``kafkactl mirror status``);
4. on a failed Produce (the target may or may not have appended it) the
   partition is paused and resumed from the resume point once the target
   answers again;
5. on revocation: nothing is in flight (copies are awaited before the next
   poll), so commit and drop the partition.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.client import AsyncAdmin, AsyncConsumer, AsyncProducer, OffsetAndMetadata, TopicPartition
from broker.client.errors import KafkaError
from broker.records.batch import encode_batch_tuples
from broker.records.compression import Compression

from .config import Flow, MirrorConfig
from .groups import GroupSync
from .metrics import MirrorMetrics
from .position import HEADER, Provenance, TargetReader, provenance
from .topics import TopicSync

log = logging.getLogger("mirror")

_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
CHUNK_BYTES = 512 * 1024  # uncompressed bytes per copied batch: well under a default max.message.bytes
COMMIT_INTERVAL_S = 1.0
BACKOFF_MAX_S = 5.0


class NotOwnerError(KafkaError):
    """This process cannot be sure it still owns its partitions."""


class _Partition:
    __slots__ = ("target_topic", "next_offset", "target_next", "broken", "retry_at")

    def __init__(self, target_topic: str | None) -> None:
        self.target_topic = target_topic
        self.next_offset = -1  # next source offset to copy
        self.target_next = -1  # target offset after the last copy this process wrote or found
        self.broken = True  # resume point unknown: paused until found
        self.retry_at = 0.0


class Health:
    """Logs a trouble once when it starts and once when it ends, not on every retry."""

    def __init__(self, flow: str, metrics: MirrorMetrics) -> None:
        self._flow = flow
        self._metrics = metrics
        self._bad: dict[str, str] = {}

    def trouble(self, kind: str, exc: BaseException) -> None:
        self._metrics.errors.labels(self._flow, kind).inc()
        text = f"{type(exc).__name__}: {exc}"
        if self._bad.get(kind) != text:
            log.warning("flow %s: %s trouble, retrying: %s", self._flow, kind, text)
            self._bad[kind] = text

    def ok(self, kind: str) -> None:
        if self._bad.pop(kind, None) is not None:
            log.info("flow %s: %s ok again", self._flow, kind)


class FlowRunner:
    def __init__(self, config: MirrorConfig, flow: Flow, metrics: MirrorMetrics, stopping: asyncio.Event) -> None:
        self.flow = flow
        self.metrics = metrics
        self._stopping = stopping
        src, tgt = config.clusters[flow.source], config.clusters[flow.target]
        self._sync_interval = config.sync_interval_ms / 1000
        self.source_admin = AsyncAdmin(src.client_properties("admin"))
        self.target_admin = AsyncAdmin(tgt.client_properties("admin"))
        cprops = src.client_properties("consumer")
        cprops.update({"group.id": flow.group_id, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        cprops.setdefault("isolation.level", "read_committed")
        # heartbeats well inside the session: a member unconfirmed for half of it stops writing
        session_ms = int(cprops.get("session.timeout.ms", 10000))
        cprops.setdefault("heartbeat.interval.ms", max(session_ms // 5, 100))
        cprops.setdefault("max.partition.fetch.bytes", 4 * 1024 * 1024)
        # the subscription pattern is matched again at each metadata refresh: new topics are noticed this fast
        cprops.setdefault("metadata.max.age.ms", min(config.sync_interval_ms, 30000))
        self.consumer = AsyncConsumer(cprops)
        pprops = tgt.client_properties("producer")
        pprops.setdefault("acks", "all")
        self.producer = AsyncProducer(pprops)
        self._compression = _CODECS[self.producer.config.compression_type]
        self.reader = TargetReader(tgt.client_properties("consumer"), flow.source)
        back = config.renamed_back(flow)
        self.topic_sync = TopicSync(flow, self.source_admin, self.target_admin, back)
        self.group_sync = GroupSync(flow, self.source_admin, self.target_admin, self.reader, self.topic_sync,
                                    metrics)
        self.health = Health(flow.name, metrics)
        self.parts: dict[TopicPartition, _Partition] = {}
        self._last_commit = 0.0
        self._committed: dict[TopicPartition, tuple[int, int]] = {}
        self._backoff = 0.1
        self._fence_s = self.consumer.config.session_timeout_ms / 2000
        self._own_prefix = Provenance(flow.source, flow.source, 0).encode()[:-1]  # b"SOURCE|SOURCE|"
        self._exclude = "|".join(f"(?:{p})" for p in filter(None, [
            "__.*", flow.exclude.pattern if flow.exclude is not None else None, back]))

    # -- lifecycle -------------------------------------------------------------------
    async def _start_clients(self) -> None:
        for client in (self.source_admin, self.target_admin, self.consumer, self.producer, self.reader):
            while not self._stopping.is_set():
                try:
                    await client.start()
                    break
                except KafkaError as exc:
                    self.health.trouble("source" if client in (self.source_admin, self.consumer) else "target", exc)
                    await self._sleep_backoff()
        self._backoff = 0.1

    async def _sleep_backoff(self) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), self._backoff)
        except asyncio.TimeoutError:
            pass
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)

    async def run(self) -> None:
        await self._start_clients()
        if self._stopping.is_set():
            await self._close()
            return
        self.consumer.subscribe(pattern=f"(?:{self.flow.topics.pattern})\\Z", exclude=self._exclude,
                                on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        sync = asyncio.ensure_future(self._sync_loop())
        try:
            while not self._stopping.is_set():
                try:
                    records = await self.consumer.poll(200, max_records=20000)
                    self.health.ok("source")
                except KafkaError as exc:
                    self.health.trouble("source", exc)
                    await self._sleep_backoff()
                    continue
                self._backoff = 0.1
                if records:
                    await self._copy(records)
                await self._resume_broken()
                if time.monotonic() - self._last_commit >= COMMIT_INTERVAL_S:
                    await self._commit()
        finally:
            sync.cancel()
            await asyncio.gather(sync, return_exceptions=True)
            await self._commit()
            await self._close()

    async def _close(self) -> None:
        for client in (self.consumer, self.producer, self.reader, self.source_admin, self.target_admin):
            try:
                await client.close()
            except Exception as exc:  # closing must reach every client
                log.debug("closing %s: %s", type(client).__name__, exc)

    # -- ownership -------------------------------------------------------------------
    def _on_assign(self, tps: list[TopicPartition]) -> None:
        # Paused until the main loop has read each one's resume point from the target: doing
        # it here, inside the group join, would hold up the first heartbeat.
        for tp in tps:
            self.parts[tp] = _Partition(None)
            self.consumer.pause(tp)
        self.metrics.partitions.labels(self.flow.name).set(len(self.parts))

    async def _on_revoke(self, tps: list[TopicPartition]) -> None:
        await self._commit(tps)
        self._on_lost(tps)

    def _on_lost(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.parts.pop(tp, None)
            self._committed.pop(tp, None)
            try:
                self.metrics.lag.remove(self.flow.name, tp.topic, str(tp.partition))
            except KeyError:
                pass
        self.metrics.partitions.labels(self.flow.name).set(len(self.parts))

    async def _resume_broken(self) -> None:
        now = time.monotonic()
        for tp, st in list(self.parts.items()):
            if not st.broken or now < st.retry_at:
                continue
            try:
                self._check_owner()
                if st.target_topic is None:
                    st.target_topic = await self.topic_sync.ensure(tp.topic)
                st.next_offset, st.target_next = await self._resume_point(tp, st.target_topic)
            except KafkaError as exc:
                self.health.trouble("target", exc)
                st.retry_at = now + 1.0
                continue
            if self.parts.get(tp) is not st:
                continue  # revoked meanwhile
            self.health.ok("target")
            st.broken = False
            self.consumer.seek(tp, st.next_offset)
            self.consumer.resume(tp)
            log.info("flow %s: %s-%d resumes at source offset %d (target %s-%d at %d)", self.flow.name, tp.topic,
                     tp.partition, st.next_offset, st.target_topic, tp.partition, st.target_next)

    async def _resume_point(self, tp: TopicPartition, target_topic: str) -> tuple[int, int]:
        """``(next source offset, target offset after the last copy)`` read from the target itself.

        The flow's last commit says where to start reading the target (its
        metadata); every copy after it carries its source offset, so the last
        copy found is exactly where the flow got to. Without a copy after the
        commit, the commit itself is the position; without either, the source's
        log start.
        """
        ttp = TopicPartition(target_topic, tp.partition)
        start = (await self.target_admin.list_offsets({ttp: -2}))[ttp][0]
        end = await self.reader.end_offset(ttp, start)
        committed = (await self.consumer.committed([tp])).get(tp)
        hint = _int(committed.metadata) if committed is not None else None
        scan_from = hint if hint is not None and start <= hint <= end else start
        last = await self.reader.last_copy(ttp, scan_from)
        if last is not None:
            return last.source_offset + 1, last.target_offset + 1
        if committed is not None:
            return committed.offset, scan_from
        earliest = (await self.source_admin.list_offsets({tp: -2}))[tp][0]
        return earliest, end

    # -- copying ---------------------------------------------------------------------
    async def _copy(self, records) -> None:
        by_tp: dict[tuple[str, int], list] = {}
        for r in records:
            by_tp.setdefault((r.topic, r.partition), []).append(r)
        await asyncio.gather(*(self._copy_partition(TopicPartition(*k), rs) for k, rs in by_tp.items()))

    async def _copy_partition(self, tp: TopicPartition, records) -> None:
        st = self.parts.get(tp)
        if st is None or st.broken:
            return
        flow = self.flow
        source, target = flow.source, flow.target
        own = self._own_prefix
        chunk: list = []
        size = 0
        skipped = 0
        try:
            for r in records:
                if r.offset < st.next_offset:
                    continue
                headers = r.headers
                prefix = own
                if headers:
                    p = provenance(headers)
                    if p is not None:
                        if p.origin == target:
                            skipped += 1
                            continue
                        prefix = f"{p.origin}|{source}|".encode()
                        headers = [h for h in headers if h[0] != HEADER]
                    headers = list(headers)
                else:
                    headers = []
                headers.append((HEADER, b"%b%d" % (prefix, r.offset)))
                chunk.append((r.timestamp, r.key, r.value, headers))
                last_offset = r.offset
                size += (len(r.key) if r.key else 0) + (len(r.value) if r.value else 0) + 64
                if size >= CHUNK_BYTES:
                    await self._send(tp, st, chunk, last_offset)
                    chunk, size = [], 0
            if chunk:
                await self._send(tp, st, chunk, last_offset)
        except KafkaError as exc:
            self.health.trouble("produce", exc)
            st.broken = True
            st.retry_at = time.monotonic() + 0.5
            if tp in self.consumer.assignment():
                self.consumer.pause(tp)
            return
        self.health.ok("produce")
        if skipped:
            self.metrics.skipped.labels(flow.name, tp.topic).inc(skipped)
        st.next_offset = max(st.next_offset, records[-1].offset + 1)

    def _check_owner(self) -> None:
        """Refuse to write unless the source's group coordinator confirmed our membership
        within half the session timeout (a member it cannot hear from loses its
        partitions when the session times out; stop well before that)."""
        ago = self.consumer.last_heartbeat_seconds_ago()
        if ago is None or ago > self._fence_s:
            raise NotOwnerError(f"group membership not confirmed for {'ever' if ago is None else f'{ago:.1f} s'}")

    async def _send(self, tp: TopicPartition, st: _Partition, chunk: list, last_offset: int) -> None:
        """Write ``chunk`` (``(timestamp, key, value, headers)``, the last one from source offset
        ``last_offset``) as one batch; the position moves only once the target acknowledged it."""
        self._check_owner()
        data = encode_batch_tuples(chunk, self._compression)
        base, _ = await self.producer.send_batch(st.target_topic, tp.partition, data)
        now_ms = time.time() * 1000
        st.next_offset = last_offset + 1
        st.target_next = base + len(chunk)
        m = self.metrics
        m.records.labels(self.flow.name, tp.topic).inc(len(chunk))
        m.bytes.labels(self.flow.name, tp.topic).inc(
            sum((len(k) if k else 0) + (len(v) if v else 0) for _, k, v, _ in chunk))
        observe = m.latency.labels(self.flow.name).observe
        for ts, _, _, _ in chunk:
            observe(max(now_ms - ts, 0.0) / 1000)

    # -- progress --------------------------------------------------------------------
    async def _commit(self, tps=None) -> None:
        self._last_commit = time.monotonic()
        offsets = {}
        for tp in (tps if tps is not None else list(self.parts)):
            st = self.parts.get(tp)
            if st is None or st.broken or st.next_offset < 0:
                continue
            pos = (st.next_offset, st.target_next)
            if self._committed.get(tp) != pos:
                offsets[tp] = OffsetAndMetadata(st.next_offset, str(st.target_next))
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:  # the next round commits again; the target holds the truth anyway
            log.debug("flow %s: commit failed: %s", self.flow.name, exc)
            return
        for tp, om in offsets.items():
            self._committed[tp] = (om.offset, int(om.metadata))

    async def _sync_loop(self) -> None:
        while True:
            try:
                await self.topic_sync.sync_all()
                self.metrics.topics.labels(self.flow.name).set(len(self.topic_sync.topics))
                self.health.ok("topic_sync")
            except KafkaError as exc:
                self.health.trouble("topic_sync", exc)
            try:
                await self._update_lag()
                await self.group_sync.sync()
                self.health.ok("group_sync")
            except KafkaError as exc:
                self.health.trouble("group_sync", exc)
            await asyncio.sleep(self._sync_interval)

    async def _update_lag(self) -> None:
        owned = {tp: st for tp, st in self.parts.items() if not st.broken}
        if not owned:
            return
        ends = await self.source_admin.list_offsets({tp: -1 for tp in owned})
        for tp, st in owned.items():
            if tp in ends:
                self.metrics.lag.labels(self.flow.name, tp.topic, str(tp.partition)).set(
                    max(ends[tp][0] - st.next_offset, 0))


def _int(text: str | None) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
