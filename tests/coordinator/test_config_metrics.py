"""Coordinator properties (offset.metadata.max.bytes, log.cleaner.backoff.ms) and its metrics.

In-process brokers over real logs, a broker process spoken to over the wire, and
``/metrics`` scraped over HTTP; waits poll with a deadline."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from broker.coordinator.records import OffsetAndMetadata
from broker.coordinator.storage import OFFSETS_TOPIC
from broker.protocol import ApiKey, ErrorCode
from tests.coordinator.inproc import join_new, make_broker, run, until
from tests.server.wire import Wire

E = ErrorCode


def test_offset_metadata_max_bytes_counts_utf8_bytes(tmp_path):
    async def body(broker, c):
        res = await c.commit_offsets("g", "", None, -1, {
            ("t", 0): OffsetAndMetadata(1, metadata="12345678"),
            ("t", 1): OffsetAndMetadata(2, metadata="123456789"),
            ("u", 0): OffsetAndMetadata(3, metadata="\u00e9" * 5)})  # 5 characters, 10 bytes
        assert res == {("t", 0): E.NONE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE, ("u", 0): E.OFFSET_METADATA_TOO_LARGE}
        assert set(c.fetch_offsets("g", None)[1]) == {("t", 0)}

    run(tmp_path, body, offset_metadata_max_bytes=8)


def test_offset_metadata_max_bytes_over_the_wire(broker_factory):
    broker = broker_factory(offset_metadata_max_bytes=16)
    with Wire(broker.bootstrap) as w:
        w.call(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                     "assignments": [], "configs": []}],
                                         "timeout_ms": 10000, "validate_only": False})
        partitions = [{"partition_index": 0, "committed_offset": 5, "committed_metadata": "x" * 16},
                      {"partition_index": 1, "committed_offset": 6, "committed_metadata": "x" * 17}]
        r = w.call(ApiKey.OFFSET_COMMIT, 2, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                                             "retention_time_ms": -1,
                                             "topics": [{"name": "t", "partitions": partitions}]})
        assert [p["error_code"] for p in r["topics"][0]["partitions"]] == [E.NONE, E.OFFSET_METADATA_TOO_LARGE]
        r = w.call(ApiKey.OFFSET_FETCH, 2, {"group_id": "g", "topics": None})
        assert [(p["partition_index"], p["committed_offset"], p["metadata"]) for p in r["topics"][0]["partitions"]] \
            == [(0, 5, "x" * 16)]


def test_log_cleaner_backoff_ms_reaches_the_log_manager_and_its_cleaner_compacts(tmp_path):
    segment_bytes = 4096

    async def body(broker, c):
        assert broker.log_manager.cleaner_backoff_ms == 50
        for i in range(1500):
            assert (await c.commit_offsets("g", "", None, -1, {("t", i % 2): OffsetAndMetadata(i)})) == {
                ("t", i % 2): E.NONE}
        plog = broker.replicas.partition(OFFSETS_TOPIC, 0)
        assert plog.log_end_offset >= 1500  # ~100 bytes a commit: dozens of segments written
        # nobody calls clean_logs: the cleaner thread, waking every 50 ms, compacts on its own
        await until(lambda: plog.size_in_bytes <= 3 * segment_bytes, limit=30)
        assert [om.offset for _, om in sorted(c.fetch_offsets("g", None)[1].items())] == [1498, 1499]

    run(tmp_path, body, log_cleaner_backoff_ms=50, offsets_topic_num_partitions=1,
        offsets_topic_segment_bytes=segment_bytes)


def test_property_defaults(tmp_path):
    broker = make_broker(tmp_path)
    assert broker.config.offset_metadata_max_bytes == 4096
    assert broker.config.log_cleaner_backoff_ms == 15000
    assert broker.coordinator.offset_metadata_max_bytes == 4096


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_coordinator_metrics_on_scrape(tmp_path):
    async def first(broker, c):
        loop = asyncio.get_running_loop()
        before = await loop.run_in_executor(None, scrape, broker.metrics_port)
        assert before[("kafkapy_groups", (("state", "Stable"),))] == 0
        assert before[("kafkapy_group_rebalances_total", ())] == 0
        a = await join_new(c)
        await c.sync_group("g", 1, a["member_id"], None, None, None, {a["member_id"]: b""})
        await c.commit_offsets("g", a["member_id"], None, 1, {("t", 0): OffsetAndMetadata(1),
                                                             ("t", 1): OffsetAndMetadata(2)})
        await c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(3)})
        m = await loop.run_in_executor(None, scrape, broker.metrics_port)
        assert m[("kafkapy_groups", (("state", "Stable"),))] == 1
        assert m[("kafkapy_groups", (("state", "Empty"),))] == 1
        assert m[("kafkapy_group_rebalances_total", ())] == 1
        assert m[("kafkapy_offset_commits_total", ())] == 3
        assert m[("kafkapy_offsets_cached", ())] == 3
        # the new topic's partitions are loaded (empty) as this broker becomes their leader, as Kafka does
        assert m[("kafkapy_coordinator_load_duration_seconds_count", ())] == 3

    run(tmp_path, first, metrics_port=0)

    async def second(broker, c):
        await c.wait_loaded()
        m = await asyncio.get_running_loop().run_in_executor(None, scrape, broker.metrics_port)
        assert m[("kafkapy_coordinator_load_duration_seconds_count", ())] == 3  # one per partition
        assert m[("kafkapy_offsets_cached", ())] == 3

    run(tmp_path, second, metrics_port=0)
