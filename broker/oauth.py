"""SASL/OAUTHBEARER (KIP-255, RFC 7628): the bearer tokens a listener accepts, and how it checks them.

Two validators, chosen per listener as Kafka chooses them:

* **Signed JWTs against a JWKS endpoint** (Kafka 3.1's ``OAuthBearerValidatorCallbackHandler``, KIP-768),
  with ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` naming that class (its 3.1
  or its 3.4 package) and ``sasl.oauthbearer.jwks.endpoint.url`` (``https://``, ``http://`` or
  ``file:``) giving the identity provider's keys. A token must be a JWS signed by one of those keys
  (``kid`` chosen, the algorithm the key's; never ``none``), hold ``exp`` and ``iat``, not be expired
  (``sasl.oauthbearer.clock.skew.seconds`` of leeway, 30), name one of
  ``sasl.oauthbearer.expected.audience`` in ``aud`` and ``sasl.oauthbearer.expected.issuer`` as
  ``iss`` when they are set, and hold a non-empty principal in ``sasl.oauthbearer.sub.claim.name``
  (``sub``). Scopes come from ``sasl.oauthbearer.scope.claim.name`` (``scope``: a space-separated
  string or a list). The keys are fetched on a thread of their own, never on the event loop: at start,
  every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (an hour), and at once (at most every
  ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``) when a token names a key id not held, so a key
  the provider rotates in is taken up with the first token signed by it. An endpoint that cannot be
  reached is retried with backoff (up to ``sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms``);
  meanwhile the keys held stay in use, and without any every token is refused. The broker starts all
  the same (Kafka 3.1 would not start): the other listeners serve, and this one as soon as the
  provider answers.
* **Unsecured JWTs** (Kafka 2.7's default, ``OAuthBearerUnsecuredValidatorCallbackHandler``), when no
  callback handler class is set: ``alg`` ``none``, no signature; checked are ``exp`` (and ``iat`` when
  present) with ``unsecuredValidatorAllowableClockSkewMs`` of leeway, the principal claim
  (``unsecuredValidatorPrincipalClaimName``, ``sub``) and the scopes named by
  ``unsecuredValidatorRequiredScope``, options of the listener's ``oauthbearer.sasl.jaas.config``.
  Anyone can make such a token for any principal: it is for development, and the broker says so at
  start.

The exchange (:class:`OAuthBearerExchange`): the client's one message is
``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01...]\\x01``. A valid token
authenticates the principal ``User:<principal claim>`` (an authzid must be that name) and answers
an empty token. An invalid one is answered with RFC 7628's error, ``{"status":"invalid_token"}``;
the client then sends ``\\x01`` and the exchange fails with that text, as Kafka's broker does.
SASL extensions (the other keys) are taken and ignored, as Kafka's default server callback does.
With ``connections.max.reauth.ms`` (KIP-368) the session ends when the token expires, if that is
sooner; without it a connection stays authenticated, as in Kafka.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import re
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Mapping

import jwt

log = logging.getLogger("broker.oauth")

OAUTHBEARER = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#: The JWKS validator's class names (Kafka 3.1-3.3, 3.4 on)
JWKS_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
)
UNSECURED_VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerUnsecuredValidatorCallbackHandler"
INVALID_TOKEN = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
#: What a malformed exchange is told, in Kafka's words
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"

_MESSAGE = re.compile(r"^n,(?:a=(?P<authzid>[^,\x01]*))?,\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]*\x01)*)\x01$")


class TokenRejected(Exception):
    """A token that does not authenticate; ``str(err)`` says why, for the broker's log only."""


@dataclass(frozen=True)
class Token:
    """A validated bearer token: who it names, until when (epoch ms), with which scopes."""

    principal: str
    expires_at_ms: int
    scopes: frozenset[str]


def _b64url_json(part: str) -> dict:
    padded = part + "=" * (-len(part) % 4)
    try:
        value = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (binascii.Error, ValueError, UnicodeError) as exc:
        raise TokenRejected(f"not a JWT: {exc}") from None
    if not isinstance(value, dict):
        raise TokenRejected("not a JWT: a part is not a JSON object")
    return value


def _scopes(value) -> frozenset[str]:
    """A scope claim's scopes: a list of strings, or a string of space-separated scopes (RFC 6749; Kafka
    takes such a string as one scope); anything else holds none, as in Kafka."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()


#: The algorithms a JWK without ``alg`` may verify, by key type (and curve): any of its type, as Kafka allows
_ALGORITHMS_BY_TYPE = {"RSA": frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}),
                       "OKP": frozenset({"EdDSA"})}
_ALGORITHMS_BY_CURVE = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}


@dataclass(frozen=True)
class _Key:
    """A signing key of the JWKS and the algorithms it may verify."""

    kid: str | None
    jwk: "jwt.PyJWK"
    algorithms: frozenset[str]


def _key_of(entry: dict) -> _Key | None:
    """A JWKS entry as a verification key; None for one that cannot sign (``use`` other than ``sig``, a
    symmetric key: a published JWKS holds public keys only)."""
    if entry.get("use", "sig") != "sig" or entry.get("kty") not in ("RSA", "EC", "OKP"):
        return None
    jwk = jwt.PyJWK(entry)
    if entry.get("alg"):
        algorithms = frozenset({entry["alg"]})
    elif entry["kty"] == "EC":
        algorithms = frozenset({_ALGORITHMS_BY_CURVE.get(entry.get("crv"), jwk.algorithm_name)})
    else:
        algorithms = _ALGORITHMS_BY_TYPE[entry["kty"]]
    return _Key(entry.get("kid"), jwk, algorithms)


class UnsecuredValidator:
    """Kafka 2.7's default: unsigned tokens (see the module docstring). Never for production."""

    kind = "unsecured"

    def __init__(self, options: Mapping[str, str], prop: str) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope") or "scope"
        self.required_scope = frozenset((options.get("unsecuredValidatorRequiredScope") or "").split())
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0") or "0"
        try:
            self.skew_ms = int(skew)
        except ValueError:
            raise ValueError(f"{prop}: unsecuredValidatorAllowableClockSkewMs={skew!r} is not a whole number "
                             f"of ms") from None
        if self.skew_ms < 0:
            raise ValueError(f"{prop}: unsecuredValidatorAllowableClockSkewMs must not be negative")

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def validate(self, token: str, now_ms: float | None = None) -> Token:
        now_ms = time.time() * 1000 if now_ms is None else now_ms
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRejected(f"not a JWS: {len(parts)} part(s), not 3")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if header.get("alg") != "none" or parts[2]:
            raise TokenRejected("an unsecured token must have alg 'none' and no signature")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenRejected(f"no principal in claim {self.principal_claim!r}")
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise TokenRejected("no numeric exp claim")
        if exp * 1000 + self.skew_ms <= now_ms:
            raise TokenRejected(f"expired {(now_ms - exp * 1000) / 1000:.0f} s ago")
        iat = claims.get("iat")
        if iat is not None:
            if not isinstance(iat, (int, float)) or isinstance(iat, bool):
                raise TokenRejected("the iat claim is not a number")
            if iat * 1000 - self.skew_ms > now_ms:
                raise TokenRejected("issued in the future (iat)")
        scopes = _scopes(claims.get(self.scope_claim))
        missing = self.required_scope - scopes
        if missing:
            raise TokenRejected(f"scope {' '.join(sorted(missing))} required, not granted")
        return Token(principal, int(exp * 1000), scopes)


@dataclass(frozen=True)
class JwksSettings:
    """Kafka 3.1's ``sasl.oauthbearer.*`` settings of the JWKS validator."""

    url: str
    audience: tuple[str, ...] = ()
    issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000


class JwksValidator:
    """Signed tokens checked against the keys of a JWKS endpoint (see the module docstring).

    The keys live in ``self._keys`` (key id -> ``jwt.PyJWK``), replaced whole by the
    refresher thread; the event loop only reads it. Thread-safe.
    """

    kind = "jwks"

    def __init__(self, settings: JwksSettings) -> None:
        self.settings = settings
        self._keys: dict[str | None, _Key] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_fetch = 0.0
        self._failing = False  # the last retrieval failed: its backoff decides the next, not the tokens
        self.fetches = 0  # successful retrievals (for tests and the log)

    def start(self) -> None:
        """Fetch the keys on a thread of their own, now and from then on (never blocks)."""
        self._thread = threading.Thread(target=self._run, name="jwks-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def wait_for_keys(self, timeout: float) -> bool:
        """Whether keys are held within ``timeout`` seconds (tests; start-up does not wait)."""
        deadline = time.monotonic() + timeout
        while not self._keys and time.monotonic() < deadline:
            time.sleep(0.05)
        return bool(self._keys)

    def _run(self) -> None:
        backoff = self.settings.retry_backoff_ms / 1000
        while not self._stopping.is_set():
            self._wake.clear()
            self._last_fetch = time.monotonic()
            try:
                self._keys = self._fetch()
                self.fetches += 1
                self._failing = False
                backoff = self.settings.retry_backoff_ms / 1000
                wait = self.settings.refresh_ms / 1000
            except Exception as exc:  # noqa: BLE001 - any failure of the endpoint: keep the old keys, retry
                self._failing = True
                wait = min(backoff * (0.8 + 0.4 * random.random()), self.settings.retry_backoff_max_ms / 1000)
                log.error("cannot read the JWKS at %s (%s); %s, again in %.1f s", self.settings.url, exc,
                          f"keeping the {len(self._keys)} key(s) held" if self._keys else "every token is refused",
                          wait)
                backoff = min(backoff * 2, self.settings.retry_backoff_max_ms / 1000)
            self._wake.wait(wait)

    def _fetch(self) -> dict[str | None, _Key]:
        with urllib.request.urlopen(self.settings.url, timeout=10) as response:
            data = json.loads(response.read())
        keys: dict[str | None, _Key] = {}
        for entry in data.get("keys", []) if isinstance(data, dict) else ():
            try:
                key = _key_of(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError, KeyError, TypeError) as exc:
                log.warning("JWKS at %s: skipping key %s (%s)", self.settings.url, entry.get("kid"), exc)
                continue
            if key is not None:
                keys[key.kid] = key
        if not keys:
            raise ValueError("it holds no usable signing key")
        return keys

    def _refresh_soon(self) -> None:
        """Read the JWKS now (a token names a key not held), unless it was read within the retry backoff or
        is failing (then its own backoff decides)."""
        if not self._failing and time.monotonic() - self._last_fetch >= self.settings.retry_backoff_ms / 1000:
            self._wake.set()

    def validate(self, token: str, now_ms: float | None = None) -> Token:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise TokenRejected(f"not a JWS: {exc}") from None
        alg = header.get("alg")
        if not alg or alg == "none":
            raise TokenRejected("an unsigned token (alg none) is not accepted")
        keys = self._keys
        kid = header.get("kid")
        if kid is not None:
            key = keys.get(kid)
            if key is None:
                self._refresh_soon()  # a key the provider may just have rotated in
                raise TokenRejected(f"no key {kid!r} in the JWKS" if keys else "the JWKS has not been read yet")
            if alg not in key.algorithms:
                raise TokenRejected(f"signed with {alg}, the key {kid!r} is for {', '.join(sorted(key.algorithms))}")
            candidates = [key]
        else:  # no key id: every key that can verify the algorithm is tried
            candidates = [k for k in keys.values() if alg in k.algorithms]
            if not candidates:
                raise TokenRejected(f"no key in the JWKS for {alg}" if keys else "the JWKS has not been read yet")
        s = self.settings
        for i, key in enumerate(candidates):
            try:
                claims = jwt.decode(token, key.jwk.key, algorithms=[alg], audience=list(s.audience) or None,
                                    issuer=s.issuer, leeway=s.clock_skew_s,
                                    options={"require": ["exp", "iat"], "verify_aud": bool(s.audience)})
                break
            except jwt.InvalidSignatureError as exc:
                if i == len(candidates) - 1:
                    raise TokenRejected(f"{type(exc).__name__}: {exc}") from None
            except jwt.InvalidTokenError as exc:
                raise TokenRejected(f"{type(exc).__name__}: {exc}") from None
        principal = claims.get(s.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenRejected(f"no principal in claim {s.sub_claim!r}")
        return Token(principal, int(claims["exp"] * 1000), _scopes(claims.get(s.scope_claim)))


Validator = UnsecuredValidator | JwksValidator


class OAuthBearerExchange:
    """The server side of one OAUTHBEARER exchange (see the module docstring)."""

    def __init__(self, validator: Validator) -> None:
        self.validator = validator
        self._error: str | None = None
        self.user: str | None = None
        self.token: Token | None = None

    def step(self, message: bytes) -> tuple[bytes, bool]:
        """One client message in; (the answer, whether the client is authenticated). Raises
        :class:`AuthenticationRefused` when the exchange is over and failed."""
        if self._error is not None:
            if message == b"\x01":
                raise AuthenticationRefused(self._error, self._detail)
            raise AuthenticationRefused(self._error, "a message after the error other than %x01")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationRefused(FAILED, "client message not UTF-8") from None
        match = _MESSAGE.match(text)
        if match is None:
            raise AuthenticationRefused(FAILED, "malformed client message")
        pairs = dict(kv.partition("=")[::2] for kv in match.group("kvpairs").split("\x01") if kv)
        auth = pairs.get("auth", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise AuthenticationRefused(FAILED, "no 'auth=Bearer <token>'")
        try:
            token = self.validator.validate(value.strip())
        except TokenRejected as exc:
            self._error, self._detail = INVALID_TOKEN, str(exc)
            return INVALID_TOKEN.encode("utf-8"), False
        self.user = token.principal
        authzid = match.group("authzid")
        if authzid and authzid != token.principal:
            raise AuthenticationRefused(f"Authentication failed: Client requested an authorization id ({authzid}) "
                                        f"that is different from the token's principal name ({token.principal})",
                                        f"{token.principal!r} asked to act as {authzid!r}")
        self.token = token
        return b"", True


class AuthenticationRefused(Exception):
    """The exchange failed: ``str(err)`` is what the client is told, ``detail`` what the broker logs."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail
