"""``kafkactl cluster describe``: cluster id, controller and brokers."""

from __future__ import annotations

import typer

from kafkactl._common import admin_client, output_format
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="Show the cluster: id, controller, brokers.", no_args_is_help=True)


@app.command()
def describe(ctx: typer.Context) -> None:
    """Cluster id, controller id and every broker's address and rack."""
    with admin_client(ctx) as admin:
        desc = admin.describe_cluster()
    brokers = [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                "controller": b.node_id == desc.controller_id} for b in desc.brokers]
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"cluster_id": desc.cluster_id, "controller_id": desc.controller_id, "brokers": brokers}, fmt)
        return
    print(f"cluster_id: {desc.cluster_id}")
    print(f"controller_id: {desc.controller_id}")
    emit(brokers, fmt, ["node_id", "host", "port", "rack", "controller"])
