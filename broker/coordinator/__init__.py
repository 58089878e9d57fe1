"""The group coordinator over ``__consumer_offsets`` (ARCHITECTURE decision 8).

    records.py      key/value layouts of ``__consumer_offsets`` (Kafka's), the group -> partition
                    hash, ``decode_offsets_record`` for ``kafkactl log dump --offsets-decoder``
    group.py        the group state machine as a transition table, members, protocol selection
    storage.py      create / append to / replay the ``__consumer_offsets`` partitions
    coordinator.py  GroupCoordinator: the async layer (futures for held responses, timers)
    offsets.py      OffsetCommit / OffsetFetch / OffsetDelete and offset expiry (a mixin of
                    GroupCoordinator), Kafka 2.7's expiry rules as ``expired_partitions``
"""

from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.group import Event, Group, GroupState, IllegalTransition, Member, TRANSITIONS
from broker.coordinator.records import decode_offsets_record, partition_for

__all__ = ["GroupCoordinator", "Group", "GroupState", "Event", "Member", "TRANSITIONS", "IllegalTransition",
           "decode_offsets_record", "partition_for"]
