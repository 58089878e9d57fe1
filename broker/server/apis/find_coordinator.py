"""FindCoordinator (key 10), versions 0-4.

key_type 0 (group, the only type before v1): the coordinator of a group is the
leader of its ``__consumer_offsets`` partition, which is created at first use, as
Kafka does (refused with COORDINATOR_NOT_AVAILABLE while fewer brokers are alive
than ``offsets.topic.replication.factor``). The answer comes from the metadata cache (what the
controller last told this broker), so every broker names the same coordinator;
a partition without a live leader is COORDINATOR_NOT_AVAILABLE too: clients ask
again.
key_type 1 (transaction): the same with the id's ``__transaction_state`` partition
(created at first use with ``transaction.state.log.*``; see :mod:`broker.txn.storage`).
Any other key type: INVALID_REQUEST.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
a group key needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), a
transaction key DESCRIBE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); refused keys get no node (-1, "", -1)
and create no internal topic. v4 checks each key on its own.

Version notes: v1 adds key_type and error_message, v3 is flexible, v4 batches
keys (``coordinator_keys`` in, one ``coordinators`` entry per key out).
"""

from __future__ import annotations

from broker.acl import AclOperation, ResourceType
from broker.coordinator import StorageError
from broker.coordinator.storage import OFFSETS_TOPIC
from broker.server.topics import TopicError
from broker.txn.storage import TRANSACTION_TOPIC
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

GROUP, TRANSACTION = 0, 1
#: Per key type: the resource checked for DESCRIBE and the error when refused (with Kafka's message).
_CHECKS = {GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
           TRANSACTION: (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                         "Transactional Id authorization failed.")}


async def _find(ctx: RequestContext, key: str, key_type: int) -> dict:
    broker = ctx.broker
    entry = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.NONE,
             "error_message": None}
    if key_type not in (GROUP, TRANSACTION):
        entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"unknown coordinator key type {key_type}")
        return entry
    if broker.authorizer is not None:
        resource, error, message = _CHECKS[key_type]
        if not ctx.authorize(AclOperation.DESCRIBE, resource, key):
            entry.update(error_code=error, error_message=message)
            return entry
    coordinator, topic = ((broker.coordinator, OFFSETS_TOPIC) if key_type == GROUP
                          else (broker.txn_coordinator, TRANSACTION_TOPIC))
    try:
        await coordinator.ensure_topic()
    except (StorageError, TopicError) as exc:
        entry.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=str(exc))
        return entry
    cache = broker.metadata_cache
    partition = cache.partition(topic, coordinator.partition_for(key))
    leader = None if partition is None else cache.broker(partition.leader)
    endpoint = None if leader is None else leader.listener(ctx.listener)
    if endpoint is None:
        entry.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     error_message=f"the {topic} partition of {key!r} has no live leader")
        return entry
    entry.update(node_id=leader.id, host=endpoint.host, port=endpoint.port)
    return entry


async def handle(ctx: RequestContext, request: dict) -> dict:
    version = ctx.api_version
    key_type = request["key_type"] if version >= 1 else GROUP
    if version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [await _find(ctx, key, key_type) for key in request["coordinator_keys"]]}
    entry = await _find(ctx, request["key"], key_type)
    return {"throttle_time_ms": 0, "error_code": entry["error_code"], "error_message": entry["error_message"],
            "node_id": entry["node_id"], "host": entry["host"], "port": entry["port"]}


def register(registry) -> None:
    registry.register(ApiKey.FIND_COORDINATOR, 0, 4, handle)
