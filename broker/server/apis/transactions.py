"""The transaction coordinator's APIs: AddPartitionsToTxn (24, v0-3), AddOffsetsToTxn (25, v0-3),
EndTxn (26, v0-3), DescribeTransactions (65, v0), ListTransactions (66, v0).

Each is answered by :class:`broker.txn.TransactionCoordinator` (see its module
for the states and errors), the same way on every version:

* AddPartitionsToTxn: partitions of unknown topics (or beyond a topic's
  partition count) get UNKNOWN_TOPIC_OR_PARTITION and the others
  OPERATION_NOT_ATTEMPTED, as Kafka answers; otherwise every partition gets the
  coordinator's one answer.
* AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition to the
  transaction (created at first use, as FindCoordinator does).
* EndTxn: ``committed`` true commits, false aborts; answered once
  PrepareCommit/PrepareAbort is in ``__transaction_state``, the markers follow.
* DescribeTransactions (KIP-664): per id its state, timeout, start time,
  producer id/epoch and partitions; TRANSACTIONAL_ID_NOT_FOUND for an unknown id.
* ListTransactions (KIP-664): the ids this broker coordinates, filtered by
  state names (unknown names are echoed in ``unknown_state_filters``) and producer ids.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka's KafkaApis, 2.7 and,
for KIP-664's APIs, 3.0):

* AddPartitionsToTxn: WRITE on the transactional id (else every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic: a partition
  of a topic without it, or of an internal topic (never added by a client),
  gets TOPIC_AUTHORIZATION_FAILED, and as with unknown partitions nothing is
  added (the others OPERATION_NOT_ATTEMPTED).
* AddOffsetsToTxn: WRITE on the transactional id (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else
  GROUP_AUTHORIZATION_FAILED).
* EndTxn: WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
* DescribeTransactions: DESCRIBE on each id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  with empty fields); the partitions of topics without DESCRIBE are left out.
* ListTransactions: only the ids the principal may DESCRIBE are listed.

Version notes: AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2 may answer
PRODUCER_FENCED (KIP-588), which v0-1 get as INVALID_PRODUCER_EPOCH; v3 is flexible.
"""

from __future__ import annotations

from broker.acl import AclOperation, ResourceType
from broker.coordinator.storage import OFFSETS_TOPIC, StorageError
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext
from broker.server.metadata_cache import INTERNAL_TOPICS
from broker.txn import TransactionState

WRITE, READ, DESCRIBE = AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE
TOPIC, GROUP, TRANSACTIONAL_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID


def _fenced_for(version: int, error: int) -> int:
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and version < 2 else int(error)


async def add_partitions_to_txn(ctx: RequestContext, request: dict) -> dict:
    topics = ctx.broker.topics
    wanted = [(t["name"], p) for t in request["topics"] for p in t["partitions"]]
    failed: dict[tuple[str, int], int] = {}
    denied: set[str] = set()
    if ctx.broker.authorizer is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request["transactional_id"]):
            return _every_partition(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        names = {t["name"] for t in request["topics"]}
        denied = names - ctx.authorized(WRITE, TOPIC, names - INTERNAL_TOPICS)
    for name, p in wanted:
        if denied and name in denied:
            failed[(name, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        info = topics.get(name)
        if info is None or p not in info.partitions:
            failed[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if failed:
        codes = {tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    else:
        error = await ctx.broker.txn_coordinator.add_partitions(
            request["transactional_id"], request["producer_id"], request["producer_epoch"], set(wanted))
        codes = {tp: _fenced_for(ctx.api_version, error) for tp in wanted}
    return {"throttle_time_ms": 0, "results": [
        {"name": t["name"], "results": [{"partition_index": p, "error_code": int(codes[(t["name"], p)])}
                                        for p in t["partitions"]]} for t in request["topics"]]}


def _every_partition(request: dict, error: int) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"name": t["name"], "results": [{"partition_index": p, "error_code": error} for p in t["partitions"]]}
        for t in request["topics"]]}


async def add_offsets_to_txn(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    if broker.authorizer is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request["transactional_id"]):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        if not ctx.authorize(READ, GROUP, request["group_id"]):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    try:
        await broker.coordinator.ensure_topic()
    except StorageError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    partition = (OFFSETS_TOPIC, broker.coordinator.partition_for(request["group_id"]))
    error = await broker.txn_coordinator.add_partitions(
        request["transactional_id"], request["producer_id"], request["producer_epoch"], {partition})
    return {"throttle_time_ms": 0, "error_code": _fenced_for(ctx.api_version, error)}


async def end_txn(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    error = await ctx.broker.txn_coordinator.end_transaction(
        request["transactional_id"], request["producer_id"], request["producer_epoch"], bool(request["committed"]))
    return {"throttle_time_ms": 0, "error_code": _fenced_for(ctx.api_version, error)}


async def describe_transactions(ctx: RequestContext, request: dict) -> dict:
    txn = ctx.broker.txn_coordinator
    if ctx.broker.authorizer is None:
        return {"throttle_time_ms": 0,
                "transaction_states": [txn.describe(t) for t in request["transactional_ids"]]}
    states = []
    for transactional_id in request["transactional_ids"]:
        if not ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, transactional_id):
            states.append({"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           "transactional_id": transactional_id, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0,
                           "producer_epoch": 0, "topics": []})
            continue
        state = txn.describe(transactional_id)
        if state["topics"]:
            allowed = ctx.authorized(DESCRIBE, TOPIC, {t["topic"] for t in state["topics"]})
            state["topics"] = [t for t in state["topics"] if t["topic"] in allowed]
        states.append(state)
    return {"throttle_time_ms": 0, "transaction_states": states}


async def list_transactions(ctx: RequestContext, request: dict) -> dict:
    states, unknown = set(), []
    for name in request["state_filters"]:
        state = TransactionState.from_label(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    if unknown and not states:  # only unknown states asked for: nothing can match
        listed = []
    else:
        listed = ctx.broker.txn_coordinator.list(states, set(request["producer_id_filters"]))
        if ctx.broker.authorizer is not None:
            listed = [t for t in listed if ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, t.transactional_id)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                    "transaction_state": t.state.label} for t in listed]}


def register(registry) -> None:
    registry.register(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3, add_partitions_to_txn)
    registry.register(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3, add_offsets_to_txn)
    registry.register(ApiKey.END_TXN, 0, 3, end_txn)
    registry.register(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions)
    registry.register(ApiKey.LIST_TRANSACTIONS, 0, 0, list_transactions)
