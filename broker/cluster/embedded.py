"""The embedded metadata store: the ZooKeeper-shaped tree kept in one file.

Used when ``zookeeper.connect`` is not set (the single-node default) or
``metadata.store=embedded`` says so. The tree lives
in memory and every change is written to ``<first log dir>/metadata-store.json``
with an atomic replace (write a temporary file, fsync it, rename it over the old
one, fsync the directory), so a crash leaves either the old or the new tree,
never a torn one. File layout (UTF-8 JSON)::

    {"format": 1,
     "nodes": {"/cluster/id": {"version": 0, "ctime": 1700000000000, "data": "{\\"version\\":\\"1\\",...}"},
               "/brokers/topics/t": {"version": 3, "data_b64": "..."},
               "/config/changes": {"version": 0, "cversion": 12, "data": ""}, ...}}

``data`` holds node data that is valid UTF-8, ``data_b64`` anything else;
``ctime`` is the creation time in ms and ``cversion`` the count of child
creations and deletions (the next sequence number), each written only when
not zero. Ephemeral nodes (broker registrations) are never written: they end
with the process, like a ZooKeeper session. The root ``/`` always exists.
A node's ``czxid`` (:class:`~broker.cluster.store.Stat`) is not written either:
it is the store's own increasing number (microseconds since the epoch when
the store started, then one more per creation), so a broker registration made
after a restart still gets a larger one (the broker epoch). The
store has no session to lose: it never calls session listeners.

A change is applied to a copy of the tree, written, and only then made the
tree in memory: a write that fails (the disk of the first log dir failed)
raises :class:`~broker.cluster.store.StoreUnavailableError` and leaves memory
as the file is, so the store never answers with what it could not keep.

Thread-safe: one lock guards the tree and the file; watch callbacks run after
the lock is released, in the thread that made the change.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

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
    SetData,
    Stat,
    StoreUnavailableError,
    Watcher,
    WatchEvent,
    normalize,
    parent_of,
)

FILE_NAME = "metadata-store.json"
FORMAT = 1


@dataclass(slots=True)
class _Node:
    data: bytes
    version: int = 0
    ephemeral: bool = False
    children: set[str] = field(default_factory=set)
    cversion: int = 0
    ctime_ms: int = 0
    czxid: int = 0


class EmbeddedStore(MetadataStore):
    """A :class:`MetadataStore` persisted to ``directory / metadata-store.json``."""

    def __init__(self, directory: str | os.PathLike) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {"/": _Node(b"")}
        self._data_watches: dict[str, list[Watcher]] = {}
        self._child_watches: dict[str, list[Watcher]] = {}
        self._started = False
        # czxids: microseconds since the epoch at start, then one more per creation, so they grow across
        # restarts too (the clock moves on) without being written down
        self._last_czxid = 0
        #: True when start() found no file: this is the store's first start.
        self.created = False

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._load()
            else:
                self.created = True
                self._persist(self._nodes)
            self._started = True

    def close(self) -> None:
        with self._lock:
            ephemeral = [p for p, n in self._nodes.items() if n.ephemeral]
        for path in ephemeral:
            try:
                self.delete(path)
            except NoNodeError:
                pass
        self._started = False

    def _load(self) -> None:
        doc = json.loads(self.path.read_text(encoding="utf-8"))
        if doc.get("format") != FORMAT:
            raise ValueError(f"{self.path}: unknown metadata store format {doc.get('format')!r}")
        nodes: dict[str, _Node] = {"/": _Node(b"")}
        for path in sorted(doc["nodes"], key=lambda p: (p != "/", p.count("/"))):
            entry = doc["nodes"][path]
            data = entry["data"].encode() if "data" in entry else base64.b64decode(entry.get("data_b64", ""))
            nodes[path] = _Node(data, int(entry.get("version", 0)), cversion=int(entry.get("cversion", 0)),
                                ctime_ms=int(entry.get("ctime", 0)))
        for path in nodes:
            if path != "/":
                parent = parent_of(path)
                nodes.setdefault(parent, _Node(b""))
        for path in sorted(nodes, key=lambda p: p.count("/")):
            if path != "/":
                nodes[parent_of(path)].children.add(path.rsplit("/", 1)[1])
        self._nodes = nodes

    def _persist(self, nodes: dict[str, _Node]) -> None:
        """Write ``nodes`` atomically; StoreUnavailableError when the file system refuses."""
        try:
            self._write(nodes)
        except OSError as exc:
            raise StoreUnavailableError(f"cannot write {self.path}: {exc}") from exc

    def _write(self, nodes: dict[str, _Node]) -> None:
        entries = {}
        for path, node in sorted(nodes.items()):
            if node.ephemeral:
                continue
            entry: dict = {"version": node.version}
            if node.cversion:
                entry["cversion"] = node.cversion
            if node.ctime_ms:
                entry["ctime"] = node.ctime_ms
            try:
                entry["data"] = node.data.decode("utf-8")
            except UnicodeDecodeError:
                entry["data_b64"] = base64.b64encode(node.data).decode("ascii")
            entries[path] = entry
        text = json.dumps({"format": FORMAT, "nodes": entries}, indent=1, sort_keys=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # -- primitives ------------------------------------------------------------------
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
               make_parents: bool = False) -> str:
        path = normalize(path)
        if make_parents:
            self.ensure_path(parent_of(path))
        return self._multi([Create(path, data, ephemeral, sequence)])[0]

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        path = normalize(path)
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if watch is not None:
                self._data_watches.setdefault(path, []).append(watch)
            return node.data, self._stat(node)

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        path = normalize(path)
        self.multi([SetData(path, data, version)])
        with self._lock:
            return self._stat(self._nodes[path])

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        path = normalize(path)
        if recursive:
            with self._lock:
                if path not in self._nodes:
                    raise NoNodeError(path)
                prefix = path.rstrip("/") + "/"
                subtree = sorted((p for p in self._nodes if p.startswith(prefix)), key=lambda p: -p.count("/"))
            self.multi([Delete(p) for p in subtree] + [Delete(path, version)])
        else:
            self.multi([Delete(path, version)])

    def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        path = normalize(path)
        with self._lock:
            if watch is not None:
                self._data_watches.setdefault(path, []).append(watch)
            node = self._nodes.get(path)
            return None if node is None else self._stat(node)

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        path = normalize(path)
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if watch is not None:
                self._child_watches.setdefault(path, []).append(watch)
            return sorted(node.children)

    def multi(self, ops: Sequence[Op]) -> None:
        self._multi(ops)

    def _multi(self, ops: Sequence[Op]) -> list[str]:
        """Apply ``ops`` atomically; returns the paths created."""
        with self._lock:
            # Validate against a scratch copy of just the touched state, then apply.
            durable = any(not self._is_ephemeral_op(op) for op in ops)
            scratch = _Scratch(self._nodes, self._next_czxid)
            fired: list[tuple[str, str]] = []
            created = [scratch.apply(op, fired) for op in ops]
            nodes = scratch.merged()
            if durable:
                self._persist(nodes)  # before the tree in memory changes: a failed write changes nothing
            self._nodes = nodes
            callbacks = self._take_watches(fired)
        for callback, event in callbacks:
            callback(event)
        return [path for path in created if path is not None]

    # -- helpers -----------------------------------------------------------------------
    def _next_czxid(self) -> int:
        self._last_czxid = max(self._last_czxid + 1, time.time_ns() // 1000)
        return self._last_czxid

    def _is_ephemeral_op(self, op: Op) -> bool:
        """True when ``op`` touches only state that is never written to the file."""
        if isinstance(op, Create):
            return op.ephemeral
        if isinstance(op, Check):
            return True
        node = self._nodes.get(normalize(op.path))
        return node is not None and node.ephemeral

    @staticmethod
    def _stat(node: _Node) -> Stat:
        return Stat(node.version, node.ephemeral, len(node.children), node.ctime_ms, node.czxid)

    def _take_watches(self, fired: list[tuple[str, str]]) -> list[tuple[Watcher, WatchEvent]]:
        out = []
        for kind, path in fired:
            if kind == "child":
                tables = [self._child_watches]
            elif kind == "deleted":  # as ZooKeeper: a deleted node ends its children watches too
                tables = [self._data_watches, self._child_watches]
            else:
                tables = [self._data_watches]
            for table in tables:
                for callback in table.pop(path, []):
                    out.append((callback, WatchEvent(kind, path)))
        return out


class _Scratch:
    """Copy-on-write view of the node table used to apply a ``multi`` atomically."""

    def __init__(self, nodes: dict[str, _Node], next_czxid) -> None:
        self._base = nodes
        self._next_czxid = next_czxid
        self._changed: dict[str, _Node | None] = {}

    def _get(self, path: str) -> _Node | None:
        if path in self._changed:
            return self._changed[path]
        return self._base.get(path)

    def _writable(self, path: str) -> _Node:
        node = self._get(path)
        assert node is not None
        if path not in self._changed:
            node = _Node(node.data, node.version, node.ephemeral, set(node.children), node.cversion, node.ctime_ms,
                         node.czxid)
            self._changed[path] = node
        return node

    def apply(self, op: Op, fired: list[tuple[str, str]]) -> str | None:
        """Apply one operation to the scratch state; returns the path a Create made."""
        path = normalize(op.path)
        node = self._get(path)
        if isinstance(op, Create):
            parent = parent_of(path)
            parent_node = self._get(parent)
            if parent_node is None:
                raise NoNodeError(parent)
            if op.sequence:
                path = f"{path}{parent_node.cversion:010d}"
                node = self._get(path)
            if node is not None:
                raise NodeExistsError(path)
            if parent_node.ephemeral:
                raise NoNodeError(f"{parent} is ephemeral and cannot have children")
            writable_parent = self._writable(parent)
            writable_parent.children.add(path.rsplit("/", 1)[1])
            writable_parent.cversion += 1
            self._changed[path] = _Node(bytes(op.data), 0, op.ephemeral, ctime_ms=int(time.time() * 1000),
                                        czxid=self._next_czxid())
            fired += [("created", path), ("child", parent)]
            return path
        elif isinstance(op, SetData):
            if node is None:
                raise NoNodeError(path)
            if op.version >= 0 and node.version != op.version:
                raise BadVersionError(f"{path}: version {node.version}, expected {op.version}")
            writable = self._writable(path)
            writable.data = bytes(op.data)
            writable.version += 1
            fired.append(("changed", path))
        elif isinstance(op, Delete):
            if node is None or path == "/":
                raise NoNodeError(path)
            if op.version >= 0 and node.version != op.version:
                raise BadVersionError(f"{path}: version {node.version}, expected {op.version}")
            if node.children:
                raise NotEmptyError(path)
            parent = parent_of(path)
            writable_parent = self._writable(parent)
            writable_parent.children.discard(path.rsplit("/", 1)[1])
            writable_parent.cversion += 1
            self._changed[path] = None
            fired += [("deleted", path), ("child", parent)]
        elif isinstance(op, Check):
            if node is None:
                raise NoNodeError(path)
            if node.version != op.version:
                raise BadVersionError(f"{path}: version {node.version}, expected {op.version}")
        else:  # pragma: no cover - type guard
            raise TypeError(f"unknown operation {op!r}")
        return None

    def merged(self) -> dict[str, _Node]:
        """A new node table: the base with the changes applied (the base itself is left as it was)."""
        nodes = dict(self._base)
        for path, node in self._changed.items():
            if node is None:
                nodes.pop(path, None)
            else:
                nodes[path] = node
        return nodes
