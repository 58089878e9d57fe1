"""Fetch (key 1): read record batches from partitions (consumers and follower replicas).

Schemas in the compact form of :mod:`broker.protocol.schema`; field facts follow Apache
Kafka's message definitions (3.8).
"""

from ..schema import Api, f

FETCH = Api(
    key=1, name="Fetch", versions="0-16", flexible="12+",
    request=[
        f("cluster_id", "string", "12+", nullable="12+", default=None, tag=0, tagged="12+"),
        f("replica_id", "int32", "0-14", default=-1),
        f("replica_state", "{}", "15+", tag=1, tagged="15+", fields=[
            f("replica_id", "int32", "15+", default=-1),
            f("replica_epoch", "int64", "15+", default=-1),
        ]),
        f("max_wait_ms", "int32"),
        f("min_bytes", "int32"),
        f("max_bytes", "int32", "3+", default=2147483647),
        f("isolation_level", "int8", "4+"),
        f("session_id", "int32", "7+"),
        f("session_epoch", "int32", "7+", default=-1),
        f("topics", "[]", fields=[
            f("topic", "string", "0-12"),
            f("topic_id", "uuid", "13+"),
            f("partitions", "[]", fields=[
                f("partition", "int32"),
                f("current_leader_epoch", "int32", "9+", default=-1),
                f("fetch_offset", "int64"),
                f("last_fetched_epoch", "int32", "12+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f("partition_max_bytes", "int32"),
            ]),
        ]),
        f("forgotten_topics_data", "[]", "7+", fields=[
            f("topic", "string", "7-12"),
            f("topic_id", "uuid", "13+"),
            f("partitions", "[]int32", "7+"),
        ]),
        f("rack_id", "string", "11+"),
    ],
    response=[
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16", "7+"),
        f("session_id", "int32", "7+"),
        f("responses", "[]", fields=[
            f("topic", "string", "0-12"),
            f("topic_id", "uuid", "13+"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("high_watermark", "int64"),
                f("last_stable_offset", "int64", "4+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f("diverging_epoch", "{}", "12+", tag=0, tagged="12+", fields=[
                    f("epoch", "int32", "12+", default=-1),
                    f("end_offset", "int64", "12+", default=-1),
                ]),
                f("current_leader", "{}", "12+", tag=1, tagged="12+", fields=[
                    f("leader_id", "int32", "12+", default=-1),
                    f("leader_epoch", "int32", "12+", default=-1),
                ]),
                f("snapshot_id", "{}", "12+", tag=2, tagged="12+", fields=[
                    f("end_offset", "int64", default=-1),
                    f("epoch", "int32", default=-1),
                ]),
                f("aborted_transactions", "[]", "4+", nullable="4+", fields=[
                    f("producer_id", "int64", "4+"),
                    f("first_offset", "int64", "4+"),
                ]),
                f("preferred_read_replica", "int32", "11+", default=-1),
                f("records", "records", nullable="0+"),
            ]),
        ]),
        f("node_endpoints", "[]", "16+", tag=0, tagged="16+", fields=[
            f("node_id", "int32", "16+"),
            f("host", "string", "16+"),
            f("port", "int32", "16+"),
            f("rack", "string", "16+", nullable="16+", default=None),
        ]),
    ],
)

APIS = (FETCH,)
