"""Our Kafka client: producer, consumer with groups, and admin client.

Each has an asyncio core (``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin``)
and a blocking facade (``Producer``, ``Consumer``, ``Admin``) whose loop runs
in a background thread. Configuration uses Kafka's property names in
snake_case as keyword arguments; a mapping with Kafka's dotted names is
accepted as the first argument (see :mod:`broker.client._config`). TLS is
``security.protocol=SSL`` with librdkafka's ``ssl.*`` properties, the Java
client's PEM spellings accepted too (see :mod:`broker.client._tls`); SASL (PLAIN,
SCRAM-SHA-256/512) is ``security.protocol=SASL_PLAINTEXT|SASL_SSL`` with the
``sasl.*`` properties (see :mod:`broker.client._sasl`).
Errors are in :mod:`broker.client.errors`.
"""

from ._producer import AsyncProducer, Producer
from ._consumer import AsyncConsumer, Consumer
from broker.acl import AclOperation, AclPermission, PatternType, ResourceType
from ._admin import (ANY_ENTITY, DEFAULT_ENTITY, AclBinding, AclBindingFilter, Admin, AsyncAdmin, ClientQuotaEntity,
                     ClientQuotaFilterComponent, ClusterDescription, ConfigEntry, ConfigResource, ConfigResourceListing,
                     GROUP_TYPES, GroupDescription, GroupListing, LogDirDescription, PartitionReassignment,
                     MemberDescription, NewTopic, PartitionLag, ReplicaLogDirInfo, ScramCredentialInfo,
                     UserScramCredentialDeletion, UserScramCredentialUpsertion, DelegationToken)
from ._admin_transactions import ProducerState, TransactionDescription, TransactionListing
from ._assignors import (Assignor, CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor)
from ._accumulator import RecordFuture
from ._config import AdminConfig, ConsumerConfig, ProducerConfig, build_config
from ._sasl import SaslSettings
from ._partitioner import DefaultPartitioner, RoundRobinPartitioner, murmur2, murmur2_partition
from ._serde import (bytes_deserializer, bytes_serializer, json_deserializer, json_serializer,
                     string_deserializer, string_serializer)
from ._types import (BrokerMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp,
                     PartitionMetadata, RecordMetadata, TopicMetadata, TopicPartition)
from ._zookeeper import ZooKeeperOffsetStore
from . import errors

__all__ = [
    "AsyncProducer", "Producer", "RecordFuture", "AsyncConsumer", "Consumer", "AsyncAdmin", "Admin",
    "AdminConfig", "ProducerConfig", "ConsumerConfig", "build_config",
    "NewTopic", "ConfigResource", "ConfigResourceListing", "ConfigEntry", "ClusterDescription", "GROUP_TYPES",
    "GroupListing", "GroupDescription",
    "MemberDescription", "PartitionLag", "LogDirDescription", "ReplicaLogDirInfo", "PartitionReassignment",
    "ProducerState", "TransactionDescription", "TransactionListing",
    "ScramCredentialInfo", "UserScramCredentialUpsertion", "UserScramCredentialDeletion", "SaslSettings",
    "DelegationToken",
    "AclBinding", "AclBindingFilter", "AclOperation", "AclPermission", "PatternType", "ResourceType",
    "ClientQuotaEntity", "ClientQuotaFilterComponent", "DEFAULT_ENTITY", "ANY_ENTITY",
    "Assignor", "RangeAssignor", "RoundRobinAssignor", "CooperativeStickyAssignor",
    "DefaultPartitioner", "RoundRobinPartitioner", "murmur2", "murmur2_partition",
    "bytes_serializer", "bytes_deserializer", "string_serializer", "string_deserializer",
    "json_serializer", "json_deserializer",
    "BrokerMetadata", "ConsumerRecord", "OffsetAndMetadata", "OffsetAndTimestamp",
    "PartitionMetadata", "RecordMetadata", "TopicMetadata", "TopicPartition", "ZooKeeperOffsetStore", "errors",
]
