"""The ZooKeeper metadata store: the :class:`MetadataStore` contract on a kazoo session.

Used when ``zookeeper.connect`` is set (``host:port,host:port/chroot``, as in
Kafka's ``server.properties``). Every path of the contract is relative to the
chroot; the chroot itself is created at start when missing, as Kafka does, so
several clusters can share one ensemble (``zk:2181/kafka``, ``zk:2181/kafka2``).

Mapping onto ZooKeeper (and what differs from a plain kazoo call):

* ``create``/``get``/``set``/``exists``/``get_children``/``multi`` are the
  ZooKeeper operations themselves; node versions, ephemeral owners and
  sequence numbers are ZooKeeper's.
* ``delete(recursive=True)`` lists the subtree and deletes it in one
  transaction, the top node conditional on ``version``, so a subtree is
  removed whole or not at all (kazoo's own recursive delete is neither
  atomic nor conditional).
* kazoo's exceptions become the store's: :class:`NoNodeError` (also for a child
  of an ephemeral node, as the embedded store says it), :class:`NodeExistsError`,
  :class:`BadVersionError`, :class:`NotEmptyError`; a lost connection, an
  expired or closed session and a timed-out start become
  :class:`StoreUnavailableError`.
* Watches are ZooKeeper's one-shot watches; their event types map to the
  contract's (``created``, ``changed``, ``deleted``, ``child``). kazoo drops
  every watch when the connection drops and fires it with no type: that is
  the contract's ``session`` event.
* Session states are kazoo's (CONNECTED, SUSPENDED, LOST) and reach the
  listeners from kazoo's thread. kazoo reconnects by itself, with a new
  session after LOST; this store does not re-create ephemeral nodes, its
  users do (:class:`broker.cluster.session.BrokerSession`).

``zookeeper.session.timeout.ms`` is the session timeout asked of the server
(which bounds it by its own min and max); ``zookeeper.connection.timeout.ms``
(default: the session timeout) bounds the wait for the first connection.
Reconnection attempts back off to at most one second apart, and no attempt
waits more than a third of the session timeout for the server's answer
(:func:`kazoo_hosts` says why). While the session is not CONNECTED
(SUSPENDED, or LOST until kazoo has a new session) every operation fails at
once with :class:`StoreUnavailableError`: the broker decides nothing that
needs ZooKeeper until it is back, and no request waits for it (one would hold
up every later response on its connection). A request sent while connected
waits at most the session timeout for its answer.

Thread-safe: kazoo serialises requests on one connection.
"""

from __future__ import annotations

import logging
import threading
from typing import Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError as KazooBadVersion,
    ConnectionClosedError,
    ConnectionLoss,
    NoChildrenForEphemeralsError,
    NodeExistsError as KazooNodeExists,
    NoNodeError as KazooNoNode,
    NotEmptyError as KazooNotEmpty,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType
from kazoo.retry import KazooRetry

from broker.cluster.store import (
    BadVersionError,
    Check,
    Create,
    Delete,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionState,
    SetData,
    Stat,
    StoreError,
    StoreUnavailableError,
    Watcher,
    WatchEvent,
    normalize,
    parent_of,
)
from broker.config import split_zookeeper_connect

log = logging.getLogger("broker.cluster.zookeeper")

_ERRORS: list[tuple[type[BaseException], type[StoreError]]] = [
    (KazooNoNode, NoNodeError),
    (NoChildrenForEphemeralsError, NoNodeError),
    (KazooNodeExists, NodeExistsError),
    (KazooBadVersion, BadVersionError),
    (KazooNotEmpty, NotEmptyError),
    (ConnectionLoss, StoreUnavailableError),
    (SessionExpiredError, StoreUnavailableError),
    (ConnectionClosedError, StoreUnavailableError),
    (OperationTimeoutError, StoreUnavailableError),
    (KazooTimeoutError, StoreUnavailableError),
]

_EVENT_TYPES = {
    EventType.CREATED: "created",
    EventType.CHANGED: "changed",
    EventType.DELETED: "deleted",
    EventType.CHILD: "child",
}

_SESSION_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}

# How many times a recursive delete lists the subtree again when a child appeared meanwhile.
_RECURSIVE_DELETE_TRIES = 5

# The fewest entries kazoo's host list gets (see kazoo_hosts).
_MIN_HOST_ENTRIES = 3


def kazoo_hosts(hosts: str, chroot: str = "") -> str:
    """kazoo's ``hosts`` argument: ``hosts`` repeated until there are at least 3 entries, then ``chroot``.

    ``hosts`` is ``host:port[,host:port...]`` and ``chroot`` is ``""`` or ``/path``, as
    :func:`broker.config.split_zookeeper_connect` returns them; kazoo reads the chroot
    after the last host. ``"a:1"`` gives ``"a:1,a:1,a:1"``, ``("a:1,b:2", "/kafka")``
    gives ``"a:1,b:2,a:1,b:2/kafka"``, three hosts or more are left as they are.

    Why: kazoo (like ZooKeeper's Java client) waits for the answer to a connection
    attempt at most the session timeout divided by the number of entries in its host
    list, then tries the next entry. With one host that is the whole session timeout,
    and ZooKeeper 3.8 binds its port before it serves: a connection made in between is
    never answered nor closed. One such connection after a ZooKeeper restart would
    outlast the session, which then expires although ZooKeeper came back well within
    it. With at least 3 entries no attempt waits more than a third of the session
    timeout, so the client moves on while its session is alive. What else changes is
    what a 3-server ensemble has anyway: kazoo also uses that quotient as the write and
    ping timeout of an established connection, and it backs off only after a whole
    pass over the list, so with one host up to three attempts follow each other at once.

    Invariants: the entries are the configured list repeated whole, so every host
    appears equally often and none is favoured; the chroot, when there is one, comes
    once and last.
    """
    servers = [server.strip() for server in hosts.split(",")]
    repeats = -(-_MIN_HOST_ENTRIES // len(servers))
    return ",".join(servers * repeats) + chroot


def _translate(exc: BaseException, path: str) -> StoreError:
    for kazoo_type, ours in _ERRORS:
        if isinstance(exc, kazoo_type):
            if ours is StoreUnavailableError:
                return ours(f"ZooKeeper unavailable ({type(exc).__name__}) at {path}")
            return ours(path)
    return StoreError(f"{path}: {type(exc).__name__} {exc}")


def _stat(zstat) -> Stat:
    return Stat(zstat.version, zstat.ephemeralOwner != 0, zstat.numChildren, zstat.ctime, zstat.czxid)


class ZooKeeperStore(MetadataStore):
    """A :class:`MetadataStore` on ZooKeeper through kazoo (see the module docstring)."""

    shared = True

    def __init__(self, connect: str, *, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None) -> None:
        super().__init__()
        self.connect = connect
        self.hosts, self.chroot = split_zookeeper_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._client: KazooClient | None = None
        self._state = SessionState.LOST
        self._connected = threading.Event()

    # -- lifecycle -------------------------------------------------------------------
    def _new_client(self, chroot: str) -> KazooClient:
        return KazooClient(
            hosts=kazoo_hosts(self.hosts, chroot),
            timeout=self.session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
        )

    def _start_client(self, client: KazooClient) -> None:
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            client.stop()
            client.close()
            raise StoreUnavailableError(
                f"cannot connect to ZooKeeper at {self.hosts} within "
                f"zookeeper.connection.timeout.ms={self.connection_timeout_ms}") from None

    def start(self) -> None:
        """Connect (creating the chroot when missing) and open the session."""
        if self.chroot:
            # A client of the whole tree makes the chroot: a chrooted client cannot.
            root = self._new_client("")
            self._start_client(root)
            try:
                root.ensure_path(self.chroot)
            except Exception as exc:
                raise _translate(exc, self.chroot) from None
            finally:
                root.stop()
                root.close()
        client = self._new_client(self.chroot)
        client.add_listener(self._on_state)
        self._start_client(client)
        self._client = client
        self._state = SessionState.CONNECTED
        self._connected.set()
        log.info("connected to ZooKeeper at %s%s, session 0x%x, timeout %d ms", self.hosts, self.chroot,
                 client.client_id[0], self.session_timeout_ms)

    def close(self) -> None:
        """Close the session: ZooKeeper removes its ephemeral nodes at once."""
        client, self._client = self._client, None
        if client is None:
            return
        client.remove_listener(self._on_state)
        self._connected.clear()
        try:
            client.stop()
        finally:
            client.close()
        self._state = SessionState.LOST

    @property
    def session_state(self) -> SessionState:
        return self._state

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session id, password)`` of the current session, None when not connected."""
        client = self._client
        return None if client is None else client.client_id

    def _on_state(self, state: str) -> None:
        # kazoo's thread: must not block and must not call ZooKeeper.
        ours = _SESSION_STATES[state]
        self._state = ours
        if ours is SessionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        if ours is SessionState.CONNECTED:
            log.info("ZooKeeper session connected (0x%x)", self._client.client_id[0] if self._client else 0)
        elif ours is SessionState.SUSPENDED:
            log.warning("ZooKeeper connection lost; the session may still be alive (SUSPENDED)")
        else:
            log.warning("ZooKeeper session lost (expired or closed): its ephemeral nodes are gone")
        self._notify_session(ours)

    def _zk(self) -> KazooClient:
        client = self._client
        if client is None:
            raise StoreUnavailableError("the ZooKeeper store is not started")
        if not self._connected.is_set():
            raise StoreUnavailableError(f"no ZooKeeper session ({self._state.value}) with {self.hosts}")
        return client

    def _call(self, path: str, operation: str, *args, **kwargs):
        """Run kazoo's ``<operation>_async`` and wait at most the session timeout for the answer."""
        client = self._zk()
        try:
            return getattr(client, operation + "_async")(*args, **kwargs).get(timeout=self.session_timeout_ms / 1000)
        except (ZookeeperError, KazooTimeoutError) as exc:
            raise _translate(exc, path) from None

    def _watch(self, watch: Watcher | None):
        if watch is None:
            return None

        def fire(event) -> None:
            kind = _EVENT_TYPES.get(event.type, "session")
            watch(WatchEvent(kind, event.path or ""))

        return fire

    # -- primitives ------------------------------------------------------------------
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
               make_parents: bool = False) -> str:
        path = normalize(path)
        return self._call(path, "create", path, bytes(data), ephemeral=ephemeral, sequence=sequence,
                          makepath=make_parents)

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        path = normalize(path)
        data, zstat = self._call(path, "get", path, watch=self._watch(watch))
        return data or b"", _stat(zstat)

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        path = normalize(path)
        return _stat(self._call(path, "set", path, bytes(data), version))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        path = normalize(path)
        if path == "/":
            raise NoNodeError(path)
        if not recursive:
            self._call(path, "delete", path, version)
            return
        for attempt in range(_RECURSIVE_DELETE_TRIES):
            subtree = self._subtree(path)
            ops: list[Op] = [Delete(p) for p in sorted(subtree, key=lambda p: -p.count("/"))]
            try:
                self.multi(ops + [Delete(path, version)])
                return
            except NotEmptyError:
                if attempt == _RECURSIVE_DELETE_TRIES - 1:
                    raise
            except NoNodeError:
                if self.exists(path) is None or attempt == _RECURSIVE_DELETE_TRIES - 1:
                    raise

    def _subtree(self, path: str) -> list[str]:
        """Every descendant of ``path`` (not ``path`` itself)."""
        out: list[str] = []
        pending = [path]
        while pending:
            node = pending.pop()
            for child in self.get_children(node):
                child_path = f"{node.rstrip('/')}/{child}"
                out.append(child_path)
                pending.append(child_path)
        return out

    def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        path = normalize(path)
        zstat = self._call(path, "exists", path, watch=self._watch(watch))
        return None if zstat is None else _stat(zstat)

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        path = normalize(path)
        return sorted(self._call(path, "get_children", path, watch=self._watch(watch)))

    def multi(self, ops: Sequence[Op]) -> None:
        if not ops:
            return
        transaction = self._zk().transaction()
        for op in ops:
            path = normalize(op.path)
            if isinstance(op, Create):
                transaction.create(path, bytes(op.data), ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetData):
                transaction.set_data(path, bytes(op.data), op.version)
            elif isinstance(op, Delete):
                transaction.delete(path, op.version)
            elif isinstance(op, Check):
                transaction.check(path, op.version)
            else:  # pragma: no cover - type guard
                raise TypeError(f"unknown operation {op!r}")
        try:
            results = transaction.commit_async().get(timeout=self.session_timeout_ms / 1000)
        except (ZookeeperError, KazooTimeoutError) as exc:
            raise _translate(exc, "multi") from None
        for op, result in zip(ops, results):
            if isinstance(result, BaseException) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
                failed = normalize(op.path)
                if isinstance(op, Create) and isinstance(result, KazooNoNode):
                    failed = parent_of(failed)
                raise _translate(result, failed)
