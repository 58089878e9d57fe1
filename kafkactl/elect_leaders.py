"""``kafkactl partitions elect-leaders``: preferred and unclean leader elections, as kafka-leader-election.sh.

Which partitions: ``--topic T --partition P``, ``--all-topic-partitions``, or
``--path-to-json-file F`` holding Kafka's ``{"partitions": [{"topic": "T",
"partition": P}, ...]}``; exactly one of them. The controller runs the
elections (ElectLeaders); the answer is printed as Kafka's tool prints it::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: PREFERRED_LEADER_NOT_AVAILABLE: ...

(``-o json|yaml``: one row per partition with its result instead.) Exit codes:
0 when every partition has a valid leader (elected now or already: Kafka's
ELECTION_NOT_NEEDED is no failure); an unknown topic, a partition it does not
have, or a bad JSON file is bad input (2, one line); a partition that could
not be elected is a refusal (1).
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer

from broker.client import errors
from kafkactl._common import admin_client, output_format, require_topics
from kafkactl.errors import EXIT_PROBLEM, EXIT_USAGE, CliError
from kafkactl.output import OutputFormat, emit

NONE, UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED = 0, 3, 84


class ElectionType(str, Enum):
    preferred = "preferred"
    unclean = "unclean"


def _from_json_file(path: Path) -> list[tuple[str, int]]:
    try:
        doc = json.loads(path.read_text())
        partitions = [(str(p["topic"]), int(p["partition"])) for p in doc["partitions"]]
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{path}: not a leader election file ({{\"partitions\": [{{\"topic\": ..., "
                       f"\"partition\": ...}}]}}): {exc}") from exc
    if len(set(partitions)) != len(partitions):
        raise CliError(f"{path}: a partition is listed twice")
    return partitions


def _which(topic: str | None, partition: int | None, all_partitions: bool, json_file: Path | None
           ) -> list[tuple[str, int]] | None:
    given = sum([topic is not None or partition is not None, all_partitions, json_file is not None])
    if given != 1:
        raise CliError("give exactly one of --topic with --partition, --all-topic-partitions, --path-to-json-file")
    if all_partitions:
        return None
    if json_file is not None:
        return _from_json_file(json_file)
    if topic is None or partition is None:
        raise CliError("--topic and --partition go together")
    return [(topic, partition)]


def elect_leaders(
    ctx: typer.Context,
    election_type: ElectionType = typer.Option(..., "--election-type", help="preferred or unclean."),
    topic: str = typer.Option(None, "--topic", help="The topic (with --partition)."),
    partition: int = typer.Option(None, "--partition", min=0, help="The partition (with --topic)."),
    all_partitions: bool = typer.Option(False, "--all-topic-partitions", help="Every partition of the cluster."),
    json_file: Path = typer.Option(None, "--path-to-json-file", metavar="FILE",
                                   help='{"partitions": [{"topic": T, "partition": P}, ...]}'),
) -> None:
    """Elect the preferred leader, or (unclean) any live replica of a leaderless partition."""
    partitions = _which(topic, partition, all_partitions, json_file)
    kind = election_type.value.upper()
    with admin_client(ctx) as admin:
        if partitions is not None:
            require_topics(admin, sorted({t for t, _p in partitions}))
        results = admin.elect_leaders(election_type.value, partitions)
    fmt = output_format(ctx)
    if fmt is not OutputFormat.table:
        emit([{"topic": t, "partition": p, "error": errors.error_for_code(code).error_name if code else None,
               "message": message} for (t, p), (code, message) in sorted(results.items())], fmt)
    else:
        _print(kind, results)
    failed = {tp: code for tp, (code, _m) in results.items() if code not in (NONE, ELECTION_NOT_NEEDED)}
    if failed:
        unknown = all(code == UNKNOWN_TOPIC_OR_PARTITION for code in failed.values())
        raise CliError(f"{len(failed)} replica(s) could not be elected", EXIT_USAGE if unknown else EXIT_PROBLEM)


def _print(kind: str, results: dict) -> None:
    names = {code: [f"{t}-{p}" for (t, p), (c, _m) in sorted(results.items()) if c == code]
             for code in (NONE, ELECTION_NOT_NEEDED)}
    if names[NONE]:
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(names[NONE])}")
    if names[ELECTION_NOT_NEEDED]:
        print(f"Valid replica already elected for partitions {', '.join(names[ELECTION_NOT_NEEDED])}")
    for (t, p), (code, message) in sorted(results.items()):
        if code not in (NONE, ELECTION_NOT_NEEDED):
            name = errors.error_for_code(code).error_name
            print(f"Error completing leader election ({kind}) for partition: {t}-{p}: {name}"
                  + (f": {message}" if message else ""))
