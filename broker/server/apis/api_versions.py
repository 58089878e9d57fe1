"""ApiVersions (key 18), versions 0-3.

Answers with exactly the registry's table (registered ranges intersected with
the protocol schemas), so we never advertise what we do not serve. A request
for a version above 3 never reaches this handler: the network layer answers
it at v0 with UNSUPPORTED_VERSION (35) and the same table, as the protocol
requires, so the client can retry with a version we know.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext


def version_table(ctx: RequestContext) -> list[dict]:
    return [
        {"api_key": key, "min_version": low, "max_version": high}
        for key, (low, high) in ctx.broker.registry.versions().items()
    ]


async def handle(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version >= 3 and ctx.connection is not None:  # what client metrics subscriptions match on
        ctx.connection.client_software_name = request["client_software_name"]
        ctx.connection.client_software_version = request["client_software_version"]
    return {"error_code": ErrorCode.NONE, "api_keys": version_table(ctx), "throttle_time_ms": 0}


def register(registry) -> None:
    registry.register(ApiKey.API_VERSIONS, 0, 3, handle)
