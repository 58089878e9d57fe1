"""Helpers shared by API handler modules (a ``_`` module: the registry does not load it)."""

from __future__ import annotations

from collections import Counter
from typing import Awaitable, Callable

from broker.protocol import ErrorCode


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


class LeaderHints:
    """Where a partition's leader is, for clients told NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH (KIP-951:
    Produce v10+, Fetch v16+, ShareFetch and ShareAcknowledge): the partition's ``current_leader`` and, once per
    response, the ``node_endpoints`` of the leaders named, so the client goes there without a Metadata round trip.

    The leader is this broker's replica's view when it has one (Kafka's ``getCurrentLeader``), else the metadata
    cache's; -1/-1 when neither knows. An endpoint is given only for a live leader on the request's listener."""

    __slots__ = ("ctx", "leaders")

    #: the errors that carry a hint
    ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.leaders: set[int] = set()

    def current_leader(self, name: str, index: int) -> dict:
        broker = self.ctx.broker
        local = broker.replicas.partition(name, index)
        if local is not None and local.leader_id >= 0:
            leader, epoch = local.leader_id, local.leader_epoch
        else:
            meta = broker.metadata_cache.partition(name, index)
            leader, epoch = (meta.leader, meta.leader_epoch) if meta is not None else (-1, -1)
        if leader >= 0:
            self.leaders.add(leader)
        return {"leader_id": leader, "leader_epoch": epoch}

    def node_endpoints(self) -> list[dict]:
        cache, listener = self.ctx.broker.metadata_cache, self.ctx.listener
        out = []
        for broker_id in sorted(self.leaders):
            info = cache.broker(broker_id)
            endpoint = info.listener(listener) if info is not None else None
            if endpoint is not None:
                out.append({"node_id": broker_id, "host": endpoint.host, "port": endpoint.port, "rack": info.rack})
        return out
