"""The loader's figures for Prometheus, as a file for node_exporter's textfile collector.

A loader run is a batch job (a timer starts it), so it serves no port: with
``--metrics-file PATH`` each run, successful or not, rewrites PATH atomically
(a temporary file renamed into place) in Prometheus' text format:

==============================================  =====  =====================================
kafkapy_loader_last_run_success                 gauge  1 if the last run committed, else 0
kafkapy_loader_last_run_timestamp_seconds       gauge  when the last run ended
kafkapy_loader_last_success_timestamp_seconds   gauge  when the last successful run ended
                                                       (carried over from PATH by a failed run)
kafkapy_loader_last_run_duration_seconds        gauge
kafkapy_loader_records                          gauge  topic: records the last run loaded
==============================================  =====  =====================================
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile
from prometheus_client.parser import text_string_to_metric_families

_P = "kafkapy_loader_"


def _previous_success(path: Path) -> float | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == _P + "last_success_timestamp_seconds":
                    return sample.value
    except ValueError:  # not ours, or damaged: start afresh
        return None
    return None


def write_run_metrics(path: str | Path, records: dict[str, int] | None, started: float, ended: float) -> None:
    """Record one run ending at ``ended``: ``records`` per topic if it succeeded, None if it failed."""
    path = Path(path)
    registry = CollectorRegistry()
    ok = records is not None
    Gauge(_P + "last_run_success", "1 if the last run committed, else 0.", registry=registry).set(int(ok))
    Gauge(_P + "last_run_timestamp_seconds", "When the last run ended.", registry=registry).set(ended)
    Gauge(_P + "last_run_duration_seconds", "How long the last run took.", registry=registry).set(ended - started)
    last_success = ended if ok else _previous_success(path)
    if last_success is not None:
        Gauge(_P + "last_success_timestamp_seconds", "When the last successful run ended.",
              registry=registry).set(last_success)
    loaded = Gauge(_P + "records", "Records the last run loaded, by topic.", ["topic"], registry=registry)
    for topic, n in sorted((records or {}).items()):
        loaded.labels(topic).set(n)
    write_to_textfile(str(path), registry)
