"""LeaderAndIsr (key 4), versions 0-5 (Apache Kafka 2.8's range): the controller's word on leadership.

The controller (another broker over the wire, or this broker's own
controller calling :func:`handle` directly) says, per partition, who leads
in which leader epoch, the ISR and the replicas. The replica layer applies it
(:meth:`~broker.replica.ReplicaManager.become_leader_or_follower`): logs are
created on demand with the topic's config, leaders start their epoch,
followers truncate and fetch from the leaders named in ``live_leaders``.

Errors as Kafka 2.7 gives them:

* a controller epoch older than the newest seen: STALE_CONTROLLER_EPOCH for the
  request (``error_code``) and every partition;
* a partition whose leader epoch is not newer than ours: STALE_CONTROLLER_EPOCH
  for it (ignored, the others are applied);
* a partition whose replicas do not include this broker: UNKNOWN_TOPIC_OR_PARTITION;
* (v5, KIP-516) a partition whose log's ``partition.metadata`` names another topic id
  than the request (a log a deleted topic of the same name left behind):
  INCONSISTENT_TOPIC_ID, with an ERROR line; the log is neither served nor changed.
  A log without the file takes the request's id.

Versions: v0-1 carry the partition states in one flat list, each with its
topic (``ungrouped_partition_states``); v2+ group them under ``topic_states``.
v1 adds ``is_new``, v2 ``broker_epoch`` (KIP-380): one older than this
broker's (the czxid of its registration; it registered again since) gets
STALE_BROKER_EPOCH for the request and every partition, and nothing is
applied; -1 ("unknown", and before v2) passes. v3 adds the reassignment lists, v4 is flexible, v5 adds each topic's
id and ``type`` and answers errors grouped by topic id.

Authorization (with an authorizer, :mod:`broker.acl`; as Kafka 2.7's KafkaApis):
CLUSTER_ACTION on the cluster, checked first (the controller's own calls,
made without a connection, pass); otherwise CLUSTER_AUTHORIZATION_FAILED for
the request and every partition, nothing applied, and a WARNING naming the
peer and principal (:func:`cluster_action_allowed`, which the other
controller-to-broker APIs use too): the brokers' principal belongs in
``super.users``.
"""

from __future__ import annotations

import logging

from broker.acl import CLUSTER_NAME, AclOperation, RefusalWarning, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.schema import ZERO_UUID
from broker.replica.manager import StaleControllerEpochError
from broker.server.context import RequestContext

log = logging.getLogger(__name__)


def cluster_action_allowed(ctx: RequestContext, api: str) -> bool:
    """Whether the principal may CLUSTER_ACTION on the cluster; a refusal is logged (an operator's mistake:
    a broker's principal missing from ``super.users``, or a client sending broker-only requests)."""
    if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return True
    principal = ctx.connection.principal if ctx.connection is not None else "?"
    host = ctx.connection.host if ctx.connection is not None else "?"
    _refusals.warn((host, principal), "%s from %s (client id %r) refused with CLUSTER_AUTHORIZATION_FAILED: "
                   "principal %s may not CLUSTER_ACTION on the cluster (a broker's principal belongs in "
                   "super.users; one line a minute per host and principal)", api, ctx.peer, ctx.client_id,
                   principal)
    return False


_refusals = RefusalWarning(log)


def partition_states(request: dict, version: int) -> list[dict]:
    """The request's partition states as one list, each naming its topic (``topic_name``)."""
    if version <= 1:
        return list(request["ungrouped_partition_states"])
    return [dict(state, topic_name=topic["topic_name"], topic_id=topic.get("topic_id", ZERO_UUID))
            for topic in request["topic_states"] for state in topic["partition_states"]]


async def handle(ctx: RequestContext, request: dict) -> dict:
    states = partition_states(request, ctx.api_version)
    if not cluster_action_allowed(ctx, "LeaderAndIsr"):
        return _refused(states, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.broker.is_broker_epoch_stale(request["broker_epoch"]):
        return _refused(states, ErrorCode.STALE_BROKER_EPOCH)
    try:
        errors = await ctx.broker.replicas.become_leader_or_follower(
            request["controller_id"], request["controller_epoch"], states, request["live_leaders"])
    except StaleControllerEpochError:
        return _refused(states, ErrorCode.STALE_CONTROLLER_EPOCH)
    return _answer(ErrorCode.NONE, states, errors)


def _refused(states: list[dict], error: int) -> dict:
    return _answer(error, states, {(s["topic_name"], s["partition_index"]): error for s in states})


def _answer(error: int, states: list[dict], errors: dict) -> dict:
    """The response: errors in one list naming topics (v0-4), or grouped by topic id (v5)."""
    flat = [{"topic_name": t, "partition_index": p, "error_code": code} for (t, p), code in errors.items()]
    ids = {s["topic_name"]: s.get("topic_id", ZERO_UUID) for s in states}
    by_id: dict = {}
    for e in flat:
        by_id.setdefault(ids.get(e["topic_name"], ZERO_UUID), []).append(
            {"partition_index": e["partition_index"], "error_code": e["error_code"]})
    return {"error_code": error, "partition_errors": flat,
            "topics": [{"topic_id": i, "partition_errors": errs} for i, errs in by_id.items()]}


def register(registry) -> None:
    registry.register(ApiKey.LEADER_AND_ISR, 0, 5, handle)
