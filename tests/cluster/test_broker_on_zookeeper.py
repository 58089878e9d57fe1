"""A broker process on a real ZooKeeper, end to end with a real client.

Each test gets a fresh chroot (``zk_connect``), or its own ZooKeeper server or
3-node ensemble when ZooKeeper itself is killed. What the broker writes is read back with
kazoo and with Debian's ``zkCli.sh``, in Kafka 2.7's layouts. Sessions are
expired the way they expire in production: the broker is frozen with SIGSTOP
past its session timeout, or killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from kazoo.client import KazooClient

from tests.server.test_clients import ck_consume, ck_produce
from tests.tcp_gate import TcpGate
from tests.zookeeper import ZooKeeperServer

WAIT_S = 60  # a guard against a hang, not a performance assertion
ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"


def kazoo(connect: str) -> KazooClient:
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=30)
    return zk


def wait_until(check, what: str, limit: float = WAIT_S):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def admin(bootstrap: str):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    return ck, AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    ck, client = admin(bootstrap)
    from confluent_kafka.admin import NewTopic

    futures = client.create_topics([NewTopic(name, partitions, 1, config=config or {})], request_timeout=30)
    futures[name].result(WAIT_S)


def produce_values(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    ck_produce(bootstrap, topic, [{"value": v, "partition": partition} for v in values], acks="all")


def consume_values(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[bytes]:
    return [m.value() for m in ck_consume(bootstrap, topic, count, partitions=(partition,))]


def registration(zk: KazooClient, broker_id: int = 0):
    found = zk.exists(f"/brokers/ids/{broker_id}")
    if found is None:
        return None
    return json.loads(zk.get(f"/brokers/ids/{broker_id}")[0]), found.ephemeralOwner


def zkcli_get(server: str, path: str) -> str:
    out = subprocess.run([ZKCLI, "-server", server, "get", path], capture_output=True, text=True, timeout=WAIT_S)
    return out.stdout


def test_one_broker_on_zookeeper_end_to_end(broker_factory, zookeeper, zk_connect):
    b = broker_factory(props={"zookeeper.connect": zk_connect, "broker.rack": "r1"})
    zk = kazoo(zk_connect)
    try:
        doc, owner = registration(zk)
        assert doc == {"version": 5, "host": "127.0.0.1", "port": b.port, "jmx_port": -1,
                       "timestamp": doc["timestamp"], "endpoints": [f"PLAINTEXT://127.0.0.1:{b.port}"],
                       "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "rack": "r1", "features": {}}
        assert owner != 0
        assert json.loads(zk.get("/controller")[0])["brokerid"] == 0
        assert zk.get("/controller_epoch")[0] == b"1"
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
        assert f"cluster.id={cluster_id}" in (b.data_dir / "meta.properties").read_text()
        assert not (b.data_dir / "metadata-store.json").exists()

        create_topic(b.bootstrap, "orders", 3, {"retention.ms": "3600000"})
        doc = json.loads(zk.get("/brokers/topics/orders")[0])
        assert doc == {"version": 3, "topic_id": doc["topic_id"], "partitions": {"0": [0], "1": [0], "2": [0]},
                       "adding_replicas": {}, "removing_replicas": {}}  # Kafka 2.8's layout (KIP-516)
        assert json.loads(zk.get("/brokers/topics/orders/partitions/2/state")[0]) == {
            "version": 1, "leader": 0, "leader_epoch": 0, "isr": [0], "controller_epoch": 1}
        assert json.loads(zk.get("/config/topics/orders")[0]) == {"version": 1,
                                                                  "config": {"retention.ms": "3600000"}}
        values = [b"order-%d" % i for i in range(50)]
        produce_values(b.bootstrap, "orders", values, partition=1)
        assert consume_values(b.bootstrap, "orders", 50, partition=1) == values

        ck, client = admin(b.bootstrap)
        change = ck.admin.ConfigEntry("retention.ms", "60000",
                                      incremental_operation=ck.admin.AlterConfigOpType.SET)
        resource = ck.admin.ConfigResource("topic", "orders", incremental_configs=[change])
        client.incremental_alter_configs([resource])[resource].result(WAIT_S)
        assert json.loads(zk.get("/config/topics/orders")[0])["config"] == {"retention.ms": "60000"}
        changes = zk.get_children("/config/changes")
        assert len(changes) == 1 and changes[0].startswith("config_change_")
        assert json.loads(zk.get(f"/config/changes/{changes[0]}")[0]) == {"version": 2,
                                                                          "entity_path": "topics/orders"}

        # Existing ZooKeeper tooling reads what we wrote.
        out = zkcli_get(zookeeper.connect, zk_connect[len(zookeeper.connect):] + "/brokers/ids/0")
        assert f'"endpoints":["PLAINTEXT://127.0.0.1:{b.port}"]' in out

        assert b.stop() == 0
        assert zk.exists("/brokers/ids/0") is None  # the session closed with the broker
        b.start()
        assert registration(zk)[1] != owner
        assert zk.get("/controller_epoch")[0] == b"2"
        assert consume_values(b.bootstrap, "orders", 50, partition=1) == values
        produce_values(b.bootstrap, "orders", [b"after restart"], partition=1)
        create_topic(b.bootstrap, "later")  # partition states carry the controller epoch that wrote them
        assert json.loads(zk.get("/brokers/topics/later/partitions/0/state")[0])["controller_epoch"] == 2
        assert consume_values(b.bootstrap, "orders", 51, partition=1)[-1] == b"after restart"
        _, client = admin(b.bootstrap)
        described = client.describe_configs([ck.admin.ConfigResource("topic", "orders")])
        configs = list(described.values())[0].result(WAIT_S)
        assert configs["retention.ms"].value == "60000"
    finally:
        zk.stop()
        zk.close()


def test_registration_vanishes_after_sigkill_once_the_session_expires(broker_factory, zk_connect):
    b = broker_factory(props={"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 2000})
    zk = kazoo(zk_connect)
    try:
        assert registration(zk) is not None
        b.kill()
        assert registration(zk) is not None  # ZooKeeper cannot know yet
        wait_until(lambda: zk.exists("/brokers/ids/0") is None, "the killed broker's registration to expire")
        assert zk.exists("/controller") is None
        b.start()
        assert registration(zk) is not None
    finally:
        zk.stop()
        zk.close()


def test_expired_session_while_running_registers_again_and_keeps_serving(broker_factory, zk_connect):
    b = broker_factory(props={"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 2000})
    zk = kazoo(zk_connect)
    try:
        produce_values(b.bootstrap, "t", [b"before"])
        _, owner = registration(zk)
        os.kill(b.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: zk.exists("/brokers/ids/0") is None, "the frozen broker's session to expire")
        finally:
            os.kill(b.pid, signal.SIGCONT)
        doc, new_owner = wait_until(lambda: registration(zk), "the broker to register again")
        assert new_owner != owner and doc["port"] == b.port
        wait_until(lambda: zk.exists("/controller"), "the broker to be elected controller again")
        assert zk.get("/controller_epoch")[0] == b"2"
        produce_values(b.bootstrap, "t", [b"after"])
        assert consume_values(b.bootstrap, "t", 2) == [b"before", b"after"]
        assert "registered again under a new session" in b.stderr_text()
    finally:
        zk.stop()
        zk.close()


def test_broker_serves_while_zookeeper_is_down_and_keeps_its_session(broker_factory, tmp_path):
    server = ZooKeeperServer(tmp_path / "zk").start()
    # The broker reaches ZooKeeper through a gate, opened again only once the restarted server
    # serves: this test is about the session surviving the restart, not about the connections
    # ZooKeeper 3.8 leaves unanswered while it starts (test_zookeeper_store covers those).
    gate = TcpGate(server.port)
    try:
        b = broker_factory(props={"zookeeper.connect": f"127.0.0.1:{gate.port}/kafka",
                                  "zookeeper.session.timeout.ms": 30000})
        zk = kazoo(server.connect + "/kafka")
        _, owner = registration(zk)
        zk.stop()
        zk.close()
        produce_values(b.bootstrap, "t", [b"before"])
        server.kill()
        gate.shut()
        wait_until(lambda: "SUSPENDED" in b.stderr_text(), "the broker to notice ZooKeeper is gone")
        produce_values(b.bootstrap, "t", [b"while down"])
        assert consume_values(b.bootstrap, "t", 2) == [b"before", b"while down"]
        server.start()  # same port and data: the session survives a ZooKeeper restart
        gate.open()  # once it serves
        zk = kazoo(server.connect + "/kafka")
        try:
            wait_until(lambda: registration(zk), "ZooKeeper to serve the registration")
            assert registration(zk)[1] == owner
        finally:
            zk.stop()
            zk.close()
        wait_until(lambda: b.stderr_text().count("ZooKeeper session connected") >= 2, "the broker to reconnect")
        create_topic(b.bootstrap, "later")
        assert "session lost" not in b.stderr_text()
    finally:
        gate.close()
        server.stop()


def _run_broker(workdir, props: dict) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "broker.yaml"
    config.write_text(yaml.safe_dump({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(workdir / "data"),
                                      "metrics.port": -1, **props}))
    return subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True,
                          text=True, timeout=WAIT_S, cwd=workdir)


def test_a_second_broker_with_a_registered_id_refuses_to_start(broker_factory, zk_connect, tmp_path):
    broker_factory(props={"zookeeper.connect": zk_connect, "broker.id": 5})
    second = _run_broker(tmp_path / "second", {"zookeeper.connect": zk_connect, "broker.id": 5})
    assert second.returncode != 0
    lines = second.stderr.strip().splitlines()
    assert lines[-1] == (f"broker: cannot start: broker.id 5 is already registered in {zk_connect} "
                         f"(/brokers/ids/5): another broker runs with this id, or a killed one's "
                         f"ZooKeeper session has not expired yet")
    assert "Traceback" not in second.stderr
    data = tmp_path / "second" / "data"
    assert not data.exists() or {p.name for p in data.iterdir()} <= {".lock"}


def test_broker_ids_are_generated_from_brokers_seqid_and_kept(broker_factory, zk_connect, tmp_path):
    first = broker_factory(props={"zookeeper.connect": zk_connect, "broker.id": -1})
    second = broker_factory(props={"zookeeper.connect": zk_connect, "broker.id": -1})
    zk = kazoo(zk_connect)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1001", "1002"]
        assert "broker.id=1001" in (first.data_dir / "meta.properties").read_text()
        assert first.restart() is first
        assert sorted(zk.get_children("/brokers/ids")) == ["1001", "1002"]  # meta.properties kept its id
        ck, client = admin(first.bootstrap)
        assert sorted(client.list_topics(timeout=WAIT_S).brokers) == [1001, 1002]  # the cluster, from any broker
        resource = ck.admin.ConfigResource("broker", "1001")
        assert client.describe_configs([resource])[resource].result(WAIT_S)["broker.id"].value == "1001"
        assert second.stop() == 0
        moved = _run_broker(tmp_path / "moved", {"zookeeper.connect": zk_connect, "broker.id": 7,
                                                 "log.dirs": str(second.data_dir)})
        assert moved.returncode != 0
        assert moved.stderr.strip().splitlines()[-1].startswith(
            "broker: cannot start: configured broker.id 7 does not match broker.id 1002 stored in meta.properties")
    finally:
        zk.stop()
        zk.close()


def test_broker_on_an_ensemble_survives_losing_the_zookeeper_leader(broker_factory, zk_ensemble_factory):
    ensemble = zk_ensemble_factory(3)
    connect = ensemble.connect + "/kafka"
    b = broker_factory(props={"zookeeper.connect": connect, "zookeeper.session.timeout.ms": 10000})
    zk = kazoo(connect)
    try:
        _, owner = registration(zk)
        create_topic(b.bootstrap, "before")
        leader = ensemble.leader_index()
        ensemble.kill(leader)
        wait_until(lambda: ensemble.leader_index() not in (None, leader), "the ensemble to elect a new leader")
        produce_values(b.bootstrap, "before", [b"kept"])

        def created() -> bool:  # the broker's session moves to a surviving server meanwhile
            try:
                create_topic(b.bootstrap, "after")
                return True
            except Exception as exc:  # REQUEST_TIMED_OUT while its connection moves
                assert "REQUEST_TIMED_OUT" in str(exc), exc
                return False

        wait_until(created, "a topic creation after the ZooKeeper leader's loss")
        assert registration(zk)[1] == owner  # the same session throughout
        assert sorted(zk.get_children("/brokers/topics")) == ["after", "before"]
        assert "session lost" not in b.stderr_text()
    finally:
        zk.stop()
        zk.close()
