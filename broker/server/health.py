"""The broker's health as the metrics scrape reads it: Kafka's ReplicaManager, KafkaController and LogManager gauges.

Both functions run in the metrics HTTP server's thread while the event loop
owns what they read, so they only read: dicts are copied with ``list()`` (one
C-level step under the GIL) before iterating, and a value that changes while
it is read is simply the next scrape's news. Nothing here costs the request
path anything. Definitions, as Kafka's:

* under-replicated: a partition this broker leads whose ISR is smaller than its
  replica set; under-min-ISR / at-min-ISR: whose ISR is smaller than / equal
  to its topic's ``min.insync.replicas``;
* offline partitions: counted by the active controller alone (0 elsewhere),
  the partitions of topics not being deleted whose leader is -1 or not a live
  broker;
* the consumer lag of a committed offset is the high watermark of this
  broker's replica of the partition minus the offset; a partition this broker
  holds no replica of has a current offset and no lag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.metrics import GroupLag, Health

if TYPE_CHECKING:
    from broker.server.broker import Broker


def health_snapshot(broker: "Broker") -> Health:
    replicas = broker.replicas
    under_replicated = under_min_isr = at_min_isr = leaders = held = 0
    for partition in replicas.partitions():
        held += 1
        if not partition.is_leader:
            continue
        leaders += 1
        isr, min_isr = len(partition.isr), partition.config.min_insync_replicas
        under_replicated += isr < len(partition.replicas)
        under_min_isr += isr < min_isr
        at_min_isr += isr == min_isr
    controller = broker.controller
    ctx = controller.context
    offline = global_partitions = global_topics = 0
    if ctx is not None:
        deleting = set(ctx.topics_to_delete)
        for tp, state in list(ctx.states.items()):
            if tp[0] not in deleting and (state.leader < 0 or state.leader not in ctx.live_brokers):
                offline += 1
        assignments = list(ctx.assignments.values())
        global_topics = len(assignments)
        global_partitions = sum(len(parts) for parts in assignments)
    log_manager = broker.log_manager
    return Health(
        under_replicated=under_replicated, under_min_isr=under_min_isr, at_min_isr=at_min_isr, leaders=leaders,
        partitions=held, offline_replicas=len(replicas.offline_partitions()), isr_shrinks=replicas.isr.shrinks,
        isr_expands=replicas.isr.expands, fetcher_max_lag=replicas.fetchers.max_lag(),
        offline_log_dirs=0 if log_manager is None else len(log_manager.failure_channel.offline_dirs),
        controller_active=ctx is not None, offline_partitions=offline, global_partitions=global_partitions,
        global_topics=global_topics, controller_events=dict(controller.events),
        controller_queue_size=controller.queue_size)


def consumer_lag_snapshot(broker: "Broker") -> tuple[list[GroupLag], dict[str, int]]:
    """Every committed offset of the groups this broker coordinates, with its partition's end; members per group."""
    lags: list[GroupLag] = []
    members: dict[str, int] = {}
    high_watermark_of = broker.replicas.high_watermark_of
    for group in list(broker.coordinator.groups.values()):
        modern = group.modern
        members[group.group_id] = len(modern.members) if modern is not None else len(group.members)
        for (topic, partition), om in list(group.offsets.items()):
            lags.append(GroupLag(group.group_id, topic, partition, om.offset, high_watermark_of((topic, partition))))
    return lags, members
