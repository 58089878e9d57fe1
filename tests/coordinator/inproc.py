"""Helpers for tests that drive the coordinator in-process, over a real broker's logs.

``run(tmp_path, body, **props)`` starts a :class:`Broker` in this process (listener
and metrics on port 0 or off, data in ``tmp_path``), creates topic ``t`` (2
partitions), awaits ``body(broker, coordinator)`` and stops the broker. Properties
are Kafka's names with underscores (``offsets_retention_minutes=1``).
"""

from __future__ import annotations

import asyncio

from broker.config import BrokerConfig
from broker.protocol import ErrorCode
from broker.server.broker import Broker

PROTOCOLS = [("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00")]


def make_broker(tmp_path, **props) -> Broker:
    values = {"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
              "metrics.port": -1, "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 3,
              "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 50}
    values.update({k.replace("_", "."): v for k, v in props.items()})
    return Broker(BrokerConfig(values))


def run(tmp_path, body, **props):
    async def main():
        broker = make_broker(tmp_path, **props)
        await broker.start()
        try:
            if broker.topics.get("t") is None:
                await broker.topics.create_topic("t", num_partitions=2)
            return await body(broker, broker.coordinator)
        finally:
            await broker.stop()
    return asyncio.run(main())


async def join(c, group="g", member_id="", instance=None, session=6000, rebalance=2000, protocols=PROTOCOLS,
               version_requires_id=True):
    return await c.join_group(group, member_id, instance, "client", "/127.0.0.1", rebalance, session, "consumer",
                              protocols, version_requires_id)


async def join_new(c, group="g", **kw):
    first = await join(c, group, **kw)
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and first["member_id"].startswith("client-")
    return await join(c, group, member_id=first["member_id"], **kw)


async def until(predicate, limit=10.0):
    """Wait for a condition (the limit guards against a hang; it is not what the test asserts)."""
    deadline = asyncio.get_running_loop().time() + limit
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.01)
