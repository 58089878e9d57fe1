"""``kafkactl cluster await-healthy`` and ``can-stop`` on three real brokers: healthy, a broker
stopped (under-replicated partitions, partitions at their min.insync.replicas), and back."""

from __future__ import annotations

from tests.cluster.conftest import cluster_factory  # noqa: F401 (a fixture)
from tests.kafkactl.conftest import Ctl, one_line_error


def test_health_gates_follow_a_broker_stop_and_start(cluster_factory):  # noqa: F811
    cluster = cluster_factory(3, auto_leader_rebalance_enable="false")
    cluster.create_topic("orders", partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
    cluster.create_topic("pair", assignment={0: [1, 2]})  # min.insync.replicas 1 (the default)
    ctl = Ctl(cluster.bootstrap)

    res = ctl("cluster", "await-healthy", "--timeout", "60", "--brokers", "3")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("healthy: 3 brokers")
    res = ctl("cluster", "can-stop", "--broker", "1")
    assert res.returncode == 0, res.stderr
    assert one_line_error(ctl("cluster", "can-stop", "--broker", "9"), 2) == \
        "kafkactl: broker 9 is not registered and holds no replica"

    assert cluster.stop(3) == 0
    for p in range(2):
        cluster.wait_for_isr("orders", p, [1, 2])
    ctl = Ctl(cluster.bootstrap)
    line = one_line_error(ctl("cluster", "await-healthy", "--timeout", "2", "--brokers", "3"), 1)
    assert line.startswith("kafkactl: not healthy after 2 s: ")
    assert "under-replicated partition(s): orders-0, orders-1" in line
    assert "pair-0" not in line
    assert line.endswith("2 of 3 brokers registered")
    doc = ctl.json("cluster", "can-stop", "--broker", "3")  # no longer in any ISR
    assert doc == {"broker": 3, "can_stop": True, "partitions": []}

    # without 1, orders would keep one replica in sync (below 2) and pair would keep broker 2
    line = one_line_error(ctl("cluster", "can-stop", "--broker", "1"), 1)
    assert line == ("kafkactl: stopping broker 1 would leave 2 partition(s) without min.insync.replicas in "
                    "sync or without a leader: orders-0 (isr [1, 2], min.insync.replicas 2), "
                    "orders-1 (isr [1, 2], min.insync.replicas 2)")
    assert cluster.stop(2) == 0
    cluster.wait_for_isr("pair", 0, [1])
    ctl = Ctl(cluster.bootstrap)
    res = ctl("--output", "json", "cluster", "can-stop", "--broker", "1")
    assert res.returncode == 1
    assert "pair-0 (isr [1], min.insync.replicas 1)" in res.stderr

    cluster.start(2)
    cluster.start(3)
    ctl = Ctl(cluster.bootstrap)
    res = ctl("cluster", "await-healthy", "--timeout", "60", "--brokers", "3")
    assert res.returncode == 0, res.stderr
    assert ctl.json("cluster", "await-healthy", "--timeout", "5") == \
        {"healthy": True, "offline": [], "under_replicated": [], "brokers": 3}
