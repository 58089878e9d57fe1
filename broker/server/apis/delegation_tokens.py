"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41), versions 0-2, as Kafka 2.7's ``KafkaApis`` serves them.

The rules and the storage are in :mod:`broker.tokens`. Each handler first
refuses a connection that may not ask for tokens (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED:
a PLAINTEXT listener, an SSL one without a client certificate, a connection
authenticated by a token), then a broker without ``delegation.token.master.key``
(DELEGATION_TOKEN_AUTH_DISABLED). Any broker answers: tokens live in the
metadata store.
"""

from __future__ import annotations

import logging

from broker.acl import ANONYMOUS, AclOperation, ResourceType
from broker.cluster.store import StoreError
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

log = logging.getLogger("broker.tokens")

USER_TYPE = "User"


def _requester(ctx: RequestContext) -> str:
    return ANONYMOUS if ctx.connection is None else ctx.connection.principal


def _refusal(ctx: RequestContext) -> int:
    """Kafka's ``allowTokenRequests``, then whether tokens are enabled: the error, or NONE."""
    conn = ctx.connection
    if conn is not None:
        protocol = ctx.broker.config.security_protocol(ctx.listener)
        by_token = conn.sasl is not None and conn.sasl.token_authenticated
        if by_token or protocol == "PLAINTEXT" or (protocol == "SSL" and conn.principal == ANONYMOUS):
            return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    if not ctx.broker.tokens.enabled:
        return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    return ErrorCode.NONE


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


async def create(ctx: RequestContext, request: dict) -> dict:
    owner = _requester(ctx)
    kind, name = _split(owner)
    answer = {"error_code": ErrorCode.NONE, "principal_type": kind, "principal_name": name,
              "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1, "max_timestamp_ms": -1, "token_id": "",
              "hmac": b"", "throttle_time_ms": 0}
    code = _refusal(ctx)
    renewers = [(r["principal_type"], r["principal_name"]) for r in request["renewers"]]
    if code == ErrorCode.NONE and any(t != USER_TYPE for t, _n in renewers):
        code = ErrorCode.INVALID_PRINCIPAL_TYPE
    if code != ErrorCode.NONE:
        return {**answer, "error_code": code}
    try:
        info, hmac = await ctx.broker.run_blocking(ctx.broker.tokens.create, owner,
                                                   [f"{t}:{n}" for t, n in renewers], request["max_lifetime_ms"])
    except StoreError as exc:
        log.warning("delegation token for %s not created: %s", owner, exc)
        return {**answer, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR}
    return {**answer, "issue_timestamp_ms": info.issue_ms, "expiry_timestamp_ms": info.expiry_ms,
            "max_timestamp_ms": info.max_ms, "token_id": info.token_id, "hmac": hmac}


async def _change(ctx: RequestContext, hmac: bytes, period_ms: int, expire: bool) -> dict:
    code = _refusal(ctx)
    if code != ErrorCode.NONE:
        return {"error_code": code, "expiry_timestamp_ms": -1, "throttle_time_ms": 0}
    tokens = ctx.broker.tokens
    try:
        code, expiry = await ctx.broker.run_blocking(tokens.expire if expire else tokens.renew, _requester(ctx),
                                                     bytes(hmac or b""), period_ms)
    except (StoreError, RuntimeError) as exc:
        log.warning("delegation token not %s: %s", "expired" if expire else "renewed", exc)
        code, expiry = ErrorCode.UNKNOWN_SERVER_ERROR, -1
    return {"error_code": code, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


async def renew(ctx: RequestContext, request: dict) -> dict:
    return await _change(ctx, request["hmac"], request["renew_period_ms"], expire=False)


async def expire(ctx: RequestContext, request: dict) -> dict:
    return await _change(ctx, request["hmac"], request["expiry_time_period_ms"], expire=True)


async def describe(ctx: RequestContext, request: dict) -> dict:
    code = _refusal(ctx)
    if code != ErrorCode.NONE:
        return {"error_code": code, "tokens": [], "throttle_time_ms": 0}
    owners = request["owners"]
    wanted = None if owners is None else [f"{o['principal_type']}:{o['principal_name']}" for o in owners]
    try:  # read on a thread; the requester's view is decided here, where the authorizer lives
        tokens = await ctx.broker.run_blocking(ctx.broker.tokens.describe, wanted)
    except StoreError as exc:
        log.warning("delegation tokens not described: %s", exc)
        return {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "tokens": [], "throttle_time_ms": 0}
    requester = _requester(ctx)
    answered = []
    for info, hmac in tokens:
        if not info.owner_or_renewer(requester) and not ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, info.token_id):
            continue
        kind, name = _split(info.owner)
        answered.append({"principal_type": kind, "principal_name": name, "issue_timestamp": info.issue_ms,
                         "expiry_timestamp": info.expiry_ms, "max_timestamp": info.max_ms,
                         "token_id": info.token_id, "hmac": hmac,
                         "renewers": [dict(zip(("principal_type", "principal_name"), _split(r)))
                                      for r in info.renewers]})
    return {"error_code": ErrorCode.NONE, "tokens": answered, "throttle_time_ms": 0}


def register(registry) -> None:
    registry.register(ApiKey.CREATE_DELEGATION_TOKEN, 0, 2, create)
    registry.register(ApiKey.RENEW_DELEGATION_TOKEN, 0, 2, renew)
    registry.register(ApiKey.EXPIRE_DELEGATION_TOKEN, 0, 2, expire)
    registry.register(ApiKey.DESCRIBE_DELEGATION_TOKEN, 0, 2, describe)
