"""How record keys, values and headers are shown to people and to scripts.

Bytes that are valid UTF-8 are shown as text; anything else as base64, and the
JSON forms say so with a ``*_encoding: "base64"`` field beside the value, so a
script can always get the exact bytes back. ``None`` (a null key or value) stays
``null`` in JSON and ``-`` in tables.
"""

from __future__ import annotations

import base64


def as_text(data: bytes | memoryview | None) -> tuple[str | None, str]:
    """``(shown, encoding)`` where encoding is ``"utf-8"`` or ``"base64"``."""
    if data is None:
        return None, "utf-8"
    raw = bytes(data)
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), "base64"


def put_bytes(obj: dict, name: str, data: bytes | memoryview | None) -> None:
    """Set ``obj[name]`` to the text form of ``data`` and mark base64 when used."""
    shown, encoding = as_text(data)
    obj[name] = shown
    if encoding != "utf-8":
        obj[f"{name}_encoding"] = encoding


def headers_as_json(headers) -> list[dict]:
    out = []
    for h in headers:
        item = {"key": h.key}
        put_bytes(item, "value", h.value)
        out.append(item)
    return out


def short(data: bytes | memoryview | None, limit: int = 200) -> str:
    """A one-line human form: text (escaped) or ``base64:...``, cut at ``limit`` characters."""
    if data is None:
        return "null"
    shown, encoding = as_text(data)
    text = shown if encoding == "utf-8" else f"base64:{shown}"
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."
