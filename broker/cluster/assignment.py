"""Replica assignment: which brokers hold each partition's replicas, Kafka 2.7's algorithm.

The same computation as Kafka's ``AdminUtils.assignReplicasToBrokers``, so a
topic created here is laid out as a Kafka cluster with the same brokers and
racks would lay it out.

Rack-unaware (no broker has a rack): the first replica of partition ``p`` is
``brokers[(p + start_index) % n]``, round-robin from a random start; replica
``j`` (j >= 1) of it is ``brokers[(first + 1 + (shift + j - 1) % (n - 1)) % n]``,
where ``shift`` starts random and grows by one each time ``p`` wraps past a
multiple of ``n``, so the followers of one broker's partitions spread over
the other brokers instead of always following in the same order. With
``start_index`` given (``fixed_start_index`` in Kafka), it is also the first
shift: that is how tests and partition additions get a deterministic layout.

Rack-aware (every broker has a rack): the brokers are first arranged in a
rack-alternated list (racks sorted by name; one broker of each rack in turn,
each rack's brokers in id order), the first replica is round-robin on that list
as above, and each further replica walks the list from the first (with the shift
multiplied by the number of racks), skipping a broker whose rack already holds a
replica while some rack holds none, and a broker that already holds one while
some broker holds none. With at least as many replicas as racks every rack gets
one; with fewer, no rack gets two.

Brokers are taken in id order (Kafka's ``AdminZkClient`` sorts them).
``rack_aware_mode`` is Kafka's ``RackAwareMode``: ``enforced`` (what
CreateTopics uses) refuses a mix of brokers with and without a rack;
``safe`` ignores racks unless every broker has one; ``disabled`` ignores them.

Errors are Kafka's, as :class:`AssignmentError` with the Kafka error code and
message: INVALID_PARTITIONS ``number of partitions must be larger than 0``,
INVALID_REPLICATION_FACTOR ``replication factor must be larger than 0`` and
``replication factor: R larger than available brokers: N``; a mix of racks in
enforced mode is Kafka's AdminOperationException, which reaches a client as
UNKNOWN_SERVER_ERROR, ``Not all brokers have rack information for replica rack
aware assignment``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from broker.protocol import ErrorCode

ENFORCED, SAFE, DISABLED = "enforced", "safe", "disabled"


class AssignmentError(Exception):
    """No assignment for these inputs; ``error_code`` is the Kafka error code."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = int(error_code)
        self.message = message


@dataclass(frozen=True, slots=True)
class BrokerRack:
    """A broker as assignment sees it (Kafka's ``admin.BrokerMetadata``)."""

    id: int
    rack: str | None = None


def assign_replicas_to_brokers(brokers: Iterable[BrokerRack], num_partitions: int, replication_factor: int, *,
                               start_index: int = -1, start_partition_id: int = -1,
                               rack_aware_mode: str = ENFORCED,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """``{partition: [broker ids, preferred leader first]}`` for partitions
    ``max(0, start_partition_id)`` onward (see the module docstring).

    ``start_index`` < 0 draws the start and the first shift from ``rng`` (a fresh
    ``random.Random`` by default), as Kafka does.
    """
    brokers = sorted(brokers, key=lambda b: b.id)
    if num_partitions <= 0:
        raise AssignmentError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AssignmentError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise AssignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                              f"replication factor: {replication_factor} larger than available brokers: "
                              f"{len(brokers)}")
    racked = [b for b in brokers if b.rack is not None]
    if rack_aware_mode == DISABLED or not racked or (rack_aware_mode == SAFE and len(racked) < len(brokers)):
        ordered, racks = [b.id for b in brokers], None
    elif len(racked) < len(brokers):
        raise AssignmentError(ErrorCode.UNKNOWN_SERVER_ERROR,
                              "Not all brokers have rack information for replica rack aware assignment")
    else:
        racks = {b.id: b.rack for b in brokers}
        ordered = rack_alternated_broker_list(racks)

    n = len(ordered)
    rng = rng or random.Random()
    first_index = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    result: dict[int, list[int]] = {}
    partition = max(0, start_partition_id)
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + first_index) % n
        if racks is None:
            result[partition] = [ordered[first]] + [ordered[_replica_index(first, shift, j, n)]
                                                    for j in range(replication_factor - 1)]
        else:
            result[partition] = _rack_aware_replicas(ordered, racks, first, shift, replication_factor)
        partition += 1
    return result


def assign_new_partitions(brokers: Iterable[BrokerRack], existing: Mapping[int, Sequence[int]], count: int, *,
                          rack_aware_mode: str = ENFORCED) -> dict[int, list[int]]:
    """Replicas for ``count`` partitions added to a topic assigned as ``existing``, as Kafka's
    ``AdminZkClient.addPartitions``: same replication factor as partition 0, numbered on
    from the existing ones, the start fixed at the first broker whose id is at least
    partition 0's first replica."""
    brokers = sorted(brokers, key=lambda b: b.id)
    first_of_zero = existing[0][0]
    start = next((i for i, b in enumerate(brokers) if b.id >= first_of_zero), 0)
    return assign_replicas_to_brokers(brokers, count, len(existing[0]), start_index=start,
                                      start_partition_id=len(existing), rack_aware_mode=rack_aware_mode)


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers alternated by rack: racks in name order, each rack's brokers in id order
    (rack1: 0, 1; rack2: 3 -> 0, 3, 1)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        result.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_aware_replicas(ordered: list[int], racks: Mapping[int, str], first: int, shift: int,
                         factor: int) -> list[int]:
    num_racks = len(set(racks.values()))
    leader = ordered[first]
    replicas, racks_used, brokers_used = [leader], {racks[leader]}, {leader}
    k = 0
    while len(replicas) < factor:
        broker = ordered[_replica_index(first, shift * num_racks, k, len(ordered))]
        rack = racks[broker]
        # A rack that already has a replica is skipped while some rack has none, and a
        # broker that has one while some broker has none.
        if ((rack not in racks_used or len(racks_used) == num_racks)
                and (broker not in brokers_used or len(brokers_used) == len(ordered))):
            replicas.append(broker)
            racks_used.add(rack)
            brokers_used.add(broker)
        k += 1
    return replicas
