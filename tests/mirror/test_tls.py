"""The mirror reads a source cluster over TLS (with a client certificate the source requires) and writes
into a target over plaintext, and writes into a SASL_SSL target with SCRAM: a cluster's
``security.protocol``, ``ssl.*`` and ``sasl.*`` properties reach every client the mirror opens for it."""

from __future__ import annotations

import uuid

from tests.mirror.conftest import create_topic, mirror_config, mirrored_count, produce_records, read_all, wait_for
from tests.pki import make_pki
from tests.zookeeper import free_port


def test_mirror_from_a_tls_cluster_with_a_client_certificate(broker_factory, mirror_factory, tmp_path):
    pki = make_pki(tmp_path)
    port = free_port()
    src = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}",
                          "ssl.keystore.location": str(pki["server"]), "ssl.client.auth": "required",
                          "ssl.truststore.location": str(pki["ca"])})
    dst = broker_factory()
    topic = f"tls.{uuid.uuid4().hex[:6]}"
    create_topic(src.bootstrap, topic, 2)
    sent = produce_records(src.bootstrap, topic, 200, partitions=2)
    config = mirror_config({"dc1": f"127.0.0.1:{port}", "dc2": dst.bootstrap},
                           [{"source": "dc1", "target": "dc2", "topics": "tls\\..*"}])
    config["clusters"]["dc1"].update({"security.protocol": "SSL", "ssl.ca.location": str(pki["ca"]),
                                      "ssl.certificate.location": str(pki["client_cert"]),
                                      "ssl.key.location": str(pki["client_key"])})
    mirror_factory(config)
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 200, 60, "the mirror to copy over TLS")
    assert read_all(dst.bootstrap, topic) == read_all(src.bootstrap, topic)
    assert sorted(read_all(dst.bootstrap, topic)) == sorted(sent)
    # every connection the mirror made to the source was TLS with its certificate: none was refused
    assert "TLS handshake" not in src.stderr_text()


def test_mirror_into_a_sasl_ssl_cluster_with_scram(broker_factory, mirror_factory, tmp_path):
    """The other direction and the other security protocol: plaintext source, SASL_SSL (SCRAM-SHA-512) target."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    pki = make_pki(tmp_path)
    port = free_port()
    src = broker_factory()
    dst = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{port}",
                          "ssl.keystore.location": str(pki["server"]), "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    # the first SCRAM user is made over the target's PLAINTEXT listener (loopback), as an operator would
    admin = AdminClient({"bootstrap.servers": dst.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("mirror", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                     b"mirror-secret")])
    futures["mirror"].result(timeout=15)
    topic = f"sasl.{uuid.uuid4().hex[:6]}"
    create_topic(src.bootstrap, topic, 2)
    sent = produce_records(src.bootstrap, topic, 200, partitions=2)
    config = mirror_config({"dc1": src.bootstrap, "dc2": f"127.0.0.1:{port}"},
                           [{"source": "dc1", "target": "dc2", "topics": "sasl\\..*"}])
    config["clusters"]["dc2"].update({"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki["ca"]),
                                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mirror",
                                      "sasl.password": "mirror-secret"})
    mirror_factory(config)
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 200, 60, "the mirror to copy over SASL_SSL")
    assert sorted(read_all(dst.bootstrap, topic)) == sorted(sent)
    assert "SASL authentication failed" not in dst.stderr_text()
    assert "mirror-secret" not in dst.stderr_text()
