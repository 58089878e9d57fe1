"""Admin client calls against every broker under test."""

from __future__ import annotations

import time

import pytest

from broker.client import (Admin, ConfigResource, Consumer, NewTopic, Producer, TopicPartition)
from broker.client.errors import BrokerResponseError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

WAIT_S = 30


def test_topics_lifecycle(kafka):
    name = kafka.topic("adm")
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        cluster = admin.describe_cluster()
        assert cluster.brokers and cluster.controller_id in {b.node_id for b in cluster.brokers}
        admin.create_topics([NewTopic(name, 3, 1, {"retention.ms": "3600000"})])
        assert name in admin.list_topics()
        meta = admin.describe_topics([name])[name]
        assert sorted(meta.partitions) == [0, 1, 2]
        assert all(p.leader in {b.node_id for b in cluster.brokers} for p in meta.partitions.values())
        with pytest.raises(TopicAlreadyExistsError) as info:
            admin.create_topics([NewTopic(name, 1)])
        assert info.value.error_code == 36 and name in str(info.value)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topics([kafka.topic("missing")])
        admin.delete_topics([name])
        deadline = time.monotonic() + WAIT_S
        while name in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert name not in admin.list_topics()


def test_create_partitions(kafka):
    kafka.skip_unless(37, "CreatePartitions")
    name = kafka.topic("adm")
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 2)])
        admin.create_partitions({name: 5})
        assert sorted(admin.describe_topics([name])[name].partitions) == [0, 1, 2, 3, 4]
        with pytest.raises(BrokerResponseError):
            admin.create_partitions({name: 3})  # cannot shrink


def test_describe_and_alter_configs(kafka):
    name = kafka.topic("adm")
    res = ConfigResource("topic", name)
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, 1, {"retention.ms": "100000"})])
        assert admin.describe_configs([res])[res]["retention.ms"].value == "100000"
        admin.incremental_alter_configs({res: {"retention.ms": "200000"}})
        assert admin.describe_configs([res])[res]["retention.ms"].value == "200000"
        if 33 not in kafka.missing_apis:
            admin.alter_configs({res: {"retention.ms": "300000"}})
            assert admin.describe_configs([res], keys=["retention.ms"])[res]["retention.ms"].value == "300000"


def test_groups_offsets_lag_and_delete(kafka):
    topic = kafka.topic("adm")
    group = kafka.topic("grp")
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2)])
        with Producer(bootstrap_servers=kafka.bootstrap) as p:
            for i in range(10):
                p.send(topic, b"x", partition=0 if i < 6 else 1)
            p.flush()
        with Consumer(bootstrap_servers=kafka.bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300) as c:
            c.subscribe([topic])
            got = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 10 and time.monotonic() < deadline:
                got.extend(c.poll(200))
            c.commit({tp0: 2, tp1: 4})
            listed = {g.group_id: g for g in admin.list_groups()}
            assert group in listed and listed[group].protocol_type == "consumer"
            desc = admin.describe_groups([group])[group]
            assert desc.state == "Stable" and len(desc.members) == 1
            if kafka.name != "tansu":  # tansu describes members with an empty assignment
                assert sorted(desc.members[0].assignment) == [tp0, tp1]
        offsets = admin.list_group_offsets(group)
        assert {tp: om.offset for tp, om in offsets.items()} == {tp0: 2, tp1: 4}
        lag = admin.group_lag(group)
        assert lag[tp0].committed == 2
        if kafka.name != "tansu":  # tansu's latest offset counts batches, not records
            assert (lag[tp0].end_offset, lag[tp0].lag, lag[tp1].lag) == (6, 4, 0)
        admin.alter_group_offsets(group, {tp0: 5})
        assert admin.list_group_offsets(group, [tp0])[tp0].offset == 5
        admin.delete_groups([group])
        assert group not in {g.group_id for g in admin.list_groups()}


def test_list_offsets_and_delete_records(kafka):
    kafka.skip_unless(21, "DeleteRecords")
    topic = kafka.topic("adm")
    tp = TopicPartition(topic, 0)
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
        with Producer(bootstrap_servers=kafka.bootstrap) as p:
            for _ in range(10):
                p.send(topic, b"x")
            p.flush()
        assert admin.list_offsets({tp: -2})[tp][0] == 0
        assert admin.list_offsets({tp: -1})[tp][0] == 10
        assert admin.delete_records({tp: 4}) == {tp: 4}
        assert admin.list_offsets({tp: -2})[tp][0] == 4


def test_unreachable_bootstrap_is_one_clear_error():
    from broker.client.errors import KafkaConnectionError

    with pytest.raises(KafkaConnectionError, match="no broker reachable"):
        Admin(bootstrap_servers="127.0.0.1:1", request_timeout_ms=2000)


def test_group_offsets_right_after_start_wait_for_the_coordinator_to_load(broker):
    """The first group calls on a fresh broker create __consumer_offsets and meet its
    partitions still loading (COORDINATOR_LOAD_IN_PROGRESS), and after an unclean restart
    the coordinator replays the whole offsets log; the admin client finds the coordinator
    again and retries, as Kafka's does, instead of failing the call."""
    import asyncio

    from broker.client import AsyncAdmin

    groups = [f"load-{i}" for i in range(40)]
    tp = TopicPartition("adm-load", 0)

    async def commit_all() -> None:
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            await asyncio.gather(*(admin.alter_group_offsets(g, {tp: i + 1}) for i, g in enumerate(groups)))

    async def read_all() -> dict:
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            got = await asyncio.gather(*(admin.list_group_offsets(g) for g in groups))
        return {g: {p: om.offset for p, om in offs.items()} for g, offs in zip(groups, got)}

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(tp.topic, 1, 1)])
    asyncio.run(commit_all())
    expected = {g: {tp: i + 1} for i, g in enumerate(groups)}
    assert asyncio.run(read_all()) == expected
    broker.kill()
    broker.start()
    assert asyncio.run(read_all()) == expected
