"""``kafkactl quotas`` against our broker: set, list and remove as a user types them, for users, client ids,
both and the default entities; the filters; table, JSON and YAML output; ``--validate-only``; bad input
(exit 2, before connecting); a principal without the cluster's ACLs (exit 1); no cluster (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from broker.client import Admin, ClientQuotaEntity
from tests.kafkactl.conftest import Ctl, one_line_error
from tests.security import acl_broker

UNREACHABLE = "127.0.0.1:1"  # refusals must come before any connection attempt


def _table(res) -> list[list[str]]:
    assert res.returncode == 0, res.stderr
    return [line.split() for line in res.stdout.splitlines()]


def _ok(res) -> str:
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_set_list_and_remove(ctl: Ctl, broker) -> None:
    assert _ok(ctl("quotas", "list")) == "no client quotas\n"
    assert ctl.json("quotas", "list") == []

    assert _ok(ctl("quotas", "set", "--user", "alice", "--producer-byte-rate", "1048576", "--consumer-byte-rate",
                   "2097152")) == "set producer_byte_rate=1048576, consumer_byte_rate=2097152 for user 'alice'\n"
    assert _ok(ctl("quotas", "set", "--user-default", "--add-config", "request_percentage=50,consumer_byte_rate=1024")
               ) == "set consumer_byte_rate=1024, request_percentage=50.0 for default user\n"
    assert ctl.json("quotas", "set", "--client-id", "app", "--user", "alice", "--controller-mutation-rate", "2.5") == {
        "user": "alice", "client_id": "app", "ip": None, "set": {"controller_mutation_rate": 2.5}, "validate_only": False}
    assert _ok(ctl("quotas", "set", "--client-id-default", "--request-percentage", "12.5", "--add-config",
                   "producer-byte-rate=4096")
               ) == "set producer_byte_rate=4096, request_percentage=12.5 for default client id\n"
    assert _ok(ctl("quotas", "set", "--user-default", "--client-id-default", "--producer-byte-rate", "8192")
               ) == "set producer_byte_rate=8192 for default user, default client id\n"

    assert _table(ctl("quotas", "list")) == [
        ["USER", "CLIENT_ID", "IP", "QUOTAS"],
        ["-", "<default>", "-", "producer_byte_rate=4096,request_percentage=12.5"],
        ["<default>", "-", "-", "consumer_byte_rate=1024,request_percentage=50.0"],
        ["<default>", "<default>", "-", "producer_byte_rate=8192"],
        ["alice", "-", "-", "consumer_byte_rate=2097152,producer_byte_rate=1048576"],
        ["alice", "app", "-", "controller_mutation_rate=2.5"],
    ]
    listed = ctl.json("quotas", "list")
    assert listed[0] == {"user": None, "client_id": "<default>", "ip": None,
                         "quotas": {"producer_byte_rate": 4096, "request_percentage": 12.5}}
    assert listed[3] == {"user": "alice", "client_id": None, "ip": None,
                         "quotas": {"consumer_byte_rate": 2097152, "producer_byte_rate": 1048576}}
    # what the admin client sees is what kafkactl wrote
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.describe_client_quotas()[ClientQuotaEntity("alice", "app")] == {"controller_mutation_rate": 2.5}

    # filters, options in any order, global options after the command
    def users(*args: str) -> list[tuple]:
        return [(r["user"], r["client_id"]) for r in ctl.json("quotas", "list", *args)]

    assert users("--user", "alice") == [("alice", None), ("alice", "app")]
    assert users("--strict", "--user", "alice") == [("alice", None)]
    assert users("--user-default") == [("<default>", None), ("<default>", "<default>")]
    assert users("--user-default", "--client-id-default") == [("<default>", "<default>")]
    assert users("--client-id", "app") == [("alice", "app")]
    assert users("--client-id-any", "--strict") == [(None, "<default>")]
    assert users("--user-any", "--strict") == [("<default>", None), ("alice", None)]
    assert users("--user-any", "--client-id-any") == [("<default>", "<default>"), ("alice", "app")]
    assert users("--user", "nobody") == []
    assert _ok(ctl("quotas", "list", "--user", "nobody")) == "no client quotas\n"
    res = Ctl(None)("quotas", "list", "--user", "alice", "--strict", "-o", "yaml", "--bootstrap-server",
                    broker.bootstrap)
    assert yaml.safe_load(_ok(res)) == [{"user": "alice", "client_id": None, "ip": None, "quotas": {
        "consumer_byte_rate": 2097152, "producer_byte_rate": 1048576}}]

    # --validate-only: checked, nothing written
    assert _ok(ctl("quotas", "set", "--user", "alice", "--producer-byte-rate", "1", "--validate-only")
               ) == "valid, nothing written: would set producer_byte_rate=1 for user 'alice'\n"
    assert _ok(ctl("quotas", "remove", "--user", "alice", "--all", "--validate-only")
               ) == "valid, nothing written: would remove every quota of user 'alice'\n"
    assert users("--user", "alice", "--strict") == [("alice", None)]
    assert ctl.json("quotas", "list", "--user", "alice", "--strict")[0]["quotas"]["producer_byte_rate"] == 1048576

    # remove: some keys (repeated or a list), every key
    assert _ok(ctl("quotas", "remove", "--user", "alice", "--key", "consumer_byte_rate")
               ) == "removed consumer_byte_rate of user 'alice'\n"
    assert ctl.json("quotas", "remove", "--client-id-default", "--delete-config",
                    "request_percentage,producer_byte_rate") == {
        "user": None, "client_id": "<default>", "ip": None, "removed": ["producer_byte_rate", "request_percentage"],
        "validate_only": False}
    assert _ok(ctl("quotas", "remove", "--user", "alice", "--client-id", "app", "--all")
               ) == "removed every quota of user 'alice', client id 'app'\n"
    assert _ok(ctl("quotas", "remove", "--user", "alice", "--client-id", "app", "--key", "producer_byte_rate")
               ) == "removed producer_byte_rate of user 'alice', client id 'app'\n"  # not set: no error
    assert _table(ctl("quotas", "list")) == [
        ["USER", "CLIENT_ID", "IP", "QUOTAS"],
        ["<default>", "-", "-", "consumer_byte_rate=1024,request_percentage=50.0"],
        ["<default>", "<default>", "-", "producer_byte_rate=8192"],
        ["alice", "-", "-", "producer_byte_rate=1048576"],
    ]


@pytest.mark.parametrize("argv, says", [
    (["quotas", "set", "--producer-byte-rate", "1024"],
     "give the entity: --user NAME or --user-default, and/or --client-id ID or --client-id-default"),
    (["quotas", "set", "--user", "alice"],
     "give a quota: --producer-byte-rate, --consumer-byte-rate, --request-percentage, --controller-mutation-rate, "
     "--connection-creation-rate or --add-config KEY=VALUE"),
    (["quotas", "set", "--user", "alice", "--producer-byte-rate", "-1"],
     "Invalid value for '--producer-byte-rate': producer_byte_rate is a whole number of bytes per second above 0, "
     "not '-1'"),
    (["quotas", "set", "--user", "alice", "--consumer-byte-rate", "1.5"],
     "consumer_byte_rate is a whole number of bytes per second above 0, not '1.5'"),
    (["quotas", "set", "--user", "alice", "--request-percentage", "0"],
     "request_percentage is a number above 0, not '0' (remove the key to lift the quota)"),
    (["quotas", "set", "--user", "alice", "--controller-mutation-rate", "fast"],
     "controller_mutation_rate is a number above 0, not 'fast'"),
    (["quotas", "set", "--user", "alice", "--add-config", "producer_byte_rate=-5"],
     "kafkactl: producer_byte_rate is a whole number of bytes per second above 0, not '-5'"),
    (["quotas", "set", "--user", "alice", "--add-config", "produce_byte_rate=5"],
     "unknown quota key 'produce_byte_rate' (one of producer_byte_rate, consumer_byte_rate, request_percentage, "
     "controller_mutation_rate, connection_creation_rate)"),
    (["quotas", "set", "--user", "alice", "--add-config", "producer_byte_rate"],
     "bad --add-config entry 'producer_byte_rate': expected KEY=VALUE[,KEY=VALUE...]"),
    (["quotas", "set", "--user", "alice", "--add-config", "request_percentage=5", "--request-percentage", "6"],
     "request_percentage is given twice (--request-percentage and --add-config)"),
    (["quotas", "set", "--user", "alice", "--user-default", "--request-percentage", "6"],
     "give --user NAME or --user-default, not both"),
    (["quotas", "set", "--client-id", "", "--request-percentage", "6"], "the client id is empty"),
    (["quotas", "set", "--user", "<default>", "--request-percentage", "6"],
     "<default> is not a user: use --user-default"),
    (["quotas", "remove", "--user", "alice"], "give the quotas to remove: --key KEY"),
    (["quotas", "set", "--ip", "10.0.0.7", "--user", "alice", "--connection-creation-rate", "5"],
     "an IP address entity stands alone: --ip (or --ip-default) without --user or --client-id"),
    (["quotas", "set", "--ip", "10.0.0.7", "--producer-byte-rate", "5"],
     "producer_byte_rate: not a quota of an IP address (those: connection_creation_rate)"),
    (["quotas", "set", "--user", "alice", "--connection-creation-rate", "5"],
     "connection_creation_rate: not a quota of a user or client id (those: producer_byte_rate"),
    (["quotas", "set", "--ip-default", "--connection-creation-rate", "2.5"],
     "connection_creation_rate is a whole number of connections per second above 0, not '2.5'"),
    (["quotas", "remove", "--ip", "10.0.0.7", "--key", "request_percentage"],
     "request_percentage: not a quota of an IP address"),
    (["quotas", "remove", "--client-id", "app", "--key", "bytes"], "unknown quota key 'bytes'"),
    (["quotas", "remove", "--client-id", "app", "--key", "producer_byte_rate", "--all"],
     "give --key or --all, not both"),
    (["quotas", "remove", "--all"], "give the entity"),
    (["quotas", "list", "--client-id", "app", "--client-id-any"],
     "give one of --client-id NAME, --client-id-default, --client-id-any"),
])
def test_bad_input_is_one_line_before_connecting(argv: list[str], says: str) -> None:
    line = one_line_error(Ctl(UNREACHABLE)(*argv), 2)
    assert says in line, line


def test_no_cluster_is_exit_3() -> None:
    for argv in (["quotas", "list"], ["quotas", "set", "--user", "a", "--producer-byte-rate", "1"],
                 ["quotas", "remove", "--user", "a", "--all"]):
        line = one_line_error(Ctl(UNREACHABLE)(*argv), 3)
        assert line.startswith(f"kafkactl: cannot reach the cluster at {UNREACHABLE}: "), line


def test_a_principal_without_the_clusters_acls_is_refused(broker_factory, tmp_path: Path) -> None:
    broker = acl_broker(broker_factory)
    ctl = Ctl(broker.sasl_bootstrap)

    def config(user: str) -> tuple[str, str]:
        path = tmp_path / f"{user}.properties"
        path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\n"
                        f"sasl.password={user}-secret\n")
        return "--command-config", str(path)

    for argv in (["quotas", "list"], ["quotas", "set", "--user", "bob", "--producer-byte-rate", "1024"],
                 ["quotas", "remove", "--user", "bob", "--all"]):
        line = one_line_error(ctl(*config("alice"), *argv), 1)
        assert "CLUSTER_AUTHORIZATION_FAILED (31)" in line, line
    assert _ok(ctl(*config("admin"), "quotas", "set", "--user", "bob", "--producer-byte-rate", "1024")
               ) == "set producer_byte_rate=1024 for user 'bob'\n"
    assert ctl.json(*config("admin"), "quotas", "list") == [
        {"user": "bob", "client_id": None, "ip": None, "quotas": {"producer_byte_rate": 1024}}]


def test_ip_address_quotas(ctl: Ctl, broker) -> None:
    """An IP address's connection_creation_rate (Kafka 2.8's ``kafka-configs.sh --entity-type ips``): set, listed
    apart from user and client id quotas, in force at the broker, removed."""
    assert _ok(ctl("quotas", "set", "--ip", "10.0.0.7", "--connection-creation-rate", "5")
               ) == "set connection_creation_rate=5 for ip '10.0.0.7'\n"
    assert _ok(ctl("quotas", "set", "--ip-default", "--add-config", "connection_creation_rate=20")
               ) == "set connection_creation_rate=20 for default ip\n"
    assert _ok(ctl("quotas", "set", "--user", "alice", "--producer-byte-rate", "1024"))
    assert _table(ctl("quotas", "list", "--ip-any")) == [
        ["USER", "CLIENT_ID", "IP", "QUOTAS"],
        ["-", "-", "<default>", "connection_creation_rate=20"],
        ["-", "-", "10.0.0.7", "connection_creation_rate=5"],
    ]
    assert ctl.json("quotas", "list", "--ip", "10.0.0.7") == [
        {"user": None, "client_id": None, "ip": "10.0.0.7", "quotas": {"connection_creation_rate": 5}}]
    assert [row["user"] for row in ctl.json("quotas", "list", "--user-any")] == ["alice"]
    res = ctl("quotas", "set", "--ip", "broker-host", "--connection-creation-rate", "5")
    assert one_line_error(res, 2) == "kafkactl: INVALID_REQUEST (42) in client quotas of ip 'broker-host': " \
                                     "broker-host is not a valid IP address"
    assert "connection_creation_rate quota of ip 10.0.0.7: 5" in broker.stderr_text()  # in force there
    assert _ok(ctl("quotas", "remove", "--ip", "10.0.0.7", "--all")
               ) == "removed every quota of ip '10.0.0.7'\n"
    assert [row["ip"] for row in ctl.json("quotas", "list", "--ip-any")] == ["<default>"]
