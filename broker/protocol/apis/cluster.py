"""Cluster and connection APIs: ApiVersions (18), Metadata (3), DescribeCluster (60),
SaslHandshake (17), SaslAuthenticate (36),
DescribeUserScramCredentials (50), AlterUserScramCredentials (51) (KIP-554),
DescribeClientQuotas (48), AlterClientQuotas (49) (KIP-546; v1 is v0 made flexible, Kafka 2.8).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions (3.8).
"""

from ..schema import Api, f

API_VERSIONS = Api(
    key=18, name="ApiVersions", versions="0-3", flexible="3+",
    request=[
        f("client_software_name", "string", "3+"),
        f("client_software_version", "string", "3+"),
    ],
    response=[
        f("error_code", "int16"),
        f("api_keys", "[]", fields=[
            f("api_key", "int16"),
            f("min_version", "int16"),
            f("max_version", "int16"),
        ]),
        f("throttle_time_ms", "int32", "1+"),
        f("supported_features", "[]", "3+", tag=0, tagged="3+", fields=[
            f("name", "string", "3+"),
            f("min_version", "int16", "3+"),
            f("max_version", "int16", "3+"),
        ]),
        f("finalized_features_epoch", "int64", "3+", default=-1, tag=1, tagged="3+"),
        f("finalized_features", "[]", "3+", tag=2, tagged="3+", fields=[
            f("name", "string", "3+"),
            f("max_version_level", "int16", "3+"),
            f("min_version_level", "int16", "3+"),
        ]),
        f("zk_migration_ready", "bool", "3+", tag=3, tagged="3+"),
    ],
)

METADATA = Api(
    key=3, name="Metadata", versions="0-12", flexible="9+",
    request=[
        f("topics", "[]", nullable="1+", fields=[
            f("topic_id", "uuid", "10+"),
            f("name", "string", nullable="10+"),
        ]),
        f("allow_auto_topic_creation", "bool", "4+", default=True),
        f("include_cluster_authorized_operations", "bool", "8-10"),
        f("include_topic_authorized_operations", "bool", "8+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "3+"),
        f("brokers", "[]", fields=[
            f("node_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("rack", "string", "1+", nullable="1+", default=None),
        ]),
        f("cluster_id", "string", "2+", nullable="2+", default=None),
        f("controller_id", "int32", "1+", default=-1),
        f("topics", "[]", fields=[
            f("error_code", "int16"),
            f("name", "string", nullable="12+"),
            f("topic_id", "uuid", "10+"),
            f("is_internal", "bool", "1+"),
            f("partitions", "[]", fields=[
                f("error_code", "int16"),
                f("partition_index", "int32"),
                f("leader_id", "int32"),
                f("leader_epoch", "int32", "7+", default=-1),
                f("replica_nodes", "[]int32"),
                f("isr_nodes", "[]int32"),
                f("offline_replicas", "[]int32", "5+"),
            ]),
            f("topic_authorized_operations", "int32", "8+", default=-2147483648),
        ]),
        f("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    ],
)

DESCRIBE_CLUSTER = Api(
    key=60, name="DescribeCluster", versions="0-1", flexible="0+",
    request=[
        f("include_cluster_authorized_operations", "bool"),
        f("endpoint_type", "int8", "1+", default=1),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("endpoint_type", "int8", "1+", default=1),
        f("cluster_id", "string"),
        f("controller_id", "int32", default=-1),
        f("brokers", "[]", fields=[
            f("broker_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("rack", "string", nullable="0+", default=None),
        ]),
        f("cluster_authorized_operations", "int32", default=-2147483648),
    ],
)

SASL_HANDSHAKE = Api(
    key=17, name="SaslHandshake", versions="0-1", flexible="none",
    request=[
        f("mechanism", "string"),
    ],
    response=[
        f("error_code", "int16"),
        f("mechanisms", "[]string"),
    ],
)

SASL_AUTHENTICATE = Api(
    key=36, name="SaslAuthenticate", versions="0-2", flexible="2+",
    request=[
        f("auth_bytes", "bytes"),
    ],
    response=[
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+"),
        f("auth_bytes", "bytes"),
        f("session_lifetime_ms", "int64", "1+"),
    ],
)

#: ScramMechanism in the SCRAM credential APIs (0 is UNKNOWN)
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    key=50, name="DescribeUserScramCredentials", versions="0", flexible="0+",
    request=[
        f("users", "[]", nullable="0+", fields=[  # null: every user with a credential
            f("name", "string"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("results", "[]", fields=[
            f("user", "string"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
            f("credential_infos", "[]", fields=[
                f("mechanism", "int8"),
                f("iterations", "int32"),
            ]),
        ]),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    key=51, name="AlterUserScramCredentials", versions="0", flexible="0+",
    request=[
        f("deletions", "[]", fields=[
            f("name", "string"),
            f("mechanism", "int8"),
        ]),
        f("upsertions", "[]", fields=[
            f("name", "string"),
            f("mechanism", "int8"),
            f("iterations", "int32"),
            f("salt", "bytes"),
            f("salted_password", "bytes"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("results", "[]", fields=[
            f("user", "string"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
        ]),
    ],
)

#: DescribeClientQuotas' match types: an exact name, the default entity (``match`` null), any name
QUOTA_MATCH_EXACT, QUOTA_MATCH_DEFAULT, QUOTA_MATCH_SPECIFIED = 0, 1, 2


def _quota_entity() -> dict:
    """A client quota entity: its components, each a type (``user``, ``client-id``) and a name (null: the
    default entity of that type)."""
    return f("entity", "[]", fields=[
        f("entity_type", "string"),
        f("entity_name", "string", nullable="0+"),
    ])


DESCRIBE_CLIENT_QUOTAS = Api(
    key=48, name="DescribeClientQuotas", versions="0-1", flexible="1+",
    request=[
        f("components", "[]", fields=[
            f("entity_type", "string"),
            f("match_type", "int8"),
            f("match", "string", nullable="0+"),
        ]),
        f("strict", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("entries", "[]", nullable="0+", fields=[
            _quota_entity(),
            f("values", "[]", fields=[
                f("key", "string"),
                f("value", "float64"),
            ]),
        ]),
    ],
)

ALTER_CLIENT_QUOTAS = Api(
    key=49, name="AlterClientQuotas", versions="0-1", flexible="1+",
    request=[
        f("entries", "[]", fields=[
            _quota_entity(),
            f("ops", "[]", fields=[
                f("key", "string"),
                f("value", "float64"),
                f("remove", "bool"),
            ]),
        ]),
        f("validate_only", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("entries", "[]", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
            _quota_entity(),
        ]),
    ],
)

APIS = (API_VERSIONS, METADATA, DESCRIBE_CLUSTER, SASL_HANDSHAKE, SASL_AUTHENTICATE,
        DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS)
