"""Per-log (topic-level) configuration, named after Kafka's topic configs.

Each field is the snake_case form of a Kafka topic config; :data:`PROPERTY_NAMES`
maps field names to the dotted property names (``retention.ms`` ...), the form
used in ``/config/topics/T``, CreateTopics and AlterConfigs. The only field that
does not follow that rule is ``segment_ms``, whose property is ``segment.ms``
(the broker default is ``log.roll.ms``).

``LogConfig`` is an immutable value: change a log's config by building a new one
(:meth:`LogConfig.with_overrides`) and handing it to ``Log.update_config``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

DAY_MS = 24 * 60 * 60 * 1000

CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


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

    def __post_init__(self) -> None:
        _validate(self)

    # -- derived ----------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

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
    if ",".join(sorted(p.strip() for p in c.cleanup_policy.split(","))) not in CLEANUP_POLICIES:
        fail("cleanup_policy", f"must be one of {', '.join(CLEANUP_POLICIES)}")
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
