"""A TLS listener's key store and trust store replaced on a running broker (KIP-226's dynamic
``listener.name.<l>.ssl.keystore.location`` / ``...ssl.truststore.location``), through kafkactl and the admin
client: new connections get the renewed certificate while open ones keep working, a certificate renewed in
place is read again when its path is set again, the change survives a restart and its deletion puts the
static store back, and stores that cannot be used (another identity, a missing file, the cluster default, a listener without TLS) are refused with
nothing changed. Certificates are checked on real TLS connections from this process and from librdkafka.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys

import pytest
import trustme
from confluent_kafka import Producer
from cryptography import x509

from broker.client import Admin, ConfigResource, errors
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

NAMES = ("127.0.0.1", "localhost")
IDENTITY = {"common_name": "broker-1", "organization_name": "kafkapy", "organization_unit_name": "brokers"}


@pytest.fixture
def ca():
    return trustme.CA(organization_name="kafkapy test CA")


def _issue(ca: trustme.CA, path, *names: str, **identity) -> int:
    """A key and certificate chain PEM for ``names`` written to ``path`` (replaced atomically); its serial."""
    leaf = ca.issue_cert(*(names or NAMES), **(identity or IDENTITY))
    tmp = f"{path}.tmp"
    leaf.private_key_and_cert_chain_pem.write_to_path(tmp)
    os.replace(tmp, path)
    return x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).serial_number


def _served_serial(address: str, ca_path) -> int:
    """The serial of the certificate a new TLS connection to ``address`` is given."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca_path))
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def _ssl_broker(broker_factory, tmp_path, ca, **props):
    port = free_port()
    keystore = tmp_path / "broker-a.pem"
    serial = _issue(ca, keystore)
    ca_path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    base = {"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}", "ssl.keystore.location": str(keystore)}
    base.update(props)
    broker = broker_factory(base)
    broker.ssl_bootstrap = f"127.0.0.1:{port}"
    return broker, ca_path, serial


def _kafkactl(broker, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkactl", "--bootstrap-server", broker.bootstrap, *argv],
                          capture_output=True, text=True, timeout=120)


def test_a_renewed_certificate_is_put_in_force_without_a_restart(broker_factory, tmp_path, ca):
    broker, ca_path, first = _ssl_broker(broker_factory, tmp_path, ca)
    assert _served_serial(broker.ssl_bootstrap, ca_path) == first
    # a producer with its connection open before the change
    producer = Producer({"bootstrap.servers": broker.ssl_bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(ca_path), "acks": "all", "log_level": 0})
    producer.produce("rotated", b"before")
    assert producer.flush(30) == 0

    renewed = tmp_path / "broker-b.pem"
    second = _issue(ca, renewed)
    res = _kafkactl(broker, "configs", "set", "broker", "0", f"listener.name.ssl.ssl.keystore.location={renewed}")
    assert res.returncode == 0, res.stderr
    assert _served_serial(broker.ssl_bootstrap, ca_path) == second
    producer.produce("rotated", b"after")  # the open connection goes on with the certificate it was given
    assert producer.flush(30) == 0
    res = _kafkactl(broker, "-o", "json", "configs", "get", "broker", "0")
    entry = {e["name"]: e for e in json.loads(res.stdout)}["listener.name.ssl.ssl.keystore.location"]
    assert (entry["value"], entry["source"]) == (str(renewed), "DYNAMIC_BROKER_CONFIG"), entry
    assert "listener SSL: TLS stores in force: ssl.keystore.location" in broker.stderr_text()

    # renewed in place: the same path set again reads the file again
    third = _issue(ca, renewed)
    assert _served_serial(broker.ssl_bootstrap, ca_path) == second  # not before it is asked for
    res = _kafkactl(broker, "configs", "set", "broker", "0", f"listener.name.ssl.ssl.keystore.location={renewed}")
    assert res.returncode == 0, res.stderr
    assert _served_serial(broker.ssl_bootstrap, ca_path) == third

    # a restart keeps the dynamic key store over the static one
    broker.restart()
    assert _served_serial(broker.ssl_bootstrap, ca_path) == third
    # deleting the setting puts the static key store back
    res = _kafkactl(broker, "configs", "set", "broker", "0", "--delete", "listener.name.ssl.ssl.keystore.location")
    assert res.returncode == 0, res.stderr
    assert _served_serial(broker.ssl_bootstrap, ca_path) == first


def test_a_store_that_cannot_be_used_is_refused_and_nothing_changes(broker_factory, tmp_path, ca):
    broker, ca_path, first = _ssl_broker(broker_factory, tmp_path, ca)
    other = tmp_path / "other.pem"
    _issue(ca, other, "127.0.0.1", "localhost", common_name="broker-2", organization_name="kafkapy",
           organization_unit_name="brokers")
    more_names = tmp_path / "more-names.pem"
    _issue(ca, more_names, "127.0.0.1", "localhost", "broker1.example.com")
    not_pem = tmp_path / "garbage.pem"
    not_pem.write_text("not a certificate\n")
    cases = [
        (f"listener.name.ssl.ssl.keystore.location={other}", 2, "CN=broker-2"),
        (f"listener.name.ssl.ssl.keystore.location={more_names}", 2, "subject alternative names"),
        (f"listener.name.ssl.ssl.keystore.location={tmp_path / 'missing.pem'}", 2, "No such file"),
        (f"listener.name.ssl.ssl.keystore.location={not_pem}", 2, "not a PEM private key"),
        (f"listener.name.ssl.ssl.truststore.location={not_pem}", 2, "not PEM CA certificates"),
        (f"listener.name.plaintext.ssl.keystore.location={other}", 2, "no SSL or SASL_SSL listener named PLAINTEXT"),
    ]
    for pair, code, why in cases:
        res = _kafkactl(broker, "configs", "set", "broker", "0", pair)
        assert (res.returncode, why in res.stderr) == (code, True), (pair, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert _served_serial(broker.ssl_bootstrap, ca_path) == first
    res = _kafkactl(broker, "-o", "json", "configs", "get", "broker", "0")
    assert not [e for e in json.loads(res.stdout) if e["name"].startswith("listener.name.ssl.ssl.")]
    # certificates are a broker's own: not a cluster-wide default
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(errors.BrokerResponseError) as caught:
            admin.incremental_alter_configs({ConfigResource("broker", ""): {
                "listener.name.ssl.ssl.keystore.location": str(more_names)}})
    assert caught.value.error_name == "INVALID_REQUEST" and "broker id must be specified" in str(caught.value)


def test_a_new_truststore_admits_clients_of_another_ca(broker_factory, tmp_path, ca):
    broker, ca_path, _serial = _ssl_broker(broker_factory, tmp_path, ca, **{
        "ssl.client.auth": "required", "ssl.truststore.location": str(tmp_path / "ca.pem")})
    new_ca = trustme.CA(organization_name="kafkapy next CA")
    client = new_ca.issue_cert("client.example")
    client_pem = tmp_path / "client.pem"
    client.private_key_and_cert_chain_pem.write_to_path(str(client_pem))

    def handshake() -> bool:
        host, port = broker.ssl_bootstrap.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(ca_path))
        context.load_cert_chain(str(client_pem))
        try:
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                with context.wrap_socket(raw, server_hostname=host) as tls:
                    tls.sendall(b"\0\0\0\x0a\0\x12\0\0\0\0\0\x01\xff\xff")  # ApiVersions v0, no client id
                    return len(tls.recv(4)) == 4
        except (ssl.SSLError, ConnectionError):
            return False

    assert not handshake()
    bundle = tmp_path / "cas.pem"
    bundle.write_bytes(ca.cert_pem.bytes() + new_ca.cert_pem.bytes())
    res = _kafkactl(broker, "configs", "set", "broker", "0", f"listener.name.ssl.ssl.truststore.location={bundle}")
    assert res.returncode == 0, res.stderr
    assert handshake()
