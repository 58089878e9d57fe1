"""Network partitions: three brokers in network namespaces on one bridge
(``tests/cluster/netns.py``), ZooKeeper and the test's clients in the root namespace.

The Jepsen 2013 case: the leader of a partition is cut off from ZooKeeper and
from the other brokers (its clients still reach it) while librdkafka produces
with acks=all and ``min.insync.replicas=2``. The isolated leader must stop
acknowledging once its followers are gone, the majority side must elect a new
leader, and after the partition heals every acknowledged record must be where it
was acknowledged. Needs root (``ip netns``), as ``./dev test`` runs in CI.
"""

from __future__ import annotations

import pytest

from tests.cluster.conftest import wait_until
from tests.cluster.netns import ZOOKEEPER_HOST, Network
from tests.cluster.test_faults import replica_reads, replicas_agree
from tests.cluster.workload import LoadProducer, read_all


@pytest.fixture
def network():
    net = Network(3)
    try:
        net.create()
        yield net
    finally:
        net.close()


@pytest.fixture
def bridged_cluster_factory(network, tmp_path, cluster_factory):
    """``make(**props)``: brokers 1..3, broker i in namespace i, on a ZooKeeper on the bridge.
    (Requested after ``network``, so its brokers stop before the namespaces go.)"""
    server = network.zookeeper(tmp_path / "zookeeper")

    def make(**props):
        return cluster_factory(
            3, zookeeper_connect=f"{server.connect}/kafka", command_prefix={i: network.run(i) for i in (1, 2, 3)},
            per_broker={i: {"listeners": f"PLAINTEXT://{network.node(i)}:0"} for i in (1, 2, 3)}, **props)

    yield make
    server.stop()


def test_brokers_in_namespaces_and_a_broker_cut_off_from_zookeeper(network, bridged_cluster_factory):
    cluster = bridged_cluster_factory()
    assert [cluster.broker(i).host for i in cluster.ids] == [network.node(i) for i in (1, 2, 3)]
    assert cluster.registered_ids() == [1, 2, 3]
    network.isolate(2, [ZOOKEEPER_HOST])
    wait_until(lambda: 2 not in cluster.registered_ids(), "the session of the broker cut off from ZooKeeper to expire")
    assert cluster.broker(2).running()
    assert 2 in [b["node_id"] for b in cluster.metadata(via=2)["brokers"]]  # clients still reach it
    network.heal(2)
    wait_until(lambda: cluster.registered_ids() == [1, 2, 3], "broker 2 to register again after the partition heals")


def test_jepsen_2013_isolated_leader_stops_acknowledging_and_nothing_acknowledged_is_lost(
        network, bridged_cluster_factory):
    cluster = bridged_cluster_factory(replica_lag_time_max_ms=3000)
    cluster.create_topic("jepsen", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    load = LoadProducer(cluster.bootstrap, "jepsen", rate=200, **{"message.timeout.ms": 20000}).start()
    try:
        load.wait_acknowledged(200)
        old = cluster.leader("jepsen")
        others = [i for i in cluster.ids if i != old]
        network.isolate(old, [ZOOKEEPER_HOST, *others])
        new = cluster.wait_for_leader("jepsen", not_in={old}, vias=others)
        load.wait_acknowledged(200)  # the majority side acknowledges again
        network.heal(old)
        wait_until(lambda: old in cluster.registered_ids(), "the old leader to register again")
        cluster.wait_for_isr("jepsen")
        load.wait_acknowledged(100)
    finally:
        recorder = load.stop()
    replicas_agree(cluster, "jepsen", 0)
    report = recorder.check({"consumer": read_all(cluster.bootstrap, "jepsen"), **replica_reads(cluster, "jepsen", 0)})
    print(f"leader {old} isolated, {new} elected: {report}; errors {dict(recorder.errors)}")
    assert report.valid(allow_duplicates=True), str(report)
