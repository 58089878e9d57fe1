"""The mirror's configuration: YAML, Kafka's client property names inside each cluster.

::

    clusters:
      dc1: {bootstrap.servers: "10.0.0.1:9092,10.0.0.2:9092"}
      dc2: {bootstrap.servers: "10.1.0.1:9092", compression.type: lz4}
    flows:
      - source: dc1
        target: dc2
        topics: "orders.*|payments"      # regex, whole name: topics to mirror
        topics.exclude: "internal\\\\..*"  # regex, whole name: topics never mirrored
        topic.rename: "{topic}"          # or "{source}.{topic}"
        groups: ".*"                     # regex: consumer groups whose offsets are translated
    metrics.port: 9309                   # -1: no metrics endpoint; 0: an ephemeral port
    sync.interval.ms: 5000               # how often topics, configs and group offsets are synced

A cluster's properties go to the clients that talk to it; each property must be
one that our producer, consumer or admin client knows (``compression.type``
applies to what the mirror writes into that cluster). Cluster names are part
of the data (they travel in the provenance header, see :mod:`mirror`), so every
mirror process touching the same clusters must use the same names.

Unknown keys, bad regexes, unknown cluster names and bad values raise
:class:`MirrorConfigError` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from broker.client._config import AdminConfig, ConsumerConfig, ProducerConfig, build_config
from broker.client.errors import ConfigError

# What the mirror decides itself, whatever the cluster's properties say.
RESERVED = {"group.id", "enable.auto.commit", "key.deserializer", "value.deserializer", "key.serializer",
            "value.serializer", "partitioner", "group.instance.id", "auto.offset.reset"}
_FLOW_KEYS = {"source", "target", "topics", "topics.exclude", "topic.rename", "groups"}
_TOP_KEYS = {"clusters", "flows", "metrics.port", "metrics.host", "sync.interval.ms"}


class MirrorConfigError(Exception):
    """A configuration the mirror cannot run; the message is one line."""


def _dotted(cls) -> set[str]:
    return {f.name.replace("_", ".") for f in dataclasses.fields(cls)}


_CLIENT_KEYS = {"producer": _dotted(ProducerConfig), "consumer": _dotted(ConsumerConfig),
                "admin": _dotted(AdminConfig)}


@dataclass(frozen=True)
class Cluster:
    name: str
    properties: dict[str, str]

    def client_properties(self, kind: str) -> dict[str, str]:
        """The properties the ``kind`` client (producer, consumer, admin) understands."""
        keys = _CLIENT_KEYS[kind]
        return {k: v for k, v in self.properties.items() if k in keys}


@dataclass(frozen=True)
class Flow:
    source: str
    target: str
    topics: re.Pattern
    exclude: re.Pattern | None
    rename: str
    groups: re.Pattern

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def group_id(self) -> str:
        """The source consumer group the mirror processes of this flow share the work in."""
        return f"kafkapy-mirror.{self.source}.{self.target}"

    def target_topic(self, topic: str) -> str:
        return self.rename.format(source=self.source, topic=topic)

    def selects(self, topic: str, target_cluster_rename: str | None = None) -> bool:
        """Whether source ``topic`` is mirrored by this flow.

        Never internal topics, never topics excluded, and never a topic that is
        itself the renamed copy of a topic from this flow's target (``dc2.orders``
        in dc1 is not mirrored back into dc2): ``target_cluster_rename`` is the
        regex of such names.
        """
        if topic.startswith("__") or not self.topics.fullmatch(topic):
            return False
        if self.exclude is not None and self.exclude.fullmatch(topic):
            return False
        return not (target_cluster_rename and re.fullmatch(target_cluster_rename, topic))

    def renamed_from(self, cluster: str) -> str | None:
        """Regex of the names topics copied from ``cluster`` get under this flow's rename."""
        if "{source}" not in self.rename:
            return None
        parts = re.split(r"(\{source\}|\{topic\})", self.rename)
        out = []
        for part in parts:
            out.append(re.escape(cluster) if part == "{source}" else ".+" if part == "{topic}" else re.escape(part))
        return "".join(out)


@dataclass(frozen=True)
class MirrorConfig:
    clusters: dict[str, Cluster]
    flows: list[Flow]
    metrics_port: int = -1
    metrics_host: str = "127.0.0.1"
    sync_interval_ms: int = 5000

    def renamed_back(self, flow: Flow) -> str | None:
        """Regex of the names the target's own topics have in the flow's source, copied
        there by a reverse flow with a rename (``dc2.orders`` in dc1 for dc1 -> dc2)."""
        for other in self.flows:
            if other.source == flow.target and other.target == flow.source:
                return other.renamed_from(flow.target)
        return None


def _regex(value: Any, where: str) -> re.Pattern:
    if not isinstance(value, str):
        raise MirrorConfigError(f"{where} must be a regex string, not {value!r}")
    try:
        return re.compile(value)
    except re.error as exc:
        raise MirrorConfigError(f"{where}: bad regex {value!r}: {exc}") from None


def _int(value: Any, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise MirrorConfigError(f"{where} must be an integer, not {value!r}") from None


def parse(doc: Any) -> MirrorConfig:
    if not isinstance(doc, dict):
        raise MirrorConfigError("the configuration must be a YAML mapping with clusters and flows")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise MirrorConfigError(f"unknown key(s): {', '.join(sorted(map(str, unknown)))}")
    raw_clusters = doc.get("clusters")
    if not isinstance(raw_clusters, dict) or not raw_clusters:
        raise MirrorConfigError("clusters: a mapping of cluster names to client properties is required")
    all_keys = set().union(*_CLIENT_KEYS.values())
    clusters = {}
    for name, props in raw_clusters.items():
        if not isinstance(props, dict):
            raise MirrorConfigError(f"clusters.{name} must be a mapping of client properties")
        if "bootstrap.servers" not in props:
            raise MirrorConfigError(f"clusters.{name}: bootstrap.servers is required")
        for key in props:
            if key in RESERVED:
                raise MirrorConfigError(f"clusters.{name}: {key} is set by the mirror itself")
            if key not in all_keys:
                raise MirrorConfigError(f"clusters.{name}: unknown client property {key!r}")
        cluster = Cluster(str(name), {k: str(v) for k, v in props.items()})
        for kind, cls in (("producer", ProducerConfig), ("consumer", ConsumerConfig), ("admin", AdminConfig)):
            try:
                build_config(cls, cluster.client_properties(kind), {})
            except ConfigError as exc:
                raise MirrorConfigError(f"clusters.{name}: {exc}") from None
        clusters[str(name)] = cluster
    raw_flows = doc.get("flows")
    if not isinstance(raw_flows, list) or not raw_flows:
        raise MirrorConfigError("flows: a list of flows is required")
    flows = []
    for i, f in enumerate(raw_flows):
        where = f"flows[{i}]"
        if not isinstance(f, dict):
            raise MirrorConfigError(f"{where} must be a mapping")
        unknown = set(f) - _FLOW_KEYS
        if unknown:
            raise MirrorConfigError(f"{where}: unknown key(s): {', '.join(sorted(map(str, unknown)))}")
        for role in ("source", "target"):
            if f.get(role) not in clusters:
                raise MirrorConfigError(f"{where}.{role}: unknown cluster {f.get(role)!r}")
        if f["source"] == f["target"]:
            raise MirrorConfigError(f"{where}: source and target are the same cluster")
        rename = f.get("topic.rename", "{topic}")
        if not isinstance(rename, str) or "{topic}" not in rename:
            raise MirrorConfigError(f"{where}.topic.rename must contain {{topic}}, not {rename!r}")
        try:
            rename.format(source="s", topic="t")
        except (KeyError, IndexError, ValueError):
            raise MirrorConfigError(f"{where}.topic.rename may use only {{source}} and {{topic}}: {rename!r}") from None
        exclude = f.get("topics.exclude")
        flows.append(Flow(f["source"], f["target"], _regex(f.get("topics", ".*"), f"{where}.topics"),
                          None if exclude is None else _regex(exclude, f"{where}.topics.exclude"), rename,
                          _regex(f.get("groups", ".*"), f"{where}.groups")))
    pairs = [(fl.source, fl.target) for fl in flows]
    if len(set(pairs)) != len(pairs):
        raise MirrorConfigError("two flows have the same source and target")
    port = _int(doc.get("metrics.port", -1), "metrics.port")
    interval = _int(doc.get("sync.interval.ms", 5000), "sync.interval.ms")
    if interval < 100:
        raise MirrorConfigError("sync.interval.ms must be at least 100")
    return MirrorConfig(clusters, flows, port, str(doc.get("metrics.host", "127.0.0.1")), interval)


def load(path: str | Path) -> MirrorConfig:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise MirrorConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MirrorConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return parse(doc)
