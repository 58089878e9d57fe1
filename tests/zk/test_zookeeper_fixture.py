"""The ZooKeeper test fixtures themselves: a real server, private chroots, an ensemble that re-elects."""

import time

from kazoo.client import KazooClient

from tests.zookeeper import four_letter


def _client(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=30)
    return zk


def test_chroots_are_private(zookeeper, zk_connect):
    assert four_letter(zookeeper.port, "ruok") == "imok"
    zk = _client(zk_connect)
    try:
        zk.create("/brokers/ids/0", b"{}", makepath=True)
        assert zk.get_children("/brokers/ids") == ["0"]
    finally:
        zk.stop()
        zk.close()
    root = _client(zookeeper.connect)
    try:
        chroot = zk_connect[len(zookeeper.connect):]
        assert root.exists(chroot + "/brokers/ids/0") is not None
        assert root.exists("/brokers") is None
    finally:
        root.stop()
        root.close()


def test_ensemble_survives_losing_its_leader(zk_ensemble_factory):
    ensemble = zk_ensemble_factory(3)
    zk = _client(ensemble.connect)
    try:
        zk.create("/survives", b"1")
        leader = ensemble.leader_index()
        assert leader is not None
        ensemble.kill(leader)
        deadline = time.monotonic() + 30
        while ensemble.leader_index() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ensemble.leader_index() not in (None, leader)
        assert zk.get("/survives")[0] == b"1"
    finally:
        zk.stop()
        zk.close()
