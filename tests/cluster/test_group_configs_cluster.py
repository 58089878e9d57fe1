"""Group configs (Kafka 4.1's GROUP config resource) on two brokers and a real ZooKeeper.

A change made through one broker is written to ``/config/groups/<sanitized group id>`` in Kafka's config
layout with a ``groups/...`` change notification, and the other broker, which answers DescribeConfigs from
its own copy, shows it once the notification reached it; the node goes with the last override.
"""

from __future__ import annotations

import json

from broker.protocol import ApiKey
from tests.cluster.conftest import wait_until
from tests.server.wire import Wire

GROUP = 32  # the config resource type
NODE = "/config/groups/team%20a%2Fb%2A"  # "team a/b*" as Kafka's Sanitizer writes it


def incremental(bootstrap: str, group: str, configs: list[tuple[str, int, str | None]]) -> dict:
    with Wire(bootstrap) as wire:
        (r,) = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": GROUP, "resource_name": group,
                           "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in configs]}],
            "validate_only": False})["responses"]
    return r


def overrides(bootstrap: str, group: str) -> dict[str, str]:
    """The configs the broker at ``bootstrap`` answers as the group's own (source GROUP_CONFIG)."""
    with Wire(bootstrap) as wire:
        (r,) = wire.call(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})["results"]
    assert r["error_code"] == 0, r
    return {c["name"]: c["value"] for c in r["configs"] if c["config_source"] == 8}


def test_a_group_config_set_through_one_broker_is_in_force_on_the_other(cluster_factory):
    cluster = cluster_factory(2)
    one, two = cluster.broker(1).bootstrap, cluster.broker(2).bootstrap
    result = incremental(one, "team a/b*", [("share.auto.offset.reset", 0, "earliest"),
                                            ("share.record.lock.duration.ms", 0, "20000")])
    assert result["error_code"] == 0, result
    assert json.loads(cluster.zk.get(NODE)[0]) == {
        "version": 1, "config": {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}}
    notes = [json.loads(cluster.zk.get(f"/config/changes/{c}")[0])["entity_path"]
             for c in sorted(cluster.zk.get_children("/config/changes"))]
    assert notes[-1] == "groups/team%20a%2Fb%2A"
    assert overrides(one, "team a/b*") == {"share.auto.offset.reset": "earliest",
                                           "share.record.lock.duration.ms": "20000"}
    wait_until(lambda: overrides(two, "team a/b*") == {"share.auto.offset.reset": "earliest",
                                                       "share.record.lock.duration.ms": "20000"},
               "broker 2 to apply the group's configs")

    # deleted through broker 2: broker 1 follows, and the node goes with the last override
    result = incremental(two, "team a/b*", [("share.auto.offset.reset", 1, None),
                                            ("share.record.lock.duration.ms", 1, None)])
    assert result["error_code"] == 0, result
    assert cluster.zk.exists(NODE) is None
    wait_until(lambda: overrides(one, "team a/b*") == {}, "broker 1 to drop the group's configs")

    # a broker started afterwards reads what is stored
    assert incremental(one, "g2", [("share.isolation.level", 0, "read_committed")])["error_code"] == 0
    cluster.restart(2)
    assert overrides(cluster.broker(2).bootstrap, "g2") == {"share.isolation.level": "read_committed"}
