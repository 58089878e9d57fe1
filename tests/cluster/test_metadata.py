"""The typed facade on both stores (Kafka 2.7's znode layouts), and the embedded store's file.

The ``metadata`` fixture runs every facade test on the embedded store and on a
real ZooKeeper (a fresh chroot per test), as the store contract does.
"""

from __future__ import annotations

import base64
import json
import shutil
import time

import pytest

from broker.cluster import (
    BadVersionError,
    ClusterMetadata,
    Create,
    EmbeddedStore,
    PartitionState,
    SetData,
    StoreUnavailableError,
    TopicExistsError,
)
from broker.cluster.metadata import BrokerIdInUseError
from broker.cluster.zookeeper import ZooKeeperStore
from broker.cluster.znodes import PERSISTENT_PATHS, BrokerRegistration, TopicPartitionStateZNode
from broker.config import Endpoint
from broker.topic_ids import format_topic_id


class TestEmbeddedStore:
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

    def test_a_failed_write_changes_nothing_in_memory(self, tmp_path):
        """The file cannot be written (its directory is gone): the store's own error, and the tree in
        memory stays as the file last had it; a write that can be made again is kept."""
        directory = tmp_path / "store"
        s = EmbeddedStore(directory)
        s.start()
        s.create("/a", b"1")
        s.create("/eph", b"", ephemeral=True)
        shutil.rmtree(directory)
        with pytest.raises(StoreUnavailableError, match="metadata-store.json"):
            s.multi([SetData("/a", b"2"), Create("/b", b"")])
        assert s.get("/a")[0] == b"1" and s.get("/a")[1].version == 0 and s.exists("/b") is None
        assert s.get_children("/") == ["a", "eph"]
        s.delete("/eph")  # ephemeral: nothing to write
        directory.mkdir()
        s.set("/a", b"3")
        s.close()
        again = EmbeddedStore(directory)
        again.start()
        assert again.get("/a")[0] == b"3" and again.get("/a")[1].version == 1 and again.exists("/b") is None


def _store(kind: str, request, tmp_path):
    if kind == "embedded":
        return EmbeddedStore(tmp_path)
    return ZooKeeperStore(request.getfixturevalue("zk_connect"), session_timeout_ms=6000)


@pytest.fixture(params=["embedded", "zookeeper"])
def metadata(request, tmp_path):
    m = ClusterMetadata(_store(request.param, request, tmp_path))
    m.start()
    yield m
    m.close()


@pytest.mark.parametrize("kind", ["embedded", "zookeeper"])
def test_cluster_id_is_22_url_safe_chars_and_kept(kind, request, tmp_path):
    m = ClusterMetadata(_store(kind, request, tmp_path))
    m.start()
    cid = m.ensure_cluster_id()
    assert len(cid) == 22 and len(base64.urlsafe_b64decode(cid + "==")) == 16
    assert json.loads(m.store.get("/cluster/id")[0]) == {"version": "1", "id": cid}
    m.close()
    m.start()
    assert m.ensure_cluster_id() == cid
    m.close()


def test_start_makes_kafkas_persistent_paths(metadata):
    for path in PERSISTENT_PATHS:
        assert metadata.store.exists(path) is not None, path


def test_topic_lifecycle_uses_kafka_layouts(metadata):
    state = PartitionState(leader=0, leader_epoch=0, isr=(0,))
    topic_id = metadata.create_topic("t", {0: [0], 1: [0]}, {"retention.ms": "1000"}, {0: state, 1: state})
    with pytest.raises(TopicExistsError):
        metadata.create_topic("t", {0: [0]}, {}, {0: state})
    assert metadata.topics() == ["t"]
    assert metadata.topic_assignment("t") == {0: [0], 1: [0]}
    assert metadata.topic_config("t") == {"retention.ms": "1000"}
    assert json.loads(metadata.store.get("/brokers/topics/t")[0]) == {
        "version": 3, "topic_id": format_topic_id(topic_id), "partitions": {"0": [0], "1": [0]},
        "adding_replicas": {}, "removing_replicas": {}}  # Kafka 2.8's layout (KIP-516)
    assert metadata.topic_id("t") == topic_id and len(format_topic_id(topic_id)) == 22
    assert json.loads(metadata.store.get("/config/topics/t")[0]) == {"version": 1, "config": {"retention.ms": "1000"}}
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


def test_broker_registration_is_kafka_27s_version_5(metadata):
    reg = BrokerRegistration(3, (Endpoint("PLAINTEXT", "127.0.0.1", 1234),), timestamp_ms=1700000000000)
    metadata.check_broker_id_free(3)
    metadata.register_broker(reg)
    got = metadata.brokers()[3]
    assert got.endpoint() == Endpoint("PLAINTEXT", "127.0.0.1", 1234) and got.rack is None
    data, stat = metadata.store.get("/brokers/ids/3")
    assert stat.ephemeral
    assert json.loads(data) == {
        "version": 5, "host": "127.0.0.1", "port": 1234, "jmx_port": -1, "timestamp": "1700000000000",
        "endpoints": ["PLAINTEXT://127.0.0.1:1234"], "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "features": {},
    }
    with pytest.raises(BrokerIdInUseError, match="broker.id 3 is already registered"):
        metadata.check_broker_id_free(3)
    with pytest.raises(BrokerIdInUseError):
        metadata.register_broker(reg)
    metadata.register_broker(BrokerRegistration(4, reg.endpoints, rack="r1"))
    assert json.loads(metadata.store.get("/brokers/ids/4")[0])["rack"] == "r1"
    assert metadata.brokers()[4].rack == "r1"


def test_controller_election_bumps_the_epoch_as_kafka(metadata):
    assert metadata.controller_id() == -1 and metadata.controller_epoch() == 0
    assert metadata.elect_controller(3) == 3
    assert metadata.elect_controller(4) == 3
    data, stat = metadata.store.get("/controller_epoch")
    assert (data, stat.version) == (b"1", 1)  # made as "0", bumped once
    doc = json.loads(metadata.store.get("/controller")[0])
    assert doc["version"] == 1 and doc["brokerid"] == 3 and doc["timestamp"].isdigit()
    assert metadata.store.exists("/controller").ephemeral
    metadata.store.delete("/controller")
    assert metadata.elect_controller(4) == 4
    assert metadata.controller_epoch() == 2
    assert TopicPartitionStateZNode.path("a", 1) == "/brokers/topics/a/partitions/1/state"


def test_broker_id_generation_follows_brokers_seqid(metadata):
    assert metadata.generate_broker_id(1000) == 1001
    assert metadata.generate_broker_id(1000) == 1002
    assert metadata.store.get("/brokers/seqid") == (b"", metadata.store.exists("/brokers/seqid"))


def test_topic_config_change_writes_a_notification(metadata):
    state = PartitionState(leader=0, leader_epoch=0, isr=(0,))
    metadata.create_topic("t", {0: [0]}, {"retention.ms": "1000"}, {0: state})
    assert metadata.config_change_notifications() == []  # creation notifies nobody, as Kafka
    metadata.set_topic_config("t", {"retention.ms": "2000"})
    metadata.set_topic_config("t", {})
    names = metadata.config_change_notifications()
    assert len(names) == 2 and all(n.startswith("config_change_") and len(n) == 24 for n in names)
    doc = json.loads(metadata.store.get(f"/config/changes/{names[0]}")[0])
    assert doc == {"version": 2, "entity_path": "topics/t"}
    assert json.loads(metadata.store.get("/config/topics/t")[0]) == {"version": 1, "config": {}}


def test_config_change_notifications_expire(metadata, monkeypatch):
    from broker.cluster import metadata as metadata_module

    monkeypatch.setattr(metadata_module, "NOTIFICATION_EXPIRY_MS", 200)
    state = PartitionState(leader=0, leader_epoch=0, isr=(0,))
    metadata.create_topic("t", {0: [0]}, {}, {0: state})
    metadata.set_topic_config("t", {"retention.ms": "1"})
    first = metadata.config_change_notifications()
    time.sleep(0.5)
    metadata.set_topic_config("t", {"retention.ms": "2"})
    latest = metadata.config_change_notifications()
    assert len(latest) == 1 and latest != first


def test_producer_id_blocks_start_from_the_empty_node(metadata):
    assert metadata.store.get("/latest_producer_id_block")[0] == b""
    assert metadata.allocate_producer_id_block(0) == (0, 999)
    assert metadata.allocate_producer_id_block(1) == (1000, 1999)
    doc = json.loads(metadata.store.get("/latest_producer_id_block")[0])
    assert doc == {"version": 1, "broker": 1, "block_start": "1000", "block_end": "1999"}


def test_isr_writer_is_conditional_and_notifies_the_controller(metadata):
    from collections import namedtuple

    metadata.create_topic("t", {0: [0, 1]}, {}, {0: PartitionState(0, 3, (0, 1), 2)})
    version = metadata.partition_state("t", 0).version
    LeaderAndIsr = namedtuple("LeaderAndIsr", "leader leader_epoch isr controller_epoch")  # the replica layer's
    assert metadata.write_isr("t", 0, LeaderAndIsr(0, 3, (0,), 2), version) == version + 1
    raw = json.loads(metadata.store.get("/brokers/topics/t/partitions/0/state")[0])
    assert raw == {"controller_epoch": 2, "isr": [0], "leader": 0, "leader_epoch": 3, "version": 1}
    assert metadata.write_isr("t", 0, LeaderAndIsr(0, 3, (0, 1), 2), version) is None  # stale: nothing written
    assert metadata.partition_state("t", 0).isr == (0,)
    [name] = metadata.store.get_children("/isr_change_notification")
    assert name.startswith("isr_change_") and len(name) == len("isr_change_") + 10
    assert json.loads(metadata.store.get(f"/isr_change_notification/{name}")[0]) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0}]}
    assert metadata.take_isr_change_notifications() == {("t", 0)}
    assert metadata.store.get_children("/isr_change_notification") == []


def test_controller_writes_fail_once_another_controller_is_elected(metadata):
    from broker.cluster.metadata import ControllerMovedError

    metadata.create_topic("t", {0: [0]}, {})
    assert metadata.partition_state("t", 0) is None  # the assignment alone, as Kafka's admin client writes it
    controller_id, epoch, epoch_version = metadata.elect(0)
    assert (controller_id, epoch) == (0, 1)
    metadata.create_partition_states("t", {0: PartitionState(0, 0, (0,), epoch)}, epoch_version)
    state = metadata.partition_state("t", 0)
    assert metadata.update_partition_state("t", 0, PartitionState(0, 1, (0,), epoch, state.version),
                                           epoch_version) == state.version + 1
    metadata.store.delete("/controller")
    assert metadata.elect(1)[:2] == (1, 2)
    with pytest.raises(ControllerMovedError):
        metadata.update_partition_state("t", 0, PartitionState(0, 2, (0,), epoch, state.version + 1), epoch_version)
    assert metadata.partition_state("t", 0).leader_epoch == 1
