"""Client quotas on a real broker: producer and consumer byte rates with librdkafka, request time, controller
mutations (KIP-599), throttling as clients see it (``throttle_time_ms``, a muted connection, an older client's
delayed answer), the metrics, Kafka's order of precedence, and quotas kept over a restart.

Quotas are set with AlterClientQuotas over the wire (our admin client's and kafkactl's tests use their own
paths; ``tests/cluster/test_quotas_cluster.py`` writes them into ZooKeeper as Kafka's tools do). The brokers
here measure over 3 windows of 1 s (``quota.window.num=3``) instead of Kafka's 11, so a test sees a rate
settle within seconds; the throttle arithmetic is the same.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.protocol import ApiKey, ErrorCode
from broker.server.quotas import DEFAULT, ClientQuota
from tests.server.wire import Wire, make_batch

pytestmark = pytest.mark.clients

FAST_WINDOWS = {"quota.window.num": 3, "quota.window.size.seconds": 1, "metrics.port": 0}


def set_quota(broker, entity: list[tuple[str, str | None]], **values) -> dict:
    """AlterClientQuotas for one entity: ``values`` key -> number (None removes the key)."""
    ops = [{"key": k, "value": float(v) if v is not None else 0.0, "remove": v is None} for k, v in values.items()]
    with Wire(broker.bootstrap) as w:
        response = w.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "ops": ops}],
            "validate_only": False})
    return response["entries"][0]


def describe(broker, components=(), strict=False) -> dict:
    with Wire(broker.bootstrap) as w:
        response = w.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
            {"entity_type": t, "match_type": m, "match": n} for t, m, n in components], "strict": strict})
    assert response["error_code"] == 0, response
    return {tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {v["key"]: v["value"] for v in entry["values"]} for entry in response["entries"]}


def scrape(broker) -> str:
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        return response.read().decode()


def metric(text: str, name: str, **labels) -> float | None:
    """The sample of ``name`` with exactly ``labels`` in a scrape, or None."""
    for line in text.splitlines():
        if line.startswith(name + "{"):
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            if found == labels:
                return float(line.rsplit(" ", 1)[1])
    return None


def produce_all(conf: dict, topic: str, values: list[bytes]) -> tuple[float, list[float]]:
    """Produce every value with librdkafka; (seconds taken, throttle times the client was told)."""
    throttles: list[float] = []
    producer = Producer({**conf, "linger.ms": 5, "batch.size": 16384, "acks": "all",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    errors = []
    start = time.monotonic()
    for value in values:
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    took = time.monotonic() - start
    assert not errors, errors
    return took, throttles


def test_producer_byte_rate_throttles_that_client_id_only(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    assert set_quota(broker, [("client-id", "slow")], producer_byte_rate=100_000)["error_code"] == 0
    values = [b"%06d" % i + b"x" * 994 for i in range(600)]  # 600 KB
    fast_took, fast_throttles = produce_all({"bootstrap.servers": broker.bootstrap, "client.id": "fast"},
                                            "fast-topic", values)
    slow_took, slow_throttles = produce_all({"bootstrap.servers": broker.bootstrap, "client.id": "slow"},
                                            "slow-topic", values)
    assert not fast_throttles
    assert slow_throttles and max(slow_throttles) > 0
    # 600 KB at 100 KB/s, less what the first windows let through at once: several seconds, not a burst
    assert slow_took >= 2.5, (slow_took, fast_took)
    assert slow_took > 3 * fast_took
    text = scrape(broker)
    assert metric(text, "kafkapy_client_quota_limit", quota="Produce", user="", client_id="slow") == 100_000
    assert metric(text, "kafkapy_client_quota_throttle_seconds_total", quota="Produce", user="",
                  client_id="slow") > 0
    assert metric(text, "kafkapy_client_quota_throttled_total", quota="Produce", user="", client_id="slow") >= 1
    # the unthrottled client has a rate (every client has one once any quota exists) but no limit
    assert metric(text, "kafkapy_client_quota_limit", quota="Produce", user="", client_id="fast") is None


def test_consumer_byte_rate_throttles_and_every_record_arrives_once(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    values = [b"%06d" % i + b"y" * 994 for i in range(600)]
    produce_all({"bootstrap.servers": broker.bootstrap, "client.id": "loader"}, "data", values)
    assert set_quota(broker, [("client-id", "reader")], consumer_byte_rate=100_000)["error_code"] == 0
    throttles: list[float] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "reader", "group.id": "g",
                         "enable.auto.commit": False,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    consumer.assign([TopicPartition("data", 0, 0)])
    got = []
    start = time.monotonic()
    try:
        while len(got) < len(values) and time.monotonic() - start < 60:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        took = time.monotonic() - start
    finally:
        consumer.close()
    assert got == values  # a throttled (emptied) fetch loses nothing and repeats nothing
    assert throttles and max(throttles) > 0
    assert took >= 2.5, took
    text = scrape(broker)
    assert metric(text, "kafkapy_client_quota_throttle_seconds_total", quota="Fetch", user="",
                  client_id="reader") > 0


def _metadata(w: Wire, version: int = 9) -> dict:
    return w.call(ApiKey.METADATA, version, {"topics": [], "allow_auto_topic_creation": False,
                                             "include_cluster_authorized_operations": False,
                                             "include_topic_authorized_operations": False})


def test_request_percentage_mutes_a_client_that_does_not_back_off(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    assert set_quota(broker, [("client-id", "wire")], request_percentage=0.01)["error_code"] == 0
    with Wire(broker.bootstrap) as w:
        for _ in range(2000):
            throttle = _metadata(w)["throttle_time_ms"]
            if throttle:
                break
        assert throttle > 0
        assert throttle <= 1000  # request-time throttles stop at one window, as Kafka's
        # A client that ignores the throttle: its next request is not read until the throttle ends
        sent = time.monotonic()
        _metadata(w)
        assert time.monotonic() - sent >= throttle / 1000 * 0.8
        # ApiVersions is never throttled for request time
        for _ in range(20):
            assert w.call(ApiKey.API_VERSIONS, 2, {})["throttle_time_ms"] == 0
    text = scrape(broker)
    assert metric(text, "kafkapy_client_quota_throttled_total", quota="Request", user="", client_id="wire") >= 1


def test_an_older_client_gets_its_answer_when_the_throttle_ends(broker_factory):
    """Produce v5 predates KIP-219: its client does not back off by itself, so the broker holds the answer."""
    broker = broker_factory(FAST_WINDOWS)
    assert set_quota(broker, [("client-id", "wire")], producer_byte_rate=50_000)["error_code"] == 0
    batch = make_batch([b"z" * 1000] * 100)  # ~100 KB: well over the quota at once
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": "old", "partition_data": [{"index": 0, "records": batch}]}]}
    with Wire(broker.bootstrap) as w:
        w.call(ApiKey.METADATA, 1, {"topics": [{"name": "old"}]})  # auto-create
        time.sleep(0.5)
        for version in (5, 8):
            for _ in range(10):
                sent = time.monotonic()
                response = w.call(ApiKey.PRODUCE, version, body)
                waited = time.monotonic() - sent
                if response["throttle_time_ms"] >= 300:
                    break
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
            throttle = response["throttle_time_ms"] / 1000
            assert throttle > 0.2
            if version == 5:
                assert waited >= throttle * 0.9, (waited, throttle)  # held until the throttle ended
            else:
                assert waited < throttle * 0.5, (waited, throttle)  # answered at once, then muted
                time.sleep(throttle)


def _create(w: Wire, version: int, names: list[str], partitions: int = 2, validate_only: bool = False) -> dict:
    return w.call(ApiKey.CREATE_TOPICS, version, {"topics": [
        {"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        for n in names], "timeout_ms": 10000, "validate_only": validate_only})


def test_controller_mutation_rate_refuses_topics_past_the_bucket(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    # 1 partition/s, a burst of 1 * 3 windows * 1 s = 3 partitions
    assert set_quota(broker, [("client-id", "wire")], controller_mutation_rate=1)["error_code"] == 0
    with Wire(broker.bootstrap) as w:
        checked = _create(w, 6, ["v1", "v2", "v3"], validate_only=True)  # validation takes no tokens
        assert [t["error_code"] for t in checked["topics"]] == [0, 0, 0] and checked["throttle_time_ms"] == 0
        response = _create(w, 6, ["a", "b", "c"])
        codes = {t["name"]: t["error_code"] for t in response["topics"]}
        # a: 3 -> 1 token, b: 1 -> -1, c: refused while the bucket is below zero
        assert codes == {"a": 0, "b": 0, "c": ErrorCode.THROTTLING_QUOTA_EXCEEDED}
        assert response["throttle_time_ms"] > 0
        message = next(t for t in response["topics"] if t["name"] == "c")["error_message"]
        assert "throttling quota" in message.lower()
        time.sleep(response["throttle_time_ms"] / 1000 + 0.2)
        # CreateTopics v5 (before KIP-599) is never refused, only throttled
        response = _create(w, 5, ["d", "e", "f"])
        assert [t["error_code"] for t in response["topics"]] == [0, 0, 0]
        assert response["throttle_time_ms"] > 0
        time.sleep(response["throttle_time_ms"] / 1000 + 0.2)
        deleted = w.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["a", "b", "d", "e"], "timeout_ms": 10000})
        # a (2 partitions) takes the refilled bucket below zero; the rest wait for it
        assert [r["error_code"] for r in deleted["responses"]] == [0] + [ErrorCode.THROTTLING_QUOTA_EXCEEDED] * 3
        assert deleted["throttle_time_ms"] > 0


def test_quotas_survive_a_restart_and_describe_as_stored(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    assert set_quota(broker, [("user", "alice")], producer_byte_rate=1024, request_percentage=12.5)[
        "error_code"] == 0
    assert set_quota(broker, [("user", None), ("client-id", "app")], consumer_byte_rate=2048)["error_code"] == 0
    assert set_quota(broker, [("client-id", None)], producer_byte_rate=4096)["error_code"] == 0
    everything = {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("user", None), ("client-id", "app")): {"consumer_byte_rate": 2048.0},
        (("client-id", None),): {"producer_byte_rate": 4096.0},
    }
    assert describe(broker) == everything
    broker.restart()
    assert describe(broker) == everything
    assert describe(broker, [("user", 0, "alice")], strict=True) == {
        (("user", "alice"),): everything[(("user", "alice"),)]}
    assert describe(broker, [("user", 1, None)]) == {
        (("user", None), ("client-id", "app")): {"consumer_byte_rate": 2048.0}}
    assert describe(broker, [("client-id", 2, None)], strict=True) == {
        (("client-id", None),): {"producer_byte_rate": 4096.0}}
    # the default client-id quota applies after the restart
    with Wire(broker.bootstrap) as w:
        w.call(ApiKey.METADATA, 1, {"topics": [{"name": "r"}]})
        time.sleep(0.5)
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                "topic_data": [{"name": "r", "partition_data": [{"index": 0, "records": make_batch([b"q" * 20000])}]}]}
        assert w.call(ApiKey.PRODUCE, 8, body)["throttle_time_ms"] > 0
    # removing the last key leaves nothing to describe for that entity
    assert set_quota(broker, [("client-id", None)], producer_byte_rate=None)["error_code"] == 0
    assert (("client-id", None),) not in describe(broker)


def test_bad_alterations_are_refused_and_change_nothing(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    refused = [
        ([("client-id", "x")], {"producer_byte_rate": 10.5}, "Long"),
        ([("client-id", "x")], {"consumer_byte_rate": -1}, "positive"),
        ([("client-id", "x")], {"no_such_quota": 1}, "Invalid configuration key"),
        ([("ip", "1.2.3.4")], {"producer_byte_rate": 1}, "not valid for an IP entity"),
        ([("host", "1.2.3.4")], {"producer_byte_rate": 1}, "entity type"),
        ([("user", "a"), ("user", "b")], {"producer_byte_rate": 1}, "Duplicate"),
        ([], {"producer_byte_rate": 1}, "empty"),
    ]
    for entity, values, message in refused:
        result = set_quota(broker, entity, **values)
        assert result["error_code"] == ErrorCode.INVALID_REQUEST, (entity, values, result)
        assert message in result["error_message"]
    assert describe(broker) == {}
    with Wire(broker.bootstrap) as w:
        response = w.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
            {"entity_type": "host", "match_type": 2, "match": None}], "strict": False})
        assert response["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        response = w.call(ApiKey.ALTER_CLIENT_QUOTAS, 0, {"entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": "x"}],
            "ops": [{"key": "producer_byte_rate", "value": 5.0, "remove": False}]}], "validate_only": True})
        assert response["entries"][0]["error_code"] == 0
    assert describe(broker) == {}  # validate_only wrote nothing


def test_order_of_precedence_is_kafkas():
    """Which stored quota a (user, client id) gets, and whose rate it shares (Kafka's DefaultQuotaCallback)."""
    quota = ClientQuota("producer_byte_rate", 11, 1)
    quota.set((None, DEFAULT), 8)
    assert (quota.tags("u", "c"), quota.limit(quota.tags("u", "c"))) == (("", "c"), 8)
    quota.set((None, "c"), 7)
    assert quota.limit(quota.tags("u", "c")) == 7
    quota.set((DEFAULT, None), 6)  # a user level: it comes before every client-id level
    assert (quota.tags("u", "c"), quota.limit(quota.tags("u", "c"))) == (("u", ""), 6)
    quota.set((DEFAULT, DEFAULT), 5)
    assert (quota.tags("u", "c"), quota.limit(quota.tags("u", "c"))) == (("u", "c"), 5)
    quota.set((DEFAULT, "c"), 4)
    assert quota.limit(quota.tags("u", "c")) == 4
    quota.set(("u", None), 3)
    assert (quota.tags("u", "c"), quota.limit(quota.tags("u", "c"))) == (("u", ""), 3)
    assert quota.tags("u", "other") == ("u", "")  # every client id of u shares u's rate
    quota.set(("u", DEFAULT), 2)
    assert (quota.tags("u", "c"), quota.limit(quota.tags("u", "c"))) == (("u", "c"), 2)
    quota.set(("u", "c"), 1)
    assert quota.limit(quota.tags("u", "c")) == 1
    assert quota.limit(quota.tags("v", "c")) == 4  # another user: <default> user with client id c
    quota.set(("u", "c"), None)
    assert quota.limit(quota.tags("u", "c")) == 2


def test_no_quota_no_throttle_and_no_rates(broker_factory):
    """Without any quota nothing is measured: no rates in the metrics, throttle_time_ms always 0."""
    broker = broker_factory(FAST_WINDOWS)
    took, throttles = produce_all({"bootstrap.servers": broker.bootstrap, "client.id": "free"}, "free",
                                  [b"f" * 1000] * 300)
    assert not throttles
    assert not re.search(r"^kafkapy_client_quota_rate\{", scrape(broker), re.M)


def test_a_user_quota_is_shared_by_every_client_id_of_that_user(broker_factory):
    """SASL principals: alice's quota holds alice whatever client id she uses; bob has none."""
    from tests.security import acl_broker

    broker = acl_broker(broker_factory, **FAST_WINDOWS, **{"authorizer.class.name": ""})
    assert set_quota(broker, [("user", "alice")], producer_byte_rate=100_000)["error_code"] == 0

    def conf(user: str, client_id: str) -> dict:
        return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
                "client.id": client_id}

    values = [b"u" * 1000] * 300
    _, first = produce_all(conf("alice", "one"), "shared", values)
    second_took, second = produce_all(conf("alice", "two"), "shared", values)
    bob_took, bob = produce_all(conf("bob", "two"), "shared", values)
    assert second and max(second) > 0  # a new client id of alice starts where her rate is
    assert not bob
    text = scrape(broker)
    assert metric(text, "kafkapy_client_quota_limit", quota="Produce", user="alice", client_id="") == 100_000
    assert metric(text, "kafkapy_client_quota_throttled_total", quota="Produce", user="alice", client_id="") >= 1
    assert metric(text, "kafkapy_client_quota_rate", quota="Produce", user="bob", client_id="") > 0


def test_produces_pipelined_behind_a_throttle_wait_for_it(broker_factory):
    """A client that pipelines without reading its answers gets no more through than the quota: what it
    sent behind the request that crossed the quota starts when the throttle ends (Kafka would not have
    read it yet)."""
    broker = broker_factory(FAST_WINDOWS)
    assert set_quota(broker, [("client-id", "wire")], producer_byte_rate=200_000)["error_code"] == 0
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "piped", "partition_data": [{"index": 0, "records": make_batch([b"p" * 1000] * 100)}]}]}
    with Wire(broker.bootstrap) as w:
        w.call(ApiKey.METADATA, 1, {"topics": [{"name": "piped"}]})  # auto-create
        time.sleep(0.5)
        sent = time.monotonic()
        for _ in range(6):  # 600 KB at once; the first windows (2 s at 200 KB/s) let 400 KB through
            w.send(ApiKey.PRODUCE, 8, body)
        arrived = []
        for _ in range(6):
            _, response = w.receive(ApiKey.PRODUCE, 8)
            arrived.append((time.monotonic() - sent, response["throttle_time_ms"]))
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert arrived[0][0] < 0.5 and arrived[0][1] == 0
    # the first answer with a throttle that matters: what was sent behind it started only when it ended
    at, throttle = next((at, t) for at, t in arrived[:-1] if t >= 300)
    assert arrived[-1][0] >= at + throttle / 1000 * 0.9, arrived


def test_empty_and_reserved_entity_names_are_refused(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    for entity, message in (([("client-id", "")], "Empty client-id"), ([("user", "")], "Empty user"),
                            ([("user", "carl"), ("client-id", "")], "Empty client-id"),
                            ([("user", "<default>")], "reserved")):
        result = set_quota(broker, entity, producer_byte_rate=1024)
        assert result["error_code"] == ErrorCode.INVALID_REQUEST and message in result["error_message"], result
    assert set_quota(broker, [("user", None)], producer_byte_rate=1024)["error_code"] == 0
    assert describe(broker, [("user", 0, "<default>")]) == {}  # an exact name never matches the default entity
    assert describe(broker, [("user", 1, None)]) == {(("user", None),): {"producer_byte_rate": 1024.0}}
