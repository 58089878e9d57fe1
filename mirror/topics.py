"""Keeping the target's topics in step with the source's.

For each source topic a flow selects: the target topic (named by the flow's
``topic.rename``) is created with the same partition count and the source's
topic-level configs (those set on the topic, not broker defaults), partitions
added at the source are added at the target, and configs changed at the source
are set at the target. The target's replication factor is its own default.
Configs are never deleted at the target: a target may keep its own additions.
"""

from __future__ import annotations

import logging

from broker.client import AsyncAdmin, ConfigResource, NewTopic
from broker.client.errors import TopicAlreadyExistsError, UnsupportedApiError

from .config import Flow

log = logging.getLogger("mirror")

# Set at the source by the broker for itself, meaningless to copy.
_NOT_COPIED = {"message.format.version", "leader.replication.throttled.replicas",
               "follower.replication.throttled.replicas"}


class TopicSync:
    def __init__(self, flow: Flow, source: AsyncAdmin, target: AsyncAdmin, renamed_back: str | None) -> None:
        self.flow = flow
        self._source = source
        self._target = target
        self._renamed_back = renamed_back
        self.topics: dict[str, str] = {}  # source topic -> target topic, every topic in sync
        self._can_alter = True

    async def selected(self) -> list[str]:
        return [t for t in await self._source.list_topics() if self.flow.selects(t, self._renamed_back)]

    async def sync_all(self) -> None:
        for topic in await self.selected():
            await self.ensure(topic)

    async def _topic_configs(self, admin: AsyncAdmin, topic: str) -> dict[str, str]:
        res = ConfigResource("topic", topic)
        entries = (await admin.describe_configs([res]))[res]
        return {k: e.value for k, e in entries.items()
                if e.source == "DYNAMIC_TOPIC_CONFIG" and e.value is not None and k not in _NOT_COPIED}

    async def ensure(self, topic: str) -> str:
        """Create or update the target copy of source ``topic``; return its name."""
        name = self.flow.target_topic(topic)
        partitions = len((await self._source.describe_topics([topic]))[topic].partitions)
        configs = await self._topic_configs(self._source, topic)
        existing = await self._target.describe_topics(None)
        if name not in existing:
            try:
                await self._target.create_topics([NewTopic(name, partitions, -1, configs)])
                log.info("flow %s: created topic %s in %s (%d partitions)", self.flow.name, name,
                         self.flow.target, partitions)
            except TopicAlreadyExistsError:
                pass  # another mirror process was first
        else:
            have = len(existing[name].partitions)
            if have < partitions:
                await self._target.create_partitions({name: partitions})
                log.info("flow %s: %s grown to %d partitions", self.flow.name, name, partitions)
            if configs and self._can_alter:
                current = await self._topic_configs(self._target, name)
                changed = {k: v for k, v in configs.items() if current.get(k) != v}
                if changed:
                    try:
                        await self._target.incremental_alter_configs({ConfigResource("topic", name): changed})
                    except UnsupportedApiError:
                        self._can_alter = False
                        log.warning("flow %s: %s cannot alter topic configs; configs are copied only at "
                                    "creation", self.flow.name, self.flow.target)
                    else:
                        log.info("flow %s: set %s on %s", self.flow.name,
                                 ", ".join(f"{k}={v}" for k, v in sorted(changed.items())), name)
        self.topics[topic] = name
        return name
