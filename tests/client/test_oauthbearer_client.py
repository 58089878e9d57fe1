"""Our client over SASL/OAUTHBEARER, configured as librdkafka and the Java client configure it
(:mod:`broker.client._oauth`): OIDC client credentials against an identity provider, unsecured JWTs
for development brokers, token refresh, refusals; and kafkactl, the mirror and the pipeline passing
the settings through.

One broker process for the module, with three listeners: PLAINTEXT (the first, the one the ready line
names), SASL_PLAINTEXT with OAUTHBEARER checked against the identity provider's JWKS (Kafka 3.1's
validator, no clock skew allowed, so an expired token is refused at once) and DEV (SASL_PLAINTEXT too)
with OAUTHBEARER's unsecured validator (Kafka 2.7's default) and sessions that end when their token
expires (KIP-368's ``connections.max.reauth.ms``; a request after the end closes the connection). The JWKS listener is advertised at a
:class:`~tests.tcp_gate.TcpGate` in front of it, so every connection our clients make to it passes
the gate: the gate records each OAUTHBEARER client message (the token and extensions on the wire) and
can cut every connection, which makes the clients connect (and authenticate) again.

The identity provider (:class:`tests.oauth_idp.IdentityProvider`) runs in this process on 127.0.0.1:
``/jwks`` publishes its RS256 public key and ``/token`` serves the OAuth 2 client-credentials grant,
checking the form's Content-Type and the HTTP basic client id and secret; each client has its own token
lifetime, and the provider records every token request with its HTTP status and the tokens it issued.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.client import (Admin, AdminConfig, Consumer, ConsumerConfig, NewTopic, Producer, ProducerConfig,
                           TopicPartition, build_config)
from broker.client._oauth import OidcTokenProvider, UnsecuredTokenProvider, _jwt_claims, client_message
from broker.client.errors import AuthenticationError, ConfigError, KafkaConnectionError
from tests.conftest import BrokerProcess
from tests.oauth_idp import IdentityProvider
from tests.pki import make_pki
from tests.tcp_gate import TcpGate, frames
from tests.zookeeper import free_port

LIMIT_S = 30  # guards against a hang, not performance assertions
PROMPT_S = 5  # a refusal is answered in well under this

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
CLIENT_ID, CLIENT_SECRET = "orders-app", "0rders-s3cret"  # tokens for 300 s
SHORT_ID, SHORT_SECRET = "short-lived", "sh0rt-s3cret"      # tokens for SHORT_LIFE_S
SHORT_LIFE_S = 2


# -- the broker ------------------------------------------------------------------------------------

class Wiretap:
    """The OAUTHBEARER client messages that passed the gate: ``(monotonic time, epoch time, message)``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[tuple[float, float, bytes]] = []

    def tap(self):
        def on_frame(frame: bytes) -> None:
            if b"auth=Bearer " in frame:
                start = frame.index(b"n,")  # the auth_bytes of a SaslAuthenticate: "n,...\x01\x01"
                end = frame.index(b"\x01\x01", start) + 2
                with self.lock:
                    self.messages.append((time.monotonic(), time.time(), frame[start:end]))
        return frames(on_frame), None

    def since(self, t: float) -> list[tuple[float, bytes]]:
        with self.lock:
            return [(wall, m) for mono, wall, m in self.messages if mono >= t]


def token_of(message: bytes) -> str:
    return re.search(rb"auth=Bearer ([^\x01]+)\x01", message).group(1).decode()


@dataclass
class OAuthBroker:
    broker: BrokerProcess
    idp: IdentityProvider
    gate: TcpGate
    wiretap: Wiretap
    jwks_listener: str  # advertised at the gate
    dev_listener: str   # unsecured tokens

    def topic(self) -> str:
        return f"oauth-{uuid.uuid4().hex[:10]}"

    def oidc(self, client_id: str = CLIENT_ID, secret: str = CLIENT_SECRET, **props) -> dict:
        """librdkafka's OIDC properties (as a properties file holds them) for the JWKS listener."""
        return {"bootstrap.servers": self.jwks_listener, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": client_id, "sasl.oauthbearer.client.secret": secret,
                "sasl.oauthbearer.token.endpoint.url": self.idp.token_url,
                "socket.connection.setup.timeout.ms": "5000", "request.timeout.ms": "10000", **props}

    def unsecured(self, config: str = "principal=alice", **props) -> dict:
        return {"bootstrap.servers": self.dev_listener, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": config, "socket.connection.setup.timeout.ms": "5000",
                "request.timeout.ms": "10000", **props}


@pytest.fixture(scope="module")
def oauth(tmp_path_factory):
    idp = IdentityProvider().start()
    idp.add_client(CLIENT_ID, CLIENT_SECRET, lifetime_s=300)
    idp.add_client(SHORT_ID, SHORT_SECRET, lifetime_s=SHORT_LIFE_S)
    wiretap = Wiretap()
    broker = gate = None
    try:
        for attempt in range(3):
            jwks_port, dev_port = free_port(), free_port()
            gate = TcpGate(jwks_port, tap=wiretap.tap)
            broker = BrokerProcess(tmp_path_factory.mktemp("oauth-broker"), {
                "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{jwks_port},"
                             f"DEV://127.0.0.1:{dev_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://{gate.address},"
                                        f"DEV://127.0.0.1:{dev_port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                                  "DEV:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": JWKS_HANDLER,
                "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
                "sasl.oauthbearer.clock.skew.seconds": 0,  # an expired token is refused at once
                "listener.name.dev.oauthbearer.sasl.jaas.config": f"{LOGIN_MODULE} required;",
                # KIP-368 on DEV only: a session ends when its token expires (the JWKS listener's never do)
                "listener.name.dev.oauthbearer.connections.max.reauth.ms": 60000,
            })
            try:
                broker.start()
                break
            except RuntimeError:  # a port was taken meanwhile
                gate.close()
                if attempt == 2:
                    raise
        ob = OAuthBroker(broker, idp, gate, wiretap, gate.address, f"127.0.0.1:{dev_port}")
        # the broker reads the JWKS on a thread of its own after it starts: wait until it accepts a token
        deadline = time.monotonic() + LIMIT_S
        while True:
            try:
                with Admin(ob.oidc()) as admin:
                    admin.describe_cluster()
                break
            except AuthenticationError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield ob
    finally:
        if broker is not None:
            broker.stop()
        if gate is not None:
            gate.close()
        idp.stop()
    assert "Traceback" not in broker.stderr_text(), broker.traceback_excerpt()


def round_trip(conf: dict, topic: str, n: int = 4) -> list[bytes]:
    """Create ``topic``, produce ``n`` records and consume them back in a group, all with ``conf``."""
    with Admin(conf) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        cluster = admin.describe_cluster()
    values = [f"record-{i}".encode() for i in range(n)]
    with Producer(conf, linger_ms=0) as producer:
        for future in [producer.send(topic, v, key=str(i).encode()) for i, v in enumerate(values)]:
            assert future.result(LIMIT_S).offset >= 0
    got: list[bytes] = []
    with Consumer(conf, group_id=f"g-{topic}", auto_offset_reset="earliest", session_timeout_ms=6000) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + LIMIT_S
        while len(got) < n and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(200))
        consumer.commit()
    # the broker answered with the listener's advertised address: every later connection authenticated there
    assert [f"{b.host}:{b.port}" for b in cluster.brokers] == [conf["bootstrap.servers"]]
    assert sorted(got) == sorted(values)
    return got


def expect_refusal(conf: dict, cls=AuthenticationError, client=Admin):
    """Building ``client`` with ``conf`` raises ``cls`` promptly, in one line."""
    started = time.monotonic()
    with pytest.raises(cls) as info:
        client(conf).close()
    assert time.monotonic() - started < PROMPT_S
    assert "\n" not in str(info.value)
    return info.value


# -- OIDC (client credentials) ------------------------------------------------------------------------

def test_oidc_producer_consumer_and_admin(oauth: OAuthBroker) -> None:
    conf = oauth.oidc(**{"sasl.oauthbearer.scope": "kafka orders", "sasl.oauthbearer.extensions":
                         "traceId=abc123,tenant=emea"})
    granted, t0 = oauth.idp.granted(CLIENT_ID), time.monotonic()
    round_trip(conf, oauth.topic())
    # one token per client (admin, producer, consumer), shared by all of its connections
    assert oauth.idp.granted(CLIENT_ID) - granted == 3
    with oauth.idp.lock:
        requests = [r.form for r in oauth.idp.token_requests[-3:]]
    assert requests == [{"grant_type": ["client_credentials"], "scope": ["kafka orders"]}] * 3
    seen = oauth.wiretap.since(t0)
    assert len(seen) > 3  # bootstrap, leader, coordinator, fetch connections ...
    assert len({token_of(m) for _, m in seen}) == 3
    for _, message in seen:
        assert message.startswith(b"n,,\x01auth=Bearer ey")
        assert message.endswith(b"\x01traceId=abc123\x01tenant=emea\x01\x01")
        assert _jwt_claims(token_of(message))["scope"] == "kafka orders"


def test_the_java_clients_oidc_settings(oauth: OAuthBroker) -> None:
    """Kafka 3.1's: sasl.login.callback.handler.class, the endpoint, and the login module's clientId/clientSecret."""
    conf = {k: v for k, v in oauth.oidc().items() if not k.startswith("sasl.oauthbearer.") or k.endswith("url")}
    conf.update({"sasl.login.callback.handler.class": LOGIN_HANDLER,
                 "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="{CLIENT_ID}" clientSecret="{CLIENT_SECRET}" '
                                     'scope="kafka" extension_traceId="java";'})
    t0 = time.monotonic()
    round_trip(conf, oauth.topic())
    with oauth.idp.lock:
        assert oauth.idp.token_requests[-1] == (CLIENT_ID, {"grant_type": ["client_credentials"], "scope": ["kafka"]},
                                                200)
    assert all(m.endswith(b"\x01traceId=java\x01\x01") for _, m in oauth.wiretap.since(t0))


def test_tokens_are_refreshed_and_new_connections_use_the_current_one(oauth: OAuthBroker) -> None:
    """Tokens of SHORT_LIFE_S seconds (the broker allows no clock skew): a producer and a consumer keep
    working over several lifetimes while the gate cuts every connection once a second; each new connection
    presents a token that is still valid, taken from its client's cache until 80 % of its life, then a new
    one from the identity provider."""
    conf = oauth.oidc(SHORT_ID, SHORT_SECRET, retry_backoff_ms="50", reconnect_backoff_ms="20")
    topic = oauth.topic()
    with Admin(bootstrap_servers=oauth.broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    granted, t0 = oauth.idp.granted(SHORT_ID), time.monotonic()
    sent: list[bytes] = []
    got: list[bytes] = []
    with Producer(conf, linger_ms=0) as producer, Consumer(conf, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        cuts = 0
        while cuts < 5 * SHORT_LIFE_S // 2:  # a cut at 1, 2, ... s: 2.5 lifetimes
            value = f"v{len(sent)}".encode()
            assert producer.send(topic, value).result(LIMIT_S).offset == len(sent)
            sent.append(value)
            got.extend(r.value for r in consumer.poll(50))
            if time.monotonic() - t0 > cuts + 1:
                oauth.gate.shut()
                oauth.gate.open()
                cuts += 1
            time.sleep(0.05)
        deadline = time.monotonic() + LIMIT_S
        while len(got) < len(sent) and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(200))
    assert got == sent  # nothing lost, nothing twice: both kept working throughout
    seen = oauth.wiretap.since(t0)
    tokens = [token_of(m) for _, m in seen]
    with oauth.idp.lock:
        issued = set(oauth.idp.issued[SHORT_ID])
    fetched = oauth.idp.granted(SHORT_ID) - granted
    # each client fetched a token at its start and then at least at every other cut (80 % of 2 s)
    assert fetched >= 2 * 3, (fetched, len(seen))
    assert set(tokens) <= issued and len(set(tokens)) >= 2 * 3
    assert len(seen) > len(set(tokens))  # connections shared tokens: cached, not fetched per connection
    for (wall, _), token in zip(seen, tokens):
        assert wall < _jwt_claims(token)["exp"], "a connection presented an expired token"


def test_sessions_that_end_with_their_token_are_replaced_in_time(oauth: OAuthBroker) -> None:
    """On DEV a session lasts until its token expires (session_lifetime_ms): a producer and a consumer with
    tokens of 2 s keep working over 2.5 lifetimes, each opening new connections (with new tokens) before
    the old sessions end; the broker never closes a connection for a request after its session."""
    conf = oauth.unsecured("principal=alice lifeSeconds=2", retry_backoff_ms="50")
    topic = oauth.topic()
    with Admin(bootstrap_servers=oauth.broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    killed = expired_connections_killed(oauth.broker, "DEV")
    sent: list[bytes] = []
    got: list[bytes] = []
    with Producer(conf, linger_ms=0) as producer, Consumer(conf, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:
            value = f"v{len(sent)}".encode()
            assert producer.send(topic, value).result(LIMIT_S).offset == len(sent)
            sent.append(value)
            got.extend(r.value for r in consumer.poll(50))
        deadline = time.monotonic() + LIMIT_S
        while len(got) < len(sent) and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(200))
        tokens = (producer.config.sasl.token_provider.obtained, consumer.config.sasl.token_provider.obtained)
    assert got == sent
    assert min(tokens) >= 3, tokens
    assert expired_connections_killed(oauth.broker, "DEV") == killed


def expired_connections_killed(broker: BrokerProcess, listener: str) -> float:
    text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    prefix = f'kafkapy_expired_connections_killed_total{{listener="{listener}"}}'
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def test_a_wrong_client_secret_is_a_prompt_authentication_error(oauth: OAuthBroker) -> None:
    for client in (Admin, Producer, Consumer):
        err = expect_refusal(oauth.oidc(secret="not-the-s3cret"), client=client)
        text = str(err)
        assert "SASL_AUTHENTICATION_FAILED" in text and oauth.idp.token_url in text, text
        assert "HTTP 401 invalid_client: bad client credentials" in text, text
        assert "not-the-s3cret" not in text and "sasl.oauthbearer.client.secret" in text
    with oauth.idp.lock:
        assert oauth.idp.token_requests[-1] == (CLIENT_ID, {"grant_type": ["client_credentials"]}, 401)
    err = expect_refusal(oauth.oidc(client_id="nobody"))
    assert "refused client 'nobody'" in str(err)


def test_an_unreachable_token_endpoint_is_a_prompt_connection_error(oauth: OAuthBroker) -> None:
    url = f"http://127.0.0.1:{free_port()}/token"
    err = expect_refusal(oauth.oidc(**{"sasl.oauthbearer.token.endpoint.url": url}), KafkaConnectionError)
    assert f"cannot get an OAUTHBEARER token from the token endpoint {url}" in str(err), err


def test_an_https_token_endpoint_is_verified_with_https_ca_location(oauth: OAuthBroker, tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    # signs with the key (and kid) the broker's JWKS publishes
    idp = IdentityProvider(oauth.idp.keys[oauth.idp.signing], tls=pki["server"]).start()
    idp.add_client(CLIENT_ID, CLIENT_SECRET, lifetime_s=300)
    try:
        conf = oauth.oidc(**{"sasl.oauthbearer.token.endpoint.url": idp.token_url,
                             "https.ca.location": str(pki["ca"])})
        with Admin(conf) as admin:
            admin.describe_cluster()
        assert idp.granted(CLIENT_ID) == 1
        # without it, the system's CAs do not know this one: refused promptly, saying why
        err = expect_refusal({k: v for k, v in conf.items() if k != "https.ca.location"}, KafkaConnectionError)
        assert "certificate verify failed" in str(err) and "see https.ca.location" in str(err), err
        err = expect_refusal({**conf, "https.ca.location": str(pki["other_ca"])}, KafkaConnectionError)
        assert "certificate verify failed" in str(err), err
        assert idp.granted(CLIENT_ID) == 1
    finally:
        idp.stop()


def test_a_token_the_broker_refuses_gives_the_status_of_its_error_challenge(oauth: OAuthBroker) -> None:
    """An unsecured token at the JWKS listener: the broker's error challenge, our %x01, its refusal."""
    err = expect_refusal(oauth.unsecured(**{"bootstrap.servers": oauth.jwks_listener}))
    assert err.error_code == 58
    assert "the broker refused the token (status invalid_token;" in str(err), err
    assert "unsecured JWT for 'alice'" in str(err)


# -- unsecured JWTs ----------------------------------------------------------------------------------

def test_unsecured_jwt_librdkafka_settings(oauth: OAuthBroker) -> None:
    conf = oauth.unsecured("principal=alice scope=read,write lifeSeconds=600 extension_traceId=t1",
                           **{"sasl.oauthbearer.extensions": "tenant=dev"})
    round_trip(conf, oauth.topic())
    provider = build_config(AdminConfig, conf, {}).sasl.token_provider
    assert isinstance(provider, UnsecuredTokenProvider) and provider.extensions == {"traceId": "t1", "tenant": "dev"}
    with Admin(conf) as admin:
        admin.describe_cluster()
        token = admin._core.config.sasl.token_provider.cached().value
    header, claims, signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"} and signature == ""
    claims = _jwt_claims(token)
    assert claims["sub"] == "alice" and claims["scope"] == ["read", "write"]
    assert claims["exp"] - claims["iat"] == 600 and abs(claims["iat"] - time.time()) < 5


def test_unsecured_jwt_java_settings(oauth: OAuthBroker) -> None:
    conf = {k: v for k, v in oauth.unsecured().items() if "oauthbearer" not in k}
    conf["sasl.jaas.config"] = (f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="carol" '
                                'unsecuredLoginListClaim_scope=",a,b" unsecuredLoginLifetimeSeconds="120";')
    round_trip(conf, oauth.topic())
    provider = build_config(ProducerConfig, conf, {}).sasl.token_provider
    assert (provider.principal, provider.scopes, provider.life_s) == ("carol", ("a", "b"), 120)


# -- settings --------------------------------------------------------------------------------------

OIDC = {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "c",
        "sasl.oauthbearer.client.secret": "secret-1", "sasl.oauthbearer.token.endpoint.url": "https://idp/token"}
UNSECURED = {"sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
             "sasl.oauthbearer.config": "principal=alice"}


def _without(props: dict, *names: str, **more) -> dict:
    return {**{k: v for k, v in props.items() if k not in names}, **more}


BAD = {
    "no token source": ({"sasl.mechanism": "OAUTHBEARER"},
                        "sasl.mechanism=OAUTHBEARER needs a token source: sasl.oauthbearer.method=oidc with"),
    "oidc without endpoint": (_without(OIDC, "sasl.oauthbearer.token.endpoint.url"),
                              "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url"),
    "oidc without client id": (_without(OIDC, "sasl.oauthbearer.client.id"),
                               "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.client.id"),
    "oidc without secret": (_without(OIDC, "sasl.oauthbearer.client.secret"),
                            "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.client.secret"),
    "endpoint not http": (_without(OIDC, **{"sasl.oauthbearer.token.endpoint.url": "ftp://idp/token"}),
                          "sasl.oauthbearer.token.endpoint.url must be an http:// or https:// URL"),
    "unknown method": (_without(OIDC, **{"sasl.oauthbearer.method": "saml"}),
                       "sasl.oauthbearer.method must be default or oidc, not 'saml'"),
    "oidc and unsecure": (_without(OIDC, **{"enable.sasl.oauthbearer.unsecure.jwt": "true"}),
                          "enable.sasl.oauthbearer.unsecure.jwt=true and sasl.oauthbearer.method=oidc are mutually "
                          "exclusive"),
    "client id without oidc": (_without(UNSECURED, **{"sasl.oauthbearer.client.id": "c"}),
                               "sasl.oauthbearer.client.id needs sasl.oauthbearer.method=oidc"),
    "bad extensions": (_without(OIDC, **{"sasl.oauthbearer.extensions": "trace-id=1"}),
                       "sasl.oauthbearer.extensions: extension name 'trace-id' must be letters only"),
    "auth extension": (_without(OIDC, **{"sasl.oauthbearer.extensions": "auth=x"}),
                       "sasl.oauthbearer.extensions: extension name 'auth' is reserved"),
    "extensions not k=v": (_without(OIDC, **{"sasl.oauthbearer.extensions": "a=1,b"}),
                           "sasl.oauthbearer.extensions: expected name=value pairs separated by commas, not 'b'"),
    "https.ca.location missing": (_without(OIDC, **{"https.ca.location": "/nonexistent/ca.pem"}),
                                  "https.ca.location=/nonexistent/ca.pem: cannot read CA certificates"),
    "https.ca.location without oidc": (_without(UNSECURED, **{"https.ca.location": "/etc/ssl/certs"}),
                                       "https.ca.location needs sasl.oauthbearer.method=oidc"),
    "unsecure without config": (_without(UNSECURED, "sasl.oauthbearer.config"),
                                "enable.sasl.oauthbearer.unsecure.jwt=true needs sasl.oauthbearer.config"),
    "unsecure without principal": (_without(UNSECURED, **{"sasl.oauthbearer.config": "scope=a"}),
                                   "sasl.oauthbearer.config has no principal=<name>"),
    "unsecure unknown name": (_without(UNSECURED, **{"sasl.oauthbearer.config": "principal=a lifetime=3"}),
                              "sasl.oauthbearer.config: unknown name 'lifetime'"),
    "unsecure bad life": (_without(UNSECURED, **{"sasl.oauthbearer.config": "principal=a lifeSeconds=-1"}),
                          "sasl.oauthbearer.config: lifeSeconds must be a positive whole number"),
    "username with oauth": (_without(OIDC, **{"sasl.username": "u"}),
                            "sasl.username is not used by OAUTHBEARER"),
    "oauth setting with PLAIN": ({"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "secret-1",
                                  "sasl.oauthbearer.client.id": "c"},
                                 "sasl.oauthbearer.client.id is an OAUTHBEARER setting, not one of PLAIN"),
    "jaas and librdkafka": (_without(OIDC, **{"sasl.jaas.config": f"{LOGIN_MODULE} required;"}),
                            "give either sasl.jaas.config (the Java client's) or librdkafka's sasl.oauthbearer.method"),
    "java unsecured without sub": ({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f"{LOGIN_MODULE} required;"},
                                   'needs the principal: unsecuredLoginStringClaim_sub="<name>"'),
    "java oidc without secret": ({"sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": LOGIN_HANDLER,
                                  "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                                  "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="c";'},
                                 "sasl.jaas.config has no clientSecret option"),
    "java oidc without endpoint": ({"sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class":
                                    LOGIN_HANDLER, "sasl.jaas.config":
                                    f'{LOGIN_MODULE} required clientId="c" clientSecret="secret-1";'},
                                   "needs sasl.oauthbearer.token.endpoint.url"),
    "java unknown handler": ({"sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": "com.acme.Login",
                              "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="c" clientSecret="secret-1";'},
                             "sasl.login.callback.handler.class=com.acme.Login is not supported"),
    "java handler without jaas": (_without(UNSECURED, **{"sasl.login.callback.handler.class": LOGIN_HANDLER}),
                                  "sasl.login.callback.handler.class is the Java client's"),
    "oauth module with PLAIN": ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
                                 f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="a";'},
                                f"login module {LOGIN_MODULE} is for sasl.mechanism=OAUTHBEARER, not PLAIN"),
    "plain module with OAUTHBEARER": ({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config":
                                       'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                       'username="u" password="secret-1";'},
                                      "sasl.jaas.config: login module PlainLoginModule is not OAUTHBEARER's"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_oauthbearer_settings_fail_when_the_client_is_built(case: str) -> None:
    props, says = BAD[case]
    conf = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT", **props}
    for client in (Admin, Producer, Consumer):
        started = time.monotonic()
        with pytest.raises(ConfigError) as info:
            client(conf).close()
        text = str(info.value)
        assert says in text and "\n" not in text, text
        assert "secret-1" not in text
        assert time.monotonic() - started < 2  # refused before any connection or token request


def test_settings_are_checked_and_nothing_is_fetched_when_the_client_is_built() -> None:
    cfg = build_config(ConsumerConfig, {**OIDC, "security.protocol": "SASL_SSL", "sasl.oauthbearer.scope": "a b",
                                        "sasl.oauthbearer.extensions": "x=1"}, {})
    provider = cfg.sasl.token_provider
    assert isinstance(provider, OidcTokenProvider) and provider.cached() is None and provider.obtained == 0
    assert (provider.url, provider.client_id, provider.scope, provider.extensions) == (
        "https://idp/token", "c", "a b", {"x": "1"})
    assert "secret-1" not in repr(cfg) and "secret-1" not in repr(cfg.sasl)
    # without a SASL protocol the settings are checked but unused, as librdkafka and Java do
    assert build_config(AdminConfig, OIDC, {}).sasl is None
    with pytest.raises(ConfigError, match="needs sasl.oauthbearer.client.secret"):
        build_config(AdminConfig, _without(OIDC, "sasl.oauthbearer.client.secret"), {})
    # keyword arguments, snake_case
    cfg = build_config(ProducerConfig, {}, {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "oauthbearer",
                                            "enable_sasl_oauthbearer_unsecure_jwt": True,
                                            "sasl_oauthbearer_config": "principal=bob"})
    assert cfg.sasl.mechanism == "OAUTHBEARER" and cfg.sasl.token_provider.principal == "bob"


def test_the_client_message() -> None:
    assert client_message("T") == b"n,,\x01auth=Bearer T\x01\x01"
    assert client_message("T", {"a": "1", "b": "x y"}) == b"n,,\x01auth=Bearer T\x01a=1\x01b=x y\x01\x01"


# -- kafkactl, the mirror and the pipeline pass the settings through ------------------------------------

def _properties(path: Path, props: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items() if k != "bootstrap.servers"))
    return path


def test_kafkactl_with_oauthbearer_in_command_config(oauth: OAuthBroker, tmp_path: Path) -> None:
    topic = oauth.topic()
    with Admin(bootstrap_servers=oauth.broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    granted = oauth.idp.granted(CLIENT_ID)
    conf = _properties(tmp_path / "client.properties", oauth.oidc())
    argv = [sys.executable, "-m", "kafkactl", "-b", oauth.jwks_listener, "--command-config", str(conf),
            "--output", "json", "topics", "list"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT_S)
    assert res.returncode == 0, res.stderr
    assert topic in res.stdout
    assert oauth.idp.granted(CLIENT_ID) == granted + 1
    # the Java client's unsecured form, at the DEV listener
    java = tmp_path / "java.properties"
    java.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                    f'sasl.jaas.config={LOGIN_MODULE} required unsecuredLoginStringClaim_sub="ops";\n')
    res = subprocess.run([sys.executable, "-m", "kafkactl", "-b", oauth.dev_listener, "--command-config", str(java),
                          "topics", "list"], capture_output=True, text=True, timeout=LIMIT_S)
    assert res.returncode == 0, res.stderr
    assert topic in res.stdout
    # a wrong secret: one line, exit 1, without the secret
    bad = _properties(tmp_path / "bad.properties", oauth.oidc(secret="wr0ng-secret"))
    res = subprocess.run([sys.executable, "-m", "kafkactl", "-b", oauth.jwks_listener, "--command-config", str(bad),
                          "topics", "list"], capture_output=True, text=True, timeout=LIMIT_S)
    assert res.returncode == 1, res.stderr
    assert res.stderr.count("\n") == 1 and "invalid_client" in res.stderr and "wr0ng-secret" not in res.stderr
    assert res.stderr.startswith(f"kafkactl: cannot authenticate to the cluster at {oauth.jwks_listener}: ")
    # and a bad setting in the file: exit 2, naming it
    worse = tmp_path / "worse.properties"
    worse.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.method=oidc\n")
    res = subprocess.run([sys.executable, "-m", "kafkactl", "-b", oauth.jwks_listener, "--command-config", str(worse),
                          "topics", "list"], capture_output=True, text=True, timeout=LIMIT_S)
    assert res.returncode == 2 and "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url" \
        in res.stderr, res.stderr


def test_mirror_settings_reach_every_client() -> None:
    from mirror.config import parse

    props = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL", **OIDC,
             "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.extensions": "tenant=dc1"}
    config = parse({"clusters": {"dc1": props, "dc2": {"bootstrap.servers": "127.0.0.1:2", **UNSECURED,
                                                       "security.protocol": "SASL_PLAINTEXT",
                                                       "enable.sasl.oauthbearer.unsecure.jwt": True}},
                    "flows": [{"source": "dc1", "target": "dc2", "topics": ".*"}]})
    for kind, cls in (("producer", ProducerConfig), ("consumer", ConsumerConfig), ("admin", AdminConfig)):
        provider = build_config(cls, config.clusters["dc1"].client_properties(kind), {}).sasl.token_provider
        assert (provider.client_id, provider.scope, provider.extensions) == ("c", "kafka", {"tenant": "dc1"})
        assert build_config(cls, config.clusters["dc2"].client_properties(kind), {}).sasl.token_provider.principal \
            == "alice"
    from mirror.config import MirrorConfigError
    with pytest.raises(MirrorConfigError, match="clusters.dc1: sasl.oauthbearer.method=oidc needs "
                                                "sasl.oauthbearer.client.id"):
        parse({"clusters": {"dc1": _without(props, "sasl.oauthbearer.client.id"), "dc2": {"bootstrap.servers": "x:1"}},
               "flows": [{"source": "dc1", "target": "dc2", "topics": ".*"}]})


def test_the_mirror_copies_with_oauthbearer_on_both_sides(oauth: OAuthBroker, tmp_path: Path) -> None:
    """A mirror process reading over the JWKS listener (OIDC) and writing over the DEV one (unsecured JWTs,
    the Java client's form): the same broker as two clusters, the copies renamed."""
    from tests.mirror.conftest import MirrorProcess, mirror_config

    topic = oauth.topic()
    with Admin(bootstrap_servers=oauth.broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(bootstrap_servers=oauth.broker.bootstrap, linger_ms=0) as producer:
        for i in range(10):
            producer.send(topic, f"m{i}".encode()).result(LIMIT_S)
    granted = oauth.idp.granted(CLIENT_ID)
    config = mirror_config({"idp": oauth.jwks_listener, "dev": oauth.dev_listener},
                           [{"source": "idp", "target": "dev", "topics": re.escape(topic),
                             "topic.rename": "{source}.{topic}"}])
    config["clusters"]["idp"].update({k: v for k, v in oauth.oidc().items() if k != "bootstrap.servers"})
    config["clusters"]["dev"].update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                                      "sasl.jaas.config": f'{LOGIN_MODULE} required '
                                                          'unsecuredLoginStringClaim_sub="mirror";'})
    mirror = MirrorProcess(tmp_path / "mirror", config).start()
    try:
        deadline = time.monotonic() + LIMIT_S
        with Admin(bootstrap_servers=oauth.broker.bootstrap) as admin:
            while f"idp.{topic}" not in admin.list_topics() and time.monotonic() < deadline:
                time.sleep(0.1)
        got: list[bytes] = []
        with Consumer(bootstrap_servers=oauth.broker.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(f"idp.{topic}", 0)])
            while len(got) < 10 and time.monotonic() < deadline:
                got.extend(r.value for r in consumer.poll(200))
        assert got == [f"m{i}".encode() for i in range(10)], mirror.log_text()[-2000:]
        assert oauth.idp.granted(CLIENT_ID) > granted  # the mirror's source clients got their tokens there
    finally:
        assert mirror.stop() == 0
        assert "Traceback" not in mirror.log_text(), mirror.log_text()[-3000:]


def test_the_pipeline_reads_with_oauthbearer_options(oauth: OAuthBroker) -> None:
    """A Spark task's read (pipeline.reading.read_range, as an executor runs it) with ``kafka.*`` OIDC options."""
    pytest.importorskip("pyspark")
    from pipeline import options as opt
    from pipeline.reading import RangePartition, read_range

    topic = oauth.topic()
    with Admin(bootstrap_servers=oauth.broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(bootstrap_servers=oauth.broker.bootstrap, linger_ms=0) as producer:
        for i in range(5):
            producer.send(topic, f"p{i}".encode()).result(LIMIT_S)
    options = {f"kafka.{k}": v for k, v in oauth.oidc().items()}
    options["kafka.SASL.OAUTHBEARER.SCOPE"] = "spark"  # Spark passes option names in any case
    granted = oauth.idp.granted(CLIENT_ID)
    batches = list(read_range(options, RangePartition(opt.OffsetRange(topic, 0, 0, 5), True), False, None))
    assert [v.as_py() for b in batches for v in b.column("value")] == [f"p{i}".encode() for i in range(5)]
    assert oauth.idp.granted(CLIENT_ID) == granted + 1
    with oauth.idp.lock:
        assert oauth.idp.token_requests[-1].form["scope"] == ["spark"]


def test_the_pipeline_loader_takes_a_command_config(tmp_path: Path) -> None:
    """``python -m pipeline load --command-config FILE``: the file's client settings, checked before Spark starts."""
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n")
    res = subprocess.run([sys.executable, "-m", "pipeline", "load", "--bootstrap-server", "127.0.0.1:1", "--topics",
                          "t", "--output", str(tmp_path / "out"), "--command-config", str(bad)],
                         capture_output=True, text=True, timeout=LIMIT_S)
    assert res.returncode == 2, res.stderr
    line, = res.stderr.strip().splitlines()
    assert line.startswith(f"pipeline: {bad}: sasl.mechanism=OAUTHBEARER needs a token source: "), line
    from pipeline.__main__ import client_properties
    good = _properties(tmp_path / "good.properties", {**OIDC, "security.protocol": "SASL_SSL"})
    assert client_properties(good) == {**OIDC, "security.protocol": "SASL_SSL"}
