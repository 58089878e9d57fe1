"""``kafkactl client-metrics``: client metrics subscriptions (KIP-714), as Kafka's ``kafka-client-metrics.sh``
lists, describes, alters and deletes them.

A subscription is a config resource of type CLIENT_METRICS with three configs: ``metrics`` (metric name
prefixes the matching clients push; empty: none, ``*``: all), ``interval.ms`` (how often they push,
100 to 3600000, default 300000) and ``match`` (``selector=regex`` pairs the client must match:
client_instance_id, client_id, client_software_name, client_software_version, client_source_address,
client_source_port; none: every client). It exists while one of them is set.

- ``list``: the names of the subscriptions (ListConfigResources).
- ``describe [NAME]``: each subscription (or the one named) with its metrics, interval and match.
- ``alter NAME`` or ``alter --generate-name`` (a new name, a random UUID) with ``--metrics a,b``,
  ``--interval MS`` and ``--match selector=regex`` (repeatable): IncrementalAlterConfigs SET of each given,
  DELETE of each given empty (``--metrics ''``); the configs not given keep their values.
- ``delete NAME``: removes all three configs, and so the subscription.

Exit codes as for every command (:mod:`kafkactl.errors`), and: a name that is not a subscription
(``describe``, ``delete``), an ``--interval`` that is not a number, and a value the broker refuses
(INVALID_CONFIG, INVALID_REQUEST, with its message) are exit 2.
"""

from __future__ import annotations

import uuid
from typing import List, Optional

import typer

from broker.client import Admin, ConfigResource
from kafkactl._common import admin_client, output_format
from kafkactl.errors import CliError, invalid_request_is_bad_input
from kafkactl.output import OutputFormat, emit, emit_names

app = typer.Typer(help="List, describe, alter and delete client metrics subscriptions (KIP-714).",
                  no_args_is_help=True)

RESOURCE_TYPE = "client_metrics"
CONFIGS = ("metrics", "interval.ms", "match")
COLUMNS = ["name", "metrics", "interval_ms", "match"]


def _names(admin: Admin) -> list[str]:
    return [r.name for r in admin.list_config_resources([RESOURCE_TYPE])]


def _require(admin: Admin, name: str) -> None:
    if name not in _names(admin):
        raise CliError(f"client metrics subscription {name} does not exist")


def _listed(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v]


def _row(name: str, entries: dict) -> dict:
    values = {key: entry.value for key, entry in entries.items()}
    interval = values.get("interval.ms")
    return {"name": name, "metrics": _listed(values.get("metrics")),
            "interval_ms": None if interval is None else int(interval), "match": _listed(values.get("match"))}


@app.command("list")
def list_subscriptions(ctx: typer.Context) -> None:
    """The names of the client metrics subscriptions."""
    with admin_client(ctx) as admin:
        names = _names(admin)
    emit_names(names, output_format(ctx))


@app.command()
def describe(
    ctx: typer.Context,
    name: Optional[str] = typer.Argument(None, help="Only this subscription (default: every one)."),
) -> None:
    """Each subscription's metrics, interval and match."""
    with admin_client(ctx) as admin:
        if name is not None:
            _require(admin, name)
        names = _names(admin) if name is None else [name]
        resources = [ConfigResource(RESOURCE_TYPE, n) for n in names]
        described = admin.describe_configs(resources, keys=list(CONFIGS)) if resources else {}
    rows = [_row(res.name, described[res]) for res in resources]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print("no client metrics subscriptions")
        return
    emit(rows, fmt, COLUMNS)


@app.command()
def alter(
    ctx: typer.Context,
    name: Optional[str] = typer.Argument(None, help="The subscription (created if it does not exist)."),
    generate_name: bool = typer.Option(False, "--generate-name", help="A new subscription with a random name."),
    metrics: Optional[str] = typer.Option(None, "--metrics", metavar="PREFIX[,PREFIX...]",
                                          help="Metric name prefixes to push ('*': all); '' removes the config."),
    interval: Optional[str] = typer.Option(None, "--interval", metavar="MS",
                                           help="Push interval in ms (100 to 3600000); '' removes the config."),
    match: Optional[List[str]] = typer.Option(None, "--match", metavar="SELECTOR=REGEX",
                                              help="A client selector (repeatable); '' removes the config."),
) -> None:
    """Set or remove the configs of a subscription; the others keep their values."""
    if generate_name == (name is not None):
        raise CliError("give the subscription's NAME or --generate-name (one of them)")
    if generate_name:
        name = str(uuid.uuid4())
    if not name:
        raise CliError("the subscription name is empty")
    changes: dict[str, str | None] = {}
    if metrics is not None:
        changes["metrics"] = metrics or None
    if interval is not None:
        try:
            changes["interval.ms"] = str(int(interval)) if interval else None
        except ValueError:
            raise CliError(f"bad --interval {interval!r}: expected a whole number of milliseconds") from None
    if match is not None:
        changes["match"] = ",".join(m for m in match if m) or None
    if not changes:
        raise CliError("nothing to change: give --metrics, --interval or --match")
    with admin_client(ctx) as admin, invalid_request_is_bad_input():
        admin.incremental_alter_configs({ConfigResource(RESOURCE_TYPE, name): changes})
    if output_format(ctx) is OutputFormat.table:
        text = ", ".join(f"{k} deleted" if v is None else f"{k}={v}" for k, v in changes.items())
        print(f"altered client metrics subscription {name}: {text}")
    else:
        emit({"name": name, "changes": changes}, output_format(ctx))


@app.command()
def delete(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The subscription."),
) -> None:
    """Delete a subscription (all three of its configs)."""
    with admin_client(ctx) as admin, invalid_request_is_bad_input():
        _require(admin, name)
        admin.incremental_alter_configs({ConfigResource(RESOURCE_TYPE, name): dict.fromkeys(CONFIGS)})
    if output_format(ctx) is OutputFormat.table:
        print(f"deleted client metrics subscription {name}")
    else:
        emit({"name": name, "deleted": True}, output_format(ctx))
