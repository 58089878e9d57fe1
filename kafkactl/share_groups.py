"""``kafkactl share-groups``: the share groups (KIP-932) of a cluster, as kafka-share-groups.sh shows and changes
them.

- ``list``: every share group the brokers coordinate, with its state.
- ``describe GROUP``: the group's state, epoch and coordinator; one row per member (client id, host, epoch,
  assigned partitions); and one row per partition the group has consumed: its start offset (every record
  below it is acknowledged or archived for the group) and lag (records from there to the high watermark not
  yet acknowledged; ``-`` where the coordinator cannot tell). An unknown group is bad input
  (GROUP_ID_NOT_FOUND, exit 2).
- ``reset-offsets GROUP``: new start offsets for ``--topic T`` (every partition), ``--topic T:0,2``
  (repeatable) or ``--all-topics`` (the partitions the group has consumed), with exactly one of
  ``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--to-datetime DT``, ``--shift-by N``,
  ``--by-duration PnDTnHnMnS``, clamped to [log start, log end]. Prints the plan and changes nothing unless
  ``--execute`` (AlterShareGroupOffsets; a group that does not exist yet is made, so a new group can start
  anywhere). Refused (exit 1) while the group has members. Records in flight at the old position are
  forgotten: the group's next fetch starts at the new offset.
- ``delete-offsets GROUP --topic T``: forget what the group consumed of those topics (repeatable); their
  partitions start again at the group's ``share.auto.offset.reset``. Refused (exit 1) while the group has
  members; a topic the group has consumed nothing of is bad input (exit 2).
- ``delete GROUP...``: delete share groups with no members, with what they consumed (refused, exit 1,
  while they have members).
"""

from __future__ import annotations

from typing import List, Optional

import typer

from broker.client import errors
from kafkactl._common import admin_client, exit_code_for, output_format, tp_key
from kafkactl.errors import EXIT_PROBLEM, CliError
from kafkactl.groups import (BY_DURATION, EXECUTE, SHIFT_BY, TO_DATETIME, TO_EARLIEST, TO_LATEST, TO_OFFSET,
                             emit_plan, plan_offsets, planned, reset_strategy, topic_partitions)
from kafkactl.output import OutputFormat, emit

GROUP_ID_NOT_FOUND = 69

app = typer.Typer(help="List, describe and delete share groups (KIP-932); reset and delete their offsets.",
                  no_args_is_help=True)


def _describe_or_none(admin, group: str):
    """The group as ShareGroupDescribe answers it, or None when it does not exist."""
    try:
        return admin.describe_share_group(group)
    except errors.BrokerResponseError as exc:
        if exc.error_code != GROUP_ID_NOT_FOUND:
            raise
        return None


def _require_empty(described, group: str) -> None:
    if described is not None and described["members"]:
        raise CliError(f"share group {group} is not empty (state {described['group_state']}, "
                       f"{len(described['members'])} member(s)); its offsets can only be changed while it has no "
                       "members: stop its consumers first", EXIT_PROBLEM)


@app.command("list")
def list_share_groups(ctx: typer.Context) -> None:
    """Every share group the brokers coordinate, with its state."""
    with admin_client(ctx) as admin:
        groups = [g for g in admin.list_groups() if g.protocol_type == "share"]
    rows = [{"group_id": g.group_id, "state": g.state} for g in groups]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print("no share groups")
        return
    emit(rows, fmt, ["group_id", "state"])


@app.command()
def describe(ctx: typer.Context, group: str = typer.Argument(..., help="The share group.")) -> None:
    """State, members and what the group has consumed of each partition."""
    with admin_client(ctx) as admin:
        try:
            described = admin.describe_share_group(group)
        except errors.BrokerResponseError as exc:
            if exc.error_code != GROUP_ID_NOT_FOUND:
                raise
            raise CliError(f"share group {group} does not exist (GROUP_ID_NOT_FOUND, 69)") from exc
        offsets = admin.share_group_offsets(group)
    members = [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["client_host"],
                "member_epoch": m["member_epoch"],
                "partitions": ",".join(f"{t['topic_name']}-{p}" for t in m["assignment"]["topic_partitions"]
                                       for p in t["partitions"])}
               for m in described["members"]]
    partitions = [{"topic": tp.topic, "partition": tp.partition, "start_offset": start,
                   "lag": lag if lag >= 0 else None}
                  for tp, (start, lag) in sorted(offsets.items(), key=lambda i: (i[0].topic, i[0].partition))]
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit([{"group_id": group, "state": described["group_state"], "group_epoch": described["group_epoch"],
               "coordinator": described["coordinator"], "members": members, "partitions": partitions}], fmt)
        return
    print(f"group {group}: {described['group_state']}, epoch {described['group_epoch']}, "
          f"coordinator {described['coordinator']}, {len(members)} member(s)")
    if members:
        emit(members, fmt, ["member_id", "client_id", "host", "member_epoch", "partitions"])
    if partitions:
        emit(partitions, fmt, ["topic", "partition", "start_offset", "lag"])


@app.command("reset-offsets")
def reset_offsets(
    ctx: typer.Context,
    group_id: str = typer.Argument(..., help="Share group whose start offsets to change."),
    topic: Optional[List[str]] = typer.Option(None, "--topic", help="TOPIC or TOPIC:P[,P...] (repeatable)."),
    all_topics: bool = typer.Option(False, "--all-topics", help="Every partition the group has consumed."),
    to_earliest: bool = TO_EARLIEST,
    to_latest: bool = TO_LATEST,
    to_offset: Optional[int] = TO_OFFSET,
    to_datetime: Optional[str] = TO_DATETIME,
    shift_by: Optional[int] = SHIFT_BY,
    by_duration: Optional[str] = BY_DURATION,
    execute: bool = EXECUTE,
) -> None:
    """Plan (and with --execute apply) new start offsets for a share group with no members."""
    strategy, value = reset_strategy(to_earliest, to_latest, to_offset, to_datetime, shift_by, by_duration,
                                     topic, all_topics)
    with admin_client(ctx) as admin:
        described = _describe_or_none(admin, group_id)
        _require_empty(described, group_id)
        current = ({tp: start for tp, (start, _lag) in admin.share_group_offsets(group_id).items() if start >= 0}
                   if described is not None else {})
        if all_topics:
            tps = sorted(current, key=tp_key)
            if not tps:
                raise CliError(f"share group {group_id} has consumed nothing; name the topics with --topic")
        else:
            tps = topic_partitions(admin, list(topic or ()))
        plan = plan_offsets(admin, group_id, tps, strategy, value, current, "start offset")
        if execute:
            admin.alter_share_group_offsets(group_id, planned(plan))
    emit_plan(ctx, group_id, plan, execute)


@app.command("delete-offsets")
def delete_offsets(
    ctx: typer.Context,
    group_id: str = typer.Argument(..., help="Share group whose offsets to delete."),
    topic: List[str] = typer.Option(..., "--topic", help="A topic (repeatable): all its partitions."),
) -> None:
    """Forget what a share group with no members consumed of these topics."""
    with admin_client(ctx) as admin:
        described = _describe_or_none(admin, group_id)
        _require_empty(described, group_id)
        try:
            results = admin.delete_share_group_offsets(group_id, topic)
        except errors.BrokerResponseError as exc:
            if exc.error_code != GROUP_ID_NOT_FOUND:
                raise
            raise CliError(f"share group {group_id} does not exist (GROUP_ID_NOT_FOUND, 69)") from exc
    rows = [{"group": group_id, "topic": t, "status": "deleted" if error is None else f"error: {error}"}
            for t, error in sorted(results.items())]
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"group": group_id, "topics": rows}, fmt)
    else:
        emit(rows, fmt, ["group", "topic", "status"])
    failed = [(t, e) for t, e in sorted(results.items()) if e is not None]
    if failed:
        topic_name, error = failed[0]
        if error.error_name == "UNKNOWN_TOPIC_OR_PARTITION":  # no such topic, or nothing consumed of it
            raise CliError(f"share group {group_id} has no offsets of topic {topic_name} "
                           "(UNKNOWN_TOPIC_OR_PARTITION, 3)")
        raise CliError(str(error), exit_code_for(error))


@app.command()
def delete(
    ctx: typer.Context,
    groups: List[str] = typer.Argument(..., help="Share group ids (each must have no members)."),
) -> None:
    """Delete share groups and what they consumed."""
    with admin_client(ctx) as admin:
        for group in groups:
            if _describe_or_none(admin, group) is None:  # also a group of another type: never deleted here
                raise CliError(f"share group {group} does not exist (GROUP_ID_NOT_FOUND, 69)")
        admin.delete_groups(groups)
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"deleted": list(groups)}, fmt)
    else:
        for g in groups:
            print(f"deleted share group {g}")
