"""InitProducerId (key 22), versions 0-4 (Apache Kafka 2.7's range).

Serves idempotent producers (the default of kafka-python 3 and of the Java
client since 3.0): each call hands out a fresh producer id with epoch 0, taken
from blocks of 1000 claimed in the metadata store (``/latest_producer_id_block``,
compare-and-set), so ids are never reused across restarts or brokers.
Sequence numbers are stored in the batches as sent but not yet checked for
duplicates (that arrives with the producer state of the transactions issue).
Transactional producers (a non-null ``transactional_id``) get
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: transactions are not served yet.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

BLOCK_SIZE = 1000


class _ProducerIds:
    """The current block of producer ids of this broker (loop-only)."""

    def __init__(self) -> None:
        self.next_id = 0
        self.block_end = -1


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    if request["transactional_id"] is not None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    ids = getattr(broker, "producer_ids", None)
    if ids is None:
        ids = broker.producer_ids = _ProducerIds()
    if ids.next_id > ids.block_end:
        start, end = await broker.run_blocking(broker.metadata.allocate_producer_id_block, broker.broker_id,
                                               BLOCK_SIZE)
        if ids.next_id > ids.block_end:
            ids.next_id, ids.block_end = start, end
    producer_id = ids.next_id
    ids.next_id += 1
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}


def register(registry) -> None:
    registry.register(ApiKey.INIT_PRODUCER_ID, 0, 4, handle)
