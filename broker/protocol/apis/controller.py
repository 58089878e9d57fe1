"""Controller-to-broker and broker-to-controller APIs: LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6), ControlledShutdown (7), AlterIsr (56).

Schemas in the compact form of :mod:`broker.protocol.schema`. Field facts follow Apache Kafka
2.7's message definitions (Kafka 2.7 is the model of the cluster mode), so partition states
carry ``zk_version`` (renamed PartitionEpoch in later Kafka; same int32 on the wire). Past 2.7
only the versions that add topic ids are here: LeaderAndIsr v5 (``type``, ``topic_id``, and a
response grouped by topic id) and UpdateMetadata v7 (``topic_id``).

In v0-1 LeaderAndIsr and v0-4 UpdateMetadata, partition states are one flat list
(``ungrouped_partition_states``), each naming its topic; later versions group them under
``topic_states``. The partition state struct is one field list used in both places; its
``topic_name`` is on the wire only in the flat versions.

ControlledShutdown v0 is the one request sent with request header v0 (no client id); see
:mod:`broker.protocol.messages`.
"""

from ..schema import Api, f

# LeaderAndIsrPartitionState: flat in v0-1, under topic_states in v2+.
_LEADER_AND_ISR_PARTITION_STATE = [
    f("topic_name", "string", "0-1"),
    f("partition_index", "int32"),
    f("controller_epoch", "int32"),
    f("leader", "int32"),
    f("leader_epoch", "int32"),
    f("isr", "[]int32"),
    f("zk_version", "int32"),
    f("replicas", "[]int32"),
    f("adding_replicas", "[]int32", "3+"),
    f("removing_replicas", "[]int32", "3+"),
    f("is_new", "bool", "1+"),
]

# LeaderAndIsrPartitionError: topic_name only while the response is not grouped by topic id.
_LEADER_AND_ISR_PARTITION_ERROR = [
    f("topic_name", "string", "0-4"),
    f("partition_index", "int32"),
    f("error_code", "int16"),
]

LEADER_AND_ISR = Api(
    key=4, name="LeaderAndIsr", versions="0-5", flexible="4+",
    request=[
        f("controller_id", "int32"),
        f("controller_epoch", "int32"),
        f("broker_epoch", "int64", "2+", default=-1),
        f("type", "int8", "5+"),
        f("ungrouped_partition_states", "[]", "0-1", fields=_LEADER_AND_ISR_PARTITION_STATE),
        f("topic_states", "[]", "2+", fields=[
            f("topic_name", "string", "2+"),
            f("topic_id", "uuid", "5+"),
            f("partition_states", "[]", "2+", fields=_LEADER_AND_ISR_PARTITION_STATE),
        ]),
        f("live_leaders", "[]", fields=[
            f("broker_id", "int32"),
            f("host_name", "string"),
            f("port", "int32"),
        ]),
    ],
    response=[
        f("error_code", "int16"),
        f("partition_errors", "[]", "0-4", fields=_LEADER_AND_ISR_PARTITION_ERROR),
        f("topics", "[]", "5+", fields=[
            f("topic_id", "uuid", "5+"),
            f("partition_errors", "[]", "5+", fields=_LEADER_AND_ISR_PARTITION_ERROR),
        ]),
    ],
)

STOP_REPLICA = Api(
    key=5, name="StopReplica", versions="0-3", flexible="2+",
    request=[
        f("controller_id", "int32"),
        f("controller_epoch", "int32"),
        f("broker_epoch", "int64", "1+", default=-1),
        f("delete_partitions", "bool", "0-2"),
        f("ungrouped_partitions", "[]", "0", fields=[
            f("topic_name", "string", "0"),
            f("partition_index", "int32", "0"),
        ]),
        f("topics", "[]", "1-2", fields=[
            f("name", "string", "1-2"),
            f("partition_indexes", "[]int32", "1-2"),
        ]),
        f("topic_states", "[]", "3+", fields=[
            f("topic_name", "string", "3+"),
            f("partition_states", "[]", "3+", fields=[
                f("partition_index", "int32", "3+"),
                f("leader_epoch", "int32", "3+", default=-1),
                f("delete_partition", "bool", "3+"),
            ]),
        ]),
    ],
    response=[
        f("error_code", "int16"),
        f("partition_errors", "[]", fields=[
            f("topic_name", "string"),
            f("partition_index", "int32"),
            f("error_code", "int16"),
        ]),
    ],
)

# UpdateMetadataPartitionState: flat in v0-4, under topic_states in v5+.
_UPDATE_METADATA_PARTITION_STATE = [
    f("topic_name", "string", "0-4"),
    f("partition_index", "int32"),
    f("controller_epoch", "int32"),
    f("leader", "int32"),
    f("leader_epoch", "int32"),
    f("isr", "[]int32"),
    f("zk_version", "int32"),
    f("replicas", "[]int32"),
    f("offline_replicas", "[]int32", "4+"),
]

UPDATE_METADATA = Api(
    key=6, name="UpdateMetadata", versions="0-7", flexible="6+",
    request=[
        f("controller_id", "int32"),
        f("controller_epoch", "int32"),
        f("broker_epoch", "int64", "5+", default=-1),
        f("ungrouped_partition_states", "[]", "0-4", fields=_UPDATE_METADATA_PARTITION_STATE),
        f("topic_states", "[]", "5+", fields=[
            f("topic_name", "string", "5+"),
            f("topic_id", "uuid", "7+"),
            f("partition_states", "[]", "5+", fields=_UPDATE_METADATA_PARTITION_STATE),
        ]),
        f("live_brokers", "[]", fields=[
            f("id", "int32"),
            # v0 knows one plaintext endpoint per broker; v1+ a list of them
            f("v0_host", "string", "0"),
            f("v0_port", "int32", "0"),
            f("endpoints", "[]", "1+", fields=[
                f("port", "int32", "1+"),
                f("host", "string", "1+"),
                f("listener", "string", "3+"),
                f("security_protocol", "int16", "1+"),
            ]),
            f("rack", "string", "2+", nullable="0+", default=None),
        ]),
    ],
    response=[
        f("error_code", "int16"),
    ],
)

CONTROLLED_SHUTDOWN = Api(
    key=7, name="ControlledShutdown", versions="0-3", flexible="3+",
    request=[
        f("broker_id", "int32"),
        f("broker_epoch", "int64", "2+", default=-1),
    ],
    response=[
        f("error_code", "int16"),
        f("remaining_partitions", "[]", fields=[
            f("topic_name", "string"),
            f("partition_index", "int32"),
        ]),
    ],
)

ALTER_ISR = Api(
    key=56, name="AlterIsr", versions="0", flexible="0+",
    request=[
        f("broker_id", "int32"),
        f("broker_epoch", "int64", default=-1),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("leader_epoch", "int32"),
                f("new_isr", "[]int32"),
                f("current_isr_version", "int32"),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("leader_id", "int32"),
                f("leader_epoch", "int32"),
                f("isr", "[]int32"),
                f("current_isr_version", "int32"),
            ]),
        ]),
    ],
)

APIS = (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, ALTER_ISR)
