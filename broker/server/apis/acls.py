"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), versions 0-2: answered as by a Kafka 2.7 broker
with no ``authorizer.class.name``.

This broker has no authorizer: every authenticated client may do everything,
and there are no ACLs to list, create or delete. Kafka serves these APIs all
the same and answers each with SECURITY_DISABLED (54), "No Authorizer is
configured on the broker" (the whole DescribeAcls, each creation of a
CreateAcls, each filter of a DeleteAcls), so an admin client reports a clear
error instead of a dropped connection.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

NO_AUTHORIZER = "No Authorizer is configured on the broker"


async def describe_acls(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
            "resources": []}


async def create_acls(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER} for _ in request["creations"]]}


async def delete_acls(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER, "matching_acls": []}
        for _ in request["filters"]]}


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_ACLS, 0, 2, describe_acls)
    registry.register(ApiKey.CREATE_ACLS, 0, 2, create_acls)
    registry.register(ApiKey.DELETE_ACLS, 0, 2, delete_acls)
