"""ZooKeeper's metrics through ``zookeeper_exporter``, against real ZooKeeper servers (Debian's 3.8).

The exporter serves every numeric ``mntr`` figure under the name ZooKeeper's
Prometheus provider gives it; a real Prometheus scraping an ensemble of three
through three exporters sees the leader's ``synced_followers`` and evaluates
the ZooKeeper rules' expressions as members go down (queried directly: their
``for:`` is not waited for).
"""

from __future__ import annotations

import re
import urllib.request

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.conftest import wait_until
from tests.monitoring.conftest import MONITORING, api
from tests.zookeeper import four_letter, free_port


def scrape(target: str) -> dict[str, list]:
    """``{family name: samples}`` of one scrape (status 200, or the test fails)."""
    with urllib.request.urlopen(f"http://{target}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_every_mntr_figure_is_served_under_the_providers_name(zookeeper, zk, zk_exporter_factory):
    zk.create("/some/znode", b"x", makepath=True)  # writes under the test's chroot, a namespace of its own
    namespace = zk.chroot.strip("/").split("/")[0]
    exporter = zk_exporter_factory(zookeeper.port)
    got = scrape(exporter.target)
    mntr = dict(line.split("\t", 1) for line in four_letter(zookeeper.port, "mntr").splitlines())
    summaries = {k[len("zk_cnt_"):] for k in mntr if k.startswith("zk_cnt_")}
    for key, value in mntr.items():
        name = key[len("zk_"):]
        part, _, base = name.partition("_")
        if base in summaries and part in ("avg", "min", "max", "cnt", "sum", "p50", "p95", "p99", "p999"):
            name = base
        name = re.sub(r".+_(write_per_namespace|read_per_namespace)\Z", r"\1", name)
        if name in ("version", "server_state"):
            continue
        assert name in got, f"{key} ({value}) is not served as {name}"
    assert got["zookeeper_up"][0].value == 1
    assert [(s.labels, s.value) for s in got["zookeeper_server_state"]] == [({"state": "standalone"}, 1)]
    assert got["znode_count"][0].value >= 3
    assert {s.name for s in got["fsynctime"]} == {"fsynctime", "fsynctime_count", "fsynctime_sum"}
    # a labelled set: the provider's write_per_namespace{key=NAMESPACE}
    assert {s.labels["key"] for s in got["write_per_namespace"] if s.name == "write_per_namespace_count"} >= {
        namespace}

    # nothing listens there: still a 200, with zookeeper_up 0 and no ZooKeeper figure
    nowhere = zk_exporter_factory(free_port())
    got = scrape(nowhere.target)
    assert {name: [s.value for s in samples] for name, samples in got.items()} == {"zookeeper_up": [0]}
    nowhere.stop()


def test_ensemble_through_exporters_and_the_rules_on_a_real_prometheus(zk_ensemble_factory, zk_exporter_factory,
                                                                       prometheus):
    ensemble = zk_ensemble_factory(3)
    exporters = [zk_exporter_factory(s.port) for s in ensemble.servers]
    url = prometheus([{"job_name": "zookeeper", "static_configs": [{"targets": [e.target for e in exporters]}]}])
    rules = {r["alert"]: r["expr"] for g in yaml.safe_load((MONITORING / "rules" / "zookeeper.yml").read_text())[
        "groups"] for r in g["rules"]}

    def query(expr: str) -> dict[str, float]:
        """``{instance: value}`` (or ``{"": value}`` for a series without one) of an instant query."""
        result = api(url, "/api/v1/query", query=expr)["data"]["result"]
        return {r["metric"].get("instance", ""): float(r["value"][1]) for r in result}

    def member_down() -> set[str]:
        return set(query(rules["ZooKeeperMemberDown"]))

    def quorum_lost() -> bool:
        return bool(query(rules["ZooKeeperQuorumLost"]))

    wait_until(lambda: ensemble.leader_index() is not None, "a leader")
    leader = ensemble.leader_index()
    wait_until(lambda: query('synced_followers{job="zookeeper"}') == {exporters[leader].target: 2},
               "the leader's synced_followers to be 2", limit=30)
    wait_until(lambda: len(query('znode_count{job="zookeeper"} > 0')) == 3, "every member's znode_count", limit=30)
    assert query('zookeeper_server_state{state="leader"}') == {exporters[leader].target: 1}
    assert (member_down(), quorum_lost()) == (set(), False)

    # one follower down: that member only, the quorum holds
    first, second = [i for i in range(3) if i != leader]
    ensemble.kill(first)
    wait_until(lambda: member_down() == {exporters[first].target}, "ZooKeeperMemberDown for the killed member",
               limit=30)
    assert not quorum_lost()

    # a second one: the leader alone stops serving; every member is down and the quorum is lost
    ensemble.kill(second)
    wait_until(quorum_lost, "ZooKeeperQuorumLost's expression to hold", limit=30)
    wait_until(lambda: member_down() == {e.target for e in exporters}, "every member down", limit=30)

    # an exporter that is down itself: its target's up 0 keeps the member down
    exporters[first].stop()
    wait_until(lambda: query(f'up{{instance="{exporters[first].target}"}}') == {exporters[first].target: 0},
               "the stopped exporter's target down", limit=30)
    assert exporters[first].target in member_down()
