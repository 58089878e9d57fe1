"""Share groups (KIP-932, queues for Kafka): membership on the group coordinator
(:mod:`broker.share.coordinator`), records acquired and acknowledged on the partition leaders
(:mod:`broker.share.manager`, :mod:`broker.share.partition`)."""

from broker.protocol import ApiKey
from broker.share.coordinator import ShareCoordinator
from broker.share.manager import ShareManager

#: The APIs of share groups: not served with ``group.share.enable=false``.
SHARE_GROUP_APIS = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH,
                    ApiKey.SHARE_ACKNOWLEDGE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                    ApiKey.DELETE_SHARE_GROUP_OFFSETS)

__all__ = ["SHARE_GROUP_APIS", "ShareCoordinator", "ShareManager"]


def share_metrics_snapshot(coordinator: ShareCoordinator, manager: ShareManager) -> tuple:
    """(share groups by state, members, sessions, share-partitions, records by state) for the metrics."""
    from broker.share.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE

    by_state: dict[str, int] = {}
    for group in coordinator.groups.values():
        by_state[group.state] = by_state.get(group.state, 0) + 1
    members = sum(len(g.members) for g in coordinator.groups.values())
    names = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}
    records: dict[str, int] = {}
    for held in manager.held():
        for record in held.sp.records.values():
            records[names[record.state]] = records.get(names[record.state], 0) + 1
    return by_state, members, len(manager.sessions), len(manager.held()), records
