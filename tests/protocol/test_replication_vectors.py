"""What followers send and read: OffsetForLeaderEpoch v3 (``replica_id``) and v4 (flexible), and
Fetch v12 from a replica (``replica_id``, ``current_leader_epoch``, ``last_fetched_epoch``) with
a ``diverging_epoch`` answer in its tagged field, against frames written out by hand from
Kafka's message definitions (see :mod:`.handmade`)."""

from __future__ import annotations

from broker.protocol import ApiKey

from .handmade import check_request, check_response, h, header_v1, header_v2

OFLE_REQUEST = {"replica_id": 1, "topics": [{"topic": "t", "partitions": [
    {"partition": 0, "current_leader_epoch": 5, "leader_epoch": 4}]}]}
OFLE_RESPONSE = {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [
    {"error_code": 0, "partition": 0, "leader_epoch": 4, "end_offset": 100}]}]}


def test_offset_for_leader_epoch_v3_from_a_replica():
    check_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, OFLE_REQUEST, header_v1(23, 3), h(
        "00000001",                                 # replica_id
        "00000001", "0001" "74",                    # topics: t
        "00000001", "00000000", "00000005", "00000004",  # partition, current, asked epoch
    ))
    check_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, OFLE_RESPONSE, h(
        "00000000", "00000001", "0001" "74",
        "00000001", "0000", "00000000", "00000004", "0000000000000064"), flexible=False)


def test_offset_for_leader_epoch_v4_flexible():
    check_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, OFLE_REQUEST, header_v2(23, 4), h(
        "00000001",
        "02", "02" "74",
        "02", "00000000", "00000005", "00000004", "00",
        "00",
        "00",
    ))
    check_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, OFLE_RESPONSE, h(
        "00000000", "02", "02" "74",
        "02", "0000", "00000000", "00000004", "0000000000000064", "00",
        "00",
        "00"), flexible=True)


def test_offset_for_leader_epoch_v0_has_no_replica_id_or_epochs_back():
    check_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, {"topics": [{"topic": "t", "partitions": [
        {"partition": 0, "leader_epoch": 4}]}]}, header_v1(23, 0), h(
        "00000001", "0001" "74", "00000001", "00000000", "00000004"))
    check_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, {"topics": [{"topic": "t", "partitions": [
        {"error_code": 0, "partition": 0, "end_offset": 100}]}]}, h(
        "00000001", "0001" "74", "00000001", "0000", "00000000", "0000000000000064"),
        flexible=False)


def test_fetch_v12_from_a_follower_and_a_diverging_epoch():
    check_request(ApiKey.FETCH, 12, {
        "replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 2147483647,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [{
            "partition": 0, "current_leader_epoch": 5, "fetch_offset": 100,
            "last_fetched_epoch": 4, "log_start_offset": -1, "partition_max_bytes": 1048576}]}],
        "forgotten_topics_data": [], "rack_id": ""}, header_v2(1, 12), h(
        "00000002",                                 # replica_id
        "000001f4", "00000001", "7fffffff", "00",   # max_wait_ms, min_bytes, max_bytes, isolation
        "00000000", "ffffffff",                     # session_id, session_epoch
        "02", "02" "74",                            # topics: t
        "02", "00000000",                           #   partition 0
        "00000005",                                 #     current_leader_epoch
        "0000000000000064",                         #     fetch_offset
        "00000004",                                 #     last_fetched_epoch
        "ffffffffffffffff", "00100000", "00",       #     log_start_offset, partition_max_bytes
        "00",
        "01",                                       # forgotten_topics_data []
        "01",                                       # rack_id ""
        "00",                                       # tagged fields (cluster_id null: omitted)
    ))
    check_response(ApiKey.FETCH, 12, {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
        "responses": [{"topic": "t", "partitions": [{
            "partition_index": 0, "error_code": 0, "high_watermark": 100,
            "last_stable_offset": 100, "log_start_offset": 0, "aborted_transactions": [],
            "preferred_read_replica": -1, "records": None,
            "diverging_epoch": {"epoch": 3, "end_offset": 80}}]}]}, h(
        "00000000", "0000", "00000000",
        "02", "02" "74",
        "02", "00000000", "0000",
        "0000000000000064", "0000000000000064", "0000000000000000",
        "01",                                       # aborted_transactions []
        "ffffffff",                                 # preferred_read_replica
        "00",                                       # records null
        "01", "00", "0d",                           # one tagged field: tag 0, 13 bytes
        "00000003", "0000000000000050", "00",       #   diverging_epoch: epoch 3, end offset 80
        "00",
        "00"), flexible=True)
