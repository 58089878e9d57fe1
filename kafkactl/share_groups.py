"""``kafkactl share-groups``: the share groups (KIP-932) of a cluster, as kafka-share-groups.sh shows them.

- ``list``: every share group the brokers coordinate, with its state.
- ``describe GROUP``: the group's state, epoch and coordinator; one row per member (client id, host, epoch,
  assigned partitions); and one row per partition the group has consumed: its start offset (every record
  below it is acknowledged or archived for the group) and lag (records from there to the high watermark not
  yet acknowledged; ``-`` where the coordinator cannot tell). An unknown group is bad input
  (GROUP_ID_NOT_FOUND, exit 2).
"""

from __future__ import annotations

import typer

from broker.client import errors
from kafkactl._common import admin_client, output_format
from kafkactl.errors import CliError

GROUP_ID_NOT_FOUND = 69
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="List and describe share groups (KIP-932).", no_args_is_help=True)


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
