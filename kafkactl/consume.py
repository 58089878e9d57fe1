"""``kafkactl consume TOPIC``: print records as they arrive.

Without ``--group`` the command assigns itself every partition of TOPIC (or
``--partition P``) and starts at the end, at the beginning with
``--from-beginning``, or at ``--offset``: an absolute offset, ``-N`` for N
before the end, ``earliest`` or ``latest``. With ``--group`` it joins the group,
starts at the group's committed offsets; a partition with none starts at the
end of the log (Kafka's ``auto.offset.reset=latest``), or at the beginning
with ``--from-beginning`` and commits as it reads and
on exit. ``--offset``/``--partition`` and ``--group`` exclude each other.

It follows the log as ``kafka-console-consumer`` does: it stops after
``--max-messages`` records, when ``--timeout`` seconds pass with no record
(Kafka's ``--timeout-ms``), or on Ctrl-C or SIGTERM, so ``--max-messages``
alone waits until that many records exist; then it prints ``Processed a total of N messages`` on
stderr and exits 0.

Output (``--output table``, the default): one line per record, the value
preceded by the fields asked for, tab-separated (``--separator``)::

    [CreateTime:TS]  [Partition:P  Offset:O]  [h1:v1,h2:v2|NO_HEADERS]  [KEY]  VALUE

Keys, values and header values that are valid UTF-8 print as that text; other
bytes print as ``base64:`` followed by their base64 form, so a terminal never
gets raw binary and the exact bytes can be recovered. A null key or value
prints as ``null``. ``--output json``: one object per line,
``{"topic", "partition", "offset", "timestamp", "timestamp_type", "key",
"value", "headers": [{"key", "value"}]}``; keys and values are text when valid
UTF-8, else base64 with ``key_encoding``/``value_encoding`` set to ``"base64"``.
``--output yaml`` writes one YAML document per record.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Optional

import typer
import yaml

from broker.client import Consumer, TopicPartition
from kafkactl._common import admin_client, client_config, cluster_errors, output_format, parse_pairs, require_topics
from kafkactl.encoding import as_text, put_bytes
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat

POLL_MS = 500


def record_as_json(rec) -> dict:
    """A consumed record in the JSON form documented above."""
    obj = {"topic": rec.topic, "partition": rec.partition, "offset": rec.offset, "timestamp": rec.timestamp,
           "timestamp_type": "LogAppendTime" if rec.timestamp_type == 1 else "CreateTime"}
    put_bytes(obj, "key", rec.key)
    put_bytes(obj, "value", rec.value)
    headers = []
    for name, value in rec.headers or ():
        item = {"key": name}
        put_bytes(item, "value", value)
        headers.append(item)
    obj["headers"] = headers
    return obj


def _shown(data) -> bytes:
    """The table form of a key or value: its text, ``base64:...`` for non-UTF-8 bytes, ``null``."""
    if data is None:
        return b"null"
    shown, encoding = as_text(data)
    return (shown if encoding == "utf-8" else f"base64:{shown}").encode("utf-8")


class _TextFormatter:
    """Kafka's console-consumer layout: optional fields, then the value."""

    def __init__(self, separator: str, key: bool, headers: bool, timestamp: bool, offset: bool) -> None:
        self.sep = separator.encode()
        self.key, self.headers, self.timestamp, self.offset = key, headers, timestamp, offset

    def format(self, rec) -> bytes:
        fields = []
        if self.timestamp:
            kind = "LogAppendTime" if rec.timestamp_type == 1 else "CreateTime"
            fields.append(f"{kind}:{rec.timestamp}".encode())
        if self.offset:
            fields.append(f"Partition:{rec.partition}".encode())
            fields.append(f"Offset:{rec.offset}".encode())
        if self.headers:
            fields.append(b",".join(k.encode() + b":" + _shown(v) for k, v in rec.headers) if rec.headers
                          else b"NO_HEADERS")
        if self.key:
            fields.append(_shown(rec.key))
        fields.append(_shown(rec.value))
        return self.sep.join(fields) + b"\n"


def _start_offset(text: str | None) -> int | str | None:
    if text is None:
        return None
    if text in ("earliest", "latest"):
        return text
    try:
        return int(text)
    except ValueError:
        raise CliError(f"bad --offset {text!r}: expected a number, -N (N before the end), earliest or latest") from None


def consume(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic to read."),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Consume as a member of this group (commits offsets)."),
    from_beginning: bool = typer.Option(False, "--from-beginning", help="Start at the earliest offset (no committed offset)."),
    offset: Optional[str] = typer.Option(None, "--offset",
                                         help="Start offset: N, -N (N before the end), earliest or latest."),
    partition: Optional[int] = typer.Option(None, "--partition", "-p", min=0, help="Only this partition."),
    max_messages: Optional[int] = typer.Option(None, "--max-messages", "-n", min=1, help="Stop after this many records."),
    timeout: Optional[float] = typer.Option(None, "--timeout", "-t", min=0,
                                            help="Stop when no record arrives for this many seconds."),
    print_key: bool = typer.Option(False, "--print-key", help="Print the key before the value."),
    print_headers: bool = typer.Option(False, "--print-headers", help="Print the headers."),
    print_timestamp: bool = typer.Option(False, "--print-timestamp", help="Print the timestamp and its type."),
    print_offset: bool = typer.Option(False, "--print-offset", help="Print partition and offset."),
    separator: str = typer.Option("\t", "--separator", help="Between printed fields (default: a tab)."),
    consumer_property: Optional[list[str]] = typer.Option(
        None, "--consumer-property", "-X", help="Consumer config NAME=VALUE, Kafka names (repeatable)."),
) -> None:
    """Print records of TOPIC to stdout."""
    start = _start_offset(offset)
    if group is not None and (start is not None or partition is not None):
        raise CliError("--offset and --partition cannot be used with --group")
    if start is not None and from_beginning:
        raise CliError("--offset and --from-beginning exclude each other")
    props = parse_pairs(consumer_property, "consumer property")  # text: the client converts it
    with admin_client(ctx) as admin:
        meta = require_topics(admin, [topic])[topic]
    if partition is not None and partition not in meta.partitions:
        raise CliError(f"topic {topic} has no partition {partition} (it has {len(meta.partitions)})")

    fmt = output_format(ctx)
    text = _TextFormatter(separator, print_key, print_headers, print_timestamp, print_offset)
    out = sys.stdout.buffer
    reset = "earliest" if from_beginning or start == "earliest" else "latest"
    config = client_config(ctx, "consumer", props, auto_offset_reset=reset, group_id=group,
                           enable_auto_commit=group is not None)
    count = 0
    stop = _StopFlag()
    with cluster_errors(ctx):
        consumer = Consumer(**config)
        try:
            if group is not None:
                consumer.subscribe([topic])
            else:
                tps = [TopicPartition(topic, p) for p in ([partition] if partition is not None else sorted(meta.partitions))]
                consumer.assign(tps)
                _seek(consumer, tps, start)
            last_record = time.monotonic()
            while (max_messages is None or count < max_messages) and not stop.requested:
                wait_ms = POLL_MS
                if timeout is not None:
                    left = timeout - (time.monotonic() - last_record)
                    if left <= 0:
                        break
                    wait_ms = min(wait_ms, left * 1000)
                records = consumer.poll(wait_ms, max_records=None if max_messages is None else max_messages - count)
                if not records:
                    continue
                last_record = time.monotonic()
                for rec in records:
                    if fmt is OutputFormat.json:
                        out.write(_json_line(rec))
                    elif fmt is OutputFormat.yaml:
                        out.write(b"---\n" + yaml.safe_dump(record_as_json(rec), sort_keys=False).encode())
                    else:
                        out.write(text.format(rec))
                    count += 1
                out.flush()
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:
            _quiet_stdout()
        finally:
            consumer.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)


class _StopFlag:
    """Ctrl-C or SIGTERM ask the poll loop to stop after the current poll (at most
    ``POLL_MS``), so the consumer still commits and leaves its group; a second
    signal stops at once."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


def _json_line(rec) -> bytes:
    return (json.dumps(record_as_json(rec)) + "\n").encode()


def _seek(consumer: Consumer, tps: list[TopicPartition], start: int | str | None) -> None:
    if start is None:
        return  # auto_offset_reset decides: latest, or earliest with --from-beginning
    if start == "earliest":
        consumer.seek_to_beginning(*tps)
    elif start == "latest":
        consumer.seek_to_end(*tps)
    elif start >= 0:
        for tp in tps:
            consumer.seek(tp, start)
    else:
        ends = consumer.end_offsets(tps)
        begins = consumer.beginning_offsets(tps)
        for tp in tps:
            consumer.seek(tp, max(ends[tp] + start, begins[tp]))


def _quiet_stdout() -> None:
    """After the reader of our stdout went away (``| head``): stop Python complaining at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
