"""Our client over SASL (``security.protocol=SASL_PLAINTEXT|SASL_SSL``, PLAIN and SCRAM-SHA-256/512,
librdkafka's ``sasl.*`` names and the Java client's ``sasl.jaas.config``), and the admin calls for
SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials).

The broker is our own (``tests/conftest.py``'s :class:`BrokerProcess`), one for the module, with
three listeners: PLAINTEXT (the first, the one the ready line names), SASL_PLAINTEXT (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512) and SASL_SSL (PLAIN and SCRAM-SHA-512 only, so SCRAM-SHA-256 there is
an unsupported mechanism). PLAIN users come from the listeners' JAAS entries; SCRAM users are
created by the tests with our admin client, authenticated with PLAIN. The broker answers Metadata
with the listener the request came on, so every connection after bootstrap (leaders, the group
coordinator, Fetch connections) authenticates too.

Property parsing and its errors need no broker; nor does the SCRAM server signature check, which
only a broker that lies can exercise: :func:`lying_scram_broker` plays one.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import scramp

from broker.client import (Admin, AdminConfig, Consumer, ConsumerConfig, NewTopic, Producer, ProducerConfig,
                           SaslSettings, TopicPartition, UserScramCredentialDeletion, UserScramCredentialUpsertion,
                           build_config)
from broker.client._sasl import parse_jaas_config, scram_credential
from broker.client.errors import (AuthenticationError, BrokerResponseError, ConfigError, KafkaConnectionError,
                                  UnsupportedSaslMechanismError)
from broker.protocol import ApiKey, FrameDecoder, decode_request, encode_response
from tests.conftest import BrokerProcess
from tests.pki import make_pki
from tests.zookeeper import free_port

LIMIT_S = 30  # guards against a hang, not performance assertions
PROMPT_S = 5  # an authentication failure is answered in well under this (the broker delays it 100 ms)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
ALICE, ALICE_SECRET = "alice", "alice-secret"  # a PLAIN user of both SASL listeners
SCRAM_USER, SCRAM_SECRET = "bob", 'b0b "s3cret" \\ pw'  # SCRAM-SHA-256 and -512 (quotes and a backslash: escapes)


# -- the broker ------------------------------------------------------------------------------------

@dataclass
class SaslBroker:
    broker: BrokerProcess
    plaintext: str
    sasl_plaintext: str
    sasl_ssl: str
    ca: str

    def topic(self) -> str:
        return f"sasl-{uuid.uuid4().hex[:10]}"

    def conf(self, mechanism: str = "PLAIN", username: str = ALICE, password: str = ALICE_SECRET, *,
             ssl: bool = False, **props: str) -> dict[str, str]:
        """Dotted client properties (as a properties file holds them) for one of the SASL listeners."""
        base = {"bootstrap.servers": self.sasl_ssl if ssl else self.sasl_plaintext,
                "security.protocol": "SASL_SSL" if ssl else "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": username, "sasl.password": password,
                "socket.connection.setup.timeout.ms": "5000", "request.timeout.ms": "10000"}
        if ssl:
            base["ssl.ca.location"] = self.ca
        return {**base, **props}


def jaas(module: str, username: str, password: str) -> str:
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{module} required username={quote(username)} password={quote(password)};"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """Our broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners (see the module docstring), and the
    SCRAM user bob (both mechanisms) created over SASL with our admin client."""
    pki = make_pki(tmp_path_factory.mktemp("sasl-pki"))
    workdir = tmp_path_factory.mktemp("sasl-broker")
    plain_users = f'{PLAIN_MODULE} required user_{ALICE}="{ALICE_SECRET}" user_carol="carol-secret";'
    broker = None
    for attempt in range(3):
        ports = free_port(), free_port()
        broker = BrokerProcess(workdir / str(attempt), {
            "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{ports[0]},"
                         f"SASL_SSL://127.0.0.1:{ports[1]}",
            "ssl.keystore.location": str(pki["server"]),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_users,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_users,
        })
        try:
            broker.start()
            break
        except RuntimeError:  # a port was taken meanwhile
            if attempt == 2:
                raise
    try:
        sb = SaslBroker(broker, broker.bootstrap, f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}", str(pki["ca"]))
        with Admin(sb.conf()) as admin:
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(SCRAM_USER, "SCRAM-SHA-256", SCRAM_SECRET, iterations=8192),
                UserScramCredentialUpsertion(SCRAM_USER, "SCRAM-SHA-512", SCRAM_SECRET)])
        yield sb
    finally:
        broker.stop()
        assert "Traceback" not in broker.stderr_text(), broker.traceback_excerpt()


def round_trip(conf: dict, topic: str, n: int = 4) -> list[bytes]:
    """Create ``topic``, produce ``n`` records and consume them back in a group, all with ``conf``."""
    with Admin(conf) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        cluster = admin.describe_cluster()
    values = [f"record-{i}".encode() for i in range(n)]
    with Producer(conf, linger_ms=0) as producer:
        metas = [f.result(LIMIT_S) for f in [producer.send(topic, v, key=str(i).encode())
                                             for i, v in enumerate(values)]]
    assert all(m.offset >= 0 for m in metas)
    got: list[bytes] = []
    with Consumer(conf, group_id=f"g-{topic}", auto_offset_reset="earliest", session_timeout_ms=6000) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + LIMIT_S
        while len(got) < n and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(200))
        consumer.commit()
    # the broker answered with the SASL listener's address: every later connection authenticated there
    assert [b.port for b in cluster.brokers] == [int(conf["bootstrap.servers"].rsplit(":", 1)[1])]
    return sorted(got)


def expect_auth_error(conf: dict, client=Admin, cls=AuthenticationError) -> AuthenticationError:
    """Building ``client`` with ``conf`` raises ``cls`` promptly, in one line, without the password."""
    started = time.monotonic()
    with pytest.raises(cls) as info:
        client(conf).close()
    assert time.monotonic() - started < PROMPT_S
    text = str(info.value)
    assert "\n" not in text
    assert conf["sasl.password"] not in text
    return info.value


EXPECTED = sorted(f"record-{i}".encode() for i in range(4))


# -- end to end ------------------------------------------------------------------------------------

def test_plain_over_sasl_plaintext(sasl_broker: SaslBroker) -> None:
    assert round_trip(sasl_broker.conf(), sasl_broker.topic()) == EXPECTED


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_over_sasl_plaintext(sasl_broker: SaslBroker, mechanism: str) -> None:
    conf = sasl_broker.conf(mechanism, SCRAM_USER, SCRAM_SECRET)
    assert round_trip(conf, sasl_broker.topic()) == EXPECTED


@pytest.mark.parametrize("mechanism, module", [("PLAIN", PLAIN_MODULE), ("SCRAM-SHA-512", SCRAM_MODULE)])
def test_sasl_ssl_with_the_java_jaas_config(sasl_broker: SaslBroker, mechanism: str, module: str) -> None:
    user, password = (ALICE, ALICE_SECRET) if mechanism == "PLAIN" else (SCRAM_USER, SCRAM_SECRET)
    conf = sasl_broker.conf(mechanism, ssl=True)
    del conf["sasl.username"], conf["sasl.password"]
    conf["sasl.jaas.config"] = jaas(module, user, password)
    assert round_trip(conf, sasl_broker.topic()) == EXPECTED


def test_keyword_names_and_the_librdkafka_spelling(sasl_broker: SaslBroker) -> None:
    """snake_case keywords, ``sasl_mechanisms`` (librdkafka's spelling) and lower-case values."""
    with Admin(bootstrap_servers=sasl_broker.sasl_ssl, security_protocol="sasl_ssl", ssl_ca_location=sasl_broker.ca,
               sasl_mechanisms="scram-sha-512", sasl_username=SCRAM_USER, sasl_password=SCRAM_SECRET) as admin:
        assert admin.describe_cluster().brokers
        assert admin.config.sasl == SaslSettings("SCRAM-SHA-512", SCRAM_USER, SCRAM_SECRET)


@pytest.mark.parametrize("mechanism, user", [("PLAIN", ALICE), ("SCRAM-SHA-256", SCRAM_USER),
                                             ("SCRAM-SHA-512", SCRAM_USER), ("SCRAM-SHA-256", "nobody")])
@pytest.mark.parametrize("client", [Admin, Producer, Consumer])
def test_a_wrong_password_fails_promptly(sasl_broker: SaslBroker, mechanism: str, user: str, client) -> None:
    err = expect_auth_error(sasl_broker.conf(mechanism, user, "wrong password"), client)
    assert err.error_code == 58 and err.error_name == "SASL_AUTHENTICATION_FAILED"
    assert err.error_message  # the broker's words
    assert not err.retriable
    assert f"SASL {mechanism} authentication of '{user}' at {sasl_broker.sasl_plaintext}" in str(err)


def test_a_wrong_password_over_tls(sasl_broker: SaslBroker) -> None:
    err = expect_auth_error(sasl_broker.conf("PLAIN", ALICE, "nope", ssl=True))
    assert err.error_code == 58


def test_a_mechanism_the_listener_does_not_enable(sasl_broker: SaslBroker) -> None:
    err = expect_auth_error(sasl_broker.conf("SCRAM-SHA-256", SCRAM_USER, SCRAM_SECRET, ssl=True),
                            cls=UnsupportedSaslMechanismError)
    assert err.error_code == 33 and err.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert "the broker offers PLAIN, SCRAM-SHA-512, not SCRAM-SHA-256 (see sasl.mechanism)" in str(err)


def test_sasl_to_a_plaintext_listener_says_so(sasl_broker: SaslBroker) -> None:
    conf = {**sasl_broker.conf(), "bootstrap.servers": sasl_broker.plaintext}
    err = expect_auth_error(conf)
    assert "is this a PLAINTEXT or SSL listener? see security.protocol" in str(err)


def test_plaintext_to_a_sasl_listener_fails(sasl_broker: SaslBroker) -> None:
    """No SASL where the listener wants it: the broker closes the connection at the first request
    that is not part of the exchange; the client says so and does not hang."""
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError) as info:
        Admin({"bootstrap.servers": sasl_broker.sasl_plaintext, "request.timeout.ms": "5000"}).close()
    assert time.monotonic() - started < PROMPT_S
    assert "closed by peer at the first request after ApiVersions (does the listener require SASL? see " \
           "security.protocol, sasl.mechanism)" in str(info.value)


def test_a_failure_after_start_surfaces(sasl_broker: SaslBroker) -> None:
    """A credential deleted while a producer runs: the next connection it opens fails to authenticate,
    the record's future raises AuthenticationError at once, and nothing is retried for ever."""
    user = f"tmp-{uuid.uuid4().hex[:6]}"
    with Admin(sasl_broker.conf()) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "pw-1")])
    conf = sasl_broker.conf("SCRAM-SHA-256", user, "pw-1")
    topic = sasl_broker.topic()
    with Admin(sasl_broker.conf()) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    producer = Producer(conf, linger_ms=0, delivery_timeout_ms=60000)
    try:
        assert producer.send(topic, b"before").result(LIMIT_S).offset == 0
        with Admin(sasl_broker.conf()) as admin:
            admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(user, "SCRAM-SHA-256")])
        # as if the broker had closed them (idle, restarted): the producer's next connections authenticate anew
        cluster = producer._core._cluster
        for conn in [*cluster._conns.values(), cluster._bootstrap_conn]:
            if conn is not None:
                conn.close()
        cluster.request_update()
        started = time.monotonic()
        with pytest.raises(AuthenticationError):
            producer.send(topic, b"after").result(LIMIT_S)
        assert time.monotonic() - started < PROMPT_S
    finally:
        producer.close(5)


def test_librdkafka_takes_the_same_properties(sasl_broker: SaslBroker) -> None:
    """The property names mean the same to librdkafka (confluent-kafka): a record it writes with SCRAM over
    SASL_SSL is read back by our consumer with the same dict; the same wrong password fails for both."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    props = {k: v for k, v in sasl_broker.conf("SCRAM-SHA-512", SCRAM_USER, SCRAM_SECRET, ssl=True).items()
             if not k.endswith("timeout.ms")}
    props["sasl.mechanisms"] = props.pop("sasl.mechanism")
    topic = sasl_broker.topic()
    with Admin(props) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    producer = confluent_kafka.Producer({**props, "message.timeout.ms": 10000})
    delivered = []
    producer.produce(topic, b"from librdkafka", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(LIMIT_S) == 0 and delivered == [None]
    with Consumer(props, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + LIMIT_S
        while not got and time.monotonic() < deadline:
            got = consumer.poll(200)
    assert [r.value for r in got] == [b"from librdkafka"]
    expect_auth_error({**props, "sasl.password": "wrong"})
    failed = []
    bad = confluent_kafka.Producer({**props, "sasl.password": "wrong", "message.timeout.ms": 3000,
                                    "error_cb": failed.append})
    bad.produce(topic, b"x")
    bad.flush(10)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in failed), failed


# -- SCRAM credentials: the admin calls -----------------------------------------------------------------

def test_describe_and_alter_scram_credentials(sasl_broker: SaslBroker) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    with Admin(sasl_broker.conf()) as admin:
        assert admin.describe_user_scram_credentials([SCRAM_USER])[SCRAM_USER] == [
            scram_info("SCRAM-SHA-256", 8192), scram_info("SCRAM-SHA-512", 4096)]
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, "scram-sha-512", "first", 5000)])
        assert admin.describe_user_scram_credentials()[user] == [scram_info("SCRAM-SHA-512", 5000)]
        with Admin(sasl_broker.conf("SCRAM-SHA-512", user, "first")) as as_user:
            assert as_user.describe_cluster().brokers
        # replaced: the old password no longer works, the new one does
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "second")])
        expect_auth_error(sasl_broker.conf("SCRAM-SHA-512", user, "first"))
        with Admin(sasl_broker.conf("SCRAM-SHA-512", user, "second")):
            pass
        admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(user, "SCRAM-SHA-512")])
        assert user not in admin.describe_user_scram_credentials()
        with pytest.raises(BrokerResponseError) as info:
            admin.describe_user_scram_credentials([user])
        assert info.value.error_name == "RESOURCE_NOT_FOUND" and f"user {user}" in str(info.value)
        with pytest.raises(BrokerResponseError) as info:
            admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(user, "SCRAM-SHA-512")])
        assert info.value.error_name == "RESOURCE_NOT_FOUND"
    expect_auth_error(sasl_broker.conf("SCRAM-SHA-512", user, "second"))


@pytest.mark.parametrize("upsertion, says", [
    (UserScramCredentialUpsertion("x", "SCRAM-SHA-1", "pw"), "SCRAM mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"),
    (UserScramCredentialUpsertion("x", "SCRAM-SHA-256", "pw", 4095), "iterations must be 4096 to 16384"),
    (UserScramCredentialUpsertion("x", "SCRAM-SHA-256", "pw", 16385), "iterations must be 4096 to 16384"),
    (UserScramCredentialUpsertion("x", "SCRAM-SHA-256", ""), "the password is empty"),
    (UserScramCredentialUpsertion("x", "SCRAM-SHA-256", "pass\u00a0word"), "changes under SASLprep"),
    (UserScramCredentialUpsertion("", "SCRAM-SHA-256", "pw"), "needs a user name"),
])
def test_bad_upsertions_are_refused_before_sending(sasl_broker: SaslBroker, upsertion, says: str) -> None:
    with Admin(sasl_broker.conf()) as admin:
        with pytest.raises(ConfigError, match=says):
            admin.alter_user_scram_credentials([upsertion])
        assert "x" not in admin.describe_user_scram_credentials()


def scram_info(mechanism: str, iterations: int):
    from broker.client import ScramCredentialInfo
    return ScramCredentialInfo(mechanism, iterations)


def test_the_salted_password_is_rfc_5802s_hi() -> None:
    """What AlterUserScramCredentials carries gives the keys scramp derives from the same password and salt
    (and so what scramp's client proves), for both hashes."""
    for mechanism, hf in (("SCRAM-SHA-256", hashlib.sha256), ("SCRAM-SHA-512", hashlib.sha512)):
        salt, salted = scram_credential(mechanism, "pencil", 4096)
        assert len(salt) == 32 and scram_credential(mechanism, "pencil", 4096)[0] != salt
        _, stored_key, server_key, _ = scramp.ScramMechanism(mechanism).make_auth_info("pencil", 4096, salt)
        assert hf(hmac.new(salted, b"Client Key", hf).digest()).digest() == stored_key
        assert hmac.new(salted, b"Server Key", hf).digest() == server_key


# -- settings: checked when the client is built ----------------------------------------------------

GOOD = {
    "librdkafka names": ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                          "sasl.username": "u", "sasl.password": "pw-1"}, ("PLAIN", "u", "pw-1")),
    "sasl.mechanisms, lower case": ({"security.protocol": "sasl_ssl", "sasl.mechanisms": "scram-sha-256",
                                     "sasl.username": "u", "sasl.password": "pw-1"}, ("SCRAM-SHA-256", "u", "pw-1")),
    "both spellings, the same": ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.mechanisms": "plain", "sasl.username": "u", "sasl.password": "pw-1"},
                                 ("PLAIN", "u", "pw-1")),
    "jaas plain": ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="alice-secret";'},
                   ("PLAIN", "alice", "alice-secret")),
    "jaas scram, escapes": ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.jaas.config": f'{SCRAM_MODULE} required\n  username="a\\"b" '
                                                 f'password="x\\\\y\\n\\tz\\q";'},
                            ("SCRAM-SHA-512", 'a"b', "x\\y\n\tzq")),
    "jaas bare words, other options, comments, flag case": (
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
         "sasl.jaas.config": f"{SCRAM_MODULE} REQUIRED /* c */ tokenauth=false username=svc-1 // c\n"
                             "password=p.w$1 ;"},
        ("SCRAM-SHA-256", "svc-1", "p.w$1")),
    "jaas with a mechanism of the other module (as Java)": (
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
         "sasl.jaas.config": f'{PLAIN_MODULE} optional username="u" password="pw-1";'}, ("SCRAM-SHA-256", "u", "pw-1")),
}


@pytest.mark.parametrize("case", list(GOOD))
def test_good_settings(case: str) -> None:
    props, expected = GOOD[case]
    for cls in (AdminConfig, ProducerConfig, ConsumerConfig):
        cfg = build_config(cls, props, {})
        assert cfg.sasl == SaslSettings(*expected)
        assert expected[2] not in repr(cfg) and expected[2] not in repr(cfg.sasl)
        if props["security.protocol"].upper() == "SASL_SSL":
            assert cfg.ssl_context is not None
        else:
            assert cfg.ssl_context is None


def test_sasl_settings_are_checked_but_unused_without_sasl() -> None:
    cfg = build_config(AdminConfig, {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u", "sasl.password": "p"},
                       {})
    assert cfg.sasl is None and cfg.security_protocol == "PLAINTEXT"
    # a GSSAPI setting of the wrong kind is refused even where SASL is not used
    with pytest.raises(ConfigError, match="is a GSSAPI setting"):
        build_config(AdminConfig, {"security.protocol": "SSL", "sasl.mechanism": "PLAIN",
                                   "sasl.kerberos.principal": "alice"}, {})


BAD = {
    "no mechanism": ({"sasl.username": "u", "sasl.password": "p"},
                     "security.protocol=SASL_PLAINTEXT needs sasl.mechanism: GSSAPI, PLAIN, SCRAM-SHA-256, "
                     "SCRAM-SHA-512 or OAUTHBEARER"),
    "GSSAPI with a password": ({"sasl.mechanism": "GSSAPI", "sasl.password": "p"},
                               "sasl.password is not used by GSSAPI"),
    "OAUTHBEARER without a token source": ({"sasl.mechanisms": "oauthbearer"},
                                           "sasl.mechanism=OAUTHBEARER needs a token source"),
    "unknown mechanism": ({"sasl.mechanism": "DIGEST-MD5"},
                          "sasl.mechanism must be GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER, "
                          "not 'DIGEST-MD5'"),
    "a list": ({"sasl.mechanisms": "PLAIN,SCRAM-SHA-256"}, "sasl.mechanisms takes one mechanism"),
    "two spellings differ": ({"sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-256"},
                             "sasl.mechanism and sasl.mechanisms are the same setting: give one"),
    "no password": ({"sasl.mechanism": "PLAIN", "sasl.username": "u"},
                    "security.protocol=SASL_PLAINTEXT needs sasl.username and sasl.password (or sasl.jaas.config)"),
    "empty user": ({"sasl.mechanism": "PLAIN", "sasl.username": "", "sasl.password": "p"},
                   "the SASL username is empty"),
    "jaas and username": ({"sasl.mechanism": "PLAIN", "sasl.username": "u",
                           "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="secret-1";'},
                          "give either sasl.jaas.config or sasl.username and sasl.password, not both"),
    "jaas kerberos": ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
                       "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
                      "sasl.jaas.config: login module com.sun.security.auth.module.Krb5LoginModule is for "
                      "sasl.mechanism=GSSAPI, not PLAIN"),
    "jaas oauth": ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
                   "login module org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule is for "
                   "sasl.mechanism=OAUTHBEARER, not PLAIN"),
    "jaas without ;": ({"sasl.mechanism": "PLAIN",
                        "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="secret-1"'},
                       "sasl.jaas.config: expected ; at the end of the login module entry"),
    "jaas without flag": ({"sasl.mechanism": "PLAIN",
                           "sasl.jaas.config": f'{PLAIN_MODULE} username="u" password="secret-1";'},
                          "sasl.jaas.config: expected the control flag (required) after PlainLoginModule"),
    "jaas two modules": ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
                          f'{PLAIN_MODULE} required username="u" password="secret-1"; '
                          f'{SCRAM_MODULE} required username="u" password="secret-1";'},
                         "sasl.jaas.config holds more than one login module: give one"),
    "jaas unterminated": ({"sasl.mechanism": "PLAIN",
                           "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="secret-1;'},
                          "sasl.jaas.config: an unterminated quoted value at character"),
    "jaas no password": ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN_MODULE} required username="u";'},
                         "sasl.jaas.config has no password option"),
    "jaas option twice": ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
                           f'{PLAIN_MODULE} required password="secret-1" password="secret-1";'},
                          "sasl.jaas.config: option password is given twice"),
    "jaas unquoted symbol": ({"sasl.mechanism": "PLAIN",
                              "sasl.jaas.config": f'{PLAIN_MODULE} required username=u password=secret-1@x;'},
                             "sasl.jaas.config: unexpected character at character 94 (a value that holds more than "
                             "letters, digits and _-.$ must be double-quoted)"),
    "jaas empty": ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "  "}, "sasl.jaas.config is empty"),
    "NUL in a PLAIN password": ({"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "a\0b"},
                                "a PLAIN username or password cannot hold a NUL character"),
    "unknown sasl property": ({"sasl.kerberos.kinit.cmd": "kinit"},
                              "unknown configuration 'sasl.kerberos.kinit.cmd'"),
    "kerberos setting without GSSAPI": ({"sasl.kerberos.service.name": "kafka"},
                                        "sasl.kerberos.service.name is a GSSAPI setting: set sasl.mechanism=GSSAPI"),
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("client", [Admin, Producer, Consumer])
def test_bad_sasl_settings_fail_when_the_client_is_built(case: str, client) -> None:
    props, says = BAD[case]
    conf = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT", **props}
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        client(conf).close()
    text = str(info.value)
    assert says in text and "\n" not in text, text
    assert "secret-1" not in text  # never the password, nor the JAAS text holding it
    assert time.monotonic() - started < 5  # refused before any connection attempt


def test_parse_jaas_config_returns_the_module_and_its_options() -> None:
    assert parse_jaas_config(f'{SCRAM_MODULE} required username="u" password="p" tokenauth="true";') == (
        SCRAM_MODULE, {"username": "u", "password": "p", "tokenauth": "true"})


def test_sasl_settings_for_the_brokers_own_links() -> None:
    """The frozen settings a BrokerConnection takes (``sasl=``); the password stays out of repr."""
    s = SaslSettings("scram-sha-256", "broker", "inter-broker-secret")
    assert s.mechanism == "SCRAM-SHA-256" and "inter-broker-secret" not in repr(s)
    with pytest.raises(ConfigError, match="GSSAPI needs a Kerberos login"):
        SaslSettings("GSSAPI", "u", "p")
    with pytest.raises(Exception):
        s.username = "other"  # frozen


# -- a broker whose SCRAM answer does not verify -----------------------------------------------------

class LyingScramBroker:
    """Answers ApiVersions, SaslHandshake and SaslAuthenticate like a SCRAM broker that holds ``password``
    for every user, except that its server-final signature is ``signature`` (base64) when given:
    the stand-in for a broker that does not know the credential (or is not the broker meant).
    ``lifetime_ms`` is the session lifetime it grants (KIP-368, which our broker does not serve)."""

    def __init__(self, password: str, signature: str | None, lifetime_ms: int = 0) -> None:
        self.password, self.signature, self.lifetime_ms = password, signature, lifetime_ms
        self.requests: list[int] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self.bootstrap = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            decoder = FrameDecoder(1 << 20)
            mech = scramp.ScramMechanism("SCRAM-SHA-256")
            salt, stored, server_key, iterations = mech.make_auth_info(self.password)
            server = mech.make_server(lambda _user: (salt, stored, server_key, iterations))
            stage = 0
            while True:
                buf = decoder.get_buffer()
                n = conn.recv_into(buf)
                if not n:
                    return
                for frame in decoder.buffer_updated(n):
                    header, body = decode_request(bytes(frame))
                    self.requests.append(header.api_key)
                    if header.api_key == ApiKey.API_VERSIONS:
                        out = {"error_code": 0, "api_keys": [
                            {"api_key": k, "min_version": 0, "max_version": v}
                            for k, v in ((ApiKey.API_VERSIONS, 3), (ApiKey.SASL_HANDSHAKE, 1),
                                         (ApiKey.SASL_AUTHENTICATE, 2), (ApiKey.METADATA, 12))],
                            "throttle_time_ms": 0}
                    elif header.api_key == ApiKey.SASL_HANDSHAKE:
                        out = {"error_code": 0, "mechanisms": ["SCRAM-SHA-256"]}
                    elif header.api_key == ApiKey.SASL_AUTHENTICATE:
                        token = bytes(body["auth_bytes"]).decode()
                        if stage == 0:
                            server.set_client_first(token)
                            answer = server.get_server_first()
                        else:
                            server.set_client_final(token)
                            answer = server.get_server_final()
                            if self.signature is not None:
                                answer = "v=" + self.signature
                        stage += 1
                        out = {"error_code": 0, "error_message": None, "auth_bytes": answer.encode(),
                               "session_lifetime_ms": self.lifetime_ms}
                    else:
                        return  # authenticated: nothing else is served
                    conn.sendall(b"".join(bytes(p) for p in encode_response(header, out)))

    def close(self) -> None:
        self._listener.close()
        self._thread.join(LIMIT_S)


@pytest.mark.parametrize("signature", [base64.b64encode(b"\x00" * 32).decode(), "not base64!"])
def test_a_server_signature_that_does_not_verify_fails(signature: str) -> None:
    broker = LyingScramBroker("pw", signature)
    try:
        conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u", "sasl.password": "pw",
                "request.timeout.ms": "5000"}
        err = expect_auth_error(conf)
        assert err.error_code == 58
        assert "the broker's SCRAM answer does not verify" in str(err)
        assert ApiKey.METADATA not in broker.requests  # nothing sent on a connection not authenticated
    finally:
        broker.close()


def test_the_honest_scram_broker_stand_in_verifies() -> None:
    """The same stand-in with a true signature: authentication succeeds and the client goes on to Metadata
    (which the stand-in does not serve, so the connection ends there)."""
    broker = LyingScramBroker("pw", None)
    try:
        conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u", "sasl.password": "pw",
                "request.timeout.ms": "5000"}
        with pytest.raises(KafkaConnectionError):
            Admin(conf).close()
        assert broker.requests[-1] == ApiKey.METADATA
    finally:
        broker.close()


def test_a_connection_is_retired_before_its_sasl_session_ends() -> None:
    """A broker that limits the session (``session_lifetime_ms``): the connection stops being ``usable``
    in the last tenth of it, so that the client opens and authenticates another instead of sending on one
    the broker will close; ``retire`` closes it once nothing is in flight."""
    from broker.client._connection import BrokerConnection

    broker = LyingScramBroker("pw", None, lifetime_ms=1000)
    host, port = broker.bootstrap.rsplit(":", 1)

    async def run() -> None:
        conn = BrokerConnection(host, int(port), request_timeout_ms=5000,
                                sasl=SaslSettings("SCRAM-SHA-256", "u", "pw"))
        await conn.connect()
        assert conn.usable
        await asyncio.sleep(0.95)
        assert not conn.usable and not conn.closed
        conn.retire()
        assert conn.closed

    try:
        asyncio.run(run())
    finally:
        broker.close()
