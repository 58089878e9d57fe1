"""Three brokers on ZooKeeper with Kafka 2.7's ACL authorizer on.

With the brokers' own principal in ``super.users`` (they talk to each other over ``INTERNAL``, a
SASL_PLAINTEXT listener, as ``User:broker``), replication, leader election after a SIGKILL of a leader and a
consumer group work for a client allowed just what it needs. With the brokers' principal not a super user
(PLAINTEXT between brokers: ``User:ANONYMOUS``), the other brokers refuse what the controller sends them
(LeaderAndIsr, UpdateMetadata: CLUSTER_AUTHORIZATION_FAILED, one WARNING line each, no loop), so their
replicas never fetch and the ISR shrinks to the controller alone; the brokers keep running.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.cluster.conftest import WAIT_S, failover_keeps_every_record, wait_until
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="broker" password="broker-secret" user_broker="broker-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
REFUSED = "refused with CLUSTER_AUTHORIZATION_FAILED: principal User:ANONYMOUS may not CLUSTER_ACTION"


def _conf(bootstrap: str, user: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret", "log_level": 0}


def _allow(admin: AdminClient, principal: str, resource_type: ResourceType, name: str, *operations: AclOperation,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> list[AclBinding]:
    bindings = [AclBinding(resource_type, name, pattern, principal, "*", op, AclPermissionType.ALLOW)
                for op in operations]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=WAIT_S)
    return bindings


def _everywhere(ports: dict[int, int], count: int) -> None:
    """Wait until every broker holds ``count`` ACLs (each learns of a change through ZooKeeper): DescribeAcls
    to each broker on its own connection (an AdminClient picks any broker)."""
    from broker.client._connection import BrokerConnection
    from broker.client._sasl import SaslSettings
    from broker.protocol import ApiKey

    async def held(port: int) -> int:
        conn = BrokerConnection("127.0.0.1", port, sasl=SaslSettings("PLAIN", "admin", "admin-secret"))
        await conn.connect()
        try:
            answer = await conn.request(ApiKey.DESCRIBE_ACLS, {
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}, version=1)
        finally:
            conn.close()
        return sum(len(r["acls"]) for r in answer["resources"])

    for broker_id, port in ports.items():
        wait_until(lambda: asyncio.run(held(port)) == count, f"broker {broker_id} to hold {count} ACLs")


def test_replication_failover_and_groups_with_the_brokers_as_super_users(cluster_factory):
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    cluster = cluster_factory(3, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin;User:broker",
        "min.insync.replicas": 2,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port}"}
                   for b, port in ports.items()})
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    admin = AdminClient(_conf(bootstrap, "admin"))
    granted = []

    def grant(principal: str, resource_type: ResourceType, name: str, *operations: AclOperation,
              pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> None:
        granted.extend(_allow(admin, principal, resource_type, name, *operations, pattern=pattern))

    # the harness reads metadata over PLAINTEXT (User:ANONYMOUS): let it see the topics
    grant("User:ANONYMOUS", ResourceType.TOPIC, "*", AclOperation.DESCRIBE)
    # alice produces idempotently and consumes in a group: what she needs, no more
    grant("User:alice", ResourceType.TOPIC, "guarded", AclOperation.READ, AclOperation.WRITE,
          pattern=ResourcePatternType.PREFIXED)  # "guarded" and "guarded-grouped"
    grant("User:alice", ResourceType.GROUP, "guarded-group", AclOperation.READ)
    grant("User:alice", ResourceType.GROUP, "guarded-reader", AclOperation.READ)
    grant("User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
    _everywhere(ports, len(granted))  # changes in quick succession: each broker ends up with all of them

    for future in admin.create_topics([NewTopic("guarded", 1, 3), NewTopic("guarded-grouped", 1, 3)],
                                      request_timeout=30).values():
        future.result(WAIT_S)
    for topic in ("guarded", "guarded-grouped"):
        cluster.wait_for_leader(topic, 0)
        cluster.wait_for_isr(topic, 0, [1, 2, 3])  # followers fetch as User:broker: allowed
    alice = _conf(bootstrap, "alice")

    # a consumer group (its coordinator on any broker) reads and commits
    producer = Producer({**alice, "acks": "all", "enable.idempotence": True})
    for i in range(50):
        producer.produce("guarded-grouped", b"g-%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({**alice, "group.id": "guarded-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["guarded-grouped"])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < 50 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        assert got == [b"g-%d" % i for i in range(50)]
        assert [tp.offset for tp in consumer.commit(asynchronous=False)] == [50]
    finally:
        consumer.close()

    # SIGKILL the leader: a follower takes over with every acknowledged record
    leader = failover_keeps_every_record(cluster, "guarded", {**alice, "group.id": "unused"}, count=1000)
    cluster.start(leader)
    cluster.wait_for_isr("guarded", 0, [1, 2, 3])  # the restarted broker catches up as User:broker
    for broker_id in ports:
        text = cluster.broker(broker_id).stderr_text()
        assert "CLUSTER_AUTHORIZATION_FAILED" not in text, broker_id


def test_brokers_whose_principal_is_not_a_super_user_are_refused_with_a_clear_log_line(cluster_factory):
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    cluster = cluster_factory(3, props={
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",  # not User:ANONYMOUS, the principal of the PLAINTEXT inter-broker listener
        "replica.lag.time.max.ms": 2000,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}"}
                   for b, port in ports.items()})
    controller = wait_until(cluster.controller_id, "a controller")
    others = [b for b in cluster.ids if b != controller]
    # the controller's own broker takes what its controller says (no connection); the others refuse it
    admin = AdminClient(_conf(f"127.0.0.1:{ports[controller]}", "admin"))
    topic = NewTopic("shrinking", 1, replica_assignment=[[controller, *others]])
    admin.create_topics([topic], request_timeout=30)["shrinking"].result(WAIT_S)
    wait_until(lambda: (cluster.partition_state("shrinking", 0) or {}).get("leader") == controller,
               "the controller to lead shrinking-0")
    # the followers never learn they follow (LeaderAndIsr refused), so never fetch: out of the ISR
    cluster.wait_for_isr("shrinking", 0, [controller])
    for broker_id in others:
        wait_until(lambda: REFUSED in cluster.broker(broker_id).stderr_text(),
                   f"broker {broker_id} to log the refusal")
        assert not (cluster.broker(broker_id).data_dir / "shrinking-0").exists()
    # the leader still takes writes (acks=1: min.insync.replicas is 1)
    producer = Producer({**_conf(f"127.0.0.1:{ports[controller]}", "admin"), "acks": 1})
    producer.produce("shrinking", b"x")
    assert producer.flush(30) == 0

    # one line per refused request, not a loop: the count settles
    def refusals() -> int:
        return sum(cluster.broker(b).stderr_text().count(REFUSED) for b in others)

    before = refusals()
    time.sleep(5)
    after = refusals()
    assert after - before <= 4, (before, after)
    for broker_id in cluster.ids:
        assert cluster.broker(broker_id).running()
        assert "Traceback" not in cluster.broker(broker_id).stderr_text()
