"""The controller on a cluster: three real broker processes on a real ZooKeeper.

Topics are created, grown, reconfigured and deleted through any broker; what
the controller writes is read back with kazoo in Kafka 2.7's layouts, and
every broker must answer the same Metadata. The controller's broker is
killed with SIGKILL: another broker takes the role once the dead one's
session expires and elects leaders for the partitions the dead broker led.
"""

from __future__ import annotations

import json
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.protocol import ApiKey
from broker.protocol.schema import ZERO_UUID
from broker.topic_ids import parse_topic_id
from tests.server.wire import Wire

SESSION_TIMEOUT_MS = 6000
WAIT_S = 60  # a guard against a hang, not a performance assertion
# A takeover needs the dead broker's session to expire (6 s) and then one election and one round of
# requests; the margin is for a loaded 2-core machine, not a performance target.
TAKEOVER_LIMIT_S = SESSION_TIMEOUT_MS / 1000 + 14


def wait_until(check, what: str, limit: float = WAIT_S):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def cluster(broker_factory, zk_connect):
    """Brokers 1, 2 and 3 on one ZooKeeper chroot: ``{broker_id: BrokerProcess}``."""
    return {i: broker_factory(broker_id=i, zookeeper_connect=zk_connect,
                              zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS) for i in (1, 2, 3)}


def metadata(bootstrap: str, topics=None) -> dict:
    with Wire(bootstrap) as w:
        return w.call(ApiKey.METADATA, 9, {"topics": topics, "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})


def comparable(md: dict) -> dict:
    """A Metadata answer without what differs by the broker asked (nothing should)."""
    return {"brokers": sorted((b["node_id"], b["host"], b["port"]) for b in md["brokers"]),
            "controller_id": md["controller_id"], "cluster_id": md["cluster_id"],
            "topics": sorted((t["name"], t["error_code"], tuple(sorted(
                (p["partition_index"], p["leader_id"], p["leader_epoch"], tuple(p["replica_nodes"]),
                 tuple(p["isr_nodes"]), tuple(p["offline_replicas"])) for p in t["partitions"])))
                for t in md["topics"])}


def same_metadata_everywhere(brokers, kz: KazooClient | None = None) -> dict:
    """Wait until every broker answers the same Metadata; return it.

    With ``kz``, also until that Metadata names the controller ZooKeeper names:
    on a loaded machine the role may move once more after a takeover, and the
    brokers learn of it from the new controller's UpdateMetadata a moment later.
    """
    def check():
        answers = [comparable(metadata(b.bootstrap)) for b in brokers]
        if not all(a == answers[0] for a in answers):
            return None
        if kz is not None:
            try:
                if znode(kz, "/controller")["brokerid"] != answers[0]["controller_id"]:
                    return None
            except NoNodeError:  # between two controllers
                return None
        return answers[0]
    return wait_until(check, "every broker to answer the same Metadata")


def call(bootstrap: str, api_key: int, version: int, body: dict) -> dict:
    with Wire(bootstrap) as w:
        return w.call(api_key, version, body)


def create_topic(bootstrap: str, name: str, partitions: int, factor: int, configs=None) -> dict:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": factor, "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
    return call(bootstrap, ApiKey.CREATE_TOPICS, 7,
                {"topics": [topic], "timeout_ms": 30000, "validate_only": False})["topics"][0]


@pytest.fixture
def kz(zk_connect):
    client = KazooClient(hosts=zk_connect, timeout=10)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def znode(kz: KazooClient, path: str):
    return json.loads(kz.get(path)[0])


def test_topic_created_on_any_broker_is_kafka_27_layout_and_every_broker_answers_alike(cluster, kz):
    controller_id = znode(kz, "/controller")["brokerid"]
    assert controller_id in cluster
    other = next(b for i, b in cluster.items() if i != controller_id)
    result = create_topic(other.bootstrap, "orders", 3, 3, {"retention.ms": "86400000"})
    assert result["error_code"] == 0, result
    assert (result["num_partitions"], result["replication_factor"]) == (3, 3)

    assignment = znode(kz, "/brokers/topics/orders")
    # Kafka 2.8's layout: version 3 with the topic's id (KIP-516), which CreateTopics v7 answered
    assert assignment["version"] == 3 and assignment["adding_replicas"] == {} == assignment["removing_replicas"]
    assert parse_topic_id(assignment["topic_id"]) == result["topic_id"] != ZERO_UUID
    assert sorted(assignment["partitions"]) == ["0", "1", "2"]
    assert {tuple(sorted(r)) for r in assignment["partitions"].values()} == {(1, 2, 3)}
    assert znode(kz, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "86400000"}}
    epoch = int(kz.get("/controller_epoch")[0])
    for p, replicas in assignment["partitions"].items():
        state = znode(kz, f"/brokers/topics/orders/partitions/{p}/state")
        assert state == {"version": 1, "leader": replicas[0], "leader_epoch": 0, "isr": replicas,
                         "controller_epoch": epoch}

    md = same_metadata_everywhere(cluster.values())
    assert md["controller_id"] == controller_id
    assert [b[0] for b in md["brokers"]] == [1, 2, 3]
    [(name, error, partitions)] = md["topics"]
    assert (name, error) == ("orders", 0)
    for index, leader, leader_epoch, replicas, isr, offline in partitions:
        assert (leader, leader_epoch, list(replicas), offline) == (assignment["partitions"][str(index)][0], 0,
                                                                   assignment["partitions"][str(index)], ())
        assert sorted(isr) == [1, 2, 3]

    # the same name again, on the controller this time
    assert create_topic(cluster[controller_id].bootstrap, "orders", 1, 1)["error_code"] == 36  # TOPIC_ALREADY_EXISTS
    assert create_topic(other.bootstrap, "wide", 1, 4)["error_code"] == 38  # INVALID_REPLICATION_FACTOR


def test_controller_killed_another_takes_over_and_elects_leaders(cluster, kz):
    assert create_topic(cluster[1].bootstrap, "events", 6, 2)["error_code"] == 0
    same_metadata_everywhere(cluster.values())
    old_controller = znode(kz, "/controller")["brokerid"]
    old_epoch = int(kz.get("/controller_epoch")[0])
    led_by_dead = {int(p): r for p, r in znode(kz, "/brokers/topics/events")["partitions"].items()
                   if r[0] == old_controller}
    assert led_by_dead, "round-robin gives every broker partitions to lead"

    killed_at = time.monotonic()
    cluster[old_controller].kill()
    survivors = [b for i, b in cluster.items() if i != old_controller]

    def new_controller():
        stat = kz.exists("/controller")
        if stat is None:
            return None
        broker_id = znode(kz, "/controller")["brokerid"]
        return broker_id if broker_id != old_controller else None
    wait_until(new_controller, "another broker to become controller", TAKEOVER_LIMIT_S + 10)

    def leaders_moved():
        states = {p: znode(kz, f"/brokers/topics/events/partitions/{p}/state") for p in led_by_dead}
        return states if all(s["leader"] not in (old_controller, -1) for s in states.values()) else None
    states = wait_until(leaders_moved, "new leaders for the dead broker's partitions", TAKEOVER_LIMIT_S + 10)
    took = time.monotonic() - killed_at
    assert took < TAKEOVER_LIMIT_S, f"takeover took {took:.1f} s"
    assert int(kz.get("/controller_epoch")[0]) >= old_epoch + 1
    for p, state in states.items():
        assert state["leader"] == led_by_dead[p][1]  # the next replica of the ISR, in assignment order
        assert state["isr"] == [led_by_dead[p][1]] and state["leader_epoch"] >= 1
        assert state["controller_epoch"] >= old_epoch + 1

    md = same_metadata_everywhere(survivors, kz)
    assert md["controller_id"] != old_controller
    assert [b[0] for b in md["brokers"]] == sorted(i for i in cluster if i != old_controller)
    [(_name, _error, partitions)] = md["topics"]
    for index, leader, _epoch, replicas, isr, offline in partitions:
        assert leader != old_controller and old_controller not in isr
        assert offline == ((old_controller,) if old_controller in replicas else ())

    # the killed broker comes back: it gets its partitions again and everyone knows it is alive
    cluster[old_controller].start()
    md = same_metadata_everywhere(cluster.values(), kz)
    assert [b[0] for b in md["brokers"]] == [1, 2, 3]


def test_deletion_and_partition_addition_on_a_cluster(cluster, kz):
    assert create_topic(cluster[2].bootstrap, "grow", 2, 3)["error_code"] == 0
    assert create_topic(cluster[3].bootstrap, "doomed", 3, 2)["error_code"] == 0
    same_metadata_everywhere(cluster.values())

    grown = call(cluster[3].bootstrap, ApiKey.CREATE_PARTITIONS, 2, {
        "topics": [{"name": "grow", "count": 5, "assignments": None}], "timeout_ms": 30000,
        "validate_only": False})
    assert grown["results"][0]["error_code"] == 0, grown
    assert sorted(znode(kz, "/brokers/topics/grow")["partitions"]) == ["0", "1", "2", "3", "4"]
    for p in range(5):
        assert znode(kz, f"/brokers/topics/grow/partitions/{p}/state")["leader"] in (1, 2, 3)

    doomed_dirs = [b.data_dir / f"doomed-{p}" for b in cluster.values() for p in range(3)]
    assert {d.name for d in doomed_dirs if d.exists()} == {"doomed-0", "doomed-1", "doomed-2"}  # at the leaders
    deleted = call(cluster[1].bootstrap, ApiKey.DELETE_TOPICS, 4, {"topic_names": ["doomed"], "timeout_ms": 30000})
    assert deleted["responses"][0]["error_code"] == 0, deleted
    for path in ("/brokers/topics/doomed", "/config/topics/doomed", "/admin/delete_topics/doomed"):
        assert kz.exists(path) is None, path
    assert not any(d.exists() for d in doomed_dirs)

    md = same_metadata_everywhere(cluster.values())
    assert [t[0] for t in md["topics"]] == ["grow"]
    assert sorted(p[0] for p in md["topics"][0][2]) == [0, 1, 2, 3, 4]
    # the name is free again at once
    assert create_topic(cluster[2].bootstrap, "doomed", 1, 3)["error_code"] == 0


def test_config_change_on_one_broker_reaches_every_broker(cluster, kz):
    assert create_topic(cluster[1].bootstrap, "tuned", 1, 3)["error_code"] == 0
    same_metadata_everywhere(cluster.values())
    altered = call(cluster[2].bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"resources": [
        {"resource_type": 2, "resource_name": "tuned", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "12345"}]}], "validate_only": False})
    assert altered["responses"][0]["error_code"] == 0, altered
    assert znode(kz, "/config/topics/tuned")["config"] == {"retention.ms": "12345"}
    [change] = [json.loads(kz.get(f"/config/changes/{c}")[0]) for c in kz.get_children("/config/changes")]
    assert change == {"version": 2, "entity_path": "topics/tuned"}

    def retention_on(broker) -> str | None:
        answer = call(broker.bootstrap, ApiKey.DESCRIBE_CONFIGS, 1, {
            "resources": [{"resource_type": 2, "resource_name": "tuned", "configuration_keys": ["retention.ms"]}],
            "include_synonyms": False})
        return next(c["value"] for c in answer["results"][0]["configs"] if c["name"] == "retention.ms")
    for broker in cluster.values():
        wait_until(lambda: retention_on(broker) == "12345", f"broker {broker.bootstrap} to apply the change")
