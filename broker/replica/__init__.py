"""The replica layer: the partitions this broker holds, and the only way to their logs.

:class:`ReplicaManager` owns one :class:`Partition` per partition hosted
here: leader or follower state, leader epoch, ISR, high watermark, and the
:class:`Purgatory` where long-poll fetches and acks=all produces wait. Everything
above it (request handlers, the group coordinator) reads and appends through
it and never holds a :class:`~broker.log.Log`. It depends on :mod:`broker.log`
and :mod:`broker.protocol` (error codes) only.
"""

from broker.replica.manager import ReplicaManager
from broker.replica.partition import HIGH_WATERMARK, Partition
from broker.replica.purgatory import Purgatory

__all__ = ["HIGH_WATERMARK", "Partition", "Purgatory", "ReplicaManager"]
