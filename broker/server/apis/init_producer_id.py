"""InitProducerId (key 22), versions 0-4 (Apache Kafka 2.7's range).

Without a transactional id (idempotent producers, the default of kafka-python 3
and of the Java client since 3.0) each call hands out a fresh producer id with
epoch 0 from the transaction coordinator's :class:`~broker.txn.ProducerIdManager`
(blocks of ids claimed in the metadata store, so ids are never reused across
restarts or brokers). Each partition checks the producer's sequences and epoch
on append (:mod:`broker.log.producer_state`).

With a transactional id the transaction coordinator answers
(:meth:`~broker.txn.TransactionCoordinator.init_producer_id`): the id's producer
id with its epoch bumped, fencing the previous producer of that id; an open
transaction of the previous producer is aborted first (CONCURRENT_TRANSACTIONS
until then; the client retries). INVALID_TRANSACTION_TIMEOUT for a timeout not
in (0, ``transaction.max.timeout.ms``]; NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS as for any coordinator request.

Version notes: v3 adds ``producer_id``/``producer_epoch`` (KIP-360: a producer
that knows its id asks for a bump; a stale one is fenced), v4 may answer
PRODUCER_FENCED, which older versions get as INVALID_PRODUCER_EPOCH.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
a transactional id needs WRITE on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
an idempotent producer (no transactional id) IDEMPOTENT_WRITE on the cluster
(else CLUSTER_AUTHORIZATION_FAILED); a refusal carries producer id and epoch -1.
"""

from __future__ import annotations

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext


def _refused(error: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}


async def handle(ctx: RequestContext, request: dict) -> dict:
    txn = ctx.broker.txn_coordinator
    transactional_id = request["transactional_id"]
    if ctx.broker.authorizer is not None:
        if transactional_id is not None:
            if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif not ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME):
            return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if transactional_id is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                "producer_id": await txn.producer_ids.generate(), "producer_epoch": 0}
    error, producer_id, epoch = await txn.init_producer_id(
        transactional_id, request["transaction_timeout_ms"], request["producer_id"], request["producer_epoch"])
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": int(error), "producer_id": producer_id, "producer_epoch": epoch}


def register(registry) -> None:
    registry.register(ApiKey.INIT_PRODUCER_ID, 0, 4, handle)
