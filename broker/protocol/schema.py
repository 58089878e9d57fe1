"""API schemas as data: the compact declarative form every module in ``apis/`` is written in.

One API is an :class:`Api` with a key, a name, its valid versions, its flexible versions and
two field lists (request body, response body). One field is written with :func:`f`::

    f(name, type, versions="0+", *, nullable=None, default=..., tag=None, tagged=None, fields=None)

name      snake_case of Kafka's field name (``PartitionIndex`` -> ``partition_index``).
type      a primitive: int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes records;
          ``"[]T"`` an array of primitive T; ``"[]"`` an array of structs (``fields=`` given);
          ``"{}"`` a single struct (``fields=`` given).
versions  the versions the field exists in: ``"0+"``, ``"3+"``, ``"0-4"``, ``"5"`` or ``"none"``.
nullable  the versions in which the value may be null (None).
default   the value a field takes when absent from a version or missing from a body. Without
          one: ints 0, bool False, float 0.0, string "", bytes b"", uuid zero, arrays [],
          records None, struct a dict of its fields' defaults.
tag/tagged  a tagged field's tag number and the versions it is tagged in; it travels in the
          tagged-field section of its struct (flexible versions only) and is omitted on encode
          when its value equals its default.

Version ranges are inclusive ``(low, high)`` pairs; ``high`` is None for open-ended ranges.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field as dc_field
from functools import cached_property

PRIMITIVES = frozenset((
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid",
    "string", "bytes", "records",
))

ZERO_UUID = uuid.UUID(int=0)
_NO_DEFAULT = object()


@dataclass(frozen=True)
class VersionRange:
    """Inclusive range of versions; ``high`` None means open-ended; ``low`` None means none."""

    low: int | None
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> "VersionRange":
        if text is None or text == "none":
            return cls(None, None)
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        if self.low is None:
            return False
        return self.low <= version and (self.high is None or version <= self.high)


@dataclass(frozen=True)
class Field:
    """One field of a struct; see the module docstring for the meaning of each attribute."""

    name: str
    type: str
    versions: VersionRange
    nullable: VersionRange
    default: object
    tag: int | None
    tagged: VersionRange
    fields: tuple["Field", ...] | None

    @property
    def is_struct_array(self) -> bool:
        return self.type == "[]"

    @property
    def is_struct(self) -> bool:
        return self.type == "{}"

    @property
    def element_type(self) -> str | None:
        """For ``[]T`` arrays of primitives, T; otherwise None."""
        if self.type.startswith("[]") and len(self.type) > 2:
            return self.type[2:]
        return None

    def default_value(self):
        """A fresh default value (lists and dicts are new objects on every call)."""
        d = self.default
        if d is not _NO_DEFAULT:
            return d
        t = self.type
        if t.startswith("[]"):
            return []
        if t == "{}":
            return {sub.name: sub.default_value() for sub in self.fields}
        return _TYPE_DEFAULTS[t]


_TYPE_DEFAULTS = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "uint32": 0, "float64": 0.0,
    "bool": False, "uuid": ZERO_UUID, "string": "", "bytes": b"", "records": None,
}


def f(name: str, type: str, versions: str = "0+", *, nullable: str | None = None,
      default=_NO_DEFAULT, tag: int | None = None, tagged: str | None = None,
      fields: list[Field] | None = None) -> Field:
    """Declare one field (see the module docstring)."""
    if fields is not None:
        if type not in ("[]", "{}"):
            raise ValueError(f"field {name}: fields= needs type '[]' or '{{}}', not {type!r}")
    else:
        base = type[2:] if type.startswith("[]") else type
        if base not in PRIMITIVES:
            raise ValueError(f"field {name}: unknown type {type!r}")
    if (tag is None) != (tagged is None):
        raise ValueError(f"field {name}: tag and tagged go together")
    return Field(name, type, VersionRange.parse(versions), VersionRange.parse(nullable),
                 default, tag, VersionRange.parse(tagged),
                 tuple(fields) if fields is not None else None)


@dataclass(frozen=True)
class Api:
    """One Kafka API: key, name, valid and flexible versions, request and response fields."""

    key: int
    name: str
    versions: str
    flexible: str
    request: list[Field] = dc_field(default_factory=list)
    response: list[Field] = dc_field(default_factory=list)

    # Both are read for every request and response: parse the version strings once.
    @cached_property
    def version_range(self) -> tuple[int, int]:
        vr = VersionRange.parse(self.versions)
        return vr.low, vr.high

    @cached_property
    def _flexible_versions(self) -> VersionRange:
        return VersionRange.parse(self.flexible)

    def is_flexible(self, version: int) -> bool:
        return version in self._flexible_versions
