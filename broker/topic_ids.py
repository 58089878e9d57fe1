"""Topic ids (KIP-516): a random uuid per topic, kept in ``/brokers/topics/<t>`` and in each partition dir's
``partition.metadata``, and written as Kafka writes a ``Uuid``: its 16 bytes in URL-safe base64 without
padding (22 characters, e.g. ``mCmB9bh6QzuPMMQM8OMKcw``).

A topic's id tells a topic from an earlier one of the same name: a log that a deleted topic left on a
broker that was down at the time is never served as the new topic's (INCONSISTENT_TOPIC_ID).
"""

from __future__ import annotations

import base64
import uuid


def new_topic_id() -> uuid.UUID:
    """A random topic id (KIP-516) as Kafka's ``Uuid.randomUuid`` makes one: never the zero uuid, nor
    the metadata topic's (1), nor one whose text starts with ``-`` (it would read as a command-line option)."""
    while True:
        found = uuid.uuid4()
        if found.int > 1 and not format_topic_id(found).startswith("-"):
            return found


def format_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's text of a uuid (``Uuid.toString``): the 16 bytes in URL-safe base64 without padding, 22 characters."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def parse_topic_id(text: str) -> uuid.UUID:
    """The uuid of Kafka's 22-character text (``Uuid.fromString``); ValueError for anything else."""
    if not isinstance(text, str) or len(text) != 22:
        raise ValueError(f"not a topic id: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        raise ValueError(f"not a topic id: {text!r}") from None
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {text!r}")
    return uuid.UUID(bytes=raw)
