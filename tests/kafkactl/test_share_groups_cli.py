"""``kafkactl share-groups list|describe``: share groups (KIP-932) as kafka-share-groups.sh shows them, against a
broker process with librdkafka's ShareConsumer in the group."""

from __future__ import annotations

import time

import confluent_kafka as ck

from tests.kafkactl.conftest import Ctl, one_line_error

LIMIT_S = 30  # guards against a hang, not a timing assertion


def test_list_and_describe_a_share_group(ctl: Ctl, broker) -> None:
    assert "no share groups" in ctl("share-groups", "list").stdout
    assert ctl("topics", "create", "jobs", "--partitions", "2").returncode == 0
    assert ctl("configs", "set", "group", "workers", "share.auto.offset.reset=earliest").returncode == 0
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("jobs", b"job-%d" % i, partition=i % 2)
    assert producer.flush(LIMIT_S) == 0
    consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "workers",
                                 "client.id": "worker-1", "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["jobs"])
    try:
        got = []
        deadline = time.monotonic() + LIMIT_S
        while len(got) < 10 and time.monotonic() < deadline:
            for msg in consumer.poll(timeout=0.2):
                if msg.error() is None:
                    got.append(msg)
                    # the first three of partition 0 accepted, the rest released at close
                    consumer.acknowledge(msg, ck.AcknowledgeType.ACCEPT if msg.partition() == 0 and msg.offset() < 3
                                         else ck.AcknowledgeType.RELEASE)
        consumer.commit_sync()
        assert ctl.json("share-groups", "list") == [{"group_id": "workers", "state": "Stable"}]
        [desc] = ctl.json("share-groups", "describe", "workers")
        assert (desc["group_id"], desc["state"], desc["coordinator"]) == ("workers", "Stable", 0)
        [member] = desc["members"]
        assert member["client_id"] == "worker-1" and member["partitions"] == "jobs-0,jobs-1"
        assert desc["partitions"] == [{"topic": "jobs", "partition": 0, "start_offset": 3, "lag": 2},
                                      {"topic": "jobs", "partition": 1, "start_offset": 0, "lag": 5}]
        table = ctl("share-groups", "describe", "workers").stdout
        assert table.startswith("group workers: Stable, epoch") and "worker-1" in table
    finally:
        consumer.close()
    assert "share group nope does not exist (GROUP_ID_NOT_FOUND, 69)" in one_line_error(
        ctl("share-groups", "describe", "nope"), 2)  # bad input, as for groups describe
