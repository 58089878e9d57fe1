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

Version notes: AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2 may answer
PRODUCER_FENCED (KIP-588), which v0-1 get as INVALID_PRODUCER_EPOCH; v3 is flexible.
"""

from __future__ import annotations

from broker.coordinator.storage import OFFSETS_TOPIC, StorageError
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext
from broker.txn import TransactionState


def _fenced_for(version: int, error: int) -> int:
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and version < 2 else int(error)


async def add_partitions_to_txn(ctx: RequestContext, request: dict) -> dict:
    topics = ctx.broker.topics
    wanted = [(t["name"], p) for t in request["topics"] for p in t["partitions"]]
    unknown = set()
    for name, p in wanted:
        info = topics.get(name)
        if info is None or p not in info.partitions:
            unknown.add((name, p))
    if unknown:
        codes = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                 for tp in wanted}
    else:
        error = await ctx.broker.txn_coordinator.add_partitions(
            request["transactional_id"], request["producer_id"], request["producer_epoch"], set(wanted))
        codes = {tp: _fenced_for(ctx.api_version, error) for tp in wanted}
    return {"throttle_time_ms": 0, "results": [
        {"name": t["name"], "results": [{"partition_index": p, "error_code": int(codes[(t["name"], p)])}
                                        for p in t["partitions"]]} for t in request["topics"]]}


async def add_offsets_to_txn(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    try:
        await broker.coordinator.ensure_topic()
    except StorageError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    partition = (OFFSETS_TOPIC, broker.coordinator.partition_for(request["group_id"]))
    error = await broker.txn_coordinator.add_partitions(
        request["transactional_id"], request["producer_id"], request["producer_epoch"], {partition})
    return {"throttle_time_ms": 0, "error_code": _fenced_for(ctx.api_version, error)}


async def end_txn(ctx: RequestContext, request: dict) -> dict:
    error = await ctx.broker.txn_coordinator.end_transaction(
        request["transactional_id"], request["producer_id"], request["producer_epoch"], bool(request["committed"]))
    return {"throttle_time_ms": 0, "error_code": _fenced_for(ctx.api_version, error)}


async def describe_transactions(ctx: RequestContext, request: dict) -> dict:
    txn = ctx.broker.txn_coordinator
    return {"throttle_time_ms": 0,
            "transaction_states": [txn.describe(t) for t in request["transactional_ids"]]}


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
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                    "transaction_state": t.state.label} for t in listed]}


def register(registry) -> None:
    registry.register(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3, add_partitions_to_txn)
    registry.register(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3, add_offsets_to_txn)
    registry.register(ApiKey.END_TXN, 0, 3, end_txn)
    registry.register(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions)
    registry.register(ApiKey.LIST_TRANSACTIONS, 0, 0, list_transactions)
