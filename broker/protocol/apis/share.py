"""Share group APIs (KIP-932, queues for Kafka): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), at Kafka 4.2's versions (v0 was 4.0's early access and is gone; every version is
flexible; ShareFetch and ShareAcknowledge v2 add the acquire mode and renew acknowledgements, KIP-1206 and
KIP-1222).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache Kafka's message
definitions. The semantics are in :mod:`broker.share`.
"""

from ..schema import Api, f


def _leader() -> list:
    return [f("leader_id", "int32", default=-1), f("leader_epoch", "int32", default=-1)]


def _node_endpoints():
    return f("node_endpoints", "[]", fields=[
        f("node_id", "int32"),
        f("host", "string"),
        f("port", "int32"),
        f("rack", "string", nullable="0+", default=None),
    ])


def _acknowledgement_batches():
    return f("acknowledgement_batches", "[]", fields=[
        f("first_offset", "int64"),
        f("last_offset", "int64"),
        f("acknowledge_types", "[]int8"),  # 0 gap, 1 accept, 2 release, 3 reject (4 renew, v2)
    ])


SHARE_GROUP_HEARTBEAT = Api(
    key=76, name="ShareGroupHeartbeat", versions="1", flexible="0+",
    request=[
        f("group_id", "string"),
        f("member_id", "string"),  # made by the client
        f("member_epoch", "int32"),  # 0 joins, -1 leaves
        f("rack_id", "string", nullable="0+", default=None),
        f("subscribed_topic_names", "[]string", nullable="0+", default=None),  # null: unchanged
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+", default=None),
        f("member_epoch", "int32"),
        f("heartbeat_interval_ms", "int32"),
        f("assignment", "{}", nullable="0+", default=None, fields=[  # null: unchanged
            f("topic_partitions", "[]", fields=[
                f("topic_id", "uuid"),
                f("partitions", "[]int32"),
            ]),
        ]),
    ],
)

SHARE_GROUP_DESCRIBE = Api(
    key=77, name="ShareGroupDescribe", versions="1", flexible="0+",
    request=[
        f("group_ids", "[]string"),
        f("include_authorized_operations", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("groups", "[]", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
            f("group_id", "string"),
            f("group_state", "string"),
            f("group_epoch", "int32"),
            f("assignment_epoch", "int32"),
            f("assignor_name", "string"),
            f("members", "[]", fields=[
                f("member_id", "string"),
                f("rack_id", "string", nullable="0+", default=None),
                f("member_epoch", "int32"),
                f("client_id", "string"),
                f("client_host", "string"),
                f("subscribed_topic_names", "[]string"),
                f("assignment", "{}", fields=[
                    f("topic_partitions", "[]", fields=[
                        f("topic_id", "uuid"),
                        f("topic_name", "string"),
                        f("partitions", "[]int32"),
                    ]),
                ]),
            ]),
            f("authorized_operations", "int32", default=-2147483648),
        ]),
    ],
)

SHARE_FETCH = Api(
    key=78, name="ShareFetch", versions="1-2", flexible="0+",
    request=[
        f("group_id", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+", default=None),
        f("share_session_epoch", "int32"),  # 0 opens a session, -1 closes it
        f("max_wait_ms", "int32"),
        f("min_bytes", "int32"),
        f("max_bytes", "int32", default=0x7FFFFFFF),
        f("max_records", "int32", "1+"),
        f("batch_size", "int32", "1+"),
        f("share_acquire_mode", "int8", "2+"),
        f("is_renew_ack", "bool", "2+"),
        f("topics", "[]", fields=[
            f("topic_id", "uuid"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("partition_max_bytes", "int32", "0"),
                _acknowledgement_batches(),
            ]),
        ]),
        f("forgotten_topics_data", "[]", fields=[
            f("topic_id", "uuid"),
            f("partitions", "[]int32"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("acquisition_lock_timeout_ms", "int32", "1+"),
        f("responses", "[]", fields=[
            f("topic_id", "uuid"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
                f("acknowledge_error_code", "int16"),
                f("acknowledge_error_message", "string", nullable="0+", default=None),
                f("current_leader", "{}", fields=_leader()),
                f("records", "records", nullable="0", default=b""),  # never null from v1
                f("acquired_records", "[]", fields=[
                    f("first_offset", "int64"),
                    f("last_offset", "int64"),
                    f("delivery_count", "int16"),
                ]),
            ]),
        ]),
        _node_endpoints(),
    ],
)

SHARE_ACKNOWLEDGE = Api(
    key=79, name="ShareAcknowledge", versions="1-2", flexible="0+",
    request=[
        f("group_id", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+", default=None),
        f("share_session_epoch", "int32"),
        f("is_renew_ack", "bool", "2+"),
        f("topics", "[]", fields=[
            f("topic_id", "uuid"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                _acknowledgement_batches(),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("acquisition_lock_timeout_ms", "int32", "2+"),
        f("responses", "[]", fields=[
            f("topic_id", "uuid"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
                f("current_leader", "{}", fields=_leader()),
            ]),
        ]),
        _node_endpoints(),
    ],
)

DESCRIBE_SHARE_GROUP_OFFSETS = Api(
    key=90, name="DescribeShareGroupOffsets", versions="0-1", flexible="0+",
    request=[
        f("groups", "[]", fields=[
            f("group_id", "string"),
            f("topics", "[]", nullable="0+", fields=[  # null: every topic the group has consumed
                f("topic_name", "string"),
                f("partitions", "[]int32"),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("groups", "[]", fields=[
            f("group_id", "string"),
            f("topics", "[]", fields=[
                f("topic_name", "string"),
                f("topic_id", "uuid"),
                f("partitions", "[]", fields=[
                    f("partition_index", "int32"),
                    f("start_offset", "int64"),
                    f("leader_epoch", "int32"),
                    f("lag", "int64", "1+", default=-1),
                    f("error_code", "int16"),
                    f("error_message", "string", nullable="0+", default=None),
                ]),
            ]),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
        ]),
    ],
)

ALTER_SHARE_GROUP_OFFSETS = Api(
    key=91, name="AlterShareGroupOffsets", versions="0", flexible="0+",
    request=[
        f("group_id", "string"),
        f("topics", "[]", fields=[
            f("topic_name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("start_offset", "int64"),
            ]),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("responses", "[]", fields=[
            f("topic_name", "string"),
            f("topic_id", "uuid"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
            ]),
        ]),
    ],
)

DELETE_SHARE_GROUP_OFFSETS = Api(
    key=92, name="DeleteShareGroupOffsets", versions="0", flexible="0+",
    request=[
        f("group_id", "string"),
        f("topics", "[]", fields=[
            f("topic_name", "string"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("responses", "[]", fields=[
            f("topic_name", "string"),
            f("topic_id", "uuid"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
        ]),
    ],
)

APIS = (SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE, DESCRIBE_SHARE_GROUP_OFFSETS,
        ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS)
