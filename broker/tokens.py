"""Delegation tokens (KIP-48), as Kafka 2.7 issues, keeps and accepts them.

A delegation token is a short-lived credential a client gets from the brokers
after authenticating in a stronger way (Kerberos, SCRAM, TLS with a client
certificate), and hands to processes that have no credentials of their own:
a Spark job's executors, a MapReduce task. They authenticate with SCRAM
(either mechanism) as the token's owner, without the owner's keytab or
password ever leaving the job's driver.

Configuration (Kafka 2.7's names; :mod:`broker.config` checks them)::

    delegation.token.master.key              the secret every broker shares; unset (the default): tokens
                                             are disabled and the APIs answer DELEGATION_TOKEN_AUTH_DISABLED
    delegation.token.max.lifetime.ms         604800000 (7 days): no renewal takes a token past this
    delegation.token.expiry.time.ms          86400000 (1 day): how long a token lives between renewals
    delegation.token.expiry.check.interval.ms  3600000 (1 hour): how often the controller removes
                                             tokens past their expiry

A token is its id, 22 characters of URL-safe base64 of a random UUID, and its
HMAC: HMAC-SHA512 of the id's UTF-8 bytes keyed with the master key's. The HMAC
is the secret; it is never stored, every broker derives it. The client
authenticates with SCRAM as user ``<token id>``, password ``base64(HMAC)``
(standard alphabet, padded), and the SCRAM extension ``tokenauth=true`` in its
client-first message (the Java client's ``ScramLoginModule required
username="<id>" password="<hmac>" tokenauth=true;``). The broker derives a SCRAM
credential from that password (a random salt, 4,096 iterations), once per token
and mechanism while it runs; the connection's principal is the token's owner,
marked as authenticated by token.

Stored where Kafka 2.7 keeps them, in the metadata store (ZooKeeper, or the
embedded store of a single node)::

    /delegation_token/tokens/<token id>      {"version":1,"owner":"User%3Aalice","renewers":["User%3Abob"],
                                              "issueTimestamp":<ms>,"maxTimestamp":<ms>,
                                              "expiryTimestamp":<ms>,"tokenId":"<id>"}
                                             (principals URL-encoded as Kafka's Sanitizer writes them;
                                              versions 1 to 3 are read, 3 with Kafka 3.3's tokenRequester)

Every broker reads a token from the store when it is used, so a token created,
renewed or expired through one broker is in force on every broker at once (Kafka
keeps a cache fed by ``/delegation_token/token_changes``; reading the one node
instead costs a store read per authentication and cannot go stale).

The rules, Kafka 2.7's (``KafkaApis``, ``DelegationTokenManager``):

* Create, renew, expire and describe are refused with
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT listener, on an SSL one
  without a client certificate, and on a connection authenticated by a token (a
  token cannot make tokens).
* Create: renewers must be ``User`` principals (else INVALID_PRINCIPAL_TYPE). The
  owner is the requester. ``max_lifetime_ms`` at or below 0 takes the broker's
  maximum, and nothing exceeds it; the first expiry is ``min(max,
  now + expiry.time.ms)``.
* Renew (the owner or a renewer, else DELEGATION_TOKEN_OWNER_MISMATCH): a token
  past its expiry or maximum is DELEGATION_TOKEN_EXPIRED; else the expiry becomes
  ``min(max, now + period)``, the period -1 meaning ``expiry.time.ms``.
* Expire (the owner or a renewer): a negative period removes the token at once;
  else as renew, with the period given.
* An HMAC no token has: DELEGATION_TOKEN_NOT_FOUND.
* Describe: ``owners`` null lists every token the requester may see, an empty
  list none; a token is seen by its owner and renewers, and by principals with
  DESCRIBE on its ``DelegationToken`` resource (its id) under an authorizer.
  Each token is answered with its HMAC.
* Stricter than Kafka: a token past its expiry is refused at authentication
  (Kafka accepts it until the controller's next removal pass, up to
  ``expiry.check.interval.ms`` later). With ``connections.max.reauth.ms`` a
  token's session ends no later than the token's expiry (KIP-368).
"""

from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from broker.cluster.store import BadVersionError, NodeExistsError, NoNodeError
from broker.protocol import ErrorCode
from broker.sasl import MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential, desanitize_user, sanitize_user

if TYPE_CHECKING:
    from broker.cluster.metadata import ClusterMetadata

log = logging.getLogger("broker.tokens")

ROOT = "/delegation_token"
TOKENS = f"{ROOT}/tokens"
CHANGES = f"{ROOT}/token_changes"
#: The znode version written: Kafka 2.7's
VERSION = 1
#: A read-modify-write of one token that keeps losing to concurrent writers gives up after this many tries
WRITE_ATTEMPTS = 5
#: Derived credentials kept (the oldest dropped beyond): tokens removed by another broker's controller are
#: never forgotten here otherwise
CREDENTIALS_KEPT = 4096


@dataclass(frozen=True)
class TokenInfo:
    """One token as stored (never its HMAC). Principals are ``Type:name`` strings."""

    token_id: str
    owner: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int
    #: Kafka 3.3's token requester (version 3 nodes); the owner otherwise
    requester: str | None = field(default=None, compare=False)

    def expired(self, now_ms: int) -> bool:
        """Past its expiry or its maximum lifetime (Kafka's test, both bounds strict)."""
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def encode(self) -> bytes:
        """Kafka 2.7's znode layout (see the module docstring)."""
        return json.dumps({
            "version": VERSION, "owner": sanitize_user(self.owner),
            "renewers": [sanitize_user(r) for r in self.renewers],
            "issueTimestamp": self.issue_ms, "maxTimestamp": self.max_ms, "expiryTimestamp": self.expiry_ms,
            "tokenId": self.token_id}, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> "TokenInfo":
        """A token node of version 1 to 3; ValueError for anything else."""
        try:
            obj = json.loads(data)
            version = int(obj["version"])
            if not 1 <= version <= 3:
                raise ValueError(f"version {version}")
            owner = _principal(desanitize_user(obj["owner"]))
            requester = _principal(desanitize_user(obj["tokenRequester"])) if version >= 3 else None
            return cls(str(obj["tokenId"]), owner,
                       tuple(_principal(desanitize_user(r)) for r in obj["renewers"]),
                       int(obj["issueTimestamp"]), int(obj["maxTimestamp"]), int(obj["expiryTimestamp"]),
                       requester)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a delegation token node: {exc}") from None


def _principal(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise ValueError(f"not a principal: {text!r}")
    return text


def new_token_id() -> str:
    """22 characters of URL-safe base64 (no padding) of a random UUID, as Kafka's ``generateUuidAsBase64``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class TokenAuth:
    """What a SCRAM authentication with ``tokenauth=true`` needs: the credential derived from the token's
    HMAC, who the token speaks for, and until when."""

    credential: ScramCredential
    owner: str
    expiry_ms: int


class TokenManager:
    """Issues, renews, expires, describes and checks tokens against the metadata store.

    Every method but :attr:`enabled` and :meth:`hmac` blocks on the store: the
    event loop calls them through its executor. Thread-safe: the store is, and
    a token's read-modify-writes are compare-and-sets on the node's version.
    """

    def __init__(self, metadata: "ClusterMetadata", master_key: str | None, max_lifetime_ms: int,
                 expiry_time_ms: int, check_interval_ms: int, clock: Callable[[], float] = time.time) -> None:
        self.metadata = metadata
        self._key = master_key.encode("utf-8") if master_key else None
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.check_interval_ms = check_interval_ms
        self._clock = clock
        #: (token id, mechanism) -> the SCRAM credential derived from its HMAC (the PBKDF2 runs once)
        self._credentials: dict[tuple[str, str], ScramCredential] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, metadata: "ClusterMetadata", config) -> "TokenManager":
        return cls(metadata, config["delegation.token.master.key"], config["delegation.token.max.lifetime.ms"],
                   config["delegation.token.expiry.time.ms"], config["delegation.token.expiry.check.interval.ms"])

    @property
    def enabled(self) -> bool:
        """Tokens are served only with a master key, as in Kafka."""
        return self._key is not None

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def hmac(self, token_id: str) -> bytes:
        """HMAC-SHA512 of the token id, keyed with the master key."""
        return _hmac.new(self._key, token_id.encode("utf-8"), hashlib.sha512).digest()

    # -- the store ------------------------------------------------------------------------
    @property
    def _store(self):
        return self.metadata.store

    def _read(self, token_id: str) -> tuple[TokenInfo, int] | None:
        """A token and its node's version; None when absent (or not a token node, logged)."""
        if not token_id or token_id in (".", "..") or "/" in token_id:
            return None
        found = self._store.get_or_none(f"{TOKENS}/{token_id}")
        if found is None:
            return None
        try:
            return TokenInfo.decode(found[0]), found[1].version
        except ValueError as exc:
            log.warning("delegation token node %s skipped: %s", token_id, exc)
            return None

    def tokens(self) -> list[TokenInfo]:
        """Every stored token."""
        if self._store.exists(TOKENS) is None:
            return []
        found = []
        for token_id in self._store.get_children(TOKENS):
            read = self._read(token_id)
            if read is not None:
                found.append(read[0])
        return found

    def _by_hmac(self, given: bytes) -> tuple[TokenInfo, int] | None:
        """The token whose HMAC is ``given``, with its node's version."""
        if self._store.exists(TOKENS) is None:
            return None
        for token_id in self._store.get_children(TOKENS):
            if _hmac.compare_digest(self.hmac(token_id), bytes(given)):
                return self._read(token_id)
        return None

    # -- the APIs -------------------------------------------------------------------------
    def create(self, owner: str, renewers: list[str], max_lifetime_ms: int) -> tuple[TokenInfo, bytes]:
        """A new token for ``owner`` (the caller checked the request; see the module docstring)."""
        now = self.now_ms()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        while True:
            info = TokenInfo(new_token_id(), owner, tuple(renewers), now, now + lifetime,
                             min(now + lifetime, now + self.expiry_time_ms))
            try:
                self._store.create(f"{TOKENS}/{info.token_id}", info.encode(), make_parents=True)
            except NodeExistsError:  # a UUID twice: draw again
                continue
            log.info("Created a delegation token %s for owner %s (expires %s, at most %s)", info.token_id, owner,
                     _when(info.expiry_ms), _when(info.max_ms))
            return info, self.hmac(info.token_id)

    def renew(self, principal: str, given_hmac: bytes, period_ms: int) -> tuple[int, int]:
        """(error code, new expiry timestamp or -1)."""
        return self._change(principal, given_hmac, period_ms, expire=False)

    def expire(self, principal: str, given_hmac: bytes, period_ms: int) -> tuple[int, int]:
        """(error code, new expiry timestamp or -1); a negative period removes the token now."""
        return self._change(principal, given_hmac, period_ms, expire=True)

    def _change(self, principal: str, given_hmac: bytes, period_ms: int, expire: bool) -> tuple[int, int]:
        for _attempt in range(WRITE_ATTEMPTS):
            found = self._by_hmac(given_hmac)
            if found is None:
                return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, -1
            info, version = found
            now = self.now_ms()
            if not info.owner_or_renewer(principal):
                return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1
            try:
                if expire and period_ms < 0:
                    self._store.delete(f"{TOKENS}/{info.token_id}", version)
                    self._forget(info.token_id)
                    log.info("Delegation token %s of %s expired by %s", info.token_id, info.owner, principal)
                    return ErrorCode.NONE, now
                if info.expired(now):
                    return ErrorCode.DELEGATION_TOKEN_EXPIRED, -1
                if not expire and period_ms < 0:
                    period_ms = self.expiry_time_ms
                expiry = min(info.max_ms, now + period_ms)
                self._store.set(f"{TOKENS}/{info.token_id}", replace(info, expiry_ms=expiry).encode(), version)
            except (BadVersionError, NoNodeError):
                continue  # renewed, expired or removed meanwhile: decide again on what is stored now
            log.info("Delegation token %s of %s %s by %s: expires %s", info.token_id, info.owner,
                     "given a new expiry" if expire else "renewed", principal, _when(expiry))
            return ErrorCode.NONE, expiry
        raise RuntimeError(f"delegation token changed by others {WRITE_ATTEMPTS} times while being changed")

    def describe(self, owners: list[str] | None) -> list[tuple[TokenInfo, bytes]]:
        """The tokens that ``owners`` own or renew (None: every token; [] none), oldest first, with their
        HMACs; which of them a requester may see is the caller's (the authorizer is on the event loop)."""
        if owners is not None and not owners:
            return []
        return [(info, self.hmac(info.token_id)) for info in sorted(self.tokens(), key=lambda t: (t.issue_ms, t.token_id))
                if owners is None or any(info.owner_or_renewer(o) for o in owners)]

    def remove_expired(self) -> list[str]:
        """Remove every token past its expiry or maximum (the controller's pass); the ids removed."""
        removed = []
        now = self.now_ms()
        if self._store.exists(TOKENS) is None:
            return removed
        for token_id in self._store.get_children(TOKENS):
            found = self._read(token_id)
            if found is None or not found[0].expired(now):
                continue
            try:
                self._store.delete(f"{TOKENS}/{token_id}", found[1])
            except (BadVersionError, NoNodeError):
                continue  # renewed or removed meanwhile
            self._forget(token_id)
            log.info("Delegation token %s of %s expired at %s: removed", token_id, found[0].owner,
                     _when(min(found[0].expiry_ms, found[0].max_ms)))
            removed.append(token_id)
        return removed

    # -- authentication -------------------------------------------------------------------
    def scram_auth(self, token_id: str, mechanism: str) -> TokenAuth | None:
        """What authenticating with token ``token_id`` over ``mechanism`` takes; None for no such token (or
        tokens disabled, or a token past its expiry)."""
        if not self.enabled or mechanism not in SCRAM_MECHANISMS:
            return None
        found = self._read(token_id)
        if found is None:
            return None
        info = found[0]
        if info.expired(self.now_ms()):
            return None
        key = (token_id, mechanism)
        with self._lock:
            credential = self._credentials.get(key)
        if credential is None:
            password = base64.b64encode(self.hmac(token_id)).decode("ascii")
            credential = ScramCredential.from_password(mechanism, password, MIN_ITERATIONS)
            with self._lock:
                self._credentials[key] = credential
                while len(self._credentials) > CREDENTIALS_KEPT:
                    del self._credentials[next(iter(self._credentials))]
        return TokenAuth(credential, info.owner, min(info.expiry_ms, info.max_ms))

    def _forget(self, token_id: str) -> None:
        with self._lock:
            for mechanism in SCRAM_MECHANISMS:
                self._credentials.pop((token_id, mechanism), None)


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
