"""The group APIs over the wire at the edges of their version ranges (raw requests)."""

from __future__ import annotations

import pytest

from broker.protocol import ApiKey, ErrorCode
from tests.server.wire import Wire

E = ErrorCode
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"  # v0: topics [t], no user data


@pytest.fixture
def wire(broker):
    with Wire(broker.bootstrap) as w:
        w.call(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                     "assignments": [], "configs": []}],
                                         "timeout_ms": 10000, "validate_only": False})
        yield w


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_find_coordinator_group(wire, broker, version):
    body = {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]}
    r = wire.call(ApiKey.FIND_COORDINATOR, version, body)
    entries = r["coordinators"] if version >= 4 else [r]
    assert len(entries) == (2 if version >= 4 else 1)
    for e in entries:
        assert e["error_code"] == E.NONE and (e["host"], e["port"]) == (broker.host, broker.port)


def test_find_coordinator_unknown_key_type_is_invalid_request(wire):
    r = wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": "x", "key_type": 7})
    assert r["error_code"] == E.INVALID_REQUEST


def join_body(member_id="", instance=None):
    return {"group_id": "g", "session_timeout_ms": 6000, "rebalance_timeout_ms": 10000, "member_id": member_id,
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}], "reason": None}


def test_join_v0_and_v5_member_id_required_sync_fetch_delete(wire):
    r = wire.call(ApiKey.JOIN_GROUP, 0, join_body())
    assert r["error_code"] == E.NONE and r["generation_id"] == 1 and r["protocol_name"] == "range"
    leader = r["member_id"]
    # v5: a second member must first learn its id; the join then waits for the leader's rejoin
    r = wire.call(ApiKey.JOIN_GROUP, 5, join_body())
    assert r["error_code"] == E.MEMBER_ID_REQUIRED
    second = r["member_id"]
    cid = wire.send(ApiKey.JOIN_GROUP, 5, join_body(second))
    with Wire(wire.sock.getpeername()[0] + f":{wire.sock.getpeername()[1]}") as w2:
        lead = w2.call(ApiKey.JOIN_GROUP, 7, join_body(leader))
        assert lead["generation_id"] == 2 and lead["protocol_type"] == "consumer" and len(lead["members"]) == 2
        got, follower = wire.receive(ApiKey.JOIN_GROUP, 5)
        assert got == cid and follower["generation_id"] == 2 and follower["members"] == []
        cid = wire.send(ApiKey.SYNC_GROUP, 5, {"group_id": "g", "generation_id": 2, "member_id": second,
                                               "group_instance_id": None, "protocol_type": "consumer",
                                               "protocol_name": "range", "assignments": []})
        r = w2.call(ApiKey.SYNC_GROUP, 3, {"group_id": "g", "generation_id": 2, "member_id": leader,
                                          "group_instance_id": None,
                                          "assignments": [{"member_id": leader, "assignment": b"L"},
                                                          {"member_id": second, "assignment": b"F"}]})
        assert (r["error_code"], bytes(r["assignment"])) == (E.NONE, b"L")
    got, r = wire.receive(ApiKey.SYNC_GROUP, 5)
    assert (r["error_code"], bytes(r["assignment"]), r["protocol_name"]) == (E.NONE, b"F", "range")

    r = wire.call(ApiKey.OFFSET_COMMIT, 8, {"group_id": "g", "generation_id_or_member_epoch": 2,
                                            "member_id": leader, "group_instance_id": None,
                                            "topics": [{"name": "t", "partitions": [
                                                {"partition_index": 0, "committed_offset": 5,
                                                 "committed_leader_epoch": 0, "committed_metadata": "m"}]},
                                                {"name": "nope", "partitions": [
                                                    {"partition_index": 0, "committed_offset": 1,
                                                     "committed_leader_epoch": -1, "committed_metadata": None}]}]})
    assert [[p["error_code"] for p in t["partitions"]] for t in r["topics"]] == [[E.NONE], [E.UNKNOWN_TOPIC_OR_PARTITION]]
    r = wire.call(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None},
                                                      {"group_id": "other", "topics": [
                                                          {"name": "t", "partition_indexes": [1]}]}],
                                           "require_stable": True})
    g, other = r["groups"]
    assert g["topics"][0]["partitions"][0]["committed_offset"] == 5
    assert g["topics"][0]["partitions"][0]["metadata"] == "m"
    assert other["topics"][0]["partitions"][0]["committed_offset"] == -1
    r = wire.call(ApiKey.OFFSET_FETCH, 1, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
    assert [p["committed_offset"] for p in r["topics"][0]["partitions"]] == [5, -1]

    r = wire.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": [{"name": "t", "partitions": [
        {"partition_index": 0}]}]})
    assert r["topics"][0]["partitions"][0]["error_code"] == E.GROUP_SUBSCRIBED_TO_TOPIC
    r = wire.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g", "missing"], "include_authorized_operations": False})
    g, missing = r["groups"]
    assert (g["group_state"], g["protocol_data"], len(g["members"])) == ("Stable", "range", 2)
    assert (missing["error_code"], missing["group_state"]) == (E.NONE, "Dead")
    r = wire.call(ApiKey.LIST_GROUPS, 4, {"states_filter": ["Stable"]})
    assert [(x["group_id"], x["group_state"]) for x in r["groups"]] == [("g", "Stable")]
    r = wire.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert r["results"][0]["error_code"] == E.NON_EMPTY_GROUP

    r = wire.call(ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [
        {"member_id": leader, "group_instance_id": None}, {"member_id": second, "group_instance_id": None},
        {"member_id": "ghost", "group_instance_id": None}]})
    assert [m["error_code"] for m in r["members"]] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    r = wire.call(ApiKey.LEAVE_GROUP, 0, {"group_id": "g", "member_id": leader})
    assert r["error_code"] == E.UNKNOWN_MEMBER_ID
    assert wire.call(ApiKey.DESCRIBE_GROUPS, 0, {"groups": ["g"]})["groups"][0]["group_state"] == "Empty"
    r = wire.call(ApiKey.DELETE_GROUPS, 0, {"groups_names": ["g", "g2"]})
    assert [x["error_code"] for x in r["results"]] == [E.NONE, E.GROUP_ID_NOT_FOUND]
    r = wire.call(ApiKey.OFFSET_FETCH, 2, {"group_id": "g", "topics": None})
    assert (r["error_code"], r["topics"]) == (E.NONE, [])


def test_heartbeat_errors(wire):
    heartbeat = {"group_id": "nope", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    # before __consumer_offsets exists no broker leads the group's partition, as in Kafka
    assert wire.call(ApiKey.HEARTBEAT, 4, heartbeat)["error_code"] == E.NOT_COORDINATOR
    assert wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": "nope", "key_type": 0})["error_code"] == E.NONE
    r = wire.call(ApiKey.HEARTBEAT, 4, heartbeat)
    assert r["error_code"] == E.UNKNOWN_MEMBER_ID
    r = wire.call(ApiKey.JOIN_GROUP, 3, join_body() | {"session_timeout_ms": 1})
    assert r["error_code"] == E.INVALID_SESSION_TIMEOUT


def test_api_versions_advertise_the_group_apis(wire):
    r = wire.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    got = {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
    for key, high in ((8, 9), (9, 9), (10, 4), (11, 9), (12, 4), (13, 5), (14, 5), (15, 5), (16, 5), (42, 2), (47, 0),
                      (68, 1), (69, 1)):
        assert got[key] == (0, high)
