"""Consumer group offset translation, exact.

For each source group the flow selects (never the mirror's own groups), and
each partition of a mirrored topic it has committed, the source offset C is
translated into the target offset of the very record C points at: the first
copy in the target partition whose provenance offset is C or later (a binary
search over the target, :meth:`mirror.position.TargetReader.first_copy_at_or_after`).
Translation waits until the mirror has copied up to C (its own committed
position on the source is at or past C); if nothing at or after C has been
copied yet but everything before it has, C translates to the target offset
after the last copy. So a consumer moved to the target reads on at the same
record, with no gap and no duplicate, whatever the target topic held before
and whatever gaps compaction or retention left in the source.

Groups with members in the target (any state but Empty or Dead) are left
alone: their own commits win. Offsets are written with OffsetCommit as an
admin does (generation -1), only when they changed.
"""

from __future__ import annotations

import logging

from broker.client import AsyncAdmin, TopicPartition

from .config import Flow
from .metrics import MirrorMetrics
from .position import TargetReader
from .topics import TopicSync

log = logging.getLogger("mirror")

MIRROR_GROUP_PREFIX = "kafkapy-mirror."


class GroupSync:
    def __init__(self, flow: Flow, source: AsyncAdmin, target: AsyncAdmin, reader: TargetReader,
                 topics: TopicSync, metrics: MirrorMetrics) -> None:
        self.flow = flow
        self._source = source
        self._target = target
        self._reader = reader
        self._topics = topics
        self._metrics = metrics
        self._cache: dict[tuple[TopicPartition, int], int] = {}

    async def selected_groups(self) -> list[str]:
        return [g.group_id for g in await self._source.list_groups()
                if self.flow.groups.fullmatch(g.group_id) and not g.group_id.startswith(MIRROR_GROUP_PREFIX)
                and g.protocol_type in ("consumer", "")]

    async def sync(self) -> dict[str, dict[TopicPartition, int]]:
        """One round over every selected group; returns ``{group: {target tp: offset}}`` written or current."""
        groups = await self.selected_groups()
        if not groups:
            self._metrics.groups.labels(self.flow.name).set(0)
            return {}
        progress = await self._source.list_group_offsets(self.flow.group_id)
        out = {}
        for group in groups:
            state = (await self._target.describe_groups([group]))[group]
            if state.members or state.state not in ("Empty", "Dead", ""):
                continue
            translated = {}
            for tp, om in (await self._source.list_group_offsets(group)).items():
                target_topic = self._topics.topics.get(tp.topic)
                if target_topic is None or tp not in progress:
                    continue
                offset = await self.translate(tp, target_topic, om.offset, progress[tp])
                if offset is not None:
                    translated[TopicPartition(target_topic, tp.partition)] = offset
            if not translated:
                continue
            current = await self._target.list_group_offsets(group, list(translated))
            changed = {tp: off for tp, off in translated.items()
                       if tp not in current or current[tp].offset != off}
            if changed:
                await self._target.alter_group_offsets(group, changed)
                log.info("flow %s: group %s offsets translated: %s", self.flow.name, group,
                         ", ".join(f"{tp.topic}-{tp.partition}={off}" for tp, off in sorted(changed.items())))
            out[group] = translated
        self._metrics.groups.labels(self.flow.name).set(len(out))
        return out

    async def translate(self, tp: TopicPartition, target_topic: str, offset: int, progress) -> int | None:
        """The target offset of source ``tp``'s ``offset``, or None while it cannot be known yet."""
        if offset > progress.offset:
            return None  # not copied that far yet
        key = (tp, offset)
        if key in self._cache:
            return self._cache[key]
        ttp = TopicPartition(target_topic, tp.partition)
        start = (await self._target.list_offsets({ttp: -2}))[ttp][0]
        end = await self._reader.end_offset(ttp, start)
        copy = await self._reader.first_copy_at_or_after(ttp, start, end, offset)
        if copy is not None:
            if len(self._cache) >= 100_000:  # committed offsets move on; old entries are rarely asked again
                self._cache.clear()
            self._cache[key] = copy.target_offset
            return copy.target_offset
        try:
            after_last = int(progress.metadata)
        except ValueError:
            return None
        return after_last if start <= after_last <= end else None
