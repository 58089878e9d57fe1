"""Admin APIs: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DescribeConfigs (32),
AlterConfigs (33), IncrementalAlterConfigs (44), DescribeLogDirs (35).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions (3.8).
"""

from ..schema import Api, f

CREATE_TOPICS = Api(
    key=19, name="CreateTopics", versions="0-7", flexible="5+",
    request=[
        f("topics", "[]", fields=[
            f("name", "string"),
            f("num_partitions", "int32"),
            f("replication_factor", "int16"),
            f("assignments", "[]", fields=[
                f("partition_index", "int32"),
                f("broker_ids", "[]int32"),
            ]),
            f("configs", "[]", fields=[
                f("name", "string"),
                f("value", "string", nullable="0+"),
            ]),
        ]),
        f("timeout_ms", "int32", default=60000),
        f("validate_only", "bool", "1+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "2+"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("topic_id", "uuid", "7+"),
            f("error_code", "int16"),
            f("error_message", "string", "1+", nullable="0+"),
            f("topic_config_error_code", "int16", "5+", tag=0, tagged="5+"),
            f("num_partitions", "int32", "5+", default=-1),
            f("replication_factor", "int16", "5+", default=-1),
            f("configs", "[]", "5+", nullable="5+", fields=[
                f("name", "string", "5+"),
                f("value", "string", "5+", nullable="5+"),
                f("read_only", "bool", "5+"),
                f("config_source", "int8", "5+", default=-1),
                f("is_sensitive", "bool", "5+"),
            ]),
        ]),
    ],
)

DELETE_TOPICS = Api(
    key=20, name="DeleteTopics", versions="0-6", flexible="4+",
    request=[
        f("topics", "[]", "6+", fields=[
            f("name", "string", "6+", nullable="6+", default=None),
            f("topic_id", "uuid", "6+"),
        ]),
        f("topic_names", "[]string", "0-5"),
        f("timeout_ms", "int32"),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("responses", "[]", fields=[
            f("name", "string", nullable="6+"),
            f("topic_id", "uuid", "6+"),
            f("error_code", "int16"),
            f("error_message", "string", "5+", nullable="5+", default=None),
        ]),
    ],
)

CREATE_PARTITIONS = Api(
    key=37, name="CreatePartitions", versions="0-3", flexible="2+",
    request=[
        f("topics", "[]", fields=[
            f("name", "string"),
            f("count", "int32"),
            f("assignments", "[]", nullable="0+", fields=[
                f("broker_ids", "[]int32"),
            ]),
        ]),
        f("timeout_ms", "int32"),
        f("validate_only", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("results", "[]", fields=[
            f("name", "string"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
        ]),
    ],
)

DESCRIBE_CONFIGS = Api(
    key=32, name="DescribeConfigs", versions="0-4", flexible="4+",
    request=[
        f("resources", "[]", fields=[
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configuration_keys", "[]string", nullable="0+"),
        ]),
        f("include_synonyms", "bool", "1+"),
        f("include_documentation", "bool", "3+"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("results", "[]", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configs", "[]", fields=[
                f("name", "string"),
                f("value", "string", nullable="0+"),
                f("read_only", "bool"),
                f("is_default", "bool", "0"),
                f("config_source", "int8", "1+", default=-1),
                f("is_sensitive", "bool"),
                f("synonyms", "[]", "1+", fields=[
                    f("name", "string", "1+"),
                    f("value", "string", "1+", nullable="0+"),
                    f("source", "int8", "1+"),
                ]),
                f("config_type", "int8", "3+"),
                f("documentation", "string", "3+", nullable="0+"),
            ]),
        ]),
    ],
)

ALTER_CONFIGS = Api(
    key=33, name="AlterConfigs", versions="0-2", flexible="2+",
    request=[
        f("resources", "[]", fields=[
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configs", "[]", fields=[
                f("name", "string"),
                f("value", "string", nullable="0+"),
            ]),
        ]),
        f("validate_only", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("responses", "[]", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
        ]),
    ],
)

INCREMENTAL_ALTER_CONFIGS = Api(
    key=44, name="IncrementalAlterConfigs", versions="0-1", flexible="1+",
    request=[
        f("resources", "[]", fields=[
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configs", "[]", fields=[
                f("name", "string"),
                f("config_operation", "int8"),
                f("value", "string", nullable="0+"),
            ]),
        ]),
        f("validate_only", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("responses", "[]", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
        ]),
    ],
)

DESCRIBE_LOG_DIRS = Api(
    key=35, name="DescribeLogDirs", versions="0-4", flexible="2+",
    request=[
        f("topics", "[]", nullable="0+", fields=[
            f("topic", "string"),
            f("partitions", "[]int32"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16", "3+"),
        f("results", "[]", fields=[
            f("error_code", "int16"),
            f("log_dir", "string"),
            f("topics", "[]", fields=[
                f("name", "string"),
                f("partitions", "[]", fields=[
                    f("partition_index", "int32"),
                    f("partition_size", "int64"),
                    f("offset_lag", "int64"),
                    f("is_future_key", "bool"),
                ]),
            ]),
            f("total_bytes", "int64", "4+", default=-1),
            f("usable_bytes", "int64", "4+", default=-1),
        ]),
    ],
)

APIS = (CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_LOG_DIRS,)
