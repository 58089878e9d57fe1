"""The topic manager in-process (a real Broker on port 0): the rules the admin APIs build on."""

from __future__ import annotations

import asyncio

import pytest

from broker.config import BrokerConfig
from broker.protocol import ErrorCode
from broker.server.broker import Broker
from broker.server.topics import TopicError, validate_topic_name


def run_broker(tmp_path, body, **props):
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                           "metrics.port": -1, **props})

    async def main():
        broker = Broker(config)
        await broker.start()
        try:
            return await body(broker)
        finally:
            await broker.stop()

    return asyncio.run(main())


async def expect_error(code, coro):
    with pytest.raises(TopicError) as info:
        await coro
    assert info.value.error_code == code, info.value.message


@pytest.mark.parametrize("name", ["a" * 250, ".", "..", "with space", "slash/", "ümlaut", ""])
def test_illegal_names(name):
    with pytest.raises(TopicError) as info:
        validate_topic_name(name)
    assert info.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_create_validate_and_collide(tmp_path):
    async def body(broker):
        topics = broker.topics
        assert await topics.create_topic("v", 3, 1, validate_only=True) is None
        assert topics.get("v") is None
        info = await topics.create_topic("v", 3, 1, configs={"retention.ms": "1234"})
        assert sorted(info.partitions) == [0, 1, 2]
        assert broker.replicas.partition("v", 2).config.retention_ms == 1234
        await expect_error(ErrorCode.TOPIC_ALREADY_EXISTS, topics.create_topic("v", 1, 1))
        await expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, topics.create_topic("r", 1, 2))
        await expect_error(ErrorCode.INVALID_PARTITIONS, topics.create_topic("p", 0, 1))
        await expect_error(ErrorCode.INVALID_CONFIG, topics.create_topic("c", 1, 1, configs={"retention.ms": "x"}))
        await expect_error(ErrorCode.INVALID_CONFIG, topics.create_topic("c", 1, 1, configs={"bogus": "1"}))
        await topics.create_topic("a.b", 1, 1)
        await expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, topics.create_topic("a_b", 1, 1))
        info = await topics.create_topic("assigned", assignments={0: [0], 1: [0]})
        assert [p.replicas for p in info.partitions.values()] == [[0], [0]]
        await expect_error(ErrorCode.INVALID_REPLICA_ASSIGNMENT, topics.create_topic("x", assignments={0: [7]}))
        defaults = await topics.create_topic("defaults")
        assert len(defaults.partitions) == 4

    run_broker(tmp_path, body, **{"num.partitions": 4})


def test_partitions_configs_and_deletion_survive_restart(tmp_path):
    async def first(broker):
        topics = broker.topics
        await topics.create_topic("grow", 1, 1)
        await topics.create_partitions("grow", 3)
        await expect_error(ErrorCode.INVALID_PARTITIONS, topics.create_partitions("grow", 2))
        await topics.alter_topic_config("grow", {"retention.bytes": "777", "cleanup.policy": "compact"})
        assert broker.replicas.partition("grow", 2).config.retention_bytes == 777
        await topics.create_topic("doomed", 2, 1)
        await topics.delete_topic("doomed")
        await expect_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topics.delete_topic("doomed"))
        return broker.log_manager.log_dirs[0]

    data = run_broker(tmp_path, first)
    assert not any(p.name.startswith("doomed-") and not p.name.endswith("-delete") for p in data.iterdir())

    async def second(broker):
        assert sorted(broker.topics.topics) == ["grow"]
        info = broker.topics.get("grow")
        assert sorted(info.partitions) == [0, 1, 2]
        assert info.config == {"retention.bytes": "777", "cleanup.policy": "compact"}
        assert broker.replicas.partition(info.name, 1).config.compact

    run_broker(tmp_path, second)
    assert not any(p.name.startswith("doomed") for p in data.iterdir())


def test_unfinished_deletion_is_finished_at_start(tmp_path):
    async def first(broker):
        await broker.topics.create_topic("half", 1, 1)
        broker.metadata.mark_topic_deletion("half")  # as if the broker died right after marking

    run_broker(tmp_path, first)

    async def second(broker):
        assert broker.topics.get("half") is None  # never announced by the controller
        for _ in range(500):  # the controller finishes the deletion in the background
            if not broker.metadata.pending_deletions():
                break
            await asyncio.sleep(0.01)
        assert broker.metadata.pending_deletions() == []
        assert broker.log_manager.get_log(("half", 0)) is None

    run_broker(tmp_path, second)


def test_fetch_puts_the_log_file_slice_in_the_response_for_sendfile(tmp_path):
    """The zero-copy contract: v4+ fetch responses carry the log's FetchSlice, not bytes."""
    from broker.log import FetchSlice
    from broker.protocol import RequestHeader, encode_response
    from broker.server.apis import fetch
    from broker.server.context import RequestContext

    from .wire import make_batch

    async def body(broker):
        info = await broker.topics.create_topic("zc", 1, 1)
        broker.replicas.append_now(broker.replicas.partition("zc", 0), make_batch([b"a", b"b"]))
        request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                   "session_id": 0, "session_epoch": -1, "topics": [{"topic": "zc", "partitions": [
                       {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                        "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}]}],
                   "forgotten_topics_data": [], "rack_id": ""}
        header = RequestHeader(1, 11, 7, "t")
        response = await fetch.handle(RequestContext(broker, header, "test"), request)
        records = response["responses"][0]["partitions"][0]["records"]
        assert isinstance(records, FetchSlice) and records.length == len(make_batch([b"a", b"b"]))
        parts = encode_response(header, response)
        assert any(part is records for part in parts)

    run_broker(tmp_path, body)
