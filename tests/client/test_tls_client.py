"""Our client over TLS (``security.protocol=SSL``, librdkafka's ``ssl.*`` names).

The broker under test is our own, started plainly (``tests/conftest.py``'s
:class:`BrokerProcess`) behind :class:`TlsProxy`, a TLS-terminating proxy run
by the test: the stand-in for a broker's SSL listener. The broker advertises
the proxy's address (``advertised.listeners``), so every connection a client
opens after bootstrap (partition leaders, the group coordinator, Fetch
connections) is TLS through the proxy too. Certificates come from ``trustme``:
a CA, a server certificate for 127.0.0.1 and localhost, one for another name,
client certificates, and a second CA that signed none of them.

The proxy's TLS side (server certificate, client certificates required or not)
is chosen per test; one broker and one proxy serve the module.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from broker.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from broker.client.errors import ConfigError, KafkaConnectionError
from tests.conftest import BrokerProcess

LIMIT_S = 30  # guards against a hang, not performance assertions
KEY_PASSWORD = "s3cret pass"


# -- certificates ------------------------------------------------------------------------------

@dataclass
class Certs:
    """PEM files (paths as text, as a properties file holds them) and the trustme objects behind them."""

    dir: Path
    ca: trustme.CA
    server: trustme.LeafCert        # 127.0.0.1 and localhost
    wrong_name: trustme.LeafCert    # kafka.example only
    client: trustme.LeafCert        # client.example, for client authentication
    ca_pem: str
    other_ca_pem: str               # a CA that signed nothing here
    client_cert: str                # the client certificate alone
    client_key: str                 # its private key alone, unencrypted
    client_key_encrypted: str       # the same key, encrypted with KEY_PASSWORD
    client_keystore: str            # key (unencrypted) and certificate chain in one file
    client_keystore_encrypted: str  # key (encrypted with KEY_PASSWORD) and chain in one file
    other_key: str                  # a private key that matches none of the certificates

    def server_context(self, leaf: trustme.LeafCert | None = None, require_client_cert: bool = False,
                       max_tls12: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        (leaf or self.server).configure_cert(ctx)
        if require_client_cert:
            self.ca.configure_trust(ctx)
            ctx.verify_mode = ssl.CERT_REQUIRED
        if max_tls12:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        return ctx


def _encrypted(key_pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(KEY_PASSWORD.encode()))


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    d = tmp_path_factory.mktemp("certs")
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    wrong_name = ca.issue_cert("kafka.example")
    client = ca.issue_cert("client.example")
    stranger = ca.issue_cert("stranger.example")

    def write(name: str, data: bytes) -> str:
        (d / name).write_bytes(data)
        return str(d / name)

    chain = b"".join(blob.bytes() for blob in client.cert_chain_pems)
    key = client.private_key_pem.bytes()
    return Certs(
        dir=d, ca=ca, server=server, wrong_name=wrong_name, client=client,
        ca_pem=write("ca.pem", ca.cert_pem.bytes()),
        other_ca_pem=write("other-ca.pem", other_ca.cert_pem.bytes()),
        client_cert=write("client.crt", chain),
        client_key=write("client.key", key),
        client_key_encrypted=write("client-encrypted.key", _encrypted(key)),
        client_keystore=write("client-keystore.pem", key + chain),
        client_keystore_encrypted=write("client-keystore-encrypted.pem", _encrypted(key) + chain),
        other_key=write("stranger.key", stranger.private_key_pem.bytes()),
    )


# -- the TLS-terminating proxy ---------------------------------------------------------------------

class TlsProxy:
    """TLS on ``127.0.0.1:port`` in front of a plain TCP ``target`` (host, port), in its own
    event loop thread. ``server_ctx`` is read per accepted connection, so a test can change
    the proxy's certificate or require client certificates; ``handshakes`` counts the TLS
    handshakes completed, ``failures`` holds the handshake errors it saw, ``client_certs``
    the certificates clients presented (``getpeercert()`` dicts)."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.target: tuple[str, int] | None = None
        self.server_ctx: ssl.SSLContext | None = None
        self.handshakes = 0
        self.failures: list[BaseException] = []
        self.client_certs: list[dict] = []
        self._tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="tls-proxy", daemon=True)

    def start(self) -> "TlsProxy":
        self._thread.start()
        self._accepting = asyncio.run_coroutine_threadsafe(self._accept(), self.loop)
        return self

    def reset(self, ctx: ssl.SSLContext) -> None:
        self.server_ctx = ctx
        self.handshakes = 0
        self.failures.clear()
        self.client_certs.clear()

    async def _accept(self) -> None:
        while True:
            sock, _ = await self.loop.sock_accept(self._listener)
            task = asyncio.ensure_future(self._serve(sock))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, sock: socket.socket) -> None:
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            # the accepted socket is untouched until here, so the TLS handshake starts from its first byte
            transport, _ = await asyncio.wait_for(
                self.loop.connect_accepted_socket(lambda: protocol, sock, ssl=self.server_ctx,
                                                  ssl_handshake_timeout=LIMIT_S), LIMIT_S)
        except (OSError, asyncio.TimeoutError) as exc:
            self.failures.append(exc)
            sock.close()
            return
        self.handshakes += 1
        peer = transport.get_extra_info("peercert")
        if peer:
            self.client_certs.append(peer)
        writer = asyncio.StreamWriter(transport, protocol, reader, self.loop)
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)
        self._writers.discard(writer)
        self._writers.discard(up_writer)

    def stop(self) -> None:
        async def shutdown() -> None:
            self._accepting.cancel()
            for task in list(self._tasks):
                task.cancel()
            for writer in list(self._writers):
                writer.close()
            await asyncio.sleep(0)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(LIMIT_S)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(LIMIT_S)
        self._listener.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


@dataclass
class TlsBroker:
    proxy: TlsProxy
    broker: BrokerProcess
    plain: str  # the broker's own (PLAINTEXT) listener

    @property
    def bootstrap(self) -> str:
        """The TLS address (the proxy), as the broker advertises it."""
        return f"127.0.0.1:{self.proxy.port}"

    def topic(self) -> str:
        return f"tls-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    """Our broker (plain, on its own port) behind a :class:`TlsProxy` whose address it advertises."""
    proxy = TlsProxy().start()
    workdir = tmp_path_factory.mktemp("tls-broker")
    broker = None
    try:
        # the ready line names the advertised port (the proxy's), so the broker's own port is chosen here
        for attempt in range(3):
            port = _free_port()
            broker = BrokerProcess(workdir / str(attempt), {"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                                            "advertised.listeners": f"PLAINTEXT://{proxy.bootstrap}"})
            try:
                broker.start()
                break
            except RuntimeError:  # the port was taken meanwhile
                if attempt == 2:
                    raise
        proxy.target = ("127.0.0.1", port)
        yield TlsBroker(proxy, broker, f"127.0.0.1:{port}")
    finally:
        if broker is not None:
            broker.stop()
        proxy.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tls(tls_broker: TlsBroker, certs: Certs) -> TlsBroker:
    """The module's TLS broker, its proxy reset to the server certificate and no client authentication."""
    tls_broker.proxy.reset(certs.server_context())
    return tls_broker


def ssl_conf(tls: TlsBroker, **props: str) -> dict[str, str]:
    """Dotted client properties (as a properties file holds them): SSL to ``tls`` plus ``props``
    (underscores in the keyword names become dots)."""
    return {"bootstrap.servers": tls.bootstrap, "security.protocol": "SSL",
            "socket.connection.setup.timeout.ms": "5000", "request.timeout.ms": "10000",
            **{k.replace("_", "."): v for k, v in props.items()}}


def round_trip(conf: dict, topic: str, n: int = 5) -> list[bytes]:
    """Create ``topic``, produce ``n`` records and consume them back in a group, all with ``conf``."""
    with Admin(conf) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        cluster = admin.describe_cluster()
    values = [f"record-{i}".encode() for i in range(n)]
    with Producer(conf, linger_ms=0) as producer:
        metas = [f.result(LIMIT_S) for f in [producer.send(topic, v, key=str(i).encode()) for i, v in
                                             enumerate(values)]]
    assert all(m.offset >= 0 for m in metas)
    got: list[bytes] = []
    with Consumer(conf, group_id=f"g-{topic}", auto_offset_reset="earliest", session_timeout_ms=6000) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + LIMIT_S
        while len(got) < n and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(200))
        consumer.commit()
    # the broker advertises the TLS address: every connection after bootstrap went there
    assert [b.port for b in cluster.brokers] == [int(conf["bootstrap.servers"].rsplit(":", 1)[1])]
    return sorted(got)


def expect_connection_error(conf: dict) -> str:
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError) as info:
        Admin(conf).close()
    assert time.monotonic() - started < LIMIT_S
    text = str(info.value)
    assert "\n" not in text
    return text


# -- verification ----------------------------------------------------------------------------------

def test_produce_and_consume_over_tls_verifying_the_broker(tls: TlsBroker, certs: Certs) -> None:
    conf = ssl_conf(tls, ssl_ca_location=certs.ca_pem)
    topic = tls.topic()
    assert round_trip(conf, topic) == sorted(f"record-{i}".encode() for i in range(5))
    # a frame far larger than a TLS record (16 KiB) both ways
    big = bytes(range(256)) * 2048
    with Producer(conf) as producer:
        meta = producer.send(topic, big, partition=0).result(LIMIT_S)
    with Consumer(conf) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), meta.offset)
        got = []
        deadline = time.monotonic() + LIMIT_S
        while not got and time.monotonic() < deadline:
            got = consumer.poll(200)
    assert got[0].value == big
    # admin + producer + consumer (bootstrap, leader, coordinator, fetch): all TLS, none refused
    assert tls.proxy.handshakes >= 4 and tls.proxy.failures == []


def test_keyword_names_and_localhost(tls: TlsBroker, certs: Certs) -> None:
    """snake_case keywords, ``ssl`` in lower case, and a host name (``localhost``) checked against the
    certificate's names."""
    with Admin(bootstrap_servers=f"localhost:{tls.proxy.port}", security_protocol="ssl",
               ssl_ca_location=certs.ca_pem, ssl_endpoint_identification_algorithm="HTTPS") as admin:
        assert admin.describe_cluster().brokers
    assert tls.proxy.handshakes >= 1


def test_an_unknown_ca_fails_verification(tls: TlsBroker, certs: Certs) -> None:
    text = expect_connection_error(ssl_conf(tls, ssl_ca_location=certs.other_ca_pem))
    assert f"cannot connect to 127.0.0.1:{tls.proxy.port}: certificate verify failed: " \
           "unable to get local issuer certificate" in text
    assert "ssl.ca.location" in text  # the hint names the setting to look at


def test_the_system_cas_do_not_trust_a_private_ca(tls: TlsBroker) -> None:
    assert "certificate verify failed" in expect_connection_error(ssl_conf(tls))


def test_a_certificate_for_another_name_fails_unless_identification_is_off(tls: TlsBroker, certs: Certs) -> None:
    tls.proxy.reset(certs.server_context(certs.wrong_name))
    text = expect_connection_error(ssl_conf(tls, ssl_ca_location=certs.ca_pem))
    assert "certificate verify failed: IP address mismatch, certificate is not valid for '127.0.0.1'" in text
    assert "ssl.endpoint.identification.algorithm=none" in text
    # none: the chain is still verified, the name is not
    conf = ssl_conf(tls, ssl_ca_location=certs.ca_pem, ssl_endpoint_identification_algorithm="none")
    assert round_trip(conf, tls.topic(), 2) == [b"record-0", b"record-1"]
    assert "certificate verify failed" in expect_connection_error(
        ssl_conf(tls, ssl_ca_location=certs.other_ca_pem, ssl_endpoint_identification_algorithm="none"))


def test_verification_off_accepts_any_certificate(tls: TlsBroker, certs: Certs) -> None:
    tls.proxy.reset(certs.server_context(certs.wrong_name))
    conf = ssl_conf(tls, enable_ssl_certificate_verification="false")  # no CA, wrong name: still connects
    assert round_trip(conf, tls.topic(), 2) == [b"record-0", b"record-1"]
    assert tls.proxy.handshakes >= 1 and tls.proxy.failures == []


# -- client certificates ---------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", ["cert+key", "cert+encrypted key", "cert holding the key",
                                      "java PEM keystore", "java PEM keystore, encrypted key"])
def test_client_certificate_is_presented(tls: TlsBroker, certs: Certs, spelling: str) -> None:
    tls.proxy.reset(certs.server_context(require_client_cert=True))
    props = {
        "cert+key": {"ssl.certificate.location": certs.client_cert, "ssl.key.location": certs.client_key},
        "cert+encrypted key": {"ssl.certificate.location": certs.client_cert,
                               "ssl.key.location": certs.client_key_encrypted, "ssl.key.password": KEY_PASSWORD},
        "cert holding the key": {"ssl.certificate.location": certs.client_keystore},
        "java PEM keystore": {"ssl.keystore.location": certs.client_keystore, "ssl.keystore.type": "PEM",
                              "ssl.truststore.location": certs.ca_pem, "ssl.truststore.type": "PEM"},
        "java PEM keystore, encrypted key": {"ssl.keystore.location": certs.client_keystore_encrypted,
                                             "ssl.keystore.type": "pem", "ssl.key.password": KEY_PASSWORD,
                                             "ssl.truststore.location": certs.ca_pem, "ssl.truststore.type": "PEM"},
    }[spelling]
    conf = {**ssl_conf(tls), **({"ssl.ca.location": certs.ca_pem} if "java" not in spelling else {}), **props}
    assert round_trip(conf, tls.topic(), 2) == [b"record-0", b"record-1"]
    assert tls.proxy.failures == []
    names = {v for cert in tls.proxy.client_certs for k, v in cert["subjectAltName"]}
    assert names == {"client.example"}
    assert len(tls.proxy.client_certs) == tls.proxy.handshakes


@pytest.mark.parametrize("tls12", [False, True], ids=["TLSv1.3", "TLSv1.2"])
def test_without_a_client_certificate_the_broker_refuses(tls: TlsBroker, certs: Certs, tls12: bool) -> None:
    tls.proxy.reset(certs.server_context(require_client_cert=True, max_tls12=tls12))
    text = expect_connection_error(ssl_conf(tls, ssl_ca_location=certs.ca_pem))
    # TLS 1.3 finishes the client's side of the handshake before the broker checks; either way we say why
    assert "client certificate" in text and "ssl.certificate.location" in text, text
    assert tls.proxy.handshakes == 0
    assert any("PEER_DID_NOT_RETURN_A_CERTIFICATE" in str(exc) for exc in tls.proxy.failures), tls.proxy.failures


# -- connecting ------------------------------------------------------------------------------------

def test_tls_to_a_plaintext_listener_says_so(tls: TlsBroker, certs: Certs) -> None:
    conf = ssl_conf(tls, ssl_ca_location=certs.ca_pem, bootstrap_servers=tls.plain)
    text = expect_connection_error(conf)
    assert f"cannot connect to {tls.plain}: the broker closed the connection during the TLS " \
           "handshake" in text and "PLAINTEXT listener" in text


def test_plaintext_to_a_tls_listener_fails(tls: TlsBroker) -> None:
    conf = {"bootstrap.servers": tls.bootstrap, "socket.connection.setup.timeout.ms": "5000",
            "request.timeout.ms": "5000"}
    text = expect_connection_error(conf)
    assert "closed by peer before answering ApiVersions (is it a TLS listener? see security.protocol)" in text
    assert tls.proxy.handshakes == 0 and tls.proxy.failures


def test_a_tls_alert_to_a_plaintext_client_says_so() -> None:
    """A TLS listener that answers a plaintext request with a TLS alert record (as a JVM broker may):
    its first bytes are no Kafka frame size, and the error says what they are."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]))  # alert: fatal, protocol_version
                conn.recv(1024)  # until the client closes

        server = threading.Thread(target=answer, daemon=True)
        server.start()
        conf = {"bootstrap.servers": f"127.0.0.1:{listener.getsockname()[1]}", "request.timeout.ms": "5000"}
        with pytest.raises(KafkaConnectionError, match=r"the broker answered with TLS: set security.protocol=SSL"):
            Admin(conf).close()
        server.join(LIMIT_S)


def test_the_tls_handshake_counts_against_the_connect_timeout(certs: Certs) -> None:
    """A peer that accepts TCP but never answers the ClientHello: the connect timeout ends it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        conf = {"bootstrap.servers": f"127.0.0.1:{silent.getsockname()[1]}", "security.protocol": "SSL",
                "ssl.ca.location": certs.ca_pem, "socket.connection.setup.timeout.ms": "400"}
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError, match="connection and TLS handshake not done within 0.4 s"):
            Admin(conf).close()
        assert time.monotonic() - started < 5


def test_librdkafka_takes_the_same_properties(tls: TlsBroker, certs: Certs) -> None:
    """The property names mean the same to librdkafka (confluent-kafka): a record it writes through the
    same TLS proxy, with a client certificate, is read back by our consumer with the same dict."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    tls.proxy.reset(certs.server_context(require_client_cert=True))
    props = {"bootstrap.servers": tls.bootstrap, "security.protocol": "SSL", "ssl.ca.location": certs.ca_pem,
             "ssl.certificate.location": certs.client_cert, "ssl.key.location": certs.client_key_encrypted,
             "ssl.key.password": KEY_PASSWORD, "enable.ssl.certificate.verification": "true",
             "ssl.endpoint.identification.algorithm": "https"}
    topic = tls.topic()
    with Admin(props) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    producer = confluent_kafka.Producer({**props, "socket.timeout.ms": 10000, "message.timeout.ms": 10000})
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
    # the same wrong CA fails for both
    assert "certificate verify failed" in expect_connection_error({**props, "ssl.ca.location": certs.other_ca_pem})


# -- bad settings: refused when the client is built ------------------------------------------------

BAD_CASES = ["ca missing", "ca not PEM", "cert missing", "key missing", "cert not PEM", "key not PEM",
             "no key", "key mismatch", "encrypted, no password", "wrong password", "keystore wrong password",
             "key without cert", "JKS truststore", "PKCS12 keystore", "unknown store type", "truststore and ca",
             "SASL_SSL", "SASL_PLAINTEXT", "unknown protocol", "unknown algorithm", "bad boolean",
             "unknown ssl property"]


def bad_settings(certs: Certs) -> dict[str, tuple[dict, str]]:
    """``{case: (properties, what the one-line error says)}``."""
    missing = str(certs.dir / "missing.pem")
    return dict(zip(BAD_CASES, [
        ({"ssl.ca.location": missing}, f"ssl.ca.location {missing}: no such file"),
        ({"ssl.ca.location": certs.client_key}, f"ssl.ca.location {certs.client_key}: no PEM certificate in it"),
        ({"ssl.ca.location": str(certs.dir / "ca.pem"), "ssl.certificate.location": missing},
         f"ssl.certificate.location {missing}: no such file"),
        ({"ssl.certificate.location": certs.client_cert, "ssl.key.location": missing},
         f"ssl.key.location {missing}: no such file"),
        ({"ssl.certificate.location": certs.client_key, "ssl.key.location": certs.client_key},
         f"ssl.certificate.location {certs.client_key}: no PEM certificate in it"),
        ({"ssl.certificate.location": certs.client_cert, "ssl.key.location": certs.ca_pem},
         f"ssl.key.location {certs.ca_pem}: no PEM private key in it"),
        ({"ssl.certificate.location": certs.client_cert},
         f"ssl.certificate.location {certs.client_cert}: no PEM private key in it"),
        ({"ssl.certificate.location": certs.client_cert, "ssl.key.location": certs.other_key},
         f"ssl.key.location {certs.other_key}: the private key does not match the certificate in "
         f"ssl.certificate.location {certs.client_cert}"),
        ({"ssl.certificate.location": certs.client_cert, "ssl.key.location": certs.client_key_encrypted},
         f"ssl.key.location {certs.client_key_encrypted}: the private key is encrypted: set ssl.key.password"),
        ({"ssl.certificate.location": certs.client_cert, "ssl.key.location": certs.client_key_encrypted,
          "ssl.key.password": "wrong"},
         f"ssl.key.location {certs.client_key_encrypted}: cannot decrypt the private key: ssl.key.password is wrong"),
        ({"ssl.keystore.location": certs.client_keystore_encrypted, "ssl.keystore.type": "PEM",
          "ssl.key.password": "wrong"},
         f"ssl.keystore.location {certs.client_keystore_encrypted}: cannot decrypt the private key"),
        ({"ssl.key.location": certs.client_key}, "ssl.key.location needs ssl.certificate.location"),
        ({"ssl.truststore.location": "/etc/kafka/truststore.jks"},
         "ssl.truststore.location /etc/kafka/truststore.jks with ssl.truststore.type JKS (the default) is not "
         "supported, only PEM: convert it to PEM, e.g. keytool -exportcert -rfc"),
        ({"ssl.keystore.location": "/etc/kafka/ks.p12", "ssl.keystore.type": "PKCS12"},
         "ssl.keystore.location /etc/kafka/ks.p12 with ssl.keystore.type=PKCS12 is not supported, only PEM: "
         "convert it to PEM, e.g. keytool -importkeystore"),
        ({"ssl.truststore.type": "BCFKS"}, "ssl.truststore.type must be PEM, not 'BCFKS'"),
        ({"ssl.truststore.location": certs.ca_pem, "ssl.truststore.type": "PEM", "ssl.ca.location": certs.ca_pem},
         "ssl.truststore.location and ssl.ca.location are the same setting: give one"),
        ({"security.protocol": "SASL_SSL", "ssl.ca.location": missing}, f"ssl.ca.location {missing}: no such file"),
        ({"security.protocol": "sasl_plaintext"}, "security.protocol=SASL_PLAINTEXT needs sasl.mechanism"),
        ({"security.protocol": "TLS"}, "security.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, not 'TLS'"),
        ({"ssl.endpoint.identification.algorithm": "dns"},
         "ssl.endpoint.identification.algorithm must be https or none, not 'dns'"),
        ({"enable.ssl.certificate.verification": "no"},
         "configuration 'enable.ssl.certificate.verification' must be true or false, not 'no'"),
        ({"ssl.cipher.suites": "HIGH"}, "unknown configuration 'ssl.cipher.suites'"),
    ], strict=True))


@pytest.mark.parametrize("case", BAD_CASES)
@pytest.mark.parametrize("client", [Admin, Producer, Consumer])
def test_bad_tls_settings_fail_when_the_client_is_built(certs: Certs, case: str, client) -> None:
    props, says = bad_settings(certs)[case]
    conf = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL", **props}
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        client(conf).close()
    assert says in str(info.value) and "\n" not in str(info.value)
    assert time.monotonic() - started < 5  # refused before any connection attempt


def test_ssl_files_are_not_read_with_plaintext(tls: TlsBroker, certs: Certs) -> None:
    """As in librdkafka and the Java client, ssl.* files only matter with security.protocol=SSL."""
    conf = {"bootstrap.servers": tls.plain, "ssl.ca.location": str(certs.dir / "missing.pem"),
            "ssl.truststore.password": "ignored", "ssl.keystore.password": "ignored"}
    with Admin(conf) as admin:
        assert admin.describe_cluster().brokers
    assert tls.proxy.handshakes == 0


def test_one_context_per_client_and_secrets_stay_out_of_repr(certs: Certs) -> None:
    from broker.client import ProducerConfig, build_config

    cfg = build_config(ProducerConfig, {"security.protocol": "SSL", "ssl.certificate.location": certs.client_cert,
                                        "ssl.key.location": certs.client_key_encrypted,
                                        "ssl.key.password": KEY_PASSWORD}, {})
    ctx = cfg.ssl_context
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2 and ctx.check_hostname
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert KEY_PASSWORD not in repr(cfg)
    assert build_config(ProducerConfig, {}, {}).ssl_context is None
    off = build_config(ProducerConfig, {"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"},
                       {}).ssl_context
    assert off.verify_mode == ssl.CERT_NONE and not off.check_hostname
