"""SASL for the client: ``security.protocol=SASL_PLAINTEXT|SASL_SSL`` and the ``sasl.*`` properties.

Names and meanings are librdkafka's and the Java client's; as keyword arguments
the names are snake_case (``sasl_mechanism="SCRAM-SHA-256"``).

``security.protocol``
    ``SASL_PLAINTEXT``: SASL on a plain TCP connection (the password crosses the
    network in clear text with PLAIN). ``SASL_SSL``: TLS first, with every
    ``ssl.*`` property as for ``SSL`` (:mod:`broker.client._tls`), then SASL
    inside it. Either case.
``sasl.mechanism`` (librdkafka also spells it ``sasl.mechanisms``)
    ``GSSAPI``, ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``,
    either case. Required with a SASL protocol (the Java and librdkafka default,
    GSSAPI, is not assumed: say it).
``sasl.username``, ``sasl.password``
    The credentials (librdkafka's names) of PLAIN and SCRAM.
``sasl.kerberos.service.name`` (``kafka``), ``sasl.kerberos.keytab``, ``sasl.kerberos.principal``
    GSSAPI (Kerberos, :mod:`broker.kerberos`), librdkafka's names: the service
    ticket asked for is ``<service name>/<broker host>``, the host as the client
    connects to it (the bootstrap address, then the brokers' advertised hosts).
    With a keytab and a principal the tickets are got from the keytab (no
    ``kinit`` needed, renewed by the Kerberos library); without, from the ticket
    cache (``kinit`` beforehand; ``KRB5CCNAME``). The Java client's form is
    ``sasl.jaas.config`` with ``com.sun.security.auth.module.Krb5LoginModule``
    (``useKeyTab=true keyTab="..." principal="..."``, or ``useTicketCache=true``)
    and ``serviceName`` in it or ``sasl.kerberos.service.name``.
``sasl.oauthbearer.*``, ``enable.sasl.oauthbearer.unsecure.jwt``, ``sasl.login.callback.handler.class``
    Where OAUTHBEARER's bearer token comes from (librdkafka's OIDC client-credentials
    grant or unsecured JWT, or the Java client's): see :mod:`broker.client._oauth`.
``sasl.jaas.config``
    The Java client's form of the same credentials, one login module::

        org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";
        org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";

    The flag is ``required``, ``requisite``, ``sufficient`` or ``optional``
    (any is taken as ``required``); values are double-quoted, with backslash
    escapes (``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\r``; ``\\`` before any other
    character is that character), or bare words (letters, digits, ``_-.$``);
    ``tokenauth=true`` with ``ScramLoginModule`` authenticates with a delegation
    token (KIP-48: ``username`` its id, ``password`` its HMAC in base64; SCRAM
    only); other options are ignored, as Java does.
    Either module serves any of PLAIN and SCRAM (the mechanism is
    ``sasl.mechanism``), as in Java. ``OAuthBearerLoginModule`` is OAUTHBEARER's
    (its options: :mod:`broker.client._oauth`), and only OAUTHBEARER's. Other login
    modules are refused, but Kerberos's (``Krb5LoginModule``, GSSAPI's only).
    Giving both ``sasl.jaas.config`` and ``sasl.username``/``sasl.password`` is
    an error.

With ``PLAINTEXT`` or ``SSL`` the ``sasl.*`` values are checked but not used,
as librdkafka and the Java client ignore them. Bad values raise
:class:`~broker.client.errors.ConfigError` when the client is built; no message
ever holds the password (nor the text of ``sasl.jaas.config``).

The exchange, on every new connection (:class:`~broker.client._connection.BrokerConnection`
with ``sasl=SaslSettings(...)``), after the TLS handshake if any and after
ApiVersions (which a Kafka broker answers before authentication)::

    SaslHandshake v1   {mechanism}             -> error_code, the broker's enabled mechanisms
    SaslAuthenticate   {auth_bytes}            (v0-v2, the highest the broker serves)
        PLAIN:         b"\\0" + username + b"\\0" + password (RFC 4616, no authorization id)
        SCRAM-SHA-*:   client-first -> server-first, client-final -> server-final (RFC 5802,
                       by scramp's ScramClient; no channel binding, as Kafka; with a delegation
                       token the client-first ends in the extension ",tokenauth=true"); the
                       server-final's signature must verify, else the broker did not
                       know the password: the connection is refused.
        GSSAPI:        context tokens, then the security layer (none) agreed in wrapped messages
                       (RFC 4752, :mod:`broker.kerberos`); the first step on a thread (the KDC is asked)
        OAUTHBEARER:   n,,\\x01auth=Bearer <token>\\x01[k=v\\x01...]\\x01 (RFC 7628) -> an empty
                       answer: authenticated; or the error challenge {"status":...}: the
                       client sends \\x01 (RFC 7628 3.2.2) and the exchange fails, with that
                       status in the error. The token is got before the TCP connection
                       (:mod:`broker.client._oauth`: cached, renewed at 80 % of its life).

Errors (:class:`~broker.client.errors.AuthenticationError`, never retried by the
client: Producer, Consumer and Admin raise it from their constructor, or from the
call that opened the connection)::

    UNSUPPORTED_SASL_MECHANISM (33)   UnsupportedSaslMechanismError naming the broker's mechanisms
    ILLEGAL_SASL_STATE (34)           the connection does not expect SASL (a PLAINTEXT/SSL listener)
    SASL_AUTHENTICATION_FAILED (58)   with the broker's error_message (wrong password, unknown user,
                                      a token refused: the status of its error challenge)
    a SCRAM answer that does not verify, or cannot be parsed: SASL_AUTHENTICATION_FAILED too
    an OAUTHBEARER token endpoint refusing the client (HTTP 4xx): SASL_AUTHENTICATION_FAILED too

``session_lifetime_ms`` (SaslAuthenticate v1+, the broker's
``connections.max.reauth.ms``, KIP-368; with OAUTHBEARER no longer than the
token is valid) is kept on the connection: the client
stops sending on a connection whose session is (nearly) over, lets its requests
in flight finish, and opens and authenticates a new one instead of
re-authenticating in place.

SCRAM credentials for AlterUserScramCredentials (:func:`scram_credential`): a
random 32-byte salt and ``Hi(password, salt, iterations)`` (RFC 5802, PBKDF2 with
the mechanism's HMAC) as the Java admin client sends them. Kafka applies no
SASLprep (RFC 4013) to passwords and scramp's client does, so a password that
SASLprep changes (or refuses) is refused there, where the two would disagree.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scramp import ScramClient, ScramException
from scramp.utils import saslprep

from broker import kerberos
from broker.protocol import ApiKey

from . import _oauth
from ._oauth import OAUTHBEARER, TokenProvider
from .errors import AuthenticationError, ConfigError, UnsupportedSaslMechanismError

if TYPE_CHECKING:
    from ._config import CommonConfig
    from ._connection import BrokerConnection

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
GSSAPI = kerberos.GSSAPI
MECHANISMS = (GSSAPI, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER)
MECHANISM_LIST = "GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
#: librdkafka's and the Java client's default service name
DEFAULT_SERVICE_NAME = "kafka"
#: The SCRAM extension that makes the user name a delegation token id (Kafka's ``ScramExtensions``)
TOKEN_AUTH_EXTENSION = ",tokenauth=true"
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's bounds for a SCRAM credential's iterations (ScramMechanism.minIterations/maxIterations)
SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS = 4096, 16384
LOGIN_MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule",
                 "org.apache.kafka.common.security.scram.ScramLoginModule", _oauth.LOGIN_MODULE,
                 kerberos.LOGIN_MODULE)
FLAGS = ("required", "requisite", "sufficient", "optional")
#: a session is given up this far before its end (the Java client re-authenticates at 85-95 %)
SESSION_MARGIN = 0.1

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


@dataclass(frozen=True)
class SaslSettings:
    """What a connection authenticates with: ``mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512),
    ``username`` and ``password``; or OAUTHBEARER and the ``token_provider`` its tokens come from
    (:mod:`broker.client._oauth`); or GSSAPI, the ``kerberos`` login (keytab and principal, or the
    ticket cache) and the brokers' ``kerberos_service_name``. The broker's own links may build one
    directly."""

    mechanism: str
    username: str = ""
    password: str = field(default="", repr=False)
    token_provider: TokenProvider | None = field(default=None, compare=False)
    kerberos: "kerberos.KerberosLogin | None" = None
    kerberos_service_name: str = DEFAULT_SERVICE_NAME
    #: SCRAM with a delegation token (KIP-48): ``username`` is the token id, ``password`` its HMAC in base64,
    #: and the client-first message carries ``tokenauth=true``
    token_auth: bool = False

    def __post_init__(self) -> None:
        mechanism = str(self.mechanism).strip().upper()
        _check_mechanism("sasl.mechanism", mechanism, self.mechanism)
        object.__setattr__(self, "mechanism", mechanism)
        if mechanism == GSSAPI:
            if self.kerberos is None:
                raise ConfigError("GSSAPI needs a Kerberos login (a keytab and principal, or the ticket cache)")
            if self.username or self.password or self.token_provider is not None:
                raise ConfigError("GSSAPI takes no username, password or token (Kerberos is the credential)")
            if not self.kerberos_service_name:
                raise ConfigError("sasl.kerberos.service.name is empty")
            return
        if self.kerberos is not None:
            raise ConfigError(f"a Kerberos login is for GSSAPI, not {mechanism}")
        if mechanism == OAUTHBEARER:
            if self.token_provider is None:
                raise ConfigError("OAUTHBEARER needs a token provider (the sasl.oauthbearer.* settings)")
            if self.username or self.password:
                raise ConfigError("OAUTHBEARER takes no username or password (its token is the credential)")
            return
        if self.token_provider is not None:
            raise ConfigError(f"a token provider is for OAUTHBEARER, not {mechanism}")
        if not isinstance(self.username, str) or not self.username:
            raise ConfigError("the SASL username is empty")
        if not isinstance(self.password, str) or not self.password:
            raise ConfigError("the SASL password is empty")
        if mechanism == "PLAIN" and ("\0" in self.username or "\0" in self.password):
            raise ConfigError("a PLAIN username or password cannot hold a NUL character")
        if self.token_auth and mechanism not in SCRAM_HASHES:
            raise ConfigError(f"a delegation token (tokenauth) authenticates with SCRAM-SHA-256 or SCRAM-SHA-512, "
                              f"not {mechanism}")

    @property
    def identity(self) -> str:
        """Who authenticates, for messages: the username, where OAUTHBEARER's token comes from, or the
        Kerberos principal."""
        if self.kerberos is not None:
            return self.kerberos.describe()
        if self.token_auth:
            return f"delegation token {self.username!r}"
        return repr(self.username) if self.token_provider is None else self.token_provider.describe


def _check_mechanism(prop: str, mechanism: str, given: Any) -> None:
    if mechanism not in MECHANISMS:
        raise ConfigError(f"{prop} must be {MECHANISM_LIST}, not {given!r}")


# -- configuration --------------------------------------------------------------------------------

def settings_from(config: "CommonConfig") -> SaslSettings | None:
    """Check the ``sasl.*`` properties of ``config`` (its ``security.protocol`` already normalized,
    see :func:`broker.client._tls.check`); the settings its connections use, None without SASL."""
    sasl = config.security_protocol in SASL_PROTOCOLS
    mechanism_prop, mechanism = "sasl.mechanism", config.sasl_mechanism
    if config.sasl_mechanisms is not None:
        if mechanism is not None and str(mechanism).strip().upper() != str(config.sasl_mechanisms).strip().upper():
            raise ConfigError("sasl.mechanism and sasl.mechanisms are the same setting: give one")
        mechanism_prop, mechanism = "sasl.mechanisms", config.sasl_mechanisms
    if mechanism is not None:
        if "," in str(mechanism):
            raise ConfigError(f"{mechanism_prop} takes one mechanism, not {mechanism!r}")
        _check_mechanism(mechanism_prop, str(mechanism).strip().upper(), mechanism)
        mechanism = str(mechanism).strip().upper()
        setattr(config, mechanism_prop.replace(".", "_"), mechanism)
    username, password, token_auth = config.sasl_username, config.sasl_password, False
    jaas = None if config.sasl_jaas_config is None else parse_jaas_config(str(config.sasl_jaas_config))
    if mechanism == GSSAPI or (mechanism is None and jaas is not None and jaas[0] == kerberos.LOGIN_MODULE):
        return _gssapi_settings(config, jaas, sasl, mechanism)
    given = [p for p in _KERBEROS_PROPS if getattr(config, p.replace(".", "_")) is not None]
    if given:
        raise ConfigError(f"{given[0]} is a GSSAPI setting" + (f", not one of {mechanism}" if mechanism else
                                                               ": set sasl.mechanism=GSSAPI"))
    oauth_given = _oauth.given(config)
    if mechanism == OAUTHBEARER or (mechanism is None and jaas is not None and jaas[0] == _oauth.LOGIN_MODULE):
        # OAUTHBEARER (its mechanism or its login module): the token source, checked now, used by connections
        if username is not None or password is not None:
            raise ConfigError(f"sasl.{'username' if username is not None else 'password'} is not used by "
                              "OAUTHBEARER (its credential is a token: see sasl.oauthbearer.*)")
        if jaas is not None and jaas[0] != _oauth.LOGIN_MODULE:
            raise ConfigError(f"sasl.jaas.config: login module {jaas[0].rsplit('.', 1)[-1]} is not OAUTHBEARER's: "
                              f"use {_oauth.LOGIN_MODULE}")
        if not sasl and not oauth_given and jaas is None:
            return None  # nothing to check, nothing used (as PLAIN without its credentials)
        provider = _oauth.token_provider(config, jaas)
        if not sasl:
            return None
        if mechanism is None:
            raise ConfigError(f"security.protocol={config.security_protocol} needs sasl.mechanism (OAUTHBEARER for "
                              "sasl.jaas.config's OAuthBearerLoginModule)")
        return SaslSettings(OAUTHBEARER, token_provider=provider)
    if oauth_given:
        raise ConfigError(f"{oauth_given[0]} is an OAUTHBEARER setting"
                          + (f", not one of {mechanism}" if mechanism else ": set sasl.mechanism=OAUTHBEARER"))
    if jaas is not None:
        if username is not None or password is not None:
            raise ConfigError("give either sasl.jaas.config or sasl.username and sasl.password, not both")
        module, options = jaas
        if module in (_oauth.LOGIN_MODULE, kerberos.LOGIN_MODULE):
            which = "OAUTHBEARER" if module == _oauth.LOGIN_MODULE else GSSAPI
            raise ConfigError(f"sasl.jaas.config: login module {module} is for sasl.mechanism={which}, "
                              f"not {mechanism}")
        username, password = options.get("username"), options.get("password")
        if username is None or password is None:
            missing = " and ".join(k for k in ("username", "password") if options.get(k) is None)
            raise ConfigError(f"sasl.jaas.config has no {missing} option")
        token_auth = _jaas_bool(options, "tokenauth")
    if not sasl:
        return None
    if mechanism is None:
        raise ConfigError(f"security.protocol={config.security_protocol} needs sasl.mechanism: {MECHANISM_LIST}")
    if username is None or password is None:
        raise ConfigError(f"security.protocol={config.security_protocol} needs sasl.username and sasl.password "
                          "(or sasl.jaas.config)")
    try:
        return SaslSettings(mechanism, str(username), str(password), token_auth=token_auth)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (sasl.{'jaas.config' if config.sasl_jaas_config is not None else 'username'}"
                          " / sasl.password)") from None


def _jaas_bool(options: dict[str, str], name: str) -> bool:
    """A JAAS option read as Java's ``Boolean.parseBoolean`` does: "true" in any case; absent is false."""
    return str(options.get(name, "")).lower() == "true"


_KERBEROS_PROPS = ("sasl.kerberos.service.name", "sasl.kerberos.keytab", "sasl.kerberos.principal")


def _gssapi_settings(config: "CommonConfig", jaas: tuple[str, dict[str, str]] | None, sasl: bool,
                     mechanism: str | None) -> SaslSettings | None:
    """GSSAPI's settings: librdkafka's ``sasl.kerberos.*`` or the Java client's ``Krb5LoginModule`` entry."""
    if config.sasl_username is not None or config.sasl_password is not None:
        raise ConfigError(f"sasl.{'username' if config.sasl_username is not None else 'password'} is not used by "
                          "GSSAPI (Kerberos: see sasl.kerberos.keytab and sasl.kerberos.principal)")
    if _oauth.given(config):
        raise ConfigError(f"{_oauth.given(config)[0]} is an OAUTHBEARER setting, not one of GSSAPI")
    service = config.sasl_kerberos_service_name
    keytab, principal = config.sasl_kerberos_keytab, config.sasl_kerberos_principal
    if jaas is not None:
        module, options = jaas
        if module != kerberos.LOGIN_MODULE:
            raise ConfigError(f"sasl.jaas.config: login module {module.rsplit('.', 1)[-1]} is not GSSAPI's: use "
                              f"{kerberos.LOGIN_MODULE}")
        if keytab is not None or principal is not None:
            raise ConfigError("give either sasl.jaas.config or sasl.kerberos.keytab and sasl.kerberos.principal, "
                              "not both")
        try:
            service = kerberos.service_name(options, service, "sasl.jaas.config")
            login = kerberos.login_from_jaas(options, "sasl.jaas.config", server=False)
        except kerberos.KerberosConfigError as exc:
            raise ConfigError(str(exc)) from None
    else:
        if keytab is not None and not principal:
            raise ConfigError("sasl.kerberos.keytab needs sasl.kerberos.principal (whose keys it holds)")
        if keytab is not None:
            try:
                kerberos.check_keytab(str(keytab), "sasl.kerberos.keytab")
            except kerberos.KerberosConfigError as exc:
                raise ConfigError(str(exc)) from None
        login = kerberos.KerberosLogin(str(principal) if principal else None,
                                       str(keytab) if keytab is not None else None)
    if not sasl:
        return None
    if mechanism is None:
        raise ConfigError(f"security.protocol={config.security_protocol} needs sasl.mechanism (GSSAPI for "
                          "sasl.jaas.config's Krb5LoginModule)")
    try:
        kerberos.gssapi_module()
    except kerberos.KerberosConfigError as exc:
        raise ConfigError(str(exc)) from None
    return SaslSettings(GSSAPI, kerberos=login, kerberos_service_name=str(service or DEFAULT_SERVICE_NAME))


_JAAS_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<quoted>"(?:[^"\\]|\\.)*")
  | (?P<word>[A-Za-z0-9_.$-]+)
  | (?P<eq>=)
  | (?P<semi>;)
""", re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """``[(kind, value, position)]`` of a JAAS entry; the text itself is never in an error (it holds a password)."""
    out, pos = [], 0
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None:
            if text[pos] == '"':
                raise ConfigError(f"sasl.jaas.config: an unterminated quoted value at character {pos + 1}")
            # the character itself is not shown: it may be part of a password
            raise ConfigError(f"sasl.jaas.config: unexpected character at character {pos + 1} (a value that holds "
                              "more than letters, digits and _-.$ must be double-quoted)")
        kind = match.lastgroup
        if kind == "quoted":
            value = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), match.group()[1:-1],
                           flags=re.DOTALL)
            out.append(("value", value, pos))
        elif kind == "word":
            out.append(("word", match.group(), pos))
        elif kind in ("eq", "semi"):
            out.append((kind, match.group(), pos))
        pos = match.end()
    return out


def parse_jaas_config(text: str) -> tuple[str, dict[str, str]]:
    """``(login module class, {option: value})`` of a ``sasl.jaas.config`` value (the module docstring
    says what it takes); a ConfigError names the place, never the text."""
    tokens = _tokens(text)
    if not tokens:
        raise ConfigError("sasl.jaas.config is empty: expected e.g. "
                          'org.apache.kafka.common.security.plain.PlainLoginModule required username="..." '
                          'password="...";')
    kind, module, pos = tokens[0]
    if kind != "word":
        raise ConfigError(f"sasl.jaas.config: expected a login module class at character {pos + 1}")
    if module not in LOGIN_MODULES:
        raise ConfigError(f"sasl.jaas.config: login module {module} is not supported: use "
                          "org.apache.kafka.common.security.plain.PlainLoginModule, "
                          "org.apache.kafka.common.security.scram.ScramLoginModule, "
                          f"{_oauth.LOGIN_MODULE} or {kerberos.LOGIN_MODULE}")
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in FLAGS:
        at = f"at character {tokens[1][2] + 1}" if len(tokens) > 1 else "at the end"
        raise ConfigError(f"sasl.jaas.config: expected the control flag (required) after {module.rsplit('.', 1)[-1]} "
                          f"{at}")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != "semi":
        kind, name, pos = tokens[i]
        if kind != "word":
            raise ConfigError(f"sasl.jaas.config: expected an option name at character {pos + 1}")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "eq":
            raise ConfigError(f"sasl.jaas.config: expected = after option {name}")
        if i + 2 >= len(tokens) or tokens[i + 2][0] not in ("value", "word"):
            raise ConfigError(f"sasl.jaas.config: expected a value for option {name}")
        if name in options:
            raise ConfigError(f"sasl.jaas.config: option {name} is given twice")
        options[name] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ConfigError("sasl.jaas.config: expected ; at the end of the login module entry")
    if i + 1 < len(tokens):
        if tokens[i + 1][0] == "word":
            raise ConfigError("sasl.jaas.config holds more than one login module: give one")
        raise ConfigError(f"sasl.jaas.config: unexpected text after ; at character {tokens[i + 1][2] + 1}")
    return module, options


# -- the exchange ---------------------------------------------------------------------------------

async def authenticate(conn: "BrokerConnection", sasl: SaslSettings, token: "_oauth.OAuthToken | None" = None) -> int:
    """SaslHandshake and SaslAuthenticate on ``conn`` (ApiVersions done; ``token``: OAUTHBEARER's, got
    before connecting); returns the session lifetime the broker gave (ms, 0: none). Raises
    AuthenticationError (see the module docstring)."""
    where = f"SASL {sasl.mechanism} authentication of {sasl.identity} at {conn.host}:{conn.port}"
    handshake = conn.broker_versions.get(ApiKey.SASL_HANDSHAKE)
    if handshake is None or handshake[1] < 1:
        served = "no SaslHandshake" if handshake is None else "SaslHandshake v0 only (no SaslAuthenticate)"
        raise AuthenticationError(ILLEGAL_SASL_STATE, f"the broker serves {served} (is this a SASL listener? "
                                  "see security.protocol)", context=where)
    resp = await conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": sasl.mechanism}, version=1)
    code = resp["error_code"]
    if code == UNSUPPORTED_SASL_MECHANISM:
        offered = resp.get("mechanisms") or []
        text = (f"the broker offers {', '.join(offered)}, not {sasl.mechanism} (see sasl.mechanism)" if offered else
                "the broker offers no SASL mechanism (is this a PLAINTEXT or SSL listener? see security.protocol)")
        raise UnsupportedSaslMechanismError(code, text, context=where, mechanisms=offered)
    if code == ILLEGAL_SASL_STATE:
        raise AuthenticationError(code, "the broker does not expect SASL on this connection (is this a PLAINTEXT "
                                  "or SSL listener? see security.protocol)", context=where)
    if code:
        raise AuthenticationError(code, "SaslHandshake refused", context=where)
    version = conn.version(ApiKey.SASL_AUTHENTICATE)

    async def step(token: bytes) -> dict[str, Any]:
        r = await conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=version)
        if r["error_code"]:
            raise AuthenticationError(r["error_code"], r.get("error_message") or None, context=where)
        return r

    if sasl.mechanism == GSSAPI:
        r = await _gssapi_exchange(conn, sasl, step, where)
    elif sasl.mechanism == "PLAIN":
        r = await step(b"\0" + sasl.username.encode() + b"\0" + sasl.password.encode())
    elif sasl.mechanism == OAUTHBEARER:
        if token is None:
            token = await sasl.token_provider.token()
        r = await step(_oauth.client_message(token.value, sasl.token_provider.extensions))
        challenge = bytes(r["auth_bytes"] or b"")
        if challenge:
            # RFC 7628 3.2.2: the error challenge; the client answers %x01 and the broker fails the exchange
            status = _oauth_status(challenge)
            why = (f"the broker refused the token (status {status}; expired, or not one the listener's validator "
                   "accepts: see the broker's log)")
            try:
                await step(b"\x01")
            except AuthenticationError as exc:
                detail = exc.error_message or ""
                raise AuthenticationError(exc.error_code, why if not detail or detail.startswith("{") else
                                          f"{why}: {detail}", context=where) from None
            raise AuthenticationError(SASL_AUTHENTICATION_FAILED, why, context=where)
    else:
        try:
            client = ScramClient([sasl.mechanism], sasl.username, sasl.password)
            first = client.get_client_first()
            if sasl.token_auth:  # RFC 5802's extensions follow the nonce, and are part of the signed message
                first += TOKEN_AUTH_EXTENSION
                client.client_first_bare += TOKEN_AUTH_EXTENSION
            r = await step(first.encode())
            client.set_server_first(_text(r["auth_bytes"]))
            r = await step(client.get_client_final().encode())
            client.set_server_final(_text(r["auth_bytes"]))
        except ScramException as exc:
            raise AuthenticationError(SASL_AUTHENTICATION_FAILED, f"the broker's SCRAM answer does not verify: {exc}"
                                      " (the broker does not hold this user's credential, or is not the broker "
                                      "meant)", context=where) from None
    return int(r.get("session_lifetime_ms") or 0)


#: A Kerberos exchange takes 3 round trips (more only with several context tokens); past this it is refused
_GSSAPI_MAX_ROUNDS = 10


async def _gssapi_exchange(conn: "BrokerConnection", sasl: SaslSettings, step, where: str) -> dict[str, Any]:
    """GSSAPI's rounds (:class:`broker.kerberos.ClientExchange`); the first, which may ask the KDC, on a thread."""
    exchange = kerberos.ClientExchange(sasl.kerberos, sasl.kerberos_service_name, conn.host)
    try:
        token = await asyncio.to_thread(exchange.first)
        for _ in range(_GSSAPI_MAX_ROUNDS):
            r = await step(token)
            if exchange.finished:
                return r
            token = exchange.step(bytes(r["auth_bytes"] or b""))  # computation only
    except kerberos.GssapiFailed as exc:
        raise AuthenticationError(SASL_AUTHENTICATION_FAILED, str(exc), context=where) from None
    raise AuthenticationError(SASL_AUTHENTICATION_FAILED, f"the broker did not end the GSSAPI exchange in "
                              f"{_GSSAPI_MAX_ROUNDS} rounds", context=where)


def _oauth_status(challenge: bytes) -> str:
    """The ``status`` of an OAUTHBEARER error challenge (RFC 7628 3.2.2), or what it holds."""
    try:
        answer = json.loads(challenge.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return repr(challenge[:100])
    if isinstance(answer, dict) and answer.get("status") is not None:
        return str(answer["status"])
    return repr(challenge[:100])


def _text(auth_bytes: bytes | None) -> str:
    try:
        return bytes(auth_bytes or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise ScramException("not UTF-8") from None


def session_deadline(lifetime_ms: int) -> float | None:
    """The monotonic time after which a connection with this session lifetime takes no new requests."""
    if lifetime_ms <= 0:
        return None
    return time.monotonic() + lifetime_ms * (1 - SESSION_MARGIN) / 1000


# -- SCRAM credentials (AlterUserScramCredentials) ---------------------------------------------------

def scram_credential(mechanism: str, password: str, iterations: int, salt: bytes | None = None
                     ) -> tuple[bytes, bytes]:
    """``(salt, salted password)`` for a SCRAM credential: ``Hi(password, salt, iterations)`` (RFC 5802)
    with a random 32-byte salt unless one is given. See the module docstring on SASLprep."""
    if mechanism not in SCRAM_HASHES:
        raise ConfigError(f"mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, not {mechanism!r}")
    if not isinstance(iterations, int) or isinstance(iterations, bool) \
            or not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
        raise ConfigError(f"iterations must be {SCRAM_MIN_ITERATIONS} to {SCRAM_MAX_ITERATIONS} (Kafka's bounds), "
                          f"not {iterations!r}")
    if not isinstance(password, str) or not password:
        raise ConfigError("the password is empty")
    try:
        prepared = saslprep(password)
    except ScramException as exc:
        raise ConfigError(f"the password cannot be used with SCRAM: {exc} (SASLprep, RFC 4013)") from None
    if prepared != password:
        raise ConfigError("the password changes under SASLprep (RFC 4013: non-ASCII spaces, soft hyphens, "
                          "compatibility forms ...): Kafka's clients and this one would disagree on it; "
                          "choose another")
    salt = secrets.token_bytes(32) if salt is None else salt
    # scramp exposes no public Hi(); hashlib's PBKDF2 is that function (RFC 5802 section 2.2)
    return salt, hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, iterations)
