"""Offset APIs: ListOffsets (2), OffsetCommit (8), OffsetFetch (9),
OffsetForLeaderEpoch (23), DeleteRecords (21), OffsetDelete (47).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions (3.8).
"""

from ..schema import Api, f

LIST_OFFSETS = Api(
    key=2, name="ListOffsets", versions="0-8", flexible="6+",
    request=[
        f("replica_id", "int32"),
        f("isolation_level", "int8", "2+"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("current_leader_epoch", "int32", "4+", default=-1),
                f("timestamp", "int64"),
                f("max_num_offsets", "int32", "0", default=1),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("old_style_offsets", "[]int64", "0"),
                f("timestamp", "int64", "1+", default=-1),
                f("offset", "int64", "1+", default=-1),
                f("leader_epoch", "int32", "4+", default=-1),
            ]),
        ]),
    ],
)

OFFSET_COMMIT = Api(
    key=8, name="OffsetCommit", versions="0-9", flexible="8+",
    request=[
        f("group_id", "string"),
        f("generation_id_or_member_epoch", "int32", "1+", default=-1),
        f("member_id", "string", "1+"),
        f("group_instance_id", "string", "7+", nullable="7+", default=None),
        f("retention_time_ms", "int64", "2-4", default=-1),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "6+", default=-1),
                f("commit_timestamp", "int64", "1", default=-1),
                f("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32", "3+"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
            ]),
        ]),
    ],
)

OFFSET_FETCH = Api(
    key=9, name="OffsetFetch", versions="0-9", flexible="6+",
    request=[
        f("group_id", "string", "0-7"),
        f("topics", "[]", "0-7", nullable="2-7", fields=[
            f("name", "string", "0-7"),
            f("partition_indexes", "[]int32", "0-7"),
        ]),
        f("groups", "[]", "8+", fields=[
            f("group_id", "string", "8+"),
            f("member_id", "string", "9+", nullable="9+", default=None),
            f("member_epoch", "int32", "9+", default=-1),
            f("topics", "[]", "8+", nullable="8+", fields=[
                f("name", "string", "8+"),
                f("partition_indexes", "[]int32", "8+"),
            ]),
        ]),
        f("require_stable", "bool", "7+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "3+"),
        f("topics", "[]", "0-7", fields=[
            f("name", "string", "0-7"),
            f("partitions", "[]", "0-7", fields=[
                f("partition_index", "int32", "0-7"),
                f("committed_offset", "int64", "0-7"),
                f("committed_leader_epoch", "int32", "5-7", default=-1),
                f("metadata", "string", "0-7", nullable="0-7"),
                f("error_code", "int16", "0-7"),
            ]),
        ]),
        f("error_code", "int16", "2-7"),
        f("groups", "[]", "8+", fields=[
            f("group_id", "string", "8+"),
            f("topics", "[]", "8+", fields=[
                f("name", "string", "8+"),
                f("partitions", "[]", "8+", fields=[
                    f("partition_index", "int32", "8+"),
                    f("committed_offset", "int64", "8+"),
                    f("committed_leader_epoch", "int32", "8+", default=-1),
                    f("metadata", "string", "8+", nullable="8+"),
                    f("error_code", "int16", "8+"),
                ]),
            ]),
            f("error_code", "int16", "8+"),
        ]),
    ],
)

OFFSET_FOR_LEADER_EPOCH = Api(
    key=23, name="OffsetForLeaderEpoch", versions="0-4", flexible="4+",
    request=[
        f("replica_id", "int32", "3+", default=-2),
        f("topics", "[]", fields=[
            f("topic", "string"),
            f("partitions", "[]", fields=[
                f("partition", "int32"),
                f("current_leader_epoch", "int32", "2+", default=-1),
                f("leader_epoch", "int32"),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
        f("topics", "[]", fields=[
            f("topic", "string"),
            f("partitions", "[]", fields=[
                f("error_code", "int16"),
                f("partition", "int32"),
                f("leader_epoch", "int32", "1+", default=-1),
                f("end_offset", "int64", default=-1),
            ]),
        ]),
    ],
)

DELETE_RECORDS = Api(
    key=21, name="DeleteRecords", versions="0-2", flexible="2+",
    request=[
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("offset", "int64"),
            ]),
        ]),
        f("timeout_ms", "int32"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("low_watermark", "int64"),
                f("error_code", "int16"),
            ]),
        ]),
    ],
)

OFFSET_DELETE = Api(
    key=47, name="OffsetDelete", versions="0", flexible="none",
    request=[
        f("group_id", "string"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
            ]),
        ]),
    ],
    response=[
        f("error_code", "int16"),
        f("throttle_time_ms", "int32"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
            ]),
        ]),
    ],
)

APIS = (LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS, OFFSET_DELETE,)
