"""Share groups (KIP-932, queues for Kafka): membership on the group coordinator
(:mod:`broker.share.coordinator`), records acquired and acknowledged on the partition leaders
(:mod:`broker.share.manager`, :mod:`broker.share.partition`)."""

from broker.protocol import ApiKey
from broker.share.coordinator import ShareCoordinator
from broker.share.manager import ShareManager

#: The APIs of share groups: not served with ``group.share.enable=false``.
SHARE_GROUP_APIS = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH,
                    ApiKey.SHARE_ACKNOWLEDGE)

__all__ = ["SHARE_GROUP_APIS", "ShareCoordinator", "ShareManager"]
