"""Replica placement APIs: AlterReplicaLogDirs (34), ElectLeaders (43),
AlterPartitionReassignments (45), ListPartitionReassignments (46).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka 2.7's message definitions. A null ``topic_partitions`` in ElectLeaders means every
partition; a null ``replicas`` in AlterPartitionReassignments cancels that partition's
reassignment; a null ``topics`` in ListPartitionReassignments lists every reassignment.
"""

from ..schema import Api, f

ALTER_REPLICA_LOG_DIRS = Api(
    key=34, name="AlterReplicaLogDirs", versions="0-1", flexible="none",
    request=[
        f("dirs", "[]", fields=[
            f("path", "string"),
            f("topics", "[]", fields=[
                f("name", "string"),
                f("partitions", "[]int32"),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("results", "[]", fields=[
            f("topic_name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
            ]),
        ]),
    ],
)

ELECT_LEADERS = Api(
    key=43, name="ElectLeaders", versions="0-2", flexible="2+",
    request=[
        # 0 preferred, 1 unclean; v0 elects the preferred leader only
        f("election_type", "int8", "1+"),
        f("topic_partitions", "[]", nullable="0+", fields=[
            f("topic", "string"),
            f("partition_id", "[]int32"),
        ]),
        f("timeout_ms", "int32", default=60000),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16", "1+"),
        f("replica_election_results", "[]", fields=[
            f("topic", "string"),
            f("partition_result", "[]", fields=[
                f("partition_id", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
            ]),
        ]),
    ],
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    key=45, name="AlterPartitionReassignments", versions="0", flexible="0+",
    request=[
        f("timeout_ms", "int32", default=60000),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("replicas", "[]int32", nullable="0+", default=None),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("responses", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
            ]),
        ]),
    ],
)

LIST_PARTITION_REASSIGNMENTS = Api(
    key=46, name="ListPartitionReassignments", versions="0", flexible="0+",
    request=[
        f("timeout_ms", "int32", default=60000),
        f("topics", "[]", nullable="0+", default=None, fields=[
            f("name", "string"),
            f("partition_indexes", "[]int32"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("replicas", "[]int32"),
                f("adding_replicas", "[]int32"),
                f("removing_replicas", "[]int32"),
            ]),
        ]),
    ],
)

APIS = (ALTER_REPLICA_LOG_DIRS, ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS,
        LIST_PARTITION_REASSIGNMENTS)
