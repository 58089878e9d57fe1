"""The group coordinator over ``__consumer_offsets``.

It imports nothing of the server: the broker hands it a config, the metrics and a
partition store (:class:`OffsetsStore`).

    records.py      key/value layouts of ``__consumer_offsets`` (Kafka's), the group -> partition
                    hash, ``decode_offsets_record`` for ``kafkactl log dump --offsets-decoder``
    group.py        the group state machine as a transition table, members, protocol selection
    storage.py      the narrow partition store the coordinator sees (OffsetsStore; ReplicaStore over
                    the replica layer): leadership listeners, appends acknowledged at the high
                    watermark, replay of a partition, creation of ``__consumer_offsets``
    coordinator.py  GroupCoordinator: the async layer (futures for held responses, timers), loading
                    and unloading partitions as this broker becomes or stops being their leader
    offsets.py      OffsetCommit / OffsetFetch / OffsetDelete and offset expiry (a mixin of
                    GroupCoordinator), Kafka 2.7's expiry rules as ``expired_partitions``
    consumer_group.py
                    the consumer rebalance protocol (KIP-848) without I/O: members, epochs, the
                    server-side assignors, Kafka's reconciliation (revoke before reassign)
    modern.py       ConsumerGroupHeartbeat / ConsumerGroupDescribe (a mixin of GroupCoordinator),
                    and the storage of such groups in ``__consumer_offsets``
    mixed.py        classic members inside consumer groups, and the online conversions both ways
    consumer_group_records.py
                    Kafka 4.x's record layouts of those groups (keys 3-8)
"""

from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.group import Event, Group, GroupState, IllegalTransition, Member, TRANSITIONS
from broker.coordinator.records import decode_offsets_record, partition_for
from broker.coordinator.storage import OffsetsStore, ReplicaStore, StorageError

__all__ = ["GroupCoordinator", "Group", "GroupState", "Event", "Member", "TRANSITIONS", "IllegalTransition",
           "decode_offsets_record", "partition_for", "OffsetsStore", "ReplicaStore", "StorageError"]
