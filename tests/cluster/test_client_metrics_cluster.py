"""Client metrics subscriptions (KIP-714) on two brokers and a real ZooKeeper.

A subscription made through one broker is stored as ``/config/client-metrics/<name>`` with a
``client-metrics/<name>`` change notification; the other broker follows it, and a client that moves from one
broker to the other (its instance id unknown there) gets the same subscription id, so its pushes carry on.
"""

from __future__ import annotations

import json

from broker.protocol import ApiKey, ErrorCode
from tests.cluster.conftest import wait_until
from tests.server.test_client_metrics import alter, get, listed, otlp, push, scrape, subscribe
from tests.server.wire import Wire


def test_a_subscription_made_through_one_broker_serves_clients_on_the_other(cluster_factory):
    cluster = cluster_factory(2)
    one, two = cluster.broker(1), cluster.broker(2)
    subscribe(one.bootstrap, "ops team", metrics="org.apache.kafka.producer.", interval_ms="60000")
    node = json.loads(cluster.zk.get("/config/client-metrics/ops%20team")[0])
    assert node == {"version": 1, "config": {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000"}}
    wait_until(lambda: listed(two.bootstrap) == ["ops team"], "broker 2 to follow the subscription")
    with Wire(one.bootstrap) as wire:
        first = get(wire)
    me, sub = first["client_instance_id"], first["subscription_id"]
    with Wire(two.bootstrap) as wire:  # the client moved: broker 2 has not seen it, and gives the same id
        assert push(wire, me, sub, otlp(value=2.5)) == ErrorCode.NONE
        (sample,) = scrape(two.metrics_url)["org_apache_kafka_producer_node_request_latency_avg"]
        assert sample.value == 2.5 and sample.labels["group_id"] == "g1"
    # its connection closed: the client and its series are gone
    wait_until(lambda: "org_apache_kafka_producer_node_request_latency_avg" not in scrape(two.metrics_url),
               "the closed client's series to go")

    assert alter(two.bootstrap, "ops team", ("metrics", 1, None), ("interval.ms", 1, None))["error_code"] == 0
    assert cluster.zk.exists("/config/client-metrics/ops%20team") is None
    wait_until(lambda: listed(one.bootstrap) == [], "broker 1 to drop the subscription")
    with Wire(one.bootstrap) as wire:
        assert get(wire)["requested_metrics"] == []
    with Wire(one.bootstrap) as wire:
        versions = {k["api_key"] for k in wire.call(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "wire", "client_software_version": "1"})["api_keys"]}
    assert {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY} <= versions
