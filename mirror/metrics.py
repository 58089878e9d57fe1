"""The mirror's Prometheus instruments, served on ``metrics.port`` at ``/metrics``.

| name | type | labels | what |
|---|---|---|---|
| ``kafkapy_mirror_records_total`` | counter | flow, topic | records written into the target |
| ``kafkapy_mirror_bytes_total`` | counter | flow, topic | key + value bytes of those records |
| ``kafkapy_mirror_skipped_records_total`` | counter | flow, topic | records not copied back where they came from |
| ``kafkapy_mirror_lag`` | gauge | flow, topic, partition | source end offset minus mirrored position |
| ``kafkapy_mirror_replication_latency_seconds`` | histogram | flow | target acknowledgement time minus the source record's timestamp |
| ``kafkapy_mirror_errors_total`` | counter | flow, kind | failures by kind (source, target, produce, topic_sync, group_sync) |
| ``kafkapy_mirror_topics`` | gauge | flow | topics in sync |
| ``kafkapy_mirror_groups`` | gauge | flow | groups whose offsets were translated in the last round |
| ``kafkapy_mirror_partitions`` | gauge | flow | source partitions this process owns |

The latency's end point is the moment the target acknowledged the write (the
append time of a target topic using CreateTime is not reported back), so it
includes the produce round trip and nothing after. Also the standard process
figures (``process_*``, ``python_gc_*``).
"""

from __future__ import annotations

import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram, PlatformCollector,
                               ProcessCollector, disable_created_metrics, make_wsgi_app)

disable_created_metrics()

_P = "kafkapy_mirror_"
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


class MirrorMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.records = Counter(_P + "records", "Records written into the target.", ["flow", "topic"], registry=r)
        self.bytes = Counter(_P + "bytes", "Key and value bytes written into the target.", ["flow", "topic"],
                             registry=r)
        self.skipped = Counter(_P + "skipped_records", "Records not copied back to the cluster they came from.",
                               ["flow", "topic"], registry=r)
        self.lag = Gauge(_P + "lag", "Source end offset minus the mirrored position.",
                         ["flow", "topic", "partition"], registry=r)
        self.latency = Histogram(_P + "replication_latency_seconds",
                                 "Target acknowledgement time minus the source record's timestamp.", ["flow"],
                                 buckets=_LATENCY_BUCKETS, registry=r)
        self.errors = Counter(_P + "errors", "Failures by kind.", ["flow", "kind"], registry=r)
        self.topics = Gauge(_P + "topics", "Topics in sync.", ["flow"], registry=r)
        self.groups = Gauge(_P + "groups", "Groups whose offsets were translated in the last round.", ["flow"],
                            registry=r)
        self.partitions = Gauge(_P + "partitions", "Source partitions this process owns.", ["flow"], registry=r)
        self._server = None

    def start_http(self, host: str, port: int) -> int:
        """Serve ``/metrics`` in a daemon thread; returns the bound port (``port`` 0: ephemeral)."""
        self._server = make_server(host, port, make_wsgi_app(self.registry), _Server, handler_class=_QuietHandler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="metrics-http",
                         daemon=True).start()
        return self._server.server_port

    def stop_http(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
