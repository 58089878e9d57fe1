"""TLS for the client: ``security.protocol=SSL`` and the ``ssl.*`` properties.

Names and meanings are librdkafka's; the Java client's PEM spellings are
accepted too, so a Kafka tool's properties file carries over. As keyword
arguments the names are snake_case (``ssl_ca_location=...``).

``security.protocol``
    ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``, either
    case. TLS is ``SSL`` and ``SASL_SSL`` (the SASL part is
    :mod:`broker.client._sasl`). Without TLS the ``ssl.*`` files are not read
    (as in librdkafka and the Java client), though the values below are still
    checked.
``ssl.ca.location``
    PEM file of CA certificates that verify the broker's certificate, or a
    directory of them in OpenSSL's hashed layout (``openssl rehash DIR``).
    Absent (or librdkafka's ``probe``): the system's default CAs.
``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``
    The client's certificate (PEM, the leaf first, then any intermediates) and
    its private key (PEM, encrypted with ``ssl.key.password`` or not), for a
    broker that requires client authentication (``ssl.client.auth=required``).
    Without ``ssl.key.location`` the key is read from the certificate file.
    An encrypted key without ``ssl.key.password`` is an error, never a prompt.
``enable.ssl.certificate.verification``
    ``true`` (default). ``false`` accepts any certificate from the broker, and
    then no host name is checked either: encryption without authentication.
``ssl.endpoint.identification.algorithm``
    ``https`` (default, as librdkafka >= 2.0 and the Java client): the broker's
    certificate must be valid for the host name (or IP address) connected to,
    i.e. the bootstrap address or the one the broker advertises. ``none`` (or
    an empty value, the Java client's spelling) skips that check but still
    verifies the certificate chain.

Java client spellings (PEM only)::

    ssl.truststore.location + ssl.truststore.type=PEM   = ssl.ca.location
    ssl.keystore.location + ssl.keystore.type=PEM       = ssl.certificate.location (one PEM file
                                                          holding the private key and the chain)
    ssl.key.password                                    = the same property

A truststore or keystore without ``type=PEM`` is JKS (the Java default) and is
refused, as is PKCS12: convert it to PEM with keytool and openssl.
``ssl.truststore.password`` and ``ssl.keystore.password`` protect JKS/PKCS12
stores only; a PEM store has no store password, so they are accepted and ignored
(a PEM private key's password is ``ssl.key.password``). Giving a Java spelling
and its librdkafka counterpart together is an error.

Every file is read when the client is built: a missing or unreadable file, one
holding no PEM certificate or key, a key that does not match the certificate or
a wrong ``ssl.key.password`` raise :class:`~broker.client.errors.ConfigError`
(one line naming the property and the file). One :class:`ssl.SSLContext`
(TLS 1.2 or newer) is made per client and used for all its connections.
"""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from ._config import CommonConfig

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
ENDPOINT_ALGORITHMS = {"https": True, "none": False, "": False}  # -> check_hostname

CONVERT_TRUSTSTORE = ("convert it to PEM, e.g. keytool -exportcert -rfc -keystore STORE -alias CA -file ca.pem, "
                      "and set ssl.truststore.type=PEM (or ssl.ca.location)")
CONVERT_KEYSTORE = ("convert it to PEM, e.g. keytool -importkeystore -srckeystore STORE -destkeystore store.p12 "
                    "-deststoretype PKCS12, then openssl pkcs12 -in store.p12 -out client.pem, "
                    "and set ssl.keystore.type=PEM (or ssl.certificate.location and ssl.key.location)")


class _NeedPassword(Exception):
    pass


def check(config: "CommonConfig") -> None:
    """Check (and normalize) the values of the TLS properties; no file is read."""
    proto = str(config.security_protocol or "PLAINTEXT").strip().upper()
    if proto not in PROTOCOLS:
        raise ConfigError("security.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, "
                          f"not {config.security_protocol!r}")
    config.security_protocol = proto
    algo = str(config.ssl_endpoint_identification_algorithm or "").strip().lower()
    if algo not in ENDPOINT_ALGORITHMS:
        raise ConfigError("ssl.endpoint.identification.algorithm must be https or none, "
                          f"not {config.ssl_endpoint_identification_algorithm!r}")
    config.ssl_endpoint_identification_algorithm = algo or "none"
    for kind, convert in (("truststore", CONVERT_TRUSTSTORE), ("keystore", CONVERT_KEYSTORE)):
        location = getattr(config, f"ssl_{kind}_location")
        given = getattr(config, f"ssl_{kind}_type")
        store_type = str(given).strip().upper() if given is not None else None
        if store_type is not None:
            setattr(config, f"ssl_{kind}_type", store_type)
        if store_type not in (None, "PEM", "JKS", "PKCS12"):
            raise ConfigError(f"ssl.{kind}.type must be PEM, not {given!r} (JKS and PKCS12 stores: {convert})")
        if store_type in ("JKS", "PKCS12") or (location and store_type is None):
            shown = f"ssl.{kind}.type={store_type}" if store_type else f"ssl.{kind}.type JKS (the default)"
            if location:
                shown = f"ssl.{kind}.location {location} with {shown}"
            raise ConfigError(f"{shown} is not supported, only PEM: {convert}")
    if config.ssl_truststore_location and config.ssl_ca_location:
        raise ConfigError("ssl.truststore.location and ssl.ca.location are the same setting: give one")
    if config.ssl_keystore_location and (config.ssl_certificate_location or config.ssl_key_location):
        raise ConfigError("ssl.keystore.location and ssl.certificate.location/ssl.key.location are the same "
                          "setting: give one")
    if config.ssl_key_location and not config.ssl_certificate_location:
        raise ConfigError("ssl.key.location needs ssl.certificate.location (the certificate of that key)")


def build_context(config: "CommonConfig") -> ssl.SSLContext | None:
    """The client's SSLContext (None without TLS), every file read and checked now."""
    check(config)
    if config.security_protocol not in TLS_PROTOCOLS:
        return None
    verify = bool(config.enable_ssl_certificate_verification)
    if config.ssl_truststore_location:
        ca_prop, ca = "ssl.truststore.location", config.ssl_truststore_location
    else:
        ca_prop, ca = "ssl.ca.location", config.ssl_ca_location
    if ca is not None and str(ca).strip().lower() == "probe":
        ca = None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname on, CERT_REQUIRED, secure defaults
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca:
        _load_ca(ctx, ca_prop, str(ca))
    elif verify:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if config.ssl_keystore_location:
        _load_client_cert(ctx, "ssl.keystore.location", str(config.ssl_keystore_location), None, None,
                          config.ssl_key_password)
    elif config.ssl_certificate_location:
        key = config.ssl_key_location
        _load_client_cert(ctx, "ssl.certificate.location", str(config.ssl_certificate_location),
                          "ssl.key.location" if key else None, str(key) if key else None, config.ssl_key_password)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = ENDPOINT_ALGORITHMS[config.ssl_endpoint_identification_algorithm]
    return ctx


def _read(prop: str, path: str) -> bytes:
    """The bytes of ``path``; any reason it cannot be read is a ConfigError naming ``prop``."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ConfigError(f"{prop} {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{prop} {path}: is a directory, not a PEM file") from None
    except PermissionError:
        raise ConfigError(f"{prop} {path}: cannot read it: permission denied") from None
    except OSError as exc:
        raise ConfigError(f"{prop} {path}: cannot read it: {exc.strerror or exc}") from None


def _load_ca(ctx: ssl.SSLContext, prop: str, path: str) -> None:
    if os.path.isdir(path):
        if not os.access(path, os.R_OK | os.X_OK):
            raise ConfigError(f"{prop} {path}: cannot read the directory: permission denied")
        ctx.load_verify_locations(capath=path)
        return
    data = _read(prop, path)
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise ConfigError(f"{prop} {path}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)")
    try:
        ctx.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise ConfigError(f"{prop} {path}: cannot load its CA certificates: {_reason(exc)}") from None


def _load_client_cert(ctx: ssl.SSLContext, cert_prop: str, cert: str, key_prop: str | None, key: str | None,
                      password: str | None) -> None:
    cert_data = _read(cert_prop, cert)
    if b"-----BEGIN CERTIFICATE-----" not in cert_data:
        raise ConfigError(f"{cert_prop} {cert}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)")
    if key is None:
        key_prop, key_data = cert_prop, cert_data
        if b"PRIVATE KEY-----" not in key_data:
            raise ConfigError(f"{cert_prop} {cert}: no PEM private key in it (give ssl.key.location, "
                              "or put the key in this file)" if cert_prop == "ssl.certificate.location" else
                              f"{cert_prop} {cert}: no PEM private key in it (a PEM keystore holds the "
                              "private key and the certificate chain)")
    else:
        key_data = _read(key_prop, key)
        if b"PRIVATE KEY-----" not in key_data:
            raise ConfigError(f"{key_prop} {key}: no PEM private key in it (expected -----BEGIN ... PRIVATE KEY-----)")
    encrypted = b"ENCRYPTED PRIVATE KEY-----" in key_data or b"Proc-Type: 4,ENCRYPTED" in key_data
    where = f"{key_prop} {key if key is not None else cert}"

    def need_password():
        raise _NeedPassword

    try:
        ctx.load_cert_chain(cert, key, password if password is not None else need_password)
    except _NeedPassword:
        raise ConfigError(f"{where}: the private key is encrypted: set ssl.key.password") from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            if key is None:
                raise ConfigError(f"{where}: the private key does not match the certificate in it") from None
            raise ConfigError(f"{where}: the private key does not match the certificate in "
                              f"{cert_prop} {cert}") from None
        if encrypted:
            raise ConfigError(f"{where}: cannot decrypt the private key: ssl.key.password is wrong") from None
        raise ConfigError(f"{cert_prop} {cert}: cannot load the certificate and private key: "
                          f"{_reason(exc)}") from None
    except OSError as exc:  # the file changed under us
        raise ConfigError(f"{cert_prop} {cert}: cannot read it: {exc.strerror or exc}") from None


def _reason(exc: ssl.SSLError) -> str:
    if exc.reason:
        return exc.reason.replace("_", " ").lower()
    return str(exc)


def describe_error(exc: BaseException) -> str:
    """A readable one-line reason for a TLS failure (a handshake or a later alert)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = (exc.verify_message or _reason(exc)).rstrip(".")
        hint = ""
        if exc.verify_code in (2, 20, 21):  # unable to get (local) issuer certificate, unable to verify leaf
            hint = " (is ssl.ca.location the CA that signed the broker's certificate?)"
        elif exc.verify_code in (18, 19):  # self-signed
            hint = " (a self-signed certificate: give it, or its CA, as ssl.ca.location)"
        elif exc.verify_code == 62 or "mismatch" in why.lower():
            hint = (" (the broker's certificate must name the host connected to; "
                    "ssl.endpoint.identification.algorithm=none skips this check)")
        return f"certificate verify failed: {why}{hint}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or ""
        text = _reason(exc)
        if reason == "TLSV13_ALERT_CERTIFICATE_REQUIRED" or reason.endswith("HANDSHAKE_FAILURE"):
            return f"the broker refused the TLS connection: {text} (does it require a client certificate? " \
                   "see ssl.certificate.location)"
        if "ALERT" in reason:
            return f"the broker refused the TLS connection: {text}"
        if reason in ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF_WHILE_READING", "RECORD_LAYER_FAILURE",
                      "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST") or isinstance(exc, ssl.SSLEOFError):
            return f"TLS handshake failed: {text} (is this a PLAINTEXT listener? see security.protocol)"
        return f"TLS error: {text}"
    return str(exc)
