"""AlterReplicaLogDirs against a real broker with two log dirs, under produce load.

kafka-python's admin client (``alter_replica_log_dirs``, ``describe_log_dirs``)
asks for the moves; librdkafka (confluent-kafka) produces with acks=all
meanwhile. Every acknowledged record is read back afterwards, from the new
dir, and again after a restart. Waits are bounded guards, not timings.
"""

from __future__ import annotations

import os
import time

from kafka import KafkaAdminClient
from kafka.errors import NoError

from broker.protocol import ApiKey, ErrorCode

from .test_admin_wire import create, new_topic
from .test_durability import read_all
from .test_jbod import SteadyProducer, describe_log_dirs, wait_for
from .wire import Wire

WAIT_S = 10


def test_a_replica_moves_between_log_dirs_under_load_and_nothing_is_lost(broker_factory, tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    b = broker_factory(log_dirs=",".join(map(str, dirs)))
    a_dir, b_dir = os.path.abspath(dirs[0]), os.path.abspath(dirs[1])
    topic = "moving"
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        (r,) = create(w, new_topic(topic, 2, configs={"segment.bytes": "65536"}))
        assert r["error_code"] == ErrorCode.NONE
        layout = describe_log_dirs(w)
        assert layout[a_dir][1] == {(topic, 0)} and layout[b_dir][1] == {(topic, 1)}

    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    producer = SteadyProducer(b.bootstrap, topic)
    try:
        wait_for(lambda: len(producer.acked[0]) >= 2000, "records before the move")
        result = admin.alter_replica_log_dirs({(topic, 0, 0): b_dir, (topic, 1, 0): a_dir})
        assert set(result.values()) == {NoError}, result
        # both swap dirs; the producer keeps going meanwhile
        wait_for(lambda: describe_log_dirs_settled(admin, a_dir, b_dir, topic), "both moves to finish")
        moved_at = (len(producer.acked[0]), len(producer.acked[1]))
        wait_for(lambda: len(producer.acked[0]) >= moved_at[0] + 500, "appends after the move")
    finally:
        producer.stop()
        admin.close()
    assert producer.failed == {0: [], 1: []}
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        assert describe_log_dirs(w)[b_dir][1] == {(topic, 0)} and describe_log_dirs(w)[a_dir][1] == {(topic, 1)}
    for p in (0, 1):
        assert read_all(b, topic, partition=p) == producer.acked[p]
    assert not (dirs[0] / f"{topic}-0").exists() and (dirs[1] / f"{topic}-0").is_dir()
    b.restart()
    for p in (0, 1):
        assert read_all(b, topic, partition=p) == producer.acked[p]
    assert not any(n.endswith(("-future", "-delete")) for d in dirs for n in os.listdir(d))


def describe_log_dirs_settled(admin: KafkaAdminClient, a_dir: str, b_dir: str, topic: str) -> bool:
    """kafka-python's describe_log_dirs: partition 0 only in b, partition 1 only in a, no future replica."""
    ((broker,),) = [admin.describe_log_dirs()]
    where = {}
    for d in broker["log_dirs"]:
        for t in d["topics"]:
            for p in t["partitions"]:
                where.setdefault((t["name"], p["partition_index"]), []).append((d["log_dir"], p["is_future_key"]))
    return where.get((topic, 0)) == [(b_dir, False)] and where.get((topic, 1)) == [(a_dir, False)]


def test_alter_replica_log_dirs_errors(broker_factory, tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    b = broker_factory(log_dirs=",".join(map(str, dirs)))
    with Wire(b.bootstrap, timeout=WAIT_S) as w:
        (r,) = create(w, new_topic("here", 1))
        assert r["error_code"] == ErrorCode.NONE
        body = w.call(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, {"dirs": [
            {"path": str(tmp_path / "nowhere"), "topics": [{"name": "here", "partitions": [0]}]},
            {"path": os.path.abspath(dirs[0]), "topics": [{"name": "here", "partitions": [0, 7]},
                                                          {"name": "missing", "partitions": [0]}]},
        ]})
        codes = {(t["topic_name"], p["partition_index"]): p["error_code"]
                 for t in body["results"] for p in t["partitions"]}
        # the second entry for here-0 names the dir it is in already: nothing to do
        assert codes == {("here", 0): ErrorCode.NONE, ("here", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        body = w.call(ApiKey.ALTER_REPLICA_LOG_DIRS, 0, {"dirs": [
            {"path": str(tmp_path / "nowhere"), "topics": [{"name": "here", "partitions": [0]}]}]})
        assert body["results"][0]["partitions"][0]["error_code"] == ErrorCode.LOG_DIR_NOT_FOUND
