"""Delegation tokens across a cluster on ZooKeeper: a token created through one broker authenticates at
another and is expired through a third, its node is Kafka 2.7's (``/delegation_token/tokens/<id>``), a
node written as Kafka 3.3 writes it (version 3, with ``tokenRequester``) is served, and the controller
removes expired tokens. Each broker has the harness's PLAINTEXT listener and a SASL_PLAINTEXT one of its
own with PLAIN and SCRAM.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest

from broker.client import Admin, DelegationToken, errors
from broker.protocol import ErrorCode
from tests.cluster.conftest import wait_until
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

KEY = "the cluster's master key"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')


def _sasl(port: int, **auth) -> dict:
    return {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SASL_PLAINTEXT", **auth}


def _plain(port: int, user: str) -> dict:
    return _sasl(port, sasl_mechanism="PLAIN", sasl_username=user, sasl_password=f"{user}-secret")


def _token(port: int, token: DelegationToken, mechanism: str = "SCRAM-SHA-256") -> dict:
    return _sasl(port, sasl_mechanism=mechanism, sasl_jaas_config=token.jaas_config())


def _authenticates(port: int, token: DelegationToken) -> bool:
    try:
        with Admin(_token(port, token)) as admin:
            admin.describe_cluster()
        return True
    except errors.AuthenticationError as exc:
        assert exc.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        return False


def test_tokens_are_shared_by_every_broker(cluster_factory):
    ports = {b: free_port() for b in (1, 2, 3)}
    cluster = cluster_factory(3, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "delegation.token.master.key": KEY,
        "delegation.token.expiry.check.interval.ms": 1000,
    }, per_broker={b: {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}"}
                   for b, port in ports.items()})
    with Admin(_plain(ports[1], "alice")) as alice:
        token = alice.create_delegation_token(renewers=["User:bob"])
        short = alice.create_delegation_token(max_lifetime_ms=2000)
    # Kafka 2.7's node, principals as its Sanitizer writes them; no HMAC stored
    stored = cluster._json(f"/delegation_token/tokens/{token.token_id}")
    assert stored == {"version": 1, "owner": "User%3Aalice", "renewers": ["User%3Abob"],
                      "issueTimestamp": token.issue_timestamp_ms, "maxTimestamp": token.max_timestamp_ms,
                      "expiryTimestamp": token.expiry_timestamp_ms, "tokenId": token.token_id}
    for b in (1, 2, 3):
        assert _authenticates(ports[b], token), f"broker {b}"
    with Admin(_plain(ports[2], "bob")) as bob:
        assert bob.renew_delegation_token(token.hmac, 60_000) <= time.time() * 1000 + 60_000
    with Admin(_plain(ports[3], "alice")) as alice:
        described = {t.token_id: t for t in alice.describe_delegation_tokens()}
        assert described[token.token_id].expiry_timestamp_ms < token.expiry_timestamp_ms  # bob's renewal
        alice.expire_delegation_token(token.hmac)
    for b in (1, 2, 3):
        assert not _authenticates(ports[b], token), f"broker {b}"

    # a node as Kafka 3.3 writes it (version 3, the token requester), made with the same master key
    token_id = "KafkaWroteThisToken123"
    now = int(time.time() * 1000)
    cluster.zk.create(f"/delegation_token/tokens/{token_id}", json.dumps({
        "version": 3, "owner": "User%3Abob", "tokenRequester": "User%3Aalice", "renewers": [],
        "issueTimestamp": now, "maxTimestamp": now + 3_600_000, "expiryTimestamp": now + 3_600_000,
        "tokenId": token_id}).encode())
    mac = hmac.new(KEY.encode(), token_id.encode(), hashlib.sha512).digest()
    kafkas = DelegationToken(token_id, mac, "User:bob", (), now, now + 3_600_000, now + 3_600_000)
    assert _authenticates(ports[2], kafkas)
    with Admin(_plain(ports[1], "bob")) as bob:
        (seen,) = [t for t in bob.describe_delegation_tokens() if t.token_id == token_id]
        assert (seen.owner, base64.b64encode(seen.hmac)) == ("User:bob", base64.b64encode(mac))

    # the controller's pass removes the short-lived token from the store
    wait_until(lambda: not cluster.zk.exists(f"/delegation_token/tokens/{short.token_id}"),
               "the controller to remove the expired token", limit=30)
    controller = cluster.controller_id()
    assert f"Delegation token {short.token_id} of User:alice expired" in cluster.broker(controller).stderr_text()
