"""The metadata store contract (every MetadataStore must pass it) and the typed facade.

``StoreContract`` is the shared suite: the ZooKeeper store gets the same tests by
subclassing it with its own ``store`` fixture.
"""

from __future__ import annotations

import base64
import json

import pytest

from broker.cluster import (
    BadVersionError,
    Check,
    ClusterMetadata,
    Create,
    EmbeddedStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    PartitionState,
    SetData,
    TopicExistsError,
)
from broker.cluster.znodes import BrokerRegistration, TopicPartitionStateZNode
from broker.config import Endpoint


class StoreContract:
    """Behaviour every MetadataStore implementation shares (ZooKeeper semantics)."""

    def test_create_get_set_versions(self, store):
        store.create("/a", b"one")
        data, stat = store.get("/a")
        assert (data, stat.version) == (b"one", 0)
        assert store.set("/a", b"two").version == 1
        assert store.set("/a", b"three", version=1).version == 2
        with pytest.raises(BadVersionError):
            store.set("/a", b"four", version=1)
        assert store.get("/a")[0] == b"three"

    def test_create_needs_parent_and_is_exclusive(self, store):
        with pytest.raises(NoNodeError):
            store.create("/x/y", b"")
        store.create("/x/y", b"v", make_parents=True)
        with pytest.raises(NodeExistsError):
            store.create("/x/y", b"w")
        assert store.get_children("/x") == ["y"]

    def test_delete_and_recursive_delete(self, store):
        store.create("/t/p/0", b"", make_parents=True)
        store.create("/t/p/1", b"")
        with pytest.raises(NotEmptyError):
            store.delete("/t")
        store.delete("/t", recursive=True)
        assert store.exists("/t") is None
        with pytest.raises(NoNodeError):
            store.delete("/t")

    def test_multi_is_all_or_nothing(self, store):
        store.create("/m", b"0")
        with pytest.raises(BadVersionError):
            store.multi([Create("/m/a", b""), SetData("/m", b"1"), Check("/m", 0)])
        assert store.exists("/m/a") is None
        assert store.get("/m") == (b"0", store.exists("/m"))
        store.multi([Create("/m/a", b""), SetData("/m", b"1", 0)])
        assert store.get("/m")[0] == b"1" and store.get_children("/m") == ["a"]

    def test_watches_are_one_shot(self, store):
        events = []
        store.create("/w", b"")
        store.get("/w", watch=events.append)
        store.get_children("/", watch=events.append)
        store.set("/w", b"1")
        store.set("/w", b"2")
        store.create("/w2", b"")
        assert [(e.type, e.path) for e in events] == [("changed", "/w"), ("child", "/")]

    def test_ephemeral_nodes_end_with_the_session(self, store):
        store.create("/e", b"x", ephemeral=True)
        assert store.exists("/e").ephemeral
        with pytest.raises(NoNodeError):
            store.create("/e/child", b"")
        store.close()
        store.start()
        assert store.exists("/e") is None


class TestEmbeddedStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        s = EmbeddedStore(tmp_path)
        s.start()
        yield s
        s.close()

    def test_state_survives_restart_and_binary_data(self, tmp_path):
        s = EmbeddedStore(tmp_path)
        s.start()
        assert s.created
        s.create("/a/b", b"\xff\x00", make_parents=True)
        s.set("/a/b", b"\xfe")
        s.create("/eph", b"", ephemeral=True)
        s.close()
        again = EmbeddedStore(tmp_path)
        again.start()
        assert not again.created
        data, stat = again.get("/a/b")
        assert (data, stat.version) == (b"\xfe", 1)
        assert again.exists("/eph") is None
        doc = json.loads((tmp_path / "metadata-store.json").read_text())
        assert doc["format"] == 1 and "/a/b" in doc["nodes"]
        assert not list(tmp_path.glob("*.tmp"))


@pytest.fixture
def metadata(tmp_path):
    m = ClusterMetadata(EmbeddedStore(tmp_path))
    m.start()
    yield m
    m.close()


def test_cluster_id_is_22_url_safe_chars_and_kept(tmp_path):
    m = ClusterMetadata(EmbeddedStore(tmp_path))
    m.start()
    cid = m.ensure_cluster_id()
    assert len(cid) == 22 and len(base64.urlsafe_b64decode(cid + "==")) == 16
    m.close()
    m2 = ClusterMetadata(EmbeddedStore(tmp_path))
    m2.start()
    assert m2.ensure_cluster_id() == cid


def test_topic_lifecycle_uses_kafka_layouts(metadata):
    state = PartitionState(leader=0, leader_epoch=0, isr=(0,))
    metadata.create_topic("t", {0: [0], 1: [0]}, {"retention.ms": "1000"}, {0: state, 1: state})
    with pytest.raises(TopicExistsError):
        metadata.create_topic("t", {0: [0]}, {}, {0: state})
    assert metadata.topics() == ["t"]
    assert metadata.topic_assignment("t") == {0: [0], 1: [0]}
    assert metadata.topic_config("t") == {"retention.ms": "1000"}
    raw = json.loads(metadata.store.get("/brokers/topics/t/partitions/1/state")[0])
    assert raw == {"controller_epoch": 1, "isr": [0], "leader": 0, "leader_epoch": 0, "version": 1}
    read = metadata.partition_state("t", 1)
    assert read == state and read.version == 0
    bumped = PartitionState(0, 1, (0,))
    assert metadata.set_partition_state("t", 1, bumped, read.version) == 1
    with pytest.raises(BadVersionError):
        metadata.set_partition_state("t", 1, bumped, read.version)
    metadata.add_partitions("t", {0: [0], 1: [0], 2: [0]}, {2: state})
    assert sorted(metadata.topic_assignment("t")) == [0, 1, 2]
    metadata.mark_topic_deletion("t")
    assert metadata.pending_deletions() == ["t"]
    metadata.complete_topic_deletion("t")
    assert metadata.topics() == [] and metadata.pending_deletions() == []
    assert metadata.topic_config("t") == {}


def test_broker_registration_and_controller(metadata):
    reg = BrokerRegistration(3, (Endpoint("PLAINTEXT", "127.0.0.1", 1234),))
    metadata.register_broker(reg)
    got = metadata.brokers()[3]
    assert got.endpoint() == Endpoint("PLAINTEXT", "127.0.0.1", 1234)
    doc = json.loads(metadata.store.get("/brokers/ids/3")[0])
    assert doc["endpoints"] == ["PLAINTEXT://127.0.0.1:1234"] and doc["port"] == 1234
    assert metadata.elect_controller(3) == 3
    assert metadata.elect_controller(4) == 3
    assert metadata.controller_epoch() == 1
    assert TopicPartitionStateZNode.path("a", 1) == "/brokers/topics/a/partitions/1/state"
