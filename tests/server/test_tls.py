"""SSL listeners: real clients (librdkafka, kafka-python, aiokafka) over TLS, client certificates,
per-listener settings, start-up refusals, and plaintext or broken handshakes on a TLS port.

Certificates come from ``trustme`` (a throwaway CA per test module). Every broker is a real
process started by ``broker_factory``; its PLAINTEXT listener is the first (the one the ready line
names), its SSL listener on a port chosen here.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import sys
import time

import pytest
import trustme
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from cryptography.hazmat.primitives import serialization

from tests.pki import make_pki
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _ssl_broker(broker_factory, pki, **props):
    port = free_port()
    base = {"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}",
            "ssl.keystore.location": str(pki["server"])}
    base.update(props)
    broker = broker_factory(base)
    broker.ssl_bootstrap = f"127.0.0.1:{port}"
    return broker


def _tls_conf(broker, pki, **extra) -> dict:
    return {"bootstrap.servers": broker.ssl_bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(pki["ca"]), "log_level": 0, **extra}


def _produce_and_consume(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({**conf, "acks": "all", "message.max.bytes": 2_000_000})
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


def test_librdkafka_produces_and_consumes_over_tls_and_each_listener_advertises_itself(broker_factory, pki):
    broker = _ssl_broker(broker_factory, pki)
    conf = _tls_conf(broker, pki)
    # 40 records of 200 KB: fetches of several MB, which TLS cannot send with sendfile
    values = [bytes([i]) * 200_000 for i in range(40)] + [b"small-%d" % i for i in range(200)]
    assert _produce_and_consume(conf, "over-tls", values) == values

    over_tls = AdminClient(conf).list_topics(timeout=10)
    ssl_port = int(broker.ssl_bootstrap.split(":")[1])
    assert [(b.host, b.port) for b in over_tls.brokers.values()] == [("127.0.0.1", ssl_port)]
    plain = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in plain.brokers.values()] == [("127.0.0.1", broker.port)]
    # the same data, read over the PLAINTEXT listener
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "plain-reader",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["over-tls"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == values


def test_kafka_python_and_aiokafka_over_tls(broker_factory, pki):
    from kafka import KafkaConsumer, KafkaProducer

    broker = _ssl_broker(broker_factory, pki)
    producer = KafkaProducer(bootstrap_servers=broker.ssl_bootstrap, security_protocol="SSL",
                             ssl_cafile=str(pki["ca"]), acks="all")
    for i in range(50):
        producer.send("kp-tls", b"kp-%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kp-tls", bootstrap_servers=broker.ssl_bootstrap, security_protocol="SSL",
                             ssl_cafile=str(pki["ca"]), auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                             group_id="kp")
    assert [m.value for m in consumer] == [b"kp-%d" % i for i in range(50)]
    consumer.close()

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(cafile=str(pki["ca"]))
        producer = AIOKafkaProducer(bootstrap_servers=broker.ssl_bootstrap, security_protocol="SSL",
                                    ssl_context=context, acks="all")
        await producer.start()
        try:
            for i in range(30):
                await producer.send_and_wait("aio-tls", b"aio-%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-tls", bootstrap_servers=broker.ssl_bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest", group_id="aio")
        await consumer.start()
        got = []
        try:
            while len(got) < 30:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for records in batch.values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(aio()) == [b"aio-%d" % i for i in range(30)]


def test_a_client_that_does_not_trust_the_broker_fails_the_handshake(broker_factory, pki):
    broker = _ssl_broker(broker_factory, pki)
    errors = []
    admin = AdminClient(_tls_conf(broker, pki, **{"ssl.ca.location": str(pki["other_ca"]),
                                                  "error_cb": errors.append}))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(1)  # serves error_cb
    assert any("certificate verify failed" in str(e) for e in errors), errors
    # the broker goes on serving others
    assert AdminClient(_tls_conf(broker, pki)).list_topics(timeout=10).brokers


def test_client_auth_required_refuses_a_client_without_a_certificate(broker_factory, pki):
    broker = _ssl_broker(broker_factory, pki, **{"ssl.client.auth": "required",
                                                 "ssl.truststore.location": str(pki["ca"])})
    errors = []
    without = AdminClient(_tls_conf(broker, pki, error_cb=errors.append))
    with pytest.raises(KafkaException):
        without.list_topics(timeout=5)
    without.poll(1)
    assert errors, "a client without a certificate was let in"
    assert "no client certificate, and ssl.client.auth is required" in broker.stderr_text()
    with_cert = _tls_conf(broker, pki, **{"ssl.certificate.location": str(pki["client_cert"]),
                                          "ssl.key.location": str(pki["client_key"])})
    assert _produce_and_consume(with_cert, "mtls", [b"a", b"b"]) == [b"a", b"b"]


def test_client_auth_requested_takes_clients_with_or_without_a_certificate(broker_factory, pki):
    broker = _ssl_broker(broker_factory, pki, **{"ssl.client.auth": "requested",
                                                 "ssl.truststore.location": str(pki["ca"])})
    assert AdminClient(_tls_conf(broker, pki)).list_topics(timeout=10).brokers
    with_cert = _tls_conf(broker, pki, **{"ssl.certificate.location": str(pki["client_cert"]),
                                          "ssl.key.location": str(pki["client_key"])})
    assert AdminClient(with_cert).list_topics(timeout=10).brokers
    # a certificate from a CA the broker does not trust is refused, even though none was required
    foreign = trustme.CA().issue_cert("stranger")
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    with foreign.private_key_and_cert_chain_pem.tempfile() as both:
        context.load_cert_chain(both)
    host, port = broker.ssl_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(_api_versions_frame())
                if not tls.recv(4):  # TLS 1.3: the refusal arrives after the handshake
                    raise ConnectionError("closed")


def _api_versions_frame() -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def _metric(broker, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name)]
    return sum(values)


def test_plaintext_and_broken_handshakes_close_only_their_connection(broker_factory, pki):
    broker = _ssl_broker(broker_factory, pki)
    host, port = broker.ssl_bootstrap.split(":")
    # TCP health checks (a load balancer's, an orchestrator's): connect and close, nothing said
    for _ in range(5):
        socket.create_connection((host, int(port)), timeout=15).close()
    # a Kafka request in plaintext on the TLS port, three times
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=15) as raw:
            raw.sendall(_api_versions_frame())
            assert raw.recv(100) == b""
    # a client that connects and says nothing: the handshake times out on the broker's side only; meanwhile
    # a TLS client and a plaintext one are served
    idle = socket.create_connection((host, int(port)), timeout=15)
    try:
        assert AdminClient(_tls_conf(broker, pki)).list_topics(timeout=10).brokers
        assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).brokers
    finally:
        idle.close()
    assert broker.running()
    time.sleep(1)  # what the broker logs about the closed connections
    log = broker.stderr_text()
    assert "Traceback" not in log and "exception was never retrieved" not in log, log
    assert log.count("on listener SSL failed: not TLS (a plaintext client on the TLS port?)") == 3
    # the plaintext requests count, the silent health checks do not; the idle client (closed before its
    # handshake timed out) may count too
    assert 3 <= _metric(broker, "kafkapy_tls_handshake_failures_total{") <= 4
    # nothing that failed its handshake was ever a connection; the clients above have all closed
    deadline = time.monotonic() + 10
    while _metric(broker, "kafkapy_active_connections ") != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _metric(broker, "kafkapy_active_connections ") == 0


def test_inline_pem_key_store_and_per_listener_settings(broker_factory, pki):
    port = free_port()
    chain = pki["server_cert"].read_text()
    key = pki["server_key"].read_text()
    broker = broker_factory({
        "listeners": f"PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL",
        "listener.name.external.ssl.keystore.certificate.chain": chain,
        "listener.name.external.ssl.keystore.key": key,
        "listener.name.external.ssl.client.auth": "required",
        "listener.name.external.ssl.truststore.certificates": pki["ca"].read_text(),
    })
    broker.ssl_bootstrap = f"127.0.0.1:{port}"
    conf = _tls_conf(broker, pki, **{"ssl.certificate.location": str(pki["client_cert"]),
                                     "ssl.key.location": str(pki["client_key"])})
    assert _produce_and_consume(conf, "inline", [b"x"]) == [b"x"]
    # DescribeConfigs never gives the private key away
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    assert entries["ssl.key.password"].is_sensitive and entries["ssl.key.password"].value is None
    assert entries["ssl.keystore.key"].is_sensitive
    assert entries["ssl.client.auth"].value == "none"  # the broker-wide value; the listener overrides it


def test_encrypted_private_key_with_ssl_key_password(broker_factory, pki, tmp_path):
    key = serialization.load_pem_private_key(pki["server_key"].read_bytes(), password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    store = tmp_path / "encrypted.pem"
    store.write_bytes(encrypted + pki["server_cert"].read_bytes())
    broker = _ssl_broker(broker_factory, pki, **{"ssl.keystore.location": str(store), "ssl.key.password": "s3cret"})
    assert AdminClient(_tls_conf(broker, pki)).list_topics(timeout=10).brokers
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    assert entries["ssl.key.password"].is_sensitive and entries["ssl.key.password"].value is None
    assert "s3cret" not in broker.stderr_text()


def _start_fails(tmp_path, props: dict) -> subprocess.CompletedProcess:
    import yaml

    config = tmp_path / "broker.yaml"
    config.write_text(yaml.safe_dump({"broker.id": 0, "log.dirs": str(tmp_path / "data"), "metrics.port": -1,
                                      "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{free_port()}",
                                      **props}))
    # stdin a terminal would be, were OpenSSL to ask for a passphrase: it must not (it would hang there)
    return subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("case", ["missing", "not pem", "wrong key", "wrong password", "jks", "no key store",
                                  "no password", "jks file", "bad algorithm"])
def test_a_key_store_that_cannot_be_used_stops_the_start_and_writes_nothing(tmp_path, pki, case):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_bytes(pki["client_key"].read_bytes() + pki["server_cert"].read_bytes())
    key = serialization.load_pem_private_key(pki["server_key"].read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.pem"
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"right"))
                          + pki["server_cert"].read_bytes())
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))  # a Java key store's magic number
    props, code, fragment = {
        "missing": ({"ssl.keystore.location": str(tmp_path / "absent.pem")}, 1,
                    "ssl.keystore.location " + str(tmp_path / "absent.pem") + ": No such file"),
        "not pem": ({"ssl.keystore.location": str(junk)}, 1, "not a PEM private key with its certificate chain"),
        "wrong key": ({"ssl.keystore.location": str(mismatched)}, 1, "does not belong to the certificate"),
        "wrong password": ({"ssl.keystore.location": str(encrypted), "ssl.key.password": "wrong"}, 1,
                           "ssl.key.password"),
        "jks": ({"ssl.keystore.location": "/etc/kafka/broker.jks", "ssl.keystore.type": "JKS"}, 2,
                "only PEM keystores"),
        "no key store": ({}, 2, "has no key store"),
        "no password": ({"ssl.keystore.location": str(encrypted)}, 1, "encrypted: set ssl.key.password"),
        "jks file": ({"ssl.keystore.location": str(jks)}, 1, "a JKS keystore, not PEM: convert it"),
        "bad algorithm": ({"ssl.keystore.location": str(pki["server"]),
                           "ssl.endpoint.identification.algorithm": "HTTP"}, 2, "not https or empty"),
    }[case]
    result = _start_fails(tmp_path, props)
    assert result.returncode == code, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("broker:")]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists(), "a start that failed wrote into the data dir"
    assert "right" not in result.stderr


def test_inline_pem_continued_over_lines_in_a_server_properties_file(tmp_path, pki):
    """KIP-651's inline PEM as an operator writes it in server.properties: one value continued with
    backslashes (the properties reader joins the lines with their leading blanks dropped)."""
    def continued(pem: str) -> str:
        return " \\\n    ".join(pem.strip().splitlines())

    port = free_port()
    properties = tmp_path / "server.properties"
    properties.write_text("\n".join([
        "broker.id=0", f"log.dirs={tmp_path / 'data'}", "metrics.port=-1",
        f"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}",
        "offsets.topic.replication.factor=1",
        "ssl.keystore.certificate.chain=" + continued(pki["server_cert"].read_text()),
        "ssl.keystore.key=" + continued(pki["server_key"].read_text()),
    ]) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "broker", "--config", str(properties)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("broker ready:"), proc.stderr.read() if proc.poll() is not None else line
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                             "ssl.ca.location": str(pki["ca"]), "log_level": 0})
        assert admin.list_topics(timeout=10).brokers
    finally:
        proc.terminate()
        assert proc.wait(60) == 0


def test_describe_configs_answers_the_protocol_map_as_kafka_writes_it(broker_factory, pki):
    broker = _ssl_broker(broker_factory, pki, **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    assert entries["listener.security.protocol.map"].value == "PLAINTEXT:PLAINTEXT,SSL:SSL"
    assert entries["ssl.keystore.location"].value == str(pki["server"])
    assert entries["ssl.keystore.certificate.chain"].is_sensitive
