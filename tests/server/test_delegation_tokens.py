"""Delegation tokens (KIP-48) against a broker process: created, renewed, expired and described with our
admin client and kafkactl, and used to authenticate (SCRAM with ``tokenauth=true``) by our producer and
consumer, whose principal is then the token's owner under the ACL authorizer; Kafka's refusals (a
PLAINTEXT listener, a token asking for tokens, a stranger renewing, tokens disabled), expiry at the
controller's pass, the maximum lifetime, a restart, and a master key changed since.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from broker.client import (AclBinding, Admin, Consumer, DelegationToken, NewTopic, Producer, errors)
from broker.protocol import ApiKey, ErrorCode
from tests.security import AUTHORIZER
from tests.zookeeper import free_port

from .wire import Wire

pytestmark = pytest.mark.clients

USERS = ("admin", "alice", "bob", "carol")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")
KEY = "a master key every broker shares"


def _token_broker(broker_factory, **props):
    """PLAINTEXT (``bootstrap``) and SASL_PLAINTEXT with PLAIN and SCRAM (``sasl_bootstrap``), the authorizer
    with super user admin, and a master key (``props`` override; None removes)."""
    port = free_port()
    base = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
            "delegation.token.master.key": KEY}
    base.update(props)
    broker = broker_factory({k: v for k, v in base.items() if v is not None})
    broker.sasl_bootstrap = f"127.0.0.1:{port}"
    return broker


def _plain(broker, user: str) -> dict:
    return {"bootstrap_servers": broker.sasl_bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_username": user, "sasl_password": f"{user}-secret"}


def _with_token(broker, token: DelegationToken, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {"bootstrap_servers": broker.sasl_bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_jaas_config": token.jaas_config()}


def _grant_alice(broker, topic: str, group: str) -> None:
    with Admin(**_plain(broker, "admin")) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.create_acls([AclBinding("topic", topic, "literal", "User:alice", "*", op, "allow")
                           for op in ("write", "read", "describe")]
                          + [AclBinding("group", group, "literal", "User:alice", "*", "read", "allow")])


def _produce_consume(conf: dict, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    with Producer(conf, acks="all") as producer:
        for value in values:
            producer.send(topic, value)
        producer.flush(30)
    got = []
    with Consumer(conf, group_id=group, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(timeout_ms=500))
    return got


def _refused(conf: dict) -> errors.AuthenticationError:
    with pytest.raises(errors.AuthenticationError) as caught:
        Admin(conf).close()
    return caught.value


def test_a_token_authenticates_as_its_owner(broker_factory):
    broker = _token_broker(broker_factory)
    _grant_alice(broker, "orders", "billing")
    with Admin(**_plain(broker, "alice")) as alice:
        token = alice.create_delegation_token(renewers=["User:bob"])
    assert token.owner == "User:alice" and token.renewers == ("User:bob",)
    assert len(token.token_id) == 22 and len(token.hmac) == 64  # a UUID in URL-safe base64; HMAC-SHA512
    now = time.time() * 1000
    assert abs(token.issue_timestamp_ms - now) < 60_000
    assert token.expiry_timestamp_ms == token.issue_timestamp_ms + 24 * 3600 * 1000  # Kafka's defaults
    assert token.max_timestamp_ms == token.issue_timestamp_ms + 7 * 24 * 3600 * 1000
    values = [b"record-%d" % i for i in range(50)]
    # the ACLs name alice only: the token's connections are hers, with either SCRAM mechanism
    assert _produce_consume(_with_token(broker, token, "SCRAM-SHA-512"), "orders", "billing", values) == values
    assert _produce_consume(_with_token(broker, token, "SCRAM-SHA-256"), "orders", "billing", []) == []
    with Admin(_with_token(broker, token)) as as_token:
        assert as_token.describe_topics(["orders"])["orders"].partitions
        # a token cannot make tokens, nor renew, expire or describe them
        for call in (lambda: as_token.create_delegation_token(),
                     lambda: as_token.renew_delegation_token(token.hmac),
                     lambda: as_token.expire_delegation_token(token.hmac),
                     lambda: as_token.describe_delegation_tokens()):
            with pytest.raises(errors.BrokerResponseError) as caught:
                call()
            assert caught.value.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    # a wrong HMAC, or an id no token has, is refused like a wrong password
    forged = DelegationToken(token.token_id, bytes(64), "User:alice", (), 0, 0, 0)
    assert _refused(_with_token(broker, forged)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    unknown = DelegationToken("AAAAAAAAAAAAAAAAAAAAAA", token.hmac, "User:alice", (), 0, 0, 0)
    assert _refused(_with_token(broker, unknown)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    # the token id without tokenauth is a user name no SCRAM credential has
    plain_scram = {**_with_token(broker, token), "sasl_jaas_config": None, "sasl_username": token.token_id,
                   "sasl_password": token.hmac_base64}
    assert _refused(plain_scram).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "delegation token" in broker.stderr_text()


def test_renew_expire_and_describe_follow_kafkas_rules(broker_factory):
    broker = _token_broker(broker_factory, **{"delegation.token.max.lifetime.ms": 3_600_000,
                                              "delegation.token.expiry.time.ms": 600_000})
    with Admin(**_plain(broker, "alice")) as alice, Admin(**_plain(broker, "bob")) as bob, \
            Admin(**_plain(broker, "carol")) as carol, Admin(**_plain(broker, "admin")) as admin:
        mine = alice.create_delegation_token(renewers=["User:bob"], max_lifetime_ms=10**12)
        assert mine.max_timestamp_ms == mine.issue_timestamp_ms + 3_600_000  # capped at the broker's maximum
        assert mine.expiry_timestamp_ms == mine.issue_timestamp_ms + 600_000
        short = alice.create_delegation_token(max_lifetime_ms=300_000)
        assert short.expiry_timestamp_ms == short.max_timestamp_ms == short.issue_timestamp_ms + 300_000
        bobs = bob.create_delegation_token()
        # renewing: owner and renewers only; never past the maximum; -1 takes expiry.time.ms
        before = int(time.time() * 1000)  # the broker's clock in whole ms, as it stamps tokens
        expiry = bob.renew_delegation_token(mine.hmac, 120_000)
        assert before + 120_000 <= expiry <= time.time() * 1000 + 120_000
        assert alice.renew_delegation_token(mine.hmac, 10**12) == mine.max_timestamp_ms
        assert before + 600_000 <= alice.renew_delegation_token(mine.hmac) <= time.time() * 1000 + 600_000
        for call, code in ((lambda: carol.renew_delegation_token(mine.hmac), "DELEGATION_TOKEN_OWNER_MISMATCH"),
                           (lambda: carol.expire_delegation_token(mine.hmac), "DELEGATION_TOKEN_OWNER_MISMATCH"),
                           (lambda: alice.renew_delegation_token(b"\0" * 64), "DELEGATION_TOKEN_NOT_FOUND"),
                           (lambda: alice.create_delegation_token(renewers=["Group:ops"]),
                            "INVALID_PRINCIPAL_TYPE")):
            with pytest.raises(errors.BrokerResponseError) as caught:
                call()
            assert caught.value.error_code == getattr(ErrorCode, code)
        with pytest.raises(errors.ConfigError, match="a renewer is a principal"):
            alice.create_delegation_token(renewers=["bob"])
        # describing: owners and renewers see a token; others only with DESCRIBE on it
        ids = lambda tokens: [t.token_id for t in tokens]  # noqa: E731
        assert ids(alice.describe_delegation_tokens()) == [mine.token_id, short.token_id]
        assert ids(bob.describe_delegation_tokens()) == [mine.token_id, bobs.token_id]
        assert ids(bob.describe_delegation_tokens(owners=["User:bob"])) == [mine.token_id, bobs.token_id]
        assert ids(alice.describe_delegation_tokens(owners=["User:bob"])) == [mine.token_id]
        assert alice.describe_delegation_tokens(owners=[]) == []
        assert carol.describe_delegation_tokens() == []
        assert ids(admin.describe_delegation_tokens()) == [mine.token_id, short.token_id, bobs.token_id]
        admin.create_acls([AclBinding("delegation_token", short.token_id, "literal", "User:carol", "*",
                                      "describe", "allow")])
        deadline = time.monotonic() + 10
        while not carol.describe_delegation_tokens() and time.monotonic() < deadline:
            time.sleep(0.1)
        (seen,) = carol.describe_delegation_tokens()
        assert (seen.token_id, seen.hmac, seen.owner, seen.renewers) == (short.token_id, short.hmac, "User:alice", ())
        described = {t.token_id: t for t in alice.describe_delegation_tokens()}[mine.token_id]
        assert (described.hmac, described.renewers, described.max_timestamp_ms) == (
            mine.hmac, ("User:bob",), mine.max_timestamp_ms)
        # a later expiry by the renewer, then at once by the owner: the token is gone
        soon = bob.expire_delegation_token(mine.hmac, 60_000)
        assert soon <= time.time() * 1000 + 60_000
        _produce_ok(broker, mine)
        alice.expire_delegation_token(mine.hmac)
        assert mine.token_id not in ids(alice.describe_delegation_tokens())
        assert _refused(_with_token(broker, mine)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        with pytest.raises(errors.BrokerResponseError) as caught:
            bob.renew_delegation_token(mine.hmac)
        assert caught.value.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def _produce_ok(broker, token: DelegationToken) -> None:
    with Admin(_with_token(broker, token)) as admin:
        assert admin.describe_cluster().brokers


def test_an_expired_token_is_refused_then_removed_by_the_controller(broker_factory):
    broker = _token_broker(broker_factory, **{"delegation.token.expiry.time.ms": 1500,
                                              "delegation.token.expiry.check.interval.ms": 1000})
    with Admin(**_plain(broker, "alice")) as alice:
        token = alice.create_delegation_token()
        _produce_ok(broker, token)
        time.sleep(max(0.0, token.expiry_timestamp_ms / 1000 - time.time()) + 0.2)
        # refused at once, before the controller's pass (Kafka would accept it until then)
        assert _refused(_with_token(broker, token)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        deadline = time.monotonic() + 15
        while alice.describe_delegation_tokens() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert alice.describe_delegation_tokens() == []
    assert f"Delegation token {token.token_id} of User:alice expired" in broker.stderr_text()


def test_refused_on_plaintext_and_without_a_master_key(broker_factory):
    broker = _token_broker(broker_factory, **{"delegation.token.master.key": None})
    with Admin(bootstrap_servers=broker.bootstrap) as anonymous, Admin(**_plain(broker, "alice")) as alice:
        for admin, code in ((anonymous, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
                            (alice, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)):
            for call in (lambda: admin.create_delegation_token(), lambda: admin.renew_delegation_token(b"x"),
                         lambda: admin.expire_delegation_token(b"x"), lambda: admin.describe_delegation_tokens()):
                with pytest.raises(errors.BrokerResponseError) as caught:
                    call()
                assert caught.value.error_code == code


def test_every_version_on_the_wire(broker_factory):
    broker = _token_broker(broker_factory)
    with Admin(**_plain(broker, "alice")) as alice:
        token = alice.create_delegation_token()
    with Wire(broker.bootstrap) as wire:  # PLAINTEXT: Kafka's answer, in every version's layout
        for version in (0, 1, 2):
            resp = wire.call(ApiKey.CREATE_DELEGATION_TOKEN, version, {"renewers": [], "max_lifetime_ms": -1})
            assert (resp["error_code"], resp["principal_type"], resp["principal_name"], resp["token_id"]) == (
                ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "User", "ANONYMOUS", "")
            resp = wire.call(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, {"owners": None})
            assert (resp["error_code"], resp["tokens"]) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
            for api, period in ((ApiKey.RENEW_DELEGATION_TOKEN, "renew_period_ms"),
                                (ApiKey.EXPIRE_DELEGATION_TOKEN, "expiry_time_period_ms")):
                resp = wire.call(api, version, {"hmac": token.hmac, period: -1})
                assert (resp["error_code"], resp["expiry_timestamp_ms"]) == (
                    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
        versions = {k["api_key"]: (k["min_version"], k["max_version"])
                    for k in wire.call(ApiKey.API_VERSIONS, 0, {})["api_keys"]}
    assert [versions[k] for k in range(38, 42)] == [(0, 2)] * 4


def test_tokens_survive_a_restart_and_die_with_the_master_key(broker_factory):
    broker = _token_broker(broker_factory)
    with Admin(**_plain(broker, "alice")) as alice:
        token = alice.create_delegation_token()
    broker.restart()
    _produce_ok(broker, token)
    with Admin(**_plain(broker, "alice")) as alice:
        assert [t.token_id for t in alice.describe_delegation_tokens()] == [token.token_id]
    broker.stop()
    broker.props["delegation.token.master.key"] = "another key"
    broker.start()
    # the HMAC was derived from the old key: the token no longer authenticates, nor is it found by its HMAC
    assert _refused(_with_token(broker, token)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    with Admin(**_plain(broker, "alice")) as alice:
        with pytest.raises(errors.BrokerResponseError) as caught:
            alice.renew_delegation_token(token.hmac)
        assert caught.value.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        (listed,) = alice.describe_delegation_tokens()
        assert listed.token_id == token.token_id and listed.hmac != token.hmac


def test_client_settings_for_tokens_are_checked():
    with pytest.raises(errors.ConfigError, match="SCRAM-SHA-256 or SCRAM-SHA-512, not PLAIN"):
        Admin(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
              sasl_jaas_config='org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
                               'password="b" tokenauth=true;')


def _kafkactl(broker, config: dict, *argv: str, stdin: str | None = None, tmp_path=None) -> subprocess.CompletedProcess:
    props = tmp_path / f"client-{abs(hash(tuple(sorted(config.items()))))}.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    return subprocess.run([sys.executable, "-m", "kafkactl", "--bootstrap-server", broker.sasl_bootstrap,
                           "--command-config", str(props), *argv], input=stdin, capture_output=True, text=True,
                          timeout=120)


def test_kafkactl_delegation_tokens(broker_factory, tmp_path):
    broker = _token_broker(broker_factory)
    alice = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
             "sasl.password": "alice-secret"}
    carol = {**alice, "sasl.username": "carol", "sasl.password": "carol-secret"}
    run = lambda config, *argv, stdin=None: _kafkactl(broker, config, *argv, stdin=stdin, tmp_path=tmp_path)  # noqa: E731
    res = run(alice, "delegation-tokens", "create", "--renewer-principal", "User:bob",
              "--max-life-time-period", "3600000", "-o", "json")
    assert res.returncode == 0, res.stderr
    token = json.loads(res.stdout)
    assert token["owner"] == "User:alice" and token["renewers"] == ["User:bob"]
    assert token["max_timestamp_ms"] == token["issue_timestamp_ms"] + 3_600_000
    # the JAAS line it prints is a client setting that works, here through kafkactl's --command-config
    as_token = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": token["jaas_config"]}
    res = run(as_token, "topics", "list")
    assert res.returncode == 0, res.stderr
    res = run(as_token, "delegation-tokens", "create")
    assert res.returncode == 1 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in res.stderr, res.stderr
    # the table, with the HMAC kafkactl prints and reads back
    res = run(alice, "delegation-tokens", "describe")
    assert res.returncode == 0 and token["token_id"] in res.stdout and token["hmac"] in res.stdout, res.stderr
    assert run(carol, "delegation-tokens", "describe").stdout.strip() == "no delegation tokens"
    hmac_file = tmp_path / "hmac"
    hmac_file.write_text(token["hmac"] + "\n")
    res = run(alice, "delegation-tokens", "renew", "--hmac-file", str(hmac_file), "--renew-time-period", "60000",
              "-o", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["expiry_timestamp_ms"] <= time.time() * 1000 + 60_000
    # refusals, each with its exit code and one line
    res = run(carol, "delegation-tokens", "renew", "--hmac-stdin", stdin=token["hmac"])
    assert res.returncode == 1 and "DELEGATION_TOKEN_OWNER_MISMATCH" in res.stderr, res.stderr
    res = run(alice, "delegation-tokens", "renew", "--hmac", token["hmac"])
    assert res.returncode == 2 and "no hmac on its command line" in res.stderr, res.stderr
    res = run(alice, "delegation-tokens", "renew", "--hmac-stdin", stdin="not base64!")
    assert res.returncode == 2 and "not base64" in res.stderr, res.stderr
    res = run(alice, "delegation-tokens", "create", "--renewer-principal", "bob")
    assert res.returncode == 2 and "a renewer is a principal" in res.stderr, res.stderr
    res = run(alice, "delegation-tokens", "expire", "--hmac-stdin", stdin=token["hmac"])
    assert res.returncode == 0 and res.stdout.startswith("token expired"), res.stderr
    res = run(alice, "delegation-tokens", "renew", "--hmac-file", str(hmac_file))
    assert res.returncode == 2 and "DELEGATION_TOKEN_NOT_FOUND" in res.stderr, res.stderr
    res = run(as_token, "topics", "list")
    assert res.returncode == 1 and "cannot authenticate" in res.stderr, res.stderr


def test_a_tokens_session_ends_with_the_token(broker_factory):
    """KIP-368: with connections.max.reauth.ms, SaslAuthenticate v1 gives a session no longer than the token
    has left (Kafka's CREDENTIAL_LIFETIME_MS for tokens); a password's session gets the full hour."""
    from scramp import ScramClient

    broker = _token_broker(broker_factory, **{"connections.max.reauth.ms": 3_600_000})
    with Admin(**_plain(broker, "alice")) as alice:
        token = alice.create_delegation_token(max_lifetime_ms=20_000)
    with Wire(broker.sasl_bootstrap) as wire:
        assert wire.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        client = ScramClient(["SCRAM-SHA-256"], token.token_id, token.hmac_base64)
        first = client.get_client_first() + ",tokenauth=true"
        client.client_first_bare += ",tokenauth=true"
        resp = wire.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": first.encode()})
        assert resp["error_code"] == 0, resp
        client.set_server_first(bytes(resp["auth_bytes"]).decode())
        resp = wire.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": client.get_client_final().encode()})
        assert resp["error_code"] == 0, resp
        client.set_server_final(bytes(resp["auth_bytes"]).decode())  # the broker proved it knows the HMAC too
        left = token.expiry_timestamp_ms - time.time() * 1000
        assert 0 < resp["session_lifetime_ms"] <= left + 1000
    with Wire(broker.sasl_bootstrap) as wire:
        assert wire.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        resp = wire.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert (resp["error_code"], resp["session_lifetime_ms"]) == (0, 3_600_000)


def test_the_readme_example_runs_as_written(broker_factory, tmp_path):
    """The README's delegation token commands, each run by bash as written (the broker's address for
    ``broker1.example.com:9094``, ``alice.properties`` a PLAIN client file, kafkactl from this virtualenv)."""
    import os
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = next(b for b in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
                 if "delegation-tokens create" in b)
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    broker = _token_broker(broker_factory)
    (tmp_path / "alice.properties").write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                                               "sasl.username=alice\nsasl.password=alice-secret\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    outputs = []
    for line in lines:
        res = subprocess.run(["bash", "-o", "pipefail", "-c", line.replace("broker1.example.com:9094",
                                                                           broker.sasl_bootstrap)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, (line, res.stderr)
        outputs.append(res.stdout)
    token = json.loads((tmp_path / "token.json").read_text())
    assert token["owner"] == "User:alice" and token["renewers"] == ["User:scheduler"]
    assert outputs[1].strip() == token["jaas_config"] and "tokenauth=true" in outputs[1]
    assert outputs[2].startswith("token renewed: expiry ")
    assert token["token_id"] in outputs[3] and "User:scheduler" in outputs[3]
    assert outputs[4].startswith("token expired")
    with Admin(**_plain(broker, "alice")) as alice:
        assert alice.describe_delegation_tokens() == []
