"""Group membership APIs, served by :class:`broker.coordinator.GroupCoordinator`:

* JoinGroup (11) v0-9: held until the rebalance's join phase ends. v0 has no
  rebalance timeout (the session timeout stands in); v4+ answers a first join
  without a member id with MEMBER_ID_REQUIRED and the id to use; v5+ static
  membership (``group_instance_id``); v7+ returns protocol_type/name; as in Kafka
  3.2, which added them: v8 ``reason`` goes into the log line of the rebalance the
  join starts (KIP-800), and v9 answers a static leader that rejoins a Stable group
  with itself as leader, the member list and ``skip_assignment`` (KIP-814; v0-8 name
  the leader id from before it rejoined, so it syncs as a follower).
* SyncGroup (14) v0-5: followers wait for the leader's assignment; v5 checks
  protocol_type/name (INCONSISTENT_GROUP_PROTOCOL).
* Heartbeat (12) v0-4: REBALANCE_IN_PROGRESS tells a member to rejoin.
* LeaveGroup (13) v0-5: v0-2 one member id, v3+ a batch of members (by member id
  or group.instance.id) with an error per member; v5 a reason per member, logged
  (KIP-800, Kafka 3.2).
* DescribeGroups (15) v0-5 (a group of the consumer protocol is Dead to it, as to Kafka 4.x:
  ConsumerGroupDescribe describes those), ListGroups (16) v0-5 (v4 filters by state, v5 by type),
  DeleteGroups (42) v0-2 (NON_EMPTY_GROUP unless the group is Empty).

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
JoinGroup, SyncGroup, Heartbeat and LeaveGroup need READ on the group, else
GROUP_AUTHORIZATION_FAILED and the coordinator is not asked (JoinGroup answers
it with an empty member id); DescribeGroups needs DESCRIBE on each group (the
others get GROUP_AUTHORIZATION_FAILED with empty fields), and v3+ reports the
group's ``authorized_operations`` (of READ, DESCRIBE, DELETE; all three without
an authorizer, as Kafka) when asked;
ListGroups lists every group with DESCRIBE on the cluster, else only the groups
the principal may DESCRIBE; DeleteGroups needs DELETE on each group (the others
GROUP_AUTHORIZATION_FAILED, nothing deleted for them).
"""

from __future__ import annotations

import logging

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.cluster.store import StoreError
from broker.coordinator.coordinator import join_error
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

log = logging.getLogger("broker.groups")

READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP = ResourceType.GROUP
#: The operations that apply to a group (Kafka's supported operations of GROUP), for ``authorized_operations``.
GROUP_OPERATIONS = (READ, DESCRIBE, DELETE)
ALL_GROUP_OPERATIONS = sum(1 << op for op in GROUP_OPERATIONS)


def _client_host(ctx: RequestContext) -> str:
    host = ctx.peer.rsplit(":", 1)[0] if ":" in ctx.peer else ctx.peer
    return "/" + host


async def join_group(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    if not ctx.authorize(READ, GROUP, request["group_id"]):
        result = join_error("", ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if v < 7:
            result["protocol_name"] = ""
        result["throttle_time_ms"] = 0
        return result
    coordinator = ctx.broker.coordinator
    result = await coordinator.join_group(
        request["group_id"], request["member_id"], request["group_instance_id"] if v >= 5 else None,
        ctx.client_id or "", _client_host(ctx),
        request["rebalance_timeout_ms"] if v >= 1 else request["session_timeout_ms"],
        request["session_timeout_ms"], request["protocol_type"],
        [(p["name"], bytes(p["metadata"])) for p in request["protocols"]],
        require_known_member_id=v >= 4, supports_skip_assignment=v >= 9,
        reason=request["reason"] if v >= 8 else None,
    )
    if v < 7 and result["protocol_name"] is None:
        result["protocol_name"] = ""
    result["throttle_time_ms"] = 0
    return result


async def sync_group(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    if not ctx.authorize(READ, GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    assignments = {a["member_id"]: bytes(a["assignment"]) for a in request["assignments"]}
    code, assignment, group = await ctx.broker.coordinator.sync_group(
        request["group_id"], request["generation_id"], request["member_id"],
        request["group_instance_id"] if v >= 3 else None,
        request["protocol_type"] if v >= 5 else None, request["protocol_name"] if v >= 5 else None, assignments)
    response = {"throttle_time_ms": 0, "error_code": code, "assignment": assignment}
    if v >= 5 and code == ErrorCode.NONE and group is not None:
        response.update(protocol_type=group.protocol_type, protocol_name=group.protocol_name)
    return response


async def heartbeat(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(READ, GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    code = ctx.broker.coordinator.heartbeat(request["group_id"], request["generation_id"], request["member_id"],
                                           request["group_instance_id"] if ctx.api_version >= 3 else None)
    return {"throttle_time_ms": 0, "error_code": code}


async def leave_group(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    if not ctx.authorize(READ, GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    if v < 3:
        members, reasons = [(request["member_id"], None)], None
    else:
        members = [(m["member_id"], m["group_instance_id"]) for m in request["members"]]
        reasons = [m["reason"] for m in request["members"]] if v >= 5 else None
    top, errors = ctx.broker.coordinator.leave_group(request["group_id"], members, reasons)
    if v < 3:
        return {"throttle_time_ms": 0, "error_code": top or errors[0]}
    return {"throttle_time_ms": 0, "error_code": top,
            "members": [] if top else [{"member_id": m, "group_instance_id": i, "error_code": e}
                                       for (m, i), e in zip(members, errors)]}


def _authorized_operations(ctx: RequestContext, group_id: str) -> int:
    if ctx.broker.authorizer is None:
        return ALL_GROUP_OPERATIONS
    return sum(1 << op for op in GROUP_OPERATIONS if ctx.authorize(op, GROUP, group_id))


async def describe_groups(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    checked = ctx.broker.authorizer is not None
    with_operations = ctx.api_version >= 3 and request["include_authorized_operations"]
    out = []
    for group_id in request["groups"]:
        if checked and not ctx.authorize(DESCRIBE, GROUP, group_id):
            out.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": group_id, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": []})
            continue
        code, group = coordinator.describe(group_id)
        entry = {"error_code": code, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
                 "protocol_data": "", "members": []}
        if code == ErrorCode.NONE and group is not None and group.modern is None:  # not a consumer group's
            entry.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                         protocol_data=(group.protocol_name or "") if group.state.value == "Stable" else "",
                         members=group.describe_members())
        if with_operations and code == ErrorCode.NONE:
            entry["authorized_operations"] = _authorized_operations(ctx, group_id)
        out.append(entry)
    return {"throttle_time_ms": 0, "groups": out}


async def list_groups(ctx: RequestContext, request: dict) -> dict:
    """Classic groups, consumer groups (KIP-848: group type ``consumer``, states Empty, Assigning, Reconciling,
    Stable) and share groups (KIP-932; protocol type and group type ``share``), as Kafka 4.2 lists them at every
    version. v4+ filter by state, v5+ by type (``classic``, ``consumer``, ``share``; case-insensitive, an unknown
    type matches nothing)."""
    coordinator = ctx.broker.coordinator
    states = {s.lower() for s in request["states_filter"] or []} if ctx.api_version >= 4 else set()
    types = {t.lower() for t in request["types_filter"] or []} if ctx.api_version >= 5 else set()
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if coordinator.loading else ErrorCode.NONE
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state_name,
               "group_type": g.type_name} for g in coordinator.list_groups()]
    share = {g.group_id: g.state for g in ctx.broker.share_coordinator.groups.values()}
    if not types or "share" in types:  # share groups known only by what they consumed: Empty
        try:
            for group_id in await ctx.broker.run_blocking(ctx.broker.share_manager.stored_groups):
                share.setdefault(group_id, "Empty")
        except StoreError as exc:  # the groups in memory are still listed
            log.warning("ListGroups: share groups without members left out, the store cannot be read: %s", exc)
    groups += [{"group_id": g, "protocol_type": "share", "group_state": state, "group_type": "share"}
               for g, state in share.items() if coordinator.group_error(g) == ErrorCode.NONE]
    groups = [g for g in groups if (not states or g["group_state"].lower() in states)
              and (not types or g["group_type"] in types)]
    if ctx.broker.authorizer is not None and not ctx.authorize(DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        groups = [g for g in groups if ctx.authorize(DESCRIBE, GROUP, g["group_id"])]
    return {"throttle_time_ms": 0, "error_code": error, "groups": groups}


async def delete_groups(ctx: RequestContext, request: dict) -> dict:
    """Consumer groups, and share groups (KIP-932: refused NON_EMPTY_GROUP while they have members; what they
    consumed goes with them)."""
    names = list(request["groups_names"])
    if ctx.broker.authorizer is None:
        results = await ctx.broker.coordinator.delete_groups(names)
    else:
        names = list(dict.fromkeys(names))  # each group once, as Kafka answers
        allowed = ctx.authorized(DELETE, GROUP, names)
        deleted = await ctx.broker.coordinator.delete_groups([g for g in names if g in allowed])
        results = {g: deleted[g] if g in allowed else ErrorCode.GROUP_AUTHORIZATION_FAILED for g in names}
    for group_id, code in list(results.items()):
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            share = await ctx.broker.share_coordinator.delete(group_id)
            if share is not None:
                results[group_id] = share
    return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": c} for g, c in results.items()]}


def register(registry) -> None:
    registry.register(ApiKey.JOIN_GROUP, 0, 9, join_group)
    registry.register(ApiKey.SYNC_GROUP, 0, 5, sync_group)
    registry.register(ApiKey.HEARTBEAT, 0, 4, heartbeat)
    registry.register(ApiKey.LEAVE_GROUP, 0, 5, leave_group)
    registry.register(ApiKey.DESCRIBE_GROUPS, 0, 5, describe_groups)
    registry.register(ApiKey.LIST_GROUPS, 0, 5, list_groups)
    registry.register(ApiKey.DELETE_GROUPS, 0, 2, delete_groups)
