"""The metadata store interface: a tree of versioned nodes, shaped like ZooKeeper.

Every piece of cluster metadata (cluster id, broker registrations, topic
assignments, topic configs, partition state) is a node at a slash-separated
path holding bytes (JSON, in Kafka's own znode layouts; see
:mod:`broker.cluster.znodes`). The interface is the subset of ZooKeeper the
broker needs, so the embedded store and the ZooKeeper store (kazoo) are
interchangeable:

* ``create(path, data, ephemeral=False, sequence=False, make_parents=False)``
  fails with :class:`NodeExistsError` if the node exists, and returns the path
  it created. Ephemeral nodes disappear when the store session ends (the
  embedded store never persists them). ``sequence=True`` appends the parent's
  child-change counter as ten digits (``config_change_0000000007``), as
  ZooKeeper does, so names keep increasing even after deletions.
* ``get(path) -> (data, Stat)``; ``set(path, data, version=-1) -> Stat`` is a
  compare-and-set when ``version >= 0``: it fails with :class:`BadVersionError`
  unless the node's current version equals ``version``. Each successful
  ``set`` increments the version by one; a new node has version 0.
* ``delete(path, version=-1, recursive=False)``; ``get_children(path)``;
  ``exists(path) -> Stat | None``.
* ``multi(ops)`` applies a list of :class:`Create`/:class:`SetData`/
  :class:`Delete`/:class:`Check` operations atomically: all or none.
* Watches are one-shot, as in ZooKeeper: ``get(path, watch=cb)`` fires ``cb``
  with a :class:`WatchEvent` on the next change or deletion of that node;
  ``get_children(path, watch=cb)`` on the next child added or removed;
  ``exists(path, watch=cb)`` on creation, change or deletion; a deleted node
  fires its children watches too (type ``deleted``). Callbacks run in the
  thread that made the change (embedded) or kazoo's thread (ZooKeeper): hand
  work to the event loop with ``loop.call_soon_threadsafe``, and never call
  the store from a callback. When the connection to ZooKeeper drops, every
  pending watch fires once with type ``session`` (kazoo does not carry watches
  over a reconnection): re-read and watch again.
* Session states (:class:`SessionState`, kazoo's): ``CONNECTED``;
  ``SUSPENDED``, the connection dropped but the session may still be alive
  (keep serving from what is known, decide nothing that needs the store);
  ``LOST``, the session expired and its ephemeral nodes are gone (register
  them again once ``CONNECTED`` returns, under the new session).
  ``add_session_listener(cb)`` calls ``cb(state)`` on every change, in the
  store's own thread; the embedded store is always connected and never calls.
  Operations that cannot reach the store raise :class:`StoreUnavailableError`.

Implementations are thread-safe.
"""

from __future__ import annotations

import abc
import enum
import threading
from dataclasses import dataclass
from typing import Callable, Sequence


class StoreError(Exception):
    """Base of metadata store errors."""


class NoNodeError(StoreError):
    """The node (or, for create, its parent) does not exist."""


class NodeExistsError(StoreError):
    """The node already exists."""


class BadVersionError(StoreError):
    """A compare-and-set found a different version than expected."""


class NotEmptyError(StoreError):
    """A node with children was deleted without ``recursive=True``."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached: no connection, session expired, or closed."""


class SessionState(enum.Enum):
    """The store session's state, as kazoo names it (see the module docstring)."""

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


@dataclass(frozen=True, slots=True)
class Stat:
    """What the store knows about a node besides its data."""

    version: int
    ephemeral: bool = False
    num_children: int = 0
    ctime_ms: int = 0  # creation time, milliseconds since the epoch
    #: the store's id of the change that created the node (ZooKeeper's czxid; the embedded store's own
    #: increasing number): a node made again gets a larger one, hence Kafka's broker epoch (KIP-380)
    czxid: int = -1


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A one-shot watch firing: ``created``, ``changed``, ``deleted``, ``child`` or ``session``."""

    type: str
    path: str


Watcher = Callable[[WatchEvent], None]
SessionListener = Callable[[SessionState], None]


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check


def normalize(path: str) -> str:
    """``/a/b`` form: leading slash, no trailing slash, no empty components."""
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} must start with /")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"path {path!r} may not contain . or ..")
    return "/" + "/".join(parts)


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


class MetadataStore(abc.ABC):
    """A versioned tree of nodes with watches and ephemeral nodes (see the module docstring)."""

    #: True when other processes share this store (ZooKeeper), False for the embedded file.
    shared = False

    def __init__(self) -> None:
        self._session_listeners: list[SessionListener] = []
        self._listeners_lock = threading.Lock()

    @property
    def session_state(self) -> SessionState:
        """The current session state; the embedded store is always connected."""
        return SessionState.CONNECTED

    def add_session_listener(self, listener: SessionListener) -> None:
        with self._listeners_lock:
            self._session_listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        with self._listeners_lock:
            if listener in self._session_listeners:
                self._session_listeners.remove(listener)

    def _notify_session(self, state: SessionState) -> None:
        with self._listeners_lock:
            listeners = list(self._session_listeners)
        for listener in listeners:
            listener(state)

    @abc.abstractmethod
    def start(self) -> None:
        """Open the store (read the file / connect the session)."""

    @abc.abstractmethod
    def close(self) -> None:
        """End the session: ephemeral nodes of this session go away."""

    @abc.abstractmethod
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
               make_parents: bool = False) -> str:
        """Create a node; returns its path (with the sequence suffix when ``sequence``)."""

    @abc.abstractmethod
    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        """Data and stat of a node; raises :class:`NoNodeError`."""

    @abc.abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace a node's data, compare-and-set when ``version >= 0``."""

    @abc.abstractmethod
    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Remove a node (and its subtree when ``recursive``)."""

    @abc.abstractmethod
    def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        """Stat of a node, or None."""

    @abc.abstractmethod
    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        """Names (not paths) of a node's children, sorted; raises :class:`NoNodeError`."""

    @abc.abstractmethod
    def multi(self, ops: Sequence[Op]) -> None:
        """Apply every operation or none (the first failure's error is raised)."""

    # -- conveniences built on the primitives ---------------------------------------
    def ensure_path(self, path: str) -> None:
        """Create ``path`` and any missing parents with empty data."""
        path = normalize(path)
        current = ""
        for part in [p for p in path.split("/") if p]:
            current += "/" + part
            if self.exists(current) is None:
                try:
                    self.create(current)
                except NodeExistsError:
                    pass

    def get_or_none(self, path: str) -> tuple[bytes, Stat] | None:
        try:
            return self.get(path)
        except NoNodeError:
            return None
