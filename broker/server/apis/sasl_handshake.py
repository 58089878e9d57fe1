"""SaslHandshake (key 17), versions 0-1.

No SASL mechanism is enabled until the security issue lands: every handshake
gets UNSUPPORTED_SASL_MECHANISM (33) with an empty mechanism list, so a client
configured for SASL fails fast with a clear error instead of hanging.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

ENABLED_MECHANISMS: list[str] = []


async def handle(ctx: RequestContext, request: dict) -> dict:
    if request["mechanism"] in ENABLED_MECHANISMS:  # pragma: no cover - none yet
        return {"error_code": ErrorCode.NONE, "mechanisms": ENABLED_MECHANISMS}
    return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ENABLED_MECHANISMS}


def register(registry) -> None:
    registry.register(ApiKey.SASL_HANDSHAKE, 0, 1, handle)
