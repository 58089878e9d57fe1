"""``kafkactl configs``: read and change topic, broker and group configs.

- ``get topic NAME`` / ``get broker ID``: the configs that differ from the
  defaults (Kafka's ``kafka-configs --describe`` shows overrides the same way);
  ``--all`` shows every config with its source; ``--key`` picks names.
- ``set topic NAME k=v ...`` / ``set broker ID k=v ...``: IncrementalAlterConfigs
  SET for each pair and DELETE for each ``--delete NAME``; every other config
  keeps its value. ``--validate-only`` asks the broker to check without applying.
  A broker takes its dynamic configs (``leader.replication.throttled.rate``,
  ``follower.replication.throttled.rate``, ``num.replica.fetchers``,
  ``unclean.leader.election.enable``), applied at once.
- ``broker default`` in place of ``broker ID``: the cluster-wide dynamic
  defaults (``/config/brokers/<default>``, Kafka's ``--entity-default``), which
  ``get`` lists when set.
- ``group NAME``: a group's configs (Kafka 4.1's group configs:
  ``share.auto.offset.reset``, ``share.record.lock.duration.ms``,
  ``consumer.session.timeout.ms``, ...), whether or not the group exists;
  ``get`` lists the overrides, ``--all`` every config with the broker's
  defaults; ``set`` takes SET and ``--delete``.
- ``client-metrics NAME``: a client metrics subscription's ``metrics``, ``interval.ms`` and ``match``
  (KIP-714; ``kafkactl client-metrics`` shows and changes them too); ``get --all`` of a name that is
  no subscription shows the defaults. A config or value the broker refuses (INVALID_CONFIG,
  INVALID_REQUEST) is exit 2.

Sensitive values are never printed (``null`` / ``-``). An unknown topic or
broker id is bad input: one line, exit 2.
"""

from __future__ import annotations

import enum
from contextlib import nullcontext
from typing import List, Optional

import typer

from broker.client import ConfigResource
from kafkactl._common import admin_client, output_format, parse_pairs, require_topics
from kafkactl.errors import CliError, invalid_request_is_bad_input
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="Read and change topic, broker, group and client metrics configs.", no_args_is_help=True)


class ResourceType(str, enum.Enum):
    topic = "topic"
    broker = "broker"
    group = "group"
    client_metrics = "client-metrics"


DEFAULT_NAMES = ("default", "<default>")


def _resource(resource_type: ResourceType, name: str) -> ConfigResource:
    if resource_type is ResourceType.broker and name in DEFAULT_NAMES:
        return ConfigResource("broker", "")  # the cluster-wide dynamic defaults
    if resource_type is ResourceType.broker and not name.isdigit():
        raise CliError(f"bad broker id {name!r}: expected a number such as 0, or default")
    if resource_type is ResourceType.client_metrics:
        return ConfigResource("client_metrics", name)
    return ConfigResource(resource_type.value, name)


def _require_resource(admin, res: ConfigResource) -> None:
    """An unknown topic or broker id is bad input (exit 2), not a cluster failure; a group or client metrics
    subscription need not exist."""
    if res.type == "topic":
        require_topics(admin, [res.name])
        return
    if res.type == "group":
        if not res.name:
            raise CliError("a group name is needed (group configs have no cluster-wide default)")
        return
    if res.type == "client_metrics":
        if not res.name:
            raise CliError("a client metrics subscription name is needed")
        return
    if res.name == "":
        return
    ids = sorted(b.node_id for b in admin.describe_cluster().brokers)
    if int(res.name) not in ids:
        raise CliError(f"broker {res.name} is not in the cluster (brokers: {', '.join(map(str, ids))})")


@app.command()
def get(
    ctx: typer.Context,
    resource_type: ResourceType = typer.Argument(..., help="topic, broker, group or client-metrics."),
    name: str = typer.Argument(..., help="Topic name, broker id, group id or subscription name."),
    key: Optional[List[str]] = typer.Option(None, "--key", "-k", help="Only this config (repeatable)."),
    all_configs: bool = typer.Option(False, "--all", help="Show every config, defaults included."),
) -> None:
    """Show the configs of a topic, broker, group or client metrics subscription."""
    res = _resource(resource_type, name)
    with admin_client(ctx) as admin:
        _require_resource(admin, res)
        entries = admin.describe_configs([res], keys=key or None)[res]
    shown = [e for e in entries.values() if all_configs or key or not e.is_default]
    rows = [{"name": e.name, "value": None if e.is_sensitive else e.value, "source": e.source,
             "read_only": e.read_only, "is_sensitive": e.is_sensitive, "is_default": e.is_default}
            for e in sorted(shown, key=lambda e: e.name)]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table:
        if not rows:
            print(f"{resource_type.value} {name} has no config overrides (--all shows every config)")
            return
        emit(rows, fmt, ["name", "value", "source", "read_only"])
    else:
        emit(rows, fmt)


@app.command("set")
def set_configs(
    ctx: typer.Context,
    resource_type: ResourceType = typer.Argument(..., help="topic, broker, group or client-metrics."),
    name: str = typer.Argument(..., help="Topic name, broker id, group id or subscription name."),
    pairs: Optional[List[str]] = typer.Argument(None, help="NAME=VALUE pairs to set."),
    delete: Optional[List[str]] = typer.Option(None, "--delete", "-d", help="Remove this override (repeatable)."),
    validate_only: bool = typer.Option(False, "--validate-only", help="Let the broker check, change nothing."),
) -> None:
    """Set or remove configs of a topic, broker, group or client metrics subscription."""
    res = _resource(resource_type, name)
    changes: dict[str, str | None] = dict(parse_pairs(pairs))
    for item in delete or ():
        changes[item] = None
    if not changes:
        raise CliError("nothing to set: give NAME=VALUE pairs or --delete NAME")
    with admin_client(ctx) as admin, (invalid_request_is_bad_input() if res.type == "client_metrics" else nullcontext()):
        _require_resource(admin, res)
        admin.incremental_alter_configs({res: changes}, validate_only=validate_only)
    fmt = output_format(ctx)
    result = {"resource_type": res.type, "name": name, "validate_only": validate_only, "changes": changes}
    if fmt is not OutputFormat.table:
        emit(result, fmt)
        return
    verb = "validated" if validate_only else "updated"
    text = ", ".join(f"{k} deleted" if v is None else f"{k}={v}" for k, v in changes.items())
    print(f"{verb} {resource_type.value} {name}: {text}")
