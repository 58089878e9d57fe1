"""CreateTopics (key 19), versions 0-7 (Apache Kafka 2.7 serves 0-6; v7 adds topic ids).

Each topic is created on its own (the others carry on after a failure):

* ``num_partitions`` / ``replication_factor`` of -1 take the broker defaults
  (``num.partitions``, ``default.replication.factor``); zero or other negative
  values are INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, as is a factor
  above the live brokers. ``assignments`` (partition -> broker ids) replace
  both and must then leave them at -1 (INVALID_REQUEST otherwise).
* ``configs`` are topic-level overrides; an unknown name or a bad value is
  INVALID_CONFIG with the reason, a null value INVALID_REQUEST. The topic's
  logs are created with that config.
* Illegal or colliding names are INVALID_TOPIC_EXCEPTION, an existing topic
  TOPIC_ALREADY_EXISTS, a name given twice in one request INVALID_REQUEST.
* ``validate_only`` (v1+) checks everything and creates nothing.
* The answer waits until the controller has given every partition a leader
  and told this broker's metadata cache, at most ``timeout_ms``
  (REQUEST_TIMED_OUT then; the topic still comes, as in Kafka).
  ``timeout_ms`` <= 0: creation goes ahead but the answer is
  REQUEST_TIMED_OUT at once (the client did not want to wait).
* v5+ answers with the topic's partitions, replication factor and full
  config list (as DescribeConfigs describes them), also for ``validate_only``.
  v7 answers the new topic's id (KIP-516; the zero uuid for ``validate_only``).
* A client with a ``controller_mutation_rate`` quota (:mod:`broker.server.quotas`)
  has each created partition counted; from v6 a topic asked for while its
  bucket is below zero gets THROTTLING_QUOTA_EXCEEDED (89) and is not created.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleCreateTopicsRequest``): CREATE on the cluster allows every topic,
else each topic needs CREATE on itself, or gets TOPIC_AUTHORIZATION_FAILED (29,
"Authorization failed."), after the check for names given twice. A topic
without DESCRIBE_CONFIGS (which ALTER_CONFIGS implies) is answered without its
partitions, replication factor and configs (-1, -1, none) and, unless its
creation failed, with ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED (v5+).
"""

from __future__ import annotations

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.schema import ZERO_UUID
from broker.server.apis._common import answer_each_once, duplicate_message
from broker.server.apis.describe_configs import topic_config_entries
from broker.server.context import RequestContext
from broker.server.quotas import THROTTLED_MUTATION, mutation_refused, record_mutations
from broker.server.topics import TopicError


def _error(name: str, error_code: int, message: str | None) -> dict:
    return {"name": name, "error_code": error_code, "error_message": message, "num_partitions": -1,
            "replication_factor": -1, "configs": []}


async def _create(ctx: RequestContext, topic: dict, validate_only: bool, timeout_ms: int) -> dict:
    name = topic["name"]
    broker = ctx.broker
    if not validate_only and mutation_refused(ctx):
        return _error(name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MUTATION)
    try:
        nulls = sorted(c["name"] for c in topic["configs"] if c["value"] is None)
        if nulls:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"null value not supported for topic configs: {', '.join(nulls)}")
        configs = {c["name"]: c["value"] for c in topic["configs"]}
        assignments = {a["partition_index"]: list(a["broker_ids"]) for a in topic["assignments"]}
        info = await broker.topics.create_topic(name, topic["num_partitions"], topic["replication_factor"],
                                                assignments or None, configs, validate_only, timeout_ms)
    except TopicError as exc:
        return _error(name, exc.error_code, exc.message)
    if info is not None:
        partitions = len(info.partitions)
        factor = len(info.partitions[0].replicas)
    elif assignments:
        partitions, factor = len(assignments), len(next(iter(assignments.values())))
    else:
        partitions = broker.config.num_partitions if topic["num_partitions"] == -1 else topic["num_partitions"]
        factor = (broker.config.default_replication_factor if topic["replication_factor"] == -1
                  else topic["replication_factor"])
    if not validate_only:
        record_mutations(ctx, partitions)
    result = {"name": name, "error_code": ErrorCode.NONE, "error_message": None, "num_partitions": partitions,
              "replication_factor": factor, "configs": [],
              "topic_id": ZERO_UUID if validate_only else broker.topics.topic_id(name)}
    if ctx.api_version >= 5:
        result["configs"] = [
            {k: e[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
            for e in topic_config_entries(ctx, configs)
        ]
    if timeout_ms <= 0 and not validate_only:
        result.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None)
    return result


async def handle(ctx: RequestContext, request: dict) -> dict:
    validate_only = ctx.api_version >= 1 and request["validate_only"]
    names = {topic["name"] for topic in request["topics"]}
    if ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
        creatable = names
    else:
        creatable = ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, names)
    describable = ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)

    def without_configs(result: dict, attempted: bool) -> dict:
        """Kafka hides a topic's configs from a principal without DESCRIBE_CONFIGS on it."""
        if result["name"] not in describable:
            result.update(num_partitions=-1, replication_factor=-1, configs=[])
            if not attempted or result["error_code"] == ErrorCode.NONE:
                result["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return result

    async def answer(topic: dict) -> dict:
        if topic["name"] not in creatable:
            return without_configs(_error(topic["name"], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                          "Authorization failed."), attempted=False)
        return without_configs(await _create(ctx, topic, validate_only, request["timeout_ms"]), attempted=True)

    results = await answer_each_once(
        request["topics"], answer,
        lambda name: without_configs(_error(name, ErrorCode.INVALID_REQUEST, duplicate_message(name)),
                                     attempted=False),
    )
    return {"throttle_time_ms": 0, "topics": results}


def register(registry) -> None:
    registry.register(ApiKey.CREATE_TOPICS, 0, 7, handle)
