"""The ``__transaction_state`` topic as the transaction coordinator's store: create, append, load.

* :func:`ensure_transaction_topic` creates the topic at first use with Kafka's
  settings: ``transaction.state.log.num.partitions`` partitions (50),
  replication factor ``transaction.state.log.replication.factor`` (capped by the
  live brokers), ``cleanup.policy=compact``, ``min.insync.replicas=
  transaction.state.log.min.isr`` (capped by the replication factor), ``segment.bytes=transaction.state.log.segment.bytes``,
  ``unclean.leader.election.enable=false``, uncompressed.
* :func:`append_record` writes one uncompressed v2 batch holding one
  transactional id's record through the replica layer (the offsets store's
  ``append_replicated``: off the loop, the log dir's writer) and waits until
  the high watermark passes it, so a state the
  coordinator acts on is in every ISR replica (NOT_COORDINATOR if the leadership
  is lost meanwhile, REQUEST_TIMED_OUT after the timeout).
* :func:`read_partition` replays a partition from its log start to its log
  end (a new leader's log is the truth, as Kafka's loader reads it) and returns the last value of every transactional id (tombstones
  remove ids); run in a worker thread, it touches only the log's files.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.coordinator.storage import append_replicated, replay_batches
from broker.protocol import ErrorCode
from broker.records import BatchBuilder
from broker.txn.records import TransactionLogError, TransactionLogValue, decode_key, decode_value

if TYPE_CHECKING:
    from broker.replica import Partition, ReplicaManager

log = logging.getLogger("broker.txn")

TRANSACTION_TOPIC = "__transaction_state"


def transaction_topic_configs(cfg, replication_factor: int) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        # capped by the replication factor, which a small cluster caps in turn: else no write could succeed
        "min.insync.replicas": str(min(cfg.transaction_state_log_min_isr, replication_factor)),
        "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
        "unclean.leader.election.enable": "false",
    }


async def ensure_transaction_topic(broker):
    """The ``__transaction_state`` TopicInfo, created with Kafka's settings if it does not exist."""
    from broker.server.topics import TopicError

    info = broker.topics.get(TRANSACTION_TOPIC)
    if info is not None:
        return info
    cfg = broker.config
    factor = min(cfg.transaction_state_log_replication_factor, len(broker.live_brokers()))
    try:
        return await broker.topics.create_topic(TRANSACTION_TOPIC,
                                                num_partitions=cfg.transaction_state_log_num_partitions,
                                                replication_factor=factor,
                                                configs=transaction_topic_configs(cfg, factor))
    except TopicError as exc:
        if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and broker.topics.get(TRANSACTION_TOPIC) is not None:
            return broker.topics.get(TRANSACTION_TOPIC)
        raise


async def append_record(replicas: "ReplicaManager", p: int, key: bytes, value: bytes | None,
                        timeout_s: float) -> None:
    """Append one record to partition ``p`` (led here) and wait until the ISR has it. Raises StorageError."""
    builder = BatchBuilder()
    builder.append(int(time.time() * 1000), key, value)
    await append_replicated(replicas, TRANSACTION_TOPIC, p, builder.build(), timeout_s)


def read_partition(partition: "Partition") -> tuple[dict[str, TransactionLogValue], int]:
    """Replay a partition (blocking): ({transactional id: last value}, records that did not decode)."""
    state: dict[str, TransactionLogValue] = {}
    bad = 0
    for batch, offset in replay_batches(partition):
        if batch.is_control:
            continue
        for r in batch.records:
            if batch.offset_of(r) < offset:
                continue
            try:
                txn_id = decode_key(r.key or b"")
                if r.value is None:
                    state.pop(txn_id, None)
                else:
                    state[txn_id] = decode_value(r.value)
            except TransactionLogError as exc:
                bad += 1
                log.warning("%s-%d offset %d: %s", partition.topic, partition.partition, batch.offset_of(r), exc)
    return state, bad
