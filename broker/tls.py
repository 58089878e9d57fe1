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
them. Contexts are built at start, before any log dir is touched; a file
that cannot be read or does not hold what it should stops the start with one
line naming the property and the file (:class:`TlsSetupError`).

Stores are replaced on a running broker (KIP-226) through the dynamic broker
configs ``listener.name.<listener>.ssl.keystore.location`` and
``...ssl.truststore.location`` (:mod:`broker.server.dynamic_config`):
:func:`rebuild` makes the listener's contexts anew from the new files, and a new
key store must present the same identity as the one it replaces (the leaf
certificate's subject and subject alternative names, as Kafka's
``SslFactory`` insists), so that brokers and clients that check it keep
accepting the listener. New connections get the new contexts; connections
already open keep theirs.
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
    """The server context of each SSL listener, and the client context for other brokers (None: PLAINTEXT).

    Both are looked up when a connection is made (an accepted one; one to another broker), so a context
    that :func:`rebuild` replaces serves the connections made after it, and open ones keep theirs."""

    listeners: dict[str, ssl.SSLContext] = field(default_factory=dict)
    inter_broker: ssl.SSLContext | None = None
    #: The identity each listener's key store presents: (subject, subject alternative names) of its leaf
    identities: dict[str, tuple[str, tuple[str, ...]] | None] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> "TlsContexts":
        """Blocking (reads the PEM files): build every context the configuration asks for."""
        contexts = cls()
        for endpoint in config.listeners:
            name = endpoint.listener_name
            if config.security_protocol(name) in TLS_PROTOCOLS:
                contexts.listeners[name] = server_context(config, name)
                contexts.identities[name] = identity(config, name)
        if config.metadata_store_kind == "zookeeper":
            inter = config.inter_broker_listener
            if config.security_protocol(inter) in TLS_PROTOCOLS:
                contexts.inter_broker = client_context(config, inter)
        return contexts


@dataclass
class Rebuilt:
    """A listener's contexts made anew from replaced stores (:func:`rebuild`), not yet in force."""

    listener: str
    server: ssl.SSLContext
    identity: tuple[str, tuple[str, ...]] | None
    #: The new client context for other brokers, when this is the inter-broker listener
    client: ssl.SSLContext | None = None

    def install(self, contexts: TlsContexts) -> None:
        """Put the new contexts in force, for the connections made from now on."""
        contexts.listeners[self.listener] = self.server
        contexts.identities[self.listener] = self.identity
        if self.client is not None:
            contexts.inter_broker = self.client


def rebuild(config: BrokerConfig, listener: str, stores: dict[str, str], current: TlsContexts,
            same_identity: bool = True) -> Rebuilt:
    """Blocking: the listener's contexts with ``stores`` (``ssl.keystore.location`` and/or
    ``ssl.truststore.location``, as the dynamic configs give them) over its static settings; TlsSetupError
    when a file cannot be used, or (``same_identity``) when the new key store presents another identity than
    the current one (at start it may: a restart may change a broker's identity)."""
    dynamic = {prop: f"listener.name.{listener.lower()}.{prop}" for prop in stores}
    settings = {**config.ssl_settings(listener), **stores}
    source = lambda prop: dynamic.get(prop) or config.ssl_source(listener, prop)  # noqa: E731
    server = _server_context(settings, listener, source)
    if "ssl.truststore.location" in stores and server.verify_mode == ssl.CERT_NONE:  # checked even when not asked
        _load_trust_store(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), source, listener, settings, ssl.Purpose.CLIENT_AUTH)
    new_identity = _identity_of(settings, listener, source)
    old_identity = current.identities.get(listener)
    if same_identity and old_identity is not None and new_identity is not None and new_identity != old_identity:
        raise TlsSetupError(
            f"listener {listener}: {source('ssl.keystore.location')} {settings['ssl.keystore.location']}: its "
            f"certificate is for {_show(new_identity)}, the listener's current one for {_show(old_identity)}: "
            "a replaced key store must keep the subject and the subject alternative names (as Kafka requires), "
            "or clients and brokers that check them would refuse the listener; change the identity with a restart")
    inter_broker = config.metadata_store_kind == "zookeeper" and listener == config.inter_broker_listener
    return Rebuilt(listener, server, new_identity,
                   _client_context(settings, listener, source) if inter_broker else None)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _show(ident: tuple[str, tuple[str, ...]]) -> str:
    subject, names = ident
    return subject + (f" ({', '.join(names)})" if names else "")


def identity(config: BrokerConfig, listener: str) -> tuple[str, tuple[str, ...]] | None:
    """Blocking: the identity the listener's key store presents (None without one)."""
    return _identity_of(config.ssl_settings(listener), listener, lambda prop: config.ssl_source(listener, prop))


def _identity_of(settings: dict[str, Any], listener: str, source) -> tuple[str, tuple[str, ...]] | None:
    from cryptography import x509

    location = settings["ssl.keystore.location"]
    if location is not None:
        text = _read(location).decode("ascii", "replace")
    elif settings["ssl.keystore.certificate.chain"] is not None:
        text = normalize_pem(settings["ssl.keystore.certificate.chain"])
    else:
        return None
    block = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", text, re.S)
    if block is None:
        return None
    try:
        cert = x509.load_pem_x509_certificate(block.group(0).encode("ascii"))
    except ValueError:  # OpenSSL took the file; an identity we cannot read is one we do not compare
        return None
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        sans = tuple(sorted(str(getattr(n, "value", n)) for n in names))
    except x509.ExtensionNotFound:
        sans = ()
    return cert.subject.rfc4514_string(), sans


def _versions(context: ssl.SSLContext, settings: dict[str, Any]) -> None:
    versions = sorted(_VERSIONS[v] for v in settings["ssl.enabled.protocols"])
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _no_prompt(*_args) -> bytes:
    """The password callback when ``ssl.key.password`` is unset: an encrypted key fails at once
    (OpenSSL would otherwise ask on the terminal and the start would hang there)."""
    raise TlsSetupError("the private key is encrypted: set ssl.key.password")


def _load_key_store(context: ssl.SSLContext, source, listener: str, settings: dict[str, Any]) -> None:
    password = settings["ssl.key.password"]
    location = settings["ssl.keystore.location"]
    if location is not None:
        prop = source("ssl.keystore.location")
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


def _load_trust_store(context: ssl.SSLContext, source, listener: str, settings: dict[str, Any],
                      purpose: ssl.Purpose) -> None:
    location, inline = settings["ssl.truststore.location"], settings["ssl.truststore.certificates"]
    try:
        if location is not None:
            prop = source("ssl.truststore.location")
            _check_file(prop, location, "truststore")
            context.load_verify_locations(cafile=location)
        elif inline is not None:
            prop = source("ssl.truststore.certificates")
            context.load_verify_locations(cadata=normalize_pem(inline))
        else:
            context.load_default_certs(purpose)
    except ssl.SSLError as exc:
        shown = f"{prop} {location}" if location is not None else prop
        raise TlsSetupError(f"listener {listener}: {shown}: {_reason(exc, None, 'PEM CA certificates')}") from None


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context an SSL listener accepts with."""
    return _server_context(config.ssl_settings(listener), listener, lambda prop: config.ssl_source(listener, prop))


def _server_context(settings: dict[str, Any], listener: str, source) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, settings)
    _load_key_store(context, source, listener, settings)
    context.verify_mode = _CLIENT_AUTH[settings["ssl.client.auth"]]
    if context.verify_mode != ssl.CERT_NONE:
        _load_trust_store(context, source, listener, settings, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context this broker connects to other brokers' ``listener`` with (the same listener's settings,
    as in Kafka: its trust store checks their certificates, its key store answers their client auth)."""
    return _client_context(config.ssl_settings(listener), listener, lambda prop: config.ssl_source(listener, prop))


def _client_context(settings: dict[str, Any], listener: str, source) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, settings)
    _load_trust_store(context, source, listener, settings, ssl.Purpose.SERVER_AUTH)
    _load_key_store(context, source, listener, settings)
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
