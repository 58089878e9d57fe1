"""A broker SIGKILLed between PrepareCommit and the markers completes the commit after its restart.

The way to stop exactly there, with nothing in the broker made for the test: a
marker is an acks=all append, so a partition whose ISR is below its
``min.insync.replicas`` refuses it (NOT_ENOUGH_REPLICAS, as Kafka's leader
does) and the coordinator keeps retrying. The transaction's records are written
first; then the topic's ``min.insync.replicas`` goes to 2 (one broker: the ISR is
1), the producer commits (the coordinator answers once PrepareCommit is in
``__transaction_state``) and DescribeTransactions shows PrepareCommit holding,
with no marker in the partition. SIGKILL. After the restart the coordinator
loads PrepareCommit and retries the markers; once ``min.insync.replicas`` is
back to 1 they are written, CompleteCommit follows and a read_committed consumer
reads the transaction, exactly once.

The same stop shows a partition whose topic is deleted meanwhile: its marker is
dropped (as Kafka's coordinator skips it) and the commit completes in the others.
"""

from __future__ import annotations

import time

import pytest

from broker.protocol import ErrorCode

from .reading import read_committed
from .test_transactions import LIMIT_S, create_topic, describe, wait_for

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")


def set_min_isr(bootstrap: str, topic: str, value: int) -> None:
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    entry = admin_mod.ConfigEntry("min.insync.replicas", str(value),
                                  incremental_operation=admin_mod.AlterConfigOpType.SET)
    resource = admin_mod.ConfigResource(admin_mod.ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(LIMIT_S)



def end_offset(bootstrap: str, topic: str) -> int:
    """The partition's log end (the high watermark: one broker)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe",
                            "isolation.level": "read_uncommitted"})  # the log end, not the LSO
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), LIMIT_S)[1]
    finally:
        consumer.close()


def test_sigkill_between_prepare_commit_and_the_markers_completes_the_commit_after_restart(broker):
    create_topic(broker.bootstrap, "ledger")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ledger-app",
                            "linger.ms": 5})
    producer.init_transactions(LIMIT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("ledger", b"entry-%d" % i, partition=0)
    assert producer.flush(LIMIT_S) == 0
    set_min_isr(broker.bootstrap, "ledger", 2)  # from now on no marker can be written into ledger-0
    producer.commit_transaction(LIMIT_S)  # answered once PrepareCommit is written

    time.sleep(1.0)  # the coordinator has retried the markers for a while by now
    assert describe(broker.bootstrap, "ledger-app")["ledger-app"]["transaction_state"] == "PrepareCommit"
    assert end_offset(broker.bootstrap, "ledger") == 3  # the three records and no marker
    broker.kill()
    broker.start()

    # loaded as PrepareCommit, its markers still refused
    def loaded():
        state = describe(broker.bootstrap, "ledger-app")["ledger-app"]
        return state if state["error_code"] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else None
    state = wait_for(loaded, "the coordinator to load")
    assert state["error_code"] == ErrorCode.NONE and state["transaction_state"] == "PrepareCommit"
    assert state["topics"] == [{"topic": "ledger", "partitions": [0]}]
    set_min_isr(broker.bootstrap, "ledger", 1)
    wait_for(lambda: describe(broker.bootstrap, "ledger-app")["ledger-app"]["transaction_state"] == "CompleteCommit",
             "CompleteCommit")
    assert end_offset(broker.bootstrap, "ledger") == 4  # one COMMIT marker
    assert read_committed(broker.bootstrap, "ledger", 1, 3, wait_s=LIMIT_S) == [b"entry-0", b"entry-1", b"entry-2"]


def test_markers_for_a_deleted_topic_are_dropped_and_the_commit_completes(broker):
    create_topic(broker.bootstrap, "kept")
    create_topic(broker.bootstrap, "doomed")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "doomed-app",
                            "linger.ms": 5})
    producer.init_transactions(LIMIT_S)
    producer.begin_transaction()
    producer.produce("kept", b"stays", partition=0)
    producer.produce("doomed", b"goes", partition=0)
    assert producer.flush(LIMIT_S) == 0
    set_min_isr(broker.bootstrap, "doomed", 2)  # the marker for doomed-0 is refused
    producer.commit_transaction(LIMIT_S)
    time.sleep(1.0)
    assert describe(broker.bootstrap, "doomed-app")["doomed-app"]["transaction_state"] == "PrepareCommit"

    admin = admin_mod.AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(LIMIT_S)
    wait_for(lambda: describe(broker.bootstrap, "doomed-app")["doomed-app"]["transaction_state"] == "CompleteCommit",
             "CompleteCommit without the deleted topic's marker")
    assert read_committed(broker.bootstrap, "kept", 1, 1, wait_s=LIMIT_S) == [b"stays"]
