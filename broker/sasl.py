"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: GSSAPI, PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, as
Kafka 2.7 serves them.

Configuration (Kafka's property names; :mod:`broker.config` checks them at start):

``sasl.enabled.mechanisms``
    The mechanisms a SASL listener offers, e.g. ``PLAIN,SCRAM-SHA-256``; Kafka's
    default is ``GSSAPI`` (Kerberos, :mod:`broker.kerberos`). The others:
    PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (bearer tokens,
    :mod:`broker.oauth`, with its validator and settings). Per listener as
    ``listener.name.<listener>.sasl.enabled.mechanisms``.
GSSAPI's settings
    The listener's keys come from its JAAS entry
    (``listener.name.<listener>.gssapi.sasl.jaas.config``, Kafka's
    ``com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true
    storeKey=true keyTab="..." principal="kafka/<host>@<REALM>";``), checked at
    start against the keytab. ``sasl.kerberos.service.name`` (or ``serviceName``
    in that entry; one of them is required, as in Kafka) is the first part of the
    brokers' principals, which brokers address each other with.
    ``sasl.kerberos.principal.to.local.rules`` (``DEFAULT``) makes a client's
    Kerberos principal into the short name of its Kafka principal
    (:mod:`broker.kerberos_names`): ``alice@EXAMPLE.COM`` is ``User:alice`` when
    EXAMPLE.COM is the default realm of the host's Kerberos configuration.
``listener.name.<listener>.<mechanism>.sasl.jaas.config``
    The JAAS login module of one mechanism on one listener (the listener and
    the mechanism in lower case), as in Kafka::

        listener.name.sasl_plaintext.plain.sasl.jaas.config=\\
            org.apache.kafka.common.security.plain.PlainLoginModule required \\
            username="admin" password="admin-secret" \\
            user_admin="admin-secret" user_alice="alice-secret";

    PLAIN needs it: each ``user_<name>="<password>"`` is a user the listener
    accepts. SCRAM reads its users from the metadata store instead (below);
    its module (``org.apache.kafka.common.security.scram.ScramLoginModule``)
    is needed only on the inter-broker listener. ``username`` and ``password``
    are what this broker authenticates with to other brokers, on the
    inter-broker listener with ``sasl.mechanism.inter.broker.protocol``.
``sasl.mechanism.inter.broker.protocol``
    The mechanism brokers authenticate to each other with, when the
    inter-broker listener is SASL (Kafka's default, GSSAPI: with the keytab and
    principal of the listener's JAAS entry; OAUTHBEARER is not served between
    brokers).
``connection.failed.authentication.delay.ms`` (100)
    A failed authentication is answered after this delay, then the connection
    is closed: a client with a wrong password cannot try thousands a second.
``sasl.server.max.receive.size`` (524288)
    The largest frame accepted from a client before it has authenticated: an
    unauthenticated client cannot make the broker allocate a 100 MB request.
``connections.max.reauth.ms`` (0)
    Re-authentication (KIP-368): above 0, a session lasts that long (or until
    its OAUTHBEARER token expires, if sooner; SaslAuthenticate v1+ tells the
    client), the client re-authenticates on the same connection before then
    (a new SaslHandshake, the same principal and mechanism), and a request
    after the session ended closes the connection. 0 (Kafka's default): a
    connection stays authenticated for its life. Per listener and mechanism as
    ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms``.

SCRAM credentials are kept where Kafka 2.7 keeps them, in the metadata store
(ZooKeeper, or the embedded store of a single node) at ``/config/users/<user>``
(the name URL-encoded as Kafka's ``Sanitizer`` does), as
``{"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"}}``;
AlterUserScramCredentials writes them (KIP-554), so ``kafka-configs.sh
--zookeeper`` and Kafka's brokers read the same nodes. The password itself is
never stored: the stored key and the server key are derived from the salted
password (RFC 5802), and SCRAM proves knowledge of it without sending it.
Credentials are read from the store at each authentication, so a change is
in force on every broker at once. A SCRAM client-first message with the
extension ``tokenauth=true`` names a delegation token instead of a user
(:mod:`broker.tokens`): the credential is derived from the token's HMAC, and the
principal is the token's owner.

The exchange, per connection (:class:`SaslServerSession`): ApiVersions may
come first; then SaslHandshake names a mechanism (UNSUPPORTED_SASL_MECHANISM
and the enabled list if it is not one); after SaslHandshake v1 the tokens
travel in SaslAuthenticate requests, after v0 as bare size-prefixed frames
(Kafka's original protocol, still used by old clients). Any other request
before the exchange succeeds closes the connection. A listener that enables
GSSAPI also takes Kafka 0.9's clients, whose first frame is already a Kerberos
token (it starts with 0x60, which no request does), as GSSAPI in bare frames;
GSSAPI's last step is answered with nothing in bare frames (as Kafka, whose
``GssKrb5Server`` gives null there). The authenticated
principal is ``User:<name>`` (with GSSAPI, the short name of the client's
Kerberos principal).
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable, Mapping

import scramp
from scramp import core as _scram_core

from broker import kerberos, oauth

if TYPE_CHECKING:
    from broker import tokens

GSSAPI = kerberos.GSSAPI
PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = oauth.OAUTHBEARER
#: The mechanisms served here, in Kafka's spelling.
MECHANISMS = (GSSAPI, PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
#: Kafka's bounds on a SCRAM credential's iteration count (ScramMechanism.minIterations/maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_MODULES = {PLAIN: PLAIN_MODULE, SCRAM_SHA_256: SCRAM_MODULE, SCRAM_SHA_512: SCRAM_MODULE,
            OAUTHBEARER: oauth.LOGIN_MODULE, GSSAPI: kerberos.LOGIN_MODULE}
_FLAGS = ("required", "requisite", "sufficient", "optional")

#: What a client is told when SCRAM fails, whatever the reason (unknown user or wrong proof), as Kafka words it.
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
PLAIN_FAILED = "Authentication failed: Invalid username or password"


class SaslConfigError(ValueError):
    """A SASL setting that cannot be used; ``str(err)`` is one line naming the property."""


class AuthenticationFailed(Exception):
    """The client did not prove who it is; ``str(err)`` is what it is told (never which part was wrong)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        #: for the broker's log line only
        self.detail = detail or message


# -- JAAS ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class JaasEntry:
    """One login module of a ``sasl.jaas.config``: its class, control flag and options."""

    module: str
    flag: str
    options: Mapping[str, str] = field(repr=False)  # passwords among them


_JAAS_TOKEN = re.compile(r'\s*(?:(?P<semi>;)|(?P<eq>=)|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<word>[^\s=;"]+))', re.S)


def parse_jaas(text: str, prop: str) -> JaasEntry:
    """Parse ``<module> <flag> key="value" ... ;`` (exactly one login module, as Kafka's
    ``sasl.jaas.config``); values quoted (``\\`` escapes the next character) or bare words."""
    tokens: list[tuple[str, str]] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            # the position only: the text there may be a password
            raise SaslConfigError(f"{prop}: cannot read the JAAS configuration at character {pos + 1} "
                                  f"(an unclosed quote?)")
        pos = match.end()
        if match.group("semi"):
            tokens.append((";", ";"))
        elif match.group("eq"):
            tokens.append(("=", "="))
        elif match.group("quoted") is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match.group("quoted"), flags=re.S)))
        elif match.group("word") is not None:
            tokens.append(("word", match.group("word")))
    usage = (f"{prop}: expected '<LoginModule class> required key=\"value\" ...;' "
             f"(one login module, ending with ;)")
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" or tokens[-1][0] != ";":
        raise SaslConfigError(usage)
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise SaslConfigError(f"{prop}: {tokens[1][1]!r} is not a JAAS control flag ({', '.join(_FLAGS)})")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if any(kind == ";" for kind, _ in body):
        raise SaslConfigError(f"{prop}: holds more than one login module; give exactly one")
    if len(body) % 3:
        raise SaslConfigError(usage)
    for i in range(0, len(body), 3):
        key, eq, value = body[i:i + 3]
        if key[0] != "word" or eq[0] != "=" or value[0] not in ("word", "value"):
            raise SaslConfigError(usage)
        options[key[1]] = value[1]
    return JaasEntry(module, flag, options)


# -- per listener ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ListenerSasl:
    """What one SASL listener serves: its mechanisms, and PLAIN's users (name -> password)."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: The JAAS entry of each mechanism that has one (for ``username``/``password`` to other brokers).
    jaas: Mapping[str, JaasEntry] = field(default_factory=dict, repr=False)
    #: How OAUTHBEARER tokens are checked, when it is enabled (:mod:`broker.oauth`)
    oauth: "oauth.Validator | None" = field(default=None, repr=False)
    #: GSSAPI's keys and short names, when it is enabled (:mod:`broker.kerberos`)
    kerberos: "kerberos.Acceptor | None" = field(default=None, repr=False)


@dataclass(frozen=True)
class KerberosSettings:
    """The broker's ``sasl.kerberos.*`` settings."""

    service_name: str | None
    principal_to_local_rules: tuple[str, ...] = ("DEFAULT",)


def jaas_property(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def listener_sasl(mechanisms: list[str], jaas_texts: Mapping[str, str], listener: str,
                  mechanisms_prop: str, handlers: Mapping[str, str] | None = None,
                  jwks: "oauth.JwksSettings | None" = None,
                  krb: KerberosSettings | None = None) -> ListenerSasl:
    """Check and gather one SASL listener's settings (``jaas_texts``: mechanism -> its JAAS text;
    ``handlers``: mechanism -> its ``sasl.server.callback.handler.class``; ``jwks``: the
    ``sasl.oauthbearer.*`` settings, None without an endpoint; ``krb``: the ``sasl.kerberos.*``
    settings). With GSSAPI the keytab is read (blocking)."""
    names = [m.strip().upper() for m in mechanisms if m.strip()]
    if not names:
        raise SaslConfigError(f"{mechanisms_prop} is empty: a SASL listener ({listener}) needs a mechanism "
                              f"({', '.join(MECHANISMS)})")
    unknown = [m for m in names if m not in MECHANISMS]
    if unknown:
        raise SaslConfigError(f"{mechanisms_prop}={','.join(names)}: {', '.join(unknown)} not supported; "
                              f"set it to one or more of {', '.join(MECHANISMS)}")
    jaas: dict[str, JaasEntry] = {}
    for mechanism, text in jaas_texts.items():
        prop = jaas_property(listener, mechanism)
        if mechanism not in MECHANISMS:
            raise SaslConfigError(f"{prop}: {mechanism} is not a mechanism served here ({', '.join(MECHANISMS)})")
        entry = parse_jaas(text, prop)
        if entry.module != _MODULES[mechanism]:
            raise SaslConfigError(f"{prop}: {mechanism} takes {_MODULES[mechanism]}, not {entry.module}")
        jaas[mechanism] = entry
    plain_users: dict[str, str] = {}
    if PLAIN in names:
        entry = jaas.get(PLAIN)
        if entry is None:
            raise SaslConfigError(f"listener {listener} enables PLAIN but {jaas_property(listener, PLAIN)} is not "
                                  f"set: its user_<name>=\"<password>\" options are the users it accepts")
        plain_users = {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_") and len(k) > 5}
        if not plain_users:
            raise SaslConfigError(f"{jaas_property(listener, PLAIN)}: no user_<name>=\"<password>\" option: "
                                  f"the listener would accept nobody")
    validator = None
    for mechanism in (handlers or {}):
        if mechanism != OAUTHBEARER:
            raise SaslConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.server.callback."
                                  f"handler.class: only OAUTHBEARER takes a server callback handler here")
    if OAUTHBEARER in names:
        validator = _oauth_validator(listener, (handlers or {}).get(OAUTHBEARER), jaas.get(OAUTHBEARER), jwks)
    acceptor = None
    if GSSAPI in names:
        acceptor = _kerberos_acceptor(listener, jaas.get(GSSAPI), krb or KerberosSettings(None))
    return ListenerSasl(listener, tuple(dict.fromkeys(names)), plain_users, jaas, validator, acceptor)


def kerberos_service_name(entry: JaasEntry, krb: KerberosSettings, prop: str) -> str:
    """GSSAPI's service name: ``sasl.kerberos.service.name`` or the JAAS entry's ``serviceName`` (one
    is required, and they must agree, as in Kafka)."""
    try:
        name = kerberos.service_name(entry.options, krb.service_name, prop)
    except kerberos.KerberosConfigError as exc:
        raise SaslConfigError(str(exc)) from None
    if not name:
        raise SaslConfigError("GSSAPI needs sasl.kerberos.service.name (or serviceName in " + prop + "): the "
                              "first part of the brokers' Kerberos principals, e.g. kafka")
    return name


def _kerberos_acceptor(listener: str, entry: JaasEntry | None, krb: KerberosSettings) -> "kerberos.Acceptor":
    """GSSAPI on a listener: its keytab checked against its principal, and the short namer."""
    from broker import kerberos_names

    prop = jaas_property(listener, GSSAPI)
    if entry is None:
        raise SaslConfigError(f"listener {listener} enables GSSAPI but {prop} is not set: its "
                              f"{kerberos.LOGIN_MODULE} entry names the keytab and the principal to accept as")
    service = kerberos_service_name(entry, krb, prop)
    try:
        login = kerberos.login_from_jaas(entry.options, prop, server=True)
        namer = kerberos_names.ShortNamer.from_rules(list(krb.principal_to_local_rules),
                                                     kerberos_names.default_realm())
        credentials = login.acceptor_credentials()
    except (kerberos.KerberosConfigError, kerberos_names.KerberosNameError) as exc:
        raise SaslConfigError(str(exc)) from None
    return kerberos.Acceptor(login, service, credentials, namer)


def _oauth_validator(listener: str, handler: str | None, entry: JaasEntry | None,
                     jwks: "oauth.JwksSettings | None") -> "oauth.Validator":
    """OAUTHBEARER's validator on a listener, as Kafka picks it (see :mod:`broker.oauth`)."""
    prop = f"listener.name.{listener.lower()}.oauthbearer.sasl.server.callback.handler.class"
    handler = (handler or "").strip()
    if handler in oauth.JWKS_VALIDATOR_CLASSES:
        if jwks is None:
            raise SaslConfigError(f"{prop}={handler} needs sasl.oauthbearer.jwks.endpoint.url: where the identity "
                                  f"provider's signing keys are")
        return oauth.JwksValidator(jwks)
    if handler and handler != oauth.UNSECURED_VALIDATOR_CLASS:
        raise SaslConfigError(f"{prop}={handler}: not served here (a Java class); use "
                              f"{oauth.JWKS_VALIDATOR_CLASSES[1]} with sasl.oauthbearer.jwks.endpoint.url, or leave "
                              f"it unset for unsecured tokens")
    if entry is None:
        raise SaslConfigError(f"listener {listener} enables OAUTHBEARER but {jaas_property(listener, OAUTHBEARER)} "
                              f"is not set (Kafka needs its OAuthBearerLoginModule entry)")
    try:
        return oauth.UnsecuredValidator(entry.options, jaas_property(listener, OAUTHBEARER))
    except ValueError as exc:
        raise SaslConfigError(str(exc)) from None


@dataclass(frozen=True)
class ClientCredentials:
    """What this broker authenticates with to other brokers (a SASL inter-broker listener)."""

    mechanism: str
    username: str
    password: str = field(repr=False)
    #: GSSAPI: the keytab and principal, and the service name of the other brokers
    kerberos: "kerberos.KerberosLogin | None" = None
    service_name: str | None = None


def inter_broker_credentials(sasl: ListenerSasl, mechanism: str, prop: str) -> ClientCredentials:
    """The ``username``/``password`` of the inter-broker listener's JAAS entry for ``mechanism`` (with
    GSSAPI its keytab and principal)."""
    if mechanism not in MECHANISMS:
        raise SaslConfigError(f"{prop}={mechanism} is not supported: set it to one of "
                              f"{', '.join(sasl.mechanisms)}, the mechanisms of listener {sasl.listener}")
    if mechanism == OAUTHBEARER:
        raise SaslConfigError(f"{prop}=OAUTHBEARER is not served between brokers; use PLAIN or SCRAM on the "
                              f"inter-broker listener {sasl.listener} (clients may still use OAUTHBEARER)")
    if mechanism not in sasl.mechanisms:
        raise SaslConfigError(f"{prop}={mechanism} is not enabled on the inter-broker listener {sasl.listener} "
                              f"({', '.join(sasl.mechanisms)})")
    entry = sasl.jaas.get(mechanism)
    where = jaas_property(sasl.listener, mechanism)
    if mechanism == GSSAPI:
        acceptor = sasl.kerberos  # the listener's entry, checked: the same keytab and principal initiate
        return ClientCredentials(GSSAPI, "", "", acceptor.login, acceptor.service_name)
    if entry is None or not entry.options.get("username") or not entry.options.get("password"):
        raise SaslConfigError(f"{where} must give username=\"...\" password=\"...\" (neither empty): what this "
                              f"broker authenticates with to the others over {mechanism}")
    if mechanism == PLAIN and ("\0" in entry.options["username"] or "\0" in entry.options["password"]):
        raise SaslConfigError(f"{where}: a PLAIN username or password cannot hold a NUL character")
    return ClientCredentials(mechanism, entry.options["username"], entry.options["password"])


# -- SCRAM credentials ----------------------------------------------------------------------

@dataclass(frozen=True)
class ScramCredential:
    """One user's credential for one SCRAM mechanism (RFC 5802): never the password itself."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def encode(self) -> str:
        """Kafka's text form: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
        b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> "ScramCredential":
        fields = dict(item.partition("=")[::2] for item in text.split(","))
        try:
            return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> "ScramCredential":
        """The stored key and server key of a salted password (what AlterUserScramCredentials sends)."""
        hf = scramp.ScramMechanism(mechanism).hf
        _client_key, stored_key, server_key = _scram_core._c_key_stored_key_s_key(hf, salted_password)
        return cls(bytes(salt), stored_key, server_key, iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> "ScramCredential":
        salt, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=iterations)
        return cls(salt, stored_key, server_key, iterations)


def scram_credentials(user_config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials among a user's stored configs, by mechanism (other keys and bad entries skipped)."""
    found = {}
    for name, text in user_config.items():
        if name in SCRAM_MECHANISMS:
            try:
                found[name] = ScramCredential.decode(text)
            except ValueError:
                continue
    return found


def sanitize_user(name: str) -> str:
    """A user name as a znode name, as Kafka's ``Sanitizer.sanitize`` writes it (URL-encoded, UTF-8;
    ``*`` as ``%2A``, a space as ``%20``)."""
    return urllib.parse.quote(name, safe="-_.").replace("~", "%7E")


def desanitize_user(node: str) -> str:
    return urllib.parse.unquote(node)


# -- the server side of one connection ------------------------------------------------------

#: ``await lookup(user, mechanism)``: the user's credential from the store, or None.
CredentialLookup = Callable[[str, str], Awaitable["ScramCredential | None"]]
#: ``await token_lookup(token_id, mechanism)``: a delegation token's :class:`broker.tokens.TokenAuth`, or None.
TokenLookup = Callable[[str, str], Awaitable["tokens.TokenAuth | None"]]


class SaslServerSession:
    """The SASL state of one connection on a SASL listener (see the module docstring).

    States: ``handshake`` (waiting for SaslHandshake), ``authenticate`` (a mechanism chosen; tokens come
    in SaslAuthenticate requests, or as bare frames when ``raw``), ``done`` (``principal`` set) and
    ``failed``.
    """

    def __init__(self, sasl: ListenerSasl, lookup: CredentialLookup, token_lookup: TokenLookup | None = None) -> None:
        self.sasl = sasl
        self._lookup = lookup
        self._token_lookup = token_lookup
        self.state = "handshake"
        self.raw = False
        self.mechanism: str | None = None
        self.user: str | None = None  # once known (for the log), even if the exchange then fails
        self.principal: str | None = None
        self._scram: "_scram_core.ScramServer | None" = None
        self._oauth: "oauth.OAuthBearerExchange | None" = None
        self._gssapi: "kerberos.ServerExchange | None" = None
        #: The owner of the delegation token a SCRAM exchange names (``tokenauth=true``), once it is found
        self._token_owner: str | None = None
        #: When the credential stops being valid (epoch ms; an OAUTHBEARER token's exp), None: never
        self.expires_at_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self.state == "done"

    @property
    def token_authenticated(self) -> bool:
        """Authenticated with a delegation token: the principal is the token's owner."""
        return self.complete and self._token_owner is not None

    def handshake(self, mechanism: str, version: int) -> bool:
        """SaslHandshake: True when ``mechanism`` is enabled here (then tokens are expected)."""
        if mechanism not in self.sasl.mechanisms:
            return False
        self.mechanism = mechanism
        self.state = "authenticate"
        self.raw = version == 0
        if mechanism == OAUTHBEARER:
            self._oauth = oauth.OAuthBearerExchange(self.sasl.oauth)
        elif mechanism == GSSAPI:
            self._gssapi = self.sasl.kerberos.exchange()
        return True

    async def step(self, token: bytes) -> bytes:
        """One client token in, the server's answer out; raises :class:`AuthenticationFailed`."""
        if self.state != "authenticate":
            self.state = "failed"
            raise AuthenticationFailed("Unexpected SASL token", f"a token in state {self.state}")
        try:
            if self.mechanism == PLAIN:
                return self._plain(bytes(token))
            if self.mechanism == OAUTHBEARER:
                return self._oauth_step(bytes(token))
            if self.mechanism == GSSAPI:
                return await self._gssapi_step(bytes(token))
            return await self._scram_step(bytes(token))
        except AuthenticationFailed:
            self.state = "failed"
            raise

    def _plain(self, token: bytes) -> bytes:
        # RFC 4616: [authzid] NUL authcid NUL passwd
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                       f"{len(parts)}", "malformed PLAIN message")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8", "malformed PLAIN message") from None
        self.user = user
        # Kafka's PlainSaslServer, in its order
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified", "no user name")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified", f"user {user!r}: no password")
        expected = self.sasl.plain_users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8")):
            raise AuthenticationFailed(PLAIN_FAILED, f"user {user!r}: " + (
                "unknown user" if expected is None else "wrong password"))
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username", f"user {user!r} asked to act as {authzid!r}")
        self._done(f"User:{user}")
        return b""

    def _oauth_step(self, token: bytes) -> bytes:
        exchange = self._oauth
        try:
            answer, done = exchange.step(token)
        except oauth.AuthenticationRefused as exc:
            self.user = exchange.user
            raise AuthenticationFailed(str(exc), exc.detail) from None
        if done:
            self.user = exchange.user
            self.expires_at_ms = exchange.token.expires_at_ms
            self._done(f"User:{exchange.user}")
        return answer

    async def _gssapi_step(self, token: bytes) -> bytes:
        from broker.kerberos_names import KerberosNameError

        exchange = self._gssapi
        try:
            if exchange.blocking:  # the keytab read and the replay cache written: never on the event loop
                answer, done = await asyncio.get_running_loop().run_in_executor(None, exchange.step, token)
            else:
                answer, done = exchange.step(token)
        except kerberos.GssapiFailed as exc:
            self.user = exchange.peer
            raise AuthenticationFailed(str(exc), exc.detail) from None
        self.user = exchange.peer
        if done:
            try:
                short = self.sasl.kerberos.short_name(exchange.peer)
            except KerberosNameError as exc:
                raise AuthenticationFailed("Authentication failed: no principal mapping for the client",
                                           f"{exchange.peer}: {exc}") from None
            self._done(f"User:{short}")
        return answer

    async def _scram_step(self, token: bytes) -> bytes:
        failed = SCRAM_FAILED.format(self.mechanism)
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(failed, "SCRAM message not UTF-8") from None
        if self._scram is None:
            user = _scram_user(message)
            self.user = user
            if not user:
                raise AuthenticationFailed(failed, "malformed SCRAM client-first message (no user name)")
            parts = message.split(",")
            token = _token_auth(parts[4:])
            try:
                if token:
                    found = None if self._token_lookup is None else await self._token_lookup(user, self.mechanism)
                    credential = None if found is None else found.credential
                else:
                    credential = await self._lookup(user, self.mechanism)
            except Exception as exc:  # noqa: BLE001 - a name the store cannot hold, or the store unreachable
                raise AuthenticationFailed(failed, f"user {user!r}: credential not read ({exc})") from None
            if credential is None:
                raise AuthenticationFailed(failed, f"delegation token {user!r}: none such (or expired, or tokens "
                                                   "disabled)" if token else
                                                   f"user {user!r}: no {self.mechanism} credential")
            if token:
                self._token_owner, self.expires_at_ms = found.owner, found.expiry_ms
            if credential.iterations < MIN_ITERATIONS:
                raise AuthenticationFailed(failed, f"user {user!r}: its {self.mechanism} credential has "
                                                   f"{credential.iterations} iterations, below {MIN_ITERATIONS}")
            auth_info = (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
            server = scramp.ScramMechanism(self.mechanism).make_server(lambda _name: auth_info)
            try:
                # scramp takes RFC 5802's one-letter attributes only: Kafka's extensions (tokenauth=...) are
                # kept out of what it parses, and put back into the message both sides sign
                server.set_client_first(",".join(parts[:4]))
                if len(parts) > 4:
                    server.client_first_bare = ",".join(parts[2:])
                first = server.get_server_first()
            except scramp.ScramException as exc:
                raise AuthenticationFailed(failed, f"user {user!r}: {exc}") from None
            self._scram = server
            return first.encode("utf-8")
        server, self._scram = self._scram, None
        try:
            server.set_client_final(message)
        except scramp.ScramException as exc:
            raise AuthenticationFailed(failed, f"user {self.user!r}: {exc}") from None
        final = server.get_server_final()
        self._done(self._token_owner or f"User:{self.user or ''}")
        return final.encode("utf-8")

    def _done(self, principal: str) -> None:
        self.state = "done"
        self.principal = principal


def _token_auth(extensions: list[str]) -> bool:
    """Whether a SCRAM client-first message's extensions (the items after the nonce, RFC 5802) hold
    ``tokenauth=true`` (Kafka's ``ScramExtensions``, the value read as Java's ``Boolean.parseBoolean``)."""
    for item in extensions:
        name, _, value = item.partition("=")
        if name == "tokenauth":
            return value.lower() == "true"
    return False


def _scram_user(client_first: str) -> str | None:
    """The user name of a SCRAM client-first message (``n,,n=<saslname>,r=<nonce>[,ext]``), unescaped."""
    parts = client_first.split(",")
    if len(parts) < 4 or not parts[2].startswith("n="):
        return None
    name = parts[2][2:]
    if "=" in name.replace("=2C", "").replace("=3D", ""):  # RFC 5802: '=' only in those two escapes
        return None
    return name.replace("=2C", ",").replace("=3D", "=")
