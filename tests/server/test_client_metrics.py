"""Client metrics (KIP-714) on a broker process: subscriptions, GetTelemetrySubscriptions and PushTelemetry, and
the pushed metrics on the broker's ``/metrics``.

librdkafka (confluent-kafka) pushes with a subscription made over the wire; the rules it does not exercise (the
order of a push's checks, throttling, payloads that must be refused) are driven over a raw socket
(:class:`tests.server.wire.Wire`) with OTLP payloads built from the OpenTelemetry schema.
"""

from __future__ import annotations

import gzip
import urllib.request
import uuid

import pytest
import snappy
import zstandard
from confluent_kafka import Consumer, Producer
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client.parser import text_string_to_metric_families

from broker.protocol import ApiKey, ErrorCode
from broker.records.compression import compress
from broker.server.client_metrics import parse_list, series_of, subscription_id, validate
from broker.server.topics import TopicError
from tests.cluster.conftest import wait_until

from .wire import Wire

pytestmark = pytest.mark.clients

WAIT_S = 30  # a guard against a hang, not a performance assertion
CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2
ZERO = uuid.UUID(int=0)


# -- helpers -----------------------------------------------------------------------------------------------------

def alter(bootstrap: str, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False) -> dict:
    with Wire(bootstrap) as wire:
        (r,) = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": CLIENT_METRICS, "resource_name": name,
                           "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
            "validate_only": validate_only})["responses"]
    return r


def subscribe(bootstrap: str, name: str, **configs: str) -> None:
    result = alter(bootstrap, name, *((k.replace("_", "."), SET, v) for k, v in configs.items()))
    assert result["error_code"] == 0, result


def listed(bootstrap: str) -> list[str]:
    with Wire(bootstrap) as wire:
        r = wire.call(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [CLIENT_METRICS]})
    assert r["error_code"] == 0, r
    return [c["resource_name"] for c in r["config_resources"]]


def get(wire: Wire, instance: uuid.UUID = ZERO, client_id: str = "wire") -> dict:
    cid = wire.send(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": instance}, client_id=client_id)
    got, r = wire.receive(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0)
    assert got == cid
    return r


def push(wire: Wire, instance: uuid.UUID, subscription: int, data: bytes = b"", codec: int = 0,
         terminating: bool = False, client_id: str = "wire") -> int:
    cid = wire.send(ApiKey.PUSH_TELEMETRY, 0, {
        "client_instance_id": instance, "subscription_id": subscription, "terminating": terminating,
        "compression_type": codec, "metrics": data}, client_id=client_id)
    got, r = wire.receive(ApiKey.PUSH_TELEMETRY, 0)
    assert got == cid
    return r["error_code"]


def otlp(value: float = 1.5, total: int = 7, delta: bool = False, node: int = 0) -> bytes:
    """A MetricsData as a client sends it: a gauge with a per-broker point and a monotonic sum."""
    data = metrics_pb2.MetricsData()
    rm = data.resource_metrics.add()
    rm.resource.attributes.append(common_pb2.KeyValue(key="group_id", value=common_pb2.AnyValue(string_value="g1")))
    sm = rm.scope_metrics.add()
    gauge = sm.metrics.add(name="org.apache.kafka.producer.node.request.latency.avg", description="latency")
    point = gauge.gauge.data_points.add(as_double=value)
    point.attributes.append(common_pb2.KeyValue(key="node.id", value=common_pb2.AnyValue(int_value=node)))
    total_metric = sm.metrics.add(name="org.apache.kafka.producer.connection.creation.total")
    total_metric.sum.is_monotonic = True
    total_metric.sum.aggregation_temporality = (metrics_pb2.AGGREGATION_TEMPORALITY_DELTA if delta
                                                else metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE)
    total_metric.sum.data_points.add(as_int=total)
    return data.SerializeToString()


def scrape(url: str) -> dict[str, list]:
    """Family name -> samples, of the client metrics (``org_apache_kafka_*``) the broker serves."""
    text = urllib.request.urlopen(url, timeout=WAIT_S).read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text) if f.name.startswith("org_apache_kafka")}


# -- the rules, without a broker ---------------------------------------------------------------------------------

def test_subscription_configs_are_checked_as_kafka_checks_them():
    ok = validate("s", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.", "interval.ms": "1000",
                        "match": "client_id=billing-.*,client_software_name=librdkafka"})
    assert ok.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.") and ok.interval_ms == 1000
    assert ok.matches({"client_id": "billing-7", "client_software_name": "librdkafka"})
    assert not ok.matches({"client_id": "billing-7", "client_software_name": "apache-kafka-java"})
    assert not ok.matches({"client_id": "xbilling-7", "client_software_name": "librdkafka"})  # a whole match
    assert not ok.matches({"client_software_name": "librdkafka"})  # a missing value never matches
    assert validate("s", {"metrics": ""}).metrics == () and validate("s", {}).interval_ms == 300000
    assert parse_list(" a , b,,c ") == ["a", "b", "", "c"] and parse_list("  ") == []
    refused = {
        ("", "interval.ms", "1000"): ErrorCode.INVALID_REQUEST,  # no name
        ("s", "color", "red"): ErrorCode.INVALID_REQUEST,
        ("s", "interval.ms", "99"): ErrorCode.INVALID_REQUEST,
        ("s", "interval.ms", "3600001"): ErrorCode.INVALID_REQUEST,
        ("s", "interval.ms", "soon"): ErrorCode.INVALID_CONFIG,
        ("s", "metrics", "a,b,a"): ErrorCode.INVALID_CONFIG,
        ("s", "metrics", "org.apache.kafka.producer.,"): ErrorCode.INVALID_CONFIG,  # an empty item would match all
        ("s", "metrics", "a" * 32768): ErrorCode.INVALID_CONFIG,
        (".", "metrics", "*"): ErrorCode.INVALID_REQUEST,
        ("..", "metrics", "*"): ErrorCode.INVALID_REQUEST,
        ("s", "match", "client_id"): ErrorCode.INVALID_CONFIG,
        ("s", "match", "client_id=a=b"): ErrorCode.INVALID_CONFIG,
        ("s", "match", "colour=red"): ErrorCode.INVALID_CONFIG,
        ("s", "match", "client_id=(unclosed"): ErrorCode.INVALID_CONFIG,
    }
    for (name, key, value), code in refused.items():
        with pytest.raises(TopicError) as info:
            validate(name, {key: value})
        assert info.value.error_code == code, (key, value)


def test_subscription_ids_depend_on_what_was_given_and_to_whom():
    one, two = uuid.uuid4().bytes, uuid.uuid4().bytes
    assert subscription_id(["b", "a"], 1000, one) == subscription_id(["a", "b"], 1000, one)
    assert subscription_id(["a"], 1000, one) != subscription_id(["a"], 2000, one)
    assert subscription_id(["a"], 1000, one) != subscription_id(["a"], 1000, two)
    assert -2**31 <= subscription_id(["*"], 100, one) < 2**31


def test_only_requested_kafka_client_metrics_become_series_within_bounds():
    client = {"client_id": "c", "client_instance_id": "i"}
    payload = metrics_pb2.MetricsData.FromString(otlp(total=5))
    series, dropped = series_of(payload, client, ("*",), 100)
    by_name = {s[0]: s for s in series}
    family, kind, _doc, suffix, labels, value = by_name["org_apache_kafka_producer_connection_creation"]
    assert (kind, suffix, value, dropped) == ("counter", "_total", 5.0, 0)
    assert labels["group_id"] == "g1" and labels["client_id"] == "c"
    gauge = by_name["org_apache_kafka_producer_node_request_latency_avg"]
    assert gauge[1] == "gauge" and gauge[4]["node_id"] == "0" and gauge[5] == 1.5
    # asked for the connection metrics only: the latency is left out, silently (it was not asked for)
    series, dropped = series_of(payload, client, ("org.apache.kafka.producer.connection.",), 100)
    assert [s[0] for s in series] == ["org_apache_kafka_producer_connection_creation"] and dropped == 0
    # room for one series: the other is counted as left out
    assert len(series_of(payload, client, ("*",), 1)[0]) == 1 and series_of(payload, client, ("*",), 1)[1] == 1
    # a delta sum is not what clients are asked for: left out; so is a name that is no Kafka client's
    assert [s[0] for s in series_of(metrics_pb2.MetricsData.FromString(otlp(delta=True)), client, ("*",), 100)[0]
            ] == ["org_apache_kafka_producer_node_request_latency_avg"]
    foreign = metrics_pb2.MetricsData()
    foreign.resource_metrics.add().scope_metrics.add().metrics.add(name="kafkapy_requests_total").gauge.data_points.add(
        as_double=1)
    assert series_of(foreign, client, ("*",), 100) == ((), 0)
    # attribute keys Prometheus reserves are dropped; too many labels drop the series
    data = metrics_pb2.MetricsData()
    metric = data.resource_metrics.add().scope_metrics.add().metrics.add(name="org.apache.kafka.producer.x")
    point = metric.gauge.data_points.add(as_double=1)
    point.attributes.append(common_pb2.KeyValue(key="__name__", value=common_pb2.AnyValue(string_value="evil")))
    ((_f, _k, _d, _s, labels, _v),), _ = series_of(data, client, ("*",), 100)
    assert "__name__" not in labels
    for i in range(40):
        point.attributes.append(common_pb2.KeyValue(key=f"k{i}", value=common_pb2.AnyValue(int_value=i)))
    assert series_of(data, client, ("*",), 100) == ((), 1)


# -- real clients ------------------------------------------------------------------------------------------------

def test_librdkafka_pushes_what_it_is_subscribed_to_and_the_broker_exports_it(broker):
    subscribe(broker.bootstrap, "producers", metrics="org.apache.kafka.producer.", interval_ms="200",
              match="client_id=billing-.*")
    subscribe(broker.bootstrap, "consumers", metrics="org.apache.kafka.consumer.coordinator.", interval_ms="200")
    assert listed(broker.bootstrap) == ["consumers", "producers"]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "billing-1", "linger.ms": 1})
    other = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "shipping-1", "linger.ms": 1})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers", "client.id": "reader-1",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["telemetry-topic"])
    try:
        for p in (producer, other):
            p.produce("telemetry-topic", b"v")
            assert p.flush(WAIT_S) == 0

        def pushed():
            producer.poll(0)
            other.poll(0)
            consumer.poll(0.1)
            families = scrape(broker.metrics_url)
            want = ("org_apache_kafka_producer_record_queue_time_avg", "org_apache_kafka_producer_connection_creation",
                    "org_apache_kafka_consumer_coordinator_assigned_partitions")
            return families if all(name in families for name in want) else None
        families = wait_until(pushed, "the producer's and the consumer's metrics on /metrics")
        (queue_time,) = families["org_apache_kafka_producer_record_queue_time_avg"]
        assert queue_time.labels["client_id"] == "billing-1"
        assert queue_time.labels["client_software_name"] == "confluent-kafka-python"
        assert queue_time.labels["client_source_address"] == "127.0.0.1"
        assert len(queue_time.labels["client_instance_id"]) == 22
        (created,) = families["org_apache_kafka_producer_connection_creation"]
        assert created.name.endswith("_total") and created.value >= 1  # a counter, the client's own total
        latency = families["org_apache_kafka_producer_node_request_latency_avg"]
        assert {s.labels["node_id"] for s in latency} == {"0"}  # one series per broker it talks to
        (assigned,) = families["org_apache_kafka_consumer_coordinator_assigned_partitions"]
        assert assigned.labels["group_id"] == "readers" and assigned.labels["client_id"] == "reader-1"
        # subscribed to producer metrics by client id only: shipping-1 sends nothing, the consumer no producer ones
        everyone = [s for samples in families.values() for s in samples]
        assert {s.labels["client_id"] for s in everyone} == {"billing-1", "reader-1"}
        assert not any(name.startswith("org_apache_kafka_consumer_fetch") for name in families)
    finally:
        consumer.close()
        other.flush(WAIT_S)
    # a closing client says so (a terminating push) and its series go
    producer = None  # the last reference: librdkafka's destroy
    wait_until(lambda: not any(s.labels["client_id"] == "billing-1"
                               for samples in scrape(broker.metrics_url).values() for s in samples),
               "the closed producer's series to go")


def test_a_push_is_checked_in_kafkas_order(broker_factory):
    broker = broker_factory(telemetry_max_bytes=4096)
    subscribe(broker.bootstrap, "all", metrics="*", interval_ms="60000")
    with Wire(broker.bootstrap) as wire:
        assert push(wire, ZERO, 0) == ErrorCode.INVALID_REQUEST  # no instance id
        first = get(wire)
        assert first["error_code"] == 0 and first["requested_metrics"] == ["*"]
        assert first["push_interval_ms"] == 60000 and first["telemetry_max_bytes"] == 4096
        assert first["accepted_compression_types"] == [4, 3, 1, 2] and first["delta_temporality"] is False
        me, sub = first["client_instance_id"], first["subscription_id"]
        assert me != ZERO
        # asking again within the interval is throttled, and so is pushing twice
        assert get(wire, me)["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(wire, me, sub, otlp()) == ErrorCode.NONE
        assert push(wire, me, sub, otlp()) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        # a terminating push is never throttled; after it, the client may push no more
        assert push(wire, me, sub, terminating=True) == ErrorCode.NONE
        assert push(wire, me, sub) == ErrorCode.INVALID_REQUEST

        # a new client: each refusal in turn (the first push after a Get is never throttled)
        fresh = get(wire)
        me, sub = fresh["client_instance_id"], fresh["subscription_id"]
        assert push(wire, me, sub ^ 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        again = get(wire, me)  # not throttled after UNKNOWN_SUBSCRIPTION_ID
        assert again["error_code"] == 0 and again["subscription_id"] == sub
        assert push(wire, me, sub, b"\x00", codec=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert get(wire, me)["error_code"] == 0  # nor after UNSUPPORTED_COMPRESSION_TYPE
        assert push(wire, me, sub, bytes(5000)) == ErrorCode.TELEMETRY_TOO_LARGE
        assert get(wire, me)["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED

    def refused(data: bytes, codec: int) -> int:
        with Wire(broker.bootstrap) as w:
            r = get(w)
            return push(w, r["client_instance_id"], r["subscription_id"], data, codec)
    assert refused(b"\xff\xfenot protobuf", 0) == ErrorCode.INVALID_RECORD
    assert refused(b"not zstd at all", 4) == ErrorCode.INVALID_RECORD
    # 3 KB of zstd that would expand to 10 MB: refused without making it
    bomb = zstandard.ZstdCompressor().compress(bytes(10 * 2**20))
    assert len(bomb) < 4096 and refused(bomb, 4) == ErrorCode.INVALID_RECORD
    for codec in (1, 2, 3, 4):  # every codec offered is read
        assert refused(compress(codec, otlp()), codec) == ErrorCode.NONE
    assert refused(snappy.compress(otlp()), 2) == ErrorCode.NONE  # librdkafka's snappy: a raw block
    assert refused(gzip.compress(otlp()), 1) == ErrorCode.NONE
    text = urllib.request.urlopen(broker.metrics_url, timeout=WAIT_S).read().decode()
    assert 'kafkapy_client_telemetry_pushes_total{error="INVALID_RECORD"} 3.0' in text


def test_a_changed_subscription_reaches_clients_at_their_next_request(broker):
    subscribe(broker.bootstrap, "s", metrics="org.apache.kafka.producer.", interval_ms="60000")
    with Wire(broker.bootstrap) as wire:
        r = get(wire)
        me, sub = r["client_instance_id"], r["subscription_id"]
        subscribe(broker.bootstrap, "s", interval_ms="1000")
        assert push(wire, me, sub, otlp()) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        r = get(wire, me)
        assert r["push_interval_ms"] == 1000 and r["subscription_id"] != sub
        assert r["requested_metrics"] == ["org.apache.kafka.producer."]
        # a subscription for other clients changes nothing for this one: its pushes carry on
        sub = r["subscription_id"]
        subscribe(broker.bootstrap, "others", metrics="*", match="client_id=somebody-else")
        assert push(wire, me, sub, otlp()) == ErrorCode.NONE
        assert alter(broker.bootstrap, "others", ("metrics", DELETE, None), ("match", DELETE, None))[
            "error_code"] == 0
        # a second subscription for every client: the union of metrics, the least interval
        subscribe(broker.bootstrap, "more", metrics="org.apache.kafka.consumer.", interval_ms="500")
        r = get(wire, me)
        assert r["requested_metrics"] == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
        assert r["push_interval_ms"] == 500
        # deleting every config deletes a subscription
        assert alter(broker.bootstrap, "more", ("metrics", DELETE, None), ("interval.ms", DELETE, None))[
            "error_code"] == 0
        assert listed(broker.bootstrap) == ["s"]
        r = get(wire, me)
        assert r["requested_metrics"] == ["org.apache.kafka.producer."] and r["push_interval_ms"] == 1000
        # no subscription matches: nothing asked for, the default interval
        subscribe(broker.bootstrap, "s", match="client_id=nobody")
        r = get(wire, me)
        assert r["requested_metrics"] == [] and r["push_interval_ms"] == 300000
    broker.restart()  # subscriptions are stored
    assert listed(broker.bootstrap) == ["s"]


def test_subscription_configs_over_the_wire(broker):
    def error(*ops) -> tuple[int, str]:
        r = alter(broker.bootstrap, "s", *ops)
        return r["error_code"], r["error_message"]
    assert error(("interval.ms", SET, "10"))[0] == ErrorCode.INVALID_REQUEST
    assert error(("colour", SET, "red"))[0] == ErrorCode.INVALID_REQUEST
    assert error(("metrics", APPEND, "a"))[0] == ErrorCode.INVALID_CONFIG  # not a list Kafka can append to
    code, message = error(("match", SET, "client_id=(unclosed"))
    assert code == ErrorCode.INVALID_CONFIG and "client_id=(unclosed" in message
    assert alter(broker.bootstrap, "s", ("metrics", SET, "*"), validate_only=True)["error_code"] == 0
    assert listed(broker.bootstrap) == []  # nothing made by a refusal or a validate_only
    subscribe(broker.bootstrap, "s", metrics="*")
    with Wire(broker.bootstrap) as wire:
        (r,) = wire.call(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": CLIENT_METRICS, "resource_name": "s", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})["results"]
        (missing,) = wire.call(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": CLIENT_METRICS, "resource_name": "nope", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})["results"]
        every = wire.call(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
        v0 = wire.call(ApiKey.LIST_CONFIG_RESOURCES, 0, {})
        unknown = wire.call(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [3]})
    assert {c["name"]: (c["value"], c["config_source"]) for c in r["configs"]} == {
        "metrics": ("*", 7), "interval.ms": ("300000", 5), "match": ("", 5)}
    assert all(c["config_source"] == 5 for c in missing["configs"]) and missing["error_code"] == 0
    assert {"resource_name": "s", "resource_type": CLIENT_METRICS} in every["config_resources"]
    assert {"resource_name": "0", "resource_type": 4} in every["config_resources"]
    assert [c["resource_name"] for c in v0["config_resources"]] == ["s"]
    assert unknown["error_code"] == ErrorCode.UNSUPPORTED_VERSION


def test_without_the_exporter_clients_are_not_offered_telemetry(broker_factory):
    broker = broker_factory(telemetry_exporter_enable=False)
    with Wire(broker.bootstrap) as wire:
        keys = {k["api_key"] for k in wire.call(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "wire", "client_software_version": "1"})["api_keys"]}
    assert ApiKey.GET_TELEMETRY_SUBSCRIPTIONS not in keys and ApiKey.PUSH_TELEMETRY not in keys
    assert ApiKey.LIST_CONFIG_RESOURCES in keys


def test_kafka_python_admin_manages_subscriptions(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        made = admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "kp", configs={
            "metrics": "org.apache.kafka.", "interval.ms": "5000"})])
        assert made == {"client_metrics": {"kp": "OK"}}
        assert admin.list_config_resources(resource_types=["client_metrics"]) == {"client_metrics": ["kp"]}
        assert admin.list_config_resources()["broker"] == ["0"]
        (configs,) = admin.describe_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "kp")],
                                            config_filter="all")["client_metrics"].values()
        assert {k: (v["value"], v["config_source"], v["config_type"]) for k, v in configs.items()} == {
            "metrics": ("org.apache.kafka.", "DYNAMIC_CLIENT_METRICS_CONFIG", "LIST"),
            "interval.ms": ("5000", "DYNAMIC_CLIENT_METRICS_CONFIG", "INT"),
            "match": ("", "DEFAULT_CONFIG", "LIST")}
        refused = admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "kp", configs={
            "interval.ms": "5"})])["client_metrics"]["kp"]
        assert "InvalidRequestError" in refused and "between 100 and 3600000" in refused
    finally:
        admin.close()


def test_what_a_client_was_not_asked_for_is_not_kept(broker):
    subscribe(broker.bootstrap, "connections", metrics="org.apache.kafka.producer.connection.", interval_ms="60000",
              match="client_id=asked")
    with Wire(broker.bootstrap) as asked, Wire(broker.bootstrap) as other:
        r = get(asked, client_id="asked")
        assert push(asked, r["client_instance_id"], r["subscription_id"], otlp(), client_id="asked") == 0
        r = get(other, client_id="other")  # matches no subscription, and pushes anyway
        assert r["requested_metrics"] == []
        assert push(other, r["client_instance_id"], r["subscription_id"], otlp(), client_id="other") == 0
        families = scrape(broker.metrics_url)
    assert list(families) == ["org_apache_kafka_producer_connection_creation"]
    assert [s.labels["client_id"] for s in families["org_apache_kafka_producer_connection_creation"]] == ["asked"]


def test_subscriptions_need_cluster_permissions_and_pushing_none(broker_factory):
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

    from .test_authorization_groups import _acl_broker, _allow, _conf

    broker = _acl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "admin"))
    _allow(admin, "User:bob", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)  # the cluster
    from .test_authorization_data import _wire

    with _wire(broker, "admin") as wire:
        (r,) = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": CLIENT_METRICS, "resource_name": "s",
            "configs": [{"name": "metrics", "config_operation": SET, "value": "*"}]}], "validate_only": False})[
            "responses"]
        assert r["error_code"] == 0
    for user, may_describe in (("alice", False), ("bob", True)):
        with _wire(broker, user) as wire:
            listing = wire.call(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [CLIENT_METRICS]})
            (described,) = wire.call(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
                "resource_type": CLIENT_METRICS, "resource_name": "s", "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False})["results"]
            (altered,) = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": CLIENT_METRICS, "resource_name": "s",
                "configs": [{"name": "interval.ms", "config_operation": SET, "value": "1000"}]}],
                "validate_only": False})["responses"]
            got = get(wire)
            pushed = push(wire, got["client_instance_id"], got["subscription_id"], otlp())
        if may_describe:
            assert listing["error_code"] == 0 and described["error_code"] == 0
            assert [c["resource_name"] for c in listing["config_resources"]] == ["s"]
        else:
            assert listing["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert described["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert altered["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # ALTER_CONFIGS is nobody's
        assert (got["error_code"], got["requested_metrics"], pushed) == (0, ["*"], 0)
