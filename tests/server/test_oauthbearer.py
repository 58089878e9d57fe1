"""SASL/OAUTHBEARER: signed tokens checked against a JWKS endpoint (Kafka 3.1's validator) and unsecured
tokens (Kafka 2.7's default), with librdkafka's OIDC client-credentials login and raw SaslHandshake /
SaslAuthenticate exchanges, against a real broker process and a real identity provider over HTTP.

The identity provider (:class:`tests.oauth_idp.IdentityProvider`) runs in this process on 127.0.0.1:
``/jwks`` publishes its public keys, ``/token`` hands out RS256/ES256 JWTs for the client-credentials grant
(HTTP basic auth), and each test switches what it does: which key signs, the kid, the claims, whether
``/jwks`` answers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from broker.protocol import ApiKey, ErrorCode
from tests.oauth_idp import AUDIENCE, ISSUER, IdentityProvider, b64url, unsigned_token
from tests.security import AUTHORIZER
from tests.zookeeper import free_port

from .wire import Wire, make_batch

pytestmark = pytest.mark.clients

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
JWKS_HANDLER_31 = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
HANDLER_PROP = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
JAAS_PROP = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
INVALID_TOKEN = b'{"status":"invalid_token"}'


@pytest.fixture
def idp():
    provider = IdentityProvider().start()
    yield provider
    provider.stop()


# -- brokers and clients -------------------------------------------------------------------------

def jwks_broker(broker_factory, idp_or_url, **props):
    """PLAINTEXT (first, ``bootstrap``) and SASL_PLAINTEXT with OAUTHBEARER checked against the JWKS
    (``sasl_bootstrap``), audience and issuer expected."""
    url = idp_or_url if isinstance(idp_or_url, str) else idp_or_url.jwks_url
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                             "sasl.enabled.mechanisms": "OAUTHBEARER",
                             HANDLER_PROP: JWKS_HANDLER,
                             "sasl.oauthbearer.jwks.endpoint.url": url,
                             "sasl.oauthbearer.expected.audience": AUDIENCE,
                             "sasl.oauthbearer.expected.issuer": ISSUER,
                             **props})
    broker.sasl_bootstrap = f"127.0.0.1:{port}"
    return broker


def oidc_conf(broker, idp, client_id: str, secret: str, **extra) -> dict:
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client_id, "sasl.oauthbearer.client.secret": secret,
            "sasl.oauthbearer.token.endpoint.url": idp.token_url, "log_level": 0, **extra}


def unsecured_conf(broker, config: str, **extra) -> dict:
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": config, "log_level": 0, **extra}


def _metric(broker, prefix: str) -> float:
    text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


FAILED = 'kafkapy_failed_authentication_total{listener="SASL_PLAINTEXT",mechanism="OAUTHBEARER"}'
SUCCEEDED = 'kafkapy_successful_authentication_total{listener="SASL_PLAINTEXT",mechanism="OAUTHBEARER"}'


def client_message(token: str, authzid: str = "", extensions: dict | None = None) -> bytes:
    """RFC 7628's client initial response, as Kafka's and librdkafka's clients send it."""
    kv = "".join(f"{k}={v}\x01" for k, v in (extensions or {}).items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{kv}\x01".encode()


def authenticate(address: str, message: bytes) -> tuple[Wire, dict]:
    """SaslHandshake v1 OAUTHBEARER then one SaslAuthenticate v1: the open connection and the answer."""
    w = Wire(address, timeout=15)
    handshake = w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})
    assert handshake == {"error_code": 0, "mechanisms": ["OAUTHBEARER"]}, handshake
    return w, w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": message})


def accepted(address: str, token: str) -> bool:
    """Whether the broker authenticates ``token`` (checked to the end: a Metadata request is served)."""
    w, body = authenticate(address, client_message(token))
    with w:
        if body["error_code"] == 0 and body["auth_bytes"] == b"":
            assert w.call(ApiKey.METADATA, 1, {"topics": []})["brokers"]
            return True
        assert_refused_exchange(w, body)
        return False


def assert_refused_exchange(w: Wire, body: dict) -> None:
    """RFC 7628's failure: the error challenge, then ``%x01`` from the client, then
    SASL_AUTHENTICATION_FAILED and the connection closed."""
    assert (body["error_code"], body["auth_bytes"]) == (0, INVALID_TOKEN), body
    final = w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x01"})
    assert final["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED, final
    assert final["error_message"] == INVALID_TOKEN.decode(), final
    assert w.is_closed_by_peer()


def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(interval)


def _admin(broker) -> AdminClient:
    """The PLAINTEXT listener's client: User:ANONYMOUS, the super user of the ACL brokers here."""
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})


def _allow(admin: AdminClient, principal: str, topic: str, group: str) -> None:
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW)
                for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
    bindings.append(AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(timeout=15)


def _create_topic(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15)[topic].result(timeout=20)


def _produce(conf: dict, topic: str, values: list[bytes], timeout: float = 20) -> list:
    """Produce ``values``; the delivery errors (None for each delivered record)."""
    outcomes: list = []
    producer = Producer({**conf, "acks": "all", "message.timeout.ms": int(timeout * 1000)})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(timeout + 10)
    return outcomes


def _consume(conf: dict, topic: str, group: str, count: int, timeout: float = 30) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def _high_watermark(broker, topic: str) -> int:
    """Partition 0's end offset, asked on the PLAINTEXT listener (ListOffsets; no group involved)."""
    partition, admin = TopicPartition(topic, 0), _admin(broker)
    return admin.list_offsets({partition: OffsetSpec.latest()})[partition].result(timeout=10).offset


def test_oidc_clients_produce_and_consume_as_user_sub(broker_factory, idp):
    """librdkafka's OIDC login (client credentials) against the broker's JWKS validator: RS256 and ES256
    tokens accepted, and the principal is User:<sub>, as the ACL authorizer shows."""
    idp.add_key("ec-1", "ES256")
    idp.published = ["rsa-1", "ec-1"]
    idp.add_client("orders-app", "orders-secret", sub="svc-orders")
    idp.add_client("reports-app", "reports-secret", key="ec-1", sub="svc-reports")
    broker = jwks_broker(broker_factory, idp, **{"authorizer.class.name": AUTHORIZER,
                                                  "super.users": "User:ANONYMOUS"})
    admin = _admin(broker)
    _create_topic(admin, "orders")
    _allow(admin, "User:svc-orders", "orders", "orders-group")
    conf = oidc_conf(broker, idp, "orders-app", "orders-secret", **{"sasl.oauthbearer.scope": "kafka.produce"})
    values = [b"order-%d" % i for i in range(50)]
    assert _produce(conf, "orders", values) == [None] * 50
    assert _consume(conf, "orders", "orders-group", 50) == values
    # librdkafka fetched its token with the client-credentials grant, basic auth and the scope asked for
    asked = [r for r in idp.token_requests if r.client_id == "orders-app"]
    assert asked and all(r.form["scope"] == ["kafka.produce"] and r.status == 200 for r in asked), idp.token_requests
    assert _metric(broker, SUCCEEDED) >= 2 and _metric(broker, FAILED) == 0
    # an ES256 token for another subject: its own topic is open to it, the orders topic is not
    reports = oidc_conf(broker, idp, "reports-app", "reports-secret")
    _create_topic(admin, "reports")
    _allow(admin, "User:svc-reports", "reports", "reports-group")
    assert _produce(reports, "reports", [b"r1", b"r2"]) == [None, None]
    assert _consume(reports, "reports", "reports-group", 2) == [b"r1", b"r2"]
    errors = _produce(reports, "orders", [b"intruder"], timeout=10)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    assert _high_watermark(broker, "orders") == 50
    assert _metric(broker, FAILED) == 0  # authenticated, only not authorized
    # ... and over the wire: the same token, the same principal, a Produce refused by the authorizer
    token = idp.token("ec-1", sub="svc-reports")
    w, body = authenticate(broker.sasl_bootstrap, client_message(token))
    with w:
        assert (body["error_code"], body["auth_bytes"]) == (0, b""), body
        produced = w.call(ApiKey.PRODUCE, 3, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                              "topic_data": [{"name": "orders", "partition_data": [
                                                  {"index": 0, "records": make_batch([b"x"])}]}]})
        code = produced["responses"][0]["partition_responses"][0]["error_code"]
        assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, produced
    assert _high_watermark(broker, "orders") == 50


def _auth_error(conf: dict, within: float = 15.0) -> KafkaError:
    """The first error librdkafka reports for ``conf`` (it must come, and promptly)."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    started = time.monotonic()
    while not errors and time.monotonic() - started < within:
        admin.poll(0.2)
    assert errors, f"no error reported within {within} s"
    return errors[0]


def test_librdkafka_tokens_the_broker_must_refuse(broker_factory, idp):
    """Tokens librdkafka's OIDC login takes from the provider without a second look, each refused by the
    broker: counted, logged with the reason, and no record gets in."""
    idp.add_key("rogue-1", "RS256")  # never published
    cases = {  # client id: (its key, its claims, what the broker logs)
        "wrong-audience": (None, {"aud": "another-service"}, "InvalidAudienceError: Audience doesn't match"),
        "wrong-issuer": (None, {"iss": "https://evil.test/"}, "InvalidIssuerError: Invalid issuer"),
        "unpublished-key": ("rogue-1", {}, "no key 'rogue-1' in the JWKS"),
        "forged-with-known-kid": ("rogue-1", {"kid": "rsa-1"}, "InvalidSignatureError: Signature verification failed"),
        "unsigned": ("none", {}, "an unsigned token (alg none) is not accepted"),
    }
    for client_id, (key, claims, _) in cases.items():
        idp.add_client(client_id, "pw", key, sub=f"svc-{client_id}", **claims)
    broker = jwks_broker(broker_factory, idp)
    _create_topic(_admin(broker), "guarded")
    for client_id, (_, _, reason) in cases.items():
        before = _metric(broker, FAILED)
        conf = oidc_conf(broker, idp, client_id, "pw")
        error = _auth_error(conf)
        assert error.code() == KafkaError._AUTHENTICATION, (client_id, error)
        assert "invalid_token" in error.str(), (client_id, error.str())
        errors = _produce(conf, "guarded", [b"must-not-land"], timeout=1)
        assert len(errors) == 1 and errors[0] is not None, (client_id, errors)
        assert _metric(broker, FAILED) > before, client_id
        assert f"SASL authentication failed (OAUTHBEARER): {reason}\n" in broker.stderr_text(), \
            (client_id, broker.stderr_tail(10))
    assert _high_watermark(broker, "guarded") == 0
    assert _metric(broker, SUCCEEDED) == 0
    # a wrong client secret never reaches the broker: the provider refuses it, librdkafka reports it
    error = _auth_error(oidc_conf(broker, idp, "wrong-audience", "not-the-secret"))
    assert error.code() == KafkaError._AUTHENTICATION, error


def _hs256_with(token_claims: dict, secret: bytes, kid: str) -> str:
    """The classic algorithm confusion: HS256 'signed' with an RSA public key's PEM as the HMAC secret."""
    signing_input = (f"{b64url(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': kid}).encode())}."
                     f"{b64url(json.dumps(token_claims).encode())}")
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(mac)}"


def _tampered(token: str, **claims) -> str:
    """``token`` with claims changed after signing (the signature left as it was)."""
    header, payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return f"{header}.{b64url(json.dumps({**body, **claims}).encode())}.{signature}"


def _produce_frame(topic: str) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": make_batch([b"x"])}]}]}


def test_jwks_validator_over_the_wire(broker_factory, idp):
    """Every check of the JWKS validator, one raw exchange each: accepted tokens answer the empty token;
    refused ones RFC 7628's error challenge, then SASL_AUTHENTICATION_FAILED after %x01, one failed
    authentication each, the reason in the broker's log."""
    idp.add_key("ec-1", "ES256")
    idp.add_key("rogue-1", "RS256")
    idp.published = ["rsa-1", "ec-1"]
    broker = jwks_broker(broker_factory, idp)
    address = broker.sasl_bootstrap
    wait_until(lambda: accepted(address, idp.token(sub="warm-up")), 10, "the broker read the JWKS")
    now = int(time.time())
    good = idp.token(sub="alice")
    valid = {
        "RS256": good,
        "ES256": idp.token("ec-1", sub="alice"),
        "aud a list naming the expected audience": idp.token(sub="alice", aud=["other", AUDIENCE]),
        "expired 10 s ago, within the 30 s skew": idp.token(sub="alice", iat=now - 300, exp=now - 10),
        "scope as a list": idp.token(sub="alice", scope=["kafka.read", "kafka.write"]),
    }
    for name, token in valid.items():
        before = _metric(broker, SUCCEEDED)
        assert accepted(address, token), name
        assert _metric(broker, SUCCEEDED) == before + 1, name
    # an authzid naming the token's principal, and SASL extensions (taken, ignored)
    for message in (client_message(good, authzid="alice"), client_message(good, extensions={"traceId": "t-1"})):
        w, body = authenticate(address, message)
        with w:
            assert (body["error_code"], body["auth_bytes"]) == (0, b""), body
            assert w.call(ApiKey.METADATA, 1, {"topics": []})["brokers"]

    rsa_pem = idp.keys["rsa-1"].public_pem()
    claims = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300, "sub": "alice"}
    refused = {  # name: (token, the reason the broker logs)
        "wrong audience": (idp.token(sub="alice", aud="another-service"),
                           "InvalidAudienceError: Audience doesn't match"),
        "no audience": (idp.token(sub="alice", omit=("aud",)), 'Token is missing the "aud" claim'),
        "wrong issuer": (idp.token(sub="alice", iss="https://evil.test/"), "InvalidIssuerError: Invalid issuer"),
        "expired 60 s ago": (idp.token(sub="alice", iat=now - 600, exp=now - 60),
                             "ExpiredSignatureError: Signature has expired"),
        "no exp": (idp.token(sub="alice", omit=("exp",)), 'Token is missing the "exp" claim'),
        "no iat": (idp.token(sub="alice", omit=("iat",)), 'Token is missing the "iat" claim'),
        "no sub": (idp.token(omit=("sub",)), "no principal in claim 'sub'"),
        "blank sub": (idp.token(sub="  "), "no principal in claim 'sub'"),
        "sub not a string": (idp.token(sub=42), "InvalidSubjectError: Subject must be a string"),
        "a key not in the JWKS": (idp.token("rogue-1", sub="alice"), "no key 'rogue-1' in the JWKS"),
        "signed by another key than its kid's": (idp.token("rogue-1", kid="rsa-1", sub="alice"),
                                                 "InvalidSignatureError: Signature verification failed"),
        "claims changed after signing": (_tampered(good, sub="admin"),
                                         "InvalidSignatureError: Signature verification failed"),
        "alg none naming a published kid": (unsigned_token(kid="rsa-1", **claims),
                                            "an unsigned token (alg none) is not accepted"),
        "alg none": (unsigned_token(**claims), "an unsigned token (alg none) is not accepted"),
        "HS256 keyed with the RSA public key": (_hs256_with(claims, rsa_pem, "rsa-1"),
                                                "signed with HS256, the key 'rsa-1' is for RS256"),
        "ES256 naming the RSA key": (idp.token("ec-1", kid="rsa-1", sub="alice"),
                                     "signed with ES256, the key 'rsa-1' is for RS256"),
        "not a JWT": ("not-a-jwt", "not a JWS"),
    }
    for name, (token, reason) in refused.items():
        before = _metric(broker, FAILED)
        w, body = authenticate(address, client_message(token))
        with w:
            assert_refused_exchange(w, body)
        assert _metric(broker, FAILED) == before + 1, name
        lines = [line for line in broker.stderr_text().splitlines()
                 if "SASL authentication failed (OAUTHBEARER)" in line]
        assert reason in lines[-1], (name, lines[-1])

    # after the error challenge the client is not authenticated: a Produce instead of %x01 is not served
    _create_topic(_admin(broker), "guarded")
    w, body = authenticate(address, client_message(refused["wrong issuer"][0]))
    with w:
        assert (body["error_code"], body["auth_bytes"]) == (0, INVALID_TOKEN), body
        w.send(ApiKey.PRODUCE, 3, _produce_frame("guarded"))
        assert w.is_closed_by_peer()
    # messages that fail at once, without a challenge: an authzid other than the token's principal,
    # a message that is not RFC 7628's, another scheme than Bearer (told in Kafka's words)
    at_once = [
        (client_message(good, authzid="admin"), "'alice' asked to act as 'admin'"),
        (b"n,,\x01\x01", "no 'auth=Bearer <token>'"),
        (b"n,,\x01auth=Basic YWxpY2U6eA==\x01\x01", "no 'auth=Bearer <token>'"),
        (b"\x01", "malformed client message"),  # %x01 with no error before it
        (b"n,,\x01auth=Bearer " + good.encode() + b"\x01", "malformed client message"),  # one %x01 short
        (b"\xff\xfe", "client message not UTF-8"),
    ]
    for message, reason in at_once:
        before = _metric(broker, FAILED)
        w, body = authenticate(address, message)
        with w:
            assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED, (message, body)
            assert body["auth_bytes"] == b"" and body["error_message"], body
            if b"a=admin" in message:  # Kafka's text, naming both ids
                assert body["error_message"] == ("Authentication failed: Client requested an authorization id "
                                                 "(admin) that is different from the token's principal name "
                                                 "(alice)"), body
            else:
                assert body["error_message"] == ("Authentication failed during authentication due to invalid "
                                                 "credentials with SASL mechanism OAUTHBEARER"), body
            assert w.is_closed_by_peer()
        assert _metric(broker, FAILED) == before + 1, message
        lines = [line for line in broker.stderr_text().splitlines()
                 if "SASL authentication failed (OAUTHBEARER)" in line]
        assert lines[-1].endswith(f"SASL authentication failed (OAUTHBEARER): {reason}"), (message, lines[-1])
    assert good not in broker.stderr_text()  # a token is a credential: never logged
    assert _high_watermark(broker, "guarded") == 0
    assert "Traceback" not in broker.stderr_text()


def test_a_key_rotated_in_is_taken_up_without_a_restart(broker_factory, idp):
    """The provider replaces its RSA key by an EC one (a new kid): the first token naming it makes the
    broker read the JWKS again at once, not after sasl.oauthbearer.jwks.endpoint.refresh.ms (an hour), and
    the new tokens are accepted; the retired key's are not; unknown kids do not make the broker hammer the
    provider (one read per sasl.oauthbearer.jwks.endpoint.retry.backoff.ms)."""
    idp.add_client("app", "app-secret", sub="svc-app")
    broker = jwks_broker(broker_factory, idp, **{HANDLER_PROP: JWKS_HANDLER_31,  # the 3.1-3.3 class name
                                                  "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": 1000,
                                                  "connection.failed.authentication.delay.ms": 0})
    pid = broker.pid
    _create_topic(_admin(broker), "rotating")
    conf = oidc_conf(broker, idp, "app", "app-secret")
    before_rotation = Producer({**conf, "acks": "all"})
    before_rotation.produce("rotating", b"rsa-signed")
    assert before_rotation.flush(20) == 0
    old_token = idp.token(sub="svc-app")
    reads = idp.jwks_requests
    assert reads >= 1

    idp.add_key("ec-2", "ES256")
    idp.published, idp.signing = ["ec-2"], "ec-2"
    new_token = idp.token(sub="svc-app")
    started = time.monotonic()
    wait_until(lambda: accepted(broker.sasl_bootstrap, new_token), 5, "the token signed by the rotated-in key")
    assert time.monotonic() - started < 5
    assert idp.jwks_requests > reads
    # the retired key is gone from the broker too
    assert not accepted(broker.sasl_bootstrap, old_token)
    assert "no key 'rsa-1' in the JWKS" in broker.stderr_text()
    # librdkafka with a fresh token from the provider (ES256, kid ec-2)
    assert _produce(conf, "rotating", [b"ec-signed"]) == [None]
    # the connection authenticated before the rotation stays authenticated (no re-authentication)
    before_rotation.produce("rotating", b"rsa-session")
    assert before_rotation.flush(20) == 0
    assert _high_watermark(broker, "rotating") == 3
    assert broker.pid == pid and broker.running()

    # tokens naming kids nobody published, for 2.5 s as fast as the broker answers: a read a second at most
    time.sleep(1.1)  # past the last read's backoff
    reads, attempts = idp.jwks_requests, 0
    started = time.monotonic()
    while time.monotonic() - started < 2.5:
        assert not accepted(broker.sasl_bootstrap, idp.token(kid=f"ghost-{attempts}", sub="svc-app"))
        attempts += 1
    time.sleep(0.2)
    extra = idp.jwks_requests - reads
    assert attempts >= 20 and 1 <= extra <= 4, (attempts, extra)


def test_a_jwks_endpoint_down_at_start_delays_oauthbearer_only(broker_factory):
    """The provider is unreachable when the broker starts: the broker starts all the same, its PLAINTEXT
    listener serves, OAUTHBEARER clients are refused; the provider up but its JWKS failing: still refused;
    the JWKS answering: accepted, without a restart."""
    idp = IdentityProvider()
    idp.port = free_port()  # nothing listens there yet
    idp.add_client("app", "app-secret", sub="svc-app")
    try:
        broker = jwks_broker(broker_factory, idp, **{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": 100,
                                                      "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": 400})
        assert _admin(broker).list_topics(timeout=10).brokers  # the PLAINTEXT listener serves
        _create_topic(_admin(broker), "late")
        token = idp.token(sub="svc-app")
        before = _metric(broker, FAILED)
        assert not accepted(broker.sasl_bootstrap, token)
        assert _metric(broker, FAILED) == before + 1
        assert "SASL authentication failed (OAUTHBEARER): the JWKS has not been read yet" in broker.stderr_text()
        wait_until(lambda: "cannot read the JWKS at " + idp.jwks_url in broker.stderr_text(), 5,
                   "the broker logs the unreachable JWKS")

        idp.jwks_status = 503
        idp.start(idp.port)
        # librdkafka gets its token from the provider; the broker cannot check it yet
        error = _auth_error(oidc_conf(broker, idp, "app", "app-secret"))
        assert error.code() == KafkaError._AUTHENTICATION, error
        wait_until(lambda: idp.jwks_requests >= 2, 5, "the broker retries the JWKS")
        assert not accepted(broker.sasl_bootstrap, token)
        assert "HTTP Error 503" in broker.stderr_text()

        idp.jwks_status = 200
        started = time.monotonic()
        wait_until(lambda: accepted(broker.sasl_bootstrap, token), 5, "accepted once the JWKS answers")
        assert time.monotonic() - started < 5
        assert _produce(oidc_conf(broker, idp, "app", "app-secret"), "late", [b"at-last"]) == [None]
        assert _high_watermark(broker, "late") == 1
        assert broker.running()
    finally:
        idp.stop()


def test_sub_claim_name_clock_skew_and_a_file_jwks(broker_factory, idp, tmp_path):
    """sasl.oauthbearer.sub.claim.name picks the principal's claim, clock.skew.seconds=0 allows no leeway,
    no expected audience or issuer checks neither, and the keys may come from a file: URL."""
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [idp.keys["rsa-1"].jwk]}))
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                             "sasl.enabled.mechanisms": "OAUTHBEARER", HANDLER_PROP: JWKS_HANDLER,
                             "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
                             "sasl.oauthbearer.sub.claim.name": "client_id",
                             "sasl.oauthbearer.clock.skew.seconds": 0,
                             "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    address = f"127.0.0.1:{port}"
    admin = _admin(broker)
    _create_topic(admin, "by-client-id")
    _allow(admin, "User:orders-app", "by-client-id", "unused")
    token = idp.token(client_id="orders-app", sub="someone-else", aud="any-audience", iss="any-issuer")
    wait_until(lambda: accepted(address, token), 10, "the broker read the file JWKS")
    w, body = authenticate(address, client_message(token))
    with w:
        assert (body["error_code"], body["auth_bytes"]) == (0, b""), body
        produced = w.call(ApiKey.PRODUCE, 3, _produce_frame("by-client-id"))
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0, produced
    # the same claims but for client_id: User:someone-else may not write
    other = idp.token(client_id="someone-else", sub="orders-app")
    w, body = authenticate(address, client_message(other))
    with w:
        assert (body["error_code"], body["auth_bytes"]) == (0, b""), body
        produced = w.call(ApiKey.PRODUCE, 3, _produce_frame("by-client-id"))
        code = produced["responses"][0]["partition_responses"][0]["error_code"]
        assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, produced
    assert not accepted(address, idp.token(sub="orders-app"))
    assert "no principal in claim 'client_id'" in broker.stderr_text()
    now = int(time.time())
    assert not accepted(address, idp.token(client_id="orders-app", iat=now - 60, exp=now - 3))
    assert "ExpiredSignatureError" in broker.stderr_text()
    assert _high_watermark(broker, "by-client-id") == 1
    # a connection outlives its token: with connections.max.reauth.ms=0 (the only value served, Kafka's
    # default) Kafka does not end a session when the token expires either
    short = idp.token(client_id="orders-app", exp=int(time.time()) + 2)
    w, body = authenticate(address, client_message(short))
    with w:
        assert (body["error_code"], body["auth_bytes"], body["session_lifetime_ms"]) == (0, b"", 0), body
        time.sleep(max(0.0, json.loads(base64.urlsafe_b64decode(short.split(".")[1] + "==="))["exp"]
                       - time.time() + 1.5))
        assert not accepted(address, short)  # expired now, for a new connection
        produced = w.call(ApiKey.PRODUCE, 3, _produce_frame("by-client-id"))
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0, produced


def test_unsecured_tokens_name_their_principal_and_need_the_required_scope(broker_factory):
    """Kafka 2.7's default validator: librdkafka's unsecured JWTs (alg none) on two listeners, one with the
    default claim names and unsecuredValidatorRequiredScope, one reading the principal from another claim;
    the ACL authorizer shows the principal; the broker warns at start that anyone can be anyone."""
    port, other_port = free_port(), free_port()
    broker = broker_factory({
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port},AZP://127.0.0.1:{other_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,AZP:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        JAAS_PROP: f'{LOGIN_MODULE} required unsecuredValidatorRequiredScope="kafka.write" '
                   f'unsecuredValidatorAllowableClockSkewMs="2000";',
        "listener.name.azp.oauthbearer.sasl.jaas.config":
            f'{LOGIN_MODULE} required unsecuredValidatorPrincipalClaimName="azp";',
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    broker.sasl_bootstrap = f"127.0.0.1:{port}"
    log = broker.stderr_text()
    for listener in ("SASL_PLAINTEXT", "AZP"):
        assert (f"WARNING broker.network: listener {listener} accepts unsecured OAUTHBEARER tokens (Kafka 2.7's "
                f"default): anyone can name any principal") in log, log
    admin = _admin(broker)
    _create_topic(admin, "dev")
    _allow(admin, "User:alice", "dev", "dev-group")

    alice = unsecured_conf(broker, "principal=alice scope=kafka.read,kafka.write lifeSeconds=120")
    assert _produce(alice, "dev", [b"a1", b"a2"]) == [None, None]
    assert _consume(alice, "dev", "dev-group", 2) == [b"a1", b"a2"]
    # another principal, with the scope: authenticated, not authorized
    errors = _produce(unsecured_conf(broker, "principal=mallory scope=kafka.write"), "dev", [b"m"], timeout=10)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    # alice without kafka.write: refused
    before = _metric(broker, FAILED)
    error = _auth_error(unsecured_conf(broker, "principal=alice scope=kafka.read"))
    assert error.code() == KafkaError._AUTHENTICATION and "invalid_token" in error.str(), error
    assert _metric(broker, FAILED) > before
    assert "SASL authentication failed (OAUTHBEARER): scope kafka.write required, not granted" in broker.stderr_text()
    assert _metric(broker, SUCCEEDED) >= 2

    # the AZP listener takes the principal from azp: librdkafka's principalClaimName
    azp = {**unsecured_conf(broker, "principalClaimName=azp principal=alice"),
           "bootstrap.servers": f"127.0.0.1:{other_port}"}
    assert _produce(azp, "dev", [b"via-azp"]) == [None]
    assert _auth_error({**unsecured_conf(broker, "principal=alice"),
                        "bootstrap.servers": f"127.0.0.1:{other_port}"}).code() == KafkaError._AUTHENTICATION
    assert "no principal in claim 'azp'" in broker.stderr_text()
    assert _high_watermark(broker, "dev") == 3

    # over the wire: exp within the 2 s skew is accepted, beyond it not; a signed token is not unsecured
    now = int(time.time())
    address = broker.sasl_bootstrap
    assert accepted(address, unsigned_token(sub="alice", scope="kafka.write", exp=now - 1))
    assert not accepted(address, unsigned_token(sub="alice", scope="kafka.write", exp=now - 10))
    assert "expired" in broker.stderr_text()
    assert not accepted(address, unsigned_token(sub="alice", scope="kafka.write", iat=now + 60))
    assert "issued in the future (iat)" in broker.stderr_text()
    assert not accepted(address, unsigned_token(sub="alice", scope="kafka.write", exp="tomorrow"))
    assert "no numeric exp claim" in broker.stderr_text()
    signed = jwt.encode({"sub": "alice", "scope": "kafka.write", "exp": now + 60}, "k" * 32, algorithm="HS256")
    assert not accepted(address, signed)
    assert "an unsecured token must have alg 'none' and no signature" in broker.stderr_text()


def _start_fails(tmp_path, props: dict) -> subprocess.CompletedProcess:
    import yaml

    config = tmp_path / "broker.yaml"
    config.write_text(yaml.safe_dump({"broker.id": 0, "log.dirs": str(tmp_path / "data"), "metrics.port": -1,
                                      "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                                      "sasl.enabled.mechanisms": "OAUTHBEARER", **props}))
    return subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


UNSECURED_JAAS = f"{LOGIN_MODULE} required;"
START_REFUSALS = {
    "unknown handler class": ({HANDLER_PROP: "com.example.kafka.MyValidatorCallbackHandler"},
                              f"{HANDLER_PROP}=com.example.kafka.MyValidatorCallbackHandler: not served here"),
    "jwks handler without url": ({HANDLER_PROP: JWKS_HANDLER},
                                 f"{HANDLER_PROP}={JWKS_HANDLER} needs sasl.oauthbearer.jwks.endpoint.url"),
    "jwks url scheme": ({HANDLER_PROP: JWKS_HANDLER_31, "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp.test/jwks"},
                        "sasl.oauthbearer.jwks.endpoint.url=ftp://idp.test/jwks: an https://, http:// or file: URL"),
    "inter-broker oauthbearer": ({JAAS_PROP: UNSECURED_JAAS, "zookeeper.connect": f"127.0.0.1:{free_port()}",
                                  "security.inter.broker.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"},
                                 "sasl.mechanism.inter.broker.protocol=OAUTHBEARER is not served between brokers"),
    "unsecured without jaas": ({}, "listener SASL_PLAINTEXT enables OAUTHBEARER but "
                                   f"{JAAS_PROP} is not set"),
    "another login module": ({JAAS_PROP: 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                         'user_a="s3cret-word";'}, "OAUTHBEARER takes " + LOGIN_MODULE),
    "skew not a number": ({JAAS_PROP: f'{LOGIN_MODULE} required unsecuredValidatorAllowableClockSkewMs="soon";'},
                          "unsecuredValidatorAllowableClockSkewMs='soon' is not a whole number"),
    "handler on plain": ({"sasl.enabled.mechanisms": "PLAIN",
                          "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                              'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="s3cret-word";',
                          "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": JWKS_HANDLER},
                         "only OAUTHBEARER takes a server callback handler here"),
    "negative clock skew": ({HANDLER_PROP: JWKS_HANDLER, "sasl.oauthbearer.jwks.endpoint.url": "http://idp.test/jwks",
                             "sasl.oauthbearer.clock.skew.seconds": -1}, "sasl.oauthbearer.clock.skew.seconds"),
}


@pytest.mark.parametrize("case", list(START_REFUSALS))
def test_oauthbearer_settings_that_cannot_be_used_stop_the_start_and_write_nothing(tmp_path, case):
    props, fragment = START_REFUSALS[case]
    started = time.monotonic()
    result = _start_fails(tmp_path, props)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("broker:")]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists(), "a start that failed wrote into the data dir"
    assert "s3cret-word" not in result.stderr
    assert time.monotonic() - started < 20  # refused from the settings, not after trying ZooKeeper or the JWKS


def fetch_token(idp: IdentityProvider, client_id: str, secret: str, scope: str | None = None) -> str:
    """The client-credentials grant, as an OIDC client makes it (HTTP basic auth)."""
    form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
    request = urllib.request.Request(idp.token_url, data=urllib.parse.urlencode(form).encode(), headers={
        "Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode(),
        "Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["token_type"] == "bearer" and answer["expires_in"] == idp.lifetime_s
    return answer["access_token"]


def test_kafka_python_and_aiokafka_with_provider_tokens(broker_factory, idp):
    """kafka-python (SaslAuthenticate, %x01 after the error) and aiokafka with token providers that take
    their tokens from the provider's token endpoint."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError
    from kafka.net.sasl.oauth import AbstractTokenProvider

    idp.add_client("py-app", "py-secret", sub="svc-py")
    idp.add_client("py-wrong-aud", "py-secret", sub="svc-py", aud="elsewhere")
    broker = jwks_broker(broker_factory, idp)
    _create_topic(_admin(broker), "py")

    class Provider(AbstractTokenProvider):
        def __init__(self, client_id: str) -> None:
            self.client_id = client_id

        def token(self) -> str:
            return fetch_token(idp, self.client_id, "py-secret")

    producer = KafkaProducer(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider("py-app"), acks="all")
    for i in range(10):
        producer.send("py", b"kp-%d" % i)
    producer.flush(30)
    producer.close()
    # a token for another audience: kafka-python never gets in (it reports "Unable to bootstrap" as often as
    # the SaslAuthenticationFailedError: it drops a response that arrives with the broker's FIN)
    before = _metric(broker, FAILED)
    with pytest.raises(KafkaPythonError):
        bad = KafkaProducer(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider("py-wrong-aud"),
                            bootstrap_timeout_ms=4000, max_block_ms=4000, reconnect_backoff_max_ms=500)
        bad.send("py", b"must-not-land").get(timeout=5)
    assert _metric(broker, FAILED) > before
    assert "SASL authentication failed (OAUTHBEARER): InvalidAudienceError" in broker.stderr_text()

    class AioProvider(AioTokenProvider):
        async def token(self) -> str:
            return await asyncio.get_running_loop().run_in_executor(None, fetch_token, idp, "py-app", "py-secret")

    async def consume() -> list[bytes]:
        consumer = AIOKafkaConsumer("py", bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=AioProvider(),
                                    auto_offset_reset="earliest", group_id="aio-oauth")
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(consume()) == [b"kp-%d" % i for i in range(10)]
    assert _high_watermark(broker, "py") == 10


def test_the_v0_exchange_in_bare_frames(broker_factory, idp):
    """SaslHandshake v0: the token, the error challenge and the %x01 travel as bare size-prefixed frames."""
    import struct

    broker = jwks_broker(broker_factory, idp)
    token = idp.token(sub="alice")
    wait_until(lambda: accepted(broker.sasl_bootstrap, token), 10, "the broker read the JWKS")
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "OAUTHBEARER"})["error_code"] == 0
        message = client_message(token)
        w.send_raw(struct.pack(">i", len(message)) + message)
        assert w.read_frame() == b""
        assert w.call(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    before = _metric(broker, FAILED)
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "OAUTHBEARER"})["error_code"] == 0
        message = client_message(idp.token(sub="alice", aud="elsewhere"))
        w.send_raw(struct.pack(">i", len(message)) + message)
        assert w.read_frame() == INVALID_TOKEN
        w.send_raw(struct.pack(">i", 1) + b"\x01")
        assert w.is_closed_by_peer()  # v0 has no error answer: the connection closes
    assert _metric(broker, FAILED) == before + 1


def test_a_jwks_key_without_alg_verifies_every_algorithm_of_its_type(broker_factory, idp):
    """RFC 7517 makes a JWK's "alg" optional, and providers leave it out (Microsoft Entra ID's keys have
    none). Kafka's validator (jose4j, AlgorithmConstraints DISALLOW_NONE) then verifies a token with
    whatever RSA algorithm its header names: RS256, RS384, RS512, PS256, ... with that RSA key."""
    idp.keys["rsa-1"].jwk.pop("alg")
    broker = jwks_broker(broker_factory, idp)
    address = broker.sasl_bootstrap
    wait_until(lambda: accepted(address, idp.token(sub="alice")), 10, "the broker read the JWKS")
    refused = [alg for alg in ("RS384", "RS512", "PS256") if not accepted(address, idp.token(sub="alice", alg=alg))]
    assert refused == [], [line for line in broker.stderr_text().splitlines() if "OAUTHBEARER" in line][-3:]
