"""ElectLeaders (key 43), versions 0-2 (Apache Kafka 2.7's range; KIP-183, KIP-460): preferred and unclean elections.

Served by the controller (admin clients send it there; any other broker
answers NOT_CONTROLLER for every partition, as Kafka's does). ``election_type``
0 is a preferred election, 1 an unclean one
(:meth:`~broker.cluster.controller_leaders.LeaderMoves.elect_leaders` has the
rules and the per-partition errors); ``topic_partitions`` null means every
partition of the cluster. An election type other than 0 and 1 gets
INVALID_REQUEST for every partition named.

Versions: v0 has no ``election_type`` (preferred) and no top-level
``error_code``; v2 is flexible.

Authorization (with an authorizer, :mod:`broker.acl`; Kafka 2.7's
``handleElectReplicaLeader``): ALTER on the cluster, checked first; without
it the top-level ``error_code`` (v1+) and every partition named get
CLUSTER_AUTHORIZATION_FAILED (31) and nothing is elected.
"""

from __future__ import annotations

from broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.protocol import ApiKey, ErrorCode
from broker.server.context import RequestContext

ELECTION_TYPES = (0, 1)


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    election_type = request["election_type"] if ctx.api_version >= 1 else 0
    named = request["topic_partitions"]
    partitions = None if named is None else [(t["topic"], p) for t in named for p in t["partition_id"]]
    error_code = ErrorCode.NONE
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        results = {tp: (error_code, None) for tp in partitions or ()}
    elif election_type not in ELECTION_TYPES:
        results = {tp: (ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}")
                   for tp in partitions or ()}
    elif not broker.controller.is_active:
        results = {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions or ()}
    else:
        results = await broker.controller.elect_leaders(election_type, partitions)
    topics: dict[str, list] = {}
    for (topic, p), (code, message) in results.items():
        topics.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": error_code,
            "replica_election_results": [{"topic": t, "partition_result": r} for t, r in topics.items()]}


def register(registry) -> None:
    registry.register(ApiKey.ELECT_LEADERS, 0, 2, handle)
