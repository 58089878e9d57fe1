"""Producer ids: handed out from blocks claimed in the metadata store (Kafka's ``ProducerIdManager``).

A block of :data:`BLOCK_SIZE` ids is claimed with a compare-and-set on
``/latest_producer_id_block`` (:meth:`ClusterMetadata.allocate_producer_id_block`),
so no id is handed out twice, across restarts or across brokers. Idempotent
producers get a fresh id from InitProducerId; the transaction coordinator takes
one for a new transactional id and when an id's epoch is exhausted.
Loop-only (not thread-safe); the store write runs in the executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.server.broker import Broker

BLOCK_SIZE = 1000


class ProducerIdManager:
    """The current block of producer ids of this broker."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.next_id = 0
        self.block_end = -1

    async def generate(self) -> int:
        if self.next_id > self.block_end:
            broker = self.broker
            start, end = await broker.run_blocking(broker.metadata.allocate_producer_id_block, broker.broker_id,
                                                   BLOCK_SIZE)
            if self.next_id > self.block_end:  # another request may have claimed a block meanwhile
                self.next_id, self.block_end = start, end
        producer_id = self.next_id
        self.next_id += 1
        return producer_id
