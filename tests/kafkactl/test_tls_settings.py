"""kafkactl over TLS: ``--command-config`` files and ``-X`` with ``security.protocol=SSL``, in
librdkafka's names and in the Java client's PEM spellings (a Kafka tool's properties file), and
the one-line refusals (exit 2) of what cannot be honoured.

End-to-end cases run ``python -m kafkactl`` against our broker behind the TLS-terminating proxy
of :mod:`tests.client.test_tls_client` (its fixtures are imported here); the refusals need no
broker, as the file is checked before any connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.client.test_tls_client import KEY_PASSWORD, Certs, TlsBroker
from tests.client.test_tls_client import certs, tls, tls_broker  # noqa: F401 (fixtures)
from tests.kafkactl.conftest import Ctl, one_line_error

UNREACHABLE = "127.0.0.1:1"  # refusals must come before any connection attempt


def _props(tmp_path: Path, text: str, name: str = "client.properties") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_java_pem_spellings_with_a_client_certificate(tls: TlsBroker, certs: Certs, tmp_path: Path) -> None:
    """The file a Kafka tool (kafka-console-producer --producer.config ...) takes, PEM stores."""
    tls.proxy.reset(certs.server_context(require_client_cert=True))
    conf = _props(tmp_path, f"""# as kafka-*.sh take it
security.protocol=SSL
ssl.truststore.location={certs.ca_pem}
ssl.truststore.type=PEM
ssl.keystore.location={certs.client_keystore_encrypted}
ssl.keystore.type=PEM
ssl.key.password={KEY_PASSWORD}
ssl.endpoint.identification.algorithm=https
""")
    ctl = Ctl(tls.bootstrap)
    res = ctl("--command-config", conf, "topics", "create", "tls-java", "--partitions", "2")
    assert res.returncode == 0, res.stderr
    delivered = ctl.lines("--command-config", conf, "produce", "tls-java", input="a\nb\nc\n")
    assert len(delivered) == 3 and all(d["offset"] >= 0 for d in delivered)
    records = ctl.lines("--command-config", conf, "consume", "tls-java", "--from-beginning", "--max-messages", "3",
                        "--timeout", "20")
    assert sorted(r["value"] for r in records) == ["a", "b", "c"]
    assert tls.proxy.failures == [] and tls.proxy.handshakes >= 3
    assert {v for cert in tls.proxy.client_certs for _, v in cert["subjectAltName"]} == {"client.example"}


def test_librdkafka_names_in_the_file_and_in_x(tls: TlsBroker, certs: Certs, tmp_path: Path) -> None:
    ctl = Ctl(tls.bootstrap)
    conf = _props(tmp_path, f"security.protocol=ssl\nssl.ca.location={certs.ca_pem}\n"
                            "enable.ssl.certificate.verification=true\n")
    assert ctl("--command-config", conf, "topics", "create", "tls-rdkafka").returncode == 0
    assert "tls-rdkafka" in ctl.json("--command-config", conf, "topics", "list")
    # -X sets TLS for that command's client: a CA the file does not give
    only_ssl = _props(tmp_path, "security.protocol=SSL\n", "ssl.properties")
    [rec] = ctl.lines("--command-config", only_ssl, "produce", "tls-rdkafka", "-X", f"ssl.ca.location={certs.ca_pem}",
                      input="x\n")
    assert rec["offset"] == 0


def test_a_certificate_the_ca_did_not_sign_is_exit_3(tls: TlsBroker, certs: Certs, tmp_path: Path) -> None:
    conf = _props(tmp_path, f"security.protocol=SSL\nssl.ca.location={certs.other_ca_pem}\n")
    line = one_line_error(Ctl(tls.bootstrap)("--command-config", conf, "topics", "list"), 3)
    assert f"cannot reach the cluster at {tls.bootstrap}" in line
    assert "certificate verify failed: unable to get local issuer certificate" in line


def test_verification_off_in_the_file(tls: TlsBroker, certs: Certs, tmp_path: Path) -> None:
    tls.proxy.reset(certs.server_context(certs.wrong_name))
    conf = _props(tmp_path, "security.protocol=SSL\nenable.ssl.certificate.verification=false\n")
    res = Ctl(tls.bootstrap)("--command-config", conf, "topics", "list")
    assert res.returncode == 0, res.stderr


# -- refusals: one line, exit 2, before connecting ----------------------------------------------------

@pytest.mark.parametrize("text, says", [
    ("client.id=x\nssl.truststore.location=/etc/kafka/truststore.jks\n",
     "line 2: unsupported client setting 'ssl.truststore.location': a JKS truststore (the default without "
     "ssl.truststore.type=PEM); kafkactl reads PEM only: convert it to PEM, e.g. keytool -exportcert -rfc"),
    ("ssl.truststore.type=JKS\nssl.truststore.location=/etc/kafka/truststore.jks\nssl.truststore.password=changeit\n",
     "line 2: unsupported client setting 'ssl.truststore.location': a JKS truststore; kafkactl reads PEM only: "
     "convert it to PEM"),
    ("security.protocol=SSL\nssl.keystore.type=PKCS12\nssl.keystore.location=/etc/kafka/client.p12\n",
     "line 3: unsupported client setting 'ssl.keystore.location': a PKCS12 keystore; kafkactl reads PEM only: "
     "convert it to PEM, e.g. keytool -importkeystore"),
    ("security.protocol=SASL_SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n",
     "line 2: unsupported client setting 'ssl.truststore.location': a JKS truststore"),
    ("security.protocol=SSL\nssl.cipher.suites=HIGH\n",
     "line 2: unknown or unsupported client setting 'ssl.cipher.suites' (kafkactl's TLS settings: "
     "ssl.ca.location, "),
    ("security.protocol=SSL\nssl.endpoint.identification.algorithm=dns\n",
     "ssl.endpoint.identification.algorithm must be https or none, not 'dns'"),
])
def test_unsupported_tls_settings_are_one_line(tmp_path: Path, text: str, says: str) -> None:
    conf = _props(tmp_path, text)
    line = one_line_error(Ctl(UNREACHABLE)("--command-config", conf, "topics", "list"), 2)
    assert conf in line and says in line, line


def test_a_missing_file_names_the_setting_and_the_file(tmp_path: Path, certs: Certs) -> None:
    missing = tmp_path / "nope" / "ca.pem"
    conf = _props(tmp_path, f"security.protocol=SSL\nssl.ca.location={missing}\n")
    line = one_line_error(Ctl(UNREACHABLE)("--command-config", conf, "topics", "list"), 2)
    assert line == f"kafkactl: {conf}: ssl.ca.location {missing}: no such file"
    java = _props(tmp_path, f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={missing}\n",
                  "java.properties")
    line = one_line_error(Ctl(UNREACHABLE)("--command-config", java, "topics", "list"), 2)
    assert line == f"kafkactl: {java}: ssl.keystore.location {missing}: no such file"


def test_bad_key_files_are_one_line(tmp_path: Path, certs: Certs) -> None:
    wrong = _props(tmp_path, f"security.protocol=SSL\nssl.keystore.type=PEM\n"
                             f"ssl.keystore.location={certs.client_keystore_encrypted}\nssl.key.password=nope\n")
    line = one_line_error(Ctl(UNREACHABLE)("--command-config", wrong, "topics", "list"), 2)
    assert line.endswith(f"ssl.keystore.location {certs.client_keystore_encrypted}: cannot decrypt the private "
                         "key: ssl.key.password is wrong")
    mismatch = _props(tmp_path, f"security.protocol=SSL\nssl.certificate.location={certs.client_cert}\n"
                                f"ssl.key.location={certs.other_key}\n", "mismatch.properties")
    line = one_line_error(Ctl(UNREACHABLE)("--command-config", mismatch, "topics", "list"), 2)
    assert "the private key does not match the certificate" in line


def test_a_bad_file_in_x_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    res = Ctl(UNREACHABLE)("produce", "t", "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={missing}",
                           input="x\n")
    assert one_line_error(res, 2) == f"kafkactl: ssl.ca.location {missing}: no such file"
