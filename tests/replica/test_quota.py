"""Replication quotas (broker.replica.quota): the throttled-replica lists and the windowed rate."""

from __future__ import annotations

from broker.replica.quota import UNLIMITED, ReplicationQuota, is_throttled


def test_throttled_replica_lists_name_partitions_per_broker():
    assert is_throttled("*", 3, 7)
    assert is_throttled("0:1,0:2,1:3", 2, 0) and not is_throttled("0:1,0:2,1:3", 2, 1)
    assert is_throttled("0:1,0:2,1:3", 3, 1) and not is_throttled("", 3, 1)


def test_the_rate_holds_over_the_window_after_a_first_burst():
    now = [0.0]
    quota = ReplicationQuota(clock=lambda: now[0])
    quota.record(10**9)
    assert not quota.is_exceeded()  # unlimited by default
    quota = ReplicationQuota(clock=lambda: now[0])
    quota.rate = 1000
    assert quota.rate < UNLIMITED and not quota.is_exceeded()
    quota.record(9000)        # a burst of nine seconds of quota passes at once ...
    assert not quota.is_exceeded()
    quota.record(2000)        # ... but not eleven
    assert quota.is_exceeded()
    now[0] = 10.5             # still within the window
    assert quota.is_exceeded()
    now[0] = 11.5             # the burst's sample has left the window
    assert not quota.is_exceeded()
    sent = 0
    for step in range(1, 301):  # a steady sender checking every 0.1 s for 30 s stays near the rate
        now[0] = 11.5 + step / 10
        if not quota.is_exceeded():
            quota.record(100)
            sent += 100
    assert 0.9 * 30 * 1000 <= sent <= 1.1 * 30 * 1000
