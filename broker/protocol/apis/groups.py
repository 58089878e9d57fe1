"""Consumer group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42); and the consumer rebalance
protocol's (KIP-848, Kafka 4.x): ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions (3.8).
"""

from ..schema import Api, f

FIND_COORDINATOR = Api(
    key=10, name="FindCoordinator", versions="0-5", flexible="3+",
    request=[
        f("key", "string", "0-3"),
        f("key_type", "int8", "1+"),
        f("coordinator_keys", "[]string", "4+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16", "0-3"),
        f("error_message", "string", "1-3", nullable="1-3"),
        f("node_id", "int32", "0-3"),
        f("host", "string", "0-3"),
        f("port", "int32", "0-3"),
        f("coordinators", "[]", "4+", fields=[
            f("key", "string", "4+"),
            f("node_id", "int32", "4+"),
            f("host", "string", "4+"),
            f("port", "int32", "4+"),
            f("error_code", "int16", "4+"),
            f("error_message", "string", "4+", nullable="4+"),
        ]),
    ],
)

JOIN_GROUP = Api(
    key=11, name="JoinGroup", versions="0-9", flexible="6+",
    request=[
        f("group_id", "string"),
        f("session_timeout_ms", "int32"),
        f("rebalance_timeout_ms", "int32", "1+", default=-1),
        f("member_id", "string"),
        f("group_instance_id", "string", "5+", nullable="5+", default=None),
        f("protocol_type", "string"),
        f("protocols", "[]", fields=[
            f("name", "string"),
            f("metadata", "bytes"),
        ]),
        f("reason", "string", "8+", nullable="8+", default=None),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
        f("error_code", "int16"),
        f("generation_id", "int32", default=-1),
        f("protocol_type", "string", "7+", nullable="7+", default=None),
        f("protocol_name", "string", nullable="7+"),
        f("leader", "string"),
        f("skip_assignment", "bool", "9+"),
        f("member_id", "string"),
        f("members", "[]", fields=[
            f("member_id", "string"),
            f("group_instance_id", "string", "5+", nullable="5+", default=None),
            f("metadata", "bytes"),
        ]),
    ],
)

HEARTBEAT = Api(
    key=12, name="Heartbeat", versions="0-4", flexible="4+",
    request=[
        f("group_id", "string"),
        f("generation_id", "int32"),
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
    ],
)

LEAVE_GROUP = Api(
    key=13, name="LeaveGroup", versions="0-5", flexible="4+",
    request=[
        f("group_id", "string"),
        f("member_id", "string", "0-2"),
        f("members", "[]", "3+", fields=[
            f("member_id", "string", "3+"),
            f("group_instance_id", "string", "3+", nullable="3+", default=None),
            f("reason", "string", "5+", nullable="5+", default=None),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        f("members", "[]", "3+", fields=[
            f("member_id", "string", "3+"),
            f("group_instance_id", "string", "3+", nullable="3+"),
            f("error_code", "int16", "3+"),
        ]),
    ],
)

SYNC_GROUP = Api(
    key=14, name="SyncGroup", versions="0-5", flexible="4+",
    request=[
        f("group_id", "string"),
        f("generation_id", "int32"),
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("protocol_type", "string", "5+", nullable="5+", default=None),
        f("protocol_name", "string", "5+", nullable="5+", default=None),
        f("assignments", "[]", fields=[
            f("member_id", "string"),
            f("assignment", "bytes"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        f("protocol_type", "string", "5+", nullable="5+", default=None),
        f("protocol_name", "string", "5+", nullable="5+", default=None),
        f("assignment", "bytes"),
    ],
)

DESCRIBE_GROUPS = Api(
    key=15, name="DescribeGroups", versions="0-5", flexible="5+",
    request=[
        f("groups", "[]string"),
        f("include_authorized_operations", "bool", "3+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("groups", "[]", fields=[
            f("error_code", "int16"),
            f("group_id", "string"),
            f("group_state", "string"),
            f("protocol_type", "string"),
            f("protocol_data", "string"),
            f("members", "[]", fields=[
                f("member_id", "string"),
                f("group_instance_id", "string", "4+", nullable="4+", default=None),
                f("client_id", "string"),
                f("client_host", "string"),
                f("member_metadata", "bytes"),
                f("member_assignment", "bytes"),
            ]),
            f("authorized_operations", "int32", "3+", default=-2147483648),
        ]),
    ],
)

LIST_GROUPS = Api(
    key=16, name="ListGroups", versions="0-5", flexible="3+",
    request=[
        f("states_filter", "[]string", "4+"),
        f("types_filter", "[]string", "5+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        f("groups", "[]", fields=[
            f("group_id", "string"),
            f("protocol_type", "string"),
            f("group_state", "string", "4+"),
            f("group_type", "string", "5+"),
        ]),
    ],
)

DELETE_GROUPS = Api(
    key=42, name="DeleteGroups", versions="0-2", flexible="2+",
    request=[
        f("groups_names", "[]string"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("results", "[]", fields=[
            f("group_id", "string"),
            f("error_code", "int16"),
        ]),
    ],
)


def _topic_partitions(named: bool = False) -> list:
    return [f("topic_id", "uuid"), *([f("topic_name", "string")] if named else []), f("partitions", "[]int32")]


CONSUMER_GROUP_HEARTBEAT = Api(
    key=68, name="ConsumerGroupHeartbeat", versions="0-1", flexible="0+",
    request=[
        f("group_id", "string"),
        f("member_id", "string"),  # v1: made by the client
        f("member_epoch", "int32"),  # 0 joins, -1 leaves, -2 a static member leaves for now
        f("instance_id", "string", nullable="0+", default=None),
        f("rack_id", "string", nullable="0+", default=None),
        f("rebalance_timeout_ms", "int32", default=-1),  # -1: unchanged
        f("subscribed_topic_names", "[]string", nullable="0+", default=None),  # null: unchanged
        f("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        f("server_assignor", "string", nullable="0+", default=None),
        f("topic_partitions", "[]", nullable="0+", default=None, fields=_topic_partitions()),  # owned; null: unchanged
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("member_id", "string", nullable="0+", default=None),
        f("member_epoch", "int32"),
        f("heartbeat_interval_ms", "int32"),
        f("assignment", "{}", nullable="0+", default=None, fields=[  # null: unchanged
            f("topic_partitions", "[]", fields=_topic_partitions()),
        ]),
    ],
)

CONSUMER_GROUP_DESCRIBE = Api(
    key=69, name="ConsumerGroupDescribe", versions="0-1", flexible="0+",
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
                f("instance_id", "string", nullable="0+", default=None),
                f("rack_id", "string", nullable="0+", default=None),
                f("member_epoch", "int32"),
                f("client_id", "string"),
                f("client_host", "string"),
                f("subscribed_topic_names", "[]string"),
                f("subscribed_topic_regex", "string", nullable="0+", default=None),
                f("assignment", "{}", fields=[f("topic_partitions", "[]", fields=_topic_partitions(named=True))]),
                f("target_assignment", "{}", fields=[f("topic_partitions", "[]", fields=_topic_partitions(named=True))]),
                f("member_type", "int8", "1+", default=-1),  # 1: a member of the consumer protocol
            ]),
            f("authorized_operations", "int32", default=-2147483648),
        ]),
    ],
)

APIS = (FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS,
        CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE)
