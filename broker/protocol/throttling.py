"""Which request versions have their clients throttle themselves (KIP-219, Kafka 2.0).

From these versions a client that reads a ``throttle_time_ms`` above zero in a
response sends that broker nothing more until it has passed, and the broker
answers at once (then mutes the connection). Before them the broker holds the
answer until the throttle ends, and the client does nothing of its own.
"""

from __future__ import annotations

from .messages import ApiKey

#: The first version of each API whose clients throttle themselves (KIP-219): they get their answer at
#: once and back off for its ``throttle_time_ms``; older versions get theirs when the throttle ends. APIs
#: newer than Kafka 2.0 are all client-throttled (not listed).
CLIENT_THROTTLES_FROM = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6, ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3, ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2, ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2, ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1, ApiKey.OFFSET_FOR_LEADER_EPOCH: 2, ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1, ApiKey.END_TXN: 1, ApiKey.TXN_OFFSET_COMMIT: 1, ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1, ApiKey.DELETE_ACLS: 1, ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1, ApiKey.DESCRIBE_LOG_DIRS: 1, ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
}


def client_throttles(api_key: int, version: int) -> bool:
    """Whether a client of this request version throttles itself (else its answer waits out the throttle)."""
    return version >= CLIENT_THROTTLES_FROM.get(api_key, 0)
