"""Helpers shared by API handler modules (a ``_`` module: the registry does not load it)."""

from __future__ import annotations

from collections import Counter
from typing import Awaitable, Callable


async def answer_each_once(items: list[dict], answer: Callable[[dict], Awaitable[dict]],
                           duplicate: Callable[[str], dict], key: str = "name") -> list[dict]:
    """Answer the request's entries in order, each on its own (one failing does not stop the rest).

    An entry whose ``key`` (a topic name) appears more than once is not acted on:
    it gets one answer, ``duplicate(name)`` (INVALID_REQUEST in Kafka), where it
    first appears, and its other appearances get none, as Kafka does for
    CreateTopics and CreatePartitions.
    """
    counts = Counter(item[key] for item in items)
    results = []
    reported = set()
    for item in items:
        name = item[key]
        if counts[name] > 1:
            if name not in reported:
                reported.add(name)
                results.append(duplicate(name))
            continue
        results.append(await answer(item))
    return results


def duplicate_message(name: str) -> str:
    return f"topic {name!r} appears more than once in the request"
