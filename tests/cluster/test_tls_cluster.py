"""A cluster whose brokers talk to each other over TLS (``inter.broker.listener.name`` an SSL
listener, with client certificates required), and clients that reach it over TLS.

Each broker has a PLAINTEXT listener (the harness's) and ``INTERNAL``, an SSL listener that is also
the inter-broker one: followers fetch, the controller sends its requests and the transaction
coordinator its markers over it. A follower that could not connect there would never rejoin the ISR.
"""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client import ConfigResource
from tests.cluster.conftest import WAIT_S, failover_keeps_every_record, wait_until
from tests.pki import make_pki
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients


def _established_ports(pid: int) -> set[int]:
    """Remote ports of the established TCP connections of process ``pid`` (``ss``)."""
    out = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True, text=True,
                         check=True).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if f"pid={pid}," in line}


def test_metadata_on_a_listener_the_leader_lacks(cluster_factory):
    """Kafka 2.7's answer when a partition's leader has no listener of the request's name: the
    brokers without it are left out, and the partition has no leader for that client."""
    from broker.client._connection import BrokerConnection

    extra = free_port()
    cluster = cluster_factory(2, props={"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT"},
                              per_broker={1: {"listeners": f"PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:{extra}"}})
    cluster.create_topic("on-two", assignment={0: [2, 1], 1: [1, 2]}, replication_factor=None)

    async def metadata(version: int) -> dict:
        conn = BrokerConnection("127.0.0.1", extra, request_timeout_ms=10000)
        await conn.connect()
        try:
            return await conn.request(3, {"topics": [{"name": "on-two"}], "allow_auto_topic_creation": False,
                                          "include_cluster_authorized_operations": False,
                                          "include_topic_authorized_operations": False}, version=version)
        finally:
            conn.close()

    import asyncio

    for version, code in ((9, 72), (5, 5)):  # LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE below
        response = asyncio.run(metadata(version))
        assert [(b["node_id"], b["port"]) for b in response["brokers"]] == [(1, extra)]
        partitions = {p["partition_index"]: p for p in response["topics"][0]["partitions"]}
        assert (partitions[0]["error_code"], partitions[0]["leader_id"]) == (code, -1)
        assert (partitions[1]["error_code"], partitions[1]["leader_id"]) == (0, 1)


def test_replication_and_failover_over_tls_between_brokers(cluster_factory, tmp_path):
    pki = make_pki(tmp_path)
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    cluster = cluster_factory(3, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(pki["server"]),
        "ssl.truststore.location": str(pki["ca"]),
        "ssl.client.auth": "required",
        "min.insync.replicas": 2,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port}"}
                   for b, port in ports.items()})
    tls = {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports.values()), "security.protocol": "SSL",
           "ssl.ca.location": str(pki["ca"]), "ssl.certificate.location": str(pki["client_cert"]),
           "ssl.key.location": str(pki["client_key"]), "log_level": 0}

    admin = AdminClient(tls)
    metadata = admin.list_topics(timeout=10)
    assert sorted((b.id, b.port) for b in metadata.brokers.values()) == sorted(ports.items())
    admin.create_topics([NewTopic("tls-replicated", 1, 3)], request_timeout=30)["tls-replicated"].result(WAIT_S)
    cluster.wait_for_leader("tls-replicated", 0)
    cluster.wait_for_isr("tls-replicated", 0, [1, 2, 3])  # both followers fetch over TLS
    leader = cluster.leader("tls-replicated", 0)
    # the followers' fetch connections go to the leader's INTERNAL (TLS) port, none to its PLAINTEXT one
    for follower in set(ports) - {leader}:
        # waited for: a fetcher between a failed request and its reconnect has no connection for its backoff
        def connected(pid=cluster.broker(follower).pid):
            found = _established_ports(pid)
            return found if ports[leader] in found else None

        peers = wait_until(connected, f"broker {follower}'s fetch connection to the leader's INTERNAL port")
        assert cluster.broker(leader).port not in peers, peers

    # the controller reaches the others over TLS to elect a new leader; the followers had the records over TLS
    leader = failover_keeps_every_record(cluster, "tls-replicated", tls)
    cluster.start(leader)
    cluster.wait_for_isr("tls-replicated", 0, [1, 2, 3])  # the restarted broker catches up over TLS


def test_a_certificate_authority_migrated_on_running_brokers(cluster_factory, tmp_path):
    """Between brokers over TLS with client certificates required, a move to a new CA with no restart of the
    broker that must trust it: every broker's trust store becomes both CAs (dynamic
    ``listener.name.internal.ssl.truststore.location``), then broker 1's key store a certificate of the new CA
    with the same identity. Broker 2's own connections to broker 1 must then trust the new CA, which it took
    while running: its follower fetches from broker 1 again, and the controller's requests reach it."""
    import trustme

    from broker.client import Admin

    old_ca, new_ca = trustme.CA(organization_name="old CA"), trustme.CA(organization_name="new CA")
    identity = {"common_name": "broker", "organization_name": "kafkapy", "organization_unit_name": "brokers"}
    files = {name: tmp_path / f"{name}.pem" for name in ("old-ca", "both-cas", "old-cert", "new-cert")}
    old_ca.cert_pem.write_to_path(str(files["old-ca"]))
    files["both-cas"].write_bytes(old_ca.cert_pem.bytes() + new_ca.cert_pem.bytes())
    old_ca.issue_cert("127.0.0.1", "localhost", **identity).private_key_and_cert_chain_pem.write_to_path(
        str(files["old-cert"]))
    new_ca.issue_cert("127.0.0.1", "localhost", **identity).private_key_and_cert_chain_pem.write_to_path(
        str(files["new-cert"]))
    ports = {broker_id: free_port() for broker_id in (1, 2)}
    cluster = cluster_factory(2, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(files["old-cert"]),
        "ssl.truststore.location": str(files["old-ca"]),
        "ssl.client.auth": "required",
        "auto.leader.rebalance.enable": False,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{port}"}
                   for b, port in ports.items()})
    cluster.create_topic("ca-move", assignment={0: [1, 2]}, replication_factor=None, config={"min.insync.replicas": "2"})
    cluster.wait_for_isr("ca-move", 0, [1, 2])

    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        for b in (1, 2):
            admin.incremental_alter_configs({ConfigResource("broker", str(b)): {
                "listener.name.internal.ssl.truststore.location": str(files["both-cas"])}})
        admin.incremental_alter_configs({ConfigResource("broker", "1"): {
            "listener.name.internal.ssl.keystore.location": str(files["new-cert"])}})
    # broker 1 restarts with its dynamic stores; its partition moves to broker 2, whose fetcher and controller
    # connections to broker 1 are new ones, made with what broker 2 took in while running
    cluster.restart(1)
    cluster.wait_for_isr("ca-move", 0, [1, 2])
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        assert admin.elect_leaders("preferred", [("ca-move", 0)])[("ca-move", 0)][0] in (0, 84)  # 84: already
    cluster.wait_for_leader("ca-move", 0)
    assert cluster.leader("ca-move", 0) == 1
    # acks=all with min.insync.replicas=2: each write is answered only once broker 2 fetched it from broker 1
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 30000,
                         "log_level": 0})
    failed = []
    for i in range(20):
        producer.produce("ca-move", b"%d" % i, on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(60) == 0 and not failed, failed
    assert sorted(cluster.partition_state("ca-move", 0)["isr"]) == [1, 2]
