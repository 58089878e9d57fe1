"""``monitoring/``: promtool's checks and unit tests, and every query of the rules and dashboards against a
real Prometheus scraping real brokers, a real mirror and a real ZooKeeper (through its exporter).

A rule's query must parse and evaluate (its metrics may be absent: node_exporter
is not scraped here); a dashboard's query must return data, with
its template variables set to "All" (``.+``) and ``$__rate_interval`` to a few
scrapes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest
import yaml
from confluent_kafka import Consumer, Producer

from tests.cluster.conftest import wait_until
from tests.mirror.conftest import mirror_config, mirror_factory  # noqa: F401 - the fixture
from tests.monitoring.conftest import MONITORING, RULES, api

DASHBOARDS = sorted((MONITORING / "dashboards").glob("*.json"))
RATE_INTERVAL = "10s"  # ten scrapes at the test's 1 s interval


def promtool(*args: str) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is not installed (./dev test installs Debian's prometheus)")
    return subprocess.run([tool, *args], capture_output=True, text=True, cwd=MONITORING, timeout=120)


def test_promtool_checks_config_and_rules_and_runs_every_rule_test():
    assert DASHBOARDS and RULES
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", *map(str, RULES)],
                 ["test", "rules", *map(str, sorted((MONITORING / "tests").glob("*_test.yml")))]):
        res = promtool(*args)
        assert res.returncode == 0, f"promtool {' '.join(args)}:\n{res.stdout}\n{res.stderr}"
    # every rule file has its unit test, and every alert of it is expected to fire there at least once
    for rules in RULES:
        test = (MONITORING / "tests" / f"{rules.stem}_test.yml").read_text()
        for group in yaml.safe_load(rules.read_text())["groups"]:
            for rule in group["rules"]:
                assert re.search(rf"alertname: {rule['alert']}\n\s+exp_alerts:\n\s+- ", test), \
                    f"{rule['alert']} never fires in {rules.stem}_test.yml"


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard, panel, expr) with the variables substituted."""
    out = []
    for path in DASHBOARDS:
        d = json.loads(path.read_text())
        for panel in d["panels"]:
            for target in panel["targets"]:
                expr = target["expr"].replace("$__rate_interval", RATE_INTERVAL)
                expr = re.sub(r"\$\w+", ".+", expr)
                out.append((path.stem, panel["title"], expr))
    return out


def variables() -> list[tuple[str, str, str]]:
    """(dashboard, label, series selector) of every ``label_values`` variable."""
    out = []
    for path in DASHBOARDS:
        for v in json.loads(path.read_text())["templating"]["list"]:
            if v["type"] == "query":
                m = re.fullmatch(r"label_values\((.+), (\w+)\)", v["definition"])
                assert m, v["definition"]
                out.append((path.stem, m.group(2), m.group(1)))
    return out


def _traffic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("watched", 2, 1)])["watched"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(200):
        producer.produce("watched", value=b"x" * 100, key=b"%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watchers", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["watched"])
    try:
        got = 0
        deadline = time.monotonic() + 60
        while got < 150 and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                got += 1
        assert got >= 150
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_every_rule_and_dashboard_query_on_a_real_prometheus(broker_factory, mirror_factory, prometheus, zookeeper,
                                                             zk_exporter_factory):
    # quotas no client reaches: every client's rate is measured, so the quota panels have data
    src = broker_factory({"quota.producer.default": 10**12, "quota.consumer.default": 10**12})
    dst = broker_factory()
    _traffic(src.bootstrap)
    clients = _PushingClients(src.bootstrap)
    try:
        _check_on_prometheus(src, dst, mirror_factory, prometheus, zookeeper, zk_exporter_factory)
    finally:
        clients.stop()


class _PushingClients:
    """A producer and a consumer that keep working, and push their client metrics (KIP-714) every second
    under a subscription to all of them, for the clients dashboard."""

    def __init__(self, bootstrap: str) -> None:
        import threading

        from tests.server.test_client_metrics import subscribe

        subscribe(bootstrap, "dashboards", metrics="*", interval_ms="1000")
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": "dashboard-producer"})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dashboard-readers",
                                  "client.id": "dashboard-consumer", "auto.offset.reset": "earliest"})
        self.consumer.subscribe(["watched"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        # paced: a record every 20 ms and a commit at most every 0.5 s are data enough for every panel; an
        # unpaced loop (a commit per record) queued some 150,000 commits that closing the consumer then waited for
        committed = 0.0
        while not self._stop.wait(0.02):
            self.producer.produce("watched", b"tick")
            self.producer.poll(0)
            if self.consumer.poll(0) is not None and time.monotonic() - committed >= 0.5:
                self.consumer.commit(asynchronous=True)
                committed = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()
        self.producer.flush(30)


def _check_on_prometheus(src, dst, mirror_factory, prometheus, zookeeper, zk_exporter_factory) -> None:
    mirror = mirror_factory(mirror_config({"a": src.bootstrap, "b": dst.bootstrap},
                                          [{"source": "a", "target": "b", "topics": "watched"}]))
    url = prometheus([
        {"job_name": "kafka", "static_configs": [{"targets": [f"127.0.0.1:{b.metrics_port}" for b in (src, dst)]}]},
        {"job_name": "kafka-mirror", "static_configs": [{"targets": [f"127.0.0.1:{mirror.metrics_port}"]}]},
        {"job_name": "zookeeper", "static_configs": [{"targets": [zk_exporter_factory(zookeeper.port).target]}]},
    ])
    wait_until(lambda: len([t for t in api(url, "/api/v1/targets")["data"]["activeTargets"]
                            if t["health"] == "up"]) == 4, "every target to be up")

    def rules_evaluated():
        groups = api(url, "/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return rules if all(r.get("lastEvaluation", "").startswith("2") and not r["lastEvaluation"].startswith(
            "0001") for r in rules) else None

    rules = wait_until(rules_evaluated, "every rule to be evaluated", limit=30)
    assert {g["file"] for g in api(url, "/api/v1/rules")["data"]["groups"]} == {str(p) for p in RULES}
    for rule in rules:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
        assert api(url, "/api/v1/query", query=rule["query"])["status"] == "success", rule["name"]
    # no alert fires on a healthy cluster (the loader's rules have nothing to look at here)
    assert [r["name"] for r in rules if r["state"] == "firing"] == []

    time.sleep(int(RATE_INTERVAL[:-1]) + 2)  # every rate window holds scrapes
    empty = []
    for dashboard, panel, expr in dashboard_queries():
        result = api(url, "/api/v1/query", query=expr)
        assert result["status"] == "success", (dashboard, panel, expr)
        if not result["data"]["result"]:
            empty.append((dashboard, panel, expr))
    assert empty == []
    for dashboard, label, selector in variables():
        values = api(url, f"/api/v1/label/{label}/values", **{"match[]": selector})["data"]
        assert values, (dashboard, label, selector)
