"""One consumer-group member in its own process, for tests that kill members.

    python member_proc.py LIB BOOTSTRAP GROUP TOPIC [ASSIGNOR]

LIB is confluent, kafka-python or aiokafka; ASSIGNOR ``consumer-protocol`` (confluent only) makes it a member
of the consumer rebalance protocol (KIP-848, ``group.protocol=consumer``). The member subscribes, consumes, and
prints one JSON line per assignment change ({"assigned": [...]} with the full
current assignment). SIGTERM closes the consumer cleanly (LeaveGroup, which static
members do not send); SIGKILL is the crash the tests want.

Environment: ``KAFKAPY_MEMBER_INSTANCE_ID`` makes it a static member (KIP-345,
``group.instance.id``); ``KAFKAPY_MEMBER_SESSION_MS`` and ``KAFKAPY_MEMBER_MAX_POLL_MS``
(the rebalance timeout) replace the defaults.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys

SESSION_MS = int(os.environ.get("KAFKAPY_MEMBER_SESSION_MS", 6000))
HEARTBEAT_MS = 1000
MAX_POLL_MS = int(os.environ.get("KAFKAPY_MEMBER_MAX_POLL_MS", 300000))
INSTANCE_ID = os.environ.get("KAFKAPY_MEMBER_INSTANCE_ID") or None
stop = False


def report(partitions) -> None:
    print(json.dumps({"assigned": sorted(partitions)}), flush=True)


def _on_term(*_):
    global stop
    stop = True


def run_confluent(bootstrap, group, topic, assignor):
    from confluent_kafka import Consumer

    owned: set[int] = set()
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10, "max.poll.interval.ms": MAX_POLL_MS}
    if INSTANCE_ID:
        conf["group.instance.id"] = INSTANCE_ID
    incremental = assignor in ("cooperative-sticky", "consumer-protocol")
    if assignor == "consumer-protocol":  # KIP-848: the coordinator assigns and times the session
        conf["group.protocol"] = "consumer"
        del conf["session.timeout.ms"], conf["heartbeat.interval.ms"]
    elif assignor:
        conf["partition.assignment.strategy"] = assignor
    consumer = Consumer(conf)

    def on_assign(c, parts):
        if incremental:
            c.incremental_assign(parts)
            owned.update(p.partition for p in parts)
        else:
            owned.clear()
            owned.update(p.partition for p in parts)
        report(owned)

    def on_revoke(c, parts):
        if incremental:
            c.incremental_unassign(parts)
            owned.difference_update(p.partition for p in parts)
        else:
            owned.clear()
        report(owned)

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop:
        consumer.poll(0.1)
    consumer.close()


def _keep_metadata_rejoin_pending(consumer) -> None:
    """Work around a kafka-python 3.0.x client bug that strands a group leader.

    kafka-python rejoins when the leader sees the subscribed topics' metadata change
    (here: the topic's partitions become known after a first generation assigned
    nothing) without setting its ``rejoin_needed`` flag; the mismatch alone says
    "rejoin". The leader's assignor then records the new metadata, so the mismatch
    is gone before its SyncGroup response arrives. If ``poll(timeout_ms=...)`` runs
    out in that window, the join/sync attempt finishes in the background and no
    later poll collects it: heartbeats stay disabled, the assignment is never
    applied, and the broker expires the member after its session timeout (the
    broker did answer the SyncGroup; the client logged "Received SyncGroup response").
    The Java client sets its rejoin flag on such a metadata change (KAFKA-9815) and
    keeps it until a join completes; this makes kafka-python do the same, so the next
    poll rejoins (kafka-python drops the finished attempt and sends a new JoinGroup:
    one more generation) instead of leaving the member silent.
    """
    coordinator = consumer._coordinator
    need_rejoin = coordinator.need_rejoin

    def sticky_need_rejoin():
        if need_rejoin():
            coordinator.request_rejoin()  # cleared only once a join/sync result is applied
            return True
        return False

    coordinator.need_rejoin = sticky_need_rejoin


def run_kafka_python(bootstrap, group, topic, assignor):
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=SESSION_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, auto_offset_reset="earliest",
                             enable_auto_commit=False, max_poll_interval_ms=MAX_POLL_MS,
                             group_instance_id=INSTANCE_ID)
    _keep_metadata_rejoin_pending(consumer)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            report([])

        def on_partitions_assigned(self, assigned):
            report(p.partition for p in assigned)

    consumer.subscribe([topic], listener=Listener())
    while not stop:
        consumer.poll(timeout_ms=100)
    consumer.close()


def run_aiokafka(bootstrap, group, topic, assignor):
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            report([])

        def on_partitions_assigned(self, assigned):
            report(p.partition for p in assigned)

    async def main():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=SESSION_MS,
                                    heartbeat_interval_ms=HEARTBEAT_MS, auto_offset_reset="earliest",
                                    enable_auto_commit=False, max_poll_interval_ms=MAX_POLL_MS,
                                    group_instance_id=INSTANCE_ID)
        await consumer.start()
        consumer.subscribe([topic], listener=Listener())
        while not stop:
            await consumer.getmany(timeout_ms=100)
        await consumer.stop()

    asyncio.run(main())


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("KAFKAPY_MEMBER_LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(threadName)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _on_term)
    lib, bootstrap, group, topic = sys.argv[1:5]
    assignor = sys.argv[5] if len(sys.argv) > 5 else ""
    {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[lib](
        bootstrap, group, topic, assignor)
