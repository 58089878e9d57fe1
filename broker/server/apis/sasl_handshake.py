"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2: the SASL exchange of :mod:`broker.sasl`.

On a SASL listener, before the exchange succeeds (the network layer lets
only ApiVersions, SaslHandshake and SaslAuthenticate through):

* SaslHandshake names a mechanism. One of the listener's
  ``sasl.enabled.mechanisms``: NONE and the enabled list; the client's tokens
  follow in SaslAuthenticate requests (v1) or as bare size-prefixed frames
  (v0, handled by the network layer). Any other mechanism:
  UNSUPPORTED_SASL_MECHANISM with the enabled list, answered after
  ``connection.failed.authentication.delay.ms`` and then closed (as Kafka).
  After the handshake only SaslAuthenticate is taken; anything else (a second
  handshake, ApiVersions, a SaslAuthenticate before any handshake) closes the
  connection unanswered, as Kafka does.
* SaslAuthenticate carries one client token and answers the server's
  (``auth_bytes``); ``session_lifetime_ms`` (v1+) is how long the session lasts
  (KIP-368: ``connections.max.reauth.ms``, or less when the credential, an
  OAUTHBEARER token, expires sooner; 0: for the connection's life).
  A failed authentication (unknown user, wrong password, a bad message) is
  answered with SASL_AUTHENTICATION_FAILED and Kafka's message, after
  ``connection.failed.authentication.delay.ms``, and the connection is closed
  after that answer; the broker logs why (never the password).

Re-authentication (KIP-368), with ``connections.max.reauth.ms`` above 0 for
the listener and mechanism: a SaslHandshake on an authenticated connection
before its session ends starts a new exchange (the network layer), which must
name the same principal with the same mechanism (else
SASL_AUTHENTICATION_FAILED and the connection closes); a request after the
session ended closes the connection. Otherwise, on a listener without SASL or
once authenticated, both answer ILLEGAL_SASL_STATE, as a Kafka 2.7 broker does.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.sasl import AuthenticationFailed
from broker.server.context import RequestContext


def _session(ctx: RequestContext):
    conn = ctx.connection
    return None if conn is None else conn.sasl


async def handshake(ctx: RequestContext, request: dict) -> dict:
    session = _session(ctx)
    if session is None or session.complete:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    mechanisms = list(session.sasl.mechanisms)
    if session.state != "handshake":  # (the network layer refuses it before it gets here)
        ctx.connection.sasl_refused(f"a second SaslHandshake ({request['mechanism'][:40]!r})")
        await ctx.connection.failure_delay()
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    if not session.handshake(request["mechanism"], ctx.api_version):
        ctx.connection.sasl_refused(f"mechanism {request['mechanism'][:40]!r} is not enabled "
                                    f"({', '.join(mechanisms)})", request["mechanism"])
        await ctx.connection.failure_delay()
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms}
    return {"error_code": ErrorCode.NONE, "mechanisms": mechanisms}


async def authenticate(ctx: RequestContext, request: dict) -> dict:
    session = _session(ctx)
    if session is None or session.complete:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime_ms": 0,
                "error_message": "SaslAuthenticate request received after successful authentication"}
    if session.state != "authenticate" or session.raw:  # (the network layer refuses it before it gets here)
        ctx.connection.sasl_refused("SaslAuthenticate before a SaslHandshake v1")
        await ctx.connection.failure_delay()
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime_ms": 0,
                "error_message": "Unexpected SaslAuthenticate request before a SaslHandshake"}
    try:
        answer = await session.step(request["auth_bytes"])
    except AuthenticationFailed as exc:
        await ctx.connection.sasl_failed(exc)
        return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc), "auth_bytes": b"",
                "session_lifetime_ms": 0}
    if session.complete and not ctx.connection.sasl_succeeded():
        await ctx.connection.failure_delay()
        return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "auth_bytes": b"", "session_lifetime_ms": 0,
                "error_message": "Cannot change principals or mechanisms during re-authentication"}
    return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": answer,
            "session_lifetime_ms": ctx.connection.session_lifetime_ms if session.complete else 0}


def register(registry) -> None:
    registry.register(ApiKey.SASL_HANDSHAKE, 0, 1, handshake)
    registry.register(ApiKey.SASL_AUTHENTICATE, 0, 2, authenticate)
