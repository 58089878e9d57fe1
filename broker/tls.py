"""TLS for SSL listeners and for connections to other brokers over an SSL inter-broker listener.

What is read (Kafka's property names; see :mod:`broker.config` for the rules
between them). Every property may also be set for one listener only, as
``listener.name.<listener>.<property>``, which wins over the broker-wide one:

``ssl.keystore.location``
    A PEM file holding this broker's private key and its certificate chain
    (leaf first), as ``ssl.keystore.type=PEM`` reads it in Kafka (KIP-651).
``ssl.keystore.certificate.chain`` / ``ssl.keystore.key``
    The same, given inline as PEM text.
``ssl.key.password``
    The password of an encrypted private key.
``ssl.truststore.location`` / ``ssl.truststore.certificates``
    PEM CA certificates: on a listener, those that client certificates must
    chain to; for the connections this broker opens to other brokers, those
    their certificates must chain to. Absent: the system's default CAs.
``ssl.client.auth``
    ``none`` (no client certificate asked for), ``requested`` (asked for, and
    checked when sent) or ``required`` (a client without a valid one fails the
    handshake).
``ssl.enabled.protocols``
    ``TLSv1.2`` and/or ``TLSv1.3``; the lowest and highest listed bound the
    versions offered.
``ssl.endpoint.identification.algorithm``
    ``https`` (the default): another broker's certificate must name the host
    this broker connects to; empty: not checked.

JKS and PKCS12 stores are refused at start with a line saying how to convert
them. Contexts are built once, at start, before any log dir is touched; a file
that cannot be read or does not hold what it should stops the start with one
line naming the property and the file (:class:`TlsSetupError`).
"""

from __future__ import annotations

import os
import re
import ssl
from dataclasses import dataclass, field
from typing import Any

from broker.config import TLS_PROTOCOLS, BrokerConfig

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsSetupError(ValueError):
    """A key store or trust store that cannot be used; ``str(err)`` is one line for the operator."""


@dataclass
class TlsContexts:
    """The server context of each SSL listener, and the client context for other brokers (None: PLAINTEXT)."""

    listeners: dict[str, ssl.SSLContext] = field(default_factory=dict)
    inter_broker: ssl.SSLContext | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> "TlsContexts":
        """Blocking (reads the PEM files): build every context the configuration asks for."""
        contexts = cls()
        for endpoint in config.listeners:
            name = endpoint.listener_name
            if config.security_protocol(name) in TLS_PROTOCOLS:
                contexts.listeners[name] = server_context(config, name)
        if config.metadata_store_kind == "zookeeper":
            inter = config.inter_broker_listener
            if config.security_protocol(inter) in TLS_PROTOCOLS:
                contexts.inter_broker = client_context(config, inter)
        return contexts


def _versions(context: ssl.SSLContext, settings: dict[str, Any]) -> None:
    versions = sorted(_VERSIONS[v] for v in settings["ssl.enabled.protocols"])
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _no_prompt(*_args) -> bytes:
    """The password callback when ``ssl.key.password`` is unset: an encrypted key fails at once
    (OpenSSL would otherwise ask on the terminal and the start would hang there)."""
    raise TlsSetupError("the private key is encrypted: set ssl.key.password")


def _load_key_store(context: ssl.SSLContext, config: BrokerConfig, listener: str, settings: dict[str, Any]) -> None:
    password = settings["ssl.key.password"]
    location = settings["ssl.keystore.location"]
    if location is not None:
        prop = config.ssl_source(listener, "ssl.keystore.location")
        _check_file(prop, location, "keystore")
        _load_chain(context, location, password, f"listener {listener}: {prop} {location}")
        return
    chain, key = settings["ssl.keystore.certificate.chain"], settings["ssl.keystore.key"]
    if chain is None:
        return
    # load_cert_chain reads a path only: the inline PEM goes through an anonymous memory file
    # (memfd), never onto a disk where a killed process would leave the private key behind
    fd = os.memfd_create("kafkapy-keystore", os.MFD_CLOEXEC)
    try:
        os.write(fd, (normalize_pem(key) + normalize_pem(chain)).encode("ascii", "replace"))
        _load_chain(context, f"/proc/self/fd/{fd}", password,
                    f"listener {listener}: ssl.keystore.certificate.chain / ssl.keystore.key")
    finally:
        os.close(fd)


def _load_chain(context: ssl.SSLContext, path: str, password: str | None, where: str) -> None:
    try:
        context.load_cert_chain(path, password=password if password is not None else _no_prompt)
    except TlsSetupError as exc:
        raise TlsSetupError(f"{where}: {exc}") from None
    except ssl.SSLError as exc:
        raise TlsSetupError(f"{where}: {_reason(exc, password)}") from None


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> str:
    """PEM blocks with their base64 re-wrapped at 64 columns, one block after another.

    A PEM value written on one line, or continued with ``\\`` in a properties file
    (KIP-651's inline form), arrives with its line breaks turned into spaces;
    OpenSSL reads only the wrapped form. Blocks with headers (legacy encrypted
    keys: ``Proc-Type: ...``) are kept as they are; text outside blocks is dropped.
    """
    out = []
    for label, body in _PEM_BLOCK.findall(text):
        if ":" in body:
            out.append(f"-----BEGIN {label}-----{body}-----END {label}-----\n")
            continue
        data = "".join(body.split())
        lines = [data[i:i + 64] for i in range(0, len(data), 64)]
        out.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n")
    return "".join(out) or text


def _load_trust_store(context: ssl.SSLContext, config: BrokerConfig, listener: str, settings: dict[str, Any],
                      purpose: ssl.Purpose) -> None:
    location, inline = settings["ssl.truststore.location"], settings["ssl.truststore.certificates"]
    try:
        if location is not None:
            prop = config.ssl_source(listener, "ssl.truststore.location")
            _check_file(prop, location, "truststore")
            context.load_verify_locations(cafile=location)
        elif inline is not None:
            prop = config.ssl_source(listener, "ssl.truststore.certificates")
            context.load_verify_locations(cadata=normalize_pem(inline))
        else:
            context.load_default_certs(purpose)
    except ssl.SSLError as exc:
        shown = f"{prop} {location}" if location is not None else prop
        raise TlsSetupError(f"listener {listener}: {shown}: {_reason(exc, None, 'PEM CA certificates')}") from None


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context an SSL listener accepts with."""
    settings = config.ssl_settings(listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, settings)
    _load_key_store(context, config, listener, settings)
    context.verify_mode = _CLIENT_AUTH[settings["ssl.client.auth"]]
    if context.verify_mode != ssl.CERT_NONE:
        _load_trust_store(context, config, listener, settings, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context this broker connects to other brokers' ``listener`` with (the same listener's settings,
    as in Kafka: its trust store checks their certificates, its key store answers their client auth)."""
    settings = config.ssl_settings(listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, settings)
    _load_trust_store(context, config, listener, settings, ssl.Purpose.SERVER_AUTH)
    _load_key_store(context, config, listener, settings)
    context.check_hostname = settings["ssl.endpoint.identification.algorithm"] == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _check_file(prop: str, path: str, kind: str) -> None:
    """The file can be read, and is not a Java key store (whose bytes OpenSSL would only call "not PEM")."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise TlsSetupError(f"{prop} {path}: {exc.strerror or exc}") from None
    if head == b"\xfe\xed\xfe\xed" or head[:1] == b"\x30":
        what = "a JKS" if head == b"\xfe\xed\xfe\xed" else "a PKCS12 (or DER)"
        raise TlsSetupError(f"{prop} {path}: {what} {kind}, not PEM: convert it (keytool -importkeystore to "
                            f"PKCS12, then openssl pkcs12 -nodes) and point {prop} at the PEM file")


def _reason(exc: ssl.SSLError, password: str | None, what: str = "a PEM private key with its certificate chain") -> str:
    """One readable line for what OpenSSL said about a PEM file."""
    text = exc.reason or str(exc.args[-1] if exc.args else exc)
    if text == "KEY_VALUES_MISMATCH":
        return "the private key does not belong to the certificate"
    if "decrypt" in text.lower():
        return "cannot decrypt the private key: wrong or missing ssl.key.password"
    if "PEM" in text or text == "NO_START_LINE" or "no start line" in text or "NO_CERTIFICATE" in text:
        hint = "; or a wrong ssl.key.password" if password else ""
        return f"not {what} ({text}{hint})"
    return text
