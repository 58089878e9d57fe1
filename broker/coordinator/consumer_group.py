"""Consumer groups of the consumer rebalance protocol (KIP-848): members, the target assignment and each
member's way towards it. Sans-I/O and without timers, as :mod:`broker.coordinator.group` is for classic
groups; the async layer is :mod:`broker.coordinator.modern`.

Epochs, as Kafka 4.x keeps them:

* the **group epoch** goes up whenever what the assignment depends on changes: a member joins, leaves or
  changes its subscription or assignor, or a subscribed topic is created, deleted or gains partitions;
* the **assignment epoch** is the group epoch the **target assignment** was computed at (here always at
  once, by the server-side assignor: ``uniform`` or ``range``);
* a **member epoch** is the assignment epoch the member has reached. A member reaches a new target only
  after it has given up (revoked) what the target takes away from it; a partition it is to get that
  another member still holds is kept from it until that member has revoked it (Kafka's
  ``CurrentAssignmentBuilder``, in :func:`reconcile`). So no partition is ever held by two members.

A member's states: ``STABLE`` (at the target), ``UNREVOKED_PARTITIONS`` (told to give partitions up, still at
its old epoch), ``UNRELEASED_PARTITIONS`` (at the target epoch, waiting for partitions others still hold).

Partitions are named by topic id (:class:`uuid.UUID`) and index; topics by name in subscriptions. Not
thread-safe: the event loop owns every group.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import re2

from broker.protocol import ErrorCode

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"

#: The server-side assignors, the first the default (Kafka's ``group.consumer.assignors``).
ASSIGNORS = ("uniform", "range")

#: Member epochs with a meaning of their own in a heartbeat.
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2

Assignment = dict[uuid.UUID, frozenset[int]]
#: topic name -> (topic id, partition count): what the assignment was computed from
TopicMetadata = dict[str, tuple[uuid.UUID, int]]


class HeartbeatError(Exception):
    """A ConsumerGroupHeartbeat (or a conversion it asks for) refused: the error code and Kafka's message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    #: what the member has been given and holds
    assigned: Assignment = field(default_factory=dict)
    #: what it was told to give up and has not yet
    pending_revocation: Assignment = field(default_factory=dict)
    #: the assignment last sent to it (a heartbeat answer carries the assignment only when this changes)
    last_sent: Assignment | None = None
    #: a member speaking the classic protocol (JoinGroup/SyncGroup) in this group: its session timeout and
    #: protocols (:class:`broker.coordinator.mixed.ClassicMetadata`); None for a member of the consumer protocol
    classic: Any = None
    #: the async layer's timer handles
    session_timer: Any = None
    revocation_timer: Any = None
    join_timer: Any = None
    sync_timer: Any = None


@dataclass(eq=False)
class ConsumerGroupState:
    """What a group of the consumer protocol adds to :class:`broker.coordinator.group.Group` (its ``modern``)."""

    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ASSIGNORS[0]
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    #: group.instance.id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    #: (topic id, partition) -> member id holding it (assigned or pending revocation)
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    #: the subscribed topics as they were when the group epoch last moved
    metadata: TopicMetadata = field(default_factory=dict)

    @property
    def state(self) -> str:
        """The group state as ListGroups and ConsumerGroupDescribe name it (read by the metrics scrape too, from
        another thread: it copies what it iterates)."""
        members = list(self.members.values())
        if not members:
            return "Empty"
        if self.assignment_epoch != self.epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in members):
            return "Reconciling"
        return "Stable"

    # -- ownership ------------------------------------------------------------------------------------
    def release(self, member: ConsumerMember) -> None:
        """Forget every partition ``member`` holds."""
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self.owners.get((topic_id, p)) == member.member_id:
                        del self.owners[(topic_id, p)]

    def take(self, member: ConsumerMember) -> list[tuple[uuid.UUID, int]]:
        """Note the member's partitions as its own; returns those another member already holds (left with it)."""
        clashes = []
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    holder = self.owners.setdefault((topic_id, p), member.member_id)
                    if holder != member.member_id:
                        clashes.append((topic_id, p))
        return clashes

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.dirty.add(member_id)
        self.epoch += 1
        return member

    #: the group's records in ``__consumer_offsets`` as last written (key -> value), and the members whose records
    #: may have changed since (:meth:`broker.coordinator.modern.ConsumerGroupsMixin.persist_consumer_group`)
    persisted: dict[bytes, bytes] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    #: records to write with the next ones (a classic group's tombstone after a conversion)
    extra: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    #: regex -> (the topic metadata it was matched against, the names it matched that the principal of the
    #: heartbeat that matched it may DESCRIBE, when): a regex is matched again only when the topics changed (the
    #: metadata cache hands out a new mapping then) or after :data:`REGEX_REFRESH_S`, as Kafka refreshes them
    regex_matches: dict[str, tuple[object, frozenset[str], float]] = field(default_factory=dict)
    #: the topics among those given that the principal of the group's latest ConsumerGroupHeartbeat may DESCRIBE
    #: (Kafka resolves a group's regexes with the context of the request that triggers it); None until one came
    topic_filter: Callable[[frozenset[str]], frozenset[str]] | None = None

    def static_owner(self, instance_id: str | None, member_id: str) -> tuple[int, str]:
        """Kafka's check of a request that names a static member: (error, the member id it stands for). Without an
        instance id, ``member_id`` as given; an unknown instance id is UNKNOWN_MEMBER_ID; one held by another member
        than ``member_id`` is FENCED_INSTANCE_ID (an empty ``member_id``, which LeaveGroup by instance id may send,
        stands for the holder)."""
        if instance_id is None:
            return ErrorCode.NONE, member_id
        current = self.static_members.get(instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, member_id
        if member_id and member_id != current:
            return ErrorCode.FENCED_INSTANCE_ID, member_id
        return ErrorCode.NONE, current

    def subscribed_topics(self, all_topics: TopicMetadata) -> set[str]:
        """Every topic some member subscribes to, by name or by regex, that exists."""
        out: set[str] = set()
        for m in self.members.values():
            out.update(resolve(m, all_topics, self.regex_matches, self.topic_filter))
        live = {m.subscribed_topic_regex for m in self.members.values()}
        for gone in [rx for rx in self.regex_matches if rx not in live]:
            del self.regex_matches[gone]
        return out

    def select_assignor(self) -> str:
        """The assignor most members ask for (ties: in :data:`ASSIGNORS` order), else the default."""
        asked = [m.server_assignor for m in self.members.values() if m.server_assignor]
        if not asked:
            return ASSIGNORS[0]
        return max(ASSIGNORS, key=lambda name: (asked.count(name), -ASSIGNORS.index(name)))


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered; not a line on stderr

#: what :func:`compile_regex` raises for a pattern that does not parse
RegexError = re2.error


def metadata_hash(metadata: TopicMetadata) -> int:
    """A signed 64-bit digest of the subscribed topics (name, id, partition count), stored with the group epoch
    (the ``MetadataHash`` of Kafka 4.1's record; Kafka's own digest differs, so a Kafka coordinator reading our
    records rebalances once): a coordinator that loads the group sees whether the topics changed meanwhile."""
    if not metadata:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name, (topic_id, count) in sorted(metadata.items()):
        h.update(name.encode() + b"\0" + topic_id.bytes + count.to_bytes(4, "big"))
    return int.from_bytes(h.digest(), "big", signed=True)


def compile_regex(pattern: str):
    """A subscription regex as the broker matches it (whole topic names), with RE2 as Kafka does with RE2J: in time
    linear in the name, whatever the pattern; raises :data:`RegexError`."""
    return re2.compile(pattern, _RE2_OPTIONS)


#: How long a regex's matches are kept when the topics do not change (Kafka's
#: ``group.consumer.regex.refresh.interval.ms`` default): ACL changes reach a regex subscription this late at most
REGEX_REFRESH_S = 600.0


def resolve(member: ConsumerMember, all_topics: TopicMetadata,
            cache: dict[str, tuple[object, frozenset[str], float]] | None = None,
            allowed: Callable[[frozenset[str]], frozenset[str]] | None = None) -> set[str]:
    """The existing topics ``member`` subscribes to, by name and by regex (matching whole names, internal topics
    too, as Kafka's), the regex's matches narrowed by ``allowed`` (the topics the requesting principal may
    DESCRIBE, as Kafka 4.x filters them). ``cache``: see :attr:`ConsumerGroupState.regex_matches`; only matches
    narrowed by an ``allowed`` are kept there (a match made without one, at a load, is made again by the next
    heartbeat)."""
    names = {n for n in member.subscribed_topic_names if n in all_topics}
    pattern = member.subscribed_topic_regex
    if pattern:
        now = time.monotonic()
        hit = cache.get(pattern) if cache is not None else None
        if hit is not None and hit[0] is all_topics and now - hit[2] < REGEX_REFRESH_S:
            names.update(hit[1])
            return names
        try:
            rx = compile_regex(pattern)
        except RegexError:
            return names
        matched = frozenset(n for n in all_topics if rx.fullmatch(n))
        if allowed is not None:
            matched = frozenset(allowed(matched))
            if cache is not None:
                cache[pattern] = (all_topics, matched, now)
        names.update(matched)
    return names


# -- assignors ----------------------------------------------------------------------------------------
def assign(assignor: str, subscriptions: dict[str, set[str]], topics: TopicMetadata,
           previous: dict[str, Assignment], instance_ids: dict[str, str | None] | None = None
           ) -> dict[str, Assignment]:
    """The target assignment: member id -> topic id -> partitions. ``subscriptions`` maps each member to the
    existing topic names it subscribes to; ``previous`` is the last target (``uniform`` keeps what it can);
    ``instance_ids`` orders ``range``'s members as Kafka's: static members first, by instance id, then the others
    by member id."""
    if assignor == "range":
        instance_ids = instance_ids or {}
        out = _range(subscriptions, topics, lambda m: (0, instance_ids[m], m) if instance_ids.get(m) else (1, "", m))
    else:
        out = _uniform(subscriptions, topics, previous)
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in out.items()}


def _range(subscriptions: dict[str, set[str]], topics: TopicMetadata, order) -> dict[str, dict[uuid.UUID, set[int]]]:
    """Per topic, its subscribers in ``order`` get contiguous ranges, the first ones one more."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subscriptions}
    for name, (topic_id, count) in sorted(topics.items()):
        members = sorted((m for m, subs in subscriptions.items() if name in subs), key=order)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[m][topic_id] = set(range(start, start + n))
            start += n
    return out


def _uniform(subscriptions: dict[str, set[str]], topics: TopicMetadata,
             previous: dict[str, Assignment]) -> dict[str, dict[uuid.UUID, set[int]]]:
    """Balanced and sticky: every member keeps what it had where it still subscribes, partitions nobody has go
    to the eligible member with the fewest, and partitions move from the fullest eligible member to the
    emptiest while they differ by more than one."""
    by_id = {topic_id: (name, count) for name, (topic_id, count) in topics.items()}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    held: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in subscriptions}
    for m, assignment in sorted(previous.items()):
        if m not in subscriptions:
            continue
        for topic_id, partitions in assignment.items():
            name, count = by_id.get(topic_id, (None, 0))
            if name is None or name not in subscriptions[m]:
                continue
            for p in partitions:
                if p < count and (topic_id, p) not in owner:
                    owner[(topic_id, p)] = m
                    held[m].add((topic_id, p))
    eligible = {topic_id: sorted(m for m, subs in subscriptions.items() if name in subs)
                for name, (topic_id, _count) in topics.items()}
    free = [(topic_id, p) for name, (topic_id, count) in sorted(topics.items()) for p in range(count)
            if (topic_id, p) not in owner and eligible[topic_id]]
    free.sort(key=lambda tp: len(eligible[tp[0]]))  # the most constrained first
    for tp in free:
        m = min(eligible[tp[0]], key=lambda m: (len(held[m]), m))
        owner[tp] = m
        held[m].add(tp)
    # moves: from the member with the most to an eligible one with at least two fewer
    moved = True
    while moved:
        moved = False
        for m in sorted(held, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[m], key=lambda tp: (str(tp[0]), -tp[1])):
                best = min(eligible[tp[0]], key=lambda o: (len(held[o]), o))
                if len(held[best]) + 1 < len(held[m]):
                    held[m].discard(tp)
                    held[best].add(tp)
                    owner[tp] = best
                    moved = True
                    break
            if moved:
                break
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subscriptions}
    for (topic_id, p), m in owner.items():
        out[m].setdefault(topic_id, set()).add(p)
    return out


# -- reconciliation -----------------------------------------------------------------------------------
def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Does the member, by what it says it owns (None: it did not say, so assume it does), still hold any of
    ``partitions``?"""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def reconcile(group: ConsumerGroupState, member: ConsumerMember, owned: Assignment | None) -> None:
    """Move ``member`` towards its target (Kafka's ``CurrentAssignmentBuilder``); ``owned`` is what the member
    reported holding in this heartbeat, None when it did not say. Updates the member and the group's owners."""
    if member.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return
        _next(group, member, member.epoch, owned)
    elif member.state == UNRELEASED_PARTITIONS:
        _next(group, member, member.epoch, owned)
    elif member.epoch != group.assignment_epoch:
        _next(group, member, member.epoch, owned)


def _next(group: ConsumerGroupState, member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
    target = group.target.get(member.member_id, {})
    assigned: dict[uuid.UUID, set[int]] = {}
    revoke: dict[uuid.UUID, set[int]] = {}
    pending: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        want = target.get(topic_id, frozenset())
        have = member.assigned.get(topic_id, frozenset())
        keep = have & want
        if keep:
            assigned[topic_id] = set(keep)
        if have - keep:
            revoke[topic_id] = set(have - keep)
        for p in want - keep:
            holder = group.owners.get((topic_id, p))
            if holder is not None and holder != member.member_id:
                unreleased = True
            else:
                pending.setdefault(topic_id, set()).add(p)
    group.release(member)
    frozen = {t: frozenset(ps) for t, ps in revoke.items()}
    if frozen and _owns_any(owned, frozen):
        member.state = UNREVOKED_PARTITIONS
        _set_epoch(member, epoch)
        member.assigned = {t: frozenset(ps) for t, ps in assigned.items()}
        member.pending_revocation = frozen
    else:
        for t, ps in pending.items():
            assigned.setdefault(t, set()).update(ps)
        member.state = UNRELEASED_PARTITIONS if unreleased else STABLE
        _set_epoch(member, group.assignment_epoch)
        member.assigned = {t: frozenset(ps) for t, ps in assigned.items()}
        member.pending_revocation = {}
    group.take(member)


def _set_epoch(member: ConsumerMember, epoch: int) -> None:
    if epoch != member.epoch:
        member.previous_epoch, member.epoch = member.epoch, epoch


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    """Is every partition the member reports holding among those it was given? (None: it did not say.)"""
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())
