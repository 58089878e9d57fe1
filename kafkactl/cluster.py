"""``kafkactl cluster describe``: cluster id, controller, brokers and their leadership counts.

One row per broker: its id, endpoint (``host:port`` of the listener kafkactl
reached it by), rack, whether it is the controller, and from every topic's
metadata (internal ones included) how many replicas it holds (``partitions``),
how many partitions it leads (``leaders``) and of those how many it is the
preferred leader of (``preferred_leaders``, the first replica). A broker named
in an assignment but not alive gets a row with ``alive`` false and no endpoint,
so a dead broker shows up here rather than being silently missing.

``await-healthy`` and ``can-stop``, the gates of a rolling restart, are in
:mod:`kafkactl.health`.
"""

from __future__ import annotations

import typer

from kafkactl._common import admin_client, output_format
from kafkactl.health import await_healthy, can_stop
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="Show the cluster: id, controller, brokers; health gates.", no_args_is_help=True)
app.command("await-healthy")(await_healthy)
app.command("can-stop")(can_stop)

COLUMNS = ["node_id", "endpoint", "rack", "controller", "alive", "partitions", "leaders", "preferred_leaders"]


@app.command()
def describe(ctx: typer.Context) -> None:
    """Cluster id, controller id, every broker's endpoint and rack, and its replica and leader counts."""
    with admin_client(ctx) as admin:
        desc = admin.describe_cluster()
        names = admin.list_topics(internal=True)
        meta = admin.describe_topics(names) if names else {}
    counts: dict[int, list[int]] = {}  # broker -> [partitions, leaders, preferred leaders]
    for tm in meta.values():
        for p in tm.partitions.values():
            for r in p.replicas:
                counts.setdefault(r, [0, 0, 0])[0] += 1
            if p.leader >= 0:
                c = counts.setdefault(p.leader, [0, 0, 0])
                c[1] += 1
                c[2] += bool(p.replicas) and p.replicas[0] == p.leader
    live = {b.node_id: b for b in desc.brokers}
    brokers = []
    for node_id in sorted(set(live) | set(counts)):
        b = live.get(node_id)
        partitions, leaders, preferred = counts.get(node_id, [0, 0, 0])
        brokers.append({"node_id": node_id, "endpoint": None if b is None else f"{b.host}:{b.port}",
                        "host": None if b is None else b.host, "port": None if b is None else b.port,
                        "rack": None if b is None else b.rack, "controller": node_id == desc.controller_id,
                        "alive": b is not None, "partitions": partitions, "leaders": leaders,
                        "preferred_leaders": preferred})
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"cluster_id": desc.cluster_id, "controller_id": desc.controller_id, "brokers": brokers}, fmt)
        return
    print(f"cluster_id: {desc.cluster_id}")
    print(f"controller_id: {desc.controller_id}")
    emit(brokers, fmt, COLUMNS)
