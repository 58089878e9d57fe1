"""Broker epochs (KIP-380): a broker that registered again ignores requests built for its old self.

The broker epoch is the czxid of ``/brokers/ids/N``. A follower is frozen
(SIGSTOP) past the session timeout, so its registration goes; thawed, it
registers again under a new session, with a new czxid. LeaderAndIsr,
UpdateMetadata and StopReplica carrying the old epoch (as a controller's
request queued before the re-registration would) are refused with
STALE_BROKER_EPOCH and change nothing; the same with the new epoch are taken,
and the controller's own requests (with the new epoch) bring the broker back
into the ISR.
"""

from __future__ import annotations

import asyncio
import json

from broker.protocol import ApiKey, ErrorCode
from tests.cluster.conftest import _request, wait_until


def czxid(cluster, broker_id: int) -> int | None:
    stat = cluster.zk.exists(f"/brokers/ids/{broker_id}")
    return None if stat is None else stat.czxid


def send(cluster, broker_id: int, api_key: int, body: dict, version: int) -> dict:
    b = cluster.broker(broker_id)
    return asyncio.run(_request(b.host, b.port, api_key, body, version))


def test_a_broker_registered_again_refuses_requests_for_its_old_epoch(cluster):
    cluster.create_topic("ep", partitions=1, replication_factor=3)
    leader = cluster.wait_for_leader("ep")
    follower = next(b for b in cluster.ids if b != leader and b != cluster.controller_id())
    old_epoch = czxid(cluster, follower)
    assert old_epoch is not None and old_epoch > 0
    cluster.pause(follower)
    wait_until(lambda: follower not in cluster.registered_ids(), f"broker {follower}'s session to expire")
    cluster.resume(follower)
    new_epoch = wait_until(lambda: czxid(cluster, follower), f"broker {follower} to register again")
    assert new_epoch > old_epoch
    cluster.wait_for_isr("ep", 0)  # the controller's requests carry the new epoch: taken

    controller_epoch = json.loads(cluster.zk.get("/controller_epoch")[0])
    state = cluster.partition_state("ep", 0)
    # what an old controller request would say: the follower leads from the next epoch, the topic goes
    lead = {"controller_id": cluster.controller_id(), "controller_epoch": controller_epoch,
            "topic_states": [{"topic_name": "ep", "partition_states": [{
                "partition_index": 0, "controller_epoch": controller_epoch, "leader": follower,
                "leader_epoch": state["leader_epoch"] + 1, "isr": state["isr"], "zk_version": 99,
                "replicas": cluster.ids, "adding_replicas": [], "removing_replicas": [], "is_new": False}]}],
            "live_leaders": [{"broker_id": follower, "host_name": cluster.broker(follower).host,
                              "port": cluster.broker(follower).port}]}
    answer = send(cluster, follower, ApiKey.LEADER_AND_ISR, {**lead, "broker_epoch": old_epoch}, 4)
    assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert [p["error_code"] for p in answer["partition_errors"]] == [ErrorCode.STALE_BROKER_EPOCH]

    stop = {"controller_id": cluster.controller_id(), "controller_epoch": controller_epoch,
            "broker_epoch": old_epoch, "topic_states": [{"topic_name": "ep", "partition_states": [
                {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}]}
    answer = send(cluster, follower, ApiKey.STOP_REPLICA, stop, 3)
    assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH

    update = {"controller_id": cluster.controller_id(), "controller_epoch": controller_epoch,
              "broker_epoch": old_epoch, "topic_states": [], "live_brokers": []}
    assert send(cluster, follower, ApiKey.UPDATE_METADATA, update, 6)["error_code"] == ErrorCode.STALE_BROKER_EPOCH

    # nothing changed: the follower still follows, holds its log and knows every broker
    meta = cluster.partition_meta("ep", 0, via=follower)
    assert meta["leader_id"] == leader
    assert sorted(b["node_id"] for b in cluster.metadata(via=follower)["brokers"]) == cluster.ids
    assert (cluster.broker(follower).data_dir / "ep-0").is_dir()

    # the new epoch is taken (a LeaderAndIsr that changes nothing, to leave the cluster as it is)
    empty = {**lead, "broker_epoch": new_epoch, "topic_states": [], "live_leaders": []}
    assert send(cluster, follower, ApiKey.LEADER_AND_ISR, empty, 4)["error_code"] == ErrorCode.NONE
    cluster.wait_for_isr("ep", 0)
