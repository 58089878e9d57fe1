"""``kafkactl produce TOPIC``: one record per input line, from stdin or ``--file``.

Lines are read as bytes; the line end (``\\n`` or ``\\r\\n``) is not part of the
value. With ``--key-separator SEP`` each line is ``KEY SEP VALUE`` split at the
first SEP, and a line without SEP is an error (exit 2, naming the line);
without it records have a null key. ``--header NAME=VALUE`` (repeatable) is put
on every record. ``--partition`` pins the partition, else keys go where
murmur2 sends them and null keys use the sticky partitioner. ``--compression``,
``--acks`` and any ``--producer-property NAME=VALUE`` configure the producer.

An unknown TOPIC is asked for the way Kafka's producers ask (Metadata allowing
auto topic creation), so a broker with ``auto.create.topics.enable`` creates
it; the command waits up to ``max.block.ms`` (default here
:data:`MAX_BLOCK_MS`) for it to appear, else fails with "unknown topic" (exit 2).

Output: a summary line, or with ``--output json`` one object per record:
``{"topic", "partition", "offset", "timestamp"}`` (offset -1 with ``--acks 0``).
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import BinaryIO, Iterator, List, Optional

import typer

from broker.client import Producer, errors
from kafkactl._common import client_config, cluster_errors, output_format, parse_pairs
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat, emit, emit_lines

MAX_BLOCK_MS = 10_000  # how long to wait for an unknown topic to be auto-created
# Below --command-config and -X; --acks and --compression override all of them.
PRODUCER_DEFAULTS = {"acks": "all", "compression_type": "none", "max_block_ms": MAX_BLOCK_MS}


class Compression(str, enum.Enum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class Acks(str, enum.Enum):
    none = "0"
    leader = "1"
    all = "all"


def producer_options(acks: Acks | None, compression: Compression | None) -> dict:
    """The producer settings the command line gave (those not given leave the lower layers alone)."""
    out = {}
    if acks is not None:
        out["acks"] = acks.value
    if compression is not None:
        out["compression_type"] = compression.value
    return out


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


def produce(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic to write to."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Read lines from this file instead of stdin."),
    key_separator: Optional[str] = typer.Option(None, "--key-separator", "-K",
                                                help="Split each line at the first SEP into key and value."),
    header: Optional[List[str]] = typer.Option(None, "--header", "-H", help="Header NAME=VALUE on every record (repeatable)."),
    partition: Optional[int] = typer.Option(None, "--partition", "-p", min=0, help="Write every record to this partition."),
    compression: Optional[Compression] = typer.Option(None, "--compression", "-z",
                                                      help="Batch compression codec (default: none)."),
    acks: Optional[Acks] = typer.Option(None, "--acks", help="0, 1 or all (default: all)."),
    producer_property: Optional[List[str]] = typer.Option(
        None, "--producer-property", "-X", help="Producer config NAME=VALUE, Kafka names (e.g. linger.ms=10)."),
) -> None:
    """Write lines from stdin (or --file) to TOPIC, one record per line."""
    if key_separator == "":
        raise CliError("--key-separator must not be empty")
    headers = [(k, v.encode()) for k, v in parse_pairs(header, "header").items()]
    props = parse_pairs(producer_property, "producer property")  # text: the client converts it
    if file is not None and not file.is_file():
        raise CliError(f"cannot read {file}: no such file")
    sep = key_separator.encode() if key_separator is not None else None

    futures = []
    fmt = output_format(ctx)
    with cluster_errors(ctx):
        producer = Producer(**client_config(ctx, "producer", props, defaults=PRODUCER_DEFAULTS,
                                            **producer_options(acks, compression)))
        stream = None
        try:
            try:
                partitions = producer.partitions_for(topic)  # may have the broker create it
            except errors.UnknownTopicOrPartitionError:
                raise CliError(f"unknown topic: {topic} (UNKNOWN_TOPIC_OR_PARTITION, 3)") from None
            if partition is not None and partition not in partitions:
                raise CliError(f"topic {topic} has no partition {partition} (it has {len(partitions)})")
            stream = open(file, "rb") if file is not None else sys.stdin.buffer
            for number, line in enumerate(_lines(stream), 1):
                key = None
                if sep is not None:
                    key, found, value = line.partition(sep)
                    if not found:
                        raise CliError(f"line {number} has no key separator {key_separator!r}")
                else:
                    value = line
                futures.append(producer.send(topic, value, key, partition=partition, headers=headers or None))
            producer.flush()
        finally:
            if file is not None and stream is not None:
                stream.close()
            producer.close()
        results = [f.result() for f in futures]
    if fmt is OutputFormat.json:
        emit_lines({"topic": m.topic, "partition": m.partition, "offset": m.offset, "timestamp": m.timestamp}
                   for m in results)
    elif fmt is OutputFormat.yaml:
        emit([{"topic": m.topic, "partition": m.partition, "offset": m.offset, "timestamp": m.timestamp}
              for m in results], fmt)
    else:
        parts = sorted({m.partition for m in results})
        where = f" (partition{'s' if len(parts) > 1 else ''} {','.join(map(str, parts))})" if parts else ""
        print(f"produced {len(results)} record(s) to {topic}{where}", file=sys.stderr)
