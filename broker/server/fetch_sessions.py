"""Incremental fetch sessions (KIP-227), as Kafka 2.7's ``FetchSession.scala`` keeps them.

A fetcher that sends Fetch v7+ with ``session_id`` 0 and ``session_epoch`` 0 (a *full* request) asks
for a session: the broker remembers the request's partitions and what it answered for each, and
gives the session's id in the answer. From then on the fetcher sends *incremental* requests naming
the session and the next epoch, with only the partitions whose fetch parameters changed (added or
updated) and those it no longer wants (``forgotten_topics_data``); the broker fetches every partition
of the session and answers only those with something new. For a consumer with hundreds of partitions
that keeps every request and most answers small: nothing is parsed, looked up or encoded for a
partition where nothing happened.

Rules (each as Kafka's ``FetchManager.newContext``):

* Epochs: 0 asks for a new session, -1 (FINAL) for none; a full request that names a session closes
  it. An incremental request's epoch must be the session's (1 after the full request, then +1 each
  time, wrapping from 2^31-1 to 1): else INVALID_FETCH_SESSION_EPOCH; an unknown id:
  FETCH_SESSION_ID_NOT_FOUND. Both answer no partitions and session id 0, and the fetcher starts
  over with a full request. A request whose forgotten partitions leave the session empty closes it
  (session id 0 in the answer).
* A partition of the session is in an incremental answer when it has records, an error or a
  preferred read replica, or when its high watermark, log start offset or last stable offset
  changed since the last answer that carried it. (Kafka 2.7 does not compare the last stable
  offset; a read_committed consumer's lag would then stand still while a transaction ends without
  new records, so it is compared here.) A partition that answered moves to the end of the session's
  order, so that under ``max_bytes`` every partition gets its turn.
* Cache (``max.incremental.fetch.session.cache.slots``, 1000; 0: no sessions): when full, a new
  session takes the place of one unused for over 2 minutes, else of an evictable one that is not
  more valuable: sessions older than 2 minutes are evictable, the smallest first; a follower's
  (privileged) session can be taken only by a follower's or once it is 2 minutes old, and a
  follower's request may also take a consumer's session of any age. Otherwise the answer carries
  session id 0 and the fetcher keeps sending full requests.
* Topic ids (Fetch v13+, KIP-516): a session made by a request naming topics by id serves only such
  requests, and one made by names only requests naming topics by name (FETCH_SESSION_TOPIC_ID_ERROR
  otherwise, as Kafka's ``FetchManager``). Ids are resolved to names when a request arrives; an id this
  broker does not know stays in the session (answered UNKNOWN_TOPIC_ID) until its topic is known or the
  fetcher forgets it. The session keeps the id each topic was named by: once its topic is deleted, or
  deleted and made again under its name, the partitions go back under that id and answer
  UNKNOWN_TOPIC_ID, never the new topic's records (Kafka keys the session by topic id and partition).
* A throttled answer (client quotas empty it) changes nothing: a session it would have created is
  not kept, and the cached state is as before (see :meth:`FetchSessionCache.undo`).

Sessions belong to the broker, not to a connection (a fetcher may reconnect and go on). Loop-only.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Callable

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
#: Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
EVICTION_MS = 120_000


#: Fetch v13+ names topics by id; one this broker does not know is kept (in sessions too) under this prefix and
#: the id's text, a name no topic can have (:func:`unknown_topic_key`), and answered UNKNOWN_TOPIC_ID
UNKNOWN_TOPIC_PREFIX = "\x00"


def unknown_topic_key(topic_id: uuid.UUID) -> str:
    return f"{UNKNOWN_TOPIC_PREFIX}{topic_id}"


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


def is_full(epoch: int) -> bool:
    return epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the fetcher's last parameters (``request``, a request's partition entry,
    reused for every fetch of the session) and what the broker last answered."""

    request: dict
    high_watermark: int = -1
    local_log_start: int = -1
    last_stable: int = -1


def _cached(p: dict) -> CachedPartition:
    return CachedPartition({"partition": p["partition"], "current_leader_epoch": p["current_leader_epoch"],
                            "fetch_offset": p["fetch_offset"], "log_start_offset": p["log_start_offset"],
                            "partition_max_bytes": p["partition_max_bytes"]})


class FetchSession:
    __slots__ = ("id", "privileged", "partitions", "creation_ms", "last_used_ms", "epoch", "topic_ids", "ids",
                 "checked")

    def __init__(self, session_id: int, privileged: bool, partitions: dict, now_ms: float,
                 topic_ids: bool = False, checked: int = 0) -> None:
        self.id = session_id
        self.privileged = privileged
        #: made by a Fetch v13+ (topics named by id): only such requests may use it, and v12- only the others
        self.topic_ids = topic_ids
        #: a topic-id session's topics by name: the id the fetcher named each by
        self.ids: dict[str, uuid.UUID] = {}
        #: the metadata version the names were last checked against (:meth:`check_ids`)
        self.checked = checked
        #: (topic, partition) -> CachedPartition, in the order the session is fetched
        self.partitions: dict[tuple[str, int], CachedPartition] = partitions
        self.creation_ms = self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)

    def remember_ids(self, topics: list[dict]) -> None:
        """A topic-id session: the id each of a request's known topics was named by (its ``topic_id``)."""
        if self.topic_ids:
            self.ids.update((t["topic"], t["topic_id"]) for t in topics
                            if not t["topic"].startswith(UNKNOWN_TOPIC_PREFIX))

    def update(self, topics: list[dict], forgotten: list[dict]) -> None:
        """An incremental request's partitions (added or changed) and forgotten ones."""
        partitions = self.partitions
        self.remember_ids(topics)
        for t in topics:
            name = t["topic"]
            for p in t["partitions"]:
                cached = partitions.get((name, p["partition"]))
                if cached is None:
                    partitions[(name, p["partition"])] = _cached(p)
                else:
                    entry = cached.request
                    entry["fetch_offset"] = p["fetch_offset"]
                    entry["log_start_offset"] = p["log_start_offset"]
                    entry["partition_max_bytes"] = p["partition_max_bytes"]
                    entry["current_leader_epoch"] = p["current_leader_epoch"]
        for t in forgotten:
            for index in t["partitions"]:
                partitions.pop((t["topic"], index), None)

    def check_ids(self, topic_name: Callable[[uuid.UUID], str | None], version: int) -> None:
        """A topic-id session after a metadata change (``version``, the metadata cache's, differs from the one
        last checked): every partition moves, in place and keeping the session's order, to where its id says
        now. One kept under an id nobody knew (:func:`unknown_topic_key`) moves to its topic's name once the
        id is known; one kept under a name whose topic no longer has the id the fetcher named it by (deleted,
        or deleted and made again) moves back under that id. Called before a request's changes are applied,
        which were resolved against the same metadata."""
        if version == self.checked:  # the fetch path: nothing changed, nothing to scan
            return
        self.checked = version
        ids = self.ids
        moved = {}
        for (name, index), cached in self.partitions.items():
            if name.startswith(UNKNOWN_TOPIC_PREFIX):
                topic_id = uuid.UUID(name[len(UNKNOWN_TOPIC_PREFIX):])
                known = topic_name(topic_id)
                if known is not None:
                    ids[known] = topic_id
                    name = known
            else:
                topic_id = ids.get(name)
                if topic_id is not None and topic_name(topic_id) != name:
                    name = unknown_topic_key(topic_id)
            moved[(name, index)] = cached
        self.partitions.clear()
        self.partitions.update(moved)

    def as_topics(self) -> list[dict]:
        """The session's partitions as a full request's ``topics`` (consecutive partitions of a topic together)."""
        topics: list[dict] = []
        last = None
        entries: list[dict] = []
        for (name, _index), cached in self.partitions.items():
            if name != last:
                entries = []
                topics.append({"topic": name, "partitions": entries})
                last = name
            entries.append(cached.request)
        return topics


class FetchSessionCache:
    """The broker's fetch sessions (see the module docstring)."""

    def __init__(self, max_entries: int, eviction_ms: float = EVICTION_MS,
                 on_evict: Callable[[], None] | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._on_evict = on_evict

    @property
    def partitions(self) -> int:
        return sum(len(s.partitions) for s in list(self.sessions.values()))

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: float) -> None:
        session.last_used_ms = now_ms

    def create(self, now_ms: float, privileged: bool, topics: list[dict], responses: list[dict],
               topic_ids: bool = False, metadata_version: int = 0) -> int:
        """A session for a full request's partitions and its answer; its id, or 0 when the cache has no room.
        ``topic_ids``: made by Fetch v13+, whose topics carry the ``topic_id`` they were resolved from at
        ``metadata_version``."""
        size = sum(len(t["partitions"]) for t in topics)
        if self.max_entries <= 0 or (len(self.sessions) >= self.max_entries
                                     and not self._try_evict(privileged, size, now_ms)):
            return INVALID_SESSION_ID
        answered = {(t["topic"], p["partition_index"]): p for t in responses for p in t["partitions"]}
        partitions: dict[tuple[str, int], CachedPartition] = {}
        for t in topics:
            for p in t["partitions"]:
                key = (t["topic"], p["partition"])
                cached = partitions[key] = _cached(p)
                out = answered.get(key)
                if out is not None:
                    cached.high_watermark = -1 if out["error_code"] else out["high_watermark"]
                    cached.local_log_start = out["log_start_offset"]
                    cached.last_stable = out["last_stable_offset"]
        session_id = random.randint(1, INT32_MAX)
        while session_id in self.sessions:
            session_id = random.randint(1, INT32_MAX)
        session = self.sessions[session_id] = FetchSession(session_id, privileged, partitions, now_ms, topic_ids,
                                                           metadata_version)
        session.remember_ids(topics)
        return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: float) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        old = now_ms - self.eviction_ms
        candidates = [s for s in self.sessions.values()
                      if s.creation_ms < old or (privileged and not s.privileged)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.id))
        if (privileged, size) < (victim.privileged, len(victim.partitions)):
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.sessions.pop(session.id, None)
        if self._on_evict is not None:
            self._on_evict()


def select_changes(session: FetchSession, responses: list[dict]) -> tuple[list[dict], Callable[..., None]]:
    """An incremental answer: of ``responses`` (every partition of the session), only those a fetcher must
    hear of, with the cached state updated and those partitions moved to the end of the session's order.
    Returns the answer's topics and a function that puts the session back as it was (a throttled answer; it
    takes the response, as ``RequestContext.fetch_undo`` is called, and leaves it as it is)."""
    partitions = session.partitions
    before_order = list(partitions)
    changed: list[tuple[CachedPartition, int, int, int]] = []
    out_topics: list[dict] = []
    answered: list[tuple[str, int]] = []
    for t in responses:
        name = t["topic"]
        kept = []
        for p in t["partitions"]:
            cached = partitions.get((name, p["partition_index"]))
            if cached is None:
                continue
            records = p["records"]
            must = (len(records) if isinstance(records, (bytes, bytearray, memoryview)) else records.length) > 0
            error = p["error_code"]
            hw = -1 if error else p["high_watermark"]
            if (hw != cached.high_watermark or p["log_start_offset"] != cached.local_log_start
                    or p["last_stable_offset"] != cached.last_stable):
                changed.append((cached, cached.high_watermark, cached.local_log_start, cached.last_stable))
                cached.high_watermark, cached.local_log_start = hw, p["log_start_offset"]
                cached.last_stable = p["last_stable_offset"]
                must = True
            if must or error or p["preferred_read_replica"] >= 0:
                kept.append(p)
                answered.append((name, p["partition_index"]))
        if kept:
            out_topics.append({**t, "partitions": kept})
    for key in answered:  # to the end: the others get their turn first next time
        partitions[key] = partitions.pop(key)

    def undo(_response: dict | None = None) -> None:
        for cached, hw, start, stable in changed:
            cached.high_watermark, cached.local_log_start, cached.last_stable = hw, start, stable
        if answered:
            order = {key: partitions[key] for key in before_order if key in partitions}
            order.update(partitions)
            partitions.clear()
            partitions.update(order)

    return out_topics, undo
