"""ZooKeeper's ``mntr`` answer turned into the metric families of its PrometheusMetricsProvider.

``mntr`` (a four-letter word, in ``4lw.commands.whitelist``) answers one
``zk_<key>\\t<value>`` line per figure. Since ZooKeeper 3.6 the keys are the
names under which the server registers its metrics with its metrics provider,
so the Prometheus provider (``PrometheusMetricsProvider``, not shipped by
Debian's package) serves the same figures under the names without ``zk_``. The
default provider, whose dump ``mntr`` prints, spells three kinds of metric
differently, and this module maps them back:

- a gauge or counter ``NAME``: ``zk_NAME`` -> ``NAME`` (untyped here: ``mntr``
  does not say which of the two it is; PromQL treats both alike);
- a summary ``NAME``: ``zk_avg_NAME``, ``zk_min_NAME``, ``zk_max_NAME``,
  ``zk_cnt_NAME``, ``zk_sum_NAME`` and, for the detailed ones, ``zk_p50_NAME``,
  ``zk_p95_NAME``, ``zk_p99_NAME``, ``zk_p999_NAME`` -> one summary ``NAME``
  with ``NAME_count``, ``NAME_sum`` and ``NAME{quantile=...}`` for
  0.5/0.95/0.99/0.999 and for min (0) and max (1); the average is
  ``NAME_sum / NAME_count``. A name is a summary when ``zk_cnt_NAME`` exists
  (``zk_max_latency`` alone is a plain gauge);
- a member of a labelled set (per namespace, per learner): ``zk_KEY_SET`` ->
  ``SET{key="KEY"}``, as the provider labels it.

Two keys are strings: ``zk_server_state`` becomes
``zookeeper_server_state{state="leader"} 1`` (one series, the current state) and
``zk_version`` is left out. Sans-I/O: the socket is the collector's.
"""

from __future__ import annotations

import re

from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily

# parts of a summary in mntr: those that are quantiles, those that are the summary's _count and _sum,
# and the average, which _sum / _count gives
_QUANTILES = {"min": "0", "p50": "0.5", "p95": "0.95", "p99": "0.99", "p999": "0.999", "max": "1"}
_TOTALS = {"cnt": "_count", "sum": "_sum"}
_SUMMARY_PARTS = {*_QUANTILES, *_TOTALS, "avg"}
# ZooKeeper's labelled sets (ServerMetrics, ZooKeeperServer) and what their keys look like: a
# namespace (a path's first component) or a learner's server id.
_SETS = {
    "write_per_namespace": r".+", "read_per_namespace": r".+",
    "quota_exceeded_error_per_namespace": r".+",
    "quota_count_limit_per_namespace": r".+", "quota_bytes_limit_per_namespace": r".+",
    "quota_count_usage_per_namespace": r".+", "quota_bytes_usage_per_namespace": r".+",
    "ack_latency": r"\d+", "learner_handler_qp_size": r"\d+", "learner_handler_qp_time_ms": r"\d+",
}
_SET_MEMBER = re.compile(r"(?P<key>.+)_(?P<set>" + "|".join(map(re.escape, _SETS)) + r")\Z")
_NOT_SERVING = "not currently serving requests"


class MntrError(Exception):
    """An answer that holds no metrics (not serving, or ``mntr`` not whitelisted), in ZooKeeper's words."""


def parse(text: str) -> dict[str, str]:
    """``{key without zk_: value}`` of an ``mntr`` answer; MntrError when it holds no figures."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep and key.startswith("zk_"):
            values[key[3:]] = value.strip()
    if not values:
        first = text.strip().splitlines()[0] if text.strip() else "an empty answer"
        raise MntrError(first if _NOT_SERVING in text or "whitelist" in text else f"not an mntr answer: {first!r}")
    return values


def _split_set(name: str) -> tuple[str, dict[str, str]]:
    """``(metric name, labels)``: a set member's name is the set's, its key the ``key`` label."""
    m = _SET_MEMBER.match(name)
    if m and re.fullmatch(_SETS[m.group("set")], m.group("key")):
        return m.group("set"), {"key": m.group("key")}
    return name, {}


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def families(values: dict[str, str]) -> list[Metric]:
    """The metric families of one ``mntr`` answer (see the module docstring)."""
    summaries = {key[4:] for key in values if key.startswith("cnt_")}
    plain: dict[str, list[tuple[dict, float]]] = {}
    summary: dict[str, list[tuple[str, dict, float]]] = {}
    for key, raw in values.items():
        value = _number(raw)
        if value is None:
            continue
        part, _, base = key.partition("_")
        if part in _SUMMARY_PARTS and base in summaries:
            name, labels = _split_set(base)
            if part in _TOTALS:
                summary.setdefault(name, []).append((name + _TOTALS[part], labels, value))
            elif part in _QUANTILES:
                summary.setdefault(name, []).append((name, {**labels, "quantile": _QUANTILES[part]}, value))
        else:
            name, labels = _split_set(key)
            plain.setdefault(name, []).append((labels, value))
    out: list[Metric] = []
    for name, samples in sorted(plain.items()):
        family = UnknownMetricFamily(name, f"ZooKeeper's {name} (mntr zk_{name})", labels=sorted(samples[0][0]))
        for labels, value in samples:
            family.add_metric([labels[k] for k in sorted(labels)], value)
        out.append(family)
    for name, samples in sorted(summary.items()):
        family = Metric(name, f"ZooKeeper's summary {name} (mntr zk_{{avg,min,max,cnt,sum,pNN}}_{name})", "summary")
        for sample_name, labels, value in samples:
            family.add_sample(sample_name, labels, value)
        out.append(family)
    state = values.get("server_state")
    if state:
        family = GaugeMetricFamily("zookeeper_server_state", "1 for this server's state (mntr zk_server_state).",
                                   labels=["state"])
        family.add_metric([state], 1)
        out.append(family)
    return out
