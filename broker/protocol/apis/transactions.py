"""Producer id and transaction APIs: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28),
DescribeProducers (61), DescribeTransactions (65), ListTransactions (66).

Schemas in the compact form of :mod:`broker.protocol.schema`. InitProducerId follows Apache
Kafka's message definitions (3.8); the others follow Kafka 3.0's, which are Kafka 2.7's plus
one flexible version each (AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v3, WriteTxnMarkers
v1) and the three describe/list APIs of KIP-664. AddPartitionsToTxn stops at v3: v4 (KIP-890)
batches several transactions in one request under other field names.
"""

from ..schema import Api, f

INIT_PRODUCER_ID = Api(
    key=22, name="InitProducerId", versions="0-5", flexible="2+",
    request=[
        f("transactional_id", "string", nullable="0+"),
        f("transaction_timeout_ms", "int32"),
        f("producer_id", "int64", "3+", default=-1),
        f("producer_epoch", "int16", "3+", default=-1),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", default=-1),
        f("producer_epoch", "int16"),
    ],
)

ADD_PARTITIONS_TO_TXN = Api(
    key=24, name="AddPartitionsToTxn", versions="0-3", flexible="3+",
    request=[
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]int32"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("results", "[]", fields=[
            f("name", "string"),
            f("results", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
            ]),
        ]),
    ],
)

ADD_OFFSETS_TO_TXN = Api(
    key=25, name="AddOffsetsToTxn", versions="0-3", flexible="3+",
    request=[
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("group_id", "string"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
    ],
)

END_TXN = Api(
    key=26, name="EndTxn", versions="0-3", flexible="3+",
    request=[
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("committed", "bool"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
    ],
)

WRITE_TXN_MARKERS = Api(
    key=27, name="WriteTxnMarkers", versions="0-1", flexible="1+",
    request=[
        f("markers", "[]", fields=[
            f("producer_id", "int64"),
            f("producer_epoch", "int16"),
            f("transaction_result", "bool"),
            f("topics", "[]", fields=[
                f("name", "string"),
                f("partition_indexes", "[]int32"),
            ]),
            f("coordinator_epoch", "int32"),
        ]),
    ],
    response=[
        f("markers", "[]", fields=[
            f("producer_id", "int64"),
            f("topics", "[]", fields=[
                f("name", "string"),
                f("partitions", "[]", fields=[
                    f("partition_index", "int32"),
                    f("error_code", "int16"),
                ]),
            ]),
        ]),
    ],
)

TXN_OFFSET_COMMIT = Api(
    key=28, name="TxnOffsetCommit", versions="0-3", flexible="3+",
    request=[
        f("transactional_id", "string"),
        f("group_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("generation_id", "int32", "3+", default=-1),
        f("member_id", "string", "3+"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "2+", default=-1),
                f("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ],
    response=[
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

DESCRIBE_PRODUCERS = Api(
    key=61, name="DescribeProducers", versions="0", flexible="0+",
    request=[
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partition_indexes", "[]int32"),
        ]),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("topics", "[]", fields=[
            f("name", "string"),
            f("partitions", "[]", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
                f("active_producers", "[]", fields=[
                    f("producer_id", "int64"),
                    f("producer_epoch", "int32"),
                    f("last_sequence", "int32", default=-1),
                    f("last_timestamp", "int64", default=-1),
                    f("coordinator_epoch", "int32"),
                    f("current_txn_start_offset", "int64", default=-1),
                ]),
            ]),
        ]),
    ],
)

DESCRIBE_TRANSACTIONS = Api(
    key=65, name="DescribeTransactions", versions="0", flexible="0+",
    request=[
        f("transactional_ids", "[]string"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("transaction_states", "[]", fields=[
            f("error_code", "int16"),
            f("transactional_id", "string"),
            f("transaction_state", "string"),
            f("transaction_timeout_ms", "int32"),
            f("transaction_start_time_ms", "int64"),
            f("producer_id", "int64"),
            f("producer_epoch", "int16"),
            f("topics", "[]", fields=[
                f("topic", "string"),
                f("partitions", "[]int32"),
            ]),
        ]),
    ],
)

LIST_TRANSACTIONS = Api(
    key=66, name="ListTransactions", versions="0", flexible="0+",
    request=[
        f("state_filters", "[]string"),
        f("producer_id_filters", "[]int64"),
    ],
    response=[
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("unknown_state_filters", "[]string"),
        f("transaction_states", "[]", fields=[
            f("transactional_id", "string"),
            f("producer_id", "int64"),
            f("transaction_state", "string"),
        ]),
    ],
)

APIS = (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS,
        TXN_OFFSET_COMMIT, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS)
