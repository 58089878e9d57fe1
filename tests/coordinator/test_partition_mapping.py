"""Groups stored under the old group -> partition mapping survive the upgrade to Kafka's.

The old mapping masked the sign bit of the group id's hash (``& 0x7fffffff``); Kafka
takes ``Utils.abs``. The two differ for every group whose hash is negative: ``billing``
was stored on partition 39 and belongs on 9, ``ledger`` was on 9 and belongs on 39.
The test writes such a data dir as the old broker did (records appended to the old
partitions' logs of a stopped broker), starts the broker and reads the offsets back
with librdkafka.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from broker.coordinator.records import (GroupMetadataValue, OffsetAndMetadata, decode_key, group_metadata_key,
                                        group_metadata_value, java_string_hashcode, offset_commit_key,
                                        offset_commit_value, partition_for)
from broker.log import Log, LogConfig
from broker.records import BatchBuilder, iter_batches
from tests.coordinator.test_offsets_clients import create_topic

PARTITIONS = 50


def old_partition_for(group: str) -> int:
    return (java_string_hashcode(group) & 0x7FFFFFFF) % PARTITIONS


def append_offline(data_dir: Path, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
    """Append one batch to ``__consumer_offsets-<partition>`` of a stopped broker, as it would have."""
    log = Log.open(data_dir / f"__consumer_offsets-{partition}", LogConfig(), had_clean_shutdown=True)
    builder = BatchBuilder()
    now = int(time.time() * 1000)
    for key, value in records:
        builder.append(now, key, value)
    log.append(builder.build())
    log.flush()
    log.close()


def last_values(data_dir: Path, partition: int, group: str) -> dict:
    """{decoded key: last value} of ``group``'s records in one partition's segment files."""
    out = {}
    for seg in sorted((data_dir / f"__consumer_offsets-{partition}").glob("*.log")):
        for batch in iter_batches(seg.read_bytes()):
            for r in batch.records:
                key = decode_key(r.key)
                if key.group == group:
                    out[key] = r.value
    return out


def committed(bootstrap: str, group: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition("orders", 0), TopicPartition("orders", 1)],
                                                timeout=30)]
    finally:
        c.close()


def commit(group: str, offsets: dict[int, int]) -> list[tuple[bytes, bytes]]:
    now = int(time.time() * 1000)
    return [(offset_commit_key(group, "orders", p), offset_commit_value(OffsetAndMetadata(o, -1, "", now)))
            for p, o in offsets.items()]


def test_the_mapping_moved_and_groups_under_the_old_one_are_moved_on_load(broker_factory):
    assert (old_partition_for("billing"), partition_for("billing", PARTITIONS)) == (39, 9)
    assert (old_partition_for("ledger"), partition_for("ledger", PARTITIONS)) == (9, 39)
    broker = broker_factory()
    create_topic(broker.bootstrap, "orders", 2)
    assert committed(broker.bootstrap, "warm-up") == [-1001, -1001]  # creates __consumer_offsets
    assert broker.stop() == 0
    data = broker.data_dir
    billing = GroupMetadataValue("consumer", 3, "range", None, int(time.time() * 1000))
    append_offline(data, 39, [(group_metadata_key("billing"), group_metadata_value(billing))]
                   + commit("billing", {0: 5, 1: 7}))
    append_offline(data, 9, commit("ledger", {0: 50, 1: 70}))
    # ledger's own partition already holds a later commit of orders-0 (a move cut short): it wins
    append_offline(data, 39, commit("ledger", {0: 60}))

    broker.start()
    assert committed(broker.bootstrap, "billing") == [5, 7]
    assert committed(broker.bootstrap, "ledger") == [60, 70]
    assert broker.stop() == 0
    assert "moved from __consumer_offsets-39 to partition 9" in broker.stderr_text()

    # rewritten on the new partitions, tombstoned on the old ones
    on_new, on_old = last_values(data, 9, "billing"), last_values(data, 39, "billing")
    assert len(on_new) == 3 and all(v is not None for v in on_new.values())
    assert set(on_old) == set(on_new) and all(v is None for v in on_old.values())
    assert all(v is None for v in last_values(data, 9, "ledger").values())

    broker.start()  # the move is done once; the offsets stay
    assert committed(broker.bootstrap, "billing") == [5, 7]
    assert committed(broker.bootstrap, "ledger") == [60, 70]
    assert broker.stderr_text().count("moved from") == 2
