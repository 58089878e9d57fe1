"""DescribeLogDirs (key 35), versions 0-4 (Apache Kafka 2.7 serves 0-2; v2+ flexible).

One result per configured log dir (``log.dirs``, as absolute paths), each
with the partitions it holds: ``partition_size`` is the bytes of all its
segment files (read through the replica layer), ``offset_lag`` 0 and ``is_future_key`` false; a replica
moving to another dir (AlterReplicaLogDirs) is listed a second time in its destination with
``is_future_key`` true, the future log's size and ``offset_lag`` (how far it is behind the current log). ``topics`` null means every partition; otherwise
only the named partitions (unknown ones are left out, as in Kafka). Every
log dir is listed even when none of the wanted partitions lives there. v3+
carries a top-level ``error_code``; v4+ the dir's ``total_bytes`` and
``usable_bytes`` (from the file system, -1 if it cannot be read).

A failed (offline) log dir is listed with KAFKA_STORAGE_ERROR and no
partitions, as Kafka does.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka's
``handleDescribeLogDirsRequest``): DESCRIBE on the cluster, else an answer
with no log dirs (Kafka 2.7's), with the top-level ``error_code``
CLUSTER_AUTHORIZATION_FAILED (31) from v3 (where Kafka 3.0 puts it).
"""

from __future__ import annotations

import os
import shutil

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext


def _disk_usage(path) -> tuple[int, int]:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1, -1
    return usage.total, usage.free


def _describe(ctx: RequestContext, wanted: set[tuple[str, int]] | None, with_usage: bool) -> list[dict]:
    log_manager = ctx.broker.log_manager
    by_dir: dict[str, dict[str, list[dict]]] = {}
    for d in log_manager.log_dirs:
        by_dir.setdefault(os.path.abspath(d), {})
    # only what the replica layer serves: a log on disk in no topic (or being deleted) is left out
    for partition in sorted(ctx.broker.replicas.partitions(), key=lambda p: p.key):
        if wanted is not None and partition.key not in wanted:
            continue
        d = log_manager.log_dir_of(partition.key)
        if d is None:
            continue
        by_dir.setdefault(os.path.abspath(d), {}).setdefault(partition.topic, []).append(
            {"partition_index": partition.partition, "partition_size": partition.size_in_bytes, "offset_lag": 0,
             "is_future_key": False})
    for tp, move in sorted(log_manager.future_logs().items()):
        if wanted is not None and tp not in wanted:
            continue
        by_dir.setdefault(os.path.abspath(move.dest_dir), {}).setdefault(tp[0], []).append(
            {"partition_index": tp[1], "partition_size": move.future.size_in_bytes, "offset_lag": move.lag,
             "is_future_key": True})
    offline = {os.path.abspath(d) for d in log_manager.failure_channel.offline_dirs}
    results = []
    for path, topics in by_dir.items():
        if path in offline:
            results.append({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": path, "total_bytes": -1,
                            "usable_bytes": -1, "topics": []})
            continue
        total, usable = _disk_usage(path) if with_usage else (-1, -1)
        results.append({
            "error_code": ErrorCode.NONE, "log_dir": path, "total_bytes": total, "usable_bytes": usable,
            "topics": [{"name": name, "partitions": parts} for name, parts in sorted(topics.items())],
        })
    return results


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    topics = request["topics"]
    wanted = None if topics is None else {(t["topic"], p) for t in topics for p in t["partitions"]}
    results = _describe(ctx, wanted, ctx.api_version >= 4)  # statvfs only: no need for a thread
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def register(registry) -> None:
    registry.register(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, handle)
