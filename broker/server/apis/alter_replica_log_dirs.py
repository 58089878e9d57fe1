"""AlterReplicaLogDirs (key 34), versions 0-1 (Apache Kafka 2.7's range): move replicas between log dirs.

Each requested partition is moved to the named log dir of this broker
(:meth:`LogManager.move_log`: a future replica copied in the background, then
swapped in; DescribeLogDirs shows it meanwhile with ``is_future_key``). The
answer comes when the move has started, as Kafka's does. Per partition:

* NONE: the move started, is under way to that dir, or the replica is there already;
* LOG_DIR_NOT_FOUND: the path is not one of this broker's ``log.dirs`` (compared as absolute paths);
* KAFKA_STORAGE_ERROR: the destination dir, or the partition's current one, is offline;
* REPLICA_NOT_AVAILABLE: the partition exists (the metadata cache has it) but
  this broker holds no replica of it yet: the dir is remembered, and the
  replica is made there when a LeaderAndIsr brings it (Kafka's preferred log
  dir; how a reassignment's ``log_dirs`` are honoured);
* UNKNOWN_TOPIC_OR_PARTITION: no such partition.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleAlterReplicaLogDirsRequest``): ALTER on the cluster, else every
partition named gets CLUSTER_AUTHORIZATION_FAILED (31) and nothing moves.
"""

from __future__ import annotations

import os

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.log import KafkaStorageError, LogClosedError
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext


def _move(ctx: RequestContext, dest, topic: str, partition: int) -> int:
    broker = ctx.broker
    if dest is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if broker.replicas.partition(topic, partition) is None:
        if broker.replicas.is_offline(topic, partition) or broker.metadata_cache.partition(topic, partition) is None:
            return broker.replicas.missing_error(topic, partition)
        if broker.log_manager.failure_channel.is_offline(dest):
            return ErrorCode.KAFKA_STORAGE_ERROR
        broker.log_manager.set_preferred_log_dir((topic, partition), dest)
        return ErrorCode.REPLICA_NOT_AVAILABLE
    try:
        broker.log_manager.move_log((topic, partition), dest, broker.replicas.log_moved)
    except KafkaStorageError:
        return ErrorCode.KAFKA_STORAGE_ERROR
    except LogClosedError:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


async def handle(ctx: RequestContext, request: dict) -> dict:
    dirs = {os.path.abspath(d): d for d in ctx.broker.log_manager.log_dirs}
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    results: dict[str, list[dict]] = {}
    for wanted in request["dirs"]:
        dest = dirs.get(os.path.abspath(wanted["path"])) if wanted["path"] else None
        for t in wanted["topics"]:
            for p in t["partitions"]:
                if not allowed:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                else:  # creating the future log touches the disk: off the loop
                    code = await ctx.broker.run_blocking(_move, ctx, dest, t["name"], p)
                results.setdefault(t["name"], []).append({"partition_index": p, "error_code": code})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": name, "partitions": parts} for name, parts in results.items()]}


def register(registry) -> None:
    registry.register(ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 1, handle)
