"""Per-log (topic-level) configuration, named after Kafka's topic configs.

Each field is the snake_case form of a Kafka topic config; :data:`PROPERTY_NAMES`
maps field names to the dotted property names (``retention.ms`` ...), the form
used in ``/config/topics/T``, CreateTopics and AlterConfigs. The only field that
does not follow that rule is ``segment_ms``, whose property is ``segment.ms``
(the broker default is ``log.roll.ms``).

:data:`TOPIC_CONFIGS` is the one table of topic configs: each one's type, the
broker properties that give its default (Kafka's ``TopicConfigSynonyms``) and
a line of documentation; the broker's defaults (``broker.config``),
DescribeConfigs and (Incremental)AlterConfigs read it.

``LogConfig`` is an immutable value: change a log's config by building a new one
(:meth:`LogConfig.with_overrides`) and handing it to ``Log.update_config``.

List-valued configs are comma-separated strings, as Kafka stores them:

* ``cleanup.policy``: any of ``delete`` and ``compact``, or none at all (Apache
  Kafka 2.7 accepts the empty list: the log is then neither deleted by
  retention nor compacted, it is kept whole until DeleteRecords moves its start);
* ``leader.replication.throttled.replicas`` and
  ``follower.replication.throttled.replicas``: empty, ``*``, or
  ``partition:broker`` pairs. Accepted and validated for Kafka's tools; there is
  no replication to throttle yet.

``message.format.version`` takes Apache Kafka 2.7's version strings
(``0.10.2``, ``0.11.0-IV2``, ``2.7-IV2``, ``2.7.0``...; see :func:`format_version_magic`).
The log holds RecordBatch v2 whatever it says: an older version is accepted and
validated, nothing is converted on append. ``message.downconversion.enable`` false
makes a Fetch older than v4, which needs v2 batches converted, fail with
UNSUPPORTED_VERSION instead of being down-converted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

DAY_MS = 24 * 60 * 60 * 1000

CLEANUP_POLICY_ITEMS = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

#: Apache Kafka 2.7's message format versions (its ApiVersion list) -> the record magic each writes.
_FORMAT_VERSIONS: dict[str, int] = {
    **{v: 0 for v in ("0.8.0", "0.8.1", "0.8.2", "0.9.0")},
    **{v: 1 for v in ("0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0")},
    **{v: 2 for v in ("0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1",
                      "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0",
                      "2.4-IV1", "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2")},
}
_FORMAT_VERSIONS.update({v.split("-")[0]: magic for v, magic in _FORMAT_VERSIONS.items()})  # short forms
LATEST_FORMAT_VERSION = "2.7-IV2"


def format_version_magic(version: str) -> int:
    """The record magic Kafka 2.7 writes for ``message.format.version`` ``version``; ValueError if invalid.

    As Kafka parses it: the first three dot-separated parts of a 0.x version and
    the first two of a later one are looked up (``0.10.2.1`` is ``0.10.2``,
    ``2.7.0`` is ``2.7``), with or without an ``-IVn`` suffix.
    """
    parts = version.strip().split(".")
    key = ".".join(parts[:3] if version.strip().startswith("0.") else parts[:2])
    if key not in _FORMAT_VERSIONS:
        raise ValueError(f"{version!r} is not a valid version")
    return _FORMAT_VERSIONS[key]


def _valid_throttled_replicas(text: str) -> bool:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if items == ["*"]:
        return True
    for item in items:
        partition, _, broker = item.partition(":")
        if not (partition.isdigit() and broker.isdigit()):
            return False
    return True


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Topic-level log settings (Kafka defaults). ``None`` for the flush settings means never."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int | None = None
    flush_ms: int | None = None
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = (1 << 63) - 1
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = (1 << 63) - 1
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    message_format_version: str = LATEST_FORMAT_VERSION
    message_downconversion_enable: bool = True

    def __post_init__(self) -> None:
        _validate(self)

    # -- derived ----------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy  # a substring test suffices: the items are validated

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // 8

    # -- properties -------------------------------------------------------
    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: "LogConfig | None" = None) -> "LogConfig":
        """Build a config from Kafka property names (values as strings or native types).

        Unknown keys raise ``ValueError`` naming the key; so do unparsable values.
        """
        base = base or cls()
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            name = _FIELD_BY_PROPERTY.get(key)
            if name is None:
                raise ValueError(f"{key}: unknown topic config")
            changes[name] = _parse(key, name, raw)
        try:
            return dataclasses.replace(base, **changes)
        except ValueError:
            raise
        except TypeError as exc:  # pragma: no cover - defensive
            raise ValueError(str(exc)) from exc

    def with_overrides(self, props: Mapping[str, Any]) -> "LogConfig":
        """A new config: this one with the given Kafka properties overridden."""
        return LogConfig.from_properties(props, base=self)

    def to_properties(self) -> dict[str, str]:
        """All settings as Kafka property names and string values (``flush.*`` absent = never)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = str(value)
            out[PROPERTY_NAMES[f.name]] = text
        return out


PROPERTY_NAMES: dict[str, str] = {
    f.name: f.name.replace("_", ".") for f in dataclasses.fields(LogConfig)
}
_FIELD_BY_PROPERTY = {v: k for k, v in PROPERTY_NAMES.items()}


class TopicConfigDef(NamedTuple):
    """One topic config: its type, where its default comes from, what it does."""

    #: Kafka's ConfigDef type name (BOOLEAN, STRING, INT, LONG, DOUBLE, LIST), as DescribeConfigs reports it
    type: str
    #: the broker properties that give its default, most specific first (Kafka's ``TopicConfigSynonyms``)
    synonyms: tuple[str, ...]
    #: one line, DescribeConfigs' documentation
    doc: str


#: Every topic config (a :class:`LogConfig` field each): the one table the broker's defaults,
#: DescribeConfigs and (Incremental)AlterConfigs are read from.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef(
        "LIST", ("log.cleanup.policy",),
        "delete and/or compact: how old segments are discarded."),
    "compression.type": TopicConfigDef(
        "STRING", (),
        "Codec the log keeps batches in; 'producer' keeps what the producer sent."),
    "delete.retention.ms": TopicConfigDef(
        "LONG", ("log.cleaner.delete.retention.ms",),
        "How long tombstones stay readable in a compacted log."),
    "file.delete.delay.ms": TopicConfigDef(
        "LONG", ("log.segment.delete.delay.ms",),
        "Delay between dropping a segment and unlinking its files."),
    "follower.replication.throttled.replicas": TopicConfigDef(
        "LIST", (),
        "partition:broker pairs (or *) throttled as followers."),
    "flush.messages": TopicConfigDef(
        "LONG", ("log.flush.interval.messages",),
        "Messages appended before the log is fsynced."),
    "flush.ms": TopicConfigDef(
        "LONG", ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
        "Age of unflushed data before the log is fsynced."),
    "index.interval.bytes": TopicConfigDef(
        "INT", ("log.index.interval.bytes",),
        "Bytes of log between offset index entries."),
    "leader.replication.throttled.replicas": TopicConfigDef(
        "LIST", (),
        "partition:broker pairs (or *) throttled as leaders."),
    "max.compaction.lag.ms": TopicConfigDef("LONG", (), "Longest time a record may stay uncompacted."),
    "max.message.bytes": TopicConfigDef("INT", ("message.max.bytes",), "Largest record batch the topic accepts."),
    "message.downconversion.enable": TopicConfigDef(
        "BOOLEAN", ("log.message.downconversion.enable",),
        "Down-convert v2 batches for fetchers older than v4; false: UNSUPPORTED_VERSION."),
    "message.format.version": TopicConfigDef(
        "STRING", ("log.message.format.version",),
        "Kafka version string, validated; the log always holds v2 batches."),
    "message.timestamp.difference.max.ms": TopicConfigDef(
        "LONG", ("log.message.timestamp.difference.max.ms",),
        "Largest distance of a CreateTime timestamp from broker time."),
    "message.timestamp.type": TopicConfigDef("STRING", ("log.message.timestamp.type",), "CreateTime or LogAppendTime."),
    "min.cleanable.dirty.ratio": TopicConfigDef(
        "DOUBLE", ("log.cleaner.min.cleanable.ratio",),
        "Dirty share of the log that makes it eligible for compaction."),
    "min.compaction.lag.ms": TopicConfigDef(
        "LONG", ("log.cleaner.min.compaction.lag.ms",),
        "Shortest time a record stays uncompacted."),
    "min.insync.replicas": TopicConfigDef(
        "INT", ("min.insync.replicas",),
        "Replicas that must have a write for acks=all."),
    "preallocate": TopicConfigDef("BOOLEAN", ("log.preallocate",), "Preallocate segment files."),
    "retention.bytes": TopicConfigDef(
        "LONG", ("log.retention.bytes",),
        "Size a partition may reach before old segments go; -1 none."),
    "retention.ms": TopicConfigDef(
        "LONG", ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        "Age after which old segments go; -1 keeps them forever."),
    "segment.bytes": TopicConfigDef("INT", ("log.segment.bytes",), "Size at which the active segment rolls."),
    "segment.index.bytes": TopicConfigDef("INT", ("log.index.size.max.bytes",), "Size of a segment's offset index."),
    "segment.jitter.ms": TopicConfigDef("LONG", (), "Random jitter subtracted from segment.ms."),
    "segment.ms": TopicConfigDef("LONG", ("log.roll.ms", "log.roll.hours"), "Age at which the active segment rolls."),
    "unclean.leader.election.enable": TopicConfigDef(
        "BOOLEAN", ("unclean.leader.election.enable",),
        "Let an out-of-sync replica become leader."),
}
assert set(TOPIC_CONFIGS) == set(PROPERTY_NAMES.values()), "TOPIC_CONFIGS must cover LogConfig"

_TYPES = {f.name: f.type for f in dataclasses.fields(LogConfig)}


def _parse(key: str, name: str, raw: Any) -> Any:
    kind = _TYPES[name]
    if raw is None:
        if "None" in kind:
            return None
        raise ValueError(f"{key}: a value is required")
    text = str(raw).strip()
    try:
        if kind.startswith("int"):
            if "None" in kind and text.lower() in ("", "none", "never"):
                return None
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            raise ValueError(text)
    except ValueError:
        raise ValueError(f"{key}: invalid value {raw!r}") from None
    return text


def _validate(c: LogConfig) -> None:
    def fail(name: str, why: str) -> None:
        raise ValueError(f"{PROPERTY_NAMES[name]}: {why} (got {getattr(c, name)!r})")

    if c.segment_bytes < 14:
        fail("segment_bytes", "must be at least 14")
    if c.segment_ms < 1:
        fail("segment_ms", "must be at least 1")
    if c.segment_index_bytes < 8:
        fail("segment_index_bytes", "must be at least 8")
    if c.index_interval_bytes < 0:
        fail("index_interval_bytes", "must be >= 0")
    if c.flush_messages is not None and c.flush_messages < 1:
        fail("flush_messages", "must be at least 1")
    if c.flush_ms is not None and c.flush_ms < 0:
        fail("flush_ms", "must be >= 0")
    if c.retention_ms < -1:
        fail("retention_ms", "must be >= -1")
    if c.retention_bytes < -1:
        fail("retention_bytes", "must be >= -1")
    if any(item not in CLEANUP_POLICY_ITEMS for item in _items(c.cleanup_policy)):
        fail("cleanup_policy", f"must be a list of {', '.join(CLEANUP_POLICY_ITEMS)} (or empty)")
    if c.delete_retention_ms < 0:
        fail("delete_retention_ms", "must be >= 0")
    if c.min_compaction_lag_ms < 0:
        fail("min_compaction_lag_ms", "must be >= 0")
    if not 0.0 <= c.min_cleanable_dirty_ratio <= 1.0:
        fail("min_cleanable_dirty_ratio", "must be between 0 and 1")
    if c.max_message_bytes < 0:
        fail("max_message_bytes", "must be >= 0")
    if c.message_timestamp_type not in TIMESTAMP_TYPES:
        fail("message_timestamp_type", f"must be one of {', '.join(TIMESTAMP_TYPES)}")
    if c.file_delete_delay_ms < 0:
        fail("file_delete_delay_ms", "must be >= 0")
    if c.min_insync_replicas < 1:
        fail("min_insync_replicas", "must be at least 1")
    for name in ("leader_replication_throttled_replicas", "follower_replication_throttled_replicas"):
        if not _valid_throttled_replicas(getattr(c, name)):
            fail(name, "must be *, or a list of partition:broker pairs")
    try:
        format_version_magic(c.message_format_version)
    except ValueError as exc:
        fail("message_format_version", str(exc))


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
