"""SASL re-authentication (KIP-368): with ``connections.max.reauth.ms`` a SASL session lasts that long (or
until its OAUTHBEARER token expires), the client re-authenticates on the same connection, and a client that
does not is disconnected at its next request. librdkafka re-authenticates by itself; the refusals are driven
over the wire.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
from confluent_kafka import Producer

from broker.protocol import ApiKey, ErrorCode
from tests.server.test_quotas import metric, scrape
from tests.server.wire import Wire
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" '
              'user_bob="bob-secret";')
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def sasl_broker(broker_factory, **props):
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                             "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER", "metrics.port": 0,
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                             "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS, **props})
    broker.sasl_bootstrap = f"127.0.0.1:{port}"
    return broker


def authenticate(w: Wire, mechanism: str, token: bytes) -> dict:
    assert w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})["error_code"] == 0
    return w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})


def plain(user: str) -> bytes:
    return f"\0{user}\0{user}-secret".encode()


def unsecured_token(sub: str, lifetime_s: float) -> bytes:
    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    now = time.time()
    jws = f"{part({'alg': 'none'})}.{part({'sub': sub, 'iat': now, 'exp': now + lifetime_s})}."
    return f"n,,\x01auth=Bearer {jws}\x01\x01".encode()


def metadata(w: Wire) -> dict:
    return w.call(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                       "include_cluster_authorized_operations": False,
                                       "include_topic_authorized_operations": False})


def test_librdkafka_reauthenticates_and_keeps_its_connection(broker_factory):
    broker = sasl_broker(broker_factory, **{"connections.max.reauth.ms": 1500})
    errors = []
    producer = Producer({"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
                         "linger.ms": 5})
    sent = 0
    end = time.monotonic() + 6  # four sessions of 1.5 s
    while time.monotonic() < end:
        producer.produce("reauth", b"%d" % sent, on_delivery=lambda err, _m: err and errors.append(err))
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0 and not errors
    text = scrape(broker)
    labels = {"listener": "SASL_PLAINTEXT", "mechanism": "PLAIN"}
    assert metric(text, "kafkapy_successful_reauthentication_total", **labels) >= 2
    assert metric(text, "kafkapy_successful_authentication_total", **labels) <= 2  # no new connections needed
    assert metric(text, "kafkapy_expired_connections_killed_total", listener="SASL_PLAINTEXT") in (None, 0.0)


def test_a_client_that_does_not_reauthenticate_is_disconnected_at_its_next_request(broker_factory):
    broker = sasl_broker(broker_factory, **{"connections.max.reauth.ms": 60_000,
                                            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": 1000})
    with Wire(broker.sasl_bootstrap) as w:
        answer = authenticate(w, "PLAIN", plain("alice"))
        assert answer["error_code"] == 0
        assert answer["session_lifetime_ms"] == 1000  # the listener's PLAIN setting, over the broker's
        assert metadata(w)["brokers"]
        time.sleep(1.2)
        w.send(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False})
        assert w.is_closed_by_peer()
    assert metric(scrape(broker), "kafkapy_expired_connections_killed_total", listener="SASL_PLAINTEXT") == 1
    assert "ended without re-authentication" in broker.stderr_text()


def test_reauthentication_keeps_the_principal(broker_factory):
    broker = sasl_broker(broker_factory, **{"connections.max.reauth.ms": 5000})
    with Wire(broker.sasl_bootstrap) as w:
        assert authenticate(w, "PLAIN", plain("alice"))["error_code"] == 0
        again = authenticate(w, "PLAIN", plain("alice"))  # the same principal: a new session
        assert again["error_code"] == 0 and 4000 < again["session_lifetime_ms"] <= 5000
        assert metadata(w)["brokers"]
        other = authenticate(w, "PLAIN", plain("bob"))
        assert other["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert w.is_closed_by_peer()
    with Wire(broker.sasl_bootstrap) as w:
        assert authenticate(w, "PLAIN", plain("alice"))["error_code"] == 0
        # another mechanism for the same name is refused too
        other = authenticate(w, "OAUTHBEARER", unsecured_token("alice", 60))
        assert other["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert w.is_closed_by_peer()
    with Wire(broker.sasl_bootstrap) as w:
        assert authenticate(w, "PLAIN", plain("alice"))["error_code"] == 0
        wrong = w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert wrong["error_code"] == 0
        refused = w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0not-the-password"})
        assert refused["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert w.is_closed_by_peer()
    text = scrape(broker)
    labels = {"listener": "SASL_PLAINTEXT"}
    assert metric(text, "kafkapy_failed_reauthentication_total", mechanism="PLAIN", **labels) == 2
    assert metric(text, "kafkapy_failed_reauthentication_total", mechanism="OAUTHBEARER", **labels) == 1
    assert metric(text, "kafkapy_successful_reauthentication_total", mechanism="PLAIN", **labels) == 1


def test_an_oauthbearer_session_ends_with_its_token(broker_factory):
    broker = sasl_broker(broker_factory, **{"connections.max.reauth.ms": 3_600_000})
    with Wire(broker.sasl_bootstrap) as w:
        answer = authenticate(w, "OAUTHBEARER", unsecured_token("carol", 2))
        assert answer["error_code"] == 0
        assert 0 < answer["session_lifetime_ms"] <= 2000  # the token's exp, not the hour
        renewed = authenticate(w, "OAUTHBEARER", unsecured_token("carol", 600))
        assert renewed["error_code"] == 0 and renewed["session_lifetime_ms"] > 500_000
        time.sleep(2.2)  # past the first token's expiry: the renewed session still serves
        assert metadata(w)["brokers"]


def test_without_reauthentication_a_session_lasts_and_a_second_handshake_is_refused(broker_factory):
    broker = sasl_broker(broker_factory)
    with Wire(broker.sasl_bootstrap) as w:
        answer = authenticate(w, "OAUTHBEARER", unsecured_token("dave", 1))
        assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == 0
        time.sleep(1.2)  # the token expired; without connections.max.reauth.ms the connection is not ended
        assert metadata(w)["brokers"]
        assert w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_a_token_accepted_within_the_clock_skew_gets_a_second_to_reauthenticate(broker_factory):
    """A token that expired 5 s ago, accepted within 30 s of allowed skew: its session is short, not
    0 (which would tell the client "no limit" and end the session at its first request)."""
    jaas = OAUTH_JAAS[:-1] + ' unsecuredValidatorAllowableClockSkewMs="30000";'
    broker = sasl_broker(broker_factory, **{"connections.max.reauth.ms": 60_000,
                                            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas})
    with Wire(broker.sasl_bootstrap) as w:
        answer = authenticate(w, "OAUTHBEARER", unsecured_token("erin", -5))
        assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == 1000
        assert metadata(w)["brokers"]
        renewed = authenticate(w, "OAUTHBEARER", unsecured_token("erin", 600))
        assert renewed["error_code"] == 0 and renewed["session_lifetime_ms"] == 60_000  # the broker's limit
