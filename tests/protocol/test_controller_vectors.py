"""Controller APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterIsr)
against frames written out by hand from Kafka's message definitions (see :mod:`.handmade`): each
request encodes to exactly those bytes and decodes back to its values; each response likewise.
"""

from __future__ import annotations

from broker.protocol import ApiKey

from .handmade import TOPIC_ID, check_request, check_response, h, header_v1, header_v2


# ---------------------------------------------------------------- LeaderAndIsr (4)

def test_leader_and_isr_v1_flat_partition_states():
    body = {
        "controller_id": 1, "controller_epoch": 5,
        "ungrouped_partition_states": [{
            "topic_name": "t", "partition_index": 0, "controller_epoch": 5, "leader": 1,
            "leader_epoch": 3, "isr": [1, 2], "zk_version": 7, "replicas": [1, 2, 3],
            "is_new": True}],
        "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9092}],
    }
    check_request(ApiKey.LEADER_AND_ISR, 1, body, header_v1(4, 1), h(
        "00000001",                                   # controller_id
        "00000005",                                   # controller_epoch
        "00000001",                                   # ungrouped_partition_states: 1
        "0001" "74",                                  #   topic_name "t"
        "00000000",                                   #   partition_index
        "00000005",                                   #   controller_epoch
        "00000001",                                   #   leader
        "00000003",                                   #   leader_epoch
        "00000002" "00000001" "00000002",             #   isr [1, 2]
        "00000007",                                   #   zk_version
        "00000003" "00000001" "00000002" "00000003",  #   replicas [1, 2, 3]
        "01",                                         #   is_new
        "00000001",                                   # live_leaders: 1
        "00000001",                                   #   broker_id
        "0001" "68",                                  #   host_name "h"
        "00002384",                                   #   port 9092
    ))
    check_response(ApiKey.LEADER_AND_ISR, 1, {
        "error_code": 0,
        "partition_errors": [{"topic_name": "t", "partition_index": 0, "error_code": 6}],
    }, h("0000", "00000001", "0001" "74", "00000000", "0006"), flexible=False)


def test_leader_and_isr_v4_flexible_grouped_by_topic():
    body = {
        "controller_id": 1, "controller_epoch": 5, "broker_epoch": 256,
        "topic_states": [{"topic_name": "t", "partition_states": [{
            "partition_index": 0, "controller_epoch": 5, "leader": 1, "leader_epoch": 3,
            "isr": [1, 2], "zk_version": 7, "replicas": [1, 2, 3], "adding_replicas": [3],
            "removing_replicas": [], "is_new": False}]}],
        "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9092}],
    }
    check_request(ApiKey.LEADER_AND_ISR, 4, body, header_v2(4, 4), h(
        "00000001",                          # controller_id
        "00000005",                          # controller_epoch
        "0000000000000100",                  # broker_epoch
        "02",                                # topic_states: 1
        "02" "74",                           #   topic_name "t"
        "02",                                #   partition_states: 1
        "00000000",                          #     partition_index
        "00000005",                          #     controller_epoch
        "00000001",                          #     leader
        "00000003",                          #     leader_epoch
        "03" "00000001" "00000002",          #     isr [1, 2]
        "00000007",                          #     zk_version
        "04" "00000001" "00000002" "00000003",  # replicas [1, 2, 3]
        "02" "00000003",                     #     adding_replicas [3]
        "01",                                #     removing_replicas []
        "00",                                #     is_new
        "00",                                #     tagged fields
        "00",                                #   tagged fields
        "02",                                # live_leaders: 1
        "00000001", "02" "68", "00002384",   #   broker_id, host_name "h", port
        "00",                                #   tagged fields
        "00",                                # tagged fields
    ))
    check_response(ApiKey.LEADER_AND_ISR, 4, {
        "error_code": 0,
        "partition_errors": [{"topic_name": "t", "partition_index": 0, "error_code": 0}],
    }, h("0000", "02", "02" "74", "00000000", "0000", "00", "00"), flexible=True)


def test_leader_and_isr_v5_topic_ids():
    body = {
        "controller_id": 1, "controller_epoch": 5, "broker_epoch": -1, "type": 1,
        "topic_states": [{"topic_name": "t", "topic_id": TOPIC_ID, "partition_states": []}],
        "live_leaders": [],
    }
    check_request(ApiKey.LEADER_AND_ISR, 5, body, header_v2(4, 5), h(
        "00000001", "00000005", "ffffffffffffffff",
        "01",                                    # type
        "02", "02" "74",                         # topic_states: 1, topic_name "t"
        "00112233445566778899aabbccddeeff",      #   topic_id
        "01", "00",                              #   partition_states [], tagged fields
        "01",                                    # live_leaders []
        "00",
    ))
    check_response(ApiKey.LEADER_AND_ISR, 5, {
        "error_code": 0,
        "topics": [{"topic_id": TOPIC_ID,
                    "partition_errors": [{"partition_index": 2, "error_code": 0}]}],
    }, h("0000", "02", "00112233445566778899aabbccddeeff",
         "02", "00000002", "0000", "00",         # partition_errors (no topic_name in v5)
         "00", "00"), flexible=True)


# ---------------------------------------------------------------- StopReplica (5)

def test_stop_replica_v1_topics_and_partition_indexes():
    body = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 9, "delete_partitions": True,
            "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    check_request(ApiKey.STOP_REPLICA, 1, body, header_v1(5, 1), h(
        "00000001", "00000005", "0000000000000009",
        "01",                                   # delete_partitions
        "00000001",                             # topics: 1
        "0001" "74",                            #   name "t"
        "00000002" "00000000" "00000001",       #   partition_indexes [0, 1]
    ))
    check_response(ApiKey.STOP_REPLICA, 1, {
        "error_code": 0,
        "partition_errors": [{"topic_name": "t", "partition_index": 1, "error_code": 0}],
    }, h("0000", "00000001", "0001" "74", "00000001", "0000"), flexible=False)


def test_stop_replica_v3_partition_states_with_leader_epochs():
    body = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 9,
            "topic_states": [{"topic_name": "t", "partition_states": [
                {"partition_index": 0, "leader_epoch": 4, "delete_partition": True},
                {"partition_index": 1, "leader_epoch": -2, "delete_partition": False}]}]}
    check_request(ApiKey.STOP_REPLICA, 3, body, header_v2(5, 3), h(
        "00000001", "00000005", "0000000000000009",
        "02",                                   # topic_states: 1
        "02" "74",                              #   topic_name "t"
        "03",                                   #   partition_states: 2
        "00000000", "00000004", "01", "00",     #     0, epoch 4, delete
        "00000001", "fffffffe", "00", "00",     #     1, epoch -2 (deleting topic), keep
        "00",
        "00",
    ))
    check_response(ApiKey.STOP_REPLICA, 3, {
        "error_code": 0,
        "partition_errors": [{"topic_name": "t", "partition_index": 0, "error_code": 74}],
    }, h("0000", "02", "02" "74", "00000000", "004a", "00", "00"), flexible=True)


# ---------------------------------------------------------------- UpdateMetadata (6)

def test_update_metadata_v0_single_endpoint_brokers():
    body = {"controller_id": 1, "controller_epoch": 5,
            "ungrouped_partition_states": [{
                "topic_name": "t", "partition_index": 0, "controller_epoch": 5, "leader": 2,
                "leader_epoch": 1, "isr": [2], "zk_version": 3, "replicas": [2]}],
            "live_brokers": [{"id": 2, "v0_host": "h", "v0_port": 9092}]}
    check_request(ApiKey.UPDATE_METADATA, 0, body, header_v1(6, 0), h(
        "00000001", "00000005",
        "00000001",                             # ungrouped_partition_states: 1
        "0001" "74", "00000000", "00000005", "00000002", "00000001",
        "00000001" "00000002",                  #   isr [2]
        "00000003",                             #   zk_version
        "00000001" "00000002",                  #   replicas [2]
        "00000001",                             # live_brokers: 1
        "00000002", "0001" "68", "00002384",    #   id, v0_host, v0_port
    ))
    check_response(ApiKey.UPDATE_METADATA, 0, {"error_code": 0}, h("0000"), flexible=False)


def test_update_metadata_v5_endpoints_racks_offline_replicas():
    body = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 7,
            "topic_states": [{"topic_name": "t", "partition_states": [{
                "partition_index": 0, "controller_epoch": 5, "leader": -1, "leader_epoch": 2,
                "isr": [], "zk_version": 4, "replicas": [2], "offline_replicas": [2]}]}],
            "live_brokers": [
                {"id": 1, "endpoints": [{"port": 9092, "host": "h", "listener": "PLAINTEXT",
                                         "security_protocol": 0}], "rack": "r1"},
                {"id": 3, "endpoints": [], "rack": None}]}
    check_request(ApiKey.UPDATE_METADATA, 5, body, header_v1(6, 5), h(
        "00000001", "00000005", "0000000000000007",
        "00000001",                             # topic_states: 1
        "0001" "74",
        "00000001",                             #   partition_states: 1
        "00000000", "00000005", "ffffffff", "00000002",
        "00000000",                             #     isr []
        "00000004",
        "00000001" "00000002",                  #     replicas [2]
        "00000001" "00000002",                  #     offline_replicas [2]
        "00000002",                             # live_brokers: 2
        "00000001",                             #   id 1
        "00000001",                             #   endpoints: 1
        "00002384", "0001" "68",                #     port, host
        "0009" + b"PLAINTEXT".hex(),            #     listener
        "0000",                                 #     security_protocol
        "0002" "7231",                          #   rack "r1"
        "00000003", "00000000", "ffff",         #   id 3, endpoints [], rack null
    ))


def test_update_metadata_v6_flexible():
    body = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 7, "topic_states": [],
            "live_brokers": [{"id": 3, "endpoints": [{"port": 9092, "host": "h",
                                                      "listener": "L", "security_protocol": 0}],
                              "rack": None}]}
    check_request(ApiKey.UPDATE_METADATA, 6, body, header_v2(6, 6), h(
        "00000001", "00000005", "0000000000000007",
        "01",                                   # topic_states []
        "02",                                   # live_brokers: 1
        "00000003",
        "02", "00002384", "02" "68", "02" "4c", "0000", "00",  # endpoint, tagged fields
        "00",                                   #   rack null
        "00",
        "00",
    ))
    check_response(ApiKey.UPDATE_METADATA, 6, {"error_code": 0}, h("0000", "00"), flexible=True)


# ---------------------------------------------------------------- ControlledShutdown (7)

def test_controlled_shutdown_v0_has_no_client_id_in_its_header():
    check_request(ApiKey.CONTROLLED_SHUTDOWN, 0, {"broker_id": 2},
                  h("0007", "0000", "0000002a"),   # request header v0
                  h("00000002"), client_id=None)
    check_response(ApiKey.CONTROLLED_SHUTDOWN, 0, {
        "error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 1}],
    }, h("0000", "00000001", "0001" "74", "00000001"), flexible=False)


def test_controlled_shutdown_v2_and_v3():
    check_request(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 2, "broker_epoch": 5},
                  header_v1(7, 2), h("00000002", "0000000000000005"))
    check_request(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 2, "broker_epoch": 5},
                  header_v2(7, 3), h("00000002", "0000000000000005", "00"))
    check_response(ApiKey.CONTROLLED_SHUTDOWN, 3, {
        "error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 1}],
    }, h("0000", "02", "02" "74", "00000001", "00", "00"), flexible=True)


# ---------------------------------------------------------------- AlterIsr (56)

def test_alter_isr_v0():
    body = {"broker_id": 1, "broker_epoch": 12, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "leader_epoch": 3, "new_isr": [1, 2], "current_isr_version": 8}]}]}
    check_request(ApiKey.ALTER_ISR, 0, body, header_v2(56, 0), h(
        "00000001", "000000000000000c",
        "02", "02" "74",                        # topics: 1, name "t"
        "02",                                   #   partitions: 1
        "00000000", "00000003",
        "03" "00000001" "00000002",             #     new_isr [1, 2]
        "00000008", "00",
        "00",
        "00",
    ))
    check_response(ApiKey.ALTER_ISR, 0, {
        "throttle_time_ms": 0, "error_code": 0,
        "topics": [{"name": "t", "partitions": [{
            "partition_index": 0, "error_code": 0, "leader_id": 1, "leader_epoch": 3,
            "isr": [1, 2], "current_isr_version": 9}]}],
    }, h("00000000", "0000", "02", "02" "74", "02",
         "00000000", "0000", "00000001", "00000003", "03" "00000001" "00000002", "00000009", "00",
         "00", "00"), flexible=True)
