"""Share groups (KIP-932) on a ZooKeeper cluster: members on the coordinator, records on each partition's leader,
and what the group has acknowledged surviving a SIGKILL of the leader (the state is in ZooKeeper).
"""

from __future__ import annotations

import json
import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from .conftest import WAIT_S


def poll_until(consumer, count: int, limit: float = WAIT_S, ack=None) -> set:
    """Poll until ``count`` distinct (partition, offset) arrived; ``ack(msg)`` names each one's acknowledgement."""
    got = set()
    deadline = time.monotonic() + limit
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.poll(timeout=0.2):
            if msg.error() is None:
                got.add((msg.partition(), msg.offset()))
                if ack is not None:
                    consumer.acknowledge(msg, ack(msg))
    return got


def test_acknowledged_records_stay_acknowledged_across_a_leader_failover(cluster_factory):
    # the released records come back while the test polls for the rest: a high delivery limit keeps them
    cluster = cluster_factory(3, props={"group.share.record.lock.duration.ms": 15000,
                                        "group.share.delivery.count.limit": 10})
    cluster.create_topic("jobs", partitions=2, replication_factor=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "workers", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT_S)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("jobs", b"job-%d" % i, partition=i % 2)
    assert producer.flush(WAIT_S) == 0

    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": "workers", "share.acknowledgement.mode": "explicit"}
    first = ShareConsumer(conf)
    first.subscribe(["jobs"])
    # 30 records of each partition accepted; the other 20 released (delivered again, released again)
    got = poll_until(first, 100, ack=lambda m: AcknowledgeType.ACCEPT if m.offset() < 30 else AcknowledgeType.RELEASE)
    assert got == {(p, o) for p in (0, 1) for o in range(50)}
    assert all(err is None for err in first.commit_sync().values())
    stored = json.loads(cluster.zk.get(f"/share_group_state/workers/{_topic_id(cluster)}-0")[0])
    assert stored["start_offset"] == 30

    leader = cluster.leader("jobs", 0)
    cluster.kill(leader)  # the leader of partition 0 dies; the new one reads the state from ZooKeeper
    cluster.wait_for_leader("jobs", 0, not_in=(leader,))
    first.close()
    second = ShareConsumer({**conf, "share.acknowledgement.mode": "implicit"})
    second.subscribe(["jobs"])
    try:
        rest = poll_until(second, 40)
        assert rest == {(p, o) for p in (0, 1) for o in range(30, 50)}  # never an acknowledged one
    finally:
        second.close()


def _topic_id(cluster) -> str:
    return json.loads(cluster.zk.get("/brokers/topics/jobs")[0])["topic_id"]


def test_a_leader_never_writes_over_state_changed_in_zookeeper(cluster_factory):
    """Every write of a share-partition's state is a compare-and-set on its znode. When a former leader wrote the
    node meanwhile, the leader's state is written over it; when the node moved to another state epoch (an
    AlterShareGroupOffsets through another coordinator), the leader's next write is refused, what it held is
    forgotten, and its next fetch reads the node again."""
    from broker.protocol import ApiKey, ErrorCode
    from tests.server.wire import Wire

    cluster = cluster_factory(1, props={"group.share.record.lock.duration.ms": 15000})
    cluster.create_topic("jobs", partitions=1, replication_factor=1)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "cas", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT_S)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(10):
        producer.produce("jobs", b"job-%d" % i)
    assert producer.flush(WAIT_S) == 0
    node = f"/share_group_state/cas/{_topic_id(cluster)}-0"

    def ack(w: Wire, epoch: int, first: int, last: int) -> int:
        answer = w.call(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": "cas", "member_id": "m1", "share_session_epoch": epoch, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": first, "last_offset": last, "acknowledge_types": [1]}]}]}]})
        return answer["responses"][0]["partitions"][0]["error_code"]

    def fetch(w: Wire, epoch: int) -> list:
        answer = w.call(ApiKey.SHARE_FETCH, 1, {
            "group_id": "cas", "member_id": "m1", "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]})
        return answer["responses"][0]["partitions"][0]["acquired_records"]

    with Wire(cluster.bootstrap) as w:
        joined = w.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {"group_id": "cas", "member_id": "m1", "member_epoch": 0,
                                                          "rack_id": None, "subscribed_topic_names": ["jobs"]})
        topic_id = joined["assignment"]["topic_partitions"][0]["topic_id"]
        assert fetch(w, 0) == [{"first_offset": 0, "last_offset": 9, "delivery_count": 1}]
        assert ack(w, 1, 0, 2) == ErrorCode.NONE
        stored = json.loads(cluster.zk.get(node)[0])
        assert (stored["start_offset"], stored["state_epoch"], stored["leader_epoch"]) == (3, 0, 0)
        # a former leader's late write (an earlier leader epoch): the leader's own state goes over it
        cluster.zk.set(node, json.dumps({"version": 1, "start_offset": 0, "state_batches": [], "state_epoch": 0,
                                         "leader_epoch": -1}).encode())
        assert ack(w, 2, 3, 4) == ErrorCode.NONE
        assert json.loads(cluster.zk.get(node)[0])["start_offset"] == 5
        # the group moved to a new state epoch elsewhere: the leader's next write is refused, nothing written
        altered = {"version": 1, "start_offset": 8, "state_batches": [], "state_epoch": 1, "leader_epoch": -1}
        cluster.zk.set(node, json.dumps(altered).encode())
        assert ack(w, 3, 5, 6) == ErrorCode.KAFKA_STORAGE_ERROR
        assert json.loads(cluster.zk.get(node)[0]) == altered
        assert fetch(w, 4) == [{"first_offset": 8, "last_offset": 9, "delivery_count": 1}]
        assert ack(w, 5, 8, 9) == ErrorCode.NONE
        stored = json.loads(cluster.zk.get(node)[0])
        assert (stored["start_offset"], stored["state_epoch"], stored["leader_epoch"]) == (10, 1, 0)
