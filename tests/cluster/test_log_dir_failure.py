"""A failed disk in a three-broker cluster: the controller moves only that dir's leaderships away.

Broker 1 has two log dirs, the second an XFS file system on a loop device
(``tests/server/test_jbod.py``'s ``disks``), shut down with ``xfs_io -x -c
shutdown`` under acks=all load. Broker 1 writes
``/log_dir_event_notification``; the controller takes it, asks broker 1 for
its replicas' states (KAFKA_STORAGE_ERROR for those on the disk), gives the
partition on the disk another leader and shrinks its ISR, and leaves the
partition on the healthy dir alone. The history checker finds nothing
acknowledged lost. Needs root and xfsprogs (skipped otherwise, with the reason).
Slow (three brokers and a disk); the short form is ``tests/server/test_jbod.py``'s
single broker whose controller (itself) takes the notification.
"""

from __future__ import annotations

import pytest

from tests.cluster.conftest import wait_until
from tests.cluster.workload import LoadProducer, read_all
from tests.server.test_jbod import disks  # noqa: F401 - the fixture

TOPIC = "orders"


@pytest.mark.slow
def test_a_failed_disk_moves_only_its_partitions_leadership(disks, cluster_factory, tmp_path):  # noqa: F811
    (disk,) = disks(1)
    dirs = [tmp_path / "broker1-plain", disk.mnt / "logs"]
    cluster = cluster_factory(3, min_insync_replicas=2, per_broker={1: {"log.dirs": ",".join(map(str, dirs))}})
    cluster.create_topic(TOPIC, assignment={0: [1, 2, 3], 1: [1, 2, 3]})
    for p in (0, 1):
        cluster.wait_for_isr(TOPIC, p, [1, 2, 3])
    assert (dirs[0] / f"{TOPIC}-0").is_dir() and (dirs[1] / f"{TOPIC}-1").is_dir()
    assert cluster.partition_state(TOPIC, 1)["leader"] == 1

    load = LoadProducer(cluster.bootstrap, TOPIC, partitions=(0, 1), rate=200).start()
    try:
        load.wait_acknowledged(200)
        before = cluster.partition_state(TOPIC, 0)
        disk.fail()

        def moved():
            state = cluster.partition_state(TOPIC, 1)
            return state["leader"] in (2, 3) and 1 not in state["isr"] and state
        wait_until(moved, f"{TOPIC}-1 to get a leader other than broker 1, without it in the ISR")
        wait_until(lambda: not cluster.zk.get_children("/log_dir_event_notification"),
                   "the controller to take the log dir event notification")
        meta = wait_until(lambda: (m := cluster.partition_meta(TOPIC, 1, via=2)) and m["offline_replicas"] and m,
                          "Metadata to name broker 1's replica offline")
        assert meta["offline_replicas"] == [1] and meta["leader_id"] in (2, 3)
        # broker 1 names the new leader too: a client it bootstraps must not see leader -1 (librdkafka's
        # get_watermark_offsets takes that as final: "Unknown partition")
        via_1 = wait_until(lambda: (m := cluster.partition_meta(TOPIC, 1, via=1)) and m["leader_id"] != -1 and m,
                           "broker 1's Metadata to name the new leader")
        assert via_1["leader_id"] == meta["leader_id"] and via_1["offline_replicas"] == [1], via_1
        load.wait_acknowledged(400)
        # the partition on the healthy dir kept its leader, its ISR and its epoch
        assert cluster.partition_state(TOPIC, 0) == before
    finally:
        recorder = load.stop()
    report = recorder.check(read_all(cluster.bootstrap, TOPIC, (0, 1)))
    assert report.valid(allow_duplicates=True), str(report)
    assert report.acknowledged >= 600
