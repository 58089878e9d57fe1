"""What only the ZooKeeper store has: a chroot, other sessions, and sessions that drop or expire.

Real servers throughout: the shared ``zookeeper`` fixture, and a private
server (tests/zookeeper.py) where a test kills and restarts ZooKeeper itself.
A session is expired on purpose with the classic trick: a second client opens
the same session (its id and password) and closes it.
"""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient

from broker.cluster import SessionState, StoreUnavailableError
from broker.cluster.zookeeper import ZooKeeperStore
from broker.config import split_zookeeper_connect as split_connect
from tests.cluster.test_store_contract import Events
from tests.zookeeper import ZooKeeperServer, free_port

WAIT_S = 30  # a guard for state changes to arrive, not a performance assertion


class States:
    """Session states reported to a listener, from kazoo's thread."""

    def __init__(self) -> None:
        self.items: list[SessionState] = []
        self._cond = threading.Condition()

    def __call__(self, state: SessionState) -> None:
        with self._cond:
            self.items.append(state)
            self._cond.notify_all()

    def wait_for(self, *expected: SessionState) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.items[-len(expected):] == list(expected), WAIT_S), self.items


def _raw(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=30)
    return zk


def expire(store: ZooKeeperStore) -> None:
    """Close the store's session from another client (ZooKeeper's documented way to expire a session)."""
    session_id, password = store.client_id
    other = KazooClient(hosts=store.hosts, client_id=(session_id, password), timeout=10)
    other.start(timeout=30)
    other.stop()
    other.close()


def test_connect_strings():
    assert split_connect("a:1,b:2/kafka/x") == ("a:1,b:2", "/kafka/x")
    assert split_connect("127.0.0.1:2181") == ("127.0.0.1:2181", "")
    assert split_connect("127.0.0.1:2181/") == ("127.0.0.1:2181", "")
    for bad in ("", "/kafka", "host", "host:port", "host:0", "a:1,:2"):
        with pytest.raises(ValueError):
            split_connect(bad)


def test_chroot_is_created_and_holds_everything(zookeeper, zk_connect):
    connect = zk_connect + "/kafka/nested"
    store = ZooKeeperStore(connect, session_timeout_ms=6000)
    store.start()
    try:
        store.create("/brokers/ids/0", b"{}", make_parents=True)
        assert store.get_children("/") == ["brokers"]
    finally:
        store.close()
    root = _raw(zookeeper.connect)
    try:
        chroot = zk_connect[len(zookeeper.connect):]
        assert root.get(chroot + "/kafka/nested/brokers/ids/0")[0] == b"{}"
        assert root.exists("/brokers") is None
    finally:
        root.stop()
        root.close()


def test_unreachable_zookeeper_fails_the_start_in_time():
    store = ZooKeeperStore(f"127.0.0.1:{free_port()}", session_timeout_ms=6000, connection_timeout_ms=1000)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="zookeeper.connection.timeout.ms=1000"):
        store.start()
    assert time.monotonic() - started < WAIT_S


def test_other_sessions_see_ephemeral_nodes_go_when_the_store_closes(zk_connect):
    store = ZooKeeperStore(zk_connect, session_timeout_ms=6000)
    store.start()
    store.create("/brokers/ids/7", b"x", ephemeral=True, make_parents=True)
    other = ZooKeeperStore(zk_connect, session_timeout_ms=6000)
    other.start()
    try:
        gone = Events()
        assert other.exists("/brokers/ids/7", watch=gone).ephemeral
        store.close()
        assert gone.wait_for(1) == [("deleted", "/brokers/ids/7")]
        assert other.get_children("/brokers/ids") == []
    finally:
        other.close()


def test_expired_session_is_reported_lost_then_connected_anew(zk_connect):
    store = ZooKeeperStore(zk_connect, session_timeout_ms=6000)
    states = States()
    store.add_session_listener(states)
    store.start()
    try:
        store.create("/e", b"", ephemeral=True)
        watch = Events()
        store.get("/e", watch=watch)
        old_session = store.client_id[0]
        expire(store)
        states.wait_for(SessionState.LOST, SessionState.CONNECTED)
        assert watch.wait_for(1)[0][0] == "session"  # kazoo drops watches with the connection
        assert store.session_state is SessionState.CONNECTED
        assert store.client_id[0] != old_session
        assert store.exists("/e") is None
        store.create("/e", b"again", ephemeral=True)
        assert store.get("/e")[0] == b"again"
    finally:
        store.close()


def test_suspended_while_zookeeper_is_down_then_the_same_session_resumes(tmp_path):
    server = ZooKeeperServer(tmp_path / "zk").start()
    store = ZooKeeperStore(server.connect, session_timeout_ms=20000, connection_timeout_ms=1000)
    states = States()
    store.add_session_listener(states)
    try:
        store.start()
        store.create("/brokers/ids/1", b"x", ephemeral=True, make_parents=True)
        session = store.client_id[0]
        server.kill()
        states.wait_for(SessionState.SUSPENDED)
        with pytest.raises(StoreUnavailableError):
            store.get("/brokers/ids/1")
        server.start()  # same port and data: ZooKeeper keeps sessions across its restart
        states.wait_for(SessionState.CONNECTED)
        assert SessionState.LOST not in states.items
        assert store.client_id[0] == session
        assert store.get("/brokers/ids/1")[1].ephemeral
    finally:
        store.close()
        server.stop()
