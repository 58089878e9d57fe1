"""The controller's leader election rules (Kafka's partition and replica state machines), as pure functions."""

from __future__ import annotations

from broker.cluster.controller_context import elect_leader, new_partition_state, remove_replica_from_isr
from broker.cluster.znodes import PartitionState


def test_a_new_partition_is_led_by_its_first_live_replica():
    assert new_partition_state([3, 1, 2], {1, 2, 3}, 7) == PartitionState(3, 0, (3, 1, 2), 7)
    assert new_partition_state([3, 1, 2], {1, 2}, 7) == PartitionState(1, 0, (1, 2), 7)
    assert new_partition_state([3], {1, 2}, 7) is None


def test_offline_partition_elects_from_the_live_isr_in_assignment_order():
    state = PartitionState(1, 4, (1, 3, 2), 2, 9)
    elected = elect_leader(state, [1, 2, 3], {2, 3}, unclean=False, controller_epoch=5)
    assert elected == PartitionState(2, 5, (2, 3), 5) and elected.version == 9  # written at the version read


def test_no_live_isr_member_no_leader_unless_unclean_election_is_enabled():
    state = PartitionState(1, 4, (1,), 2)
    assert elect_leader(state, [1, 2, 3], {2, 3}, unclean=False, controller_epoch=5) is None
    assert elect_leader(state, [1, 2, 3], {2, 3}, unclean=True, controller_epoch=5) == PartitionState(2, 5, (2,), 5)
    assert elect_leader(state, [1, 2, 3], set(), unclean=True, controller_epoch=5) is None


def test_a_dead_replica_leaves_the_isr_but_the_last_member_stays():
    state = PartitionState(1, 4, (1, 2), 2)
    follower_gone = remove_replica_from_isr(state, 2, 5)
    assert follower_gone == PartitionState(1, 5, (1,), 5)
    leader_gone = remove_replica_from_isr(follower_gone, 1, 6)
    assert leader_gone == PartitionState(-1, 6, (1,), 6)  # leaderless; broker 1 still holds every commit
    assert remove_replica_from_isr(state, 3, 5) is None  # not in the ISR: nothing to write
