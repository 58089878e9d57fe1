"""Cluster metadata: the store interface, its two stores and typed access.

See :mod:`broker.cluster.store` for the interface (ZooKeeper-shaped: versioned
compare-and-set, one-shot watches, ephemeral nodes, session states),
:mod:`broker.cluster.embedded` for the single-node file store,
:mod:`broker.cluster.zookeeper` for the ZooKeeper store (kazoo),
:mod:`broker.cluster.znodes` for Kafka 2.7's znode layouts,
:mod:`broker.cluster.metadata` for the typed facade the broker uses,
:mod:`broker.cluster.session` for the broker's registration across sessions,
:mod:`broker.cluster.controller` for the controller (with its context and its
channel to the brokers) and :mod:`broker.cluster.assignment` for Kafka's
replica placement. :func:`store_for` picks the store a configuration asks for.
"""

from broker.cluster.embedded import EmbeddedStore
from broker.cluster.metadata import BrokerIdInUseError, ClusterMetadata, TopicExistsError
from broker.cluster.session import BrokerSession
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
from broker.cluster.zookeeper import ZooKeeperStore
from broker.cluster.znodes import BrokerRegistration, PartitionState, new_cluster_id


def store_for(config) -> MetadataStore:
    """The metadata store a :class:`~broker.config.BrokerConfig` asks for (``metadata_store_kind``)."""
    if config.metadata_store_kind == "zookeeper":
        return ZooKeeperStore(config.zookeeper_connect, session_timeout_ms=config.zookeeper_session_timeout_ms,
                              connection_timeout_ms=config.zookeeper_connection_timeout_ms)
    return EmbeddedStore(config.log_dirs[0])


__all__ = [
    "BadVersionError", "BrokerIdInUseError", "BrokerRegistration", "BrokerSession", "Check", "ClusterMetadata", "Create", "Delete", "EmbeddedStore",
    "MetadataStore", "NodeExistsError", "NoNodeError", "NotEmptyError", "PartitionState", "SessionState", "SetData", "Stat",
    "StoreError", "StoreUnavailableError", "TopicExistsError", "WatchEvent", "ZooKeeperStore", "new_cluster_id", "store_for",
]
