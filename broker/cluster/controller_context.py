"""What the controller knows of the cluster, and the pure decisions it takes on it.

Kafka's ``ControllerContext`` plus the leader election rules of its
``PartitionStateMachine`` and ``ReplicaStateMachine``, kept free of I/O so
they read (and test) as rules:

* :func:`new_partition_state`: a new partition's leader is its first live
  replica and its ISR its live replicas (leader epoch 0);
* :func:`elect_leader`: an offline partition (its leader gone) takes the first
  replica, in assignment order, that is alive and in the ISR; the ISR becomes
  its live members. With none alive, an unclean election (only where the
  topic's ``unclean.leader.election.enable`` is true) takes the first live
  replica with an ISR of itself; otherwise the partition stays leaderless;
* :func:`remove_replica_from_isr`: a dead follower leaves the ISR, but the last
  member stays (it holds every committed record; a clean election needs it);
  a dead leader leaves the partition without a leader (-1);
* :func:`controlled_shutdown_leader` (Kafka's ``ControlledShutdownLeaderSelector``):
  a partition led by a broker shutting down goes to the first replica, in
  assignment order, that is online, in the ISR and not shutting down; the
  brokers shutting down leave the ISR;
* :func:`preferred_leader` (``PreferredReplicaLeaderSelector``): the first
  replica leads if it is online and in the ISR and does not lead already.

A replica is online when its broker is alive and its log dir has not failed
(:attr:`ControllerContext.offline_dir_replicas`).

Every change of leader or ISR made by the controller bumps the leader epoch.
Not thread-safe; the controller's event loop task alone uses it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from broker.cluster.znodes import BrokerRegistration, PartitionState
from broker.protocol.schema import ZERO_UUID

NO_LEADER = -1
TopicPartition = tuple[str, int]


@dataclass(slots=True)
class ControllerContext:
    """The cluster as the controller last read it."""

    epoch: int
    epoch_zk_version: int
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    #: topic -> partition -> replicas (first is the preferred leader)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    #: partition states with their znode versions (``PartitionState.version``)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    #: topic -> its id (KIP-516), from ``/brokers/topics/<t>``
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    #: brokers that asked for a controlled shutdown: they lead nothing new until they are gone
    shutting_down: set[int] = field(default_factory=set)
    #: broker -> its replicas in failed log dirs (until the broker registers again)
    offline_dir_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    #: broker -> replicas removed from their partitions while it was down (Kafka's ReplicaDeletionIneligible):
    #: their logs are deleted when it starts again
    replicas_to_delete: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, parts in self.assignments.items() for p in parts)

    def partitions_on(self, broker_ids: set[int]) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_ids & set(self.replicas(tp))]

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        return broker_id in self.live_brokers and tp not in self.offline_dir_replicas.get(broker_id, ())

    def online_replicas(self, tp: TopicPartition) -> set[int]:
        """The replicas of ``tp`` that can lead: online and not shutting down."""
        return {b for b in self.replicas(tp) if self.is_replica_online(b, tp) and b not in self.shutting_down}

    def offline_replicas(self, tp: TopicPartition) -> list[int]:
        return [b for b in self.replicas(tp) if not self.is_replica_online(b, tp)]

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id, the zero uuid when it has none yet."""
        return self.topic_ids.get(topic, ZERO_UUID)

    def remove_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        for p in self.assignments.pop(topic, {}):
            self.states.pop((topic, p), None)
        self.topics_to_delete.discard(topic)


def new_partition_state(replicas: list[int], live: set[int], controller_epoch: int) -> PartitionState | None:
    """A new partition's first state, or None when none of its replicas is alive."""
    alive = [b for b in replicas if b in live]
    if not alive:
        return None
    return PartitionState(alive[0], 0, tuple(alive), controller_epoch)


def elect_leader(state: PartitionState, replicas: list[int], live: set[int], unclean: bool,
                 controller_epoch: int) -> PartitionState | None:
    """The state after electing a leader of an offline partition, or None if none can be elected."""
    live_isr = [b for b in state.isr if b in live]
    candidates = [b for b in replicas if b in live_isr]
    if candidates:
        return replace(state, leader=candidates[0], leader_epoch=state.leader_epoch + 1,
                       isr=tuple(b for b in replicas if b in live_isr), controller_epoch=controller_epoch)
    alive = [b for b in replicas if b in live]
    if unclean and alive:
        return replace(state, leader=alive[0], leader_epoch=state.leader_epoch + 1, isr=(alive[0],),
                       controller_epoch=controller_epoch)
    return None


def remove_replica_from_isr(state: PartitionState, broker_id: int, controller_epoch: int) -> PartitionState | None:
    """The state once ``broker_id`` is dead, or None when it changes nothing."""
    if broker_id not in state.isr and state.leader != broker_id:
        return None
    isr = state.isr if len(state.isr) == 1 else tuple(b for b in state.isr if b != broker_id)
    leader = NO_LEADER if state.leader == broker_id else state.leader
    if isr == state.isr and leader == state.leader:
        return None
    return replace(state, leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr,
                   controller_epoch=controller_epoch)


def controlled_shutdown_leader(state: PartitionState, replicas: list[int], online: set[int],
                               shutting_down: set[int], controller_epoch: int) -> PartitionState | None:
    """The state once the leader handed over to an online ISR member not shutting down, or None if none is."""
    isr = [b for b in state.isr if b not in shutting_down]
    candidates = [b for b in replicas if b in isr and b in online and b not in shutting_down]
    if not candidates:
        return None
    return replace(state, leader=candidates[0], leader_epoch=state.leader_epoch + 1, isr=tuple(isr),
                   controller_epoch=controller_epoch)


def preferred_leader(state: PartitionState, replicas: list[int], online: set[int],
                     controller_epoch: int) -> PartitionState | None:
    """The state with the preferred (first) replica leading, or None if it leads or cannot."""
    if not replicas or state.leader == replicas[0]:
        return None
    preferred = replicas[0]
    if preferred not in online or preferred not in state.isr:
        return None
    return replace(state, leader=preferred, leader_epoch=state.leader_epoch + 1, controller_epoch=controller_epoch)
