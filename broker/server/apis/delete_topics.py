"""DeleteTopics (key 20), versions 0-6 (Apache Kafka 2.7 serves 0-5; v6 names topics by name or id).

A client with a ``controller_mutation_rate`` quota (:mod:`broker.server.quotas`) has each deleted
partition counted; from v5 a topic named while its bucket is below zero gets
THROTTLING_QUOTA_EXCEEDED (89) and is not deleted.

A deletion marks the topic in the metadata store (``/admin/delete_topics/<t>``)
and waits, at most ``timeout_ms`` (REQUEST_TIMED_OUT then), until the
controller has done the rest: StopReplica with ``delete_partition`` to every
replica (each moves its partition directories aside for background removal),
the topic's nodes and the mark removed, every broker's metadata cache told. A
controller that stops in between leaves the mark, and the next one finishes
the job, so a deleted topic never comes back.

Internal topics (``__consumer_offsets``, ``__transaction_state``: the one list is
``broker.server.topics.INTERNAL_TOPICS``) are never deleted: each gets
INVALID_TOPIC_EXCEPTION (17) with the message "topic __consumer_offsets is internal
and cannot be deleted". Here we part from Apache Kafka: neither 2.7's broker
(``KafkaApis.handleDeleteTopicsRequest``) nor today's controller
(``ControllerApis.deleteTopics``) refuses them, only 2.7's ``kafka-topics.sh
--zookeeper`` did, on the client side, so a ``deleteTopics`` from any admin client
silently dropped every group's committed offsets. Code 17 is the one Kafka answers
for the other operations it refuses on internal topics (Produce, DeleteRecords);
a current client shows it with its message, e.g. librdkafka's
``TOPIC_EXCEPTION`` and the Java client's ``InvalidTopicException``. CreateTopics
and CreatePartitions of internal topics are allowed, as in Kafka.

Per topic (names given twice are answered once): UNKNOWN_TOPIC_OR_PARTITION for
a topic that does not exist (or an illegal name). A v6 entry names a topic by
its name or by its id (KIP-516): an unknown id gets UNKNOWN_TOPIC_ID, an entry with
both INVALID_REQUEST (Kafka 2.8's rules); deleted by id, the answer names the topic,
unless the principal may not DESCRIBE it (then TOPIC_AUTHORIZATION_FAILED without the name). With
``delete.topic.enable`` false every topic gets TOPIC_DELETION_DISABLED from v3
on, and INVALID_REQUEST below v3 (the older clients know no better code), as
Kafka answers. ``timeout_ms`` <= 0: deleted, but answered REQUEST_TIMED_OUT,
as Kafka does. ``error_message`` exists from v5.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleDeleteTopicsRequest``): DELETE on each topic, else
TOPIC_AUTHORIZATION_FAILED (29, no message), whether the topic exists or not;
checked after ``delete.topic.enable`` and before the topic is looked up.
(Kafka 2.8 and later answer UNKNOWN_TOPIC_OR_PARTITION instead to a principal
without DESCRIBE on the topic; 2.7 does not.)
"""

from __future__ import annotations

import uuid

from broker.acl import AclOperation, ResourceType
from broker.topic_ids import format_topic_id
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.schema import ZERO_UUID
from broker.server.context import RequestContext
from broker.server.quotas import THROTTLED_MUTATION, mutation_refused, record_mutations
from broker.server.topics import TopicError


def _wanted(ctx: RequestContext, request: dict) -> list[tuple[str | None, uuid.UUID]]:
    if ctx.api_version >= 6:
        entries = [(t["name"], t["topic_id"] or ZERO_UUID) for t in request["topics"]]
    else:
        entries = [(name, ZERO_UUID) for name in request["topic_names"]]
    seen, unique = set(), []
    for entry in entries:
        if entry not in seen:
            seen.add(entry)
            unique.append(entry)
    return unique


async def _delete(ctx: RequestContext, name: str | None, topic_id: uuid.UUID, timeout_ms: int) -> dict:
    result = {"name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE, "error_message": None}
    by_id = topic_id != ZERO_UUID
    try:
        if by_id and name is not None:
            raise TopicError(ErrorCode.INVALID_REQUEST, "give a topic's name or its id, not both")
        if by_id:
            name = ctx.broker.metadata_cache.topic_name(topic_id)
            if name is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {format_topic_id(topic_id)}")
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):  # its name is not told
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            result["name"] = name
        elif name is None:
            raise TopicError(ErrorCode.INVALID_REQUEST, "a topic needs its name or its id")
        if not ctx.broker.config.delete_topic_enable:
            code = ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST
            raise TopicError(code, "topic deletion is disabled (delete.topic.enable=false)")
        if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
            raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        if mutation_refused(ctx):
            raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MUTATION)
        meta = ctx.broker.metadata_cache.topic(name)
        partitions = len(meta.partitions) if meta is not None else 0
        await ctx.broker.topics.delete_topic(name, timeout_ms)
        record_mutations(ctx, partitions)
    except TopicError as exc:
        result.update(error_code=exc.error_code, error_message=exc.message)
        return result
    if timeout_ms <= 0:
        result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return result


async def handle(ctx: RequestContext, request: dict) -> dict:
    return {
        "throttle_time_ms": 0,
        "responses": [await _delete(ctx, name, topic_id, request["timeout_ms"])
                      for name, topic_id in _wanted(ctx, request)],
    }


def register(registry) -> None:
    registry.register(ApiKey.DELETE_TOPICS, 0, 6, handle)
