"""Preferred and unclean leader elections through ``kafkactl partitions elect-leaders`` (ElectLeaders)
on three brokers with the auto rebalance off, and the command's error paths."""

from __future__ import annotations

import json
import sys

from tests.cluster.conftest import wait_until
from tests.kafkactl.conftest import one_line_error, run


def ctl(cluster, *args: str):
    return run([sys.executable, "-m", "kafkactl", "-b", cluster.bootstrap, "partitions", "elect-leaders", *args])


def test_preferred_and_unclean_elections_and_error_paths(cluster_factory, tmp_path):
    cluster = cluster_factory(3, auto_leader_rebalance_enable="false")
    cluster.create_topic("orders", partitions=3, replication_factor=3)
    cluster.create_topic("solo", assignment={0: [2, 3]})
    preferred = {p: json.loads(cluster.zk.get("/brokers/topics/orders")[0])["partitions"][str(p)][0]
                 for p in range(3)}
    moved = [p for p in range(3) if preferred[p] == 1]

    # broker 1 restarted: its partitions keep their new leaders (no auto rebalance)
    assert cluster.stop(1) == 0
    cluster.start(1)
    for p in range(3):
        cluster.wait_for_isr("orders", p, [1, 2, 3])
    assert all(cluster.partition_state("orders", p)["leader"] != 1 for p in moved)

    res = ctl(cluster, "--election-type", "preferred", "--topic", "orders", "--partition", str(moved[0]))
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"Successfully completed leader election (PREFERRED) for partitions orders-{moved[0]}\n"
    wait_until(lambda: cluster.leader("orders", moved[0]) == 1, "broker 1 to lead again in Metadata")

    res = ctl(cluster, "--election-type", "preferred", "--all-topic-partitions")
    assert res.returncode == 0, res.stderr
    assert all(cluster.partition_state("orders", p)["leader"] == preferred[p] for p in range(3))
    again = tmp_path / "again.json"
    again.write_text(json.dumps({"partitions": [{"topic": "orders", "partition": p} for p in range(3)]}))
    res = ctl(cluster, "--election-type", "preferred", "--path-to-json-file", str(again))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "Valid replica already elected for partitions orders-0, orders-1, orders-2\n"

    # solo's in-sync replica (2) dies while 3 is out of the ISR: no clean leader, until an unclean election
    assert cluster.stop(3) == 0
    assert cluster.partition_state("solo", 0)["isr"] == [2]
    cluster.kill(2)
    wait_until(lambda: cluster.partition_state("solo", 0)["leader"] == -1, "solo-0 to have no leader")
    cluster.start(3)
    res = ctl(cluster, "--election-type", "preferred", "--topic", "solo", "--partition", "0")
    assert res.returncode == 1
    assert res.stdout.startswith("Error completing leader election (PREFERRED) for partition: solo-0: "
                                 "PREFERRED_LEADER_NOT_AVAILABLE")
    assert one_line_error(res, 1) == "kafkactl: 1 replica(s) could not be elected"
    res = ctl(cluster, "--election-type", "unclean", "--topic", "solo", "--partition", "0")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "Successfully completed leader election (UNCLEAN) for partitions solo-0\n"
    state = cluster.partition_state("solo", 0)
    assert (state["leader"], state["isr"]) == (3, [3])
    res = ctl(cluster, "--election-type", "unclean", "--topic", "solo", "--partition", "0")
    assert res.returncode == 0 and res.stdout == "Valid replica already elected for partitions solo-0\n"

    # error paths: one line on stderr, a non-zero exit
    assert "unknown topic: nosuch" in one_line_error(
        ctl(cluster, "--election-type", "preferred", "--topic", "nosuch", "--partition", "0"), 2)
    assert one_line_error(ctl(cluster, "--election-type", "preferred", "--topic", "orders", "--partition", "7"),
                          2) == "kafkactl: 1 replica(s) could not be elected"
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "orders"}]}')
    assert "not a leader election file" in one_line_error(
        ctl(cluster, "--election-type", "preferred", "--path-to-json-file", str(bad)), 2)
    assert "exactly one of" in one_line_error(
        ctl(cluster, "--election-type", "preferred", "--all-topic-partitions", "--topic", "orders"), 2)
    assert "--election-type" in one_line_error(ctl(cluster, "--election-type", "sideways",
                                                   "--all-topic-partitions"), 2)
