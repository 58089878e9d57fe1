"""Cluster health on a real three-broker cluster, a follower paused, then a broker killed: the
metrics (each under our ``kafkapy_`` name and Kafka's JMX exporter name, which must agree) and
kafkactl's health views (``topics describe --under-replicated-partitions`` ..., ``cluster
describe``, ``log-dirs describe``)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.conftest import wait_until
from tests.kafkactl.conftest import Ctl, one_line_error

PAIRS = {
    "kafkapy_under_replicated_partitions": "kafka_server_replicamanager_underreplicatedpartitions",
    "kafkapy_under_min_isr_partitions": "kafka_server_replicamanager_underminisrpartitioncount",
    "kafkapy_at_min_isr_partitions": "kafka_server_replicamanager_atminisrpartitioncount",
    "kafkapy_leader_partitions": "kafka_server_replicamanager_leadercount",
    "kafkapy_partitions": "kafka_server_replicamanager_partitioncount",
    "kafkapy_controller_active": "kafka_controller_kafkacontroller_activecontrollercount",
    "kafkapy_offline_partitions": "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafkapy_isr_shrinks_total": "kafka_server_replicamanager_isrshrinks_total",
    "kafkapy_isr_expands_total": "kafka_server_replicamanager_isrexpands_total",
}


def scrape(broker) -> dict[str, float]:
    """Unlabelled samples by name, plus the fetcher's max lag."""
    with urllib.request.urlopen(broker.metrics_url, timeout=30) as response:
        text = response.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.labels or s.name == "kafka_server_replicafetchermanager_maxlag":
                out[s.name] = s.value
    for ours, kafkas in PAIRS.items():
        assert out[ours] == out[kafkas], (ours, kafkas)
    return out


def total(cluster, name: str, ids) -> float:
    return sum(scrape(cluster.broker(i))[name] for i in ids)


def test_health_metrics_follow_a_paused_and_a_killed_broker(cluster_factory):
    cluster = cluster_factory(3, replica_lag_time_max_ms=1000)
    controller = cluster.controller_id()
    victim = next(i for i in cluster.ids if i != controller)
    other = next(i for i in cluster.ids if i not in (controller, victim))
    cluster.create_topic("h", 3, 3, config={"min.insync.replicas": "3"})
    cluster.create_topic("solo", assignment={0: [victim]})

    s = {i: scrape(cluster.broker(i)) for i in cluster.ids}
    assert [s[i]["kafkapy_controller_active"] for i in cluster.ids] == [int(i == controller) for i in cluster.ids]
    assert sum(s[i]["kafkapy_leader_partitions"] for i in cluster.ids) == 4
    assert sum(s[i]["kafkapy_partitions"] for i in cluster.ids) == 10
    assert sum(s[i]["kafkapy_at_min_isr_partitions"] for i in cluster.ids) == 4  # h at 3 of 3, solo at 1 of 1
    assert s[controller]["kafka_controller_kafkacontroller_globalpartitioncount"] == 4
    assert s[controller]["kafka_controller_kafkacontroller_globaltopiccount"] == 2
    assert sum(s[i]["kafkapy_under_replicated_partitions"] for i in cluster.ids) == 0
    assert s[victim]["kafka_server_replicafetchermanager_maxlag"] == 0

    # a paused follower leaves the ISRs (the leaders shrink them), and comes back (they expand them)
    cluster.pause(victim)
    wait_until(lambda: total(cluster, "kafkapy_under_replicated_partitions", [controller, other]) >= 2,
               "the leaders to drop the paused follower")
    assert total(cluster, "kafkapy_isr_shrinks_total", [controller, other]) >= 2
    assert total(cluster, "kafkapy_under_min_isr_partitions", [controller, other]) >= 2
    cluster.resume(victim)
    wait_until(lambda: total(cluster, "kafkapy_under_replicated_partitions", cluster.ids) == 0,
               "the follower to rejoin every ISR")
    assert total(cluster, "kafkapy_isr_expands_total", cluster.ids) >= 2

    # a killed broker: its only-replica partition is offline (the controller says so), the rest under-replicated
    cluster.kill(victim)
    wait_until(lambda: scrape(cluster.broker(controller))["kafkapy_offline_partitions"] == 1,
               "the controller to count the dead broker's partition offline")
    assert scrape(cluster.broker(other))["kafkapy_offline_partitions"] == 0
    wait_until(lambda: total(cluster, "kafkapy_under_replicated_partitions", [controller, other]) == 3,
               "the three partitions of h to be under-replicated on their leaders")
    assert total(cluster, "kafkapy_leader_partitions", [controller, other]) == 3

    # kafkactl's views of the same state
    ctl = Ctl(cluster.bootstrap)

    def shown(*flags):
        return sorted((t["topic"], p["partition"]) for t in ctl.json("topics", "describe", *flags)
                      for p in t["partitions"])

    h = [("h", p) for p in range(3)]
    assert shown("--under-replicated-partitions", "h", "solo") == h
    assert shown("--unavailable-partitions") == [("solo", 0)]
    assert shown("--under-min-isr-partitions") == h
    assert shown("--at-min-isr-partitions", "h") == []
    assert shown("--unavailable-partitions", "--under-min-isr-partitions", "h", "solo") == h + [("solo", 0)]
    table = ctl("topics", "describe", "--unavailable-partitions")
    assert table.returncode == 0 and "solo" in table.stdout and "h " not in table.stdout, table.stdout
    one_line_error(ctl("topics", "describe", "--under-replicated-partitions", "nosuch"), 2)

    desc = ctl.json("cluster", "describe")
    assert desc["controller_id"] == controller
    rows = {b["node_id"]: b for b in desc["brokers"]}
    assert sorted(rows) == [1, 2, 3]
    assert rows[victim]["alive"] is False and rows[victim]["endpoint"] is None
    assert rows[victim]["partitions"] == 4 and rows[victim]["leaders"] == 0
    for i in (controller, other):
        assert rows[i]["alive"] and rows[i]["endpoint"] == f"127.0.0.1:{cluster.broker(i).port}"
        assert rows[i]["controller"] == (i == controller)
    assert sum(rows[i]["leaders"] for i in (controller, other)) == 3
    assert rows[controller]["partitions"] == rows[other]["partitions"] == 3
    table = ctl("cluster", "describe")
    assert "PREFERRED_LEADERS" in table.stdout and f"controller_id: {controller}" in table.stdout

    dirs = ctl.json("log-dirs", "describe")
    assert {d["broker"] for d in dirs} == {controller, other}
    assert sorted((d["topic"], d["partition"]) for d in dirs if d["broker"] == other) == h
    assert all(d["error"] is None and d["size"] >= 0 for d in dirs)
    assert "unknown broker id" in one_line_error(ctl("log-dirs", "describe", "--broker", str(victim)), 2)
