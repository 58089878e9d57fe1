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
kafkapy_tls_handshake_failures_total                   counter    listener (refused or abandoned TLS handshakes)
kafkapy_fetch_sessions                                 gauge      -      (incremental fetch sessions, KIP-227)
kafkapy_fetch_session_partitions                       gauge      -      (partitions they hold)
kafkapy_fetch_session_evictions_total                  counter    -      (taken for a new session)
kafkapy_listener_connections                           gauge      listener (held against the connection limits)
kafkapy_listener_max_connections                       gauge      listener (its max.connections in force)
kafkapy_connections_refused_total                      counter    listener, limit (closed at accept for
                                                                  max.connections.per.ip, or to get within
                                                                  max.connections)
kafkapy_acceptor_blocked_seconds_total                 counter    listener (not accepting: a limit or the rate)
kafkapy_connection_accept_throttle_seconds_total       counter    listener (max.connection.creation.rate waits)
kafkapy_connection_accept_throttled_total              counter    listener
kafkapy_successful_authentication_total                counter    listener, mechanism (SASL)
kafkapy_failed_authentication_total                    counter    listener, mechanism (SASL: wrong password,
                                                                  unknown user, bad exchange)
kafkapy_successful_reauthentication_total              counter    listener, mechanism (KIP-368)
kafkapy_failed_reauthentication_total                  counter    listener, mechanism (KIP-368)
kafkapy_expired_connections_killed_total               counter    listener (a request after the session ended)
kafkapy_log_size_bytes                                 gauge      topic, partition (on scrape)
kafkapy_log_segments                                   gauge      topic, partition (on scrape)
kafkapy_log_end_offset                                 gauge      topic, partition (on scrape)
kafkapy_log_start_offset                               gauge      topic, partition (on scrape)
kafkapy_groups                                         gauge      state  (on scrape)
kafkapy_offsets_cached                                 gauge      -      (on scrape)
kafkapy_group_rebalances_total                         counter    -      (rebalances completed)
kafkapy_share_groups                                   gauge      state  (share groups this broker coordinates;
                                                                  on scrape)
kafkapy_share_group_members                            gauge      -      (their members; on scrape)
kafkapy_share_sessions                                 gauge      -      (share sessions open here; on scrape)
kafkapy_share_partitions                               gauge      -      (share-partitions held here; on scrape)
kafkapy_share_records                                  gauge      state  (records of those between the start
                                                                  offset and the next: acquired, available,
                                                                  acknowledged, archived; on scrape)
kafkapy_offset_commits_total                           counter    -      (partition offsets stored)
kafkapy_coordinator_load_duration_seconds              histogram  -      (per __consumer_offsets partition)
kafkapy_log_appender_queued                            gauge      log_dir (appends waiting; on scrape)
kafkapy_log_appender_groups_total                      counter    log_dir (group writes; on scrape)
kafkapy_log_appender_appends_total                     counter    log_dir (appends written; on scrape)
kafkapy_request_queue_time_seconds                     histogram  api    (arrival to handler start)
kafkapy_log_cleaner_threads                            gauge      -      (cleaner threads running; on scrape)
kafkapy_gc_frozen_objects                              gauge      -      (set once, after start-up; see below)
kafkapy_client_quota_rate                              gauge      quota, user, client_id (on scrape; see
                                                                  broker.server.quotas)
kafkapy_client_quota_limit                             gauge      quota, user, client_id (on scrape)
kafkapy_client_quota_throttle_seconds_total            counter    quota, user, client_id (on scrape)
kafkapy_client_quota_throttled_total                   counter    quota, user, client_id (on scrape)
kafkapy_client_telemetry_clients                       gauge      -      (clients known to the client metrics,
                                                                  KIP-714; on scrape)
kafkapy_client_telemetry_pushes_total                  counter    error  (PushTelemetry answers, by error)
=====================================================  =========  ==========================

The metrics clients push (KIP-714) are served beside these, under their own names
(``org_apache_kafka_*``): see :mod:`broker.server.client_metrics`.

Cluster health, read on scrape from the replica manager, the controller and the
log manager (:mod:`broker.server.health`; nothing on the request path):

=====================================================  =========  ==========================
kafkapy_under_replicated_partitions                    gauge      -      (led here, ISR < replicas)
kafkapy_under_min_isr_partitions                       gauge      -      (led here, ISR < min.insync.replicas)
kafkapy_at_min_isr_partitions                          gauge      -      (led here, ISR = min.insync.replicas)
kafkapy_leader_partitions                              gauge      -      (partitions this broker leads)
kafkapy_partitions                                     gauge      -      (replicas this broker holds)
kafkapy_offline_replicas                               gauge      -      (replicas in a failed log dir)
kafkapy_isr_shrinks_total                              counter    -      (ISR shrinks written by this leader)
kafkapy_isr_expands_total                              counter    -
kafkapy_replica_fetcher_max_lag                        gauge      -      (max over followed partitions of
                                                                          leader high watermark - our log end)
kafkapy_controller_active                              gauge      -      (1 on the controller, 0 elsewhere)
kafkapy_offline_partitions                             gauge      -      (no live leader; controller only)
kafkapy_controller_partitions                          gauge      -      (every partition; controller only)
kafkapy_controller_topics                              gauge      -      (controller only)
kafkapy_controller_events_total                        counter    event  (events processed, by type)
kafkapy_controller_event_queue_size                    gauge      -
=====================================================  =========  ==========================

Kafka's names. The same signals are exported again under the names the
Prometheus JMX exporter gives Kafka's MBeans in the community's standard
configuration (Strimzi's ``kafka-metrics.yaml``, ``lowercaseOutputName``), so
existing dashboards and alerts work unchanged:
``kafka_server_replicamanager_{underreplicatedpartitions,underminisrpartitioncount,
atminisrpartitioncount,leadercount,partitioncount,offlinereplicacount}``,
``kafka_server_replicamanager_{isrshrinks,isrexpands}_total``,
``kafka_server_replicafetchermanager_maxlag{clientId="Replica"}``,
``kafka_controller_kafkacontroller_{activecontrollercount,offlinepartitionscount,
globalpartitioncount,globaltopiccount}``,
``kafka_controller_controllereventmanager_eventqueuesize``,
``kafka_log_logmanager_offlinelogdirectorycount`` and
``kafka_server_brokertopicmetrics_{bytesin,bytesout,messagesin}_total{topic}``
(copies of ``kafkapy_bytes_in_total`` etc. made at scrape time) and
``kafka_server_socket_server_metrics_{successful,failed}_authentication_total{listener}``
(SASL; Kafka's ``networkProcessor`` label has no counterpart here).

Consumer lag under kafka_exporter's names, for the groups this broker
coordinates (every committed offset of a partition this broker holds a replica
of; the end is that replica's high watermark, which on a follower is the
leader's as of its last fetch): ``kafka_consumergroup_current_offset`` and
``kafka_consumergroup_lag`` (high watermark minus committed offset, never
below 0) with labels ``consumergroup, topic, partition``; their sums per
group and topic ``kafka_consumergroup_current_offset_sum`` and
``kafka_consumergroup_lag_sum``; ``kafka_consumergroup_members{consumergroup}``.

Beside them, without the prefix, the standard figures every Prometheus client
exports for its process: ``process_cpu_seconds_total``,
``process_resident_memory_bytes``, ``process_virtual_memory_bytes``,
``process_open_fds``, ``process_max_fds``, ``process_start_time_seconds``,
``python_info`` and ``python_gc_*``, so the usual dashboards and alerts on
CPU, memory and file descriptors work unchanged.

``kafkapy_gc_frozen_objects`` is how many objects ``python -m broker`` took
out of Python's garbage collection once start-up was done (``gc.freeze()``,
after one full collection): the loaded logs, their segments and indexes, the
metadata. Full collections then scan only what was made later, so they stay
short however many partitions the broker holds (with 2,000 partitions loaded,
43-81 ms with the event loop stopped before, about 0.05 ms frozen).
Partitions created while the broker runs are frozen at its next start. The
figure is taken once, when the heap is frozen (counting frozen objects walks
them all); frozen objects that are dropped later (a deleted topic's logs) are
still freed by reference counting, but not counted off. It is 0 in a broker
that runs inside another program (tests).

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

import bisect
import collections
import logging
import os
import selectors
import threading
from socketserver import ThreadingMixIn
from typing import Callable, Iterable, NamedTuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram, PlatformCollector,
                               ProcessCollector, disable_created_metrics, make_wsgi_app)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

log = logging.getLogger(__name__)

disable_created_metrics()

PREFIX = "kafkapy_"
COUNT_BATCH = 64  # answered requests noted before the loop takes them into the instruments (see count_request)
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_SLOTS = len(_LATENCY_BUCKETS) + 1  # a request histogram's counts: one per bucket, and +Inf


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # scrapes are not worth a log line each
        pass


class MetricsHTTPServer:
    """Serves ``registry`` at ``/metrics`` over HTTP from a daemon thread, each scrape on a thread of its own.

    The accepting thread sleeps until a scrape connects or :meth:`stop` is
    called (a byte on a pipe). socketserver's ``serve_forever`` instead wakes
    every ``poll_interval`` to look for a shutdown request, and each wake-up
    takes the GIL from the process's event loop. ``port`` is the bound port
    (``port`` 0 asks for an ephemeral one).
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._server = make_server(host, port, make_wsgi_app(registry), _ThreadingWSGIServer,
                                   handler_class=_QuietHandler)
        self._server.timeout = 0  # handle_request: never wait for a connection that is gone again
        self.port: int = self._server.server_port
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="metrics-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._server, selectors.EVENT_READ)
            selector.register(self._stop_r, selectors.EVENT_READ)
            while True:
                ready = selector.select()
                if any(key.fd == self._stop_r for key, _events in ready):
                    return
                self._server.handle_request()  # a connection is waiting: accepted at once

    def stop(self) -> None:
        """Stop accepting scrapes and close the socket (scrapes in progress finish on their threads)."""
        os.write(self._stop_w, b"\0")
        self._thread.join()
        self._server.server_close()
        os.close(self._stop_r)
        os.close(self._stop_w)


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


class _CountAnswered(Collector):
    """Registered first: a scrape first counts the requests answered since the last count."""

    def __init__(self, count: Callable[[], None]) -> None:
        self._count = count

    def collect(self):
        try:
            self._count()
        except Exception:  # a scrape must never take anything down
            log.exception("counting answered requests failed")
        return []


class _RequestHistograms(Collector):
    """``kafkapy_request_duration_seconds`` and ``kafkapy_request_queue_time_seconds``, by API.

    Kept as plain counts per bucket, which :meth:`BrokerMetrics.count_answered`
    fills under ``lock`` (a bisect and two additions per request; a
    prometheus-client ``Histogram`` costs a lock and several calls per
    observation), and made cumulative at scrape time.

    ``by_api`` maps an API name to ``[duration counts, duration sum, queue
    counts, queue sum]``; a counts list has one slot per bucket of
    ``_LATENCY_BUCKETS`` plus one for ``+Inf``, and a value equal to a bound
    falls in that bound's bucket (``le``), as in Prometheus.
    """

    _LE = [floatToGoString(b) for b in _LATENCY_BUCKETS] + ["+Inf"]

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.by_api: dict[str, list] = {}

    def collect(self):
        duration = HistogramMetricFamily(PREFIX + "request_duration_seconds",
                                          "Time from a request's arrival to its response being queued.", labels=["api"])
        queue_time = HistogramMetricFamily(PREFIX + "request_queue_time_seconds",
                                           "Time from a request's arrival to its handler's start.", labels=["api"])
        with self._lock:
            taken = [(api, list(d), d_sum, list(q), q_sum) for api, (d, d_sum, q, q_sum) in self.by_api.items()]
        for api, d, d_sum, q, q_sum in taken:
            duration.add_metric([api], self._cumulative(d), d_sum)
            queue_time.add_metric([api], self._cumulative(q), q_sum)
        yield duration
        yield queue_time

    @classmethod
    def _cumulative(cls, counts: list) -> list[tuple[str, float]]:
        total = 0
        buckets = []
        for le, n in zip(cls._LE, counts):
            total += n
            buckets.append((le, total))
        return buckets


class _AppenderCollector(Collector):
    """Per log dir appender figures at scrape time, from ``stats()`` ->
    {log dir: (queued, groups, appends, waits, waits timed out)}."""

    def __init__(self, stats: Callable[[], dict]) -> None:
        self._stats = stats

    def collect(self):
        queued = GaugeMetricFamily(PREFIX + "log_appender_queued", "Appends waiting for the log dir's writer.",
                                   labels=["log_dir"])
        counters = [CounterMetricFamily(PREFIX + name, doc, labels=["log_dir"]) for name, doc in (
            ("log_appender_groups", "Group writes by the log dir's writer."),
            ("log_appender_appends", "Appends written by the log dir's writer."),
            ("log_appender_prompt_waits", "Produce requests that waited on the event loop for their append "
                                          "(taken at once by an idle writer)."),
            ("log_appender_prompt_waits_timed_out", "Such waits that ran out (the disk or the CPU was slow): "
                                                    "the log dir is not waited for during a second after each."),
        )]
        try:
            stats = self._stats()
        except Exception:  # a scrape must never take anything down
            log.exception("collecting appender metrics failed")
            stats = {}
        for log_dir, (q, *figures) in stats.items():
            labels = [str(log_dir)]
            queued.add_metric(labels, q)
            for family, value in zip(counters, figures):
                family.add_metric(labels, value)
        yield queued
        yield from counters


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


class _ShareCollector(Collector):
    """Share group gauges from ``snapshot()`` -> (groups by state, members, sessions, share-partitions, records
    by state) at scrape time."""

    def __init__(self, snapshot: Callable[[], tuple]) -> None:
        self._snapshot = snapshot

    def collect(self):
        groups = GaugeMetricFamily(PREFIX + "share_groups", "Share groups this broker coordinates, by state.",
                                   labels=["state"])
        members = GaugeMetricFamily(PREFIX + "share_group_members", "Members of the share groups coordinated here.")
        sessions = GaugeMetricFamily(PREFIX + "share_sessions", "Share sessions open on this broker.")
        partitions = GaugeMetricFamily(PREFIX + "share_partitions", "Share-partitions this broker holds as leader.")
        records = GaugeMetricFamily(PREFIX + "share_records", "Records of those share-partitions, by state.",
                                    labels=["state"])
        try:
            by_state, member_count, session_count, partition_count, record_states = self._snapshot()
        except Exception:  # a scrape must never take anything down
            log.exception("collecting share group metrics failed")
            by_state, member_count, session_count, partition_count, record_states = {}, 0, 0, 0, {}
        for state in ("Empty", "Stable"):
            groups.add_metric([state], by_state.get(state, 0))
        members.add_metric([], member_count)
        sessions.add_metric([], session_count)
        partitions.add_metric([], partition_count)
        for state in ("acquired", "available", "acknowledged", "archived"):
            records.add_metric([state], record_states.get(state, 0))
        yield from (groups, members, sessions, partitions, records)


class Health(NamedTuple):
    """One scrape's view of the broker's health (made by :func:`broker.server.health.health_snapshot`)."""

    under_replicated: int
    under_min_isr: int
    at_min_isr: int
    leaders: int
    partitions: int
    offline_replicas: int
    isr_shrinks: int
    isr_expands: int
    fetcher_max_lag: int
    offline_log_dirs: int
    controller_active: bool
    offline_partitions: int
    global_partitions: int
    global_topics: int
    controller_events: dict[str, int]
    controller_queue_size: int


#: (Health field, kafkapy_ name, Kafka's name (JMX exporter, Strimzi rules), help)
_HEALTH_GAUGES = (
    ("under_replicated", "under_replicated_partitions", "kafka_server_replicamanager_underreplicatedpartitions",
     "Partitions led here whose ISR is smaller than their replica set."),
    ("under_min_isr", "under_min_isr_partitions", "kafka_server_replicamanager_underminisrpartitioncount",
     "Partitions led here whose ISR is smaller than min.insync.replicas."),
    ("at_min_isr", "at_min_isr_partitions", "kafka_server_replicamanager_atminisrpartitioncount",
     "Partitions led here whose ISR is exactly min.insync.replicas."),
    ("leaders", "leader_partitions", "kafka_server_replicamanager_leadercount", "Partitions this broker leads."),
    ("partitions", "partitions", "kafka_server_replicamanager_partitioncount", "Replicas this broker holds."),
    ("offline_replicas", "offline_replicas", "kafka_server_replicamanager_offlinereplicacount",
     "Replicas of this broker in a failed log dir."),
    ("fetcher_max_lag", "replica_fetcher_max_lag", "kafka_server_replicafetchermanager_maxlag",
     "Largest leader high watermark minus our log end over the partitions this broker follows."),
    ("offline_log_dirs", None, "kafka_log_logmanager_offlinelogdirectorycount", "Log dirs taken offline."),
    ("controller_active", "controller_active", "kafka_controller_kafkacontroller_activecontrollercount",
     "1 on the active controller, 0 elsewhere."),
    ("offline_partitions", "offline_partitions", "kafka_controller_kafkacontroller_offlinepartitionscount",
     "Partitions without a live leader (reported by the controller, 0 elsewhere)."),
    ("global_partitions", "controller_partitions", "kafka_controller_kafkacontroller_globalpartitioncount",
     "Partitions of the cluster (reported by the controller, 0 elsewhere)."),
    ("global_topics", "controller_topics", "kafka_controller_kafkacontroller_globaltopiccount",
     "Topics of the cluster (reported by the controller, 0 elsewhere)."),
    ("controller_queue_size", "controller_event_queue_size", "kafka_controller_controllereventmanager_eventqueuesize",
     "Controller events waiting."),
)
_FETCHER_LABELS = {"kafka_server_replicafetchermanager_maxlag": ("clientId", "Replica")}


class _HealthCollector(Collector):
    """Health gauges and counters from ``snapshot()`` -> :class:`Health`, under both naming schemes."""

    def __init__(self, snapshot: Callable[[], Health]) -> None:
        self._snapshot = snapshot

    def collect(self):
        try:
            h = self._snapshot()
        except Exception:  # a scrape must never take anything down
            log.exception("collecting health metrics failed")
            return
        for field, ours, kafkas, doc in _HEALTH_GAUGES:
            value = int(getattr(h, field))
            if ours is not None:
                yield GaugeMetricFamily(PREFIX + ours, doc, value=value)
            label = _FETCHER_LABELS.get(kafkas)
            family = GaugeMetricFamily(kafkas, doc, labels=[label[0]] if label else None)
            family.add_metric([label[1]] if label else [], value)
            yield family
        for field, ours, kafkas, doc in (
                ("isr_shrinks", "isr_shrinks", "kafka_server_replicamanager_isrshrinks", "ISR shrinks written."),
                ("isr_expands", "isr_expands", "kafka_server_replicamanager_isrexpands", "ISR expands written.")):
            yield CounterMetricFamily(PREFIX + ours, doc, value=getattr(h, field))
            yield CounterMetricFamily(kafkas, doc, value=getattr(h, field))
        events = CounterMetricFamily(PREFIX + "controller_events", "Controller events processed, by type.",
                                     labels=["event"])
        for event, n in sorted(h.controller_events.items()):
            events.add_metric([event], n)
        yield events


class _TopicCopyCollector(Collector):
    """Kafka's names for some of our counters, copied at scrape time: each copy keeps ``labels`` (default
    ``topic``, BrokerTopicMetrics) and sums over the counter's other labels."""

    def __init__(self, copies: tuple[tuple, ...]) -> None:
        self._copies = copies

    def collect(self):
        for counter, name, doc, *rest in self._copies:
            labels = rest[0] if rest else ("topic",)
            family = CounterMetricFamily(name, doc, labels=list(labels))
            sums: dict[tuple, float] = {}
            for metric in counter.collect():
                for sample in metric.samples:
                    if sample.name.endswith("_total"):
                        key = tuple(sample.labels[label] for label in labels)
                        sums[key] = sums.get(key, 0.0) + sample.value
            for key, value in sums.items():
                family.add_metric(list(key), value)
            yield family


class _QuotaCollector(Collector):
    """Client quota rates and throttling, per entity with a live rate (see :mod:`broker.server.quotas`)."""

    def __init__(self, snapshot: Callable[[], Iterable[tuple]]) -> None:
        self._snapshot = snapshot

    def collect(self):
        labels = ["quota", "user", "client_id"]
        rate = GaugeMetricFamily(PREFIX + "client_quota_rate", "A client entity's measured rate: bytes/s for "
                                 "Produce and Fetch, percent of the event loop for Request.", labels=labels)
        limit = GaugeMetricFamily(PREFIX + "client_quota_limit", "The quota that entity's rate is held to.",
                                  labels=labels)
        seconds = CounterMetricFamily(PREFIX + "client_quota_throttle_seconds", "Time that entity's requests "
                                      "were throttled for.", labels=labels)
        throttled = CounterMetricFamily(PREFIX + "client_quota_throttled", "Requests of that entity throttled.",
                                        labels=labels)
        for quota, (user, client), value, bound, throttle_ms, times in self._snapshot():
            key = [quota, user, client]
            rate.add_metric(key, value)
            if bound is not None:
                limit.add_metric(key, bound)
            seconds.add_metric(key, throttle_ms / 1000)
            throttled.add_metric(key, times)
        yield from (rate, limit, seconds, throttled)


class GroupLag(NamedTuple):
    """One committed offset of a group this broker coordinates, and its partition's end (None: not held here)."""

    group: str
    topic: str
    partition: int
    committed: int
    end: int | None


class _LagCollector(Collector):
    """kafka_exporter's consumer group names from ``snapshot()`` -> (list of GroupLag, {group: members})."""

    def __init__(self, snapshot: Callable[[], tuple[list[GroupLag], dict[str, int]]]) -> None:
        self._snapshot = snapshot

    def collect(self):
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset of the group.",
                                    labels=["consumergroup", "topic", "partition"])
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the group's committed offset.",
                                labels=["consumergroup", "topic", "partition"])
        current_sum = GaugeMetricFamily("kafka_consumergroup_current_offset_sum",
                                        "Committed offsets of the group summed per topic.",
                                        labels=["consumergroup", "topic"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "The group's lag summed per topic.",
                                    labels=["consumergroup", "topic"])
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group.", labels=["consumergroup"])
        try:
            entries, member_counts = self._snapshot()
        except Exception:  # a scrape must never take anything down
            log.exception("collecting consumer lag failed")
            entries, member_counts = [], {}
        sums: dict[tuple[str, str], list[int]] = {}
        for e in entries:
            labels = [e.group, e.topic, str(e.partition)]
            current.add_metric(labels, e.committed)
            s = sums.setdefault((e.group, e.topic), [0, 0])
            s[0] += e.committed
            if e.end is not None:
                lag.add_metric(labels, max(0, e.end - e.committed))
                s[1] += max(0, e.end - e.committed)
        for (group, topic), (c, l) in sorted(sums.items()):
            current_sum.add_metric([group, topic], c)
            lag_sum.add_metric([group, topic], l)
        for group, n in sorted(member_counts.items()):
            members.add_metric([group], n)
        yield from (current, lag, current_sum, lag_sum, members)


class BrokerMetrics:
    """The broker's instruments; see the module docstring for the names."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        # Answered requests not counted yet (count_request): deque appends and pops are atomic,
        # so the loop adds while a scrape's thread counts.
        self._answered: collections.deque[tuple] = collections.deque()
        self._counting = threading.Lock()  # count_answered runs on the loop and on scrape threads
        self._request_histograms = _RequestHistograms(self._counting)
        r.register(_CountAnswered(self.count_answered))
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.gc_frozen_objects = Gauge(
            PREFIX + "gc_frozen_objects",
            "Objects set aside from garbage collection once start-up was done (gc.freeze).", registry=r)
        self.requests = Counter(PREFIX + "requests", "Requests handled, by API.", ["api"], registry=r)
        r.register(self._request_histograms)
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
        self.tls_handshake_failures = Counter(
            PREFIX + "tls_handshake_failures",
            "TLS handshakes on SSL listeners that failed (untrusted or missing client certificate, plaintext "
            "spoken to the TLS port, a client gone or silent past the handshake timeout).", ["listener"], registry=r,
        )
        self.fetch_sessions = Gauge(PREFIX + "fetch_sessions", "Incremental fetch sessions the broker keeps "
                                    "(KIP-227; Kafka's NumIncrementalFetchSessions).", registry=r)
        self.fetch_session_partitions = Gauge(
            PREFIX + "fetch_session_partitions", "Partitions the incremental fetch sessions hold (Kafka's "
            "NumIncrementalFetchPartitionsCached).", registry=r)
        self.fetch_session_evictions = Counter(
            PREFIX + "fetch_session_evictions", "Fetch sessions evicted to make room for a new one (Kafka's "
            "IncrementalFetchSessionEvictionsPerSec).", registry=r)
        self.listener_connections = Gauge(
            PREFIX + "listener_connections", "Connections a listener holds against the connection limits, from "
            "their accept (TLS handshakes included) to their close.", ["listener"], registry=r)
        self.listener_max_connections = Gauge(
            PREFIX + "listener_max_connections", "The listener's max.connections in force (2147483647: none).",
            ["listener"], registry=r)
        self.connections_refused = Counter(
            PREFIX + "connections_refused", "Connections closed by a connection limit: at their accept for "
            "max.connections.per.ip, or the least recently active to get within max.connections.",
            ["listener", "limit"], registry=r)
        self.acceptor_blocked = Counter(
            PREFIX + "acceptor_blocked_seconds", "Time the listener accepted nothing because of max.connections or "
            "max.connection.creation.rate (Kafka's AcceptorBlockedPercent).", ["listener"], registry=r)
        self.connection_accept_throttle = Counter(
            PREFIX + "connection_accept_throttle_seconds", "Waits imposed by max.connection.creation.rate before "
            "an accept (Kafka's connection-accept-throttle-time is this over the count).", ["listener"], registry=r)
        self.connection_accept_throttled = Counter(
            PREFIX + "connection_accept_throttled", "Accepts that waited for max.connection.creation.rate.",
            ["listener"], registry=r)
        self.successful_authentication = Counter(
            PREFIX + "successful_authentication", "SASL authentications that succeeded (Kafka's "
            "successful-authentication-total).", ["listener", "mechanism"], registry=r,
        )
        self.failed_authentication = Counter(
            PREFIX + "failed_authentication", "SASL authentications that failed: unknown user, wrong password, a "
            "mechanism not enabled, a request before authentication (Kafka's failed-authentication-total).",
            ["listener", "mechanism"], registry=r,
        )
        self.successful_reauthentication = Counter(
            PREFIX + "successful_reauthentication", "SASL re-authentications that succeeded (KIP-368; Kafka's "
            "successful-reauthentication-total).", ["listener", "mechanism"], registry=r,
        )
        self.failed_reauthentication = Counter(
            PREFIX + "failed_reauthentication", "SASL re-authentications that failed (a bad credential, another "
            "principal or mechanism; Kafka's failed-reauthentication-total).", ["listener", "mechanism"], registry=r,
        )
        self.expired_connections_killed = Counter(
            PREFIX + "expired_connections_killed", "Connections closed for a request after their SASL session "
            "ended without re-authentication (Kafka's expired-connections-killed-count).", ["listener"], registry=r,
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
        self.log_cleaner_threads = Gauge(PREFIX + "log_cleaner_threads", "Log cleaner threads running.",
                                         registry=r)
        r.register(_TopicCopyCollector((
            (self.bytes_in, "kafka_server_brokertopicmetrics_bytesin", "Record batch bytes appended, by topic."),
            (self.bytes_out, "kafka_server_brokertopicmetrics_bytesout", "Record bytes sent to fetchers, by topic."),
            (self.messages_in, "kafka_server_brokertopicmetrics_messagesin", "Records appended, by topic."),
            (self.successful_authentication, "kafka_server_socket_server_metrics_successful_authentication",
             "SASL authentications that succeeded, by listener.", ("listener",)),
            (self.failed_authentication, "kafka_server_socket_server_metrics_failed_authentication",
             "SASL authentications that failed, by listener.", ("listener",)),
            (self.successful_reauthentication, "kafka_server_socket_server_metrics_successful_reauthentication",
             "SASL re-authentications that succeeded, by listener.", ("listener",)),
            (self.failed_reauthentication, "kafka_server_socket_server_metrics_failed_reauthentication",
             "SASL re-authentications that failed, by listener.", ("listener",)),
            (self.expired_connections_killed, "kafka_server_socket_server_metrics_expired_connections_killed_count",
             "Connections closed after their SASL session ended, by listener.", ("listener",)))))
        self._http: MetricsHTTPServer | None = None
        self.port: int | None = None

    def count_request(self, api: str, received_at: float, started_at: float, answered_at: float,
                      produced: list | None) -> bool:
        """Note one answered request: its API's count, duration and queue time, and what it appended.

        The times are ``loop.time()`` readings: arrival, handler start, response
        ready. ``produced`` is None or ``[(topic, valid bytes, records), ...]``.
        The network layer calls this before the response can reach the client
        (a client that scrapes once answered must find the request counted), and
        it only appends to a deque. The instruments take in the noted requests
        at every scrape, before anything is collected, and ``COUNT_BATCH`` at a
        time on the loop: when this returns True, the caller calls
        :meth:`count_answered` once the response is written. So the bookkeeping
        neither delays an answer nor runs on the CPU right after one, when the
        client it woke may be waiting for that CPU.
        """
        answered = self._answered
        answered.append((api, received_at, started_at, answered_at, produced))
        return len(answered) >= COUNT_BATCH

    def count_answered(self) -> None:
        """Take the noted requests into the instruments (on the loop, or on a scrape's thread).

        The histograms are filled per request (:class:`_RequestHistograms`); the
        counters get one increment per API and per topic for the whole lot.
        """
        answered = self._answered
        with self._counting:
            histograms = self._request_histograms.by_api
            per_api: dict[str, int] = {}
            per_topic: dict[str, list] = {}
            while True:
                try:
                    api, received_at, started_at, answered_at, produced = answered.popleft()
                except IndexError:
                    break
                per_api[api] = per_api.get(api, 0) + 1
                h = histograms.get(api)
                if h is None:
                    h = histograms[api] = [[0] * _SLOTS, 0.0, [0] * _SLOTS, 0.0]
                took = answered_at - received_at
                h[0][bisect.bisect_left(_LATENCY_BUCKETS, took)] += 1
                h[1] += took
                took = started_at - received_at
                h[2][bisect.bisect_left(_LATENCY_BUCKETS, took)] += 1
                h[3] += took
                if produced:
                    for topic, size, records in produced:
                        tally = per_topic.get(topic)
                        if tally is None:
                            per_topic[topic] = [size, records]
                        else:
                            tally[0] += size
                            tally[1] += records
            # Still under the lock: a scrape waiting for it must find these counted.
            for api, n in per_api.items():
                self.requests.labels(api).inc(n)
            for topic, (size, records) in per_topic.items():
                self.bytes_in.labels(topic).inc(size)
                self.messages_in.labels(topic).inc(records)

    def count_bytes_out(self, per_topic: dict[str, int]) -> None:
        """Record bytes sent to fetchers, per topic (a fetch answer once it is final)."""
        for topic, size in per_topic.items():
            self.bytes_out.labels(topic).inc(size)

    def watch_logs(self, logs: Callable[[], Iterable]) -> None:
        """Report per-partition log gauges from ``logs()`` -> iterable of ((topic, partition), log)."""
        self.registry.register(_LogCollector(logs))

    def watch_appenders(self, stats: Callable[[], dict]) -> None:
        """Report the log dirs' appender figures from ``stats()`` -> {log dir: (queued, groups, appends)}."""
        self.registry.register(_AppenderCollector(stats))

    def watch_groups(self, snapshot: Callable[[], tuple[dict[str, int], int]]) -> None:
        """Report group gauges from ``snapshot()`` -> ({state name: groups}, offsets cached)."""
        self.registry.register(_GroupCollector(snapshot))

    def watch_share_groups(self, snapshot: Callable[[], tuple]) -> None:
        """Report the share group gauges from ``snapshot()`` (see :class:`_ShareCollector`)."""
        self.registry.register(_ShareCollector(snapshot))

    def watch_health(self, snapshot: Callable[[], Health]) -> None:
        """Report the health gauges (both naming schemes) from ``snapshot()`` at scrape time."""
        self.registry.register(_HealthCollector(snapshot))

    def watch_quotas(self, snapshot: Callable[[], Iterable[tuple]]) -> None:
        """Report client quota figures from ``snapshot()`` -> (quota type, (user, client id), rate, limit,
        throttle ms in all, times throttled) per live rate."""
        self.registry.register(_QuotaCollector(snapshot))

    def watch_consumer_lag(self, snapshot: Callable[[], tuple[list[GroupLag], dict[str, int]]]) -> None:
        """Report kafka_exporter's consumer group figures from ``snapshot()`` -> (lags, {group: members})."""
        self.registry.register(_LagCollector(snapshot))

    def start_http(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (0 = ephemeral) in a daemon thread; returns the bound port."""
        self._http = MetricsHTTPServer(self.registry, host, port)
        self.port = self._http.port
        return self.port

    def stop_http(self) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None
