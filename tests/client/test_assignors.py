"""Assignors and the "consumer" embedded protocol, without a broker."""

from __future__ import annotations

import random
import struct

import pytest

from broker.client import CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor, TopicPartition
from broker.client._assignors import resolve_assignors, sticky_assignment
from broker.client._consumer_protocol import (Assignment, Subscription, decode_assignment, decode_subscription,
                                              encode_assignment, encode_subscription)
from broker.client.errors import ConfigError, ProtocolError

TP = TopicPartition


def subs(**members):
    return {m: Subscription(list(topics)) for m, topics in members.items()}


def flat(result):
    return {m: sorted(a.partitions) for m, a in result.items()}


def test_range_gives_the_first_members_the_extra_partitions():
    result = flat(RangeAssignor().assign(subs(c1=["t"], c2=["t"], c3=["t"]), {"t": 7}))
    assert result == {"c1": [TP("t", 0), TP("t", 1), TP("t", 2)],
                      "c2": [TP("t", 3), TP("t", 4)], "c3": [TP("t", 5), TP("t", 6)]}


def test_range_is_per_topic_and_respects_subscriptions():
    result = flat(RangeAssignor().assign(subs(a=["x", "y"], b=["x"]), {"x": 2, "y": 2}))
    assert result == {"a": [TP("x", 0), TP("y", 0), TP("y", 1)], "b": [TP("x", 1)]}


def test_roundrobin_deals_sorted_partitions_in_turn():
    result = flat(RoundRobinAssignor().assign(subs(b=["x", "y"], a=["x", "y"]), {"x": 3, "y": 2}))
    assert result == {"a": [TP("x", 0), TP("x", 2), TP("y", 1)], "b": [TP("x", 1), TP("y", 0)]}


def test_roundrobin_skips_members_not_subscribed():
    result = flat(RoundRobinAssignor().assign(subs(a=["x"], b=["x", "y"]), {"x": 2, "y": 2}))
    assert result == {"a": [TP("x", 0)], "b": [TP("x", 1), TP("y", 0), TP("y", 1)]}


def test_sticky_keeps_owned_partitions_and_balances():
    members = {
        "a": Subscription(["t"], struct.pack(">i", 3), [TP("t", p) for p in range(6)]),
        "b": Subscription(["t"], struct.pack(">i", 3), []),
    }
    target = sticky_assignment(members, {"t": 6})
    assert len(target["a"]) == 3 and len(target["b"]) == 3
    assert set(target["a"]) <= {TP("t", p) for p in range(6)}


@pytest.mark.parametrize("seed", range(20))
def test_sticky_is_balanced_and_complete_for_random_groups(seed):
    rnd = random.Random(seed)
    topics = {f"t{i}": rnd.randint(1, 6) for i in range(3)}
    members = {}
    for m in range(rnd.randint(1, 5)):
        chosen = rnd.sample(sorted(topics), rnd.randint(1, 3))
        owned = [TP(t, p) for t in chosen for p in range(topics[t]) if rnd.random() < 0.3]
        members[f"m{m}"] = Subscription(chosen, struct.pack(">i", rnd.randint(0, 3)), owned)
    target = sticky_assignment(members, topics)
    assigned = [tp for tps in target.values() for tp in tps]
    subscribed = {TP(t, p) for s in members.values() for t in s.topics for p in range(topics[t])}
    assert sorted(assigned) == sorted(subscribed)  # every partition exactly once
    for m, tps in target.items():
        assert all(tp.topic in members[m].topics for tp in tps)
    # balanced: nobody could take a partition from someone with two more
    for m, tps in target.items():
        for other, otps in target.items():
            if len(otps) >= len(tps) + 2:
                assert not any(tp.topic in members[m].topics for tp in otps)


def test_cooperative_sticky_withholds_partitions_that_change_owner():
    assignor = CooperativeStickyAssignor()
    owned = [TP("t", p) for p in range(4)]
    members = {
        "a": Subscription(["t"], assignor.subscription_user_data(["t"], 1), owned),
        "b": Subscription(["t"], assignor.subscription_user_data(["t"], -1), []),
    }
    first = flat(assignor.assign(members, {"t": 4}))
    assert len(first["a"]) == 2 and first["b"] == []  # b waits until a revoked
    members["a"] = Subscription(["t"], assignor.subscription_user_data(["t"], 2), first["a"])
    second = flat(assignor.assign(members, {"t": 4}))
    assert second["a"] == first["a"] and sorted(second["a"] + second["b"]) == owned


def test_subscription_and_assignment_round_trip():
    sub = Subscription(["b", "a"], b"\x00\x01", [TP("a", 1), TP("a", 0), TP("b", 3)])
    back = decode_subscription(encode_subscription(sub))
    assert back.topics == ["b", "a"] and back.user_data == b"\x00\x01"
    assert sorted(back.owned_partitions) == sorted(sub.owned_partitions)
    asg = Assignment([TP("x", 2), TP("x", 0), TP("y", 1)], None)
    back = decode_assignment(encode_assignment(asg))
    assert sorted(back.partitions) == sorted(asg.partitions) and back.user_data is None
    assert decode_assignment(b"").partitions == []


def test_wire_layout_of_subscription_v1():
    data = encode_subscription(Subscription(["ab"], None, [TP("ab", 7)]))
    assert data == (b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x02ab" + b"\xff\xff\xff\xff"
                    + b"\x00\x00\x00\x01" + b"\x00\x02ab" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x07")


def test_kafka_python_reads_our_assignment_and_we_read_its_subscription():
    protocol = pytest.importorskip("kafka.protocol.old.consumer_protocol")
    theirs = protocol.ConsumerProtocolMemberMetadata_v0(0, ["t1", "t2"], b"ud").encode()
    sub = decode_subscription(theirs)
    assert sub.topics == ["t1", "t2"] and sub.user_data == b"ud" and sub.version == 0
    ours = encode_assignment(Assignment([TP("t1", 0), TP("t1", 2)], b"x"))
    decoded = protocol.ConsumerProtocolMemberAssignment_v0.decode(ours)
    assert [tuple(a) for a in decoded.assigned_partitions] == [("t1", [0, 2])] and decoded.user_data == b"x"


def test_truncated_protocol_data_raises():
    with pytest.raises(ProtocolError):
        decode_subscription(b"\x00\x01\x00\x00\x00\x05")


def test_resolve_assignors():
    assert [a.name for a in resolve_assignors("range, roundrobin".split(", "))] == ["range", "roundrobin"]
    assert resolve_assignors("cooperative-sticky")[0].rebalance_protocol == "COOPERATIVE"
    with pytest.raises(ConfigError):
        resolve_assignors(["nope"])
