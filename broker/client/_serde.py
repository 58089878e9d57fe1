"""Serializers and deserializers (the old producer API's ``Encoder``/``Decoder``).

A serializer is a callable ``value -> bytes | None``; a deserializer is
``bytes | None -> value``. Bytes pass through unchanged by default; ``None``
stays ``None`` (a null key or a tombstone value).
"""

from __future__ import annotations

import json
from typing import Any, Callable

Serializer = Callable[[Any], "bytes | None"]
Deserializer = Callable[["bytes | None"], Any]


def bytes_serializer(value: Any) -> bytes | None:
    """Identity for bytes-like values; str is encoded as UTF-8 for convenience."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    from .errors import ConfigError

    raise ConfigError(f"cannot send a {type(value).__name__} without a serializer; pass bytes or set one")


def bytes_deserializer(data: bytes | None) -> bytes | None:
    return data


def string_serializer(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")


def string_deserializer(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


def json_serializer(value: Any) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


def json_deserializer(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)
