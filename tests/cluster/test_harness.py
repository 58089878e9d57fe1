"""The cluster harness itself (``tests/cluster/conftest.py``): brokers 1..N register on
one chroot, and its faults (SIGKILL and restart, SIGSTOP past the session timeout
and SIGCONT) do to the processes and their ZooKeeper sessions what they say."""

from __future__ import annotations

import time

from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_until


def test_brokers_register_with_their_own_ids_ports_and_log_dirs(cluster):
    assert cluster.ids == [1, 2, 3]
    assert cluster.registered_ids() == [1, 2, 3]
    assert cluster.controller_id() in cluster.ids
    assert len({cluster.broker(i).port for i in cluster.ids}) == 3
    assert len({cluster.broker(i).data_dir for i in cluster.ids}) == 3
    assert cluster.bootstrap.count(",") == 2
    for i in cluster.ids:
        assert f"broker.id={i}" in (cluster.broker(i).data_dir / "meta.properties").read_text()
        answer = cluster.metadata(via=i)
        assert i in [b["node_id"] for b in answer["brokers"]]


def test_kill_and_start_again_on_the_same_port(cluster):
    port = cluster.broker(2).port
    cluster.kill(2)
    assert not cluster.broker(2).running()
    assert 2 not in cluster.live_ids() and str(port) not in cluster.bootstrap
    started = time.monotonic()
    cluster.start(2)  # waits for the killed broker's session to expire first
    # The session outlived the process: the start had to wait for its expiry.
    assert time.monotonic() - started > SESSION_TIMEOUT_MS / 1000 / 2
    assert cluster.broker(2).port == port
    wait_until(lambda: cluster.registered_ids() == [1, 2, 3], "broker 2 to register again")


def test_pause_past_the_session_timeout_and_resume(cluster):
    cluster.pause(3)
    assert 3 not in cluster.live_ids() and cluster.broker(3).running()
    wait_until(lambda: 3 not in cluster.registered_ids(), "the frozen broker's session to expire")
    cluster.resume(3)
    wait_until(lambda: cluster.registered_ids() == [1, 2, 3], "broker 3 to register again after SIGCONT")
    assert 3 in [b["node_id"] for b in cluster.metadata(via=3)["brokers"]]


def test_load_read_and_replica_files_agree_on_one_broker(cluster_factory):
    """The workload helpers and the checker end to end, on a cluster of one."""
    from tests.cluster.workload import LoadProducer, produce_to, read_all, replica_batches, replica_records

    single = cluster_factory(1)
    single.create_topic("load", partitions=2, replication_factor=1)
    load = LoadProducer(single.bootstrap, "load", partitions=(0, 1), rate=400).start()
    load.wait_acknowledged(200)
    code, offset = produce_to(single.broker(1), "load", 1, [b"direct-1", b"direct-2"])
    assert code == 0 and offset >= 0
    recorder = load.stop()
    recorder.acknowledged += [(1, offset, b"direct-1"), (1, offset + 1, b"direct-2")]
    read = read_all(single.bootstrap, "load", (0, 1))
    report = recorder.check(read)
    assert report.valid(), str(report)
    assert report.acknowledged >= 200 and not recorder.indeterminate
    on_disk = replica_records(single.broker(1).data_dir, "load", 0) + replica_records(
        single.broker(1).data_dir, "load", 1)
    assert sorted(on_disk) == sorted(read)
    batches = replica_batches(single.broker(1).data_dir, "load", 1)
    assert batches[0][0] == 0 and all(b[2] == 0 for b in batches)  # leader epoch 0 throughout
