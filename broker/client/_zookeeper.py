"""Consumer groups as old Kafka consumers kept them in ZooKeeper (Kafka 0.8's documentation, "ZooKeeper Directories").

Znodes, below the chroot of the connect string (``host:port[,host:port]/chroot``)::

    /consumers/<group>/ids/<consumer_id>            ephemeral   registration, JSON:
        {"version":1,"subscription":{"<topic or regex>":1},"pattern":"static|white_list","timestamp":"<ms>"}
    /consumers/<group>/offsets/<topic>/<partition>  persistent  the next offset to read, decimal text
    /consumers/<group>/owners/<topic>/<partition>   ephemeral   the owner's thread id, "<consumer_id>-0"

Old consumers wrote offsets as bare decimal text (``"42"``); scripts and hand edits
add a trailing newline or spaces, which :meth:`ConsumerOffsetZNode.decode` ignores.
Anything else is not an offset: decode raises ValueError, and callers report it
rather than guess. A consumer id is ``<group>_<host>-<ms>-<uuid8>`` as Kafka's
ZooKeeper consumer made them; a consumer has one stream (thread id suffix ``-0``).

One small class per znode: ``path`` builds the path, ``encode``/``decode``
convert the data. :class:`ZooKeeperOffsetStore` is the blocking store over the
offsets and registrations that kafkactl's migration commands and the consumer's
``offsets_storage="zookeeper"`` use; it is thread-safe (kazoo's client is).
Every kazoo failure surfaces as :class:`~.errors.ZooKeeperError`, one line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from ._types import TopicPartition
from .errors import ZooKeeperError

CONSUMERS = "/consumers"


class ConsumerIdZNode:
    """``/consumers/<group>/ids/<consumer_id>`` (ephemeral): a live consumer and what it reads."""

    version = 1

    @staticmethod
    def group_path(group: str) -> str:
        return f"{CONSUMERS}/{group}/ids"

    @staticmethod
    def path(group: str, consumer_id: str) -> str:
        return f"{CONSUMERS}/{group}/ids/{consumer_id}"

    @classmethod
    def encode(cls, topics: Iterable[str] = (), pattern: str | None = None) -> bytes:
        """Static subscription to ``topics``, or ``white_list`` of the regex ``pattern``."""
        subscription = {pattern: 1} if pattern is not None else {t: 1 for t in sorted(topics)}
        return json.dumps({"version": cls.version, "subscription": subscription,
                           "pattern": "white_list" if pattern is not None else "static",
                           "timestamp": str(int(time.time() * 1000))}).encode()

    @staticmethod
    def decode(data: bytes) -> "Registration":
        doc = json.loads(data.decode())
        return Registration(str(doc.get("pattern", "static")), sorted(doc.get("subscription", {})))


@dataclass(frozen=True)
class Registration:
    """A decoded consumer registration: ``pattern`` is ``static`` (``entries`` are topic
    names), ``white_list`` (one regex a topic must match) or ``black_list`` (one regex it
    must not match)."""

    pattern: str
    entries: list[str]


class ConsumerOffsetZNode:
    """``/consumers/<group>/offsets/<topic>/<partition>`` (persistent): the committed offset."""

    @staticmethod
    def group_path(group: str) -> str:
        return f"{CONSUMERS}/{group}/offsets"

    @staticmethod
    def path(group: str, topic: str, partition: int | str) -> str:
        return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(int(offset)).encode()

    @staticmethod
    def decode(data: bytes | None) -> int:
        """The offset; ValueError for anything but optional whitespace around decimal digits."""
        text = (data or b"").decode("ascii", errors="replace").strip()
        if not text.isdigit():
            raise ValueError(f"not an offset: {text!r}")
        return int(text)


class ConsumerOwnerZNode:
    """``/consumers/<group>/owners/<topic>/<partition>`` (ephemeral): who reads the partition."""

    @staticmethod
    def group_path(group: str) -> str:
        return f"{CONSUMERS}/{group}/owners"

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{CONSUMERS}/{group}/owners/{topic}/{partition}"

    @staticmethod
    def encode(owner: str) -> bytes:
        return owner.encode()

    @staticmethod
    def decode(data: bytes) -> str:
        return data.decode(errors="replace")


@dataclass(frozen=True)
class StoredOffset:
    """One offsets znode as found: ``partition`` is None when its name is not a partition
    number, ``offset`` None when its data is not an offset (``text`` holds what was there)."""

    topic: str
    partition_name: str
    text: str
    partition: int | None
    offset: int | None


@functools.cache
def _fail_fast_client_class():
    """KazooClient whose requests fail with ConnectionLoss while the connection is down.

    kazoo queues a request made while it reconnects until a connection is back, however
    long that takes, so a blocking call (and a consumer's ``poll`` waiting on one) would
    hang through a whole ZooKeeper outage. Java's client fails such a request at the
    next failed connection attempt; this one fails it at once: a request that finds the
    connection down once queued is taken back out and failed. One queued while connected
    is either sent or failed by kazoo when the connection drops, so nothing waits past it.
    (The broker's own store, :mod:`broker.cluster.zookeeper`, bounds every call instead.)
    """
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss

    class FailFastKazooClient(KazooClient):
        def _call(self, request, async_object):
            queued = super()._call(request, async_object)  # False: failed at once (closed, expired)
            if queued is False or self.connected:
                return queued
            try:
                self._queue.remove((request, async_object))
            except ValueError:  # sent meanwhile on a new connection, or failed by kazoo at the drop
                return queued
            if not async_object.ready():  # kazoo fails it itself when it finds the client closing
                async_object.set_exception(ConnectionLoss("not connected to ZooKeeper"))
            return False

    return FailFastKazooClient


def connect(zookeeper_connect: str, session_timeout_ms: int = 6000, connection_timeout_ms: int = 6000):
    """A started kazoo client for ``host:port[,...][/chroot]``; ZooKeeperError if unreachable.

    Requests made while the connection is down fail at once (ConnectionLoss, a
    ZooKeeperError through :func:`zk_errors`) rather than wait for it to come back.
    """
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    from kazoo.retry import KazooRetry

    # kazoo's default backoff grows to an hour; try at least every third of the session timeout
    # so that an outage shorter than the session never costs the session
    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=session_timeout_ms / 3000)
    from broker.cluster.zookeeper import kazoo_hosts
    from broker.config import split_zookeeper_connect

    try:
        # each host listed at least thrice, so that no attempt waits out the session (see kazoo_hosts)
        hosts = kazoo_hosts(*split_zookeeper_connect(zookeeper_connect))
        client = _fail_fast_client_class()(hosts=hosts, timeout=session_timeout_ms / 1000,
                                             connection_retry=retry)
    except (ValueError, KazooException) as exc:
        raise ZooKeeperError(f"bad zookeeper connect string {zookeeper_connect!r}: {exc}") from None
    try:
        client.start(timeout=connection_timeout_ms / 1000)
    except (KazooTimeoutError, KazooException, OSError) as exc:
        client.stop()
        client.close()
        raise ZooKeeperError(f"cannot reach ZooKeeper at {zookeeper_connect}: "
                             f"{exc or 'no answer'} within {connection_timeout_ms} ms") from None
    return client


@contextlib.contextmanager
def zk_errors(what: str) -> Iterator[None]:
    """Turn kazoo failures inside the block into ZooKeeperError("ZooKeeper <what>: ...")."""
    from kazoo.exceptions import KazooException

    try:
        yield
    except KazooException as exc:
        raise ZooKeeperError(f"ZooKeeper {what}: {type(exc).__name__} {exc}".rstrip()) from exc


class ZooKeeperOffsetStore:
    """Blocking access to legacy consumer groups in ZooKeeper (layout in the module docstring)."""

    def __init__(self, zookeeper_connect: str, *, session_timeout_ms: int = 6000,
                 connection_timeout_ms: int = 6000) -> None:
        self.zookeeper_connect = zookeeper_connect
        self.client = connect(zookeeper_connect, session_timeout_ms, connection_timeout_ms)

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def __enter__(self) -> "ZooKeeperOffsetStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        with zk_errors(f"listing {path}"):
            try:
                return sorted(self.client.get_children(path))
            except NoNodeError:
                return []

    def groups(self) -> list[str]:
        """Every group under ``/consumers``."""
        return self._children(CONSUMERS)

    def live_consumers(self, group: str) -> list[str]:
        """Ids of the consumers registered now (their ephemeral nodes exist)."""
        return self._children(ConsumerIdZNode.group_path(group))

    def registrations(self, group: str) -> dict[str, Registration]:
        from kazoo.exceptions import NoNodeError

        out = {}
        for cid in self.live_consumers(group):
            with zk_errors(f"reading consumer {cid}"):
                try:
                    data, _ = self.client.get(ConsumerIdZNode.path(group, cid))
                except NoNodeError:
                    continue  # it left while we listed
            try:
                out[cid] = ConsumerIdZNode.decode(data)
            except (ValueError, AttributeError):
                out[cid] = Registration("static", [])
        return out

    def owners(self, group: str) -> dict[TopicPartition, str]:
        from kazoo.exceptions import NoNodeError

        out = {}
        for topic in self._children(ConsumerOwnerZNode.group_path(group)):
            for name in self._children(f"{ConsumerOwnerZNode.group_path(group)}/{topic}"):
                with zk_errors("reading owners"):
                    try:
                        data, _ = self.client.get(ConsumerOwnerZNode.path(group, topic, name))
                    except NoNodeError:
                        continue
                if name.isdigit():
                    out[TopicPartition(topic, int(name))] = ConsumerOwnerZNode.decode(data)
        return out

    def stored_offsets(self, group: str) -> list[StoredOffset]:
        """Every offsets znode of ``group``, sorted by topic and partition, as found."""
        from kazoo.exceptions import NoNodeError

        out = []
        base = ConsumerOffsetZNode.group_path(group)
        for topic in self._children(base):
            names = self._children(f"{base}/{topic}")
            for name in sorted(names, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)):
                with zk_errors("reading offsets"):
                    try:
                        data, _ = self.client.get(ConsumerOffsetZNode.path(group, topic, name))
                    except NoNodeError:
                        continue
                try:
                    offset = ConsumerOffsetZNode.decode(data)
                except ValueError:
                    offset = None
                out.append(StoredOffset(topic, name, (data or b"").decode(errors="replace"),
                                        int(name) if name.isdigit() else None, offset))
        return out

    def fetch(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The offset of each partition; None where there is none or it is not a number."""
        from kazoo.exceptions import NoNodeError

        out = {}
        for tp in partitions:
            with zk_errors("reading offsets"):
                try:
                    data, _ = self.client.get(ConsumerOffsetZNode.path(group, tp.topic, tp.partition))
                except NoNodeError:
                    out[tp] = None
                    continue
            try:
                out[tp] = ConsumerOffsetZNode.decode(data)
            except ValueError:
                out[tp] = None
        return out

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Write each offset, creating the parent znodes old consumers created."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        for tp, offset in offsets.items():
            path = ConsumerOffsetZNode.path(group, tp.topic, tp.partition)
            data = ConsumerOffsetZNode.encode(offset)
            with zk_errors(f"writing {path}"):
                try:
                    self.client.set(path, data)
                except NoNodeError:
                    try:
                        self.client.create(path, data, makepath=True)
                    except NodeExistsError:
                        self.client.set(path, data)
