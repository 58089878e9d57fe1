"""Sending transaction markers to the partitions' leaders: Kafka's ``TransactionMarkerChannelManager``.

The coordinator completes a transaction by having a COMMIT or ABORT marker
written into each of its partitions by that partition's current leader.
:meth:`MarkerChannel.send_markers` does one round of that for one transaction:

* each partition's leader is read from the metadata cache (the controller's
  UpdateMetadata keeps it current, so a retry after a leader change goes to the
  new leader without asking anyone);
* a partition whose topic is no longer in the cache (deleted) answers
  UNKNOWN_TOPIC_OR_PARTITION, which the coordinator takes as done, as Kafka
  skips such partitions; one without a live leader answers
  LEADER_NOT_AVAILABLE (retried);
* partitions led by this broker are written here directly
  (:func:`broker.txn.markers.write_marker`, the WriteTxnMarkers handler's own
  path: a single node never uses the network);
* the others go to one queue per destination broker. Each queue's task takes
  everything queued for its broker (markers of several transactions) and sends
  it as one WriteTxnMarkers request on its own connection, one request at a
  time; the per-partition codes go back to each transaction's round. A request
  that fails (no connection, the broker died, a timeout) answers
  NOT_LEADER_OR_FOLLOWER for its partitions, so the coordinator retries them
  with whatever leader the cache names by then, and the connection is made
  again for the next request.

A queue whose broker leaves the cache's live brokers is closed (its waiting
rounds get NOT_LEADER_OR_FOLLOWER). Loop-only (not thread-safe).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.acl import RefusalWarning
from broker.protocol import ApiKey, ErrorCode
from broker.server.broker_link import BrokerLink
from broker.txn.markers import write_marker

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.txn")

TopicPartition = tuple[str, int]
#: WriteTxnMarkers waits for the ISR up to 30 s at the leader; the connection waits a little longer
REQUEST_TIMEOUT_MS = 40000
CONNECT_TIMEOUT_MS = 5000


def _marker_request(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartition]) -> dict:
    topics: dict[str, list[int]] = {}
    for topic, p in partitions:
        topics.setdefault(topic, []).append(p)
    return {"producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in sorted(topics.items())],
            "coordinator_epoch": coordinator_epoch}


def _endpoint_of(broker, broker_id: int):
    """``broker_id``'s inter-broker listener, or None when it is not alive (or has no such listener)."""
    info = broker.metadata_cache.broker(broker_id)
    return None if info is None else info.listener(broker.config.inter_broker_listener)


class _DestinationQueue:
    """The markers waiting for one broker and the task that sends them, batched, one request at a time."""

    def __init__(self, channel: "MarkerChannel", broker_id: int) -> None:
        self.channel = channel
        self.broker_id = broker_id
        self.queue: asyncio.Queue = asyncio.Queue()
        self.link = BrokerLink(broker_id, lambda: _endpoint_of(channel.broker, broker_id),
                               client_id=f"txn-coordinator-{channel.broker.broker_id}",
                               request_timeout_ms=REQUEST_TIMEOUT_MS, connect_timeout_ms=CONNECT_TIMEOUT_MS,
                               ssl_context=lambda: channel.broker.tls.inter_broker, sasl=channel.broker.inter_broker_sasl)
        self._refusals = RefusalWarning(log)
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            batch = [await self.queue.get()]
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            try:
                response = await self.link.request(ApiKey.WRITE_TXN_MARKERS,
                                                   {"markers": [marker for marker, _ in batch]})
            except asyncio.CancelledError:
                self._fail(batch)
                raise
            except Exception as exc:  # refused, lost, timed out: the leader may have moved or died
                log.info("WriteTxnMarkers to broker %d failed: %s", self.broker_id, exc)
                self.link.disconnect()
                self._fail(batch)
                continue
            # the answer lists the request's markers in order (Kafka's leader answers per producer id,
            # in the order asked); a partition it leaves out is retried
            answers = response["markers"]
            for i, (marker, future) in enumerate(batch):
                answer = answers[i] if i < len(answers) else {"topics": []}
                codes = {(t["name"], p["partition_index"]): p["error_code"]
                         for t in answer["topics"] for p in t["partitions"]}
                if ErrorCode.CLUSTER_AUTHORIZATION_FAILED in codes.values():
                    self._refusals.refused(f"WriteTxnMarkers to broker {self.broker_id}")
                if not future.done():
                    future.set_result({(t["name"], p): codes.get((t["name"], p), ErrorCode.UNKNOWN_SERVER_ERROR)
                                       for t in marker["topics"] for p in t["partition_indexes"]})

    @staticmethod
    def _fail(batch) -> None:
        for marker, future in batch:
            if not future.done():
                future.set_result({(t["name"], p): ErrorCode.NOT_LEADER_OR_FOLLOWER
                                   for t in marker["topics"] for p in t["partition_indexes"]})

    def close(self) -> None:
        self.task.cancel()
        self.link.disconnect()
        while not self.queue.empty():
            self._fail([self.queue.get_nowait()])


class MarkerChannel:
    """See the module docstring."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self._queues: dict[int, _DestinationQueue] = {}

    async def send_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                           partitions: list[TopicPartition], timeout_s: float) -> dict[TopicPartition, int]:
        """One round of markers for one transaction: each partition's error code (NONE when written)."""
        cache = self.broker.metadata_cache
        self._drop_dead_queues()
        codes: dict[TopicPartition, int] = {}
        remote: dict[int, list[TopicPartition]] = {}
        local: list[TopicPartition] = []
        for tp in partitions:
            meta = cache.partition(*tp)
            if meta is None:
                codes[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if cache.topic(tp[0]) is None
                             else ErrorCode.LEADER_NOT_AVAILABLE)
            elif meta.leader == self.broker.broker_id:
                local.append(tp)
            elif meta.leader < 0 or cache.broker(meta.leader) is None:
                codes[tp] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                remote.setdefault(meta.leader, []).append(tp)
        waits = []
        for broker_id, tps in remote.items():
            future = asyncio.get_running_loop().create_future()
            self._queue(broker_id).queue.put_nowait(
                (_marker_request(producer_id, producer_epoch, commit, coordinator_epoch, tps), future))
            waits.append(future)
        local_codes = asyncio.gather(*(write_marker(self.broker, producer_id, producer_epoch, commit,
                                                    coordinator_epoch, t, p, timeout_s) for t, p in local))
        for tp, code in zip(local, await local_codes):
            codes[tp] = code
        for answer in await asyncio.gather(*waits):
            codes.update(answer)
        return codes

    def _queue(self, broker_id: int) -> _DestinationQueue:
        queue = self._queues.get(broker_id)
        if queue is None:
            queue = self._queues[broker_id] = _DestinationQueue(self, broker_id)
        return queue

    def _drop_dead_queues(self) -> None:
        cache = self.broker.metadata_cache
        for broker_id in [b for b in self._queues if cache.broker(b) is None]:
            self._queues.pop(broker_id).close()

    def close(self) -> None:
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
