"""CreatePartitions (key 37), versions 0-3 (Apache Kafka 2.7's range; v2+ flexible).

Grows each named topic to ``count`` partitions; partitions are only ever
added. The new partitions' logs take the topic's config; existing partitions
and their data are untouched.

Per topic (the others carry on): UNKNOWN_TOPIC_OR_PARTITION for an unknown
topic, INVALID_PARTITIONS when ``count`` is not above the current number,
INVALID_REPLICA_ASSIGNMENT when ``assignments`` (one broker list per NEW
partition) has the wrong length, unknown brokers or duplicates,
INVALID_REPLICATION_FACTOR when the topic's factor exceeds the live brokers,
INVALID_REQUEST for a topic named twice. ``validate_only`` checks and changes
nothing. The answer waits until the controller has given every new partition
a leader and told this broker (REQUEST_TIMED_OUT after ``timeout_ms``; the
partitions still come). ``timeout_ms`` <= 0: done, but answered
REQUEST_TIMED_OUT at once, as Kafka does. A client with a
``controller_mutation_rate`` quota (:mod:`broker.server.quotas`) has each new
partition counted; from v3 a topic named while its bucket is below zero gets
THROTTLING_QUOTA_EXCEEDED (89) and does not grow.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleCreatePartitionsRequest``): ALTER on each topic, else (after the check
for names given twice) TOPIC_AUTHORIZATION_FAILED (29, "The topic
authorization is failed.", Kafka's words).
"""

from __future__ import annotations

from broker.acl import AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.apis._common import answer_each_once, duplicate_message
from broker.server.context import RequestContext
from broker.server.quotas import THROTTLED_MUTATION, mutation_refused, record_mutations
from broker.server.topics import TopicError


async def _grow(ctx: RequestContext, topic: dict, validate_only: bool, timeout_ms: int) -> dict:
    name = topic["name"]
    result = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
    assignments = topic["assignments"]
    if not validate_only and mutation_refused(ctx):
        result.update(error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED, error_message=THROTTLED_MUTATION)
        return result
    meta = ctx.broker.metadata_cache.topic(name)
    before = len(meta.partitions) if meta is not None else 0
    try:
        await ctx.broker.topics.create_partitions(
            name, topic["count"], [list(a["broker_ids"]) for a in assignments] if assignments else None,
            validate_only, timeout_ms)
    except TopicError as exc:
        result.update(error_code=exc.error_code, error_message=exc.message)
        return result
    if not validate_only:
        record_mutations(ctx, topic["count"] - before)
    if timeout_ms <= 0 and not validate_only:
        result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return result


async def _refused(name: str) -> dict:
    return {"name": name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "error_message": "The topic authorization is failed."}


async def handle(ctx: RequestContext, request: dict) -> dict:
    allowed = ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, {topic["name"] for topic in request["topics"]})
    results = await answer_each_once(
        request["topics"],
        lambda topic: (_grow(ctx, topic, request["validate_only"], request["timeout_ms"])
                       if topic["name"] in allowed else _refused(topic["name"])),
        lambda name: {"name": name, "error_code": ErrorCode.INVALID_REQUEST, "error_message": duplicate_message(name)},
    )
    return {"throttle_time_ms": 0, "results": results}


def register(registry) -> None:
    registry.register(ApiKey.CREATE_PARTITIONS, 0, 3, handle)
