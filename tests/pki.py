"""Throwaway TLS material for tests: a CA (``trustme``) and PEM files issued by it.

``make_pki(root)`` writes, under ``root``, and returns by name: ``ca`` (the CA certificate),
``server`` (private key and chain for 127.0.0.1 and localhost, one file, as ``ssl.keystore.location``
takes it), ``server_cert`` / ``server_key`` (the same, apart), ``client`` / ``client_cert`` /
``client_key`` (a client certificate from the same CA), and ``other_ca`` (a CA that issued none of them).
"""

from __future__ import annotations

from pathlib import Path

import trustme


def make_pki(root: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1/localhost, a client certificate, and one from another CA."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client-1.example")
    other_ca = trustme.CA()
    paths = {
        "ca": root / "ca.pem", "server": root / "server.pem", "server_cert": root / "server-cert.pem",
        "server_key": root / "server-key.pem", "client": root / "client.pem", "client_cert": root / "client-cert.pem",
        "client_key": root / "client-key.pem", "other_ca": root / "other-ca.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths["server"]))
    server.private_key_pem.write_to_path(str(paths["server_key"]))
    paths["server_cert"].write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    paths["client_cert"].write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
    other_ca.cert_pem.write_to_path(str(paths["other_ca"]))
    return paths
