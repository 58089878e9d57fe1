"""``kafkactl groups``: list, describe, delete consumer groups and reset their offsets.

Groups of both rebalance protocols: ``classic`` ones (JoinGroup/SyncGroup, and groups that only commit
offsets) and ``consumer`` ones (KIP-848, ``group.protocol=consumer``), as Kafka 4.x's
``kafka-consumer-groups.sh`` shows them.

- ``list [--type classic|consumer|share]``: group id, protocol type, state and group type of every group on
  every broker (a consumer group's states: Empty, Assigning, Reconciling, Stable); ``--type`` (repeatable,
  or comma-separated) keeps the groups of those types.
- ``describe GROUP... [--members]``: state, protocol (a consumer group's server assignor), coordinator and
  members; one row per partition the group has a committed offset for or a member is assigned:
  committed offset (``current_offset``), ``log_end_offset`` (the high
  watermark) and ``lag`` (end minus committed; ``-`` without a commit), and
  the member that owns it. A consumer group also shows its group and assignment epochs, and each member its
  epoch and target assignment (``--members``). An unknown group is bad input (GROUP_ID_NOT_FOUND, exit 2).
- ``delete GROUP...``: only groups with no members (the broker answers
  NON_EMPTY_GROUP otherwise: refused, exit 1).
- ``delete-offsets GROUP --topic T[:P,...]``: the group's committed offsets of those partitions (Kafka's
  ``--delete-offsets``); refused (exit 1) for topics the group's members subscribe to
  (GROUP_SUBSCRIBED_TO_TOPIC), and for a classic group with members (NON_EMPTY_GROUP).
- ``reset-offsets GROUP``: computes new committed offsets for ``--topic T``
  (every partition) or ``--topic T:0,2`` (repeatable), or ``--all-topics`` (the
  topics the group has committed offsets for), with exactly one of
  ``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--to-datetime DT``,
  ``--shift-by N``, ``--by-duration PnDTnHnMnS``. New offsets are clamped to
  [log start offset, log end offset], as Kafka's tool does. Prints the plan and
  changes nothing unless ``--execute``. Refused (exit 1) while the group has
  members: the members would overwrite the offsets with their own commits.
"""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from broker.client import GROUP_TYPES, Admin, TopicPartition
from kafkactl._common import (admin_client, now_ms, output_format, parse_datetime_ms, parse_duration_ms,
                              parse_topic_partitions, require_topics, tp_key)
from kafkactl.errors import EXIT_PROBLEM, CliError
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="List, describe and delete consumer groups; reset their offsets.", no_args_is_help=True)

INACTIVE_STATES = ("Empty", "Dead")


def _group_types(values: list[str]) -> list[str]:
    """``--type`` values (repeatable, comma-separated, any case) checked against the group types."""
    types = [t.strip().lower() for v in values for t in v.split(",") if t.strip()]
    unknown = [t for t in types if t not in GROUP_TYPES]
    if unknown or not types:
        raise CliError(f"unknown group type {', '.join(unknown) or repr('')} (one of {', '.join(GROUP_TYPES)})")
    return types


@app.command("list")
def list_groups(
    ctx: typer.Context,
    types: Optional[List[str]] = typer.Option(None, "--type", metavar="TYPE",
                                              help="Only groups of this type: classic, consumer or share "
                                                   "(repeatable, or comma-separated)."),
) -> None:
    """Every group the brokers know, with its protocol type, state and group type."""
    wanted = _group_types(types) if types else None
    with admin_client(ctx) as admin:
        groups = admin.list_groups(types=wanted)
    rows = [{"group_id": g.group_id, "protocol_type": g.protocol_type, "state": g.state, "type": g.group_type}
            for g in groups]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print("no groups")
        return
    emit(rows, fmt, ["group_id", "protocol_type", "state", "type"])


def _partition_list(tps) -> list[dict]:
    return [{"topic": tp[0], "partition": tp[1]} for tp in sorted(tps, key=tuple)]


def describe_group(admin: Admin, group_id: str) -> dict:
    """The data ``groups describe`` shows for one group (see the module docstring)."""
    desc = admin.describe_groups([group_id])[group_id]
    committed = admin.list_group_offsets(group_id)
    if desc.state == "Dead" and not committed:
        raise CliError(f"group {group_id} does not exist (GROUP_ID_NOT_FOUND, 69)")
    owner = {}
    for m in desc.members:
        for tp in m.assignment:
            owner[TopicPartition(*tp)] = m
    tps = sorted(set(committed) | set(owner), key=tp_key)
    ends = {tp: off for tp, (off, _) in admin.list_offsets({tp: -1 for tp in tps}).items()} if tps else {}
    offsets = []
    for tp in tps:
        current = committed[tp].offset if tp in committed else None
        end = ends.get(tp)
        m = owner.get(tp)
        offsets.append({
            "topic": tp.topic, "partition": tp.partition, "current_offset": current, "log_end_offset": end,
            "lag": None if current is None or end is None else max(end - current, 0),
            "member_id": m.member_id if m else None, "client_id": m.client_id if m else None,
            "host": m.client_host if m else None,
        })
    consumer = desc.group_type == "consumer"
    return {
        "group_id": group_id, "state": desc.state, "type": desc.group_type or None,
        "protocol_type": desc.protocol_type, "protocol": desc.protocol, "coordinator": desc.coordinator,
        "group_epoch": desc.group_epoch if consumer else None,
        "assignment_epoch": desc.assignment_epoch if consumer else None,
        "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                     "group_instance_id": m.group_instance_id,
                     "member_epoch": m.member_epoch if consumer else None,
                     "assignment": _partition_list(m.assignment),
                     "target_assignment": _partition_list(m.target_assignment or []) if consumer else None}
                    for m in desc.members],
        "offsets": offsets,
        "total_lag": sum(o["lag"] or 0 for o in offsets),
    }


def _header(g: dict) -> str:
    """The first line of a group in ``describe``'s table; a consumer group's names its type and epochs."""
    if g["type"] != "consumer":
        return (f"group {g['group_id']}: state {g['state']}, protocol {g['protocol'] or '-'}, "
                f"coordinator {g['coordinator']}, {len(g['members'])} member(s), total lag {g['total_lag']}")
    return (f"group {g['group_id']}: state {g['state']}, type consumer, assignor {g['protocol'] or '-'}, "
            f"group epoch {g['group_epoch']}, assignment epoch {g['assignment_epoch']}, "
            f"coordinator {g['coordinator']}, {len(g['members'])} member(s), total lag {g['total_lag']}")


def _partition_names(parts: list[dict] | None) -> list[str] | None:
    return None if parts is None else [f"{a['topic']}-{a['partition']}" for a in parts]


@app.command()
def describe(
    ctx: typer.Context,
    groups: List[str] = typer.Argument(..., help="Group ids."),
    members: bool = typer.Option(False, "--members", help="Also list members and their assignments."),
) -> None:
    """Members, assignment, committed offset, end offset and lag of each group."""
    with admin_client(ctx) as admin:
        data = [describe_group(admin, g) for g in groups]
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit(data, fmt)
        return
    for i, g in enumerate(data):
        if i:
            print()
        print(_header(g))
        rows = [{"group": g["group_id"], **o} for o in g["offsets"]]
        if rows:
            emit(rows, fmt, ["group", "topic", "partition", "current_offset", "log_end_offset", "lag",
                             "member_id", "host", "client_id"])
        if members and g["members"]:
            print()
            columns = ["member_id", "client_id", "host", "assignment"]
            if g["type"] == "consumer":  # as kafka-consumer-groups.sh --members --verbose shows them
                columns = ["member_id", "client_id", "host", "member_epoch", "assignment", "target_assignment"]
            emit([{**m, "assignment": _partition_names(m["assignment"]),
                   "target_assignment": _partition_names(m["target_assignment"])}
                  for m in g["members"]], fmt, columns)


@app.command()
def delete(
    ctx: typer.Context,
    groups: List[str] = typer.Argument(..., help="Group ids (each must have no members)."),
) -> None:
    """Delete groups and their committed offsets."""
    with admin_client(ctx) as admin:
        admin.delete_groups(groups)
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"deleted": list(groups)}, fmt)
    else:
        for g in groups:
            print(f"deleted group {g}")


@app.command("delete-offsets")
def delete_offsets(
    ctx: typer.Context,
    group_id: str = typer.Argument(..., help="Group whose committed offsets to delete."),
    topic: List[str] = typer.Option(..., "--topic", help="TOPIC (every partition) or TOPIC:P[,P...] (repeatable)."),
) -> None:
    """Delete committed offsets of a group (not of topics its members consume)."""
    with admin_client(ctx) as admin:
        tps = _partitions(admin, group_id, list(topic), False)
        admin.delete_group_offsets(group_id, tps)
    rows = [{"group": group_id, "topic": tp.topic, "partition": tp.partition} for tp in tps]
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"group": group_id, "deleted": [{"topic": tp.topic, "partition": tp.partition} for tp in tps]}, fmt)
        return
    emit(rows, fmt, ["group", "topic", "partition"])


def _partitions(admin: Admin, group_id: str, topics: list[str], all_topics: bool) -> list[TopicPartition]:
    if all_topics:
        tps = sorted(admin.list_group_offsets(group_id), key=tp_key)
        if not tps:
            raise CliError(f"group {group_id} has no committed offsets; name the topics with --topic")
        return tps
    return topic_partitions(admin, topics)


def plan_offsets(admin: Admin, group_id: str, tps: list[TopicPartition], strategy: str, value,
                 current_offsets: dict[TopicPartition, int], what: str = "committed offset") -> list[dict]:
    """New offsets of ``tps`` by ``strategy`` (see :func:`reset_strategy`) from the group's ``current_offsets``
    (committed offsets; a share group's start offsets, ``what`` naming them in errors), clamped to [log start,
    log end] as Kafka's tools do:
    rows of group, topic, partition, current_offset and new_offset."""
    earliest = {tp: off for tp, (off, _) in admin.list_offsets({tp: -2 for tp in tps}).items()}
    latest = {tp: off for tp, (off, _) in admin.list_offsets({tp: -1 for tp in tps}).items()}
    by_time = {}
    if strategy in ("to_datetime", "by_duration"):
        ts = value if strategy == "to_datetime" else now_ms() - value
        by_time = {tp: off for tp, (off, _) in admin.list_offsets({tp: ts for tp in tps}).items()}
    plan = []
    for tp in tps:
        current = current_offsets.get(tp)
        if strategy == "to_earliest":
            new = earliest[tp]
        elif strategy == "to_latest":
            new = latest[tp]
        elif strategy == "to_offset":
            new = value
        elif strategy == "shift_by":
            if current is None:
                raise CliError(f"{tp.topic}-{tp.partition} has no {what} to shift in group {group_id}",
                               EXIT_PROBLEM)
            new = current + value
        else:  # a time: the first offset at or after it, or the end when every record is older
            new = by_time[tp] if by_time[tp] >= 0 else latest[tp]
        new = min(max(new, earliest[tp]), latest[tp])
        plan.append({"group": group_id, "topic": tp.topic, "partition": tp.partition,
                     "current_offset": current, "new_offset": new})
    return plan


# The options of ``reset-offsets`` that groups and share groups share (see :func:`reset_strategy`)
TO_EARLIEST = typer.Option(False, "--to-earliest", help="To the log start offset.")
TO_LATEST = typer.Option(False, "--to-latest", help="To the log end offset.")
TO_OFFSET = typer.Option(None, "--to-offset", min=0, help="To this offset.")
TO_DATETIME = typer.Option(None, "--to-datetime", help="To the first record at/after YYYY-MM-DDTHH:MM:SS[.sss][zone].")
SHIFT_BY = typer.Option(None, "--shift-by", help="Move the group's current offset by N (may be negative).")
BY_DURATION = typer.Option(None, "--by-duration", help="To the first record after now minus PnDTnHnMnS.")
EXECUTE = typer.Option(False, "--execute", help="Apply the plan (default: only print it).")


def reset_strategy(to_earliest: bool, to_latest: bool, to_offset: Optional[int], to_datetime: Optional[str],
                   shift_by: Optional[int], by_duration: Optional[str], topic, all_topics: bool) -> tuple[str, object]:
    """The one reset of ``reset-offsets`` (groups and share groups): (strategy, value), a time already in ms."""
    chosen = {name: v for name, v in (("to_earliest", to_earliest or None), ("to_latest", to_latest or None),
                                      ("to_offset", to_offset), ("to_datetime", to_datetime),
                                      ("shift_by", shift_by), ("by_duration", by_duration)) if v is not None}
    if len(chosen) != 1:
        raise CliError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                       "--shift-by, --by-duration")
    if bool(topic) == all_topics:
        raise CliError("give --topic (repeatable) or --all-topics")
    strategy, value = next(iter(chosen.items()))
    if strategy == "to_datetime":
        value = parse_datetime_ms(value)
    elif strategy == "by_duration":
        value = parse_duration_ms(value)
    return strategy, value


def planned(plan: list[dict]) -> dict[TopicPartition, int]:
    """The new offsets of a :func:`plan_offsets` plan, by partition."""
    return {TopicPartition(p["topic"], p["partition"]): p["new_offset"] for p in plan}


def emit_plan(ctx: typer.Context, group_id: str, plan: list[dict], executed: bool) -> None:
    """Print a reset plan: a table (and, for a dry run, a line on stderr saying so), or the whole as json/yaml."""
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"group": group_id, "executed": executed, "offsets": plan}, fmt)
        return
    emit(plan, fmt, ["group", "topic", "partition", "current_offset", "new_offset"])
    if not executed:
        print("dry run: nothing changed; add --execute to apply", file=sys.stderr)


def topic_partitions(admin: Admin, specs: list[str]) -> list[TopicPartition]:
    """``--topic T`` (every partition) or ``T:P[,P...]`` values as partitions, each checked to exist."""
    parsed = [parse_topic_partitions(t) for t in specs]
    meta = require_topics(admin, sorted({t for t, _ in parsed}))
    tps: set[TopicPartition] = set()
    for topic, parts in parsed:
        known = meta[topic].partitions
        for p in parts if parts is not None else sorted(known):
            if p not in known:
                raise CliError(f"topic {topic} has no partition {p} (it has {len(known)})")
            tps.add(TopicPartition(topic, p))
    return sorted(tps, key=tp_key)


@app.command("reset-offsets")
def reset_offsets(
    ctx: typer.Context,
    group_id: str = typer.Argument(..., help="Group whose committed offsets to change."),
    topic: Optional[List[str]] = typer.Option(None, "--topic", help="TOPIC or TOPIC:P[,P...] (repeatable)."),
    all_topics: bool = typer.Option(False, "--all-topics", help="Every topic the group has committed offsets for."),
    to_earliest: bool = TO_EARLIEST,
    to_latest: bool = TO_LATEST,
    to_offset: Optional[int] = TO_OFFSET,
    to_datetime: Optional[str] = TO_DATETIME,
    shift_by: Optional[int] = SHIFT_BY,
    by_duration: Optional[str] = BY_DURATION,
    execute: bool = EXECUTE,
) -> None:
    """Plan (and with --execute apply) new committed offsets for an inactive group."""
    strategy, value = reset_strategy(to_earliest, to_latest, to_offset, to_datetime, shift_by, by_duration,
                                     topic, all_topics)
    with admin_client(ctx) as admin:
        desc = admin.describe_groups([group_id])[group_id]
        if desc.state not in INACTIVE_STATES or desc.members:
            raise CliError(f"group {group_id} is active (state {desc.state}, {len(desc.members)} member(s)); "
                           "offsets can only be reset while it has no members: stop its consumers first",
                           EXIT_PROBLEM)
        tps = _partitions(admin, group_id, list(topic or ()), all_topics)
        committed = {tp: om.offset for tp, om in admin.list_group_offsets(group_id, tps).items()}
        plan = plan_offsets(admin, group_id, tps, strategy, value, committed)
        if execute:
            admin.alter_group_offsets(group_id, planned(plan))
    emit_plan(ctx, group_id, plan, execute)
