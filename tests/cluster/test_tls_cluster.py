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
