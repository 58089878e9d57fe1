"""Client quotas in a cluster on a real ZooKeeper: stored in Kafka 2.7's layout, so a quota written the way
Kafka's own tools write it (``kafka-configs.sh --zookeeper``: the entity's node, then a change notification)
reaches every broker without a restart, one written through a broker is what Kafka's tools read, a broker
started later loads them, and a removal lifts them everywhere.
"""

from __future__ import annotations

import json

from broker.protocol import ApiKey
from tests.cluster.conftest import wait_until
from tests.server.test_quotas import metric, scrape, set_quota
from tests.server.wire import Wire

WINDOWS = {"quota.window.num": 3, "quota.window.size.seconds": 1, "metrics.port": 0}


def kafka_tool_writes(zk, path: str, config: dict) -> None:
    """What Kafka 2.7's AdminZkClient.changeConfigs does for a user or client-id entity."""
    node = f"/config/{path}"
    data = json.dumps({"version": 1, "config": config}).encode()
    if zk.exists(node):
        zk.set(node, data)
    else:
        zk.create(node, data, makepath=True)
    zk.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": path}).encode(),
              sequence=True, makepath=True)


def request_limit(broker) -> float | None:
    """The request-time quota this broker holds the client id ``wire`` to, after one request of it."""
    with Wire(broker.bootstrap) as w:
        w.call(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False})
    return metric(scrape(broker), "kafkapy_client_quota_limit", quota="Request", user="", client_id="wire")


def test_quotas_written_as_kafka_writes_them_reach_every_broker(cluster_factory):
    cluster = cluster_factory(2, props=WINDOWS)
    zk = cluster.zk
    kafka_tool_writes(zk, "clients/<default>", {"request_percentage": "50"})
    for broker_id in cluster.ids:
        wait_until(lambda b=cluster.broker(broker_id): request_limit(b) == 50, f"broker {broker_id} to apply it")

    # written through one broker: Kafka's layout, and the other broker applies it too
    result = set_quota(cluster.broker(1), [("user", "alice"), ("client-id", "app one")], producer_byte_rate=1024)
    assert result["error_code"] == 0
    assert json.loads(zk.get("/config/users/alice/clients/app%20one")[0]) == {
        "version": 1, "config": {"producer_byte_rate": "1024"}}
    newest = max(zk.get_children("/config/changes"))
    assert json.loads(zk.get(f"/config/changes/{newest}")[0])["entity_path"] == "users/alice/clients/app%20one"
    # a more specific quota for the client id: it wins on both brokers
    set_quota(cluster.broker(2), [("client-id", "wire")], request_percentage=25)
    for broker_id in cluster.ids:
        wait_until(lambda b=cluster.broker(broker_id): request_limit(b) == 25, f"broker {broker_id} to apply it")

    # a broker started later loads what is stored
    cluster.restart(2)
    assert request_limit(cluster.broker(2)) == 25

    # removed by Kafka's tool (an empty config, as kafka-configs.sh --delete-config leaves it): lifted everywhere
    kafka_tool_writes(zk, "clients/wire", {})
    kafka_tool_writes(zk, "clients/<default>", {})
    for broker_id in cluster.ids:
        wait_until(lambda b=cluster.broker(broker_id): request_limit(b) is None, f"broker {broker_id} to lift it")


def test_ip_quotas_written_as_kafka_writes_them_reach_every_broker(cluster_factory):
    """Kafka 2.8's ``kafka-configs.sh --entity-type ips``: ``/config/ips/<address>`` and a notification."""
    cluster = cluster_factory(2, props=WINDOWS)
    kafka_tool_writes(cluster.zk, "ips/127.0.0.2", {"connection_creation_rate": "2"})
    for broker_id in cluster.ids:
        wait_until(lambda b=cluster.broker(broker_id): "connection_creation_rate quota of ip 127.0.0.2: 2"
                   in b.stderr_text(), f"broker {broker_id} to apply it")
        assert _refused_from(cluster.broker(broker_id), "127.0.0.2", 10) >= 3
    # written through a broker: Kafka's layout
    with Wire(cluster.broker(1).bootstrap) as w:
        response = w.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": "ip", "entity_name": None}],
            "ops": [{"key": "connection_creation_rate", "value": 50.0, "remove": False}]}], "validate_only": False})
    assert response["entries"][0]["error_code"] == 0
    assert json.loads(cluster.zk.get("/config/ips/<default>")[0]) == {
        "version": 1, "config": {"connection_creation_rate": "50"}}
    wait_until(lambda: "connection_creation_rate quota of ip <default>: 50" in cluster.broker(2).stderr_text(),
               "broker 2 to apply the default")
    cluster.restart(2)  # a broker started later loads them
    assert _refused_from(cluster.broker(2), "127.0.0.2", 10) >= 3


def _refused_from(broker, source: str, count: int) -> int:
    """Connections from ``source`` one after another: how many were closed without an answer."""
    refused = 0
    for _ in range(count):
        with Wire(broker.bootstrap, timeout=5, source=source) as w:
            try:
                w.call(ApiKey.API_VERSIONS, 0, {})
            except (ConnectionError, OSError):
                refused += 1
    return refused
