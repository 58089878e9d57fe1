"""An OAuth 2 / OIDC identity provider for the OAUTHBEARER tests, in the test process itself.

:class:`IdentityProvider` serves, after :meth:`~IdentityProvider.start`, on 127.0.0.1 from a thread of its
own, over HTTP (or HTTPS with ``tls=``, a PEM file of key and certificate chain):

``GET /jwks``
    ``{"keys": [...]}``: the public JWKs of the keys named in ``published`` (each with ``kid``, ``alg`` and
    ``use``), or, while ``jwks_status`` is not 200, that HTTP status with ``{"error": "unavailable"}``.
``POST /token``
    The client-credentials grant (RFC 6749 4.4): a form body (``Content-Type:
    application/x-www-form-urlencoded``), the client id and secret by HTTP basic auth. Answers
    ``{"access_token", "token_type": "bearer", "expires_in"}``; refusals as RFC 6749 5.2 words them:
    400 ``invalid_request`` (not a form, or no ``grant_type``), 400 ``unsupported_grant_type`` (another
    grant), 401 ``invalid_client`` with ``error_description`` "bad client credentials" (an unknown client or
    a wrong secret).

Anything else is answered 404. Its tokens are JWTs signed with PyJWT by one of its :class:`SigningKey`\\ s
(RS256 or ES256), with the claims ``iss`` (``issuer``), ``aud`` (``audience``), ``iat``, ``exp`` and ``sub``;
a token from ``/token`` also has a ``jti`` (so no two are alike), ``sub`` the client id and ``scope`` as
the form asked, unless the client's own claims say otherwise (:meth:`~IdentityProvider.add_client`).

The tests change these plain attributes while it runs; each request reads them afresh:

- ``signing``: the kid of the key that signs tokens (a client may name another);
- ``published``: the kids ``/jwks`` lists; ``keys``: kid -> :class:`SigningKey` (:meth:`add_key` adds one;
  a key's ``jwk`` dict may be edited, e.g. its ``alg`` removed);
- ``jwks_status``: 200, or the HTTP error ``/jwks`` answers;
- ``clients``: client id -> :class:`Client`, set by :meth:`add_client`: the secret, the key signing its
  tokens and the kid their header names (None: ``signing`` and that key's kid), its token lifetime
  (None: ``lifetime_s``) and claims of its own;
- ``issuer``, ``audience``, ``lifetime_s``: the claims and lifetime of every token;
- ``port``: before :meth:`start` only, to make its URLs name a port nothing listens on yet.

What it was asked is recorded, under ``lock``: ``jwks_requests`` counts the ``/jwks`` reads,
``token_requests`` holds every ``/token`` request as a :class:`TokenRequest` (client id, form, HTTP
status), ``issued`` client id -> the tokens it was given; :meth:`granted` counts those.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.test/realms/kafka"
AUDIENCE = "kafka-broker"
FORM = "application/x-www-form-urlencoded"


def b64url(data: bytes) -> str:
    """Base64url without padding, as JWTs encode their parts."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(kid: str | None = None, **claims) -> str:
    """An ``alg: none`` JWT (no signature), as librdkafka's unsecured login makes them; ``exp`` in 300 s
    and ``iat`` now unless given."""
    now = int(time.time())
    header = {"alg": "none", **({"kid": kid} if kid else {})}
    payload = {"iat": now, "exp": now + 300, **claims}
    return f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}."


class SigningKey:
    """One key pair of the provider: ``kid``, ``alg`` (RS256 or ES256), ``private`` (new unless given),
    ``jwk`` (the public JWK ``/jwks`` publishes)."""

    def __init__(self, kid: str, alg: str, private=None) -> None:
        self.kid, self.alg = kid, alg
        if alg == "RS256":
            self.private = private or rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif alg == "ES256":
            self.private = private or ec.generate_private_key(ec.SECP256R1())
            jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            raise ValueError(alg)
        self.jwk = {**jwk, "kid": kid, "alg": alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass
class Client:
    """A client of ``/token``: see :meth:`IdentityProvider.add_client`."""
    secret: str
    key: str | None = None
    kid: str | None = None
    lifetime_s: int | None = None
    claims: dict = field(default_factory=dict)


class TokenRequest(NamedTuple):
    """One request to ``/token``: the basic-auth client id (None without), the form, the HTTP status answered."""
    client_id: str | None
    form: dict[str, list[str]]
    status: int


class IdentityProvider:
    """``/jwks`` and the client-credentials ``/token`` endpoint on 127.0.0.1 (see the module docstring)."""

    def __init__(self, key: SigningKey | None = None, *, tls: Path | None = None) -> None:
        """``key``: the first key, signing and published (default: a new RS256 key ``rsa-1``); ``tls``: a PEM
        file of key and certificate chain to serve HTTPS with."""
        first = key or SigningKey("rsa-1", "RS256")
        self.keys: dict[str, SigningKey] = {first.kid: first}
        self.signing = first.kid
        self.published = [first.kid]
        self.jwks_status = 200
        self.issuer, self.audience, self.lifetime_s = ISSUER, AUDIENCE, 300
        self.clients: dict[str, Client] = {}
        self.lock = threading.Lock()
        self.jwks_requests = 0
        self.token_requests: list[TokenRequest] = []
        self.issued: dict[str, list[str]] = {}
        self.tls = tls
        self.scheme = "https" if tls is not None else "http"
        self.server: ThreadingHTTPServer | None = None
        self.port: int | None = None

    # -- serving --------------------------------------------------------------------------------------

    def start(self, port: int | None = None) -> "IdentityProvider":
        """Serve on 127.0.0.1:``port`` (default: ``port`` if set, else any free port) from a thread."""
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path != "/jwks":
                    return self._answer(404, {"error": "not_found"})
                self._answer(*provider._jwks())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                if self.path != "/token":
                    return self._answer(404, {"error": "not_found"})
                client_id = secret = None
                scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
                if scheme.lower() == "basic":
                    client_id, _, secret = base64.b64decode(value).decode().partition(":")
                self._answer(*provider._grant(self.headers.get("Content-Type"), client_id, secret, form))

        port = (self.port or 0) if port is None else port
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        if self.tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(self.tls))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, name="idp", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def jwks_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/token"

    def _jwks(self) -> tuple[int, dict]:
        with self.lock:
            self.jwks_requests += 1
            status, keys = self.jwks_status, [self.keys[kid].jwk for kid in self.published]
        return (status, {"error": "unavailable"}) if status != 200 else (200, {"keys": keys})

    def _grant(self, content_type: str | None, client_id: str | None, secret: str | None,
               form: dict[str, list[str]]) -> tuple[int, dict]:
        """The answer to a client-credentials request, recorded."""
        with self.lock:
            client = self.clients.get(client_id)
        if content_type != FORM or "grant_type" not in form:
            status, body = 400, {"error": "invalid_request"}
        elif form["grant_type"] != ["client_credentials"]:
            status, body = 400, {"error": "unsupported_grant_type"}
        elif client is None or client.secret != secret:
            status, body = 401, {"error": "invalid_client", "error_description": "bad client credentials"}
        else:
            lifetime_s = self.lifetime_s if client.lifetime_s is None else client.lifetime_s
            claims = {"sub": client_id, "jti": uuid.uuid4().hex, **client.claims}
            if "scope" in form and "scope" not in claims:
                claims["scope"] = form["scope"][0]
            token = self.token(client.key, kid=client.kid, lifetime_s=lifetime_s, **claims)
            status, body = 200, {"access_token": token, "token_type": "bearer", "expires_in": lifetime_s}
        with self.lock:
            self.token_requests.append(TokenRequest(client_id, form, status))
            if status == 200:
                self.issued.setdefault(client_id, []).append(body["access_token"])
        return status, body

    # -- keys, clients, tokens ---------------------------------------------------------------------------

    def add_key(self, kid: str, alg: str) -> SigningKey:
        """A new key pair ``kid`` for ``alg``, neither signing nor published until the test says so."""
        key = SigningKey(kid, alg)
        with self.lock:
            self.keys[kid] = key
        return key

    def add_client(self, client_id: str, secret: str, key: str | None = None, kid: str | None = None, *,
                   lifetime_s: int | None = None, **claims) -> None:
        """A client of ``/token``: its tokens signed with key ``key`` (``"none"``: unsigned; default
        ``signing``), naming ``kid`` (default the key's), living ``lifetime_s`` (default ``lifetime_s``),
        holding ``claims`` besides (over the defaults and the scope asked for)."""
        with self.lock:
            self.clients[client_id] = Client(secret, key, kid, lifetime_s, claims)

    def granted(self, client_id: str) -> int:
        """How many tokens ``client_id`` was given."""
        with self.lock:
            return sum(1 for r in self.token_requests if r.client_id == client_id and r.status == 200)

    def token(self, key: str | None = None, *, kid: str | None = None, alg: str | None = None,
              lifetime_s: int | None = None, omit: tuple[str, ...] = (), **claims) -> str:
        """A JWT signed with key ``key`` (default: ``signing``; ``"none"``: unsigned, as a forger would send
        it) by ``alg`` (default the key's), its header naming ``kid`` (default the key's); claims ``iss``,
        ``aud``, ``iat``, ``exp`` (``lifetime_s`` from now, default the provider's), ``sub`` ("nobody")
        unless given or omitted."""
        now = int(time.time())
        life = self.lifetime_s if lifetime_s is None else lifetime_s
        payload = {"iss": self.issuer, "aud": self.audience, "iat": now, "exp": now + life, "sub": "nobody",
                   **claims}
        for name in omit:
            payload.pop(name, None)
        if key == "none":
            return unsigned_token(kid=kid or self.signing, **payload)
        signer = self.keys[key or self.signing]
        return jwt.encode(payload, signer.private, algorithm=alg or signer.alg,
                          headers={"kid": signer.kid if kid is None else kid})
