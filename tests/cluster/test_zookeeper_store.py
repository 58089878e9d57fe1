"""What only the ZooKeeper store has: a chroot, other sessions, and sessions that drop or expire.

Real servers throughout: the shared ``zookeeper`` fixture, and a private
server (tests/zookeeper.py) where a test kills and restarts ZooKeeper itself.
Where a test cuts the store off, or has its connections left unanswered as
ZooKeeper 3.8 leaves them while it starts, the store reaches the server
through a forwarder the test controls (tests/tcp_gate.py). A session is
expired on purpose with the classic trick: while the store is cut off, a
second client opens the same session (its id and password) and closes it.
"""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient

from broker.cluster import SessionState, StoreUnavailableError
from broker.cluster.zookeeper import ZooKeeperStore, kazoo_hosts
from broker.config import split_zookeeper_connect as split_connect
from tests.cluster.test_store_contract import Events
from tests.tcp_gate import TcpGate
from tests.zookeeper import ZooKeeperServer, expire_session, free_port

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


def test_connect_strings():
    assert split_connect("a:1,b:2/kafka/x") == ("a:1,b:2", "/kafka/x")
    assert split_connect("127.0.0.1:2181") == ("127.0.0.1:2181", "")
    assert split_connect("127.0.0.1:2181/") == ("127.0.0.1:2181", "")
    for bad in ("", "/kafka", "host", "host:port", "host:0", "a:1,:2"):
        with pytest.raises(ValueError):
            split_connect(bad)


def test_kazoo_gets_each_host_often_enough_for_three_attempts_per_session():
    assert kazoo_hosts("a:1") == "a:1,a:1,a:1"
    assert kazoo_hosts("a:1", "/kafka/x") == "a:1,a:1,a:1/kafka/x"
    assert kazoo_hosts("a:1,b:2", "/kafka") == "a:1,b:2,a:1,b:2/kafka"
    assert kazoo_hosts("a:1,b:2,c:3") == "a:1,b:2,c:3"
    assert kazoo_hosts("a:1,b:2,c:3,d:4", "/k") == "a:1,b:2,c:3,d:4/k"


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


def test_expired_session_is_reported_lost_then_connected_anew(zookeeper, zk_connect):
    gate = TcpGate(zookeeper.port)
    store = ZooKeeperStore(gate.address + split_connect(zk_connect)[1], session_timeout_ms=6000)
    states = States()
    store.add_session_listener(states)
    store.start()
    try:
        store.create("/e", b"", ephemeral=True)
        watch = Events()
        store.get("/e", watch=watch)
        old_session = store.client_id[0]
        expire_session(store.client_id, gate, zookeeper.connect)
        states.wait_for(SessionState.LOST, SessionState.CONNECTED)
        assert watch.wait_for(1)[0][0] == "session"  # kazoo drops watches with the connection
        assert store.session_state is SessionState.CONNECTED
        assert store.client_id[0] != old_session
        assert store.exists("/e") is None
        store.create("/e", b"again", ephemeral=True)
        assert store.get("/e")[0] == b"again"
    finally:
        store.close()
        gate.close()


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


def test_a_connection_zookeeper_never_answers_does_not_cost_the_session(zookeeper, zk_connect):
    """ZooKeeper 3.8 leaves a connection made between binding its port and serving unanswered and
    open; the store must give up on such a connection well before its session would expire."""
    session_timeout_s = 6
    chroot = split_connect(zk_connect)[1]
    gate = TcpGate(zookeeper.port)
    store = ZooKeeperStore(gate.address + chroot, session_timeout_ms=session_timeout_s * 1000)
    states = States()
    store.add_session_listener(states)
    try:
        store.start()
        session = store.client_id[0]
        store.create("/alive", b"", ephemeral=True)
        store.exists("/")  # the server hears from the session now: it expires 6 s from here at the soonest
        silenced = time.monotonic()
        gate.silence()  # cuts the store's connection; its next ones are accepted and never answered
        states.wait_for(SessionState.SUSPENDED)
        deadline = time.monotonic() + WAIT_S
        while gate.held == 0:
            assert time.monotonic() < deadline, "the store did not connect again"
            time.sleep(0.01)
        time.sleep(max(0.0, silenced + 1 - time.monotonic()))  # silent for a second
        gate.open()
        states.wait_for(SessionState.CONNECTED)
        took = time.monotonic() - silenced
        # One silent attempt waits a third of the session timeout (2 s), then the next one is
        # answered; before, the store waited on the silent connection for the whole 6 s.
        assert took < session_timeout_s * 2 / 3, (took, states.items)
        assert SessionState.LOST not in states.items
        assert store.client_id[0] == session
        assert store.exists("/alive").ephemeral
    finally:
        store.close()
        gate.close()
