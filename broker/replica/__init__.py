"""The replica layer: the partitions this broker holds, and the only way to their logs.

:class:`ReplicaManager` owns one :class:`Partition` per partition hosted
here: leader or follower state, leader epoch, ISR, high watermark, and the
:class:`Purgatory` where long-poll fetches and acks=all produces wait. Everything
above it (request handlers, the group coordinator) reads and appends through
it and never holds a :class:`~broker.log.Log`. Followers fetch from their
leaders (:mod:`broker.replica.fetcher`, over the client's
:class:`~broker.client._connection.BrokerConnection`); leaders keep the ISR
(:mod:`broker.replica.isr`). It depends on :mod:`broker.log`,
:mod:`broker.protocol` and that connection only; what it needs of the
cluster (topic configs, ISR writes) is injected.
"""

from broker.replica.fetcher import FetcherSettings, LeaderEndpoint
from broker.replica.isr import LeaderAndIsr
from broker.replica.manager import ReplicaManager, StaleControllerEpochError
from broker.replica.partition import HIGH_WATERMARK, Partition
from broker.replica.purgatory import Purgatory

__all__ = ["FetcherSettings", "HIGH_WATERMARK", "LeaderAndIsr", "LeaderEndpoint", "Partition", "Purgatory",
           "ReplicaManager", "StaleControllerEpochError"]
