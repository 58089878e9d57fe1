"""``kafkactl partitions reassign``: move partitions between brokers, as Kafka's
``kafka-reassign-partitions.sh``, reading and writing its JSON files.

Reassignment JSON (``--reassignment-json-file``; what ``--generate`` proposes
and ``--execute`` prints for rollback)::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4],
                                   "log_dirs": ["any", "any", "any"]}]}

``log_dirs`` is optional; when given it has one entry per replica: ``"any"``
(the broker picks the dir) or an absolute path among that broker's
``log.dirs``, where the replica is to live (Kafka's replica log dir moves,
below). Topics JSON
(``--topics-to-move-json-file``)::

    {"version": 1, "topics": [{"topic": "t"}]}

Modes (exactly one):

- ``--generate --topics-to-move-json-file F --broker-list 2,3,4``: prints the
  current assignment of those topics and a proposed one over the listed
  brokers (Kafka's rack-aware algorithm, :mod:`broker.cluster.assignment`;
  racks are used when every listed broker has one), each partition keeping
  its replication factor. Changes nothing.
- ``--execute --reassignment-json-file F [--throttle BYTES/S]``: prints the
  current assignment (save it for a rollback) and starts the moves
  (AlterPartitionReassignments). With ``--throttle``, the brokers of the
  moving partitions get ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` (dynamic broker configs) and the
  topics ``leader.replication.throttled.replicas`` (the current replicas) and
  ``follower.replication.throttled.replicas`` (the new ones), as Kafka sets them,
  and the moves start once every broker of the move applies them (at most 30 s;
  exit 1 and nothing moved otherwise), so no copy starts unthrottled. A
  replica with a log dir is sent AlterReplicaLogDirs before the moves start
  (a broker without the replica yet remembers the dir and makes the replica
  there) and again once it exists (at most 30 s; exit 1 if one never
  appears), as Kafka's tool does; a dir that is not one of the broker's live
  log dirs is a one-line error before anything changes.
- ``--verify --reassignment-json-file F``: per partition, complete, still in
  progress, or (exit 1) no move in progress and replicas other than the file's;
  per replica with a log dir (DescribeLogDirs), complete, still in progress,
  or (exit 1) in another dir and not moving to the file's. Once every move is
  complete, the throttles are removed.
- ``--cancel --reassignment-json-file F``: cancels the moves still in progress
  (each partition goes back to its original replicas) and the replica log dir
  moves to the file's dirs still under way, and removes the throttles.

Bad input is one line and exit 2: malformed JSON or a file that is not a
reassignment, an unknown topic or partition, a broker id that is not in the
cluster, an empty or duplicated replica list.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Optional

import typer

from broker.client import ConfigResource, errors
from broker.cluster.assignment import AssignmentError, BrokerRack, assign_replicas_to_brokers
from kafkactl._common import admin_client, require_topics
from kafkactl.errors import EXIT_PROBLEM, CliError

APPLY_LIMIT_S = 30  # how long --execute waits for the brokers to apply a throttle
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"

TopicPartition = tuple[str, int]
Replica = tuple[str, int, int]  # topic, partition, broker (Kafka's TopicPartitionReplica)


def _load(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: malformed {what} JSON: {exc}") from exc


def read_reassignment(path: Path) -> tuple[dict[TopicPartition, list[int]], dict[Replica, str]]:
    """``{(topic, partition): replicas}`` and ``{(topic, partition, broker): log dir}`` (the dirs other than
    "any") from a reassignment JSON file; CliError naming what is wrong."""
    doc = _load(path, "reassignment")
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise CliError(f'{path}: not a reassignment: expected {{"version":1,"partitions":[...]}}')
    out: dict[TopicPartition, list[int]] = {}
    log_dirs: dict[Replica, str] = {}
    for entry in doc["partitions"]:
        if (not isinstance(entry, dict) or not isinstance(entry.get("topic"), str)
                or not isinstance(entry.get("partition"), int) or not isinstance(entry.get("replicas"), list)
                or not all(isinstance(b, int) and not isinstance(b, bool) for b in entry["replicas"])):
            raise CliError(f"{path}: each partition needs \"topic\" (string), \"partition\" (integer) and "
                           f"\"replicas\" (integers): {json.dumps(entry)}")
        tp, replicas = (entry["topic"], entry["partition"]), entry["replicas"]
        name = f"{tp[0]}-{tp[1]}"
        if tp in out:
            raise CliError(f"{path}: partition {name} is listed twice")
        if not replicas:
            raise CliError(f"{path}: partition {name} has an empty replica list")
        if len(set(replicas)) != len(replicas):
            raise CliError(f"{path}: partition {name} has duplicate replicas {replicas}")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise CliError(f"{path}: partition {name}: log_dirs needs one entry per replica")
            for broker, log_dir in zip(replicas, dirs):
                if not isinstance(log_dir, str) or not (log_dir == "any" or log_dir.startswith("/")):
                    raise CliError(f"{path}: partition {name}: log dir {json.dumps(log_dir)} of broker {broker} "
                                   f"is neither \"any\" nor an absolute path")
                if log_dir != "any":
                    log_dirs[(*tp, broker)] = os.path.normpath(log_dir)
        out[tp] = replicas
    if not out:
        raise CliError(f"{path}: no partitions to reassign")
    return out, log_dirs


def write_reassignment(assignment: dict[TopicPartition, list[int]]) -> str:
    """Kafka's reassignment JSON, one line."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _current(admin, topics: list[str]) -> dict[TopicPartition, list[int]]:
    meta = require_topics(admin, sorted(set(topics)))
    return {(t, p): list(pm.replicas) for t, tm in meta.items() for p, pm in tm.partitions.items()}


def _check(admin, targets: dict[TopicPartition, list[int]]) -> dict[TopicPartition, list[int]]:
    """The current replicas of the partitions in ``targets``; CliError for unknown partitions or brokers."""
    current = _current(admin, [t for t, _p in targets])
    missing = [f"{t}-{p}" for t, p in sorted(targets) if (t, p) not in current]
    if missing:
        raise CliError(f"unknown partition: {', '.join(missing)} (UNKNOWN_TOPIC_OR_PARTITION, 3)")
    brokers = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = sorted({b for r in targets.values() for b in r} - brokers)
    if unknown:
        raise CliError(f"broker {', '.join(map(str, unknown))} is not in the cluster "
                       f"(brokers: {', '.join(map(str, sorted(brokers)))})")
    return {tp: current[tp] for tp in targets}


def generate(admin, topics_file: Path, broker_list: str) -> None:
    doc = _load(topics_file, "topics")
    if (not isinstance(doc, dict) or not isinstance(doc.get("topics"), list)
            or not all(isinstance(e, dict) and isinstance(e.get("topic"), str) for e in doc["topics"])):
        raise CliError(f'{topics_file}: not a topics file: expected {{"version":1,"topics":[{{"topic":"..."}}]}}')
    topics = [e["topic"] for e in doc["topics"]]
    if not topics:
        raise CliError(f"{topics_file}: no topics to move")
    try:
        ids = sorted({int(b) for b in broker_list.split(",") if b.strip()})
    except ValueError:
        raise CliError(f"bad --broker-list {broker_list!r}: expected broker ids such as 2,3,4") from None
    if not ids:
        raise CliError("--broker-list names no broker")
    current = _current(admin, topics)
    brokers = {b.node_id: b for b in admin.describe_cluster().brokers}
    unknown = [b for b in ids if b not in brokers]
    if unknown:
        raise CliError(f"broker {', '.join(map(str, unknown))} is not in the cluster "
                       f"(brokers: {', '.join(map(str, sorted(brokers)))})")
    racks = [BrokerRack(b, brokers[b].rack) for b in ids]
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in sorted(set(topics)):
        partitions = sorted(p for t, p in current if t == topic)
        rf = len(current[(topic, partitions[0])])
        try:
            layout = assign_replicas_to_brokers(racks, len(partitions), rf, rack_aware_mode="safe")
        except AssignmentError as exc:
            raise CliError(f"topic {topic}: {exc.message}") from None
        proposed.update({(topic, p): layout[p] for p in partitions})
    typer.echo(f"Current partition replica assignment\n{write_reassignment(current)}\n")
    typer.echo(f"Proposed partition reassignment configuration\n{write_reassignment(proposed)}")


def _throttled(replicas: dict[TopicPartition, list[int]], topic: str) -> str:
    return ",".join(f"{p}:{b}" for (t, p), r in sorted(replicas.items()) if t == topic for b in r)


def _replica_name(replica: Replica) -> str:
    return "-".join(map(str, replica))


def _where(admin, brokers) -> dict[int, dict[str, tuple[str | None, dict[TopicPartition, str]]]]:
    """Per broker, per log dir path: (its error name, {partition: "current" or "future"})."""
    out: dict[int, dict] = {}
    for d in admin.describe_log_dirs(sorted(brokers)):
        out.setdefault(d.broker_id, {})[os.path.normpath(d.path)] = (
            d.error, {(r.topic, r.partition): "future" if r.is_future else "current" for r in d.replicas})
    return out


def _check_log_dirs(admin, log_dirs: dict[Replica, str]) -> None:
    """CliError when a replica's dir is not a live log dir of its broker."""
    where = _where(admin, {b for _t, _p, b in log_dirs})
    for replica, log_dir in sorted(log_dirs.items()):
        dirs = where.get(replica[2], {})
        if log_dir not in dirs:
            raise CliError(f"log dir {log_dir} of replica {_replica_name(replica)} is not a log dir of broker "
                           f"{replica[2]} (its log dirs: {', '.join(sorted(dirs)) or 'none'})")
        if dirs[log_dir][0] is not None:
            raise CliError(f"log dir {log_dir} of broker {replica[2]} is offline ({dirs[log_dir][0]})")


def _move_replicas(admin, log_dirs: dict[Replica, str]) -> list[Replica]:
    """AlterReplicaLogDirs for each replica to its dir; the replicas that do not exist yet."""
    by_broker: dict[int, dict[TopicPartition, str]] = {}
    for (topic, partition, broker), log_dir in log_dirs.items():
        by_broker.setdefault(broker, {})[(topic, partition)] = log_dir
    not_yet = []
    for broker, moves in sorted(by_broker.items()):
        try:
            not_yet += [(t, p, broker) for t, p in admin.alter_replica_log_dirs(broker, moves, not_yet_ok=True)]
        except errors.KafkaError as exc:
            raise CliError(f"moving replicas of broker {broker} between log dirs: {exc}", EXIT_PROBLEM) from None
    return sorted(not_yet)


def execute(admin, targets: dict[TopicPartition, list[int]], log_dirs: dict[Replica, str],
            throttle: int | None) -> None:
    current = _check(admin, targets)
    if log_dirs:
        _check_log_dirs(admin, log_dirs)
    if throttle is not None:
        brokers = sorted({b for tp in targets for b in targets[tp] + current[tp]})
        admin.incremental_alter_configs({ConfigResource("broker", str(b)): {k: str(throttle) for k in RATE_CONFIGS}
                                         for b in brokers})
        adding = {tp: [b for b in targets[tp] if b not in current[tp]] for tp in targets}
        wanted = {t: {LEADER_REPLICAS: _throttled(current, t), FOLLOWER_REPLICAS: _throttled(adding, t) or None}
                  for t in sorted({t for t, _p in targets})}
        admin.incremental_alter_configs({ConfigResource("topic", t): c for t, c in wanted.items()})
        _await_topic_configs(admin, wanted, brokers)
    typer.echo(f"Current partition replica assignment\n\n{write_reassignment(current)}\n\n"
               "Save this to use as the --reassignment-json-file option during rollback")
    not_yet = _move_replicas(admin, log_dirs)  # first: a new replica is made in its dir
    admin.alter_partition_reassignments(targets)
    typer.echo("Successfully started partition reassignments for "
               + ",".join(f"{t}-{p}" for t, p in sorted(targets)))
    deadline = time.monotonic() + APPLY_LIMIT_S
    while not_yet:
        if time.monotonic() > deadline:
            raise CliError(f"replicas {', '.join(map(_replica_name, not_yet))} did not appear within "
                           f"{APPLY_LIMIT_S} s; their log dir moves were not started", EXIT_PROBLEM)
        time.sleep(0.2)
        not_yet = _move_replicas(admin, {r: log_dirs[r] for r in not_yet})
    if log_dirs:
        typer.echo("Successfully started log directory moves for: " + ",".join(map(_replica_name, sorted(log_dirs))))
    if throttle is not None:
        typer.echo(f"The inter-broker throttle limit was set to {throttle} B/s")


def _await_topic_configs(admin, wanted: dict[str, dict[str, str | None]], brokers: list[int]) -> None:
    """Wait until every broker of the move applies the throttled-replica lists (each learns them from a change
    notification), so no replica starts its copy unthrottled."""
    deadline = time.monotonic() + APPLY_LIMIT_S
    for b in brokers:
        for topic, configs in wanted.items():
            res = ConfigResource("topic", topic)
            while True:
                found = admin.describe_configs([res], list(configs), node=b)[res]
                if all((found[k].value if k in found and not found[k].is_default else None) == (v or None)
                       for k, v in configs.items()):
                    break
                if time.monotonic() > deadline:
                    raise CliError(f"broker {b} did not apply the throttle of topic {topic} within "
                                   f"{APPLY_LIMIT_S} s; nothing was moved", EXIT_PROBLEM)
                time.sleep(0.2)


def _clear_throttles(admin, topics: list[str]) -> None:
    brokers = sorted(b.node_id for b in admin.describe_cluster().brokers)
    admin.incremental_alter_configs({ConfigResource("broker", str(b)): {k: None for k in RATE_CONFIGS}
                                     for b in brokers})
    typer.echo(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    admin.incremental_alter_configs({ConfigResource("topic", t): {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}
                                     for t in topics})
    typer.echo(f"Clearing topic-level throttles on topic {','.join(topics)}")


def _log_dir_states(admin, log_dirs: dict[Replica, str], moving) -> tuple[list[str], bool, bool]:
    """Kafka's lines for each replica's log dir move; whether one is under way, whether one failed."""
    where = _where(admin, {b for _t, _p, b in log_dirs})
    lines, ongoing, failed = [], False, False
    for replica, target in sorted(log_dirs.items()):
        tp, name = replica[:2], _replica_name(replica)
        found = {kind: path for path, (_error, held) in where.get(replica[2], {}).items()
                 for p, kind in held.items() if p == tp}
        if found.get("current") == target:
            lines.append(f"Reassignment of replica {name} completed successfully.")
        elif found.get("future") == target or (tp in moving and "current" not in found):
            ongoing = True
            lines.append(f"Reassignment of replica {name} is still in progress.")
        elif "future" in found:
            failed = True
            lines.append(f"Partition {tp[0]}-{tp[1]} on broker {replica[2]} is being moved to log dir "
                         f"{found['future']} instead of {target}.")
        elif "current" not in found:
            failed = True
            lines.append(f"Partition {tp[0]}-{tp[1]} is not found in any live log dir on broker {replica[2]}. "
                         "There is likely an offline log directory on the broker.")
        else:
            failed = True
            lines.append(f"Partition {tp[0]}-{tp[1]} on broker {replica[2]} is not being moved from log dir "
                         f"{found['current']} to {target}.")
    return lines, ongoing, failed


def verify(admin, targets: dict[TopicPartition, list[int]], log_dirs: dict[Replica, str]) -> None:
    current = _check(admin, targets)
    moving = admin.list_partition_reassignments(list(targets))
    failed = False
    typer.echo("Status of partition reassignment:")
    for tp in sorted(targets):
        name = f"{tp[0]}-{tp[1]}"
        if tp in moving:
            typer.echo(f"Reassignment of partition {name} is still in progress.")
        elif current[tp] == targets[tp]:
            typer.echo(f"Reassignment of partition {name} is complete.")
        else:
            failed = True
            typer.echo(f"There is no active reassignment of partition {name}, but replica set is "
                       f"{current[tp]} rather than {targets[tp]}.")
    dirs_moving = False
    if log_dirs:
        lines, dirs_moving, dirs_failed = _log_dir_states(admin, log_dirs, moving)
        typer.echo("\nReassignment of replica log dirs:\n" + "\n".join(lines))
        failed = failed or dirs_failed
    if not moving and not dirs_moving:
        _clear_throttles(admin, sorted({t for t, _p in targets}))
    if failed:
        raise typer.Exit(EXIT_PROBLEM)


def cancel(admin, targets: dict[TopicPartition, list[int]], log_dirs: dict[Replica, str]) -> None:
    _check(admin, targets)
    moving = admin.list_partition_reassignments(list(targets))
    if moving:
        admin.alter_partition_reassignments({tp: None for tp in sorted(moving)})
        typer.echo("Successfully cancelled partition reassignments for: "
                   + ",".join(f"{t}-{p}" for t, p in sorted(moving)))
    else:
        typer.echo("None of the specified partition reassignments are active.")
    if log_dirs:  # a move to the file's dir still under way: the replica stays where it is (a move to its own dir)
        where = _where(admin, {b for _t, _p, b in log_dirs})
        back = {}
        for replica, target in log_dirs.items():
            held = {kind: path for path, (_e, parts) in where.get(replica[2], {}).items()
                    for p, kind in parts.items() if p == replica[:2]}
            if held.get("future") == target and "current" in held:
                back[replica] = held["current"]
        if back:
            _move_replicas(admin, back)
            typer.echo("Successfully cancelled log directory moves for: " + ",".join(map(_replica_name, sorted(back))))
    _clear_throttles(admin, sorted({t for t, _p in targets}))


def reassign(
    ctx: typer.Context,
    do_generate: bool = typer.Option(False, "--generate", help="Propose an assignment over --broker-list."),
    do_execute: bool = typer.Option(False, "--execute", help="Start the moves of the reassignment file."),
    do_verify: bool = typer.Option(False, "--verify", help="Show progress; remove throttles once done."),
    do_cancel: bool = typer.Option(False, "--cancel", help="Cancel the moves still in progress."),
    reassignment_file: Optional[Path] = typer.Option(None, "--reassignment-json-file",
                                                     help="Kafka's reassignment JSON."),
    topics_file: Optional[Path] = typer.Option(None, "--topics-to-move-json-file",
                                               help='{"version":1,"topics":[{"topic":"..."}]} (--generate).'),
    broker_list: Optional[str] = typer.Option(None, "--broker-list", help="Target broker ids, e.g. 2,3,4."),
    throttle: Optional[int] = typer.Option(None, "--throttle", help="Replication throttle in bytes/s (--execute)."),
) -> None:
    """Move partitions between brokers (Kafka's kafka-reassign-partitions)."""
    modes = [m for m, on in (("--generate", do_generate), ("--execute", do_execute), ("--verify", do_verify),
                             ("--cancel", do_cancel)) if on]
    if len(modes) != 1:
        raise CliError("give exactly one of --generate, --execute, --verify, --cancel")
    if do_generate:
        if topics_file is None or broker_list is None:
            raise CliError("--generate needs --topics-to-move-json-file and --broker-list")
    elif reassignment_file is None:
        raise CliError(f"{modes[0]} needs --reassignment-json-file")
    if throttle is not None and not do_execute:
        raise CliError("--throttle goes with --execute")
    if throttle is not None and throttle <= 0:
        raise CliError(f"bad --throttle {throttle}: expected bytes per second above 0")
    # bad input before any connection
    targets, log_dirs = (None, None) if do_generate else read_reassignment(reassignment_file)
    with admin_client(ctx) as admin:
        if do_generate:
            generate(admin, topics_file, broker_list)
        elif do_execute:
            execute(admin, targets, log_dirs, throttle)
        elif do_verify:
            verify(admin, targets, log_dirs)
        else:
            cancel(admin, targets, log_dirs)
