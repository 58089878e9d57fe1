"""Dynamic broker configs (KIP-226) on real brokers and a real ZooKeeper, through ``kafkactl configs``.

A broker's own override and the cluster-wide default are written in Kafka
2.7's layouts (``/config/brokers/<id>``, ``/config/brokers/<default>``, a
``brokers/...`` change notification), every broker applies them live and
DescribeConfigs reports their sources; configs that cannot change live and
bad values are refused in one line.
"""

from __future__ import annotations

import json

from tests.cluster.conftest import wait_until
from tests.cluster.workload import LoadProducer, read_all
from tests.kafkactl.conftest import Ctl, one_line_error


def entry(ctl: Ctl, broker: str, name: str) -> dict:
    (row,) = ctl.json("configs", "get", "broker", broker, "--key", name)
    return row


def test_broker_and_default_configs_apply_live(cluster_factory):
    cluster = cluster_factory(2)
    ctl = Ctl(cluster.bootstrap)
    one, two = (Ctl(cluster.broker(b).bootstrap) for b in (1, 2))
    assert entry(one, "1", "leader.replication.throttled.rate") == {
        "name": "leader.replication.throttled.rate", "value": str(2**63 - 1), "source": "DEFAULT_CONFIG",
        "read_only": False, "is_sensitive": False, "is_default": True}
    assert entry(one, "1", "num.partitions")["read_only"] is True

    res = one("configs", "set", "broker", "1", "leader.replication.throttled.rate=1000")
    assert res.returncode == 0, res.stderr
    assert json.loads(cluster.zk.get("/config/brokers/1")[0]) == {
        "version": 1, "config": {"leader.replication.throttled.rate": "1000"}}
    row = entry(one, "1", "leader.replication.throttled.rate")
    assert (row["value"], row["source"]) == ("1000", "DYNAMIC_BROKER_CONFIG")

    res = ctl("configs", "set", "broker", "default", "num.replica.fetchers=2",
              "follower.replication.throttled.rate=5000")
    assert res.returncode == 0, res.stderr
    assert json.loads(cluster.zk.get("/config/brokers/<default>")[0])["config"] == {
        "num.replica.fetchers": "2", "follower.replication.throttled.rate": "5000"}
    notes = [json.loads(cluster.zk.get(f"/config/changes/{c}")[0])["entity_path"]
             for c in sorted(cluster.zk.get_children("/config/changes"))]
    assert notes[-2:] == ["brokers/1", "brokers/<default>"]
    # broker 2 learns the default from the notification
    row = wait_until(lambda: (r := entry(two, "2", "num.replica.fetchers"))["value"] == "2" and r,
                     "broker 2 to apply the default")
    assert row["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    defaults = ctl.json("configs", "get", "broker", "default")
    assert {r["name"]: r["value"] for r in defaults} == {"num.replica.fetchers": "2",
                                                         "follower.replication.throttled.rate": "5000"}

    # replication goes on with the fetchers redistributed; the throttles touch no replica (none listed)
    cluster.create_topic("live", partitions=2, replication_factor=2)
    load = LoadProducer(cluster.bootstrap, "live", partitions=(0, 1), rate=200).start()
    load.wait_acknowledged(200)
    recorder = load.stop()
    for p in (0, 1):
        cluster.wait_for_isr("live", p)
    assert recorder.check(read_all(cluster.bootstrap, "live", (0, 1))).valid()

    assert "cannot update these broker configs dynamically: num.partitions" in one_line_error(
        one("configs", "set", "broker", "1", "num.partitions=3"), 3)
    assert "invalid value '-5' for leader.replication.throttled.rate" in one_line_error(
        one("configs", "set", "broker", "1", "leader.replication.throttled.rate=-5"), 2)
    res = one("configs", "set", "broker", "1", "--delete", "leader.replication.throttled.rate")
    assert res.returncode == 0, res.stderr
    assert entry(one, "1", "leader.replication.throttled.rate")["source"] == "DEFAULT_CONFIG"


def test_a_topic_config_is_described_as_stored_by_every_broker(cluster_factory):
    """DescribeConfigs reads a topic's overrides from the store, as Kafka does.

    A broker shows an override as soon as it is stored, not once its change
    notification arrives: what ``kafkactl partitions reassign --execute`` sets
    (the throttled replicas) reads back at once through any broker.
    """
    cluster = cluster_factory(2)
    cluster.create_topic("t", replication_factor=2)
    two = Ctl(cluster.broker(2).bootstrap)
    # Kafka 2.7's layout, written with no change notification: no broker has applied it
    cluster.zk.set("/config/topics/t", json.dumps({"version": 1, "config": {"retention.ms": "1234"}}).encode())
    rows = {row["name"]: row for row in two.json("configs", "get", "topic", "t")}
    assert (rows["retention.ms"]["value"], rows["retention.ms"]["source"]) == ("1234", "DYNAMIC_TOPIC_CONFIG")
