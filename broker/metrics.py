"""Prometheus instruments of the broker, served on their own HTTP port.

Every instrument lives in the :class:`BrokerMetrics` object's own registry (not
prometheus-client's global one), so several brokers can run in one process
(tests) without colliding. Names, all prefixed ``kafkapy_``:

=====================================================  =========  ==========================
name                                                   type       labels
=====================================================  =========  ==========================
kafkapy_requests_total                                 counter    api
kafkapy_request_duration_seconds                       histogram  api
kafkapy_request_errors_total                           counter    api, error (closed connection)
kafkapy_bytes_in_total                                 counter    topic  (produced batch bytes)
kafkapy_bytes_out_total                                counter    topic  (fetched record bytes)
kafkapy_messages_in_total                              counter    topic  (produced records)
kafkapy_produce_errors_total                           counter    error  (Kafka error name)
kafkapy_fetch_errors_total                             counter    error
kafkapy_log_flush_duration_seconds                     histogram  -
kafkapy_active_connections                             gauge      -
kafkapy_offline_log_dirs                               gauge      -      (failed by an I/O error)
kafkapy_connections_total                              counter    -      (accepted)
kafkapy_protocol_errors_total                          counter    reason (garbage, too_large, ...)
kafkapy_log_size_bytes                                 gauge      topic, partition (on scrape)
kafkapy_log_segments                                   gauge      topic, partition (on scrape)
kafkapy_log_end_offset                                 gauge      topic, partition (on scrape)
kafkapy_log_start_offset                               gauge      topic, partition (on scrape)
kafkapy_groups                                         gauge      state  (on scrape)
kafkapy_offsets_cached                                 gauge      -      (on scrape)
kafkapy_group_rebalances_total                         counter    -      (rebalances completed)
kafkapy_offset_commits_total                           counter    -      (partition offsets stored)
kafkapy_coordinator_load_duration_seconds              histogram  -      (per __consumer_offsets partition)
kafkapy_log_appender_queued                            gauge      log_dir (appends waiting; on scrape)
kafkapy_log_appender_groups_total                      counter    log_dir (group writes; on scrape)
kafkapy_log_appender_appends_total                     counter    log_dir (appends written; on scrape)
=====================================================  =========  ==========================

Beside them, without the prefix, the standard figures every Prometheus client
exports for its process: ``process_cpu_seconds_total``,
``process_resident_memory_bytes``, ``process_virtual_memory_bytes``,
``process_open_fds``, ``process_max_fds``, ``process_start_time_seconds``,
``python_info`` and ``python_gc_*``, so the usual dashboards and alerts on
CPU, memory and file descriptors work unchanged.

Counters and histograms have no ``<name>_created`` twin: prometheus-client
adds one per labelled series by default, doubling every scrape for a
timestamp nobody queries. Turning them off is process-wide in
prometheus-client, so importing this module does it.

appends / groups is the mean group size: near 1 on a quiet broker, larger when
appends queue up behind a busy disk. A queue that keeps growing on one log dir
is a slow or stalled disk.

The per-partition gauges come from a collector that asks the log manager when
``/metrics`` is scraped (in the HTTP server's thread; it only reads plain
attributes of the logs); the group gauges likewise ask the group coordinator for
a snapshot. Instruments are thread-safe (prometheus-client).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram, PlatformCollector,
                               ProcessCollector, disable_created_metrics, make_wsgi_app)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

disable_created_metrics()

PREFIX = "kafkapy_"
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # scrapes are not worth a log line each
        pass


class _LogCollector(Collector):
    """Per-partition log gauges, read from ``logs()`` at scrape time."""

    def __init__(self, logs: Callable[[], Iterable]) -> None:
        self._logs = logs

    def collect(self):
        size = GaugeMetricFamily(PREFIX + "log_size_bytes", "Bytes in the partition's log.", labels=["topic", "partition"])
        segments = GaugeMetricFamily(PREFIX + "log_segments", "Segments in the partition's log.", labels=["topic", "partition"])
        end = GaugeMetricFamily(PREFIX + "log_end_offset", "Log end offset.", labels=["topic", "partition"])
        start = GaugeMetricFamily(PREFIX + "log_start_offset", "Log start offset.", labels=["topic", "partition"])
        try:
            entries = list(self._logs())
        except Exception:  # a scrape must never take anything down
            log.exception("collecting log metrics failed")
            entries = []
        for (topic, partition), plog in entries:
            labels = [topic, str(partition)]
            try:
                size.add_metric(labels, plog.size_in_bytes)
                segments.add_metric(labels, len(plog.segments))
                end.add_metric(labels, plog.log_end_offset)
                start.add_metric(labels, plog.log_start_offset)
            except Exception:  # a log being deleted while we look at it
                continue
        yield from (size, segments, end, start)


class _AppenderCollector(Collector):
    """Per log dir appender figures from ``stats()`` -> {log dir: (queued, groups, appends)} at scrape time."""

    def __init__(self, stats: Callable[[], dict]) -> None:
        self._stats = stats

    def collect(self):
        queued = GaugeMetricFamily(PREFIX + "log_appender_queued", "Appends waiting for the log dir's writer.",
                                   labels=["log_dir"])
        groups = CounterMetricFamily(PREFIX + "log_appender_groups", "Group writes by the log dir's writer.",
                                     labels=["log_dir"])
        appends = CounterMetricFamily(PREFIX + "log_appender_appends", "Appends written by the log dir's writer.",
                                      labels=["log_dir"])
        try:
            stats = self._stats()
        except Exception:  # a scrape must never take anything down
            log.exception("collecting appender metrics failed")
            stats = {}
        for log_dir, (q, g, a) in stats.items():
            labels = [str(log_dir)]
            queued.add_metric(labels, q)
            groups.add_metric(labels, g)
            appends.add_metric(labels, a)
        yield from (queued, groups, appends)


GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


class _GroupCollector(Collector):
    """Groups by state and offsets cached, from ``snapshot()`` -> (state name -> groups, offsets) at scrape time."""

    def __init__(self, snapshot: Callable[[], tuple[dict[str, int], int]]) -> None:
        self._snapshot = snapshot

    def collect(self):
        groups = GaugeMetricFamily(PREFIX + "groups", "Consumer groups this broker coordinates, by state.",
                                   labels=["state"])
        offsets = GaugeMetricFamily(PREFIX + "offsets_cached", "Committed offsets held in the coordinator's cache.")
        try:
            by_state, cached = self._snapshot()
        except Exception:  # a scrape must never take anything down
            log.exception("collecting group metrics failed")
            by_state, cached = {}, 0
        for state in dict.fromkeys(GROUP_STATES + tuple(by_state)):
            groups.add_metric([state], by_state.get(state, 0))
        offsets.add_metric([], cached)
        yield from (groups, offsets)


class BrokerMetrics:
    """The broker's instruments; see the module docstring for the names."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.requests = Counter(PREFIX + "requests", "Requests handled, by API.", ["api"], registry=r)
        self.request_duration = Histogram(
            PREFIX + "request_duration_seconds", "Time from a request's arrival to its response being queued.",
            ["api"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.request_errors = Counter(
            PREFIX + "request_errors", "Requests that closed their connection, by API and reason.",
            ["api", "error"], registry=r,
        )
        self.bytes_in = Counter(PREFIX + "bytes_in", "Record batch bytes appended, by topic.", ["topic"], registry=r)
        self.bytes_out = Counter(PREFIX + "bytes_out", "Record bytes sent to fetchers, by topic.", ["topic"], registry=r)
        self.messages_in = Counter(PREFIX + "messages_in", "Records appended, by topic.", ["topic"], registry=r)
        self.produce_errors = Counter(
            PREFIX + "produce_errors", "Partition-level produce errors, by Kafka error name.", ["error"], registry=r
        )
        self.fetch_errors = Counter(
            PREFIX + "fetch_errors", "Partition-level fetch errors, by Kafka error name.", ["error"], registry=r
        )
        self.log_flush_duration = Histogram(
            PREFIX + "log_flush_duration_seconds", "Duration of log flushes (fsync).", buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.active_connections = Gauge(PREFIX + "active_connections", "Open client connections.", registry=r)
        self.offline_log_dirs = Gauge(PREFIX + "offline_log_dirs", "Log dirs taken offline by an I/O error.",
                                      registry=r)
        self.connections = Counter(PREFIX + "connections", "Client connections accepted.", registry=r)
        self.protocol_errors = Counter(
            PREFIX + "protocol_errors", "Connections closed for bad input, by reason.", ["reason"], registry=r
        )
        self.group_rebalances = Counter(
            PREFIX + "group_rebalances", "Rebalances completed: a new generation became Stable.", registry=r
        )
        self.offset_commits = Counter(
            PREFIX + "offset_commits", "Partition offsets committed to __consumer_offsets.", registry=r
        )
        self.coordinator_load_duration = Histogram(
            PREFIX + "coordinator_load_duration_seconds", "Time to load one partition of __consumer_offsets.",
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self._server = None
        self._thread = None
        self.port: int | None = None
        self._api_instruments: dict[str, tuple] = {}
        self._topic_in: dict[str, tuple] = {}

    # Labelled children cached per label value: ``labels()`` costs a lock and a
    # tuple build each call, and these run once or twice per request.
    def api_instruments(self, api: str) -> tuple:
        """``(requests_total, request_duration_seconds)`` children for one API name."""
        pair = self._api_instruments.get(api)
        if pair is None:
            pair = self._api_instruments[api] = (self.requests.labels(api), self.request_duration.labels(api))
        return pair

    def topic_in(self, topic: str) -> tuple:
        """``(bytes_in_total, messages_in_total)`` children for one topic."""
        pair = self._topic_in.get(topic)
        if pair is None:
            pair = self._topic_in[topic] = (self.bytes_in.labels(topic), self.messages_in.labels(topic))
        return pair

    def watch_logs(self, logs: Callable[[], Iterable]) -> None:
        """Report per-partition log gauges from ``logs()`` -> iterable of ((topic, partition), log)."""
        self.registry.register(_LogCollector(logs))

    def watch_appenders(self, stats: Callable[[], dict]) -> None:
        """Report the log dirs' appender figures from ``stats()`` -> {log dir: (queued, groups, appends)}."""
        self.registry.register(_AppenderCollector(stats))

    def watch_groups(self, snapshot: Callable[[], tuple[dict[str, int], int]]) -> None:
        """Report group gauges from ``snapshot()`` -> ({state name: groups}, offsets cached)."""
        self.registry.register(_GroupCollector(snapshot))

    def start_http(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (0 = ephemeral) in a daemon thread; returns the bound port."""
        self._server = make_server(host, port, make_wsgi_app(self.registry), _ThreadingWSGIServer,
                                   handler_class=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="metrics-http", daemon=True)
        self._thread.start()
        self.port = self._server.server_port
        return self.port

    def stop_http(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
