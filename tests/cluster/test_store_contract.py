"""The metadata store contract, run against both stores so they cannot drift.

Every test here takes the parametrised ``store`` fixture: the embedded store in
a temporary dir and the ZooKeeper store on a real server (a fresh chroot per
test). ZooKeeper delivers watch events on kazoo's thread, so tests wait for
them; to prove a one-shot watch did not fire again, a later "fence" watch is
triggered and awaited: events reach a client in order, so anything the first
watch fired would have arrived before it.
"""

from __future__ import annotations

import threading
import time

import pytest

from broker.cluster import (
    BadVersionError,
    Check,
    Create,
    Delete,
    EmbeddedStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    SetData,
)
from broker.cluster.zookeeper import ZooKeeperStore

WAIT_S = 10  # a guard for events to arrive, not a performance assertion


class Events:
    """Watch events collected from any thread."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, event) -> None:
        with self._cond:
            self.items.append((event.type, event.path))
            self._cond.notify_all()

    def wait_for(self, count: int) -> list[tuple[str, str]]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.items) >= count, WAIT_S), self.items
            return list(self.items)


def fence(store) -> None:
    """Return once every watch event caused before this call has been delivered."""
    fired = Events()
    if store.exists("/fence") is None:
        store.create("/fence")
    store.get("/fence", watch=fired)
    store.set("/fence", b"x")
    fired.wait_for(1)


@pytest.fixture(params=["embedded", "zookeeper"])
def store(request, tmp_path):
    if request.param == "embedded":
        s = EmbeddedStore(tmp_path)
    else:
        s = ZooKeeperStore(request.getfixturevalue("zk_connect"), session_timeout_ms=6000)
    s.start()
    yield s
    s.close()


def test_create_get_set_versions(store):
    assert store.create("/a", b"one") == "/a"
    data, stat = store.get("/a")
    assert (data, stat.version, stat.ephemeral, stat.num_children) == (b"one", 0, False, 0)
    assert abs(stat.ctime_ms / 1000 - time.time()) < 600
    assert store.set("/a", b"two").version == 1
    assert store.set("/a", b"three", version=1).version == 2
    with pytest.raises(BadVersionError):
        store.set("/a", b"four", version=1)
    assert store.get("/a")[0] == b"three"
    with pytest.raises(NoNodeError):
        store.set("/missing", b"")
    with pytest.raises(NoNodeError):
        store.get("/missing")
    assert store.exists("/missing") is None
    assert store.get_or_none("/missing") is None


def test_binary_and_empty_data_round_trip(store):
    store.create("/bin", b"\xff\x00\xfe")
    store.create("/empty")
    assert store.get("/bin")[0] == b"\xff\x00\xfe"
    assert store.get("/empty")[0] == b""


def test_create_needs_parent_and_is_exclusive(store):
    with pytest.raises(NoNodeError):
        store.create("/x/y", b"")
    store.create("/x/y", b"v", make_parents=True)
    with pytest.raises(NodeExistsError):
        store.create("/x/y", b"w")
    assert store.get_children("/x") == ["y"]
    assert store.exists("/x").num_children == 1
    with pytest.raises(NoNodeError):
        store.get_children("/nope")
    store.ensure_path("/x/y/z/w")
    assert store.get_children("/x/y/z") == ["w"]
    assert store.get("/x/y")[0] == b"v"


def test_children_are_sorted_names(store):
    for name in ("b", "a", "c10", "c2"):
        store.create(f"/p/{name}", make_parents=True)
    assert store.get_children("/p") == ["a", "b", "c10", "c2"]


def test_delete_versions_and_recursive_delete(store):
    store.create("/t/p/0", b"", make_parents=True)
    store.create("/t/p/1", b"")
    store.set("/t", b"v")
    with pytest.raises(NotEmptyError):
        store.delete("/t")
    with pytest.raises(BadVersionError):
        store.delete("/t", version=0, recursive=True)
    assert store.get_children("/t/p") == ["0", "1"]  # nothing of the subtree went
    store.delete("/t", version=1, recursive=True)
    assert store.exists("/t") is None
    with pytest.raises(NoNodeError):
        store.delete("/t")
    with pytest.raises(NoNodeError):
        store.delete("/t", recursive=True)
    store.create("/d", b"")
    with pytest.raises(BadVersionError):
        store.delete("/d", version=3)
    store.delete("/d", version=0)
    assert store.exists("/d") is None


def test_multi_is_all_or_nothing(store):
    store.create("/m", b"0")
    with pytest.raises(BadVersionError):
        store.multi([Create("/m/a", b""), SetData("/m", b"1"), Check("/m", 0)])
    assert store.exists("/m/a") is None
    assert store.get("/m")[0] == b"0" and store.exists("/m").version == 0
    with pytest.raises(NodeExistsError):
        store.multi([Create("/m/b", b""), Create("/m", b"")])
    with pytest.raises(NoNodeError):
        store.multi([Create("/m/c", b""), Delete("/m/missing")])
    with pytest.raises(NoNodeError):
        store.multi([Create("/nowhere/child", b"")])
    assert store.get_children("/m") == []
    store.multi([Create("/m/a", b""), SetData("/m", b"1", 0), Check("/m", 1), Create("/m/a/b", b"z")])
    assert store.get("/m")[0] == b"1" and store.get_children("/m") == ["a"]
    store.multi([Delete("/m/a/b"), Delete("/m/a", 0)])
    assert store.get_children("/m") == []


def test_sequence_nodes_keep_increasing(store):
    store.create("/q", b"")
    first = store.create("/q/item_", b"1", sequence=True)
    second = store.create("/q/item_", b"2", sequence=True)
    assert first.startswith("/q/item_") and len(first) == len("/q/item_") + 10
    assert int(second[-10:]) > int(first[-10:])
    store.delete(second)
    store.delete(first)
    third = store.create("/q/item_", b"3", sequence=True)
    assert int(third[-10:]) > int(second[-10:])
    assert store.get_children("/q") == [third.rsplit("/", 1)[1]]


def test_sequence_nodes_survive_restart(store):
    if isinstance(store, EmbeddedStore):  # the counter is part of the file
        first = store.create("/q_", b"", sequence=True)
        store.close()
        store.start()
        assert int(store.create("/q_", b"", sequence=True)[-10:]) > int(first[-10:])


def test_watches_fire_once(store):
    events = Events()
    store.create("/w", b"")
    store.get("/w", watch=events)
    store.get_children("/", watch=events)
    store.set("/w", b"1")
    store.create("/w2", b"")
    assert sorted(events.wait_for(2)) == [("changed", "/w"), ("child", "/")]
    store.set("/w", b"2")
    store.create("/w3", b"")
    fence(store)
    assert len(events.items) == 2


def test_exists_watch_sees_creation_and_deletion(store):
    events = Events()
    assert store.exists("/later", watch=events) is None
    store.create("/later", b"")
    assert events.wait_for(1) == [("created", "/later")]
    store.exists("/later", watch=events)
    store.delete("/later")
    assert events.wait_for(2)[1] == ("deleted", "/later")


def test_deleting_a_node_fires_its_data_and_children_watches(store):
    data_events, child_events, parent_events = Events(), Events(), Events()
    store.create("/n/leaf", b"", make_parents=True)
    store.get("/n/leaf", watch=data_events)
    store.get_children("/n/leaf", watch=child_events)
    store.get_children("/n", watch=parent_events)
    store.delete("/n/leaf")
    assert data_events.wait_for(1) == [("deleted", "/n/leaf")]
    assert child_events.wait_for(1) == [("deleted", "/n/leaf")]
    assert parent_events.wait_for(1) == [("child", "/n")]


def test_ephemeral_nodes_end_with_the_session(store):
    store.create("/e", b"x", ephemeral=True)
    assert store.exists("/e").ephemeral
    with pytest.raises(NoNodeError):
        store.create("/e/child", b"")
    store.create("/persistent", b"")
    store.close()
    store.start()
    assert store.exists("/e") is None
    assert store.exists("/persistent") is not None


def test_a_node_made_again_has_a_larger_czxid_even_after_a_restart(store):
    """The czxid is Kafka's broker epoch (KIP-380): a broker registered again must get a larger one."""
    store.create("/r", b"", ephemeral=True)
    first = store.exists("/r").czxid
    store.delete("/r")
    store.create("/r", b"", ephemeral=True)
    second = store.exists("/r").czxid
    store.close()
    store.start()
    store.create("/r", b"", ephemeral=True)
    assert 0 < first < second < store.exists("/r").czxid


def test_session_is_connected_after_start(store):
    states = []
    store.add_session_listener(states.append)
    assert store.session_state is SessionState.CONNECTED
    store.remove_session_listener(states.append)
    store.create("/s", b"")
    assert states == []
