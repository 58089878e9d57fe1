"""A transactional copier, run as its own process by ``test_copier.py`` (and SIGKILLed by it).

``python copier.py BOOTSTRAP INPUT OUTPUT TRANSACTIONAL_ID TOTAL PAUSE_S``

Kafka's read-process-write loop with librdkafka: consume (read_committed)
up to 100 records from INPUT, begin a transaction, produce each to OUTPUT
(same partition), send the consumer's positions to the transaction as the
group ``copier``'s offsets, commit, then a pause of PAUSE_S (so a test's random kills land mid-copy).
It starts where the group's committed
offsets are, after ``init_transactions`` has fenced and aborted whatever an
earlier incarnation left open, so a kill at any point loses and repeats nothing.

Exit 0 once the committed offsets cover TOTAL input records; exit 2 on any
error (the broker restarted under it, a fenced producer): the test starts the
copier again, which is what a supervisor would do.
"""

from __future__ import annotations

import sys
import time

import confluent_kafka as ck

BATCH = 100
GROUP = "copier"
LIMIT_S = 60


def main(bootstrap: str, source: str, sink: str, transactional_id: str, total: int, pause_s: float) -> int:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                            "linger.ms": 5, "transaction.timeout.ms": 60000})
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                            "fetch.queue.backoff.ms": 10})
    try:
        producer.init_transactions(LIMIT_S)
        partitions = consumer.list_topics(source, timeout=LIMIT_S).topics[source].partitions
        wanted = [ck.TopicPartition(source, p) for p in sorted(partitions)]
        start = consumer.committed(wanted, timeout=LIMIT_S)
        consumer.assign([ck.TopicPartition(source, tp.partition, tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING)
                         for tp in start])
        group = consumer.consumer_group_metadata()
        #: partition -> the next offset to copy (-1: nothing committed or copied yet)
        position = {tp.partition: tp.offset if tp.offset >= 0 else -1 for tp in start}
        while sum(max(o, 0) for o in position.values()) < total:
            records = [m for m in consumer.consume(BATCH, 1.0) if not m.error()]
            if not records:
                continue
            producer.begin_transaction()
            for m in records:
                producer.produce(sink, m.value(), partition=m.partition())
                position[m.partition()] = m.offset() + 1
            offsets = [ck.TopicPartition(source, p, o) for p, o in sorted(position.items()) if o >= 0]
            producer.send_offsets_to_transaction(offsets, group, LIMIT_S)
            producer.commit_transaction(LIMIT_S)
            time.sleep(pause_s)
        return 0
    except ck.KafkaException as exc:
        print(f"copier: {exc}", file=sys.stderr)
        return 2
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])))
