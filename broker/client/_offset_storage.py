"""Where a consumer's commits go and where its committed offsets come from.

``offsets_storage`` and ``dual_commit_enabled`` pick the stores (Kafka 0.8.2's documentation, "Migrating offsets from
ZooKeeper to Kafka")::

    offsets_storage  dual_commit_enabled  commit to            read from
    kafka            false                broker               broker
    zookeeper        false                ZooKeeper            ZooKeeper
    either           true                 broker and ZooKeeper the larger of the two

Reading the larger of the two while committing to both is what makes each step of the migration
safe: a group whose offsets are only in ZooKeeper starts where it was when dual commit is turned
on, and one whose newer offsets are only in the broker does so in the rollback. (Old Kafka consumers
dual-committed only with ``offsets.storage=kafka``; here dual commit works in both directions, so
the rollback is the same four steps with ``offsets_storage=zookeeper``.)

ZooKeeper is written as old consumers did: one znode per partition, bare decimal text
(:mod:`._zookeeper`), after the broker, as they dual-committed. Owned by the consumer's event
loop; ZooKeeper calls run in a worker thread.
"""

from __future__ import annotations

import asyncio

from ._config import ConsumerConfig
from ._group import GroupMember
from ._types import OffsetAndMetadata, TopicPartition
from ._zookeeper import ZooKeeperOffsetStore


class OffsetStorage:
    def __init__(self, config: ConsumerConfig, broker: GroupMember | None,
                 zookeeper: ZooKeeperOffsetStore | None) -> None:
        """``broker`` commits through the group coordinator (None: offsets never go there)."""
        self.group_id = config.group_id
        dual = config.dual_commit_enabled
        self.broker = broker if (dual or config.offsets_storage == "kafka") else None
        self.zookeeper = zookeeper if (dual or config.offsets_storage == "zookeeper") else None

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if not offsets:
            return
        if self.broker is not None:
            await self.broker.commit(offsets)
        if self.zookeeper is not None:
            await asyncio.to_thread(self.zookeeper.commit, self.group_id,
                                    {tp: om.offset for tp, om in offsets.items()})

    async def fetch_committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        out: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in tps}
        if self.broker is not None:
            out.update(await self.broker.fetch_committed(tps))
        if self.zookeeper is not None:
            for tp, offset in (await asyncio.to_thread(self.zookeeper.fetch, self.group_id, tps)).items():
                if offset is not None and (out.get(tp) is None or out[tp].offset < offset):
                    out[tp] = OffsetAndMetadata(offset)
        return out
