"""Leader discovery in the answer (KIP-951) on a ZooKeeper cluster: Produce v10+ and Fetch v16+ sent to a broker
that does not lead the partition name its current leader and epoch and that leader's endpoint; older versions
carry neither. (librdkafka speaks those versions: every failover test of this directory that uses it, such as
``failover_keeps_every_record``, goes through them.)
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.schema import ZERO_UUID

from tests.server.wire import Wire, make_batch


def _produce(w: Wire, version: int) -> dict:
    return w.call(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "hinted", "partition_data": [{"index": 0, "records": make_batch([b"x"])}]}]})


def _fetch(w: Wire, version: int, topic_id) -> dict:
    topic = {"topic": "hinted", "topic_id": topic_id, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
         "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}
    return w.call(ApiKey.FETCH, version, {
        "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1}, "max_wait_ms": 0,
        "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [topic], "forgotten_topics_data": [], "rack_id": ""})


def test_a_broker_that_does_not_lead_names_the_leader(cluster_factory):
    cluster = cluster_factory(3)
    cluster.create_topic("hinted", assignment={0: [1, 2]})  # broker 3 holds no replica
    leader = cluster.wait_for_leader("hinted", 0)
    epoch = cluster.partition_state("hinted", 0)["leader_epoch"]
    host, port = cluster.broker(leader).bootstrap.rsplit(":", 1)
    endpoint = {"node_id": leader, "host": host, "port": int(port), "rack": None}
    with Wire(cluster.broker(3).bootstrap) as w:
        [t] = w.call(ApiKey.METADATA, 12, {"topics": [{"name": "hinted", "topic_id": ZERO_UUID}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})["topics"]
        topic_id = t["topic_id"]
        produced = _produce(w, 10)
        [p] = produced["responses"][0]["partition_responses"]
        assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert p["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}
        assert produced["node_endpoints"] == [endpoint]
        fetched = _fetch(w, 16, topic_id)
        [p] = fetched["responses"][0]["partitions"]
        assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert p["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}
        assert fetched["node_endpoints"] == [endpoint]
        # the versions before carry no hint
        produced = _produce(w, 9)
        [p] = produced["responses"][0]["partition_responses"]
        assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert p.get("current_leader", {"leader_id": -1, "leader_epoch": -1}) == {"leader_id": -1, "leader_epoch": -1}
        assert produced.get("node_endpoints", []) == []
        fetched = _fetch(w, 15, topic_id)
        assert fetched["responses"][0]["partitions"][0]["current_leader"] == {"leader_id": -1, "leader_epoch": -1}
        assert fetched.get("node_endpoints", []) == []
