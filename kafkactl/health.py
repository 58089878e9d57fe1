"""``kafkactl cluster await-healthy`` and ``kafkactl cluster can-stop``: the gates of a rolling restart.

Both read the partition state every broker serves in Metadata (leader,
replicas, in-sync replicas), internal topics included:

- a partition is *offline* when it has no leader (leader -1), *under-replicated*
  when its ISR is smaller than its replica list (Kafka's
  UnderReplicatedPartitions and OfflinePartitionsCount, as seen by a client);
- ``await-healthy [--timeout S] [--brokers N]`` polls until no partition is
  offline or under-replicated (and at least N brokers are registered), exit 0;
  on timeout exit 1 with one line naming what is still not healthy. A cluster
  it cannot reach meanwhile (the broker it asked being the one restarting)
  counts as not healthy yet, not as an error;
- ``can-stop --broker N`` answers whether stopping broker N now keeps every
  partition writable with ``acks=all``: without N each partition must keep an
  ISR of at least its topic's ``min.insync.replicas`` and someone in it to
  lead. Exit 0 if so; else exit 1 with one line listing the partitions that
  would not (``t-0 (isr [1, 2], min.insync.replicas 2)``). A broker that is
  neither registered nor a replica of anything is bad input (exit 2).

With ``-o json|yaml`` each prints its findings as one document
(``{"healthy": ..., "offline": [...], "under_replicated": [...], "brokers": N}``,
``{"broker": N, "can_stop": ..., "partitions": [...]}``) before the exit code.
"""

from __future__ import annotations

import time

import typer

from broker.client import Admin, ConfigResource, errors
from kafkactl._common import client_config, cluster_errors, output_format
from kafkactl.errors import EXIT_PROBLEM, EXIT_USAGE, CliError
from kafkactl.output import OutputFormat, emit

POLL_S = 1.0
NAMES_SHOWN = 10  # partitions named in one line; the count says how many more


def _names(partitions: list[str]) -> str:
    shown = ", ".join(partitions[:NAMES_SHOWN])
    return shown + (f" and {len(partitions) - NAMES_SHOWN} more" if len(partitions) > NAMES_SHOWN else "")


def _state(ctx: typer.Context, request_timeout_ms: int) -> dict:
    """One look at the cluster: offline and under-replicated partitions, registered brokers."""
    admin = Admin(**client_config(ctx, "admin", defaults={"request_timeout_ms": request_timeout_ms}))
    try:
        brokers = len(admin.describe_cluster().brokers)
        names = admin.list_topics(internal=True)
        meta = admin.describe_topics(names) if names else {}
    finally:
        admin.close()
    offline, under = [], []
    for topic in sorted(meta):
        for p in sorted(meta[topic].partitions.values(), key=lambda p: p.partition):
            if p.leader < 0:
                offline.append(f"{topic}-{p.partition}")
            elif len(p.isr) < len(p.replicas):
                under.append(f"{topic}-{p.partition}")
    return {"offline": offline, "under_replicated": under, "brokers": brokers}


def _unhealthy(state: dict, brokers: int | None) -> list[str]:
    what = []
    if state["offline"]:
        what.append(f"{len(state['offline'])} offline partition(s): {_names(state['offline'])}")
    if state["under_replicated"]:
        what.append(f"{len(state['under_replicated'])} under-replicated partition(s): "
                    f"{_names(state['under_replicated'])}")
    if brokers is not None and state["brokers"] < brokers:
        what.append(f"{state['brokers']} of {brokers} brokers registered")
    return what


def await_healthy(
    ctx: typer.Context,
    timeout: float = typer.Option(300.0, "--timeout", min=0, help="Seconds to wait before giving up."),
    brokers: int = typer.Option(None, "--brokers", min=1, help="Also wait until this many brokers are registered."),
) -> None:
    """Wait until no partition is offline or under-replicated; exit 1 naming what is not, on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            state = _state(ctx, max(1000, min(10000, int(left * 1000))))
            what = _unhealthy(state, brokers)
        except errors.KafkaError as exc:
            state, what = None, [f"cluster not reachable ({type(exc).__name__}: {exc})"]
        if not what or time.monotonic() + POLL_S > deadline:
            break
        time.sleep(POLL_S)
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table and state is not None:
        emit({"healthy": not what, **state}, fmt)
    if what:
        raise CliError(f"not healthy after {timeout:g} s: {'; '.join(what)}", EXIT_PROBLEM)
    if fmt is OutputFormat.table:
        print(f"healthy: {state['brokers']} brokers, no offline or under-replicated partitions")


def can_stop(
    ctx: typer.Context,
    broker: int = typer.Option(..., "--broker", min=0, help="The broker that would be stopped."),
) -> None:
    """Whether stopping broker N leaves every partition an ISR of at least min.insync.replicas and a leader."""
    with cluster_errors(ctx):
        admin = Admin(**client_config(ctx, "admin"))
        try:
            live = {b.node_id for b in admin.describe_cluster().brokers}
            names = admin.list_topics(internal=True)
            meta = admin.describe_topics(names) if names else {}
            configs = admin.describe_configs([ConfigResource("topic", t) for t in meta], ["min.insync.replicas"])
        finally:
            admin.close()
    min_isr = {res.name: int(entries["min.insync.replicas"].value) for res, entries in configs.items()}
    if broker not in live and not any(broker in p.replicas for tm in meta.values() for p in tm.partitions.values()):
        raise CliError(f"broker {broker} is not registered and holds no replica", EXIT_USAGE)
    blocked = []
    for topic in sorted(meta):
        for p in sorted(meta[topic].partitions.values(), key=lambda p: p.partition):
            remaining = [r for r in p.isr if r != broker]
            if len(remaining) < min_isr[topic] or not remaining:
                blocked.append({"topic": topic, "partition": p.partition, "isr": sorted(p.isr),
                                "min_insync_replicas": min_isr[topic]})
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit({"broker": broker, "can_stop": not blocked, "partitions": blocked}, fmt)
    if blocked:
        listed = _names([f"{b['topic']}-{b['partition']} (isr {b['isr']}, min.insync.replicas "
                         f"{b['min_insync_replicas']})" for b in blocked])
        raise CliError(f"stopping broker {broker} would leave {len(blocked)} partition(s) without "
                       f"min.insync.replicas in sync or without a leader: {listed}", EXIT_PROBLEM)
    if fmt is OutputFormat.table:
        print(f"broker {broker} can stop: every partition keeps min.insync.replicas in sync and a leader")
