"""SASL listeners: real clients (librdkafka, kafka-python, aiokafka) with PLAIN and SCRAM-SHA-256/512 over
SASL_PLAINTEXT and SASL_SSL, SCRAM credentials made and changed with AlterUserScramCredentials, failed
authentications, requests out of turn, the v0 exchange in bare frames, and start-up refusals.

Every broker is a real process (``broker_factory``); its PLAINTEXT listener is the first (the one the
ready line names), its SASL listener on a port chosen here.
"""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from broker.protocol import ApiKey, ErrorCode, encode_request
from tests.pki import make_pki
from tests.zookeeper import free_port

from .wire import Wire

pytestmark = pytest.mark.clients

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _sasl_broker(broker_factory, protocol: str = "SASL_PLAINTEXT", mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                 **props):
    port = free_port()
    base = {"listeners": f"PLAINTEXT://127.0.0.1:0,{protocol}://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": mechanisms,
            f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": PLAIN_JAAS}
    base.update(props)
    broker = broker_factory(base)
    broker.sasl_bootstrap = f"127.0.0.1:{port}"
    return broker


def _conf(broker, mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT", **extra) -> dict:
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "log_level": 0, **extra}


def _set_scram(admin: AdminClient, user: str, password: str, mechanism=ScramMechanism.SCRAM_SHA_256,
               iterations: int = 4096) -> None:
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password.encode())])
    for future in futures.values():
        future.result(timeout=15)


def _produce_and_consume(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({**conf, "acks": "all"})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def _metric(broker, prefix: str) -> float:
    text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def _auth_error(conf: dict, within: float = 15.0) -> KafkaError:
    """The first error librdkafka reports for ``conf`` (it must come, and promptly)."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    started = time.monotonic()
    while not errors and time.monotonic() - started < within:
        admin.poll(0.2)
    assert errors, f"no error reported within {within} s"
    return errors[0]


def test_librdkafka_with_plain_and_scram_over_sasl_plaintext(broker_factory):
    broker = _sasl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret"))
    _set_scram(admin, "bob", "bob-secret", ScramMechanism.SCRAM_SHA_256, 8192)
    _set_scram(admin, "bob", "bob-secret", ScramMechanism.SCRAM_SHA_512)
    values = [b"record-%d" % i for i in range(300)]
    assert _produce_and_consume(_conf(broker, "PLAIN", "alice", "alice-secret"), "plain", values) == values
    assert _produce_and_consume(_conf(broker, "SCRAM-SHA-256", "bob", "bob-secret"), "s256", values) == values
    assert _produce_and_consume(_conf(broker, "SCRAM-SHA-512", "bob", "bob-secret"), "s512", values) == values
    # what the admin client describes: mechanisms and iterations, never a key
    described = admin.describe_user_scram_credentials(["bob"])
    infos = {(i.mechanism, i.iterations) for i in described["bob"].result(timeout=10).scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)}
    assert _metric(broker, "kafkapy_successful_authentication_total{") >= 6
    assert _metric(broker, "kafkapy_failed_authentication_total{") == 0
    assert "bob-secret" not in broker.stderr_text() and "alice-secret" not in broker.stderr_text()


def test_scram_over_sasl_ssl(broker_factory, pki):
    broker = _sasl_broker(broker_factory, "SASL_SSL", "SCRAM-SHA-512,PLAIN",
                          **{"ssl.keystore.location": str(pki["server"])})
    tls = {"ssl.ca.location": str(pki["ca"])}
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret", "SASL_SSL", **tls))
    _set_scram(admin, "carol", "carol-secret", ScramMechanism.SCRAM_SHA_512)
    values = [bytes([i]) * 50_000 for i in range(20)]  # fetches of a MB: read through TLS, not sendfile
    conf = _conf(broker, "SCRAM-SHA-512", "carol", "carol-secret", "SASL_SSL", **tls)
    assert _produce_and_consume(conf, "over-sasl-ssl", values) == values
    # SASL_SSL is TLS first: a plaintext SASL client gets nowhere
    error = _auth_error(_conf(broker, "SCRAM-SHA-512", "carol", "carol-secret"))
    assert error.code() in (KafkaError._TRANSPORT, KafkaError._AUTHENTICATION, KafkaError._ALL_BROKERS_DOWN)


def test_kafka_python_and_aiokafka_with_plain_and_scram(broker_factory):
    from kafka import KafkaConsumer, KafkaProducer

    broker = _sasl_broker(broker_factory)
    _set_scram(AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret")), "dave", "dave-secret")
    sent = []
    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "dave", "dave-secret")):
        producer = KafkaProducer(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                                 acks="all")
        for i in range(20):
            producer.send("kp-sasl", b"%s-%d" % (mechanism.encode(), i))
            sent.append(b"%s-%d" % (mechanism.encode(), i))
        producer.flush(30)
        producer.close()
    consumer = KafkaConsumer("kp-sasl", bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="dave",
                             sasl_plain_password="dave-secret", auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, group_id="kp")
    assert [m.value for m in consumer] == sent
    consumer.close()

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="dave",
                                    sasl_plain_password="dave-secret")
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait("aio-sasl", b"aio-%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-sasl", bootstrap_servers=broker.sasl_bootstrap,
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                    sasl_plain_username="alice", sasl_plain_password="alice-secret",
                                    auto_offset_reset="earliest", group_id="aio")
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < 20 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(aio()) == [b"aio-%d" % i for i in range(20)]


def test_wrong_passwords_and_unknown_users_fail_promptly_with_kafkas_messages(broker_factory):
    broker = _sasl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret"))
    _set_scram(admin, "erin", "erin-secret")
    cases = [
        (_conf(broker, "PLAIN", "alice", "wrong"), "Authentication failed: Invalid username or password"),
        (_conf(broker, "PLAIN", "nobody", "x"), "Authentication failed: Invalid username or password"),
        (_conf(broker, "SCRAM-SHA-256", "erin", "wrong"), "invalid credentials with SASL mechanism SCRAM-SHA-256"),
        (_conf(broker, "SCRAM-SHA-256", "nobody", "x"), "invalid credentials with SASL mechanism SCRAM-SHA-256"),
        # erin has no SCRAM-SHA-512 credential
        (_conf(broker, "SCRAM-SHA-512", "erin", "erin-secret"), "invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ]
    for conf, message in cases:
        started = time.monotonic()
        error = _auth_error(conf)
        assert error.code() == KafkaError._AUTHENTICATION, error
        assert message in error.str(), error.str()
        assert time.monotonic() - started < 10
    log = broker.stderr_text()
    assert "SASL authentication failed (PLAIN): user 'alice': wrong password" in log
    assert "SASL authentication failed (SCRAM-SHA-256): user 'nobody': no SCRAM-SHA-256 credential" in log
    assert "erin-secret" not in log
    assert _metric(broker, 'kafkapy_failed_authentication_total{listener="SASL_PLAINTEXT",mechanism="PLAIN"}') >= 2
    assert _metric(broker, 'kafkapy_failed_authentication_total{listener="SASL_PLAINTEXT",mechanism="SCRAM-SHA-256"}') >= 2
    # and under Kafka's name, which the alert rule KafkaAuthenticationFailures reads
    assert _metric(broker, 'kafka_server_socket_server_metrics_failed_authentication_total{listener="SASL_PLAINTEXT"}') \
        >= 5
    # the failures closed only their own connections
    assert AdminClient(_conf(broker, "SCRAM-SHA-256", "erin", "erin-secret")).list_topics(timeout=10).brokers


def test_a_changed_or_deleted_credential_is_in_force_at_once(broker_factory):
    broker = _sasl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret"))
    _set_scram(admin, "frank", "old-password")
    assert AdminClient(_conf(broker, "SCRAM-SHA-256", "frank", "old-password")).list_topics(timeout=10).brokers
    _set_scram(admin, "frank", "new-password")
    assert _auth_error(_conf(broker, "SCRAM-SHA-256", "frank", "old-password")).code() == KafkaError._AUTHENTICATION
    assert AdminClient(_conf(broker, "SCRAM-SHA-256", "frank", "new-password")).list_topics(timeout=10).brokers
    futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_256)])
    futures["frank"].result(timeout=10)
    assert _auth_error(_conf(broker, "SCRAM-SHA-256", "frank", "new-password")).code() == KafkaError._AUTHENTICATION
    # the user keeps its node without a credential, as Kafka writes it
    nodes = json.loads((broker.workdir / "data" / "metadata-store.json").read_text())["nodes"]
    assert json.loads(nodes["/config/users/frank"]["data"])["config"] == {}
    assert admin.describe_user_scram_credentials().result(timeout=10) == {}


def test_scram_credentials_are_kept_as_kafka_keeps_them_and_survive_a_restart(broker_factory):
    broker = _sasl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret"))
    _set_scram(admin, "grace@example.com", "grace-secret", ScramMechanism.SCRAM_SHA_512, 5000)
    nodes = json.loads((broker.workdir / "data" / "metadata-store.json").read_text())["nodes"]
    stored = json.loads(nodes["/config/users/grace%40example.com"]["data"])
    credential = stored["config"]["SCRAM-SHA-512"]
    fields = dict(item.split("=", 1) for item in credential.split(","))
    assert set(fields) == {"salt", "stored_key", "server_key", "iterations"} and fields["iterations"] == "5000"
    assert "grace-secret" not in json.dumps(nodes)
    changes = [n for n in nodes if n.startswith("/config/changes/config_change_")]
    assert any(json.loads(nodes[n]["data"])["entity_path"] == "users/grace%40example.com" for n in changes)
    broker.restart()
    conf = _conf(broker, "SCRAM-SHA-512", "grace@example.com", "grace-secret")
    assert _produce_and_consume(conf, "after-restart", [b"kept"]) == [b"kept"]


def test_scram_credential_admin_errors_are_kafkas(broker_factory):
    broker = _sasl_broker(broker_factory)
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret"))
    low = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "henry", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])
    with pytest.raises(Exception, match="Too few iterations"):
        low["henry"].result(timeout=10)
    high = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "henry", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 20000), b"pw")])
    with pytest.raises(Exception, match="Too many iterations"):
        high["henry"].result(timeout=10)
    missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion("henry", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(Exception, match="does not exist"):
        missing["henry"].result(timeout=10)
    with pytest.raises(Exception, match="does not exist"):
        admin.describe_user_scram_credentials(["henry"])["henry"].result(timeout=10)
    # nothing was written for henry by the refused requests; describing everyone lists nobody
    assert admin.describe_user_scram_credentials().result(timeout=10) == {}


def _frame(api_key: int, version: int, body: dict, correlation_id: int = 1) -> bytes:
    return encode_request(api_key, version, correlation_id, "wire", body)


def test_requests_before_authentication_and_unknown_mechanisms_close_the_connection(broker_factory):
    broker = _sasl_broker(broker_factory, mechanisms="SCRAM-SHA-256")
    # ApiVersions is allowed first; a Metadata before the exchange closes the connection, unanswered
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0
        w.send(ApiKey.METADATA, 1, {"topics": []})
        assert w.is_closed_by_peer()
    # a mechanism that is not enabled: the answer lists the enabled ones, then the connection closes
    with Wire(broker.sasl_bootstrap) as w:
        body = w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert body == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["SCRAM-SHA-256"]}
        assert w.is_closed_by_peer()
    # SaslAuthenticate without a handshake, and anything but SaslAuthenticate after one: closed unanswered
    with Wire(broker.sasl_bootstrap) as w:
        w.send(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"n,,n=a,r=x"})
        assert w.is_closed_by_peer()
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        w.send(ApiKey.API_VERSIONS, 2, {})
        assert w.is_closed_by_peer()
    # made-up mechanism names do not become metric labels (a client could grow the metrics without end)
    for i in range(5):
        with Wire(broker.sasl_bootstrap) as w:
            w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": f"MADE-UP-{i}"})
    text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    assert "MADE-UP" not in text
    assert _metric(broker, 'kafkapy_failed_authentication_total{listener="SASL_PLAINTEXT",mechanism="unsupported"}') \
        >= 5
    # before authentication a frame may not exceed sasl.server.max.receive.size (512 KiB)
    with Wire(broker.sasl_bootstrap) as w:
        w.send_raw(struct.pack(">i", 600_000) + b"\0" * 1000)
        assert w.is_closed_by_peer()
    time.sleep(0.5)
    log = broker.stderr_text()
    assert "SASL exchange refused: Metadata before SASL authentication" in log
    assert "SASL exchange refused: mechanism 'PLAIN' is not enabled (SCRAM-SHA-256)" in log
    assert "Traceback" not in log
    assert broker.running()


def test_the_v0_exchange_in_bare_frames(broker_factory):
    """SaslHandshake v0: the tokens travel as bare size-prefixed frames (Kafka 0.10's protocol)."""
    broker = _sasl_broker(broker_factory)
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0alice\0alice-secret"
        w.send_raw(struct.pack(">i", len(token)) + token)
        assert w.read_frame() == b""  # PLAIN's empty answer
        assert w.call(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0alice\0wrong"
        w.send_raw(struct.pack(">i", len(token)) + token)
        assert w.is_closed_by_peer()  # v0 has no error answer: the connection closes
    # a request sent right behind the token, in the same write, is served once the token is accepted
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0alice\0alice-secret"
        w.correlation_id = 7
        w.send_raw(struct.pack(">i", len(token)) + token + encode_request(ApiKey.METADATA, 1, 8, "wire", {"topics": []}))
        assert w.read_frame() == b""
        correlation_id, body = w.receive(ApiKey.METADATA, 1)
        assert correlation_id == 8 and body["brokers"]
    assert "SASL authentication failed (PLAIN): malformed" not in broker.stderr_text()


def test_scram_names_the_store_cannot_hold_and_empty_plain_passwords_fail_cleanly(broker_factory):
    jaas = PLAIN_JAAS.replace('user_alice="alice-secret";', 'user_alice="alice-secret" user_bob="";')
    broker = _sasl_broker(broker_factory, **{"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas})
    for name in ("", "..", "a=b"):  # empty, not a node name, an '=' outside RFC 5802's escapes
        with Wire(broker.sasl_bootstrap) as w:
            assert w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
            body = w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": f"n,,n={name},r=abcdef".encode()})
            assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED, (name, body)
            assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in body["error_message"]
            assert w.is_closed_by_peer()
    error = _auth_error(_conf(broker, "PLAIN", "bob", "x"))  # bob's configured password is empty: nothing matches
    assert "Invalid username or password" in error.str()
    with Wire(broker.sasl_bootstrap) as w:
        assert w.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        body = w.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0bob\0"})
        assert (body["error_code"], body["error_message"]) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                               "Authentication failed: password not specified")
    admin = AdminClient(_conf(broker, "PLAIN", "alice", "alice-secret"))
    with pytest.raises(Exception, match="cannot be stored"):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "..", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")])[".."].result(timeout=10)
    log = broker.stderr_text()
    assert "ERROR" not in log and "Traceback" not in log, log


def test_principal_stays_per_connection_and_plaintext_listener_is_open(broker_factory):
    """The PLAINTEXT listener beside a SASL one needs no authentication (as in Kafka)."""
    broker = _sasl_broker(broker_factory, mechanisms="PLAIN")
    assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).brokers
    metadata = AdminClient(_conf(broker, "PLAIN", "alice", "alice-secret")).list_topics(timeout=10)
    sasl_port = int(broker.sasl_bootstrap.split(":")[1])
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", sasl_port)]


def _start_fails(tmp_path, props: dict) -> subprocess.CompletedProcess:
    import yaml

    config = tmp_path / "broker.yaml"
    config.write_text(yaml.safe_dump({"broker.id": 0, "log.dirs": str(tmp_path / "data"), "metrics.port": -1,
                                      "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                                      **props}))
    return subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("case", ["gssapi default", "plain without jaas", "no users", "bad jaas", "wrong module",
                                  "upper-case mechanism", "reauth", "unclosed quote"])
def test_sasl_settings_that_cannot_be_used_stop_the_start_and_write_nothing(tmp_path, case):
    jaas = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    props, fragment = {
        "gssapi default": ({}, "listener SASL_PLAINTEXT enables GSSAPI but "
                               "listener.name.sasl_plaintext.gssapi.sasl.jaas.config is not set"),
        "plain without jaas": ({"sasl.enabled.mechanisms": "PLAIN"}, f"{jaas} is not set"),
        "no users": ({"sasl.enabled.mechanisms": "PLAIN",
                      jaas: 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
                            'password="b";'}, "no user_<name>"),
        "bad jaas": ({"sasl.enabled.mechanisms": "PLAIN", jaas: 'PlainLoginModule user_a="b"'},
                     "expected '<LoginModule class> required"),
        "wrong module": ({"sasl.enabled.mechanisms": "PLAIN",
                          jaas: 'org.apache.kafka.common.security.scram.ScramLoginModule required user_a="b";'},
                         "PLAIN takes org.apache.kafka.common.security.plain.PlainLoginModule"),
        "upper-case mechanism": ({"sasl.enabled.mechanisms": "PLAIN",
                                  "listener.name.sasl_plaintext.PLAIN.sasl.jaas.config": "x"},
                                 "write the mechanism in lower case"),
        "reauth": ({"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                    "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": -5},
                   "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms: -5 is out of range"),
        "unclosed quote": ({"sasl.enabled.mechanisms": "PLAIN",
                            jaas: 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  'user_alice="s3cret-word;'}, "cannot read the JAAS configuration at character"),
    }[case]
    result = _start_fails(tmp_path, props)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("broker:")]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists(), "a start that failed wrote into the data dir"
    assert "s3cret-word" not in result.stderr
