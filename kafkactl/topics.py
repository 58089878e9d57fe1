"""``kafkactl topics``: list, describe, create, alter (partitions and configs) and delete topics.

- ``list``: topic names (``--internal`` adds ``__consumer_offsets`` and friends).
- ``describe [TOPIC...]``: one row per partition (leader, leader_epoch, replicas,
  isr, offline replicas); with ``--configs`` the topic's non-default configs too.
  As kafka-topics.sh, ``--under-replicated-partitions`` (ISR smaller than the
  replicas), ``--unavailable-partitions`` (no leader, or a leader that is not a
  live broker), ``--under-min-isr-partitions`` and ``--at-min-isr-partitions``
  (ISR smaller than / equal to the topic's ``min.insync.replicas``) show only
  the partitions in that state (any of the states given), of every topic
  including the internal ones unless TOPICs are named; nothing shown is a
  healthy answer, exit 0.
- ``create TOPIC``: ``--partitions``, ``--replication-factor``, ``--config k=v``
  (repeated); ``--if-not-exists`` makes TOPIC_ALREADY_EXISTS a success.
- ``alter TOPIC``: ``--partitions N`` grows the topic to N partitions;
  ``--config k=v`` sets and ``--delete-config k`` removes dynamic configs
  (IncrementalAlterConfigs, so other configs stay as they are).
- ``delete TOPIC...``: ``--if-exists`` makes an unknown topic a success. An internal
  topic (``__consumer_offsets`` ...) is refused, exit 1, and nothing is deleted.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional

import typer

from broker.client import ConfigResource, NewTopic, errors
from broker.protocol.schema import ZERO_UUID
from broker.topic_ids import format_topic_id
from kafkactl._common import admin_client, output_format, parse_pairs, require_topics
from kafkactl.errors import EXIT_PROBLEM, CliError
from kafkactl.output import OutputFormat, emit, emit_names

app = typer.Typer(help="List, describe, create, alter and delete topics.", no_args_is_help=True)


@app.command("list")
def list_topics(
    ctx: typer.Context,
    internal: bool = typer.Option(False, "--internal", help="Include internal topics (__consumer_offsets ...)."),
) -> None:
    """List topic names."""
    with admin_client(ctx) as admin:
        names = admin.list_topics(internal=internal)
    emit_names(names, output_format(ctx))


def _non_default_configs(admin, topics: list[str]) -> dict[str, dict[str, str | None]]:
    out = {}
    for topic in topics:
        entries = admin.describe_configs([ConfigResource("topic", topic)])[ConfigResource("topic", topic)]
        out[topic] = {e.name: (None if e.is_sensitive else e.value) for e in entries.values() if not e.is_default}
    return out


def _min_isr(admin, topics: list[str]) -> dict[str, int]:
    out = {}
    for topic in topics:
        entries = admin.describe_configs([ConfigResource("topic", topic)])[ConfigResource("topic", topic)]
        entry = entries.get("min.insync.replicas")
        out[topic] = int(entry.value) if entry is not None and entry.value is not None else 1
    return out


def _only(tm, keep):
    """The topic's metadata with only the partitions ``keep(partition)`` is true for."""
    return dataclasses.replace(tm, partitions={n: p for n, p in tm.partitions.items() if keep(p)})


@app.command()
def describe(
    ctx: typer.Context,
    topics: Optional[List[str]] = typer.Argument(None, help="Topics to describe (default: every non-internal topic)."),
    configs: bool = typer.Option(False, "--configs", help="Also show each topic's non-default configs."),
    under_replicated: bool = typer.Option(False, "--under-replicated-partitions",
                                          help="Only partitions whose ISR is smaller than their replicas."),
    unavailable: bool = typer.Option(False, "--unavailable-partitions",
                                     help="Only partitions without a live leader."),
    under_min_isr: bool = typer.Option(False, "--under-min-isr-partitions",
                                       help="Only partitions whose ISR is below min.insync.replicas."),
    at_min_isr: bool = typer.Option(False, "--at-min-isr-partitions",
                                    help="Only partitions whose ISR is exactly min.insync.replicas."),
) -> None:
    """Partitions of each topic: leader, replicas, in-sync replicas."""
    health = under_replicated or unavailable or under_min_isr or at_min_isr
    with admin_client(ctx) as admin:
        if topics:
            meta = require_topics(admin, list(topics))
        else:
            names = admin.list_topics(internal=health)
            meta = admin.describe_topics(names) if names else {}
        topic_configs = _non_default_configs(admin, sorted(meta)) if configs else {}
        if health:
            live = {b.node_id for b in admin.describe_cluster().brokers}
            min_isr = _min_isr(admin, sorted(meta)) if under_min_isr or at_min_isr else {}

            def shown(topic: str, p) -> bool:
                return (under_replicated and len(p.isr) < len(p.replicas)
                        or unavailable and (p.leader < 0 or p.leader not in live)
                        or under_min_isr and len(p.isr) < min_isr[topic]
                        or at_min_isr and len(p.isr) == min_isr[topic])

            meta = {name: _only(tm, lambda p, name=name: shown(name, p)) for name, tm in meta.items()}
            meta = {name: tm for name, tm in meta.items() if tm.partitions}
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        data = []
        for name in sorted(meta):
            tm = meta[name]
            item = {
                "topic": name,
                # Kafka's text of the id (KIP-516), as kafka-topics.sh prints it; None before the controller named one
                "topic_id": None if tm.topic_id in (None, ZERO_UUID) else format_topic_id(tm.topic_id),
                "is_internal": tm.is_internal,
                "partition_count": len(tm.partitions),
                "replication_factor": max((len(p.replicas) for p in tm.partitions.values()), default=0),
                "partitions": [
                    {"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                     "replicas": list(p.replicas), "isr": list(p.isr), "offline_replicas": list(p.offline_replicas)}
                    for p in sorted(tm.partitions.values(), key=lambda p: p.partition)
                ],
            }
            if configs:
                item["configs"] = topic_configs.get(name, {})
            data.append(item)
        emit(data, fmt)
        return
    rows = []
    for name in sorted(meta):
        for p in sorted(meta[name].partitions.values(), key=lambda p: p.partition):
            rows.append({"topic": name, "partition": p.partition, "leader": p.leader,
                         "leader_epoch": p.leader_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
                         "offline": list(p.offline_replicas) or None})
    emit(rows, fmt, ["topic", "partition", "leader", "leader_epoch", "replicas", "isr", "offline"])
    for name, cfg in topic_configs.items():
        if cfg:
            print(f"{name} configs: " + ",".join(f"{k}={v}" for k, v in sorted(cfg.items())))


@app.command()
def create(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Name of the new topic."),
    partitions: int = typer.Option(1, "--partitions", "-p", min=1, help="Number of partitions."),
    replication_factor: int = typer.Option(1, "--replication-factor", "-r", min=1, help="Replicas per partition."),
    config: Optional[List[str]] = typer.Option(None, "--config", "-c", help="Topic config NAME=VALUE (repeatable)."),
    if_not_exists: bool = typer.Option(False, "--if-not-exists", help="Succeed when the topic already exists."),
) -> None:
    """Create a topic."""
    configs = parse_pairs(config)
    with admin_client(ctx) as admin:
        try:
            admin.create_topics([NewTopic(topic, partitions, replication_factor, configs)])
        except errors.TopicAlreadyExistsError:
            if not if_not_exists:
                raise
            _report(ctx, {"topic": topic, "created": False})
            return
    _report(ctx, {"topic": topic, "created": True, "partitions": partitions,
                  "replication_factor": replication_factor, "configs": configs})


@app.command()
def alter(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic to change."),
    partitions: Optional[int] = typer.Option(None, "--partitions", "-p", min=1,
                                             help="Grow the topic to this many partitions."),
    config: Optional[List[str]] = typer.Option(None, "--config", "-c", help="Set a topic config NAME=VALUE (repeatable)."),
    delete_config: Optional[List[str]] = typer.Option(None, "--delete-config", help="Remove a topic config override (repeatable)."),
) -> None:
    """Add partitions to a topic and/or change its configs."""
    changes: dict[str, str | None] = dict(parse_pairs(config))
    for name in delete_config or ():
        changes[name] = None
    if partitions is None and not changes:
        raise CliError("nothing to alter: give --partitions, --config or --delete-config")
    with admin_client(ctx) as admin:
        require_topics(admin, [topic])
        if partitions is not None:
            admin.create_partitions({topic: partitions})
        if changes:
            admin.incremental_alter_configs({ConfigResource("topic", topic): changes})
    result: dict = {"topic": topic}
    if partitions is not None:
        result["partitions"] = partitions
    if changes:
        result["configs"] = changes
    _report(ctx, result)


@app.command()
def delete(
    ctx: typer.Context,
    topics: List[str] = typer.Argument(..., help="Topics to delete."),
    if_exists: bool = typer.Option(False, "--if-exists", help="Succeed when a topic does not exist."),
) -> None:
    """Delete topics."""
    with admin_client(ctx) as admin:
        existing = set(admin.list_topics(internal=True))
        present = [t for t in topics if t in existing]
        internal = sorted(t for t, tm in admin.describe_topics(present).items() if tm.is_internal) if present else []
        if internal:  # before deleting anything: never half of a request
            raise CliError(f"refusing to delete internal topic {', '.join(internal)}: it holds the cluster's own "
                           "state (every group's committed offsets, ...)", EXIT_PROBLEM)
        missing = [t for t in topics if t not in existing]
        if missing and not if_exists:
            raise CliError(f"unknown topic: {', '.join(missing)} (UNKNOWN_TOPIC_OR_PARTITION, 3)")
        if present:
            admin.delete_topics(present)
    _report(ctx, {"deleted": present, "missing": missing})


def _report(ctx: typer.Context, result: dict) -> None:
    """Results of a change: one human line, or the dict itself for scripts."""
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit(result, fmt)
        return
    if "deleted" in result:
        for t in result["deleted"]:
            print(f"deleted topic {t}")
        return
    if result.get("created") is False:
        print(f"topic {result['topic']} already exists")
    elif result.get("created"):
        print(f"created topic {result['topic']} with {result['partitions']} partition(s), "
              f"replication factor {result['replication_factor']}")
    else:
        parts = []
        if "partitions" in result:
            parts.append(f"{result['partitions']} partition(s)")
        for k, v in (result.get("configs") or {}).items():
            parts.append(f"{k} deleted" if v is None else f"{k}={v}")
        print(f"altered topic {result['topic']}: " + ", ".join(parts))
