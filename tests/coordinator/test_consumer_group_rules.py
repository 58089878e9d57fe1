"""The consumer rebalance protocol's rules without I/O (broker.coordinator.consumer_group): the server-side
assignors and the reconciliation that never lets two members hold one partition, checked against a plain
model over random sequences of joins, leaves, topic changes and heartbeats."""

from __future__ import annotations

import random
import uuid

from broker.coordinator import consumer_group as cg

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def counts(target):
    return {m: sum(len(ps) for ps in a.values()) for m, a in target.items()}


def flat(assignment):
    return {(t, p) for t, ps in assignment.items() for p in ps}


def test_uniform_is_balanced_and_covers_every_partition_once():
    topics = {"a": (A, 7), "b": (B, 5)}
    subs = {f"m{i}": {"a", "b"} for i in range(5)}
    target = cg.assign("uniform", subs, topics, {})
    got = counts(target)
    assert max(got.values()) - min(got.values()) <= 1 and sum(got.values()) == 12
    every = [tp for a in target.values() for tp in flat(a)]
    assert len(every) == len(set(every)) == 12


def test_uniform_is_sticky_when_a_member_joins():
    topics = {"a": (A, 6), "b": (B, 3)}
    before = cg.assign("uniform", {"m1": {"a", "b"}, "m2": {"a", "b"}}, topics, {})
    after = cg.assign("uniform", {"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "b"}}, topics, before)
    assert counts(after) == {"m1": 3, "m2": 3, "m3": 3}
    # the old members only gave partitions up: none moved between them
    assert flat(after["m1"]) <= flat(before["m1"]) and flat(after["m2"]) <= flat(before["m2"])


def test_uniform_gives_each_topic_only_to_its_subscribers():
    topics = {"a": (A, 4), "b": (B, 4)}
    target = cg.assign("uniform", {"m1": {"a"}, "m2": {"a", "b"}, "m3": {"b"}}, topics, {})
    assert all(t == A for t in target["m1"]) and all(t == B for t in target["m3"])
    assert sum(counts(target).values()) == 8 and max(counts(target).values()) - min(counts(target).values()) <= 1


def test_range_gives_contiguous_ranges_in_member_order():
    target = cg.assign("range", {"m2": {"a"}, "m1": {"a"}}, {"a": (A, 5)}, {})
    assert target == {"m1": {A: frozenset({0, 1, 2})}, "m2": {A: frozenset({3, 4})}}


def test_a_partition_moves_only_after_its_holder_revoked_it():
    group = cg.ConsumerGroupState()
    one, two = cg.ConsumerMember("one"), cg.ConsumerMember("two")
    group.members = {"one": one}
    group.epoch = group.assignment_epoch = 1
    group.target = {"one": {A: frozenset(range(4))}}
    cg.reconcile(group, one, {})
    assert (one.epoch, one.state, one.assigned) == (1, cg.STABLE, {A: frozenset(range(4))})
    group.members["two"] = two
    group.epoch = group.assignment_epoch = 2
    group.target = {"one": {A: frozenset({0, 1})}, "two": {A: frozenset({2, 3})}}
    cg.reconcile(group, two, {})  # two comes first: 2 and 3 are still one's
    assert (two.epoch, two.state, two.assigned) == (2, cg.UNRELEASED_PARTITIONS, {})
    cg.reconcile(group, one, None)  # one did not say what it owns: it must give up 2 and 3 first
    assert (one.epoch, one.state) == (1, cg.UNREVOKED_PARTITIONS)
    assert one.assigned == {A: frozenset({0, 1})} and one.pending_revocation == {A: frozenset({2, 3})}
    cg.reconcile(group, one, {A: frozenset({0, 1, 2, 3})})  # still holds them
    assert one.state == cg.UNREVOKED_PARTITIONS
    cg.reconcile(group, two, {})
    assert two.assigned == {}
    cg.reconcile(group, one, {A: frozenset({0, 1})})  # revoked
    assert (one.epoch, one.state, one.assigned) == (2, cg.STABLE, {A: frozenset({0, 1})})
    cg.reconcile(group, two, {})
    assert (two.epoch, two.state, two.assigned) == (2, cg.STABLE, {A: frozenset({2, 3})})


def test_random_histories_never_give_a_partition_to_two_members():
    """Joins, leaves, partition growth and heartbeats in random order; members report what they hold, as
    clients do (or nothing). At no point do two members hold one partition, and once everyone has
    heartbeated enough with no change the group is Stable at the target."""
    rng = random.Random(848)
    for _ in range(60):
        group = cg.ConsumerGroupState()
        topics = {"a": (A, rng.randint(1, 8)), "b": (B, rng.randint(1, 8))}
        held: dict[str, cg.Assignment] = {}  # what each client believes it holds

        def retarget():
            subs = {m.member_id: cg.resolve(m, topics) for m in group.members.values()}
            group.epoch += 1
            group.target = cg.assign(rng.choice(cg.ASSIGNORS), subs, topics, group.target)
            group.assignment_epoch = group.epoch

        def heartbeat(member):
            report = held[member.member_id] if rng.random() < 0.8 else None
            cg.reconcile(group, member, report)
            held[member.member_id] = dict(member.assigned)  # the client applies what it is told
            owners = {}
            for m in group.members.values():
                for tp in flat(m.assigned) | flat(m.pending_revocation):
                    assert tp not in owners, f"{tp} held by {owners[tp]} and {m.member_id}"
                    owners[tp] = m.member_id
            believed = [tp for a in held.values() for tp in flat(a)]
            assert len(believed) == len(set(believed)), "two clients believe they hold one partition"

        for step in range(80):
            roll = rng.random()
            if roll < 0.15 and len(group.members) < 5:
                m = cg.ConsumerMember(f"m{step}", subscribed_topic_names=tuple(rng.sample(["a", "b"], rng.randint(1, 2))))
                group.members[m.member_id] = m
                held[m.member_id] = {}
                retarget()
            elif roll < 0.22 and group.members:
                gone = rng.choice(sorted(group.members))
                group.remove(gone)
                held.pop(gone)
                retarget()
            elif roll < 0.27:
                name = rng.choice(["a", "b"])
                topics[name] = (topics[name][0], topics[name][1] + 1)
                retarget()
            elif group.members:
                heartbeat(group.members[rng.choice(sorted(group.members))])
        for _ in range(4):
            for m in list(group.members.values()):
                cg.reconcile(group, m, held[m.member_id])
                held[m.member_id] = dict(m.assigned)
        if group.members:
            assert group.state == "Stable"
            for m in group.members.values():
                assert m.assigned == {t: ps for t, ps in group.target.get(m.member_id, {}).items() if ps}
