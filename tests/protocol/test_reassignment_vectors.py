"""Replica placement APIs (AlterReplicaLogDirs, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments) against frames written out by hand from Kafka's message
definitions (see :mod:`.handmade`)."""

from __future__ import annotations

from broker.protocol import ApiKey

from .handmade import check_request, check_response, h, header_v1, header_v2


def test_alter_replica_log_dirs_v1():
    check_request(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, {
        "dirs": [{"path": "/d", "topics": [{"name": "t", "partitions": [0]}]}]}, header_v1(34, 1), h(
        "00000001", "0002" "2f64",                         # dirs: 1, path "/d"
        "00000001", "0001" "74", "00000001" "00000000",    #   topics: t [0]
    ))
    check_response(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, {"throttle_time_ms": 0, "results": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "error_code": 57}]}]}, h(
        "00000000", "00000001", "0001" "74", "00000001", "00000000", "0039"), flexible=False)


def test_elect_leaders_v0_v1_non_flexible():
    check_request(ApiKey.ELECT_LEADERS, 0, {
        "topic_partitions": [{"topic": "t", "partition_id": [0]}], "timeout_ms": 60000},
        header_v1(43, 0), h("00000001", "0001" "74", "00000001" "00000000", "0000ea60"))
    # v1: election_type first; a null topic_partitions means every partition
    check_request(ApiKey.ELECT_LEADERS, 1, {"election_type": 0, "topic_partitions": None,
                                            "timeout_ms": 1000},
                  header_v1(43, 1), h("00", "ffffffff", "000003e8"))
    check_response(ApiKey.ELECT_LEADERS, 0, {"throttle_time_ms": 0, "replica_election_results": [
        {"topic": "t", "partition_result": [
            {"partition_id": 0, "error_code": 0, "error_message": None}]}]}, h(
        "00000000",                                         # no top-level error_code in v0
        "00000001", "0001" "74", "00000001", "00000000", "0000", "ffff"), flexible=False)


def test_elect_leaders_v2_flexible():
    check_request(ApiKey.ELECT_LEADERS, 2, {"election_type": 1, "topic_partitions": None,
                                            "timeout_ms": 60000},
                  header_v2(43, 2), h("01", "00", "0000ea60", "00"))
    check_response(ApiKey.ELECT_LEADERS, 2, {
        "throttle_time_ms": 0, "error_code": 0, "replica_election_results": [
            {"topic": "t", "partition_result": [
                {"partition_id": 0, "error_code": 84, "error_message": "n"}]}]}, h(
        "00000000", "0000",
        "02", "02" "74", "02", "00000000", "0054", "02" "6e", "00", "00",
        "00"), flexible=True)


def test_alter_partition_reassignments_v0():
    check_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 60000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 2, 3]},
                                     {"partition_index": 1, "replicas": None}]}]},
        header_v2(45, 0), h(
        "0000ea60",
        "02", "02" "74",
        "03",
        "00000000", "04" "00000001" "00000002" "00000003", "00",
        "00000001", "00", "00",                            # replicas null: cancel
        "00",
        "00",
    ))
    check_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
            {"name": "t", "partitions": [
                {"partition_index": 0, "error_code": 0, "error_message": None}]}]}, h(
        "00000000", "0000", "00",
        "02", "02" "74", "02", "00000000", "0000", "00", "00", "00",
        "00"), flexible=True)


def test_list_partition_reassignments_v0():
    check_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 60000, "topics": None},
                  header_v2(46, 0), h("0000ea60", "00", "00"))
    check_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 2, 3],
                                          "adding_replicas": [3], "removing_replicas": [1]}]}]}, h(
        "00000000", "0000", "00",
        "02", "02" "74",
        "02", "00000000", "04" "00000001" "00000002" "00000003", "02" "00000003",
        "02" "00000001", "00",
        "00",
        "00"), flexible=True)
