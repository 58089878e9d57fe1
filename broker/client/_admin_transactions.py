"""The admin client's transaction calls (KIP-664, for hanging transactions), mixed into
:class:`~._admin.AsyncAdmin`.

Routing, as Kafka's admin client: ListTransactions to every broker (each lists the
transactional ids it coordinates); DescribeTransactions to the id's coordinator
(FindCoordinator key type TRANSACTION); DescribeProducers and WriteTxnMarkers to the
partition's leader. WriteTxnMarkers is the request a transaction coordinator sends;
an operator sends it only to abort a hanging transaction (``abort_transaction``),
with the producer id, epoch and coordinator epoch the partition's DescribeProducers
answer gave.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._connection import Api
from ._types import TopicPartition
from .errors import error_for_code

COORDINATOR_TRANSACTION = 1  # FindCoordinator key type


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is ongoing
    partitions: list[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    """One producer of a partition, as DescribeProducers answers (-1: none)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class TransactionsAdmin:
    """The transaction calls of :class:`~._admin.AsyncAdmin` (needs its ``_cluster``)."""

    async def list_transactions(self, states: list[str] | None = None,
                                producer_ids: list[int] | None = None) -> list[TransactionListing]:
        """Every transactional id the brokers coordinate (filtered by state names and producer ids)."""
        await self._cluster.refresh_metadata()
        out = []
        for node in sorted(self._cluster.brokers):
            resp = await self._cluster.request(node, Api.LIST_TRANSACTIONS, {
                "state_filters": list(states or ()), "producer_id_filters": list(producer_ids or ())})
            if resp["error_code"]:
                raise error_for_code(resp["error_code"], context=f"ListTransactions on broker {node}")
            out += [TransactionListing(t["transactional_id"], t["producer_id"], t["transaction_state"], node)
                    for t in resp["transaction_states"]]
        return sorted(out, key=lambda t: t.transactional_id)

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """State, producer and partitions of one transactional id (TRANSACTIONAL_ID_NOT_FOUND if unknown)."""
        node = await self._cluster.find_coordinator(transactional_id, COORDINATOR_TRANSACTION)
        resp = await self._cluster.request(node, Api.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
        t = resp["transaction_states"][0]
        if t["error_code"]:
            raise error_for_code(t["error_code"], context=f"transactional id {transactional_id}")
        return TransactionDescription(
            t["transactional_id"], node, t["transaction_state"], t["producer_id"], t["producer_epoch"],
            t["transaction_timeout_ms"], t["transaction_start_time_ms"],
            sorted(TopicPartition(x["topic"], p) for x in t["topics"] for p in x["partitions"]))

    async def _leader(self, tp: TopicPartition) -> int:
        """The partition's leader; UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist,
        LEADER_NOT_AVAILABLE while it has none."""
        pm = (await self.describe_topics([tp.topic]))[tp.topic].partitions.get(tp.partition)
        if pm is None:
            raise error_for_code(3, f"no partition {tp.partition} in topic {tp.topic}")
        if pm.leader < 0:
            raise error_for_code(5, context=f"{tp.topic}-{tp.partition}")
        return pm.leader

    async def describe_producers(self, tp: TopicPartition) -> list[ProducerState]:
        """The producers the partition's leader keeps state for, by producer id."""
        tp = TopicPartition(*tp)
        node = await self._leader(tp)
        resp = await self._cluster.request(node, Api.DESCRIBE_PRODUCERS, {
            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}]})
        p = resp["topics"][0]["partitions"][0]
        if p["error_code"]:
            raise error_for_code(p["error_code"], p.get("error_message"), context=f"{tp.topic}-{tp.partition}")
        return sorted((ProducerState(a["producer_id"], a["producer_epoch"], a["last_sequence"], a["last_timestamp"],
                                     a["coordinator_epoch"], a["current_txn_start_offset"])
                       for a in p["active_producers"]), key=lambda s: s.producer_id)

    async def abort_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int) -> None:
        """Write an ABORT marker for ``producer_id``'s transaction into ``tp`` (WriteTxnMarkers to its leader)."""
        tp = TopicPartition(*tp)
        node = await self._leader(tp)
        resp = await self._cluster.request(node, Api.WRITE_TXN_MARKERS, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
            "coordinator_epoch": coordinator_epoch}]})
        for m in resp["markers"]:
            for t in m["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise error_for_code(p["error_code"], context=f"{t['name']}-{p['partition_index']}")
