"""What the cluster commands share: clients built from the global options,
client errors mapped to one line and an exit code, and parsers for the
values operators type (``k=v`` pairs, ``topic:0,1,2``, datetimes, ISO-8601
durations).

Error mapping (codes from :mod:`kafkactl.errors`)::

    KafkaConnectionError                -> 3 "cannot reach the cluster at HOST:PORT: ..."
    AuthenticationError (SASL)          -> "cannot authenticate to the cluster at HOST:PORT: ...":
                                           1 SASL_AUTHENTICATION_FAILED (refused), 2
                                           UNSUPPORTED_SASL_MECHANISM (the setting), 3 otherwise
    KafkaTimeoutError                   -> 3 "the cluster at HOST:PORT did not answer in time: ..."
    BrokerResponseError                 -> "NAME (code): message", exit by :func:`exit_code_for`:
                                           1 refused, 2 about the input, 3 anything else
    ProtocolError (incl. unsupported)   -> 3
    ConfigError (bad client property)   -> 2
    other KafkaError                    -> 1

A command runs its client calls inside :func:`cluster_errors` so that every
failure the cluster causes ends as one line.
"""

from __future__ import annotations

import contextlib
import re
import time
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator

import typer

from broker.client import Admin, TopicPartition, errors
from kafkactl.errors import EXIT_CLUSTER, EXIT_PROBLEM, EXIT_USAGE, CliError
from kafkactl.output import OutputFormat
from kafkactl.settings import Settings

def settings(ctx: typer.Context) -> Settings:
    """The global options (see :mod:`kafkactl.settings`)."""
    return ctx.find_root().obj


def output_format(ctx: typer.Context) -> OutputFormat:
    return settings(ctx).output


def client_config(ctx: typer.Context, kind: str, props: dict[str, str] | None = None,
                  defaults: dict[str, Any] | None = None, **command: Any) -> dict[str, Any]:
    """Keyword configuration for a client of ``kind``: see :meth:`Settings.client_config`."""
    return settings(ctx).client_config(kind, props, defaults, **command)


# Kafka's error names by what they say about the request (see kafkactl.errors).
REFUSED = frozenset({"NON_EMPTY_GROUP", "TOPIC_ALREADY_EXISTS", "POLICY_VIOLATION", "GROUP_SUBSCRIBED_TO_TOPIC",
                     "TOPIC_DELETION_DISABLED", "REASSIGNMENT_IN_PROGRESS", "GROUP_MAX_SIZE_REACHED",
                     "SASL_AUTHENTICATION_FAILED", "SECURITY_DISABLED", "DELEGATION_TOKEN_AUTH_DISABLED",
                     "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "DELEGATION_TOKEN_OWNER_MISMATCH",
                     "DELEGATION_TOKEN_EXPIRED"})
ABOUT_THE_INPUT = frozenset({
    "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID", "GROUP_ID_NOT_FOUND", "INVALID_GROUP_ID",
    "INVALID_TOPIC_EXCEPTION", "INVALID_CONFIG", "INVALID_PARTITIONS", "INVALID_REPLICATION_FACTOR",
    "INVALID_REPLICA_ASSIGNMENT", "MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD",
    "INVALID_TIMESTAMP", "INVALID_REQUIRED_ACKS", "OFFSET_METADATA_TOO_LARGE", "LOG_DIR_NOT_FOUND",
    "TRANSACTIONAL_ID_NOT_FOUND", "UNSUPPORTED_SASL_MECHANISM", "RESOURCE_NOT_FOUND", "DUPLICATE_RESOURCE",
    "UNACCEPTABLE_CREDENTIAL", "DELEGATION_TOKEN_NOT_FOUND", "INVALID_PRINCIPAL_TYPE",
})


def exit_code_for(exc: errors.BrokerResponseError) -> int:
    """The exit code an error answer of the cluster means (see :mod:`kafkactl.errors`)."""
    name = exc.error_name
    if name in REFUSED or name.endswith("_AUTHORIZATION_FAILED"):
        return EXIT_PROBLEM
    if name in ABOUT_THE_INPUT:
        return EXIT_USAGE
    return EXIT_CLUSTER


def error_for(ctx: typer.Context, exc: errors.KafkaError) -> CliError:
    """The one line and exit code for a client error (the table in the module docstring)."""
    if isinstance(exc, errors.KafkaConnectionError):
        return CliError(f"cannot reach the cluster at {settings(ctx).bootstrap()}: {exc}", EXIT_CLUSTER)
    if isinstance(exc, errors.KafkaTimeoutError):
        return CliError(f"the cluster at {settings(ctx).bootstrap()} did not answer in time: {exc}", EXIT_CLUSTER)
    if isinstance(exc, errors.ConfigError):
        return CliError(str(exc), EXIT_USAGE)
    if isinstance(exc, errors.AuthenticationError):
        return CliError(f"cannot authenticate to the cluster at {settings(ctx).bootstrap()}: {exc}",
                        exit_code_for(exc))
    if isinstance(exc, errors.BrokerResponseError):
        return CliError(str(exc), exit_code_for(exc))
    if isinstance(exc, errors.ProtocolError):
        return CliError(f"{type(exc).__name__}: {exc}", EXIT_CLUSTER)
    return CliError(f"{type(exc).__name__}: {exc}", EXIT_PROBLEM)


@contextlib.contextmanager
def cluster_errors(ctx: typer.Context) -> Iterator[None]:
    """Turn client exceptions raised inside the block into :class:`CliError`."""
    try:
        yield
    except errors.KafkaError as exc:
        raise error_for(ctx, exc) from exc


@contextlib.contextmanager
def admin_client(ctx: typer.Context) -> Iterator[Admin]:
    """A connected :class:`Admin` (closed on exit), with client errors mapped as above."""
    with cluster_errors(ctx):
        admin = Admin(**client_config(ctx, "admin"))
        try:
            yield admin
        finally:
            admin.close()


def require_topics(admin: Admin, topics: list[str]) -> dict:
    """Topic metadata of ``topics``; an unknown one is a one-line error (exit 2)."""
    try:
        return admin.describe_topics(topics)
    except errors.UnknownTopicOrPartitionError as exc:
        known = set(admin.list_topics(internal=True))
        missing = ", ".join(t for t in topics if t not in known) or ", ".join(topics)
        raise CliError(f"unknown topic: {missing} (UNKNOWN_TOPIC_OR_PARTITION, 3)") from exc


# -- value parsers ---------------------------------------------------------------


def parse_pairs(items: list[str] | None, what: str = "config") -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; a missing ``=`` is a usage error."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CliError(f"bad {what} {item!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out


def parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """``"orders"`` -> ``("orders", None)`` (all partitions); ``"orders:0,2"`` -> ``("orders", [0, 2])``."""
    topic, sep, parts = spec.rpartition(":")
    if not sep:
        return spec, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise CliError(f"bad topic spec {spec!r}: expected TOPIC or TOPIC:PARTITION[,PARTITION...]") from None
    if not topic or not partitions or partitions[0] < 0:
        raise CliError(f"bad topic spec {spec!r}: expected TOPIC or TOPIC:PARTITION[,PARTITION...]")
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """An ISO-8601 date-time (``2024-05-01T12:00:00``, ``...T12:00:00.250+02:00``, ``...Z``)
    or milliseconds since the epoch, as epoch milliseconds. Without a zone, local time
    (as Kafka's tools read it)."""
    text = text.strip()
    if re.fullmatch(r"\d{10,}", text):
        return int(text)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"bad datetime {text!r}: expected YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM|Z] or epoch milliseconds"
        ) from None
    if value.tzinfo is None:
        value = value.astimezone()  # local time zone
    return int(value.timestamp() * 1000)


_DURATION = re.compile(
    r"(?P<sign>[-+])?P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration ``PnDTnHnMnS`` (as Kafka's ``--by-duration`` takes, e.g. ``PT10M``,
    ``P1DT2H``) as milliseconds. A leading ``-`` is accepted and ignored: the duration
    always means "that long before now"."""
    match = _DURATION.fullmatch(text.strip())
    if not match or not any(match.group(g) for g in ("days", "hours", "minutes", "seconds")) \
            or text.strip().upper().endswith("T"):
        raise CliError(f"bad duration {text!r}: expected ISO-8601 PnDTnHnMnS, e.g. PT10M or P1DT12H")
    parts = {g: float(match.group(g) or 0) for g in ("days", "hours", "minutes", "seconds")}
    return int(timedelta(**parts).total_seconds() * 1000)


def now_ms() -> int:
    return int(time.time() * 1000)


def tp_key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def read_secret(path: Path | None, stdin: bool, what: str) -> str:
    """A secret (a password, a token's HMAC) from ``--<what>-file FILE`` or ``--<what>-stdin``: all of it, less
    one trailing newline (``\\n`` or ``\\r\\n``); it must be one non-empty line of UTF-8."""
    if (path is None) == (not stdin):
        raise CliError(f"give the {what} with --{what}-file FILE or --{what}-stdin (one of them)")
    if stdin:
        data = sys.stdin.buffer.read()
        where = "standard input"
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
        where = str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(f"the {what} in {where} is not UTF-8") from None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise CliError(f"the {what} in {where} is empty")
    if "\n" in text or "\r" in text:
        raise CliError(f"the {what} in {where} is more than one line")
    return text


def refuse_secret_argument(value: str | None, what: str) -> None:
    """Refuse a secret given on the command line (``--password``, ``--hmac``): every user of the machine can
    read a process's argv (ps, /proc/PID/cmdline) while it runs, and shells keep it in their history.
    Scripts have ``--<what>-stdin`` (``printf '%s' "$X" | kafkactl ...``) and ``--<what>-file`` (also
    ``<(...)`` or ``/dev/fd/N``), which show nothing. The option exists only to say so."""
    if value is not None:
        raise CliError(f"kafkactl takes no {what} on its command line (ps and the shell's history would show "
                       f"it): use --{what}-stdin or --{what}-file FILE")
