"""Replica assignment (``broker/cluster/assignment.py``) against the layouts Kafka 2.7's
``AdminUtils.assignReplicasToBrokers`` computes for the same inputs (worked out by hand
from its algorithm; the documented examples are Kafka's own)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from broker.cluster.assignment import (
    DISABLED, SAFE, AssignmentError, BrokerRack, assign_new_partitions, assign_replicas_to_brokers,
    rack_alternated_broker_list,
)
from broker.protocol import ErrorCode


def plain(*ids):
    return [BrokerRack(i) for i in ids]


def racked(mapping):
    return [BrokerRack(i, r) for i, r in mapping.items()]


# Kafka's documented example: 0 -> rack1, 1 -> rack3, 2 -> rack3, 3 -> rack2, 4 -> rack2, 5 -> rack1.
DOC_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_unaware_five_brokers_ten_partitions_from_index_0():
    assert assign_replicas_to_brokers(plain(0, 1, 2, 3, 4), 10, 3, start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        # past one round the followers shift by one more
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_rack_unaware_three_brokers_and_broker_order_by_id():
    expected = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2]}
    assert assign_replicas_to_brokers(plain(3, 1, 2), 4, 3, start_index=0) == expected
    assert assign_replicas_to_brokers(plain(1, 2, 3), 3, 1, start_index=2) == {0: [3], 1: [1], 2: [2]}


def test_rack_alternated_list():
    assert rack_alternated_broker_list(DOC_RACKS) == [0, 3, 1, 5, 4, 2]
    three_by_three = {i: f"rack{i // 3 + 1}" for i in range(9)}
    assert rack_alternated_broker_list(three_by_three) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    assert rack_alternated_broker_list({1: "b", 2: "a", 3: "a"}) == [2, 1, 3]


def test_rack_aware_documented_example():
    assert assign_replicas_to_brokers(racked(DOC_RACKS), 7, 3, start_index=0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
        6: [0, 4, 2],  # "instead of repeating 0,3,1 as partition 0"
    }


def test_rack_aware_skips_a_used_rack_while_another_has_none():
    # Alternated list 1(a) 3(b) 2(a) 4(a). Partition 2 (leader 2, rack a): next in turn is 4
    # (rack a, while b has none: skipped), then 1 (a: skipped), then 3 (b: taken).
    racks = {1: "a", 2: "a", 3: "b", 4: "a"}
    assert rack_alternated_broker_list(racks) == [1, 3, 2, 4]
    assert assign_replicas_to_brokers(racked(racks), 4, 2, start_index=0) == {
        0: [1, 3], 1: [3, 2], 2: [2, 3], 3: [4, 3],
    }


@pytest.mark.parametrize("factor", [2, 3, 5])
def test_rack_aware_spreads_over_racks(factor):
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    rng = random.Random(7)
    for _ in range(20):
        assignment = assign_replicas_to_brokers(racked(racks), 12, factor, rng=rng)
        assert sorted(assignment) == list(range(12))
        for replicas in assignment.values():
            assert len(set(replicas)) == factor
            used = Counter(racks[b] for b in replicas)
            if factor <= 3:
                assert max(used.values()) == 1  # fewer replicas than racks: at most one per rack
            else:
                assert len(used) == 3  # at least as many replicas as racks: every rack has one


def test_random_start_is_spread_and_seeded():
    leaders = Counter()
    for seed in range(30):
        one = assign_replicas_to_brokers(plain(1, 2, 3), 3, 3, rng=random.Random(seed))
        assert one == assign_replicas_to_brokers(plain(1, 2, 3), 3, 3, rng=random.Random(seed))
        assert sorted(r[0] for r in one.values()) == [1, 2, 3]  # one preferred leader per broker
        leaders[one[0][0]] += 1
    assert set(leaders) == {1, 2, 3}


def test_new_partitions_continue_from_partition_zeros_leader():
    existing = {0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 0]}
    assert assign_new_partitions(plain(0, 1, 2, 3, 4), existing, 2) == {3: [4, 1, 2], 4: [0, 2, 3]}


def test_errors_are_kafkas():
    cases = [
        ((plain(1, 2, 3), 0, 1), ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0"),
        ((plain(1, 2, 3), 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0"),
        ((plain(1, 2, 3), 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR,
         "replication factor: 4 larger than available brokers: 3"),
        (([BrokerRack(1, "a"), BrokerRack(2)], 1, 1), ErrorCode.UNKNOWN_SERVER_ERROR,
         "Not all brokers have rack information for replica rack aware assignment"),
    ]
    for args, code, message in cases:
        with pytest.raises(AssignmentError) as err:
            assign_replicas_to_brokers(*args, start_index=0)
        assert (err.value.error_code, err.value.message) == (code, message)


def test_safe_and_disabled_modes_ignore_racks():
    mixed = [BrokerRack(1, "a"), BrokerRack(2), BrokerRack(3, "a")]
    expected = {0: [1, 2, 3], 1: [2, 3, 1]}
    assert assign_replicas_to_brokers(mixed, 2, 3, start_index=0, rack_aware_mode=SAFE) == expected
    # Every broker in rack a or b: rack-aware unless disabled.
    full = [BrokerRack(1, "a"), BrokerRack(2, "a"), BrokerRack(3, "b")]
    assert assign_replicas_to_brokers(full, 1, 2, start_index=0) == {0: [1, 3]}
    assert assign_replicas_to_brokers(full, 1, 2, start_index=0, rack_aware_mode=DISABLED) == {0: [1, 2]}
