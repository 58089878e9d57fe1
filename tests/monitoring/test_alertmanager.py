"""The project's alert rules deliver to a real Alertmanager (Debian's): a broker stopped, its
partitions offline, and KafkaOfflinePartitions (``for: 30s``, the rules' own) arrives in
Alertmanager's ``/api/v2/alerts``. Nothing is shortened for the test: it waits the 30 s.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import cluster_factory, wait_until  # noqa: F401 - the fixture
from tests.monitoring.conftest import api

ALERT_LIMIT_S = 120  # the rule's 30 s plus a guard against a hang, not a performance assertion


def test_offline_partitions_reach_a_real_alertmanager(cluster_factory, prometheus, alertmanager):
    cluster = cluster_factory(2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("alone", 2, 1)])["alone"].result(30)
    leaders = {p: cluster.wait_for_leader("alone", p) for p in (0, 1)}
    am = alertmanager()
    url = prometheus([{"job_name": "kafka", "static_configs": [
        {"targets": [f"127.0.0.1:{cluster.broker(i).metrics_port}" for i in cluster.ids]}]}], alertmanager=am)
    wait_until(lambda: [a for a in api(url, "/api/v1/alertmanagers")["data"]["activeAlertmanagers"]],
               "Prometheus to know the Alertmanager")
    wait_until(lambda: all(t["health"] == "up" for t in api(url, "/api/v1/targets")["data"]["activeTargets"]),
               "both brokers scraped")

    # the broker that is not the controller, or the controller if it leads both partitions
    controller = cluster.controller_id()
    victim = next((b for b in leaders.values() if b != controller), controller)
    assert cluster.stop(victim) == 0

    def delivered():
        alerts = api(f"http://{am}", "/api/v2/alerts")
        return [a for a in alerts if a["labels"]["alertname"] == "KafkaOfflinePartitions"]

    [alert] = wait_until(delivered, "KafkaOfflinePartitions in Alertmanager", limit=ALERT_LIMIT_S, interval=1)
    assert alert["labels"]["severity"] == "critical"
    assert alert["status"]["state"] == "active"
    offline = sum(1 for b in leaders.values() if b == victim)
    assert alert["annotations"]["summary"] == f"{offline} partitions have no live leader"
