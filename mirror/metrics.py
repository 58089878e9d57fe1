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

from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram, PlatformCollector,
                               ProcessCollector, disable_created_metrics)

from broker.metrics import MetricsHTTPServer

disable_created_metrics()

_P = "kafkapy_mirror_"
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


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
        self._http: MetricsHTTPServer | None = None

    def start_http(self, host: str, port: int) -> int:
        """Serve ``/metrics`` in a daemon thread; returns the bound port (``port`` 0: ephemeral)."""
        self._http = MetricsHTTPServer(self.registry, host, port)
        return self._http.port

    def stop_http(self) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None
