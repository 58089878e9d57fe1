"""Our client's side of incremental fetch sessions (KIP-227) against a real broker: the session handler
(also the replica fetcher's) through a session's life, a broker restart that loses it, a broker with no
room for one; and our consumer reading many partitions through a session, across a restart.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request

import pytest

from broker.client import Consumer, Producer, TopicPartition
from broker.client._connection import BrokerConnection
from broker.client._fetch_session import FetchSessionHandler
from broker.protocol import ApiKey, ErrorCode
from tests.server.wire import Wire, make_batch

pytestmark = pytest.mark.clients


def _gauge(broker, name: str) -> float:
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        found = re.search(rf"^{name} ([\d.e+]+)$", response.read().decode(), re.M)
    return float(found.group(1)) if found else 0.0


def _create(broker, topic: str, partitions: int) -> None:
    with Wire(broker.bootstrap) as w:
        response = w.call(ApiKey.CREATE_TOPICS, 5, {"topics": [{
            "name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": []}], "timeout_ms": 30000, "validate_only": False})
        assert response["topics"][0]["error_code"] == 0
        for p in range(partitions):
            w.call(ApiKey.PRODUCE, 8, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": p, "records": make_batch([b"r0", b"r1"])}]}]})


def _wanted(topic: str, offsets: dict[int, int]) -> dict:
    return {(topic, p): {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
                         "partition_max_bytes": 1 << 20} for p, o in offsets.items()}


async def _fetch(conn: BrokerConnection, handler: FetchSessionHandler, wanted: dict) -> tuple[dict, bool]:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            **handler.build(wanted), "rack_id": ""}
    response = await conn.request(ApiKey.FETCH, body)
    return response, handler.handle_response(response)


def _partitions(response: dict) -> set[int]:
    return {p["partition_index"] for t in response["responses"] for p in t["partitions"]}


def test_the_session_handler_through_a_session_and_a_restart(broker_factory):
    broker = broker_factory()
    _create(broker, "handled", 3)

    async def run() -> None:
        handler = FetchSessionHandler()
        conn = BrokerConnection(broker.host, broker.port)
        await conn.connect()
        response, ok = await _fetch(conn, handler, _wanted("handled", {0: 0, 1: 0, 2: 0}))
        assert ok and handler.session_id == response["session_id"] != 0 and handler.epoch == 1
        assert _partitions(response) == {0, 1, 2}
        # offsets moved to the end: sent, and nothing is answered
        response, ok = await _fetch(conn, handler, _wanted("handled", {0: 2, 1: 2, 2: 2}))
        assert ok and handler.incremental and response["responses"] == [] and handler.epoch == 2
        # nothing changed: the request names no partition
        assert handler.build(_wanted("handled", {0: 2, 1: 2, 2: 2}))["topics"] == []
        response, ok = await _fetch(conn, handler, _wanted("handled", {0: 2, 1: 2, 2: 2}))
        assert ok and handler.epoch == 3
        # a partition no longer wanted is forgotten
        body = handler.build(_wanted("handled", {0: 2, 2: 2}))
        assert body["forgotten_topics_data"] == [{"topic": "handled", "partitions": [1]}] and body["topics"] == []
        response = await conn.request(ApiKey.FETCH, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1,
                                                     "max_bytes": 1 << 20, "isolation_level": 0, **body,
                                                     "rack_id": ""})
        assert handler.handle_response(response) and handler.epoch == 4
        conn.close()

        broker.restart()  # the session is gone with it
        conn = BrokerConnection(broker.host, broker.port)
        await conn.connect()
        old = handler.session_id
        response, ok = await _fetch(conn, handler, _wanted("handled", {0: 2, 2: 2}))
        assert not ok and response["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert (handler.session_id, handler.epoch) == (0, 0)
        response, ok = await _fetch(conn, handler, _wanted("handled", {0: 2, 2: 2}))  # full: a new session
        assert ok and handler.session_id not in (0, old) and handler.epoch == 1
        # a request without an answer: the next one is full and names the old session, which closes it
        handler.failed()
        body = handler.build(_wanted("handled", {0: 2}))
        assert (body["session_id"], body["session_epoch"]) == (handler.session_id, 0)
        assert [p["partition"] for p in body["topics"][0]["partitions"]] == [0]
        conn.close()

    asyncio.run(run())


def test_a_broker_without_room_is_fetched_from_with_full_requests(broker_factory):
    broker = broker_factory({"max.incremental.fetch.session.cache.slots": 0})
    _create(broker, "roomless", 2)

    async def run() -> None:
        handler = FetchSessionHandler()
        conn = BrokerConnection(broker.host, broker.port)
        await conn.connect()
        for _ in range(3):
            response, ok = await _fetch(conn, handler, _wanted("roomless", {0: 0, 1: 0}))
            assert ok and response["session_id"] == 0 and _partitions(response) == {0, 1}
            assert (handler.session_id, handler.epoch, handler.incremental) == (0, 0, False)
        conn.close()

    asyncio.run(run())


def test_our_consumer_reads_many_partitions_through_a_session(broker_factory):
    broker = broker_factory({"num.partitions": 16})
    sent = {}
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=5) as producer:
        for i in range(320):
            producer.send("many", b"v-%d" % i, partition=i % 16)
            sent.setdefault(i % 16, []).append(b"v-%d" % i)
        producer.flush()

    def read(consumer, count: int) -> dict[int, list[bytes]]:
        got: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            for record in consumer.poll(500):
                got.setdefault(record.partition, []).append(record.value)
        return got

    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition("many", p) for p in range(16)])
        assert read(c, 320) == sent
        assert _gauge(broker, "kafkapy_fetch_sessions") == 1
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            producer.send("many", b"late", partition=11)
            producer.flush()
        assert read(c, 1) == {11: [b"late"]}
        broker.restart()
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            producer.send("many", b"after", partition=4)
            producer.flush()
        assert read(c, 1) == {4: [b"after"]}
        assert _gauge(broker, "kafkapy_fetch_sessions") == 1


def test_a_partition_assigned_afresh_is_answered_although_nothing_changed(broker_factory):
    """The mirror's way to learn a partition's high watermark: assign it afresh (its watermark forgotten), seek
    where it was, poll until an answer names it. An incremental answer would leave it out, nothing having
    changed for it in the broker's session; the consumer sends a full request instead."""
    from broker.client import AsyncConsumer

    broker = broker_factory()
    _create(broker, "afresh", 2)

    async def run() -> None:
        consumer = AsyncConsumer({"bootstrap.servers": broker.bootstrap, "fetch.max.wait.ms": 50,
                                  "enable.auto.commit": False})
        await consumer.start()
        try:
            for round_ in range(3):
                tp = TopicPartition("afresh", 0)
                consumer.assign([])
                consumer.assign([tp, TopicPartition("afresh", 1)])
                consumer.seek(tp, 2)
                consumer.seek(TopicPartition("afresh", 1), 2)
                for _ in range(200):
                    await consumer.poll(20)
                    if consumer.highwater(tp) is not None:
                        break
                assert consumer.highwater(tp) == 2, round_
                await asyncio.sleep(0.3)  # the fetch in flight is answered: nothing left to abandon
        finally:
            await consumer.close()

    asyncio.run(run())
