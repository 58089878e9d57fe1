"""A fetcher's side of an incremental fetch session (KIP-227), for one broker, as the Java client's
``FetchSessionHandler``: the consumer's :class:`~broker.client._fetcher.Fetcher` and the replica fetcher
(:mod:`broker.replica.fetcher`) use one each per broker they fetch from.

:meth:`FetchSessionHandler.build` takes every partition the next Fetch wants, as request entries
(``{"partition", "current_leader_epoch", "fetch_offset", "log_start_offset", "partition_max_bytes"}``),
and returns the request's ``session_id``, ``session_epoch``, ``topics`` and ``forgotten_topics_data``:

* without a session (epoch 0): a full request of every partition, asking the broker for a session;
* in a session: only the partitions that are new or whose entry changed, and the partitions the
  session holds that are no longer wanted as forgotten ones.

:meth:`FetchSessionHandler.handle_response` takes the broker's answer: a full request's answer with a
session id opens the session; an incremental answer moves the epoch on (its partitions are only those
with something new: the others had nothing). FETCH_SESSION_ID_NOT_FOUND or
INVALID_FETCH_SESSION_EPOCH, an answer without a session id, or a failed request
(:meth:`FetchSessionHandler.failed`: timeout, lost connection, cancelled) start over with a full request
(after a failure it names the old session, which closes it on the broker). One request at a time.
"""

from __future__ import annotations

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
_PARAMS = ("current_leader_epoch", "fetch_offset", "log_start_offset", "partition_max_bytes")


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class FetchSessionHandler:
    """One broker's fetch session, from the fetcher's side (see the module docstring)."""

    __slots__ = ("session_id", "epoch", "_held", "_pending", "_full", "_states", "_pending_states")

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: (topic, partition) -> the parameters the broker's session holds for it
        self._held: dict[tuple[str, int], tuple] = {}
        self._pending: dict[tuple[str, int], tuple] | None = None
        self._full = True
        #: (topic, partition) -> the fetcher's state object of the partition in the last answered request
        self._states: dict = {}
        self._pending_states: dict = {}

    def build(self, wanted: dict[tuple[str, int], dict], states: dict | None = None) -> dict:
        """The session fields of the next Fetch for ``wanted``: ``session_id``, ``session_epoch``, ``topics``,
        ``forgotten_topics_data``. ``states``: the fetcher's state object of each partition; one that is not
        the object of the last answered request (a partition assigned afresh, its high watermark forgotten)
        makes the request full, so that its answer names that partition although nothing changed for it."""
        states = states or {}
        held_states = self._states
        if any(key in held_states and held_states[key] is not state for key, state in states.items()):
            self.restart()
        self._pending_states = states
        params = {key: tuple(entry[f] for f in _PARAMS) for key, entry in wanted.items()}
        self._pending = params
        self._full = self.epoch == INITIAL_EPOCH
        if self._full:
            send = list(wanted.items())
            forgotten: dict[str, list[int]] = {}
        else:
            held = self._held
            send = [(key, entry) for key, entry in wanted.items() if held.get(key) != params[key]]
            forgotten = {}
            for topic, index in held.keys() - wanted.keys():
                forgotten.setdefault(topic, []).append(index)
        topics: dict[str, list[dict]] = {}
        for (topic, _index), entry in send:
            topics.setdefault(topic, []).append(entry)
        return {"session_id": self.session_id, "session_epoch": self.epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": sorted(ps)} for t, ps in forgotten.items()]}

    def handle_response(self, response: dict) -> bool:
        """Take a Fetch answer; False when the session is gone (the answer then carries no partitions)."""
        error = response.get("error_code", 0)
        if error in (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH):
            self._reset(INVALID_SESSION_ID)
            return False
        session_id = response.get("session_id", INVALID_SESSION_ID)
        if session_id == INVALID_SESSION_ID:  # none opened (the broker has no room), or the session closed
            self._reset(INVALID_SESSION_ID)
            return True
        if self._full:
            self.session_id = session_id
            self.epoch = 1
        else:
            self.epoch = _next_epoch(self.epoch)
        self._held = self._pending or {}
        self._states = self._pending_states
        self._pending = None
        return True

    def failed(self) -> None:
        """The request got no answer: the next one is full and closes this session on the broker."""
        self._reset(self.session_id)

    def restart(self) -> None:
        """The next request is full (closing this session on the broker), so that its answer carries every
        partition: for a fetcher that must hear of a partition again although nothing changed for it."""
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._held = {}
        self._states = {}
        self._pending = None

    @property
    def incremental(self) -> bool:
        """The last request built was incremental (its answer names only partitions with news)."""
        return not self._full
