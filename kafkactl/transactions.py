"""``kafkactl transactions``: find and end hanging transactions (Kafka's ``kafka-transactions.sh``, KIP-664).

A hanging transaction is one a producer left open in a partition and its
coordinator does not end: the partition's last stable offset stays at the
transaction's first offset, so every read_committed consumer of the partition
stops there.

- ``list``: transactional id, coordinator, state and producer id of every
  transactional id the brokers coordinate (ListTransactions to every broker).
- ``describe ID``: state, producer id and epoch, timeout, start time and
  partitions of one id (DescribeTransactions to its coordinator); an unknown id
  is bad input (TRANSACTIONAL_ID_NOT_FOUND, exit 2).
- ``describe-producers TOPIC PARTITION``: the producers the partition's leader
  keeps state for, with each one's ongoing transaction's first offset
  (``current_txn_start_offset``, ``-`` when none) (DescribeProducers).
- ``abort --topic T --partition P --start-offset N``: finds the producer whose
  ongoing transaction in T-P starts at N (DescribeProducers) and writes an
  ABORT marker for it into that partition with its producer id and epoch and
  the coordinator epoch of its last marker (WriteTxnMarkers to the leader), as
  Kafka's tool does. Only that partition is touched: the coordinator, if it
  still knows the transaction, ends it itself later. No transaction starting at
  N is bad input (exit 2), and nothing is written.

A topic or partition that does not exist is bad input (exit 2); other exit
codes as for every command (:mod:`kafkactl.errors`).
"""

from __future__ import annotations

import time

import typer

from broker.client import Admin, TopicPartition
from kafkactl._common import admin_client, output_format, require_topics
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="List and describe transactions; find and abort hanging ones.", no_args_is_help=True)


def _require_partition(admin: Admin, topic: str, partition: int) -> TopicPartition:
    known = require_topics(admin, [topic])[topic].partitions
    if partition not in known:
        raise CliError(f"topic {topic} has no partition {partition} (it has {len(known)})")
    return TopicPartition(topic, partition)


@app.command("list")
def list_transactions(ctx: typer.Context) -> None:
    """Every transactional id the brokers coordinate, with its state and producer id."""
    with admin_client(ctx) as admin:
        listed = admin.list_transactions()
    rows = [{"transactional_id": t.transactional_id, "coordinator": t.coordinator, "state": t.state,
             "producer_id": t.producer_id} for t in listed]
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print("no transactions")
        return
    emit(rows, fmt, ["transactional_id", "coordinator", "state", "producer_id"])


@app.command()
def describe(ctx: typer.Context, transactional_id: str = typer.Argument(..., help="A transactional id.")) -> None:
    """State, producer, timeout, start time and partitions of one transactional id."""
    with admin_client(ctx) as admin:
        d = admin.describe_transaction(transactional_id)
    started = d.transaction_start_time_ms
    row = {"transactional_id": d.transactional_id, "coordinator": d.coordinator, "state": d.state,
           "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
           "transaction_timeout_ms": d.transaction_timeout_ms,
           "transaction_start_time_ms": started if started >= 0 else None,
           "transaction_duration_ms": int(time.time() * 1000) - started if started >= 0 else None,
           "partitions": [f"{tp.topic}-{tp.partition}" for tp in d.partitions]}
    emit([row] if output_format(ctx) is OutputFormat.table else row, output_format(ctx))


def _producer_rows(admin: Admin, tp: TopicPartition) -> list[dict]:
    return [{"producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
             "coordinator_epoch": s.coordinator_epoch,
             "last_sequence": s.last_sequence if s.last_sequence >= 0 else None,
             "last_timestamp": s.last_timestamp if s.last_timestamp >= 0 else None,
             "current_txn_start_offset": s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None}
            for s in admin.describe_producers(tp)]


@app.command("describe-producers")
def describe_producers(
    ctx: typer.Context,
    topic: str = typer.Argument(..., help="Topic."),
    partition: int = typer.Argument(..., min=0, help="Partition."),
) -> None:
    """The producers a partition keeps state for, and where each one's open transaction starts."""
    with admin_client(ctx) as admin:
        rows = _producer_rows(admin, _require_partition(admin, topic, partition))
    fmt = output_format(ctx)
    if fmt is OutputFormat.table and not rows:
        print(f"no producers in {topic}-{partition}")
        return
    emit(rows, fmt, ["producer_id", "producer_epoch", "coordinator_epoch", "last_sequence", "last_timestamp",
                     "current_txn_start_offset"])


@app.command()
def abort(
    ctx: typer.Context,
    topic: str = typer.Option(..., "--topic", help="Topic of the hanging transaction."),
    partition: int = typer.Option(..., "--partition", min=0, help="Partition of the hanging transaction."),
    start_offset: int = typer.Option(..., "--start-offset", min=0,
                                     help="First offset of the transaction (describe-producers shows it)."),
) -> None:
    """Abort the open transaction that starts at --start-offset in one partition (an ABORT marker)."""
    with admin_client(ctx) as admin:
        tp = _require_partition(admin, topic, partition)
        rows = [r for r in _producer_rows(admin, tp) if r["current_txn_start_offset"] == start_offset]
        if not rows:
            raise CliError(f"no open transaction starts at offset {start_offset} in {topic}-{partition} "
                           f"(see 'kafkactl transactions describe-producers {topic} {partition}')")
        [r] = rows  # one producer per first offset: a batch has one producer
        admin.abort_transaction(tp, r["producer_id"], r["producer_epoch"], r["coordinator_epoch"])
    result = {"topic": topic, "partition": partition, "start_offset": start_offset,
              "producer_id": r["producer_id"], "producer_epoch": r["producer_epoch"],
              "coordinator_epoch": r["coordinator_epoch"]}
    if output_format(ctx) is OutputFormat.table:
        print(f"aborted the transaction of producer {r['producer_id']} (epoch {r['producer_epoch']}) "
              f"starting at offset {start_offset} in {topic}-{partition}")
    else:
        emit(result, output_format(ctx))
