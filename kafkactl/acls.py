"""``kafkactl acls``: the ACLs of a cluster whose brokers run the ACL authorizer, as Kafka's
``kafka-acls.sh --bootstrap-server`` lists, adds and removes them (CreateAcls, DescribeAcls,
DeleteAcls, to any broker).

Resources are chosen with ``--topic T``, ``--group G``, ``--transactional-id ID``,
``--delegation-token ID`` (a token's id; each may be repeated; ``*`` is every one) and
``--cluster``, and ``--resource-pattern-type``: ``literal`` (the default: the name itself),
``prefixed`` (every name starting with it), and for ``list`` and ``remove`` also ``match`` (every
ACL that applies to the name: its own, the ``*`` wildcard and the prefixes it starts with) and
``any`` (LITERAL or PREFIXED, this exact name).

- ``list [RESOURCES] [--principal P ...]``: the ACLs of those resources (every ACL without any).
- ``add (--allow-principal P | --deny-principal P) ... --operation OP ... RESOURCES``: an ACL per
  principal, host (``--allow-host``/``--deny-host``, default ``*``) and operation on each resource,
  printed. Operations: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction,
  DescribeConfigs, AlterConfigs, IdempotentWrite, in any case, with or without ``-``/``_`` between
  the words; each resource type takes Kafka's own set of them (a topic no IdempotentWrite, a
  delegation token only Describe and All, ...).
  ``--producer`` stands for WRITE, DESCRIBE and CREATE on each ``--topic`` and WRITE, DESCRIBE on
  each ``--transactional-id`` (with ``--idempotent``, IDEMPOTENT_WRITE on the cluster);
  ``--consumer`` for READ, DESCRIBE on each ``--topic`` and READ on each ``--group`` (both as
  Kafka 2.7's AclCommand expands them; neither takes ``--operation``, ``--deny-*`` nor
  ``--delegation-token``).
- ``remove RESOURCES [principals, hosts, operations as for add]``: removes the ACLs that match,
  and prints them. A principal, host or operation not given matches every one (unlike
  kafka-acls.sh, where the host defaults to ``*`` and the operation to All). Without a principal
  everything on the resources (of the operations given) goes: that asks for confirmation on a
  terminal, and needs ``--force`` otherwise (exit 2 without it, before anything is asked of the
  cluster).

Exit codes as for every command (:mod:`kafkactl.errors`), and: a broker without an authorizer
(SECURITY_DISABLED) or a principal without DESCRIBE/ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED) is exit 1; a bad operation, principal, pattern type or combination
of options, or a binding the broker will not store (INVALID_REQUEST), exit 2.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator, List, Optional

import typer

from broker.client import AclBinding, AclBindingFilter, AclOperation, AclPermission, PatternType, ResourceType
from broker.client import errors
from kafkactl._common import admin_client, output_format
from kafkactl.errors import EXIT_PROBLEM, EXIT_USAGE, CliError
from kafkactl.output import OutputFormat, emit, render_table

app = typer.Typer(help="List, add and remove ACLs (the brokers' ACL authorizer).", no_args_is_help=True)

CLUSTER_NAME = "kafka-cluster"
COLUMNS = ["resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type"]

#: Kafka's spellings of the operations a user may name (AclOperation's names without ANY, UNKNOWN).
OPERATION_NAMES = {AclOperation.ALL: "All", AclOperation.READ: "Read", AclOperation.WRITE: "Write",
                   AclOperation.CREATE: "Create", AclOperation.DELETE: "Delete", AclOperation.ALTER: "Alter",
                   AclOperation.DESCRIBE: "Describe", AclOperation.CLUSTER_ACTION: "ClusterAction",
                   AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs", AclOperation.ALTER_CONFIGS: "AlterConfigs",
                   AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite"}
_OPERATIONS_BY_KEY = {name.lower(): op for op, name in OPERATION_NAMES.items()}

#: What each resource type takes besides All (Kafka 2.7's AclEntry.supportedOperations).
SUPPORTED = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
}

#: --producer and --consumer (Kafka 2.7's AclCommand).
PRODUCER_TOPIC = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
PRODUCER_TRANSACTIONAL_ID = (AclOperation.WRITE, AclOperation.DESCRIBE)
CONSUMER_TOPIC = (AclOperation.READ, AclOperation.DESCRIBE)
CONSUMER_GROUP = (AclOperation.READ,)

NO_AUTHORIZER = ("no authorizer is configured on the broker (SECURITY_DISABLED, 54): ACLs need "
                 "authorizer.class.name=kafka.security.authorizer.AclAuthorizer on every broker")


# -- option values ----------------------------------------------------------------------------

def _operations(values: Optional[List[str]]) -> List[AclOperation]:
    out = []
    for value in values or ():
        op = _OPERATIONS_BY_KEY.get(value.strip().replace("-", "").replace("_", "").lower())
        if op is None:
            raise typer.BadParameter(f"unknown operation {value!r} (one of {', '.join(OPERATION_NAMES.values())}; "
                                     "any case, '-' or '_' between words)")
        if op not in out:
            out.append(op)
    return out


def _principals(values: Optional[List[str]]) -> List[str]:
    out = []
    for value in values or ():
        kind, colon, name = value.strip().partition(":")
        if not colon or not kind or not name:
            raise typer.BadParameter(f"{value!r} is not a principal: expected TYPE:NAME, e.g. User:alice or User:*")
        if value.strip() not in out:
            out.append(value.strip())
    return out


def _hosts(values: Optional[List[str]]) -> List[str]:
    out = []
    for value in values or ():
        if not value.strip():
            raise typer.BadParameter("the host is empty ('*' is every host)")
        if value.strip() not in out:
            out.append(value.strip())
    return out


def _pattern_type(value: Optional[str], choices: tuple[str, ...]) -> Optional[PatternType]:
    if value is None:
        return None
    if value.strip().lower() not in choices:
        raise typer.BadParameter(f"must be {' or '.join(choices)}, not {value!r}")
    return PatternType[value.strip().upper()]


def _filter_pattern(value: Optional[str]) -> Optional[PatternType]:
    return _pattern_type(value, ("literal", "prefixed", "match", "any"))


def _specific_pattern(value: Optional[str]) -> Optional[PatternType]:
    return _pattern_type(value, ("literal", "prefixed"))


TOPIC = typer.Option(None, "--topic", metavar="TOPIC", help="A topic ('*': every topic); may be repeated.")
GROUP = typer.Option(None, "--group", metavar="GROUP", help="A consumer group ('*': every group); may be repeated.")
CLUSTER = typer.Option(False, "--cluster", help="The cluster (kafka-cluster).")
TRANSACTIONAL_ID = typer.Option(None, "--transactional-id", metavar="ID",
                                help="A transactional id ('*': every one); may be repeated.")
DELEGATION_TOKEN = typer.Option(None, "--delegation-token", metavar="ID",
                                help="A delegation token, by its token id ('*': every one); may be repeated.")
OPERATION = typer.Option(None, "--operation", metavar="OPERATION", callback=_operations,
                         help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                              "AlterConfigs, IdempotentWrite or All (any case); may be repeated.")
ALLOW_PRINCIPAL = typer.Option(None, "--allow-principal", metavar="TYPE:NAME", callback=_principals,
                               help="Allow this principal (User:alice, User:* for everyone); may be repeated.")
DENY_PRINCIPAL = typer.Option(None, "--deny-principal", metavar="TYPE:NAME", callback=_principals,
                              help="Deny this principal; may be repeated. DENY wins over ALLOW.")
ALLOW_HOST = typer.Option(None, "--allow-host", metavar="HOST", callback=_hosts,
                          help="Only from this host (IP address) for --allow-principal; may be repeated.")
DENY_HOST = typer.Option(None, "--deny-host", metavar="HOST", callback=_hosts,
                         help="Only from this host for --deny-principal; may be repeated.")
PRODUCER = typer.Option(False, "--producer", help="A producer's ACLs: WRITE, DESCRIBE, CREATE on each --topic; "
                                                 "WRITE, DESCRIBE on each --transactional-id.")
IDEMPOTENT = typer.Option(False, "--idempotent", help="With --producer: IDEMPOTENT_WRITE on the cluster too.")
CONSUMER = typer.Option(False, "--consumer", help="A consumer's ACLs: READ, DESCRIBE on each --topic, READ on "
                                                 "each --group.")


# -- building bindings and filters ------------------------------------------------------------

def _resources(topics, groups, cluster: bool, transactional_ids, delegation_tokens,
               pattern: PatternType) -> list[tuple]:
    """(type, name, pattern) of each resource named; the cluster's pattern is LITERAL for a specific pattern."""
    if cluster and pattern == PatternType.PREFIXED:
        raise CliError("--cluster takes no --resource-pattern-type prefixed: the cluster has one name, "
                       f"{CLUSTER_NAME}")
    out = []
    for rtype, names in ((ResourceType.TOPIC, topics), (ResourceType.GROUP, groups),
                         (ResourceType.TRANSACTIONAL_ID, transactional_ids),
                         (ResourceType.DELEGATION_TOKEN, delegation_tokens)):
        for name in names or ():
            if not name.strip():
                raise CliError(f"an empty {rtype.name.lower().replace('_', '-')} name")
            if (rtype, name.strip(), pattern) not in out:
                out.append((rtype, name.strip(), pattern))
    if cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, pattern))
    return out


def _check_roles(producer: bool, consumer: bool, idempotent: bool, operations, deny_principals, deny_hosts,
                 topics, groups, cluster: bool, transactional_ids, delegation_tokens) -> None:
    """Kafka's rules for --producer, --consumer and --idempotent (and ours: nothing named is left unused)."""
    if idempotent and not producer:
        raise CliError("--idempotent goes with --producer")
    if not (producer or consumer):
        return
    role = "--producer" if producer and not consumer else "--consumer" if consumer and not producer else \
        "--producer and --consumer"
    if operations:
        raise CliError(f"{role} sets the operations itself: give no --operation")
    if deny_principals or deny_hosts:
        raise CliError(f"{role} makes ALLOW ACLs: give --allow-principal, no --deny-principal or --deny-host")
    if delegation_tokens:
        raise CliError(f"{role} takes no --delegation-token (give --operation Describe or All)")
    if not topics:
        raise CliError(f"{role} needs a --topic")
    if consumer and not groups:
        raise CliError("--consumer needs a --group")
    if not producer and (cluster or transactional_ids):
        raise CliError("--consumer takes no --cluster or --transactional-id (those are --producer's)")
    if producer and not consumer and groups:
        raise CliError("--producer takes no --group (a group is --consumer's)")
    if cluster:
        raise CliError(f"{role} takes no --cluster (--idempotent gives IDEMPOTENT_WRITE on the cluster)")


def _role_operations(resources: list[tuple], producer: bool, consumer: bool, idempotent: bool,
                     operations: list[AclOperation]) -> list[tuple[tuple, list[AclOperation]]]:
    """Each resource with the operations to grant or match on it."""
    if not (producer or consumer):
        return [(r, list(operations or ())) for r in resources]
    out = []
    for resource in resources:
        ops: list[AclOperation] = []
        rtype = resource[0]
        if producer and rtype == ResourceType.TOPIC:
            ops += PRODUCER_TOPIC
        if producer and rtype == ResourceType.TRANSACTIONAL_ID:
            ops += PRODUCER_TRANSACTIONAL_ID
        if consumer and rtype == ResourceType.TOPIC:
            ops += [op for op in CONSUMER_TOPIC if op not in ops]
        if consumer and rtype == ResourceType.GROUP:
            ops += CONSUMER_GROUP
        if ops:
            out.append((resource, ops))
    if idempotent:
        out.append(((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL), [AclOperation.IDEMPOTENT_WRITE]))
    return out


def _check_operations(planned: list[tuple[tuple, list[AclOperation]]]) -> None:
    for (rtype, _name, _pattern), ops in planned:
        allowed = SUPPORTED[rtype]
        wrong = [op for op in ops if op != AclOperation.ALL and op not in allowed]
        if wrong:
            raise CliError(f"a {rtype.name} ACL takes no {', '.join(OPERATION_NAMES[op] for op in wrong)} "
                           f"(it takes {', '.join(OPERATION_NAMES[op] for op in (AclOperation.ALL, *allowed))})")


def _entries(allow_principals, allow_hosts, deny_principals, deny_hosts, *, hosts_default: Optional[str]):
    """(principal, host, permission) of each entry: ALLOW for --allow-principal x --allow-host, DENY likewise.
    ``hosts_default``: the host when none is given ('*' to add, None to match every host when removing)."""
    if allow_hosts and not allow_principals:
        raise CliError("--allow-host goes with --allow-principal")
    if deny_hosts and not deny_principals:
        raise CliError("--deny-host goes with --deny-principal")
    out = []
    for principals, hosts, permission in ((allow_principals, allow_hosts, AclPermission.ALLOW),
                                          (deny_principals, deny_hosts, AclPermission.DENY)):
        for principal in principals or ():
            for host in (hosts or [hosts_default]):
                out.append((principal, host, permission))
    return out


def _row(b: AclBinding) -> dict:
    return {"resource_type": b.resource_type.name, "resource_name": b.name, "pattern_type": b.pattern_type.name,
            "principal": b.principal, "host": b.host, "operation": b.operation.name,
            "permission_type": b.permission_type.name}


def _key(b: AclBinding) -> tuple:
    return (b.resource_type, b.pattern_type, b.name, b.principal, b.host, b.operation, b.permission_type)


def _emit(ctx: typer.Context, bindings, empty: str) -> None:
    rows = [_row(b) for b in sorted(set(bindings), key=_key)]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print(empty)
        return
    emit(rows, fmt, COLUMNS)


@contextlib.contextmanager
def _acl_errors() -> Iterator[None]:
    """The ACL APIs' answers that mean something particular here (others: as for every command)."""
    try:
        yield
    except errors.BrokerResponseError as exc:
        if exc.error_name == "SECURITY_DISABLED":
            raise CliError(NO_AUTHORIZER, EXIT_PROBLEM) from exc
        if exc.error_name == "INVALID_REQUEST":
            raise CliError(str(exc), EXIT_USAGE) from exc
        raise


# -- commands ---------------------------------------------------------------------------------

@app.command("list")
def list_acls(
    ctx: typer.Context,
    topics: Optional[List[str]] = TOPIC,
    groups: Optional[List[str]] = GROUP,
    cluster: bool = CLUSTER,
    transactional_ids: Optional[List[str]] = TRANSACTIONAL_ID,
    delegation_tokens: Optional[List[str]] = DELEGATION_TOKEN,
    principals: Optional[List[str]] = typer.Option(None, "--principal", metavar="TYPE:NAME", callback=_principals,
                                                   help="Only the ACLs of this principal; may be repeated."),
    pattern_type: Optional[str] = typer.Option(None, "--resource-pattern-type", metavar="TYPE",
                                               callback=_filter_pattern,
                                               help="literal (the default with a resource), prefixed, match or "
                                                    "any."),
) -> None:
    """The ACLs of the resources named (every ACL without any): resource, principal, host, operation, permission."""
    if topics or groups or cluster or transactional_ids or delegation_tokens:
        resources = _resources(topics, groups, cluster, transactional_ids, delegation_tokens,
                               pattern_type or PatternType.LITERAL)
        filters = [AclBindingFilter(rtype, name, pattern, principal=p)
                   for rtype, name, pattern in resources for p in (principals or [None])]
    else:
        filters = [AclBindingFilter(pattern_type=pattern_type or PatternType.ANY, principal=p)
                   for p in (principals or [None])]
    found = []
    with admin_client(ctx) as admin, _acl_errors():
        for acl_filter in filters:
            found += admin.describe_acls(acl_filter)
    _emit(ctx, found, "no ACLs")


@app.command("add")
def add_acls(
    ctx: typer.Context,
    allow_principals: Optional[List[str]] = ALLOW_PRINCIPAL,
    deny_principals: Optional[List[str]] = DENY_PRINCIPAL,
    allow_hosts: Optional[List[str]] = ALLOW_HOST,
    deny_hosts: Optional[List[str]] = DENY_HOST,
    operations: Optional[List[str]] = OPERATION,
    topics: Optional[List[str]] = TOPIC,
    groups: Optional[List[str]] = GROUP,
    cluster: bool = CLUSTER,
    transactional_ids: Optional[List[str]] = TRANSACTIONAL_ID,
    delegation_tokens: Optional[List[str]] = DELEGATION_TOKEN,
    pattern_type: Optional[str] = typer.Option(None, "--resource-pattern-type", metavar="TYPE",
                                               callback=_specific_pattern,
                                               help="literal (the default) or prefixed."),
    producer: bool = PRODUCER,
    idempotent: bool = IDEMPOTENT,
    consumer: bool = CONSUMER,
) -> None:
    """Add ACLs: each principal, host and operation on each resource; prints them."""
    _check_roles(producer, consumer, idempotent, operations, deny_principals, deny_hosts, topics, groups, cluster,
                 transactional_ids, delegation_tokens)
    resources = _resources(topics, groups, cluster, transactional_ids, delegation_tokens,
                           pattern_type or PatternType.LITERAL)
    if not resources:
        raise CliError("give a resource: --topic, --group, --cluster, --transactional-id or --delegation-token")
    if not (allow_principals or deny_principals):
        raise CliError("give a principal: --allow-principal or --deny-principal (TYPE:NAME, e.g. User:alice)")
    if not (operations or producer or consumer):
        raise CliError("give an --operation (or --producer / --consumer)")
    planned = _role_operations(resources, producer, consumer, idempotent, operations)
    _check_operations(planned)
    entries = _entries(allow_principals, allow_hosts, deny_principals, deny_hosts, hosts_default="*")
    bindings = [AclBinding(rtype, name, pattern, principal, host, op, permission)
                for (rtype, name, pattern), ops in planned for principal, host, permission in entries for op in ops]
    with admin_client(ctx) as admin, _acl_errors():
        admin.create_acls(bindings)
    if output_format(ctx) is OutputFormat.table:
        print(f"added {len(set(bindings))} ACL(s):", file=sys.stderr)
    _emit(ctx, bindings, "no ACLs")


@app.command("remove")
def remove_acls(
    ctx: typer.Context,
    allow_principals: Optional[List[str]] = ALLOW_PRINCIPAL,
    deny_principals: Optional[List[str]] = DENY_PRINCIPAL,
    allow_hosts: Optional[List[str]] = ALLOW_HOST,
    deny_hosts: Optional[List[str]] = DENY_HOST,
    operations: Optional[List[str]] = OPERATION,
    topics: Optional[List[str]] = TOPIC,
    groups: Optional[List[str]] = GROUP,
    cluster: bool = CLUSTER,
    transactional_ids: Optional[List[str]] = TRANSACTIONAL_ID,
    delegation_tokens: Optional[List[str]] = DELEGATION_TOKEN,
    pattern_type: Optional[str] = typer.Option(None, "--resource-pattern-type", metavar="TYPE",
                                               callback=_filter_pattern,
                                               help="literal (the default), prefixed, match (every ACL that "
                                                    "applies to the name: careful) or any."),
    producer: bool = PRODUCER,
    idempotent: bool = IDEMPOTENT,
    consumer: bool = CONSUMER,
    force: bool = typer.Option(False, "--force", help="Remove everything on the resources without asking."),
) -> None:
    """Remove the ACLs that match (a principal, host or operation not given matches every one); prints them."""
    _check_roles(producer, consumer, idempotent, operations, deny_principals, deny_hosts, topics, groups, cluster,
                 transactional_ids, delegation_tokens)
    resources = _resources(topics, groups, cluster, transactional_ids, delegation_tokens,
                           pattern_type or PatternType.LITERAL)
    if not resources:
        raise CliError("give a resource: --topic, --group, --cluster, --transactional-id or --delegation-token")
    everyone = not (allow_principals or deny_principals)
    if everyone and (producer or consumer):
        raise CliError("--producer and --consumer remove the ACLs of an --allow-principal: give one")
    planned = _role_operations(resources, producer, consumer, idempotent, operations)
    if operations:
        _check_operations(planned)
    entries = ([(None, None, AclPermission.ANY)] if everyone else
               _entries(allow_principals, allow_hosts, deny_principals, deny_hosts, hosts_default=None))
    filters = [AclBindingFilter(rtype, name, pattern, principal, host, op, permission)
               for (rtype, name, pattern), ops in planned for principal, host, permission in entries
               for op in (ops or [AclOperation.ANY])]
    interactive = sys.stdin.isatty()
    if everyone and not force and not interactive:
        raise CliError("removing every principal's ACLs of a resource needs --force (standard input is not a "
                       "terminal to ask on)")
    with admin_client(ctx) as admin, _acl_errors():
        if everyone and not force:
            matching = sorted({b for f in filters for b in admin.describe_acls(f)}, key=_key)
            if not matching:
                _emit(ctx, [], "no matching ACLs: nothing removed")
                return
            print(render_table([_row(b) for b in matching], COLUMNS), file=sys.stderr)
            if not typer.confirm(f"Remove these {len(matching)} ACL(s)?", default=False, err=True):
                raise CliError("nothing removed", EXIT_PROBLEM)
            filters = [b.to_filter() for b in matching]  # exactly what was confirmed
        removed = [b for deleted in admin.delete_acls(filters) for b in deleted]
    if output_format(ctx) is OutputFormat.table and removed:
        print(f"removed {len(set(removed))} ACL(s):", file=sys.stderr)
    _emit(ctx, removed, "no matching ACLs: nothing removed")
