"""Transaction markers: COMMIT/ABORT control batches written into the partitions of a transaction.

:func:`write_markers` is what a broker does with a WriteTxnMarkers request
(Kafka's ``ReplicaManager.appendRecords`` with the coordinator as origin): for
each marker and each of its partitions this broker leads it appends one control
batch (transactional and control bits set, the producer id and epoch of the
transaction, one record: key ``(version 0, type ABORT 0 | COMMIT 1)``, value
``(version 0, coordinator_epoch)``, see :mod:`broker.records.control`) through
the normal append path, waits until the high watermark passes it (acks=all),
and for a partition of ``__consumer_offsets`` then makes the transaction's
pending offsets visible (commit) or drops them (abort) in the group coordinator.

Per partition errors, as Kafka answers them: UNKNOWN_TOPIC_OR_PARTITION (no
such topic: the coordinator gives up on that partition), NOT_LEADER_OR_FOLLOWER
(not led here), NOT_ENOUGH_REPLICAS (the ISR is below the partition's
``min.insync.replicas``: a marker is an acks=all append), REQUEST_TIMED_OUT,
the log's own codes; the coordinator retries all but the first.

The transaction coordinator's :mod:`broker.txn.marker_channel` calls
:func:`write_marker` directly for the partitions this broker leads (a single
node: all of them) instead of sending itself the request, and sends
WriteTxnMarkers to the leaders of the others.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from broker.coordinator.storage import OFFSETS_TOPIC
from broker.log import CorruptRecordError, LogError
from broker.protocol import ErrorCode
from broker.records.control import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.txn")


async def write_marker(broker: "Broker", producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, topic: str, partition_index: int, timeout_s: float) -> int:
    """Append one marker to ``topic-partition_index``; returns the error code (NONE when written)."""
    replicas = broker.replicas
    partition = replicas.partition(topic, partition_index)
    if partition is None:
        # Not the replica manager's missing_error: the topic manager knows the topic before the metadata
        # cache's first UpdateMetadata, and UNKNOWN_TOPIC_OR_PARTITION makes the coordinator give up on the
        # marker for good (a hanging transaction), where NOT_LEADER_OR_FOLLOWER only makes it retry.
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER if broker.topics.get(topic) is not None
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if len(partition.isr) < partition.config.min_insync_replicas:  # an acks=all append, as Kafka's
        return ErrorCode.NOT_ENOUGH_REPLICAS
    marker = EndTransactionMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                  coordinator_epoch)
    batch = build_end_txn_marker_batch(marker, producer_id, producer_epoch, int(time.time() * 1000))
    try:
        info = await replicas.append_records(partition, batch, asyncio.get_running_loop())
    except (LogError, CorruptRecordError) as exc:
        log.warning("marker for producer %d in %s-%d failed: %s", producer_id, topic, partition_index, exc)
        return getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
    except ValueError:  # the log was closed under us (topic deleted, shutdown)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if not await replicas.wait_for_high_watermark(partition, info.last_offset, timeout_s):
        return ErrorCode.REQUEST_TIMED_OUT
    if topic == OFFSETS_TOPIC:
        broker.coordinator.complete_txn_offsets(producer_id, partition_index, commit)
    return ErrorCode.NONE


async def write_markers(broker: "Broker", markers: list[dict], timeout_s: float) -> list[dict]:
    """The WriteTxnMarkers response's ``markers`` for the request's ``markers`` (all written concurrently)."""
    out = []
    for m in markers:
        commit = bool(m["transaction_result"])
        topics = []
        for t in m["topics"]:
            codes = await asyncio.gather(*(
                write_marker(broker, m["producer_id"], m["producer_epoch"], commit, m["coordinator_epoch"],
                             t["name"], p, timeout_s) for p in t["partition_indexes"]))
            topics.append({"name": t["name"], "partitions": [
                {"partition_index": p, "error_code": int(c)} for p, c in zip(t["partition_indexes"], codes)]})
        out.append({"producer_id": m["producer_id"], "topics": topics})
    return out
