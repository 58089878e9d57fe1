"""One consumer of ours in its own process, for tests that SIGKILL legacy ZooKeeper consumers.

    python -m tests.client.zk_consumer_proc BOOTSTRAP GROUP TOPIC [PROPERTY=VALUE ...]

PROPERTY=VALUE are consumer properties with Kafka's dotted names (``group.protocol=zookeeper``,
``zookeeper.connect=...``, ``offsets.storage=kafka``, ...). One JSON line per event on stdout,
each with ``t`` (time.time() in this process, taken after a claim and before a release, so the
lines of different processes can be ordered):

    {"t": ..., "member": ID, "assigned": [[topic, partition], ...]}   the whole new assignment
    {"t": ..., "records": [[partition, offset, value], ...]}         what one poll returned

SIGTERM closes the consumer cleanly (final commit, owner znodes released); SIGKILL is the crash.
"""

from __future__ import annotations

import json
import signal
import sys
import time

from broker.client import Consumer

stop = False


def emit(obj) -> None:
    print(json.dumps({"t": time.time(), **obj}), flush=True)


def main() -> None:
    bootstrap, group, topic, *props = sys.argv[1:]
    config = dict(p.split("=", 1) for p in props)
    config.update({"bootstrap.servers": bootstrap, "group.id": group})
    config.setdefault("auto.offset.reset", "earliest")
    consumer = Consumer(config)
    owned: set = set()

    def on_assign(partitions):
        owned.update(partitions)
        emit({"member": consumer.member_id, "assigned": sorted(owned)})

    def on_revoke(partitions):
        owned.difference_update(partitions)
        emit({"member": consumer.member_id, "assigned": sorted(owned)})

    def on_term(*_):
        global stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop:
        records = consumer.poll(200)
        if records:
            emit({"records": [[r.partition, r.offset, r.value.decode()] for r in records]})
    consumer.close()


if __name__ == "__main__":
    main()
