"""``kafkactl log-dirs describe|move``: the log dirs of the brokers, and moving a replica between them.

``describe [--broker N]`` lists every log dir of every live broker (or of
broker N): one row per replica with its size, and a future replica (a move
under way) with how many offsets it is behind; an offline dir (its disk
failed) shows its error, KAFKA_STORAGE_ERROR, and no replicas.

``move TOPIC PARTITION DIR [--broker N]`` asks broker N (default: the
partition's leader) to move its replica to its log dir DIR
(AlterReplicaLogDirs); it returns once the move has started, which
``describe`` then shows until the swap. Exit codes follow kafkactl's contract:
an unknown topic, partition, broker id or dir is bad input (2); an offline
dir is the cluster's (3).
"""

from __future__ import annotations

import typer

from kafkactl._common import admin_client, output_format, require_topics
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="Show the brokers' log dirs; move a replica to another log dir.", no_args_is_help=True)

COLUMNS = ["broker", "log_dir", "error", "topic", "partition", "size", "offset_lag", "future"]


def _check_broker(admin, broker: int | None) -> list[int] | None:
    if broker is None:
        return None
    known = [b.node_id for b in admin.describe_cluster().brokers]
    if broker not in known:
        raise CliError(f"unknown broker id {broker} (live brokers: {', '.join(map(str, sorted(known)))})")
    return [broker]


@app.command()
def describe(ctx: typer.Context,
             broker: int = typer.Option(None, "--broker", help="Only this broker's log dirs.")) -> None:
    """Every log dir with the replicas in it (sizes, moves under way, offline dirs)."""
    with admin_client(ctx) as admin:
        dirs = admin.describe_log_dirs(_check_broker(admin, broker))
    rows = []
    for d in dirs:
        if not d.replicas:
            rows.append({"broker": d.broker_id, "log_dir": d.path, "error": d.error, "topic": None,
                         "partition": None, "size": None, "offset_lag": None, "future": None})
        for r in d.replicas:
            rows.append({"broker": d.broker_id, "log_dir": d.path, "error": d.error, "topic": r.topic,
                         "partition": r.partition, "size": r.size, "offset_lag": r.offset_lag,
                         "future": r.is_future})
    fmt = output_format(ctx)
    emit(rows, fmt, COLUMNS if fmt is OutputFormat.table else None)


@app.command()
def move(ctx: typer.Context, topic: str = typer.Argument(..., help="The topic."),
         partition: int = typer.Argument(..., help="The partition.", min=0),
         log_dir: str = typer.Argument(..., metavar="DIR", help="The destination: one of the broker's log dirs."),
         broker: int = typer.Option(None, "--broker", help="The broker whose replica moves (default: the leader).")
         ) -> None:
    """Move a replica to another log dir of its broker (a future replica, copied, then swapped in)."""
    with admin_client(ctx) as admin:
        meta = require_topics(admin, [topic])[topic]
        parts = meta.partitions
        if partition not in parts:
            raise CliError(f"unknown partition {topic}-{partition} (the topic has {len(parts)})")
        if broker is None:
            broker = parts[partition].leader
            if broker < 0:
                raise CliError(f"{topic}-{partition} has no leader: name the broker with --broker", 3)
        else:
            _check_broker(admin, broker)
        admin.alter_replica_log_dirs(broker, {(topic, partition): log_dir})
    print(f"moving {topic}-{partition} on broker {broker} to {log_dir}")
