"""Groups on a three-broker cluster (real broker processes on a real ZooKeeper).

A group's coordinator is the leader of its partition of ``__consumer_offsets``,
which is replicated to ``offsets.topic.replication.factor`` brokers and created
only when that many are alive. Every broker names the same coordinator; when
the coordinator's broker is killed, the new leader of the partition takes the
group over with everything committed to it.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from broker.coordinator.records import partition_for
from broker.protocol import ApiKey, ErrorCode
from tests.cluster.conftest import cluster_factory, wait_until  # noqa: F401 (cluster_factory: a fixture)
from tests.server.wire import Wire

OFFSETS = "__consumer_offsets"
PARTITIONS = 6


def find_coordinator(broker, group: str) -> tuple[int, int, str | None]:
    """(error code, node id, error message) of FindCoordinator v3 asked of one broker."""
    with Wire(broker.bootstrap) as w:
        r = w.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    return r["error_code"], r["node_id"], r["error_message"]


def committed(bootstrap: str, group: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition("orders", 0), TopicPartition("orders", 1)],
                                                timeout=30)]
    finally:
        c.close()


def test_the_coordinator_is_the_leader_of_the_groups_partition_and_moves_with_it(cluster_factory):
    cluster = cluster_factory(3, offsets_topic_num_partitions=PARTITIONS)
    cluster.create_topic("orders", partitions=2, replication_factor=3)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "billing", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("orders", 0, 5), TopicPartition("orders", 1, 7)], asynchronous=False)
    c.close()

    p = partition_for("billing", PARTITIONS)
    state = cluster.wait_for_isr(OFFSETS, p, [1, 2, 3])  # replicated 3 ways (offsets.topic.replication.factor)
    leader = state["leader"]
    assert [find_coordinator(cluster.broker(i), "billing")[:2] for i in cluster.ids] == [(0, leader)] * 3

    cluster.kill(leader)  # SIGKILL: the commit was acknowledged only once every replica in the ISR had it
    new = cluster.wait_for_leader(OFFSETS, p, not_in=(leader,))
    wait_until(lambda: all(find_coordinator(cluster.broker(i), "billing")[:2] == (0, new)
                           for i in cluster.live_ids()), "every live broker to name the new coordinator")
    assert committed(cluster.bootstrap, "billing") == [5, 7]


def test_the_offsets_topic_waits_for_as_many_live_brokers_as_its_replication_factor(cluster_factory):
    cluster = cluster_factory(3, offsets_topic_num_partitions=PARTITIONS)
    assert cluster.stop(3) == 0
    wait_until(lambda: len(cluster.metadata(via=1)["brokers"]) == 2, "broker 1 to see two live brokers")
    # as Kafka 2.7: not created with fewer replicas, COORDINATOR_NOT_AVAILABLE until enough brokers are alive
    error, _, message = find_coordinator(cluster.broker(1), "g")
    assert error == ErrorCode.COORDINATOR_NOT_AVAILABLE and "offsets.topic.replication.factor" in message
    assert cluster.zk.exists(f"/brokers/topics/{OFFSETS}") is None
    cluster.start(3)
    wait_until(lambda: find_coordinator(cluster.broker(1), "g")[0] == ErrorCode.NONE, "the offsets topic")
    assert sorted(cluster.partition_state(OFFSETS, partition_for("g", PARTITIONS))["isr"]) == [1, 2, 3]
