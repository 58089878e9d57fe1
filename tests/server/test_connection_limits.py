"""Connection limits on a real broker (KIP-402, KIP-612 as Kafka 2.7 has them): per client address with
overrides, per broker and per listener with the inter-broker listener exempt, the connection creation
rate, dynamic changes over the wire, the counts given back however a connection ends, and a real client
served while another address floods the broker.

Clients at other addresses connect from other loopback addresses (127.0.0.2, 127.0.0.3): the broker
sees each as another client.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer

from broker.protocol import ApiKey, ErrorCode
from tests.cluster.conftest import wait_until
from tests.pki import make_pki
from tests.server.test_quotas import metric, scrape
from tests.server.wire import Wire
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

LIMIT_LOG = "Rejected connection from {} on listener {}, address already has the configured maximum of {} connections."


def served(wire: Wire) -> bool:
    """True when the broker answers an ApiVersions on this connection."""
    try:
        return wire.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    except (ConnectionError, OSError):
        return False


def connect(broker_or_address, source: str | None = None, timeout: float = 10) -> Wire:
    address = broker_or_address if isinstance(broker_or_address, str) else broker_or_address.bootstrap
    return Wire(address, timeout=timeout, source=source)


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    return wait_until(predicate, what, limit=timeout, interval=0.05)


def gauge(broker, name: str, **labels) -> float | None:
    return metric(scrape(broker), name, **labels)


def alter_broker_configs(broker, configs: dict[str, str | None], resource: str = "0") -> tuple[int, str | None]:
    """IncrementalAlterConfigs on a BROKER resource (SET, or DELETE for None) over a connection from 127.0.0.9."""
    ops = [{"name": k, "config_operation": 1 if v is None else 0, "value": v} for k, v in configs.items()]
    with Wire(broker.bootstrap, source="127.0.0.9") as w:
        response = w.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 4, "resource_name": resource, "configs": ops}], "validate_only": False})
    result = response["responses"][0]
    return result["error_code"], result["error_message"]


def describe_broker(broker, names: list[str], address: str | None = None) -> dict[str, tuple[str, int]]:
    with Wire(address or broker.bootstrap, source="127.0.0.9") as w:
        response = w.call(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
            {"resource_type": 4, "resource_name": "0", "configuration_keys": names}], "include_synonyms": False})
    return {c["name"]: (c["value"], c["config_source"]) for c in response["results"][0]["configs"]}


# -- per address ---------------------------------------------------------------------------------------


def test_a_connection_over_the_per_ip_limit_is_closed_others_are_served(broker_factory):
    broker = broker_factory({"max.connections.per.ip": 2})
    first, second = connect(broker), connect(broker)
    assert served(first) and served(second)
    third = connect(broker)  # the TCP connection is made; the broker closes it at once
    assert third.is_closed_by_peer()
    other = connect(broker, source="127.0.0.2")  # another client address has its own count
    assert served(other)
    assert LIMIT_LOG.format("127.0.0.1", "PLAINTEXT", 2) in broker.stderr_text()
    text = scrape(broker)
    assert metric(text, "kafkapy_connections_refused_total", listener="PLAINTEXT",
                  limit="max.connections.per.ip") == 1
    assert metric(text, "kafkapy_listener_connections", listener="PLAINTEXT") == 3
    first.close()  # a closed connection gives its place back
    wait_for(lambda: gauge(broker, "kafkapy_listener_connections", listener="PLAINTEXT") == 2,
             what="the closed connection to be given back")
    fourth = connect(broker)
    assert served(fourth)
    for wire in (second, third, other, fourth):
        wire.close()
    wait_for(lambda: gauge(broker, "kafkapy_listener_connections", listener="PLAINTEXT") == 0,
             what="every connection to be given back")


def test_overrides_raise_or_lower_the_limit_for_named_hosts(broker_factory):
    broker = broker_factory({"max.connections.per.ip": 1,
                             "max.connections.per.ip.overrides": "127.0.0.2:3, localhost:2"})
    wires = []
    try:
        for source, allowed in (("127.0.0.1", 2), ("127.0.0.2", 3), ("127.0.0.3", 1)):
            for _ in range(allowed):
                wires.append(connect(broker, source=source))
                assert served(wires[-1]), source
            extra = connect(broker, source=source)
            wires.append(extra)
            assert extra.is_closed_by_peer(), f"{source} got more than {allowed}"
    finally:
        for wire in wires:
            wire.close()


def test_zero_per_ip_admits_only_the_overridden_addresses(broker_factory):
    broker = broker_factory({"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "127.0.0.2:1"})
    refused = connect(broker)
    assert refused.is_closed_by_peer()
    admitted = connect(broker, source="127.0.0.2")
    assert served(admitted)
    refused.close()
    admitted.close()


@pytest.mark.parametrize("props, message", [
    ({"max.connections.per.ip": 0},
     "broker: config error: max.connections.per.ip can be 0 only when max.connections.per.ip.overrides is set"),
    ({"max.connections.per.ip.overrides": "127.0.0.1"},
     "broker: config error: max.connections.per.ip.overrides: '127.0.0.1' is not host:count"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:many"},
     "broker: config error: max.connections.per.ip.overrides: expected an integer, got 'many'"),
    ({"max.connections": -1}, "broker: config error: max.connections: -1 is out of range [0, 2147483647]"),
    ({"listener.name.plaintext.max.connections": 0},
     "broker: config error: listener.name.plaintext.max.connections must be at least 1"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:3"},
     "broker: cannot start: max.connections.per.ip.overrides: cannot resolve 'no-such-host.invalid'"),
])
def test_bad_connection_settings_stop_the_start_with_one_line(tmp_path, props, message):
    import yaml

    config = {"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"), **props}
    (tmp_path / "broker.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run([sys.executable, "-m", "broker", "--config", str(tmp_path / "broker.yaml")],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.startswith("broker: ")]
    assert result.returncode == (1 if "cannot start" in message else 2), result.stderr
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert not (tmp_path / "data" / ".kafka_cleanshutdown").exists()


# -- per broker and per listener -----------------------------------------------------------------------


def test_at_max_connections_the_listener_waits_until_one_closes(broker_factory):
    broker = broker_factory({"max.connections": 2})
    first, second = connect(broker), connect(broker, source="127.0.0.2")
    assert served(first) and served(second)
    waiting = connect(broker, source="127.0.0.3", timeout=1.5)  # in the kernel's backlog: made, not accepted
    with pytest.raises(socket.timeout):
        waiting.call(ApiKey.API_VERSIONS, 0, {})
    first.close()  # its place goes to the waiting connection, which is then answered
    waiting.sock.settimeout(10)
    _cid, response = waiting.receive(ApiKey.API_VERSIONS, 0)
    assert response["error_code"] == 0
    assert gauge(broker, "kafkapy_acceptor_blocked_seconds_total", listener="PLAINTEXT") >= 1.0
    assert gauge(broker, "kafkapy_listener_max_connections", listener="PLAINTEXT") == 2
    second.close()
    waiting.close()


def _two_listener_broker(broker_factory, **props):
    internal = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{internal}",
                             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                             "inter.broker.listener.name": "INTERNAL", **props})
    broker.internal = f"127.0.0.1:{internal}"
    return broker


def test_the_inter_broker_listener_is_exempt_and_the_least_active_client_makes_room(broker_factory):
    broker = _two_listener_broker(broker_factory, **{"max.connections": 2})
    idle, busy = connect(broker), connect(broker, source="127.0.0.2")
    assert served(idle) and served(busy)
    time.sleep(0.05)
    assert served(busy)  # the more recently active one
    peer = connect(broker.internal, source="127.0.0.3")  # a broker's connection, over the broker-wide limit
    assert served(peer)
    assert idle.is_closed_by_peer()
    assert served(busy)
    assert "the least recently active: the broker is over max.connections 2" in broker.stderr_text()
    assert gauge(broker, "kafkapy_connections_refused_total", listener="PLAINTEXT", limit="max.connections") == 1
    # the client listener stays at the limit: the next client waits
    waiting = connect(broker, source="127.0.0.4", timeout=1.0)
    with pytest.raises(socket.timeout):
        waiting.call(ApiKey.API_VERSIONS, 0, {})
    for wire in (idle, busy, peer, waiting):
        wire.close()


def test_a_listener_limit_holds_on_that_listener_alone(broker_factory):
    broker = _two_listener_broker(broker_factory, **{"listener.name.plaintext.max.connections": 1})
    held = connect(broker)
    assert served(held)
    waiting = connect(broker, source="127.0.0.2", timeout=1.0)
    with pytest.raises(socket.timeout):
        waiting.call(ApiKey.API_VERSIONS, 0, {})
    others = [connect(broker.internal, source=f"127.0.0.{n}") for n in (3, 4, 5)]
    assert all(served(w) for w in others)
    assert gauge(broker, "kafkapy_listener_max_connections", listener="PLAINTEXT") == 1
    assert gauge(broker, "kafkapy_listener_max_connections", listener="INTERNAL") == 2**31 - 1
    assert describe_broker(broker, ["listener.name.plaintext.max.connections"], address=broker.internal) == {
        "listener.name.plaintext.max.connections": ("1", 4)}  # STATIC_BROKER_CONFIG
    for wire in (held, waiting, *others):
        wire.close()


def test_the_creation_rate_spaces_out_accepts(broker_factory):
    """20 connections one after another: without a rate they take a fraction of a second; at 5/s (2 windows
    of 1 s) the broker makes them wait, and the accepts over the run keep near the rate."""
    free = broker_factory({"quota.window.num": 2})
    started = time.monotonic()
    for _ in range(20):
        with connect(free) as wire:
            assert served(wire)
    unlimited_s = time.monotonic() - started
    limited = broker_factory({"max.connection.creation.rate": 5, "quota.window.num": 2})
    started = time.monotonic()
    for _ in range(20):
        with connect(limited) as wire:
            assert served(wire)
    limited_s = time.monotonic() - started
    # 20 accepts at 5/s, the first 5-10 in the first window without a wait: at least 2 s
    assert limited_s >= 2.0 and limited_s > 4 * unlimited_s, (limited_s, unlimited_s)
    text = scrape(limited)
    assert metric(text, "kafkapy_connection_accept_throttled_total", listener="PLAINTEXT") >= 5
    assert metric(text, "kafkapy_connection_accept_throttle_seconds_total", listener="PLAINTEXT") >= 1.0
    assert metric(scrape(free), "kafkapy_connection_accept_throttled_total", listener="PLAINTEXT") in (None, 0)


# -- dynamic changes ---------------------------------------------------------------------------------


def test_limits_change_on_a_running_broker(broker_factory):
    broker = broker_factory()
    held = [connect(broker) for _ in range(3)]
    assert all(served(w) for w in held)
    assert alter_broker_configs(broker, {"max.connections.per.ip": "3"}) == (ErrorCode.NONE, None)
    assert describe_broker(broker, ["max.connections.per.ip"])["max.connections.per.ip"] == ("3", 2)
    extra = connect(broker)
    assert extra.is_closed_by_peer()  # in force at once, no restart
    extra.close()
    # a lower max.connections closes the least recently active connections beyond it: of the three held
    # and the one that asks, the two held longest idle
    for wire in held:
        assert served(wire)
    assert alter_broker_configs(broker, {"max.connections": "2"}) == (ErrorCode.NONE, None)
    assert held[0].is_closed_by_peer() and held[1].is_closed_by_peer()
    assert served(held[2])
    # a listener's own limit, then the cluster-wide default
    assert alter_broker_configs(broker, {"max.connections": None,
                                         "listener.name.plaintext.max.connections": "5"}) == (ErrorCode.NONE, None)
    wait_for(lambda: gauge(broker, "kafkapy_listener_max_connections", listener="PLAINTEXT") == 5,
             what="the listener's limit")
    assert describe_broker(broker, ["listener.name.plaintext.max.connections"]) == {
        "listener.name.plaintext.max.connections": ("5", 2)}  # DYNAMIC_BROKER_CONFIG
    assert alter_broker_configs(broker, {"max.connections.per.ip": "2"}, resource="") == (ErrorCode.NONE, None)
    assert describe_broker(broker, ["max.connections.per.ip"])["max.connections.per.ip"] == ("3", 2)  # ours first
    assert alter_broker_configs(broker, {"max.connections.per.ip": None}) == (ErrorCode.NONE, None)
    assert describe_broker(broker, ["max.connections.per.ip"])["max.connections.per.ip"] == ("2", 3)
    another = connect(broker)  # 127.0.0.1 held one (held[2]): the default of 2 takes one more, not a third
    assert served(another)
    extra = connect(broker)
    assert extra.is_closed_by_peer()
    for wire in (*held, another, extra):
        wire.close()


@pytest.mark.parametrize("configs, error", [
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip can be 0 only when "
                                      "max.connections.per.ip.overrides is set"),
    ({"listener.name.plaintext.max.connections": "0"}, "must be at least 1"),
    ({"listener.name.nosuch.max.connections": "3"}, "no listener is named NOSUCH"),
    ({"max.connection.creation.rate": "-2"}, "out of range"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:2"}, "cannot resolve 'no-such-host.invalid'"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:x"}, "expected an integer"),
])
def test_bad_dynamic_limits_are_refused_and_change_nothing(broker_factory, configs, error):
    broker = broker_factory({"max.connections.per.ip": 7})
    code, message = alter_broker_configs(broker, configs)
    assert code == ErrorCode.INVALID_CONFIG and error in message, message
    assert describe_broker(broker, ["max.connections.per.ip"])["max.connections.per.ip"] == ("7", 4)
    with connect(broker) as wire:
        assert served(wire)


# -- every way a connection ends gives its place back ------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_tls_handshakes_that_fail_give_their_place_back(broker_factory, pki):
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}",
                             "ssl.keystore.location": str(pki["server"]), "max.connections.per.ip": 2})
    for _ in range(6):  # plaintext spoken to the TLS port, and a peer that closes mid-handshake
        with connect(f"127.0.0.1:{port}") as wire:
            wire.send(ApiKey.API_VERSIONS, 0, {})
            assert wire.is_closed_by_peer()
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    wait_for(lambda: gauge(broker, "kafkapy_listener_connections", listener="SSL") == 0,
             what="failed handshakes to be given back")
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    tls = []
    for _ in range(2):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        tls.append(context.wrap_socket(raw, server_hostname="127.0.0.1"))
    assert gauge(broker, "kafkapy_listener_connections", listener="SSL") == 2
    for sock in tls:
        sock.close()
    wait_for(lambda: gauge(broker, "kafkapy_listener_connections", listener="SSL") == 0,
             what="closed TLS connections to be given back")


def test_a_producer_is_served_while_another_address_floods_the_broker(broker_factory):
    broker = broker_factory({"max.connections.per.ip.overrides": "127.0.0.2:5"})
    flood = []
    for _ in range(60):
        try:
            flood.append(socket.create_connection((broker.host, broker.port), timeout=5,
                                                  source_address=("127.0.0.2", 0)))
        except OSError:
            pass
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    delivered = []
    for i in range(200):
        producer.produce("flooded", str(i).encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * 200
    wait_for(lambda: (gauge(broker, "kafkapy_connections_refused_total", listener="PLAINTEXT",
                            limit="max.connections.per.ip") or 0) >= 55, what="the flood to be refused")
    for sock in flood:
        sock.close()


# -- connection_creation_rate of an IP address (a client quota, Kafka 2.8) ---------------------------


def alter_ip_quota(broker, ip: str | None, value: float | None, key: str = "connection_creation_rate",
                   extra: list[dict] = ()) -> tuple[int, str | None]:
    op = {"key": key, "value": 0.0 if value is None else float(value), "remove": value is None}
    with Wire(broker.bootstrap, source="127.0.0.9") as w:
        response = w.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": "ip", "entity_name": ip}, *extra], "ops": [op]}], "validate_only": False})
    entry = response["entries"][0]
    return entry["error_code"], entry["error_message"]


def describe_quotas(broker, components: list[dict], strict: bool = False) -> tuple[int, list]:
    with Wire(broker.bootstrap, source="127.0.0.9") as w:
        response = w.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": components, "strict": strict})
    return response["error_code"], [
        ([(e["entity_type"], e["entity_name"]) for e in entry["entity"]],
         {v["key"]: v["value"] for v in entry["values"]}) for entry in response["entries"] or []]


def burst(broker, source: str, count: int) -> tuple[int, int]:
    """``count`` connections from ``source`` one after another: (answered, closed without an answer)."""
    answered = refused = 0
    for _ in range(count):
        with connect(broker, source=source, timeout=5) as wire:
            if served(wire):
                answered += 1
            else:
                refused += 1
    return answered, refused


def test_an_address_over_its_connection_creation_rate_is_refused(broker_factory):
    broker = broker_factory({"quota.window.num": 2, "quota.window.size.seconds": 1})
    assert alter_ip_quota(broker, "127.0.0.2", 3) == (ErrorCode.NONE, None)
    wait_for(lambda: "connection_creation_rate quota of ip 127.0.0.2: 3" in broker.stderr_text(),
             what="the quota in force")
    started = time.monotonic()
    answered, refused = burst(broker, "127.0.0.2", 12)
    elapsed = time.monotonic() - started
    # at most the rate over the time taken, with the first window's allowance (2 windows of 1 s: 3 more)
    assert answered <= 3 * elapsed + 3 and refused >= 3, (answered, refused, elapsed)
    assert burst(broker, "127.0.0.3", 12) == (12, 0)  # other addresses are not held back
    text = scrape(broker)
    assert metric(text, "kafkapy_connections_refused_total", listener="PLAINTEXT",
                  limit="connection_creation_rate") == refused
    assert metric(text, "kafkapy_listener_connections", listener="PLAINTEXT") == 0  # refused ones never counted
    assert "Throttled connection from 127.0.0.2 on listener PLAINTEXT: over its connection_creation_rate" in \
        broker.stderr_text()
    # a refused socket is held for the throttle time, not closed at once (the client does not come straight back)
    wire = connect(broker, source="127.0.0.2", timeout=5)
    started = time.monotonic()
    while served(wire):  # until one is refused
        wire.close()
        wire = connect(broker, source="127.0.0.2", timeout=5)
        started = time.monotonic()
    assert time.monotonic() - started >= 0.05
    wire.close()
    # the default entity holds every address without its own; removing the quota lifts it
    assert alter_ip_quota(broker, None, 2) == (ErrorCode.NONE, None)
    assert alter_ip_quota(broker, "127.0.0.2", None) == (ErrorCode.NONE, None)
    wait_for(lambda: "connection_creation_rate quota of ip 127.0.0.2: removed" in broker.stderr_text(),
             what="the quota removed")
    time.sleep(2.1)  # the windows of the bursts above pass
    assert burst(broker, "127.0.0.3", 10)[1] >= 3
    assert describe_quotas(broker, [{"entity_type": "ip", "match_type": 2, "match": None}]) == (
        0, [([("ip", None)], {"connection_creation_rate": 2.0})])
    broker.restart()  # stored: in force again after a restart
    assert burst(broker, "127.0.0.4", 10)[1] >= 3


@pytest.mark.parametrize("ip, key, value, extra, message", [
    ("no-such-host", "connection_creation_rate", 3, [], "no-such-host is not a valid IP address"),
    ("127.0.0.2", "producer_byte_rate", 1000, [], "producer_byte_rate is not valid for an IP entity"),
    ("127.0.0.2", "connection_creation_rate", 2.5, [], "must be an Int value"),
    ("127.0.0.2", "connection_creation_rate", 0, [], "must be a positive number"),
    ("127.0.0.2", "connection_creation_rate", 3, [{"entity_type": "user", "entity_name": "alice"}],
     "IP entity should not be combined with User or ClientId"),
])
def test_bad_ip_quotas_are_refused(broker, ip, key, value, extra, message):
    code, text = alter_ip_quota(broker, ip, value, key=key, extra=extra)
    assert code == ErrorCode.INVALID_REQUEST and message in text, text
    assert describe_quotas(broker, []) == (0, [])


def test_ip_quotas_are_described_apart_from_user_and_client_quotas(broker):
    assert alter_ip_quota(broker, "::ffff:10.1.2.3", 7) == (ErrorCode.NONE, None)  # stored as 10.1.2.3
    with Wire(broker.bootstrap) as w:
        w.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": "user", "entity_name": "alice"}],
            "ops": [{"key": "producer_byte_rate", "value": 1000.0, "remove": False}]}], "validate_only": False})
        refused = w.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": "user", "entity_name": "bob"}],
            "ops": [{"key": "connection_creation_rate", "value": 5.0, "remove": False}]}], "validate_only": False})
    assert "connection_creation_rate is not valid for a user or client id entity" in \
        refused["entries"][0]["error_message"]
    assert describe_quotas(broker, [{"entity_type": "ip", "match_type": 0, "match": "10.1.2.3"}]) == (
        0, [([("ip", "10.1.2.3")], {"connection_creation_rate": 7.0})])
    assert describe_quotas(broker, [{"entity_type": "user", "match_type": 2, "match": None}]) == (
        0, [([("user", "alice")], {"producer_byte_rate": 1000.0})])
    every = describe_quotas(broker, [])[1]
    assert sorted(e for e, _v in every) == [[("ip", "10.1.2.3")], [("user", "alice")]]
    code, _ = describe_quotas(broker, [{"entity_type": "ip", "match_type": 2, "match": None},
                                       {"entity_type": "user", "match_type": 2, "match": None}])
    assert code == ErrorCode.INVALID_REQUEST
