"""Transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions) against frames
written out by hand from Kafka's message definitions (see :mod:`.handmade`)."""

from __future__ import annotations

from broker.protocol import ApiKey

from .handmade import check_request, check_response, h, header_v1, header_v2

ONGOING = "08" + b"Ongoing".hex()   # compact string "Ongoing"


def test_add_partitions_to_txn_v0_and_v3():
    body = {"transactional_id": "x", "producer_id": 7, "producer_epoch": 2,
            "topics": [{"name": "t", "partitions": [0, 1]}]}
    check_request(ApiKey.ADD_PARTITIONS_TO_TXN, 0, body, header_v1(24, 0), h(
        "0001" "78", "0000000000000007", "0002",
        "00000001", "0001" "74", "00000002" "00000000" "00000001",
    ))
    check_request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body, header_v2(24, 3), h(
        "02" "78", "0000000000000007", "0002",
        "02", "02" "74", "03" "00000000" "00000001", "00",
        "00",
    ))
    result = {"throttle_time_ms": 0, "results": [
        {"name": "t", "results": [{"partition_index": 0, "error_code": 0}]}]}
    check_response(ApiKey.ADD_PARTITIONS_TO_TXN, 0, result, h(
        "00000000", "00000001", "0001" "74", "00000001", "00000000", "0000"), flexible=False)
    check_response(ApiKey.ADD_PARTITIONS_TO_TXN, 3, result, h(
        "00000000", "02", "02" "74", "02", "00000000", "0000", "00", "00", "00"), flexible=True)


def test_add_offsets_to_txn_v2_and_v3():
    body = {"transactional_id": "x", "producer_id": 7, "producer_epoch": 2, "group_id": "g"}
    check_request(ApiKey.ADD_OFFSETS_TO_TXN, 2, body, header_v1(25, 2), h(
        "0001" "78", "0000000000000007", "0002", "0001" "67"))
    check_request(ApiKey.ADD_OFFSETS_TO_TXN, 3, body, header_v2(25, 3), h(
        "02" "78", "0000000000000007", "0002", "02" "67", "00"))
    check_response(ApiKey.ADD_OFFSETS_TO_TXN, 2, {"throttle_time_ms": 5, "error_code": 90},
                   h("00000005", "005a"), flexible=False)
    check_response(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"throttle_time_ms": 5, "error_code": 90},
                   h("00000005", "005a", "00"), flexible=True)


def test_end_txn_v1_and_v3():
    body = {"transactional_id": "x", "producer_id": 7, "producer_epoch": 2, "committed": True}
    check_request(ApiKey.END_TXN, 1, body, header_v1(26, 1), h(
        "0001" "78", "0000000000000007", "0002", "01"))
    check_request(ApiKey.END_TXN, 3, body, header_v2(26, 3), h(
        "02" "78", "0000000000000007", "0002", "01", "00"))
    check_response(ApiKey.END_TXN, 1, {"throttle_time_ms": 0, "error_code": 48},
                   h("00000000", "0030"), flexible=False)
    check_response(ApiKey.END_TXN, 3, {"throttle_time_ms": 0, "error_code": 48},
                   h("00000000", "0030", "00"), flexible=True)


def test_write_txn_markers_v0_and_v1():
    body = {"markers": [{"producer_id": 7, "producer_epoch": 2, "transaction_result": True,
                         "topics": [{"name": "t", "partition_indexes": [0]}],
                         "coordinator_epoch": 3}]}
    check_request(ApiKey.WRITE_TXN_MARKERS, 0, body, header_v1(27, 0), h(
        "00000001",                                        # markers: 1
        "0000000000000007", "0002", "01",                  #   producer id, epoch, commit
        "00000001", "0001" "74", "00000001" "00000000",    #   topics: t [0]
        "00000003",                                        #   coordinator_epoch
    ))
    check_request(ApiKey.WRITE_TXN_MARKERS, 1, body, header_v2(27, 1), h(
        "02",
        "0000000000000007", "0002", "01",
        "02", "02" "74", "02" "00000000", "00",
        "00000003", "00",
        "00",
    ))
    result = {"markers": [{"producer_id": 7, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}]}]}
    check_response(ApiKey.WRITE_TXN_MARKERS, 0, result, h(
        "00000001", "0000000000000007", "00000001", "0001" "74", "00000001", "00000000", "0000"),
        flexible=False)
    check_response(ApiKey.WRITE_TXN_MARKERS, 1, result, h(
        "02", "0000000000000007", "02", "02" "74", "02", "00000000", "0000", "00", "00", "00",
        "00"), flexible=True)


def test_txn_offset_commit_v2_and_v3():
    partition = {"partition_index": 0, "committed_offset": 100, "committed_leader_epoch": 4}
    check_request(ApiKey.TXN_OFFSET_COMMIT, 2, {
        "transactional_id": "x", "group_id": "g", "producer_id": 7, "producer_epoch": 2,
        "topics": [{"name": "t", "partitions": [{**partition, "committed_metadata": None}]}],
    }, header_v1(28, 2), h(
        "0001" "78", "0001" "67", "0000000000000007", "0002",
        "00000001", "0001" "74",
        "00000001", "00000000", "0000000000000064", "00000004", "ffff",  # metadata null
    ))
    check_request(ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": "x", "group_id": "g", "producer_id": 7, "producer_epoch": 2,
        "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{**partition, "committed_metadata": "m"}]}],
    }, header_v2(28, 3), h(
        "02" "78", "02" "67", "0000000000000007", "0002",
        "00000001", "02" "6d", "00",                      # generation, member, instance null
        "02", "02" "74",
        "02", "00000000", "0000000000000064", "00000004", "02" "6d", "00",
        "00",
        "00",
    ))
    result = {"throttle_time_ms": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    check_response(ApiKey.TXN_OFFSET_COMMIT, 2, result, h(
        "00000000", "00000001", "0001" "74", "00000001", "00000000", "0000"), flexible=False)
    check_response(ApiKey.TXN_OFFSET_COMMIT, 3, result, h(
        "00000000", "02", "02" "74", "02", "00000000", "0000", "00", "00", "00"), flexible=True)


def test_describe_producers_v0():
    check_request(ApiKey.DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": "t", "partition_indexes": [0]}]}, header_v2(61, 0), h(
        "02", "02" "74", "02" "00000000", "00", "00"))
    check_response(ApiKey.DESCRIBE_PRODUCERS, 0, {"throttle_time_ms": 0, "topics": [{
        "name": "t", "partitions": [{
            "partition_index": 0, "error_code": 0, "error_message": None,
            "active_producers": [{"producer_id": 7, "producer_epoch": 2, "last_sequence": 10,
                                  "last_timestamp": 100, "coordinator_epoch": 3,
                                  "current_txn_start_offset": -1}]}]}]}, h(
        "00000000",
        "02", "02" "74",
        "02", "00000000", "0000", "00",                    # partition 0, no error, null message
        "02", "0000000000000007", "00000002", "0000000a",  #   producer id, epoch (int32), seq
        "0000000000000064", "00000003", "ffffffffffffffff", "00",
        "00",
        "00",
        "00",
    ), flexible=True)


def test_describe_transactions_v0():
    check_request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["x"]}, header_v2(65, 0),
                  h("02" "02" "78", "00"))
    check_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"throttle_time_ms": 0, "transaction_states": [{
        "error_code": 0, "transactional_id": "x", "transaction_state": "Ongoing",
        "transaction_timeout_ms": 60000, "transaction_start_time_ms": 100, "producer_id": 7,
        "producer_epoch": 2, "topics": [{"topic": "t", "partitions": [0]}]}]}, h(
        "00000000",
        "02", "0000", "02" "78", ONGOING, "0000ea60", "0000000000000064",
        "0000000000000007", "0002",
        "02", "02" "74", "02" "00000000", "00",
        "00",
        "00",
    ), flexible=True)


def test_list_transactions_v0():
    check_request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": ["Ongoing"],
                                                "producer_id_filters": [7]}, header_v2(66, 0),
                  h("02", ONGOING, "02" "0000000000000007", "00"))
    check_response(ApiKey.LIST_TRANSACTIONS, 0, {
        "throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": [],
        "transaction_states": [{"transactional_id": "x", "producer_id": 7,
                                "transaction_state": "Ongoing"}]}, h(
        "00000000", "0000", "01",
        "02", "02" "78", "0000000000000007", ONGOING, "00",
        "00",
    ), flexible=True)
