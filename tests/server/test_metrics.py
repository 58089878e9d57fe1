"""The Prometheus endpoint of a broker process: names, labels and values after real traffic."""

from __future__ import annotations

import os
import struct
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from broker.protocol import ApiKey

from .test_api import fetch, produce
from .wire import Wire, make_batch


def scrape(broker) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(broker.metrics_url, timeout=30) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_metrics_after_produce_fetch_and_errors(broker_factory):
    b = broker_factory(log_flush_interval_messages=1)
    with Wire(b.bootstrap) as w:
        for _ in range(3):
            produce(w, "m", make_batch([b"a", b"b"]))
        produce(w, "m", make_batch([b"c"]), partition=5)
        got = fetch(w, "m", 0)
        fetch(w, "m", 99)
        w.call(ApiKey.METADATA, 9, {"topics": None})
        size = len(got["records"])
        with Wire(b.bootstrap) as bad:
            bad.send_raw(struct.pack(">i", -1))
            assert bad.is_closed_by_peer()
        s = scrape(b)
    assert value(s, "kafkapy_requests_total", api="Produce") == 4
    assert value(s, "kafkapy_requests_total", api="Fetch") == 2
    assert value(s, "kafkapy_request_duration_seconds_count", api="Metadata") == 1
    assert value(s, "kafkapy_request_duration_seconds_bucket", api="Produce", le="+Inf") == 4
    assert value(s, "kafkapy_messages_in_total", topic="m") == 6
    assert value(s, "kafkapy_bytes_in_total", topic="m") == 3 * len(make_batch([b"a", b"b"]))
    assert value(s, "kafkapy_bytes_out_total", topic="m") == size
    assert value(s, "kafkapy_produce_errors_total", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert value(s, "kafkapy_fetch_errors_total", error="OFFSET_OUT_OF_RANGE") == 1
    assert value(s, "kafkapy_log_size_bytes", topic="m", partition="0") == size
    assert value(s, "kafkapy_log_segments", topic="m", partition="0") == 1
    assert value(s, "kafkapy_log_end_offset", topic="m", partition="0") == 6
    assert value(s, "kafkapy_log_start_offset", topic="m", partition="0") == 0
    assert value(s, "kafkapy_active_connections") == 1
    assert value(s, "kafkapy_connections_total") == 2
    assert value(s, "kafkapy_protocol_errors_total", reason="too_large") == 1
    assert ("kafkapy_log_flush_duration_seconds_count", ()) in s
    # the three appends went through the log dir's writer thread, nothing is left queued
    (log_dir,) = {dict(labels)["log_dir"] for name, labels in s if name == "kafkapy_log_appender_queued"}
    assert value(s, "kafkapy_log_appender_appends_total", log_dir=log_dir) == 3
    assert 1 <= value(s, "kafkapy_log_appender_groups_total", log_dir=log_dir) <= 3
    assert value(s, "kafkapy_log_appender_queued", log_dir=log_dir) == 0
    # each produce found the writer idle and waited for its append on the loop (unless the machine was so
    # busy that a wait ran out: the dir is then not waited for during a second)
    waits = value(s, "kafkapy_log_appender_prompt_waits_total", log_dir=log_dir)
    assert 1 <= waits <= 3
    assert value(s, "kafkapy_log_appender_prompt_waits_timed_out_total", log_dir=log_dir) <= waits


def test_every_answered_request_is_counted_once_across_batches_and_scrapes(broker_factory):
    """Requests are counted in batches on the loop and at each scrape: none lost, none twice."""
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        for _ in range(100):  # more than one batch, then a remainder only a scrape counts
            produce(w, "c", make_batch([b"x"]))
        s1 = scrape(b)
        for _ in range(30):
            produce(w, "c", make_batch([b"x"]))
        s2 = scrape(b)
    assert value(s1, "kafkapy_requests_total", api="Produce") == 100
    assert value(s1, "kafkapy_messages_in_total", topic="c") == 100
    assert value(s1, "kafkapy_request_queue_time_seconds_count", api="Produce") == 100
    assert value(s2, "kafkapy_requests_total", api="Produce") == 130
    assert value(s2, "kafkapy_request_duration_seconds_count", api="Produce") == 130
    assert value(s2, "kafkapy_bytes_in_total", topic="c") == 130 * len(make_batch([b"x"]))


def test_metrics_port_off(broker_factory):
    b = broker_factory(metrics_port=-1)
    assert b.metrics_port is None
    with Wire(b.bootstrap) as w:
        assert w.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_process_metrics_and_no_created_series(broker_factory):
    """The standard process figures describe the broker process itself, and no
    counter or histogram carries a ``_created`` twin."""
    before = time.time()
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        produce(w, "m", make_batch([b"a"]))
        with urllib.request.urlopen(b.metrics_url, timeout=30) as response:
            text = response.read().decode()
        open_fds = len(os.listdir(f"/proc/{b.pid}/fd"))
    s = scrape(b)
    assert "_created" not in text
    assert value(s, "process_cpu_seconds_total") > 0
    with open(f"/proc/{b.pid}/status") as f:
        rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    # the broker's own RSS, give or take what changed between the two reads
    assert abs(value(s, "process_resident_memory_bytes") - rss_kb * 1024) < 0.5 * rss_kb * 1024
    # the scrape's own connection and the client's come and go; the broker's files stay
    assert abs(value(s, "process_open_fds") - open_fds) <= 8
    assert value(s, "process_max_fds") >= value(s, "process_open_fds")
    assert before - 1 <= value(s, "process_start_time_seconds") <= time.time()  # /proc counts in 10 ms ticks
    assert any(name == "python_info" for name, _ in s)
    assert any(name.startswith("python_gc_") for name, _ in s)


def test_startup_freezes_the_loaded_logs(broker_factory):
    """``python -m broker`` takes what start-up loaded out of garbage collection (``gc.freeze``) and says
    how much on ``/metrics``: full collections then skip the loaded logs however many there are."""
    from confluent_kafka.admin import AdminClient, NewTopic

    partitions = 300
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for future in admin.create_topics([NewTopic("big", partitions, 1)]).values():
        future.result(60)
    with Wire(b.bootstrap) as w:
        for p in range(0, partitions, 10):
            assert produce(w, "big", make_batch([b"x"]), partition=p)["error_code"] == 0
    empty_start = value(scrape(b), "kafkapy_gc_frozen_objects")
    assert empty_start > 0  # even an empty broker freezes its modules and metadata

    b.restart()  # now start-up loads the 300 logs
    loaded = value(scrape(b), "kafkapy_gc_frozen_objects")
    assert loaded > empty_start + 10 * partitions, (empty_start, loaded)  # some 57 objects per partition


def test_frozen_logs_of_a_deleted_topic_are_freed(tmp_path):
    """Freezing leaks no deleted topic: its logs, frozen with everything else, are freed by reference
    counting once the topic is deleted (a frozen object held in a reference cycle would never be)."""
    import asyncio
    import gc

    from broker.config import BrokerConfig
    from broker.server.broker import Broker

    partitions = 300
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                           "metrics.port": -1, "log.segment.delete.delay.ms": 0})

    async def main():
        broker = Broker(config)
        await broker.start()
        try:
            await broker.topics.create_topic("big", num_partitions=partitions)
            await broker.topics.create_topic("kept", num_partitions=1)
            gc.collect()
            gc.freeze()  # as python -m broker does after start-up, here with the topic's logs loaded
            try:
                frozen = gc.get_freeze_count()
                await broker.topics.delete_topic("big")
                # Until the logs are gone and freed; the deadline guards against a hang, it is not a timing.
                deadline = asyncio.get_running_loop().time() + 60
                while (any(tp[0] == "big" for tp in broker.log_manager.logs())
                       or frozen - gc.get_freeze_count() <= 45 * partitions):
                    if asyncio.get_running_loop().time() > deadline:
                        break
                    await asyncio.sleep(0.05)
                assert not any(tp[0] == "big" for tp in broker.log_manager.logs()), "the deleted topic's logs stayed"
                freed = frozen - gc.get_freeze_count()
            finally:
                gc.unfreeze()
            assert broker.topics.get("kept") is not None
            return freed
        finally:
            await broker.stop()

    freed = asyncio.run(main())
    assert freed > 45 * partitions, freed  # about 57 a partition; a leak keeps most of them
