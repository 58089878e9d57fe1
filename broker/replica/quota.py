"""Replication throttles: Kafka's ``ReplicationQuotaManager``, one for the leader side and one for the follower side.

A quota has a byte rate (``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate``, dynamic broker configs; unlimited
by default) and applies only to throttled replicas, named per topic by the
topic configs ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas``: ``*`` (every partition) or
``partition:broker`` pairs, of which a broker takes the pairs naming itself
(:func:`throttled_partitions`).

The rate is measured as Kafka measures it: bytes recorded in the last
:data:`SAMPLES` one-second samples (Kafka's ``replication.quota.window.num``
and ``replication.quota.window.size.seconds`` defaults), divided by the time
since the oldest of them began but never by less than ten seconds, so the
first seconds of a move may send a burst of up to ten seconds of quota
before the quota holds. A fetch under way when the quota is reached is not
cut short, so a throttled rate runs somewhat above the quota (by at most one
fetch's ``replica.fetch.max.bytes`` per check).

Who throttles what (Kafka 2.7's ``shouldLeaderThrottle`` /
``shouldFollowerThrottle``): only a replica that is not in sync, and only while
the quota is exceeded; an in-sync replica is never throttled, so a throttle
bounds a moving replica's catch-up without slowing the ISR.

* leader: a follower's fetch of a throttled partition, from a follower outside
  the ISR, gets no records while the leader quota is exceeded; the bytes it
  does send for such partitions are recorded;
* follower: a throttled partition whose log end is below the leader's high
  watermark is left out of the fetch while the follower quota is exceeded;
  the bytes appended for such partitions are recorded.

Loop-only.
"""

from __future__ import annotations

import functools
import time
from collections import deque

SAMPLES = 11          # one-second samples in the window (Kafka's replication.quota.window.num)
SAMPLE_S = 1.0        # Kafka's replication.quota.window.size.seconds
UNLIMITED = 2**63 - 1  # Kafka's default rate (Long.MaxValue): no throttle
ALL = frozenset({-1})  # "*": every partition


@functools.lru_cache(maxsize=1024)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int]:
    """The partitions ``broker_id`` throttles by a ``*.replication.throttled.replicas`` value (:data:`ALL` for ``*``)."""
    value = value.strip()
    if value == "*":
        return ALL
    out = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if broker and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def is_throttled(value: str, broker_id: int, partition: int) -> bool:
    if not value:
        return False
    partitions = throttled_partitions(value, broker_id)
    return partitions is ALL or partition in partitions


class ReplicationQuota:
    """A byte rate over a sliding window of one-second samples; see the module docstring."""

    def __init__(self, clock=time.monotonic) -> None:
        self.rate = UNLIMITED
        self._clock = clock
        self._samples: deque[list] = deque()  # [sample start, bytes]

    @property
    def enabled(self) -> bool:
        return self.rate < UNLIMITED

    def _expire(self, now: float) -> None:
        while self._samples and self._samples[0][0] <= now - SAMPLES * SAMPLE_S:
            self._samples.popleft()

    def record(self, nbytes: int) -> None:
        now = self._clock()
        self._expire(now)
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_S:
            self._samples.append([now, 0])
        self._samples[-1][1] += nbytes

    def measured_rate(self) -> float:
        """Bytes per second over the window: since the oldest sample began, and never less than all the
        samples but the current one (Kafka's ``Rate``), so a quiet start does not read as a high rate."""
        now = self._clock()
        self._expire(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], (SAMPLES - 1) * SAMPLE_S)
        return sum(n for _start, n in self._samples) / elapsed

    def is_exceeded(self) -> bool:
        return self.enabled and self.measured_rate() > self.rate
