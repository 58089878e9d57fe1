"""``kafkactl offsets``: move committed offsets between ZooKeeper, the broker and CSV files.

Old consumers kept their offsets in ZooKeeper at ``/consumers/<group>/offsets/<topic>/<partition>``
(layout in :mod:`broker.client._zookeeper`); these commands carry them into the group coordinator
and back (Kafka 0.8.2's documentation, "Migrating offsets from ZooKeeper to Kafka"):

- ``migrate-from-zookeeper --zookeeper CONNECT [--group REGEX] [--topic REGEX]``: every matching
  group's ZooKeeper offsets, committed to the broker's group coordinator.
- ``migrate-to-zookeeper --zookeeper CONNECT --group REGEX``: the rollback, the broker's committed
  offsets written into the legacy layout.
- ``export --group REGEX [--zookeeper CONNECT]``: CSV ``group,topic,partition,offset,metadata`` (a
  header line, then one line per partition) of the broker's offsets, or of ZooKeeper's.
- ``import FILE [--zookeeper CONNECT]``: such a CSV (``-`` for stdin; metadata optional; the
  header line optional) committed to the broker, or written to ZooKeeper.

``REGEX`` must match the whole group (topic) name. Every command that writes is a dry run unless
``--execute``: it prints, per group, each partition's offset from the source, the target's current
offset, the partition's log start and end offsets and the action, and with ``--execute`` it writes
and prints what it did. Checks, the same for every command:

- a group with live legacy consumers (ephemeral ``/consumers/<group>/ids/*``) is refused: they own
  the offsets in ZooKeeper and would write over them;
- a group with members in the broker's coordinator is refused unless ``--force`` (the coordinator
  itself refuses commits from outside a group with members);
- an offset that is not a number, for a topic or partition that does not exist, or outside
  [log start offset, log end offset] is reported and skipped, never written;
- a target offset ahead of the source's is kept unless ``--overwrite-newer``; an equal one is
  left alone, so a second run writes nothing.

Exit codes (kafkactl's contract, :mod:`kafkactl.errors`): 0 done, nothing skipped or refused;
1 an offset was skipped or a group refused (in a dry run too, so a script can check first; the
other groups and offsets were still done); 2 bad input: a malformed CSV, a bad regex, no group
matching (nothing is written); 3 ZooKeeper or the cluster unreachable or answering with an error.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import re
import sys
from typing import Iterator, Optional

import typer

from broker.client import Admin, OffsetAndMetadata, TopicPartition, ZooKeeperOffsetStore, errors
from kafkactl._common import admin_client, output_format, tp_key
from kafkactl.errors import EXIT_CLUSTER, EXIT_PROBLEM, EXIT_USAGE, CliError
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="Migrate committed offsets between ZooKeeper and the broker; export and import them.",
                  no_args_is_help=True)

ZK_CONNECTION_TIMEOUT_MS = 5000
CSV_HEADER = ["group", "topic", "partition", "offset", "metadata"]

ZOOKEEPER_OPT = typer.Option(..., "--zookeeper", help="HOST:PORT[,HOST:PORT...][/chroot] of the legacy ZooKeeper.")
EXECUTE_OPT = typer.Option(False, "--execute", help="Write (default: only print the plan).")
FORCE_OPT = typer.Option(False, "--force", help="Write even while the group has members in the broker.")
NEWER_OPT = typer.Option(False, "--overwrite-newer", help="Replace target offsets that are ahead of the source's.")


@contextlib.contextmanager
def zookeeper_store(connect: str) -> Iterator[ZooKeeperOffsetStore]:
    # kazoo logs every failed connection attempt; the one-line error below says it all
    logging.getLogger("kazoo").setLevel(logging.DEBUG if logging.getLogger().isEnabledFor(logging.DEBUG)
                                        else logging.CRITICAL)
    try:
        store = ZooKeeperOffsetStore(connect, connection_timeout_ms=ZK_CONNECTION_TIMEOUT_MS)
    except errors.ZooKeeperError as exc:
        raise CliError(str(exc), EXIT_CLUSTER) from None
    try:
        yield store
    except errors.ZooKeeperError as exc:
        raise CliError(str(exc), EXIT_CLUSTER) from None
    finally:
        store.close()


def _regex(text: str, what: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as exc:
        raise CliError(f"bad {what} regex {text!r}: {exc}", EXIT_USAGE) from None


# -- sources: {group: [(topic, partition or None, partition name, offset or None, text, metadata)]} -----

def _from_zookeeper(store: ZooKeeperOffsetStore, groups: list[str], topic_re: re.Pattern) -> dict[str, list]:
    return {g: [(s.topic, s.partition, s.partition_name, s.offset, s.text, "")
                for s in store.stored_offsets(g) if topic_re.fullmatch(s.topic)] for g in groups}


def _from_broker(admin: Admin, groups: list[str], topic_re: re.Pattern) -> dict[str, list]:
    out = {}
    for g in groups:
        committed = admin.list_group_offsets(g)
        out[g] = [(tp.topic, tp.partition, str(tp.partition), om.offset, str(om.offset), om.metadata)
                  for tp, om in sorted(committed.items(), key=lambda kv: tp_key(kv[0])) if topic_re.fullmatch(tp.topic)]
    return out


def _read_csv(path: str) -> dict[str, list]:
    """A CSV of offsets, checked whole before anything is written (malformed: exit 2)."""
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}", EXIT_USAGE) from None
    out: dict[str, list] = {}
    seen = set()
    shape = "expected group,topic,partition,offset[,metadata]"
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        raise CliError(f"{path}: malformed CSV: {exc}", EXIT_USAGE) from None
    for n, row in enumerate(rows, 1):
        if not row or (n == 1 and row[:4] == CSV_HEADER[:4]):
            continue
        where = f"{path} line {n}"
        if len(row) not in (4, 5):
            raise CliError(f"{where}: {len(row)} fields, {shape}", EXIT_USAGE)
        group, topic, partition, offset = (v.strip() for v in row[:4])
        if not group or not topic:
            raise CliError(f"{where}: empty group or topic, {shape}", EXIT_USAGE)
        if not partition.isdigit() or not offset.isdigit():
            raise CliError(f"{where}: partition and offset must be non-negative integers, "
                           f"not {partition!r} and {offset!r}", EXIT_USAGE)
        if (group, topic, int(partition)) in seen:
            raise CliError(f"{where}: {group} {topic}-{partition} appears twice", EXIT_USAGE)
        seen.add((group, topic, int(partition)))
        out.setdefault(group, []).append((topic, int(partition), partition, int(offset), offset,
                                          row[4] if len(row) == 5 else ""))
    if not out:
        raise CliError(f"{path}: no offsets in it ({shape})", EXIT_USAGE)
    return out


# -- targets --------------------------------------------------------------------------------

class _Broker:
    name = "broker"

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def current(self, group: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: om.offset for tp, om in self.admin.list_group_offsets(group, tps).items()}

    def write(self, group: str, offsets: dict[TopicPartition, tuple[int, str]]) -> None:
        self.admin.alter_group_offsets(group, {tp: OffsetAndMetadata(o, m) for tp, (o, m) in offsets.items()})


class _ZooKeeper:
    name = "zookeeper"

    def __init__(self, store: ZooKeeperOffsetStore) -> None:
        self.store = store

    def current(self, group: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, o in self.store.fetch(group, tps).items() if o is not None}

    def write(self, group: str, offsets: dict[TopicPartition, tuple[int, str]]) -> None:
        self.store.commit(group, {tp: o for tp, (o, _) in offsets.items()})


def _refusal(admin: Admin, store: ZooKeeperOffsetStore | None, group: str, force: bool) -> str | None:
    if store is not None:
        live = store.live_consumers(group)
        if live:
            return (f"group {group} refused: {len(live)} legacy consumer(s) still registered in ZooKeeper "
                    f"(/consumers/{group}/ids: {', '.join(live)}); stop them first")
    if not force:
        desc = admin.describe_groups([group])[group]
        if desc.members:
            return (f"group {group} refused: active in the broker (state {desc.state}, "
                    f"{len(desc.members)} member(s)); stop its consumers or pass --force")
    return None


def _plan(admin: Admin, target, group: str, entries: list, source: str, overwrite_newer: bool) -> list[dict]:
    known = set(admin.list_topics(internal=True))
    present = sorted({e[0] for e in entries if e[0] in known})
    meta = admin.describe_topics(present) if present else {}
    tps = sorted({TopicPartition(t, p) for t, p, *_ in entries
                  if t in meta and p is not None and p in meta[t].partitions}, key=tp_key)
    starts = {tp: o for tp, (o, _) in admin.list_offsets({tp: -2 for tp in tps}).items()} if tps else {}
    ends = {tp: o for tp, (o, _) in admin.list_offsets({tp: -1 for tp in tps}).items()} if tps else {}
    current = target.current(group, tps) if tps else {}
    rows = []
    for topic, partition, name, offset, text, metadata in entries:
        tp = TopicPartition(topic, partition) if partition is not None else None
        row = {"group": group, "topic": topic, "partition": name, f"{source}_offset": offset if offset is not None
               else text.strip(), f"{target.name}_offset": current.get(tp), "log_start_offset": starts.get(tp),
               "log_end_offset": ends.get(tp), "metadata": metadata}
        if topic not in meta:
            action = "skip: no such topic"
        elif partition is None or partition not in meta[topic].partitions:
            action = "skip: no such partition"
        elif offset is None:
            action = "skip: not a number"
        elif offset > ends[tp]:
            action = "skip: past the log end offset"
        elif offset < starts[tp]:
            action = "skip: before the log start offset"
        elif current.get(tp) == offset:
            action = "up to date"
        elif current.get(tp) is not None and current[tp] > offset and not overwrite_newer:
            action = f"keep: {target.name} offset is newer"
        else:
            action = "write"
        row["action"] = action
        rows.append(row)
    return rows


def _run(ctx: typer.Context, admin: Admin, store: ZooKeeperOffsetStore | None, target, sources: dict[str, list],
         source: str, execute: bool, force: bool, overwrite_newer: bool) -> None:
    fmt = output_format(ctx)
    report, problems = [], 0
    for group in sorted(sources):
        refused = _refusal(admin, store, group, force)
        if refused:
            print(f"kafkactl: {refused}", file=sys.stderr)
            problems += 1
            report.append({"group": group, "refused": refused, "executed": False, "offsets": []})
            continue
        rows = _plan(admin, target, group, sources[group], source, overwrite_newer)
        todo = {TopicPartition(r["topic"], int(r["partition"])): (r[f"{source}_offset"], r["metadata"])
                for r in rows if r["action"] == "write"}
        if execute and todo:
            target.write(group, todo)
            for r in rows:
                if r["action"] == "write":
                    r["action"] = "written"
        skipped = sum(r["action"].startswith("skip") for r in rows)
        problems += skipped
        report.append({"group": group, "refused": None, "executed": execute, "offsets": rows})
    if fmt is not OutputFormat.table:
        emit(report, fmt)
    else:
        columns = ["topic", "partition", f"{source}_offset", f"{target.name}_offset", "log_start_offset",
                   "log_end_offset", "action"]
        for i, g in enumerate(r for r in report if not r["refused"]):
            print(("\n" if i else "") + f"group {g['group']}: {len(g['offsets'])} partition(s)")
            emit(g["offsets"], fmt, columns)
        if not execute:
            print("dry run: nothing written; add --execute to write", file=sys.stderr)
    if problems:
        raise typer.Exit(EXIT_PROBLEM)


def _matching(names: list[str], group_re: re.Pattern, where: str, pattern: str) -> list[str]:
    groups = [g for g in names if group_re.fullmatch(g)]
    if not groups:
        raise CliError(f"no group in {where} matches {pattern!r}", EXIT_USAGE)
    return groups


@app.command("migrate-from-zookeeper")
def migrate_from_zookeeper(
    ctx: typer.Context,
    zookeeper: str = ZOOKEEPER_OPT,
    group: str = typer.Option(".*", "--group", help="Regex of the groups to migrate (whole name)."),
    topic: str = typer.Option(".*", "--topic", help="Regex of the topics to migrate (whole name)."),
    execute: bool = EXECUTE_OPT, force: bool = FORCE_OPT, overwrite_newer: bool = NEWER_OPT,
) -> None:
    """Commit legacy consumer offsets from ZooKeeper to the broker's group coordinator."""
    group_re, topic_re = _regex(group, "group"), _regex(topic, "topic")
    with admin_client(ctx) as admin, zookeeper_store(zookeeper) as store:
        groups = _matching(store.groups(), group_re, f"ZooKeeper at {zookeeper}", group)
        _run(ctx, admin, store, _Broker(admin), _from_zookeeper(store, groups, topic_re), "zookeeper",
             execute, force, overwrite_newer)


@app.command("migrate-to-zookeeper")
def migrate_to_zookeeper(
    ctx: typer.Context,
    zookeeper: str = ZOOKEEPER_OPT,
    group: str = typer.Option(..., "--group", help="Regex of the groups to roll back (whole name)."),
    topic: str = typer.Option(".*", "--topic", help="Regex of the topics (whole name)."),
    execute: bool = EXECUTE_OPT, force: bool = FORCE_OPT, overwrite_newer: bool = NEWER_OPT,
) -> None:
    """Write the broker's committed offsets into ZooKeeper's legacy layout (the rollback)."""
    group_re, topic_re = _regex(group, "group"), _regex(topic, "topic")
    with admin_client(ctx) as admin, zookeeper_store(zookeeper) as store:
        groups = _matching([g.group_id for g in admin.list_groups()], group_re, "the cluster", group)
        _run(ctx, admin, store, _ZooKeeper(store), _from_broker(admin, groups, topic_re), "broker",
             execute, force, overwrite_newer)


@app.command("export")
def export(
    ctx: typer.Context,
    group: str = typer.Option(..., "--group", help="Regex of the groups to export (whole name)."),
    zookeeper: Optional[str] = typer.Option(None, "--zookeeper", help="Export ZooKeeper's legacy offsets instead."),
) -> None:
    """Write committed offsets as CSV (group,topic,partition,offset,metadata) to stdout."""
    group_re, everything = _regex(group, "group"), re.compile(".*")
    with contextlib.ExitStack() as stack:
        if zookeeper:
            store = stack.enter_context(zookeeper_store(zookeeper))
            sources = _from_zookeeper(store, _matching(store.groups(), group_re, f"ZooKeeper at {zookeeper}",
                                                       group), everything)
        else:
            admin = stack.enter_context(admin_client(ctx))
            sources = _from_broker(admin, _matching([g.group_id for g in admin.list_groups()], group_re,
                                                    "the cluster", group), everything)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(CSV_HEADER)
    bad = 0
    for g in sorted(sources):
        for topic, partition, name, offset, text, metadata in sources[g]:
            if partition is None or offset is None:
                print(f"kafkactl: skipped {g} {topic}/{name}: not an offset: {text.strip()!r}", file=sys.stderr)
                bad += 1
                continue
            out.writerow([g, topic, partition, offset, metadata])
    if bad:
        raise typer.Exit(EXIT_PROBLEM)


@app.command("import")
def import_(
    ctx: typer.Context,
    path: str = typer.Argument(..., help="CSV file (group,topic,partition,offset[,metadata]); - for stdin."),
    zookeeper: Optional[str] = typer.Option(None, "--zookeeper",
                                            help="Write into ZooKeeper's legacy layout instead of the broker."),
    check_zookeeper: Optional[str] = typer.Option(
        None, "--check-zookeeper", help="When writing to the broker: refuse groups with live legacy consumers here."),
    execute: bool = EXECUTE_OPT, force: bool = FORCE_OPT, overwrite_newer: bool = NEWER_OPT,
) -> None:
    """Commit offsets from a CSV file to the broker (or ZooKeeper), with the same checks."""
    sources = _read_csv(path)
    if zookeeper and check_zookeeper:
        raise CliError("give --zookeeper or --check-zookeeper, not both", EXIT_USAGE)
    with contextlib.ExitStack() as stack:
        admin = stack.enter_context(admin_client(ctx))  # outermost: it maps only the cluster's errors
        connect = zookeeper or check_zookeeper
        store = stack.enter_context(zookeeper_store(connect)) if connect else None
        target = _ZooKeeper(store) if zookeeper else _Broker(admin)
        _run(ctx, admin, store, target, sources, "file", execute, force, overwrite_newer)
