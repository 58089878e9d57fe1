"""SASL/OAUTHBEARER for the client (KIP-255, RFC 7628): where the bearer token comes from, and the message.

Configured as librdkafka configures it, or as the Java client does (``sasl.mechanism=OAUTHBEARER``
with ``security.protocol`` SASL_PLAINTEXT or SASL_SSL; see :mod:`broker.client._sasl` for the rest):

**OIDC, librdkafka** (``sasl.oauthbearer.method=oidc``)::

    sasl.oauthbearer.client.id=kafka-client
    sasl.oauthbearer.client.secret=...
    sasl.oauthbearer.token.endpoint.url=https://idp.example/realms/kafka/protocol/openid-connect/token
    sasl.oauthbearer.scope=kafka                       # optional
    sasl.oauthbearer.extensions=traceId=abc,tenant=x   # optional SASL extensions, k=v,k2=v2

**OIDC, the Java client** (Kafka 3.1, KIP-768)::

    sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
    sasl.oauthbearer.token.endpoint.url=https://idp.example/.../token
    sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
        clientId="kafka-client" clientSecret="..." scope="kafka" extension_traceId="abc";

(the handler's 3.1-3.3 package, ``...oauthbearer.secured.OAuthBearerLoginCallbackHandler``, too).
Either way the token is the OAuth 2 client-credentials grant (RFC 6749 4.4): a POST of
``grant_type=client_credentials[&scope=...]`` (form-encoded) to the token endpoint with HTTP basic
authentication by the client id and secret, as librdkafka and Kafka 3.1 send it; the answer's JSON
``access_token`` is the token, valid until its JWT ``exp`` claim, else ``expires_in`` seconds. The
request runs on a thread of its own, never on the client's event loop, with ``request.timeout.ms``
as its timeout. An ``https://`` endpoint's certificate is verified with the system's CAs, or with
librdkafka's ``https.ca.location`` (a PEM file or an ``openssl rehash``ed directory of CA
certificates) when it is set. The token is kept and used by every new connection until 80 % of its lifetime has
passed (librdkafka's and Java's refresh point), then the next connection gets a new one first
(several connections at once share one request); if that fails while the old token is still
valid, the old one is used and the failure logged. Connections already open keep their session: a
broker that ends sessions with their token (KIP-368) tells the client, which opens a new connection
before the end (:mod:`broker.client._sasl`), with the current token; there is no re-authentication
in place. The endpoint refusing the client (HTTP 4xx:
a wrong secret, an unknown client or scope) raises :class:`~broker.client.errors.AuthenticationError`,
never retried; an endpoint that cannot be reached or fails (5xx) is a
:class:`~broker.client.errors.KafkaConnectionError`, retried as any connection.

**Unsecured JWTs, librdkafka** (development brokers, Kafka 2.7's default validator)::

    enable.sasl.oauthbearer.unsecure.jwt=true
    sasl.oauthbearer.config=principal=alice scope=read,write lifeSeconds=3600

``sasl.oauthbearer.config`` is librdkafka's space-separated ``name=value`` list: ``principal``
(required), ``principalClaimName`` (``sub``), ``scope`` (comma-separated, a JSON list claim),
``scopeClaimName`` (``scope``), ``lifeSeconds`` (3600) and ``extension_<name>=<value>`` (SASL
extensions). The token is ``{"alg":"none"}`` and the claims principal, ``iat``, ``exp`` and scope,
base64url, with an empty signature (RFC 7515 appendix A.5).

**Unsecured JWTs, the Java client** (no ``sasl.login.callback.handler.class``)::

    sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
        unsecuredLoginStringClaim_sub="alice";

with Java's other options: ``unsecuredLoginStringClaim_<claim>``, ``unsecuredLoginNumberClaim_<claim>``,
``unsecuredLoginListClaim_<claim>`` (the first character is the separator: ``",a,b"``),
``unsecuredLoginPrincipalClaimName`` (``sub``), ``unsecuredLoginScopeClaimName`` (``scope``),
``unsecuredLoginLifetimeSeconds`` (3600) and ``unsecuredLoginExtension_<name>``.

The client's one message (:func:`client_message`) is ``n,,\\x01auth=Bearer <token>\\x01`` then
``<key>=<value>\\x01`` per extension, then ``\\x01``; a key is letters only (``auth`` is reserved), a
value printable ASCII, space, tab, CR or LF. Every setting is checked when the client is built, and a
bad or missing one is a :class:`~broker.client.errors.ConfigError` naming it; no message holds the
client secret, and nothing is fetched before the first connection.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import json
import logging
import os
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from .errors import AuthenticationError, ConfigError, KafkaConnectionError

if TYPE_CHECKING:
    from ._config import CommonConfig

log = logging.getLogger("broker.client")

OAUTHBEARER = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#: The Java client's OIDC login callback handler (Kafka 3.4 on, and 3.1-3.3's package)
LOGIN_CALLBACK_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
UNSECURED_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.internals.unsecured." \
                          "OAuthBearerUnsecuredLoginCallbackHandler"
#: the part of a token's lifetime after which a new one is fetched (librdkafka, Java's refresh window factor)
REFRESH_FACTOR = 0.8
SASL_AUTHENTICATION_FAILED = 58

_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")

#: The settings of CommonConfig this module reads (dotted names), other than sasl.jaas.config
OIDC_PROPS = ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope")
LIBRDKAFKA_PROPS = ("sasl.oauthbearer.method", *OIDC_PROPS, "sasl.oauthbearer.extensions", "sasl.oauthbearer.config",
                    "enable.sasl.oauthbearer.unsecure.jwt")
ALL_PROPS = (*LIBRDKAFKA_PROPS, "sasl.oauthbearer.token.endpoint.url", "sasl.login.callback.handler.class",
             "https.ca.location")


@dataclass(frozen=True)
class OAuthToken:
    """A bearer token: its text, when it expires and when to fetch the next (epoch seconds), whom it names."""

    value: str = field(repr=False)
    expires_at: float
    refresh_at: float
    principal: str | None = None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _jwt_claims(token: str) -> dict | None:
    """The claims of a JWS compact serialization, unverified (None when ``token`` is not one)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError, UnicodeError):
        return None
    return claims if isinstance(claims, dict) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def check_extensions(extensions: Mapping[str, str], prop: str) -> dict[str, str]:
    """SASL extensions as RFC 7628 and Kafka allow them; a ConfigError names ``prop``."""
    for key, value in extensions.items():
        if not _EXTENSION_KEY.fullmatch(key):
            raise ConfigError(f"{prop}: extension name {key!r} must be letters only (RFC 7628)")
        if key == "auth":
            raise ConfigError(f"{prop}: extension name 'auth' is reserved (it carries the token)")
        if not _EXTENSION_VALUE.fullmatch(value):
            raise ConfigError(f"{prop}: the value of extension {key} must be non-empty printable ASCII "
                              "(space, tab, CR and LF allowed)")
    return dict(extensions)


def client_message(token: str, extensions: Mapping[str, str] | None = None) -> bytes:
    """RFC 7628's client initial response: ``n,,\\x01auth=Bearer <token>\\x01[k=v\\x01...]\\x01``."""
    kvs = "".join(f"{k}={v}\x01" for k, v in (extensions or {}).items())
    return f"n,,\x01auth=Bearer {token}\x01{kvs}\x01".encode("utf-8")


# -- where tokens come from -------------------------------------------------------------------------

class TokenProvider:
    """Hands every new connection the current token (see the module docstring); thread-safe, and usable
    from any event loop. ``extensions`` go with every token; ``describe`` names the source in errors."""

    extensions: dict[str, str]
    describe: str

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: OAuthToken | None = None
        self._inflight: concurrent.futures.Future | None = None
        #: tokens obtained so far (for the log and tests)
        self.obtained = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe}>"

    def cached(self) -> OAuthToken | None:
        """The token held (None before the first connection)."""
        return self._cached

    async def token(self) -> OAuthToken:
        """The current token, a new one first when 80 % of its lifetime has passed."""
        current = self._cached
        if current is not None and time.time() < current.refresh_at:
            return current
        return await asyncio.wrap_future(self._refresh())

    def _refresh(self) -> concurrent.futures.Future:
        with self._lock:
            current = self._cached
            if current is not None and time.time() < current.refresh_at:
                done: concurrent.futures.Future = concurrent.futures.Future()
                done.set_result(current)
                return done
            if self._inflight is not None:
                return self._inflight
            fut: concurrent.futures.Future = concurrent.futures.Future()
            fut.set_running_or_notify_cancel()  # one waiter giving up must not cancel it for the others
            self._inflight = fut
        if self.blocking:
            threading.Thread(target=self._obtain_into, args=(fut,), name="kafkapy-oauth-token", daemon=True).start()
        else:
            self._obtain_into(fut)
        return fut

    def _obtain_into(self, fut: concurrent.futures.Future) -> None:
        try:
            token = self._obtain()
        except Exception as exc:  # noqa: BLE001 - handed to the waiters
            previous = self._cached
            with self._lock:
                self._inflight = None
            if previous is not None and time.time() < previous.expires_at:
                log.warning("cannot refresh the OAUTHBEARER token (%s): %s; using the current one, valid for %.0f s "
                            "more", self.describe, exc, previous.expires_at - time.time())
                fut.set_result(previous)
            else:
                fut.set_exception(exc)
            return
        with self._lock:
            self._cached, self._inflight = token, None
            self.obtained += 1
        fut.set_result(token)

    #: whether _obtain blocks (network): it then runs on a thread of its own
    blocking = False

    def _obtain(self) -> OAuthToken:
        raise NotImplementedError


class UnsecuredTokenProvider(TokenProvider):
    """Unsigned JWTs made here (``alg`` ``none``): for development brokers only."""

    def __init__(self, principal: str, *, principal_claim: str = "sub", scope_claim: str = "scope",
                 scopes: tuple[str, ...] = (), life_s: int = 3600, claims: Mapping[str, Any] | None = None,
                 extensions: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.principal, self.principal_claim, self.scope_claim = principal, principal_claim, scope_claim
        self.scopes, self.life_s = tuple(scopes), life_s
        self.claims = dict(claims or {})
        self.extensions = dict(extensions or {})
        self.describe = f"unsecured JWT for {principal!r}"

    def _obtain(self) -> OAuthToken:
        now = time.time()
        iat = int(now)
        claims: dict[str, Any] = {**self.claims, self.principal_claim: self.principal, "iat": iat,
                                  "exp": iat + self.life_s}
        if self.scopes:
            claims[self.scope_claim] = list(self.scopes)
        header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
        body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
        exp = float(iat + self.life_s)
        return OAuthToken(f"{header}.{body}.", exp, now + REFRESH_FACTOR * (exp - now), self.principal)


class OidcTokenProvider(TokenProvider):
    """The OAuth 2 client-credentials grant against a token endpoint (see the module docstring)."""

    blocking = True

    def __init__(self, url: str, client_id: str, client_secret: str, scope: str | None = None, *,
                 timeout_s: float = 30.0, extensions: Mapping[str, str] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__()
        self.url, self.client_id, self.scope, self.timeout_s = url, client_id, scope, timeout_s
        self.ssl_context = ssl_context
        self._secret = client_secret
        self.extensions = dict(extensions or {})
        self.describe = f"client {client_id!r} (tokens from {url})"

    def _obtain(self) -> OAuthToken:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(f"{self.client_id}:{self._secret}".encode("utf-8")).decode("ascii")
        request = urllib.request.Request(self.url, data=urllib.parse.urlencode(form).encode("ascii"), method="POST",
                                         headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                                                  "Content-Type": "application/x-www-form-urlencoded"})
        where = f"the token endpoint {self.url}"
        started = time.time()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.ssl_context) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = _oauth_error(exc)
            if 400 <= exc.code < 500:
                raise AuthenticationError(SASL_AUTHENTICATION_FAILED,
                                          f"{where} refused client {self.client_id!r}: HTTP {exc.code}{detail} "
                                          "(see sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret, "
                                          "sasl.oauthbearer.scope)", context="OAUTHBEARER token request") from None
            raise KafkaConnectionError(f"cannot get an OAUTHBEARER token from {where}: HTTP {exc.code}{detail}") \
                from None
        except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections, TLS, a bad URL
            reason = getattr(exc, "reason", None) or exc
            if isinstance(reason, ssl.SSLCertVerificationError):
                reason = f"certificate verify failed: {reason.verify_message or reason} (see https.ca.location)"
            raise KafkaConnectionError(f"cannot get an OAUTHBEARER token from {where}: {reason}") from None
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token.strip():
            raise AuthenticationError(SASL_AUTHENTICATION_FAILED, f"{where} answered without an access_token "
                                      "(not a client-credentials token endpoint?)",
                                      context="OAUTHBEARER token request")
        token = token.strip()
        claims = _jwt_claims(token) or {}
        exp = _number(claims.get("exp"))
        expires_in = _number(answer.get("expires_in"))
        if exp is None and expires_in is not None:
            exp = started + expires_in
        if exp is None:
            raise AuthenticationError(SASL_AUTHENTICATION_FAILED, f"{where} answered a token without an expiry "
                                      "(neither an exp claim nor expires_in)", context="OAUTHBEARER token request")
        now = time.time()
        if exp <= now:
            raise AuthenticationError(SASL_AUTHENTICATION_FAILED, f"{where} answered a token that expired "
                                      f"{now - exp:.0f} s ago (is this host's clock right?)",
                                      context="OAUTHBEARER token request")
        principal = claims.get("sub") if isinstance(claims.get("sub"), str) else None
        log.debug("OAUTHBEARER token for %s (principal %s), valid for %.0f s", self.describe, principal, exp - now)
        return OAuthToken(token, exp, now + REFRESH_FACTOR * (exp - now), principal)


def _oauth_error(exc: urllib.error.HTTPError) -> str:
    """`` <error>: <error_description>`` of an OAuth 2 error answer (RFC 6749 5.2), if it is one."""
    try:
        answer = json.loads(exc.read(4096) or b"null")
    except (ValueError, OSError):
        return f" {exc.reason}" if exc.reason else ""
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        description = answer.get("error_description")
        return f" {answer['error']}" + (f": {description}" if isinstance(description, str) and description else "")
    return f" {exc.reason}" if exc.reason else ""


# -- configuration ----------------------------------------------------------------------------------

def given(config: "CommonConfig") -> list[str]:
    """The OAUTHBEARER settings of ``config`` that are set (dotted names)."""
    out = []
    for prop in ALL_PROPS:
        value = getattr(config, prop.replace(".", "_"))
        if value is not None and value is not False:
            out.append(prop)
    return out


def _parse_kv_list(text: str, prop: str) -> dict[str, str]:
    """librdkafka's ``k=v,k2=v2`` (``sasl.oauthbearer.extensions``)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"{prop}: expected name=value pairs separated by commas, not {item.strip()!r}")
        if key in out:
            raise ConfigError(f"{prop}: extension {key} is given twice")
        out[key] = value
    return check_extensions(out, prop)


def _parse_unsecured_config(text: str | None) -> UnsecuredTokenProvider:
    """librdkafka's ``sasl.oauthbearer.config`` for its unsecured JWT (see the module docstring)."""
    prop = "sasl.oauthbearer.config"
    if text is None or not str(text).strip():
        raise ConfigError(f"enable.sasl.oauthbearer.unsecure.jwt=true needs {prop} with principal=<name> "
                          "(e.g. principal=alice scope=read,write lifeSeconds=3600)")
    values: dict[str, str] = {}
    extensions: dict[str, str] = {}
    for item in str(text).split():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"{prop}: expected space-separated name=value pairs, not {item!r}")
        if key.startswith("extension_"):
            name = key[len("extension_"):]
            if name in extensions:
                raise ConfigError(f"{prop}: {key} is given twice")
            extensions[name] = value
            continue
        if key not in ("principal", "principalClaimName", "scope", "scopeClaimName", "lifeSeconds"):
            raise ConfigError(f"{prop}: unknown name {key!r} (librdkafka's are principal, principalClaimName, scope, "
                              "scopeClaimName, lifeSeconds and extension_<name>)")
        if key in values:
            raise ConfigError(f"{prop}: {key} is given twice")
        values[key] = value
    if not values.get("principal"):
        raise ConfigError(f"{prop} has no principal=<name> (the token's principal)")
    life = values.get("lifeSeconds", "3600")
    if not life.isdigit() or int(life) < 1:
        raise ConfigError(f"{prop}: lifeSeconds must be a positive whole number of seconds, not {life!r}")
    for name in ("principalClaimName", "scopeClaimName"):
        if name in values and not values[name]:
            raise ConfigError(f"{prop}: {name} is empty")
    scopes = tuple(s for s in values.get("scope", "").split(",") if s)
    return UnsecuredTokenProvider(values["principal"], principal_claim=values.get("principalClaimName", "sub"),
                                  scope_claim=values.get("scopeClaimName", "scope"), scopes=scopes,
                                  life_s=int(life), extensions=check_extensions(extensions, prop))


def _java_unsecured(options: Mapping[str, str]) -> UnsecuredTokenProvider:
    """Java's OAuthBearerUnsecuredLoginCallbackHandler, from the login module's options."""
    prop = "sasl.jaas.config"
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub") or "sub"
    scope_claim = options.get("unsecuredLoginScopeClaimName", "scope") or "scope"
    life = options.get("unsecuredLoginLifetimeSeconds", "3600")
    if not life.isdigit() or int(life) < 1:
        raise ConfigError(f"{prop}: unsecuredLoginLifetimeSeconds must be a positive whole number, not {life!r}")
    claims: dict[str, Any] = {}
    extensions: dict[str, str] = {}
    for name, value in options.items():
        for prefix in ("unsecuredLoginStringClaim_", "unsecuredLoginNumberClaim_", "unsecuredLoginListClaim_"):
            if name.startswith(prefix):
                claim = name[len(prefix):]
                if not claim:
                    raise ConfigError(f"{prop}: option {name} names no claim")
                if claim in ("iat", "exp"):
                    raise ConfigError(f"{prop}: option {name}: iat and exp are set from unsecuredLoginLifetimeSeconds")
                if claim in claims:
                    raise ConfigError(f"{prop}: claim {claim} is given twice")
                if prefix == "unsecuredLoginStringClaim_":
                    claims[claim] = value
                elif prefix == "unsecuredLoginNumberClaim_":
                    try:
                        claims[claim] = int(value) if re.fullmatch(r"-?\d+", value) else float(value)
                    except ValueError:
                        raise ConfigError(f"{prop}: option {name} is not a number") from None
                else:  # the first character separates the values (Java's form: ",a,b")
                    claims[claim] = [v for v in value[1:].split(value[0])] if value else []
        if name.startswith("unsecuredLoginExtension_"):
            extensions[name[len("unsecuredLoginExtension_"):]] = value
    principal = claims.pop(principal_claim, None)
    if not isinstance(principal, str) or not principal.strip():
        raise ConfigError(f"{prop}: OAuthBearerLoginModule without a login callback handler makes unsecured tokens "
                          f"and needs the principal: unsecuredLoginStringClaim_{principal_claim}=\"<name>\" (or set "
                          "sasl.login.callback.handler.class for OIDC)")
    scopes = claims.pop(scope_claim, None)
    if isinstance(scopes, str):
        scopes = scopes.split()
    return UnsecuredTokenProvider(principal, principal_claim=principal_claim, scope_claim=scope_claim,
                                  scopes=tuple(scopes or ()), life_s=int(life), claims=claims,
                                  extensions=check_extensions(extensions, prop))


def _https_context(config: "CommonConfig") -> ssl.SSLContext | None:
    """The TLS context of an https:// token endpoint with ``https.ca.location`` (None: the system's CAs)."""
    location = config.https_ca_location
    if location is None:
        return None
    location = str(location)
    try:
        if os.path.isdir(location):
            return ssl.create_default_context(capath=location)
        return ssl.create_default_context(cafile=location)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"https.ca.location={location}: cannot read CA certificates: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None


def _endpoint_url(config: "CommonConfig", needed_by: str) -> str:
    prop = "sasl.oauthbearer.token.endpoint.url"
    url = config.sasl_oauthbearer_token_endpoint_url
    if url is None or not str(url).strip():
        raise ConfigError(f"{needed_by} needs {prop}: the identity provider's token endpoint")
    url = str(url).strip()
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"{prop} must be an http:// or https:// URL, not {url!r}")
    return url


def token_provider(config: "CommonConfig", jaas: tuple[str, dict[str, str]] | None) -> TokenProvider:
    """The token source of an OAUTHBEARER client (``jaas``: its parsed ``sasl.jaas.config``, if given);
    every setting checked, nothing fetched. A ConfigError names the setting."""
    timeout_s = max(1.0, config.request_timeout_ms / 1000)
    method = config.sasl_oauthbearer_method
    librdkafka = [p for p in LIBRDKAFKA_PROPS if getattr(config, p.replace(".", "_")) not in (None, False)]
    handler = config.sasl_login_callback_handler_class
    if jaas is not None:
        module, options = jaas
        if librdkafka:
            raise ConfigError(f"give either sasl.jaas.config (the Java client's) or librdkafka's {librdkafka[0]}, "
                              "not both")
        if handler is None or not str(handler).strip() or str(handler).strip() == UNSECURED_LOGIN_HANDLER:
            if config.sasl_oauthbearer_token_endpoint_url is not None:
                raise ConfigError("sasl.oauthbearer.token.endpoint.url needs sasl.login.callback.handler.class="
                                  f"{LOGIN_CALLBACK_HANDLERS[0]} (without it the login module makes unsecured tokens)")
            return _java_unsecured(options)
        handler = str(handler).strip()
        if handler not in LOGIN_CALLBACK_HANDLERS:
            raise ConfigError(f"sasl.login.callback.handler.class={handler} is not supported (a Java class): use "
                              f"{LOGIN_CALLBACK_HANDLERS[0]} for OIDC, or leave it unset for unsecured tokens")
        url = _endpoint_url(config, f"sasl.login.callback.handler.class={handler.rsplit('.', 1)[-1]}")
        missing = [k for k in ("clientId", "clientSecret") if not options.get(k)]
        if missing:
            raise ConfigError(f"sasl.jaas.config has no {' and '.join(missing)} option (OIDC needs clientId and "
                              "clientSecret)")
        extensions = {k[len("extension_"):]: v for k, v in options.items() if k.startswith("extension_")}
        return OidcTokenProvider(url, options["clientId"], options["clientSecret"], options.get("scope") or None,
                                 timeout_s=timeout_s, extensions=check_extensions(extensions, "sasl.jaas.config"),
                                 ssl_context=_https_context(config))
    if handler is not None:
        raise ConfigError("sasl.login.callback.handler.class is the Java client's: it goes with sasl.jaas.config="
                          f"{LOGIN_MODULE} required clientId=\"...\" clientSecret=\"...\";")
    method_name = str(method).strip().lower() if method is not None else "default"
    if method_name not in ("default", "oidc"):
        raise ConfigError(f"sasl.oauthbearer.method must be default or oidc, not {method!r}")
    unsecure = bool(config.enable_sasl_oauthbearer_unsecure_jwt)
    extensions = ({} if config.sasl_oauthbearer_extensions is None
                  else _parse_kv_list(str(config.sasl_oauthbearer_extensions), "sasl.oauthbearer.extensions"))
    if method_name == "oidc":
        if unsecure:
            raise ConfigError("enable.sasl.oauthbearer.unsecure.jwt=true and sasl.oauthbearer.method=oidc are "
                              "mutually exclusive")
        if config.sasl_oauthbearer_config is not None:
            raise ConfigError("sasl.oauthbearer.config is for enable.sasl.oauthbearer.unsecure.jwt=true, not "
                              "sasl.oauthbearer.method=oidc")
        url = _endpoint_url(config, "sasl.oauthbearer.method=oidc")
        for prop in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret"):
            value = getattr(config, prop.replace(".", "_"))
            if value is None or not str(value):
                raise ConfigError(f"sasl.oauthbearer.method=oidc needs {prop}")
        scope = config.sasl_oauthbearer_scope
        return OidcTokenProvider(url, str(config.sasl_oauthbearer_client_id),
                                 str(config.sasl_oauthbearer_client_secret),
                                 str(scope).strip() or None if scope is not None else None,
                                 timeout_s=timeout_s, extensions=extensions, ssl_context=_https_context(config))
    oidc_only = [p for p in (*OIDC_PROPS, "sasl.oauthbearer.token.endpoint.url", "https.ca.location")
                 if getattr(config, p.replace(".", "_")) is not None]
    if oidc_only:
        raise ConfigError(f"{oidc_only[0]} needs sasl.oauthbearer.method=oidc")
    if not unsecure:
        raise ConfigError("sasl.mechanism=OAUTHBEARER needs a token source: sasl.oauthbearer.method=oidc with "
                          "sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret and "
                          "sasl.oauthbearer.token.endpoint.url; or enable.sasl.oauthbearer.unsecure.jwt=true with "
                          "sasl.oauthbearer.config=principal=<name> (development brokers); or the Java client's "
                          f"sasl.jaas.config={LOGIN_MODULE} required ...;")
    provider = _parse_unsecured_config(config.sasl_oauthbearer_config)
    for key, value in extensions.items():
        if key in provider.extensions and provider.extensions[key] != value:
            raise ConfigError(f"extension {key} is given both in sasl.oauthbearer.extensions and in "
                              "sasl.oauthbearer.config, differently")
        provider.extensions[key] = value
    return provider
