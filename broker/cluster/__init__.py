"""Cluster metadata: the store interface, the embedded store and typed access.

See :mod:`broker.cluster.store` for the interface (ZooKeeper-shaped: versioned
compare-and-set, one-shot watches, ephemeral nodes), :mod:`broker.cluster.embedded`
for the single-node file store, :mod:`broker.cluster.znodes` for Kafka's znode
layouts and :mod:`broker.cluster.metadata` for the typed facade the broker uses.
"""

from broker.cluster.embedded import EmbeddedStore
from broker.cluster.metadata import ClusterMetadata, TopicExistsError
from broker.cluster.store import (
    BadVersionError,
    Check,
    Create,
    Delete,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    SetData,
    Stat,
    StoreError,
    StoreUnavailableError,
    WatchEvent,
)
from broker.cluster.znodes import BrokerRegistration, PartitionState, new_cluster_id

__all__ = [
    "BadVersionError", "BrokerRegistration", "Check", "ClusterMetadata", "Create", "Delete", "EmbeddedStore",
    "MetadataStore", "NodeExistsError", "NoNodeError", "NotEmptyError", "PartitionState", "SessionState", "SetData", "Stat",
    "StoreError", "StoreUnavailableError", "TopicExistsError", "WatchEvent", "new_cluster_id",
]
