"""``kafkactl client-metrics`` and ``kafkactl configs get|set client-metrics``: KIP-714's client metrics
subscriptions against a broker process, and the admin client's ``list_config_resources``."""

from __future__ import annotations

import re
import uuid

import pytest

from broker.client import Admin, ConfigResource, ConfigResourceListing, NewTopic, errors
from broker.protocol import ApiKey
from tests.kafkactl.conftest import Ctl, one_line_error

PRODUCER, CONSUMER = "org.apache.kafka.producer.", "org.apache.kafka.consumer."


def test_list_describe_alter_delete(ctl: Ctl) -> None:
    assert ctl("client-metrics", "list").stdout == ""
    assert ctl.json("client-metrics", "list") == []
    assert ctl("client-metrics", "describe").stdout == "no client metrics subscriptions\n"
    assert ctl.json("client-metrics", "describe") == []

    res = ctl("client-metrics", "alter", "basic", "--metrics", f"{PRODUCER},{CONSUMER}", "--interval", "1000",
              "--match", "client_id=app-.*", "--match", "client_software_name=kafkapy")
    assert res.returncode == 0, res.stderr
    assert res.stdout == (f"altered client metrics subscription basic: metrics={PRODUCER},{CONSUMER}, "
                          "interval.ms=1000, match=client_id=app-.*,client_software_name=kafkapy\n")
    assert ctl("client-metrics", "list").stdout == "basic\n"
    assert ctl.json("client-metrics", "describe", "basic") == [
        {"name": "basic", "metrics": [PRODUCER, CONSUMER], "interval_ms": 1000,
         "match": ["client_id=app-.*", "client_software_name=kafkapy"]}]
    table = ctl("client-metrics", "describe").stdout.splitlines()
    assert [line.split() for line in table] == [
        ["NAME", "METRICS", "INTERVAL_MS", "MATCH"],
        ["basic", f"{PRODUCER},{CONSUMER}", "1000", "client_id=app-.*,client_software_name=kafkapy"]]

    # an empty value removes that config; the others keep theirs
    res = ctl("client-metrics", "alter", "basic", "--interval", "", "--match", "")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "altered client metrics subscription basic: interval.ms deleted, match deleted\n"
    assert ctl.json("client-metrics", "describe", "basic") == [
        {"name": "basic", "metrics": [PRODUCER, CONSUMER], "interval_ms": 300000, "match": []}]

    assert ctl.json("client-metrics", "alter", "all", "--metrics", "*") == {"name": "all", "changes": {"metrics": "*"}}
    assert ctl.json("client-metrics", "list") == ["all", "basic"]
    assert [s["name"] for s in ctl.json("client-metrics", "describe")] == ["all", "basic"]

    res = ctl("client-metrics", "delete", "basic")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "deleted client metrics subscription basic\n"
    assert ctl.json("client-metrics", "list") == ["all"]
    assert ctl.json("client-metrics", "delete", "all") == {"name": "all", "deleted": True}
    assert ctl.json("client-metrics", "list") == []


def test_generate_name(ctl: Ctl) -> None:
    made = ctl.json("client-metrics", "alter", "--generate-name", "--metrics", "*", "--interval", "5000")
    assert uuid.UUID(made["name"]).version == 4
    assert made["changes"] == {"metrics": "*", "interval.ms": "5000"}
    res = ctl("client-metrics", "alter", "--generate-name", "--match", "client_software_name=librdkafka")
    assert res.returncode == 0, res.stderr
    second = re.fullmatch(r"altered client metrics subscription ([0-9a-f-]{36}): "
                          r"match=client_software_name=librdkafka\n", res.stdout).group(1)
    assert ctl.json("client-metrics", "list") == sorted([made["name"], second])


def test_bad_input_is_one_line(ctl: Ctl) -> None:
    assert "bad --interval 'soon'" in one_line_error(ctl("client-metrics", "alter", "s", "--interval", "soon"), 2)
    assert "nothing to change" in one_line_error(ctl("client-metrics", "alter", "s"), 2)
    assert "one of them" in one_line_error(ctl("client-metrics", "alter", "s", "--generate-name",
                                               "--metrics", "*"), 2)
    assert "one of them" in one_line_error(ctl("client-metrics", "alter", "--metrics", "*"), 2)
    # values the broker refuses, with its message (INVALID_CONFIG or, as in Kafka, INVALID_REQUEST)
    match = one_line_error(ctl("client-metrics", "alter", "s", "--match", "nosuch=x"), 2)
    assert "INVALID_CONFIG (40)" in match and "nosuch=x" in match, match
    interval = one_line_error(ctl("client-metrics", "alter", "s", "--interval", "50"), 2)
    assert "INVALID_REQUEST (42)" in interval and "Invalid value 50 for interval.ms" in interval, interval
    assert ctl.json("client-metrics", "list") == []  # nothing was made

    assert one_line_error(ctl("client-metrics", "describe", "missing"), 2) == \
        "kafkactl: client metrics subscription missing does not exist"
    assert one_line_error(ctl("client-metrics", "delete", "missing"), 2) == \
        "kafkactl: client metrics subscription missing does not exist"


def test_configs_of_a_subscription(ctl: Ctl) -> None:
    # no subscription: no overrides; --all shows the defaults
    assert ctl.json("configs", "get", "client-metrics", "basic") == []
    assert "client-metrics basic has no config overrides" in ctl("configs", "get", "client-metrics", "basic").stdout
    defaults = {r["name"]: (r["value"], r["source"]) for r in ctl.json("configs", "get", "client-metrics", "basic",
                                                                      "--all")}
    assert defaults == {"metrics": ("", "DEFAULT_CONFIG"), "interval.ms": ("300000", "DEFAULT_CONFIG"),
                        "match": ("", "DEFAULT_CONFIG")}

    res = ctl("configs", "set", "client-metrics", "basic", "interval.ms=2000", f"metrics={PRODUCER},{CONSUMER}")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"updated client-metrics basic: interval.ms=2000, metrics={PRODUCER},{CONSUMER}\n"
    assert ctl.json("client-metrics", "list") == ["basic"]
    rows = {r["name"]: (r["value"], r["source"]) for r in ctl.json("configs", "get", "client-metrics", "basic")}
    assert rows == {"interval.ms": ("2000", "CLIENT_METRICS_CONFIG"),
                    "metrics": (f"{PRODUCER},{CONSUMER}", "CLIENT_METRICS_CONFIG")}
    every = {r["name"]: r["source"] for r in ctl.json("configs", "get", "client-metrics", "basic", "--all")}
    assert every == {"metrics": "CLIENT_METRICS_CONFIG", "interval.ms": "CLIENT_METRICS_CONFIG",
                     "match": "DEFAULT_CONFIG"}

    unknown = one_line_error(ctl("configs", "set", "client-metrics", "basic", "nosuch=1"), 2)
    assert "nosuch" in unknown, unknown
    assert "name is needed" in one_line_error(ctl("configs", "get", "client-metrics", ""), 2)

    res = ctl("configs", "set", "client-metrics", "basic", "--delete", "interval.ms", "--delete", "metrics")
    assert res.returncode == 0, res.stderr
    assert ctl.json("client-metrics", "list") == []


def test_admin_list_config_resources(broker) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("orders", configs={"retention.ms": "60000"})])
        admin.incremental_alter_configs({ConfigResource("client_metrics", "basic"): {"metrics": "*"},
                                         ConfigResource("group", "billing"): {"consumer.session.timeout.ms": "50000"}})
        assert admin.list_config_resources(["client_metrics"]) == [ConfigResourceListing("client_metrics", "basic")]
        everything = admin.list_config_resources()
        assert {ConfigResourceListing("client_metrics", "basic"), ConfigResourceListing("topic", "orders"),
                ConfigResourceListing("group", "billing")} <= set(everything)
        assert everything == sorted(everything, key=lambda r: (r.type, r.name))
        assert admin.list_config_resources(["topic", "client_metrics"]) == [
            r for r in everything if r.type in ("topic", "client_metrics")]


def test_admin_against_a_v0_broker(broker) -> None:
    """A broker serving only v0 (Kafka 3.7-4.0's ListClientMetricsResources) lists client metrics alone."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.incremental_alter_configs({ConfigResource("client_metrics", "basic"): {"interval.ms": "1000"}})
        conn = admin._thread.run(admin._core._cluster.any_connection())
        conn.broker_versions[ApiKey.LIST_CONFIG_RESOURCES] = (0, 0)
        assert admin.list_config_resources(["client_metrics"]) == [ConfigResourceListing("client_metrics", "basic")]
        for types in (None, ["topic"], ["client_metrics", "group"]):
            with pytest.raises(errors.UnsupportedApiError, match="v0 only"):
                admin.list_config_resources(types)
