"""Fetch from the closest replica (KIP-392): which replica a consumer should read a partition from.

``replica.selector.class`` names the selector, as in Kafka 2.7:

- unset (Kafka's default): consumers read from the leader;
- ``org.apache.kafka.common.replica.RackAwareReplicaSelector`` or our short
  name ``rack-aware``: a consumer that says its rack (``client.rack``, Fetch
  v11+ ``rack_id``) is sent to a replica in that rack.

Kafka's rules (``ReplicaManager.findPreferredReadReplica`` and
``RackAwareReplicaSelector``), which :func:`preferred_read_replica` follows:
only the leader answers with a ``preferred_read_replica``, and only to
consumers (``replica_id`` < 0) that sent a rack; the candidates are the
replicas that hold the fetch offset (log end offset at or above it, for a
follower as its last fetch said) on a broker the metadata cache knows alive;
if the leader is in the client's rack it stays the choice (the answer then
names no other replica), else the same-rack follower with the largest log end
offset, then the one caught up most recently. No same-rack candidate: the
leader. The leader answers a redirected partition with no records, and the
consumer fetches from the named follower, which serves it up to the high
watermark it learnt from the leader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from broker.replica.partition import Partition

RACK_AWARE = "rack-aware"
#: the names ``replica.selector.class`` accepts, Kafka's class name first
SELECTORS = {"org.apache.kafka.common.replica.RackAwareReplicaSelector": RACK_AWARE, RACK_AWARE: RACK_AWARE}

NO_PREFERRED_REPLICA = -1


def parse_selector(value: str) -> str:
    """The selector a ``replica.selector.class`` value names (ValueError for one we do not have)."""
    text = str(value).strip()
    if text not in SELECTORS:
        raise ValueError(f"{text!r} is not a replica selector we have ({', '.join(SELECTORS)})")
    return SELECTORS[text]


def preferred_read_replica(selector: str | None, partition: "Partition", client_rack: str, fetch_offset: int,
                           rack_of: Callable[[int], str | None | bool], now_ms: int) -> int:
    """The follower a consumer in ``client_rack`` should read ``partition`` from, or -1 (the leader itself).

    ``rack_of(broker_id)`` gives a live broker's rack (None: no rack) and
    False for a broker the metadata cache does not know alive.
    """
    if selector != RACK_AWARE or not client_rack or not partition.is_leader:
        return NO_PREFERRED_REPLICA
    if rack_of(partition.local_broker_id) == client_rack:
        return NO_PREFERRED_REPLICA
    candidates = []
    for broker_id, state in partition.followers.items():
        if state.log_end_offset >= fetch_offset and rack_of(broker_id) == client_rack:
            # the longest log first, then the one caught up most recently
            candidates.append((-state.log_end_offset, now_ms - state.last_caught_up_ms, broker_id))
    return min(candidates)[2] if candidates else NO_PREFERRED_REPLICA
