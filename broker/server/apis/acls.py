"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), versions 0-2: the ACLs of :mod:`broker.acl`, as
Kafka 2.7 serves them.

Without an authorizer (``authorizer.class.name`` empty) each is answered with
SECURITY_DISABLED, "No Authorizer is configured on the broker" (the whole
DescribeAcls, each creation, each deletion filter), as Kafka does.

With one:

* DescribeAcls (DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED)
  answers the ACLs matching its filter, grouped by resource pattern. A filter
  matches on each field it sets (null or ANY: every value); pattern type MATCH
  with a name matches every ACL that would apply to that resource (its own
  name, the LITERAL wildcard ``*``, the PREFIXED names it starts with).
  UNKNOWN in any field: INVALID_REQUEST.
* CreateAcls (ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for each
  creation) adds each binding; a binding with ANY or UNKNOWN in a field, a
  pattern type other than LITERAL or PREFIXED, a principal not of the form
  ``Type:name``, a cluster resource not named ``kafka-cluster``, or a name
  that cannot be stored: INVALID_REQUEST for that creation only.
* DeleteAcls (ALTER on the cluster) removes, per filter, every ACL the filter
  matches (MATCH as above) and answers them.

Changes are written to the store with compare-and-set and announced to every
broker; this broker's authorizer has them before the answer goes out.
"""

from __future__ import annotations

from broker.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermission,
    Entry,
    PatternType,
    Resource,
    ResourceType,
    WILDCARD,
    storable_name_problem,
)
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

NO_AUTHORIZER = "No Authorizer is configured on the broker"
_FORBIDDEN = "Cluster authorization failed."


def _enum(kind, value: int):
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN


class _Filter:
    """An ACL binding filter of DescribeAcls or DeleteAcls."""

    def __init__(self, body: dict) -> None:
        self.type = _enum(ResourceType, body["resource_type_filter"])
        self.name = body["resource_name_filter"]
        self.pattern = _enum(PatternType, body["pattern_type_filter"])
        self.principal = body["principal_filter"]
        self.host = body["host_filter"]
        self.operation = _enum(AclOperation, body["operation"])
        self.permission = _enum(AclPermission, body["permission_type"])

    def unknown(self) -> bool:
        return 0 in (self.type, self.pattern, self.operation, self.permission)

    def matches_resource(self, resource: Resource) -> bool:
        if self.type != ResourceType.ANY and resource.type != self.type:
            return False
        if self.pattern == PatternType.MATCH:
            if self.name is None:
                return True
            if resource.pattern == PatternType.LITERAL:
                return resource.name in (self.name, WILDCARD)
            return self.name.startswith(resource.name)
        if self.pattern != PatternType.ANY and resource.pattern != self.pattern:
            return False
        return self.name is None or resource.name == self.name

    def matches_entry(self, entry: Entry) -> bool:
        return ((self.principal is None or entry.principal == self.principal)
                and (self.host is None or entry.host == self.host)
                and (self.operation == AclOperation.ANY or entry.operation == self.operation)
                and (self.permission == AclPermission.ANY or entry.permission == self.permission))

    def select(self, acls: dict) -> dict[Resource, list[Entry]]:
        found: dict[Resource, list[Entry]] = {}
        for resource, entries in acls.items():
            if self.matches_resource(resource):
                chosen = sorted((e for e in entries if self.matches_entry(e)),
                                key=lambda e: (e.principal, e.host, e.operation, e.permission))
                if chosen:
                    found[resource] = chosen
        return found


def _write(authorizer, changes: dict) -> dict:
    """Blocking: the changes in atomic batches (:meth:`broker.acl.AclStore.change_many`); each resource's
    entries after, or the exception that failed the store (then every resource of the request gets it)."""
    try:
        done: dict = authorizer.acls.change_many(changes)
    except Exception as exc:  # noqa: BLE001 - the store failed: the request's changes fail
        done = {resource: exc for resource in changes}
    _purge(authorizer)
    return done


def _purge(authorizer) -> None:
    """Blocking: old change notifications go, once per request; a failure to delete them changes nothing."""
    try:
        authorizer.acls.purge_changes()
    except Exception:  # noqa: BLE001 - the next request purges them
        pass


def _entry_fields(entry: Entry) -> dict:
    return {"principal": entry.principal, "host": entry.host, "operation": entry.operation,
            "permission_type": entry.permission}


async def describe_acls(ctx: RequestContext, request: dict) -> dict:
    authorizer = ctx.broker.authorizer
    out = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "resources": []}
    if authorizer is None:
        return {**out, "error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {**out, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": _FORBIDDEN}
    flt = _Filter(request)
    if flt.unknown():
        return {**out, "error_code": ErrorCode.INVALID_REQUEST, "error_message": "The filter contains UNKNOWN elements"}
    found = flt.select(authorizer.bindings())
    out["resources"] = [{"resource_type": r.type, "resource_name": r.name, "pattern_type": r.pattern,
                         "acls": [_entry_fields(e) for e in entries]}
                        for r, entries in sorted(found.items(), key=lambda i: (i[0].type, i[0].pattern, i[0].name))]
    return out


def _creation_problem(body: dict) -> tuple[Resource, Entry] | str:
    rtype = _enum(ResourceType, body["resource_type"])
    pattern = _enum(PatternType, body["resource_pattern_type"])
    operation = _enum(AclOperation, body["operation"])
    permission = _enum(AclPermission, body["permission_type"])
    if rtype in (ResourceType.UNKNOWN, ResourceType.ANY) or operation in (AclOperation.UNKNOWN, AclOperation.ANY) \
            or permission in (AclPermission.UNKNOWN, AclPermission.ANY):
        return "Invalid ACL creation: the binding has an ANY or UNKNOWN field"
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid ACL creation: pattern type {pattern.name} (LITERAL or PREFIXED only)"
    kind, colon, name = (body["principal"] or "").partition(":")
    if not colon or not kind or not name:
        return f"Invalid ACL creation: principal {body['principal']!r} is not Type:name (e.g. User:alice)"
    if not body["host"]:
        return "Invalid ACL creation: the host must not be empty ('*' for any)"
    resource = Resource(rtype, body["resource_name"], pattern)
    problem = storable_name_problem(resource)
    if problem is not None:
        return f"Invalid ACL creation: {problem}"
    return resource, Entry(body["principal"], body["host"], operation, permission)


async def create_acls(ctx: RequestContext, request: dict) -> dict:
    authorizer = ctx.broker.authorizer
    creations = request["creations"]
    if authorizer is None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER} for _ in creations]}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": _FORBIDDEN} for _ in creations]}
    results: list[dict] = []
    wanted: dict[Resource, set[Entry]] = {}
    for body in creations:
        checked = _creation_problem(body)
        if isinstance(checked, str):
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": checked})
            continue
        resource, entry = checked
        wanted.setdefault(resource, set()).add(entry)
        results.append({"error_code": ErrorCode.NONE, "error_message": None, "resource": resource})

    def write() -> dict[Resource, set[Entry] | Exception]:
        return _write(authorizer, {resource: (entries, set()) for resource, entries in wanted.items()})

    done = await ctx.broker.run_blocking(write)
    for resource, entries in done.items():
        if not isinstance(entries, Exception):
            authorizer.update(resource, entries)
    for result in results:
        resource = result.pop("resource", None)
        if resource is not None and isinstance(done.get(resource), Exception):
            result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(done[resource]))
    return {"throttle_time_ms": 0, "results": results}


async def delete_acls(ctx: RequestContext, request: dict) -> dict:
    authorizer = ctx.broker.authorizer
    filters = request["filters"]
    if authorizer is None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER, "matching_acls": []}
            for _ in filters]}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": _FORBIDDEN, "matching_acls": []}
            for _ in filters]}
    parsed = [_Filter(body) for body in filters]
    selections = [None if f.unknown() else f.select(authorizer.bindings()) for f in parsed]
    removals: dict[Resource, set[Entry]] = {}
    for selection in selections:
        for resource, entries in (selection or {}).items():
            removals.setdefault(resource, set()).update(entries)

    def write() -> dict[Resource, set[Entry] | Exception]:
        return _write(authorizer, {resource: (set(), entries) for resource, entries in removals.items()})

    done = await ctx.broker.run_blocking(write)
    for resource, entries in done.items():
        if not isinstance(entries, Exception):
            authorizer.update(resource, entries)
    results = []
    for selection in selections:
        if selection is None:
            results.append({"error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": "The filter contains UNKNOWN elements", "matching_acls": []})
            continue
        matching = []
        for resource, entries in selection.items():
            failed = done.get(resource)
            code, message = ((ErrorCode.UNKNOWN_SERVER_ERROR, str(failed)) if isinstance(failed, Exception)
                             else (ErrorCode.NONE, None))
            matching.extend({"error_code": code, "error_message": message, "resource_type": resource.type,
                             "resource_name": resource.name, "pattern_type": resource.pattern, **_entry_fields(e)}
                            for e in entries)
        results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": matching})
    return {"throttle_time_ms": 0, "filter_results": results}


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_ACLS, 0, 2, describe_acls)
    registry.register(ApiKey.CREATE_ACLS, 0, 2, create_acls)
    registry.register(ApiKey.DELETE_ACLS, 0, 2, delete_acls)
