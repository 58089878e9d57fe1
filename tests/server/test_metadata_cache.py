"""The metadata cache fed with UpdateMetadata requests as the codec decodes them (v0, v4 and v6 shapes)."""

from __future__ import annotations

import asyncio

from broker.protocol import ApiKey, decode_request, encode_request
from broker.server.metadata_cache import MetadataCache


def decoded(version: int, body: dict) -> dict:
    return decode_request(encode_request(ApiKey.UPDATE_METADATA, version, 1, "t", body)[4:])[1]


def state(topic: str | None, index: int, leader: int, **extra) -> dict:
    entry = {"partition_index": index, "controller_epoch": 1, "leader": leader, "leader_epoch": 2, "isr": [1, 2],
             "zk_version": 5, "replicas": [1, 2, 3], "offline_replicas": [3], **extra}
    if topic is not None:
        entry["topic_name"] = topic
    return entry


def test_v6_brokers_partitions_and_deletion():
    cache = MetadataCache()
    live = [{"id": 2, "rack": "r2", "endpoints": [{"port": 9093, "host": "h2", "listener": "PLAINTEXT",
                                                   "security_protocol": 0}]},
            {"id": 1, "rack": None, "endpoints": [{"port": 9092, "host": "h1", "listener": "PLAINTEXT",
                                                   "security_protocol": 0}]}]
    cache.update(decoded(6, {"controller_id": 2, "controller_epoch": 4, "broker_epoch": -1, "live_brokers": live,
                             "topic_states": [{"topic_name": "t", "partition_states": [state(None, 0, 1),
                                                                                       state(None, 1, 2)]}]}), 6)
    assert (cache.controller_id, cache.controller_epoch) == (2, 4)
    assert [(b.id, b.rack, b.endpoint().host, b.endpoint().port) for b in cache.alive_brokers()] == [
        (1, None, "h1", 9092), (2, "r2", "h2", 9093)]
    p = cache.partition("t", 1)
    assert (p.leader, p.leader_epoch, p.isr, p.replicas, p.offline_replicas, p.zk_version) == (
        2, 2, [1, 2], [1, 2, 3], [3], 5)
    assert cache.topics() == ["t"] and cache.has_leaders("t", 2) and not cache.has_leaders("t", 3)
    # leader -2: the partition is being deleted; the topic goes with its last partition
    cache.update(decoded(6, {"controller_id": 2, "controller_epoch": 4, "broker_epoch": -1, "live_brokers": live,
                             "topic_states": [{"topic_name": "t", "partition_states": [state(None, 0, -2)]}]}), 6)
    assert sorted(cache.topic("t").partitions) == [1]
    cache.update(decoded(6, {"controller_id": 2, "controller_epoch": 4, "broker_epoch": -1, "live_brokers": live,
                             "topic_states": [{"topic_name": "t", "partition_states": [state(None, 1, -2)]}]}), 6)
    assert cache.topic("t") is None and cache.topics() == []


def test_older_versions_ungrouped_states_and_single_host():
    cache = MetadataCache()
    cache.update(decoded(0, {"controller_id": 1, "controller_epoch": 1, "live_brokers": [
        {"id": 1, "v0_host": "h1", "v0_port": 9092}], "ungrouped_partition_states": [state("t", 0, 1)]}), 0)
    [broker] = cache.alive_brokers()
    assert (broker.id, broker.endpoint().host, broker.endpoint().port, broker.rack) == (1, "h1", 9092, None)
    assert cache.partition("t", 0).offline_replicas == []  # v4+
    cache.update(decoded(4, {"controller_id": 1, "controller_epoch": 1, "live_brokers": [
        {"id": 1, "rack": "a", "endpoints": [{"port": 1, "host": "x", "listener": "PLAINTEXT",
                                             "security_protocol": 0}]}],
        "ungrouped_partition_states": [state("t", 0, 1)]}), 4)
    assert cache.partition("t", 0).offline_replicas == [3] and cache.alive_brokers()[0].rack == "a"


def test_wait_until_wakes_on_the_update_that_satisfies_it():
    async def main():
        cache = MetadataCache()
        waiter = asyncio.ensure_future(cache.wait_until(lambda: cache.has_leaders("t", 1), 30))
        await asyncio.sleep(0)
        assert not waiter.done()
        cache.update(decoded(6, {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "live_brokers": [],
                                 "topic_states": [{"topic_name": "t", "partition_states": [state(None, 0, 1)]}]}), 6)
        assert await waiter is True
        assert await cache.wait_until(lambda: cache.topic("u") is not None, 0.05) is False
    asyncio.run(main())
