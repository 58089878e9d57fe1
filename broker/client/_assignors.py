"""Partition assignors run by the group leader: range, roundrobin and
cooperative-sticky, with the names Kafka's clients use on the wire so that our
consumers can share a group with Java, librdkafka or kafka-python consumers.

An assignor gets every member's :class:`Subscription` and the partition count
of every subscribed topic and returns an :class:`Assignment` per member. It is
deterministic: members are ordered by member id.

* ``range``: per topic, partitions split into contiguous ranges; the first
  ``n % m`` members (by id) get one extra.
* ``roundrobin``: all subscribed partitions sorted by (topic, partition) dealt
  out to the members in turn, skipping members not subscribed to the topic.
* ``cooperative-sticky``: keeps every partition with its current owner where
  the balance allows, hands out the rest to the least-loaded members, and
  never gives a partition to a new owner in the same rebalance in which it is
  taken from its old owner: the old owner revokes it and rejoins, and the next
  rebalance assigns it (Kafka's incremental cooperative protocol). Its
  user_data is the member's generation as an int32.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from typing import Mapping

from ._consumer_protocol import Assignment, Subscription
from ._types import TopicPartition
from .errors import ConfigError

EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"


class Assignor:
    name = ""
    rebalance_protocol = EAGER

    def subscription_user_data(self, topics: list[str], generation: int) -> bytes | None:
        return None

    def assign(
        self, members: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]
    ) -> dict[str, Assignment]:
        raise NotImplementedError


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, members, partitions_per_topic):
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        by_topic: dict[str, list[str]] = defaultdict(list)
        for member_id in sorted(members):
            for topic in members[member_id].topics:
                by_topic[topic].append(member_id)
        for topic, consumers in by_topic.items():
            n = partitions_per_topic.get(topic, 0)
            if not n:
                continue
            per, extra = divmod(n, len(consumers))
            start = 0
            for i, member_id in enumerate(consumers):
                count = per + (1 if i < extra else 0)
                result[member_id].extend(TopicPartition(topic, p) for p in range(start, start + count))
                start += count
        return {m: Assignment(tps) for m, tps in result.items()}


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, members, partitions_per_topic):
        ordered = sorted(members)
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        all_topics = sorted({t for s in members.values() for t in s.topics})
        i = 0
        for topic in all_topics:
            for p in range(partitions_per_topic.get(topic, 0)):
                for _ in range(len(ordered)):
                    member_id = ordered[i % len(ordered)]
                    i += 1
                    if topic in members[member_id].topics:
                        result[member_id].append(TopicPartition(topic, p))
                        break
        return {m: Assignment(tps) for m, tps in result.items()}


class CooperativeStickyAssignor(Assignor):
    name = "cooperative-sticky"
    rebalance_protocol = COOPERATIVE

    def subscription_user_data(self, topics, generation):
        return struct.pack(">i", generation)

    def assign(self, members, partitions_per_topic):
        target = sticky_assignment(members, partitions_per_topic)
        # A partition that changes owner is withheld this round: the previous
        # owner first revokes it and rejoins; the next round assigns it.
        owner_before: dict[TopicPartition, str] = {}
        for member_id in sorted(members, key=lambda m: -_generation(members[m])):
            for tp in members[member_id].owned_partitions:
                owner_before.setdefault(tp, member_id)
        out = {}
        for member_id, tps in target.items():
            keep = [tp for tp in tps if owner_before.get(tp, member_id) == member_id]
            out[member_id] = Assignment(keep)
        return out


def _generation(sub: Subscription) -> int:
    if sub.user_data and len(sub.user_data) >= 4:
        return struct.unpack(">i", sub.user_data[:4])[0]
    return -1


def sticky_assignment(
    members: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """Balanced assignment that keeps as many owned partitions as possible.

    Balanced means no member could take a partition from a member with at
    least two more partitions that it is also subscribed to.
    """
    subscribed = {m: set(s.topics) for m, s in members.items()}
    all_tps = sorted(
        TopicPartition(t, p)
        for t in {t for s in members.values() for t in s.topics}
        for p in range(partitions_per_topic.get(t, 0))
    )
    valid = set(all_tps)
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    taken: set[TopicPartition] = set()
    # Highest generation wins a partition two members both claim to own.
    total = len(all_tps)
    n_members = max(len(members), 1)
    max_quota = -(-total // n_members)
    for member_id in sorted(members, key=lambda m: (-_generation(members[m]), m)):
        for tp in sorted(members[member_id].owned_partitions):
            if tp in valid and tp not in taken and tp.topic in subscribed[member_id]:
                if len(assignment[member_id]) < max_quota:
                    assignment[member_id].append(tp)
                    taken.add(tp)
    for tp in all_tps:
        if tp in taken:
            continue
        eligible = [m for m in members if tp.topic in subscribed[m]]
        if eligible:
            best = min(eligible, key=lambda m: (len(assignment[m]), m))
            assignment[best].append(tp)
            taken.add(tp)
    # Move partitions from the most to the least loaded eligible member until balanced.
    changed = True
    while changed:
        changed = False
        for src in sorted(members, key=lambda m: (-len(assignment[m]), m)):
            for tp in sorted(assignment[src], reverse=True):
                candidates = [
                    m for m in members if m != src and tp.topic in subscribed[m]
                    and len(assignment[m]) + 1 < len(assignment[src])
                ]
                if candidates:
                    dst = min(candidates, key=lambda m: (len(assignment[m]), m))
                    assignment[src].remove(tp)
                    assignment[dst].append(tp)
                    changed = True
                    break
            if changed:
                break
    return {m: sorted(tps) for m, tps in assignment.items()}


ASSIGNORS = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "round_robin": RoundRobinAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
    "cooperative_sticky": CooperativeStickyAssignor,
}


def resolve_assignors(spec) -> list[Assignor]:
    """Assignor instances from names ("range", "roundrobin", "cooperative-sticky"),
    classes or instances, in preference order."""
    items = [spec] if isinstance(spec, (str, Assignor, type)) else list(spec)
    out = []
    for item in items:
        if isinstance(item, Assignor):
            out.append(item)
        elif isinstance(item, type) and issubclass(item, Assignor):
            out.append(item())
        elif isinstance(item, str) and item.lower() in ASSIGNORS:
            out.append(ASSIGNORS[item.lower()]())
        else:
            raise ConfigError(f"unknown partition assignment strategy {item!r}")
    if not out:
        raise ConfigError("partition_assignment_strategy is empty")
    return out
