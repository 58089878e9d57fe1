"""``kafkactl acls`` against a broker with the ACL authorizer (super user ``admin`` over SASL PLAIN,
``alice`` an ordinary user): add, list and remove round trips, PREFIXED and MATCH, the --producer and
--consumer expansions (and alice producing and consuming with them), the listing the same as
librdkafka's, delegation-token resources (and alice seeing a token by one), removing everything on a
resource (--force, a terminal's confirmation), refusals (exit 1), a broker without an authorizer
(exit 1), and bad usage (exit 2, before connecting).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.client.test_admin_acls import _rd_listing, acl_broker
from tests.kafkactl.conftest import RUN_LIMIT_S, Ctl, one_line_error

pytestmark = pytest.mark.clients

UNREACHABLE = "127.0.0.1:1"  # refusals must come before any connection attempt
HEADER = ["RESOURCE_TYPE", "RESOURCE_NAME", "PATTERN_TYPE", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION_TYPE"]


def _config(tmp_path: Path, user: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\n"
                    f"sasl.password={user}-secret\n")
    return str(path)


class AclCtl:
    """kafkactl as ``admin`` (``ctl(...)``) or as ``alice`` (``ctl.alice(...)``) on the SASL listener."""

    def __init__(self, broker, tmp_path: Path) -> None:
        self.broker = broker
        self.run = Ctl(broker.sasl_bootstrap)
        self.admin = ("--command-config", _config(tmp_path, "admin"))
        self.alice_conf = ("--command-config", _config(tmp_path, "alice"))

    def __call__(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self.run(*self.admin, *args, **kw)

    def alice(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self.run(*self.alice_conf, *args, **kw)

    def json(self, *args: str, **kw):
        return self.run.json(*self.admin, *args, **kw)


def _rows(bindings: list[dict]) -> list[tuple]:
    return sorted(tuple(b.values()) for b in bindings)


def row(rtype, name, principal, operation, permission="ALLOW", pattern="LITERAL", host="*") -> tuple:
    return (rtype, name, pattern, principal, host, operation, permission)


RD_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID"}
RD_PATTERNS = {3: "LITERAL", 4: "PREFIXED"}
RD_OPS = {2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION",
          10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE"}
RD_PERMISSIONS = {2: "DENY", 3: "ALLOW"}


def _librdkafka_rows(broker) -> list[tuple]:
    """What librdkafka's describe_acls lists, in kafkactl's spellings."""
    return sorted((RD_TYPES[t], n, RD_PATTERNS[p], pr, h, RD_OPS[o], RD_PERMISSIONS[pe])
                  for t, n, p, pr, h, o, pe in _rd_listing(broker))


@pytest.fixture
def ctl(broker_factory, tmp_path) -> AclCtl:
    return AclCtl(acl_broker(broker_factory), tmp_path)


def test_add_list_remove(ctl: AclCtl) -> None:
    res = ctl("acls", "list")
    assert res.returncode == 0 and res.stdout == "no ACLs\n", res.stderr
    assert ctl.json("acls", "list") == []

    res = ctl("acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "WRITE",
              "--topic", "orders")
    assert res.returncode == 0, res.stderr
    assert res.stderr == "added 2 ACL(s):\n"
    lines = res.stdout.splitlines()
    assert lines[0].split() == HEADER
    assert [line.split() for line in lines[1:]] == [["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
                                                    ["TOPIC", "orders", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"]]
    denied = ctl.json("acls", "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--operation", "read",
                      "--topic", "orders", "--group", "billing")
    assert _rows(denied) == [row("GROUP", "billing", "User:bob", "READ", "DENY", host="10.0.0.1"),
                             row("TOPIC", "orders", "User:bob", "READ", "DENY", host="10.0.0.1")]
    assert denied[1] == {"resource_type": "GROUP", "resource_name": "billing", "pattern_type": "LITERAL",
                         "principal": "User:bob", "host": "10.0.0.1", "operation": "READ", "permission_type": "DENY"}
    cluster = ctl.json("acls", "add", "--allow-principal", "User:alice", "--cluster", "--operation", "Describe",
                       "--operation", "idempotent-write", "--operation", "IDEMPOTENT_WRITE", "--operation", "alter_configs")
    assert _rows(cluster) == [row("CLUSTER", "kafka-cluster", "User:alice", op)
                              for op in ("ALTER_CONFIGS", "DESCRIBE", "IDEMPOTENT_WRITE")]

    everything = ctl.json("acls", "list")
    assert len(everything) == 7
    assert _rows(everything) == _librdkafka_rows(ctl.broker)
    assert [r["resource_type"] for r in everything] == ["TOPIC"] * 3 + ["GROUP"] + ["CLUSTER"] * 3
    table = ctl("acls", "list")
    assert table.returncode == 0 and len(table.stdout.splitlines()) == 8 and table.stdout.split()[:7] == HEADER
    assert yaml.safe_load(ctl("-o", "yaml", "acls", "list").stdout) == everything
    assert _rows(ctl.json("acls", "list", "--topic", "orders")) == _rows(everything[:3])
    assert _rows(ctl.json("acls", "list", "--principal", "User:bob")) == _rows(denied)
    assert _rows(ctl.json("acls", "list", "--topic", "orders", "--principal", "User:alice")) == _rows(everything[:2])
    assert ctl.json("acls", "list", "--transactional-id", "tx") == []

    # remove what matches: alice's READ on orders (from any host), printed
    res = ctl("acls", "remove", "--allow-principal", "User:alice", "--operation", "read", "--topic", "orders")
    assert res.returncode == 0, res.stderr
    assert res.stderr == "removed 1 ACL(s):\n"
    assert [line.split() for line in res.stdout.splitlines()] == [
        HEADER, ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"]]
    # a principal without operations: all of that principal's ACLs of that permission on the resources
    removed = ctl.json("acls", "remove", "--deny-principal", "User:bob", "--topic", "orders", "--group", "billing")
    assert _rows(removed) == _rows(denied)
    res = ctl("acls", "remove", "--allow-principal", "User:bob", "--topic", "orders")
    assert res.returncode == 0 and res.stdout == "no matching ACLs: nothing removed\n", res.stderr
    assert _rows(ctl.json("acls", "list")) == _librdkafka_rows(ctl.broker) == [
        row("CLUSTER", "kafka-cluster", "User:alice", op) for op in ("ALTER_CONFIGS", "DESCRIBE", "IDEMPOTENT_WRITE")
    ] + [row("TOPIC", "orders", "User:alice", "WRITE")]


def test_prefixed_and_match(ctl: AclCtl) -> None:
    assert ctl("acls", "add", "--allow-principal", "User:alice", "--operation", "read", "--topic", "ord",
               "--resource-pattern-type", "prefixed").returncode == 0
    assert ctl("acls", "add", "--allow-principal", "User:alice", "--operation", "write", "--topic", "orders").returncode == 0
    assert ctl("acls", "add", "--allow-principal", "User:carol", "--operation", "describe", "--topic", "*").returncode == 0
    assert ctl("acls", "add", "--allow-principal", "User:alice", "--operation", "read", "--topic", "other").returncode == 0
    prefixed = row("TOPIC", "ord", "User:alice", "READ", pattern="PREFIXED")
    literal = row("TOPIC", "orders", "User:alice", "WRITE")
    wildcard = row("TOPIC", "*", "User:carol", "DESCRIBE")
    assert _rows(ctl.json("acls", "list", "--topic", "orders")) == [literal]  # literal by default, as Kafka
    assert _rows(ctl.json("acls", "list", "--topic", "orders", "--resource-pattern-type", "match")) == sorted(
        [prefixed, literal, wildcard])
    assert _rows(ctl.json("acls", "list", "--topic", "ord", "--resource-pattern-type", "any")) == [prefixed]
    assert _rows(ctl.json("acls", "list", "--resource-pattern-type", "prefixed")) == [prefixed]
    assert ctl.json("acls", "list", "--topic", "ord") == []
    # remove with match: everything that applies to "orders", alice's only
    removed = ctl.json("acls", "remove", "--allow-principal", "User:alice", "--topic", "orders",
                       "--resource-pattern-type", "match")
    assert _rows(removed) == sorted([prefixed, literal])
    assert _rows(ctl.json("acls", "list")) == sorted([wildcard, row("TOPIC", "other", "User:alice", "READ")])


def test_delegation_token_acls(ctl: AclCtl) -> None:
    res = ctl("acls", "add", "--delegation-token", "tok-1", "--operation", "Describe", "--allow-principal",
              "User:carol")
    assert res.returncode == 0, res.stderr
    assert res.stderr == "added 1 ACL(s):\n"
    assert [line.split() for line in res.stdout.splitlines()] == [
        HEADER, ["DELEGATION_TOKEN", "tok-1", "LITERAL", "User:carol", "*", "DESCRIBE", "ALLOW"]]
    carol = row("DELEGATION_TOKEN", "tok-1", "User:carol", "DESCRIBE")

    table = ctl("acls", "list", "--delegation-token", "tok-1")
    assert table.returncode == 0, table.stderr
    assert [line.split() for line in table.stdout.splitlines()] == [HEADER, list(carol)]
    listed = ctl.json("acls", "list", "--delegation-token", "tok-1")
    assert listed == [{"resource_type": "DELEGATION_TOKEN", "resource_name": "tok-1", "pattern_type": "LITERAL",
                       "principal": "User:carol", "host": "*", "operation": "DESCRIBE", "permission_type": "ALLOW"}]
    assert _rows(ctl.json("acls", "list")) == [carol]
    assert ctl.json("acls", "list", "--transactional-id", "tok-1") == []  # another resource type, same name

    # repeated, '*' for every token, All, PREFIXED, and together with another resource type
    more = ctl.json("acls", "add", "--delegation-token", "*", "--delegation-token", "tok-2", "--operation", "all",
                    "--allow-principal", "User:bob", "--topic", "orders")
    assert _rows(more) == sorted([row("DELEGATION_TOKEN", "*", "User:bob", "ALL"),
                                  row("DELEGATION_TOKEN", "tok-2", "User:bob", "ALL"),
                                  row("TOPIC", "orders", "User:bob", "ALL")])
    prefixed = ctl.json("acls", "add", "--delegation-token", "tok-", "--resource-pattern-type", "prefixed",
                        "--operation", "describe", "--deny-principal", "User:dave")
    assert _rows(prefixed) == [row("DELEGATION_TOKEN", "tok-", "User:dave", "DESCRIBE", "DENY", pattern="PREFIXED")]
    assert _rows(ctl.json("acls", "list", "--delegation-token", "tok-1", "--resource-pattern-type", "match")) == sorted(
        [carol, row("DELEGATION_TOKEN", "*", "User:bob", "ALL"), *_rows(prefixed)])

    # an operation Kafka does not allow on a delegation token: exit 2, one line, nothing added
    line = one_line_error(ctl("acls", "add", "--delegation-token", "tok-1", "--operation", "Read",
                              "--allow-principal", "User:carol"), 2)
    assert line == "kafkactl: a DELEGATION_TOKEN ACL takes no Read (it takes All, Describe)"
    assert len(ctl.json("acls", "list")) == 5

    res = ctl("acls", "remove", "--delegation-token", "tok-1", "--operation", "Describe", "--allow-principal",
              "User:carol")
    assert res.returncode == 0, res.stderr
    assert res.stderr == "removed 1 ACL(s):\n"
    assert [line.split() for line in res.stdout.splitlines()] == [HEADER, list(carol)]
    assert ctl.json("acls", "list", "--delegation-token", "tok-1") == []
    removed = ctl.json("acls", "remove", "--delegation-token", "*", "--delegation-token", "tok-2",
                       "--delegation-token", "tok-", "--resource-pattern-type", "any", "--force")
    assert _rows(removed) == sorted(_rows(more)[:2] + _rows(prefixed))
    assert _rows(ctl.json("acls", "list")) == [row("TOPIC", "orders", "User:bob", "ALL")]


def test_a_delegation_token_acl_lets_alice_describe_the_token(broker_factory, tmp_path) -> None:
    ctl = AclCtl(acl_broker(broker_factory, **{"delegation.token.master.key": "a key for the tests"}), tmp_path)
    token = ctl.json("delegation-tokens", "create")
    assert token["owner"] == "User:admin"
    # not hers, she renews nothing: alice sees no token until an ACL gives her DESCRIBE on it
    res = ctl.alice("-o", "json", "delegation-tokens", "describe")
    assert res.returncode == 0 and json.loads(res.stdout) == [], res.stderr
    assert ctl("acls", "add", "--delegation-token", token["token_id"], "--operation", "Describe",
               "--allow-principal", "User:alice").returncode == 0
    res = ctl.alice("-o", "json", "delegation-tokens", "describe")
    assert res.returncode == 0, res.stderr
    assert [t["token_id"] for t in json.loads(res.stdout)] == [token["token_id"]]
    assert ctl.json("acls", "remove", "--delegation-token", token["token_id"], "--force") != []
    res = ctl.alice("-o", "json", "delegation-tokens", "describe")
    assert res.returncode == 0 and json.loads(res.stdout) == [], res.stderr


def test_producer_and_consumer_acls_let_alice_produce_and_consume(ctl: AclCtl) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    # without ACLs alice cannot produce
    assert ctl("topics", "create", topic).returncode == 0
    res = ctl.alice("produce", topic, input="refused\n")
    assert res.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED (31) in InitProducerId" in res.stderr, res.stderr
    # not idempotent: the topic itself is refused (no DESCRIBE), at once and as a refusal, never "unknown topic"
    res = ctl.alice("produce", topic, "-X", "enable.idempotence=false", input="refused\n")
    assert res.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in res.stderr, res.stderr
    assert "unknown topic" not in res.stderr

    producer = ctl.json("acls", "add", "--producer", "--idempotent", "--allow-principal", "User:alice", "--topic",
                        topic, "--transactional-id", "tx-1")
    assert _rows(producer) == sorted([row("TOPIC", topic, "User:alice", op) for op in ("WRITE", "DESCRIBE", "CREATE")]
                                     + [row("TRANSACTIONAL_ID", "tx-1", "User:alice", op) for op in ("WRITE", "DESCRIBE")]
                                     + [row("CLUSTER", "kafka-cluster", "User:alice", "IDEMPOTENT_WRITE")])
    consumer = ctl.json("acls", "add", "--consumer", "--allow-principal", "User:alice", "--allow-host", "127.0.0.1",
                        "--topic", topic, "--group", group)
    assert _rows(consumer) == sorted([row("TOPIC", topic, "User:alice", op, host="127.0.0.1")
                                      for op in ("READ", "DESCRIBE")]
                                     + [row("GROUP", group, "User:alice", "READ", host="127.0.0.1")])
    res = ctl.alice("produce", topic, input="hello\n")
    assert res.returncode == 0 and "idempotence" not in res.stderr, res.stderr
    res = ctl.alice("-o", "json", "consume", topic, "--group", group, "--from-beginning", "--max-messages", "1",
                    "--timeout", "20")
    assert res.returncode == 0 and '"value": "hello"' in res.stdout, res.stderr
    # both at once, as kafka-acls.sh allows: the topic's operations together
    both = ctl.json("acls", "add", "--producer", "--consumer", "--allow-principal", "User:dave", "--topic", "t2",
                    "--group", "g2")
    assert _rows(both) == sorted([row("TOPIC", "t2", "User:dave", op) for op in ("WRITE", "DESCRIBE", "CREATE", "READ")]
                                 + [row("GROUP", "g2", "User:dave", "READ")])

    # --consumer removes the consumer's operations again, from any host (so the producer's DESCRIBE too),
    # and alice no longer reads
    removed = ctl.json("acls", "remove", "--consumer", "--allow-principal", "User:alice", "--topic", topic,
                       "--group", group)
    describe = row("TOPIC", topic, "User:alice", "DESCRIBE")
    assert _rows(removed) == sorted(_rows(consumer) + [describe])
    line = one_line_error(ctl.alice("consume", topic, "--group", group, "--from-beginning", "--max-messages", "1",
                                    "--timeout", "5"), 1)
    assert "AUTHORIZATION_FAILED" in line
    assert _rows(ctl.json("acls", "list", "--principal", "User:alice")) == [r for r in _rows(producer) if r != describe]


def test_removing_everything_on_a_resource_needs_force_or_a_yes(ctl: AclCtl) -> None:
    for principal in ("User:alice", "User:bob"):
        assert ctl("acls", "add", "--allow-principal", principal, "--operation", "read", "--topic", "orders",
                   "--group", "billing").returncode == 0
    # not a terminal, no --force: exit 2 and nothing removed
    line = one_line_error(ctl("acls", "remove", "--topic", "orders", input=""), 2)
    assert line == ("kafkactl: removing every principal's ACLs of a resource needs --force (standard input is not "
                    "a terminal to ask on)")
    assert len(ctl.json("acls", "list")) == 4
    # a terminal: the ACLs shown on stderr, then asked; "n" removes nothing (exit 1), "y" removes them
    res = _on_terminal(ctl, ["acls", "remove", "--topic", "orders"], "n\n")
    assert res.returncode == 1 and "Remove these 2 ACL(s)? [y/N]" in res.stderr and "nothing removed" in res.stderr
    assert len(ctl.json("acls", "list")) == 4
    res = _on_terminal(ctl, ["acls", "remove", "--topic", "orders"], "y\n")
    assert res.returncode == 0, res.stderr
    assert "User:alice" in res.stderr and "Remove these 2 ACL(s)?" in res.stderr
    assert [line.split()[3] for line in res.stdout.splitlines()[1:]] == ["User:alice", "User:bob"]
    # --force: no question
    removed = ctl.json("acls", "remove", "--group", "billing", "--force")
    assert _rows(removed) == [row("GROUP", "billing", p, "READ") for p in ("User:alice", "User:bob")]
    assert ctl.json("acls", "list") == []


def _on_terminal(ctl: AclCtl, argv: list[str], answer: str) -> subprocess.CompletedProcess:
    """kafkactl with a pseudo-terminal as its standard input, answering ``answer``."""
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode())
        cmd = [sys.executable, "-m", "kafkactl", "-b", ctl.broker.sasl_bootstrap, *ctl.admin, *argv]
        env = {k: v for k, v in os.environ.items() if k != "KAFKACTL_DEBUG"}
        return subprocess.run(cmd, stdin=slave, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=env)
    finally:
        os.close(slave)
        os.close(master)


def test_a_user_without_rights_on_the_cluster_is_refused(ctl: AclCtl) -> None:
    for argv in (["acls", "list"],
                 ["acls", "add", "--allow-principal", "User:alice", "--operation", "all", "--topic", "t"],
                 ["acls", "remove", "--topic", "t", "--force"]):
        line = one_line_error(ctl.alice(*argv), 1)
        assert "CLUSTER_AUTHORIZATION_FAILED (31)" in line, line
    assert ctl.json("acls", "list") == []


def test_a_broker_without_an_authorizer(broker) -> None:
    ctl = Ctl(broker.bootstrap)
    for argv in (["acls", "list"],
                 ["acls", "add", "--allow-principal", "User:alice", "--operation", "read", "--topic", "t"],
                 ["acls", "remove", "--topic", "t", "--force"]):
        line = one_line_error(ctl(*argv), 1)
        assert line == ("kafkactl: no authorizer is configured on the broker (SECURITY_DISABLED, 54): ACLs need "
                        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer on every broker"), line


def test_a_binding_the_broker_will_not_store_is_bad_input(ctl: AclCtl) -> None:
    line = one_line_error(ctl("acls", "add", "--allow-principal", "User:alice", "--operation", "read", "--topic", "a/b"), 2)
    assert "INVALID_REQUEST (42)" in line and "cannot be stored" in line


ADD = ["acls", "add", "--allow-principal", "User:alice"]


@pytest.mark.parametrize("argv, says", [
    ([*ADD, "--operation", "reed", "--topic", "t"], "Invalid value for '--operation': unknown operation 'reed' (one of "
                                                    "All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                                                    "DescribeConfigs, AlterConfigs, IdempotentWrite"),
    ([*ADD, "--operation", "any", "--topic", "t"], "unknown operation 'any'"),
    (["acls", "remove", "--operation", "Idempotent Write", "--topic", "t", "--force"], "unknown operation"),
    ([*ADD, "--operation", "IdempotentWrite", "--topic", "t"], "a TOPIC ACL takes no IdempotentWrite (it takes All, "
                                                               "Read, Write, Create, Describe, Delete, Alter, "
                                                               "DescribeConfigs, AlterConfigs)"),
    ([*ADD, "--operation", "write", "--group", "g"], "a GROUP ACL takes no Write"),
    ([*ADD, "--operation", "read", "--transactional-id", "x"], "a TRANSACTIONAL_ID ACL takes no Read"),
    ([*ADD, "--operation", "write", "--delegation-token", "x"], "a DELEGATION_TOKEN ACL takes no Write (it takes "
                                                                "All, Describe)"),
    (["acls", "remove", "--operation", "alter", "--delegation-token", "x", "--force"],
     "a DELEGATION_TOKEN ACL takes no Alter"),
    ([*ADD, "--operation", "describe", "--delegation-token", " "], "an empty delegation-token name"),
    ([*ADD, "--producer", "--topic", "t", "--delegation-token", "x"], "--producer takes no --delegation-token"),
    ([*ADD, "--consumer", "--topic", "t", "--group", "g", "--delegation-token", "x"],
     "--consumer takes no --delegation-token"),
    (["acls", "add", "--allow-principal", "alice", "--operation", "read", "--topic", "t"],
     "Invalid value for '--allow-principal': 'alice' is not a principal: expected TYPE:NAME, e.g. User:alice or User:*"),
    (["acls", "list", "--principal", "User:"], "is not a principal"),
    ([*ADD, "--operation", "read", "--topic", "t", "--resource-pattern-type", "match"],
     "Invalid value for '--resource-pattern-type': must be literal or prefixed, not 'match'"),
    (["acls", "list", "--resource-pattern-type", "glob"], "must be literal or prefixed or match or any, not 'glob'"),
    ([*ADD, "--operation", "alter", "--cluster", "--resource-pattern-type", "prefixed"],
     "--cluster takes no --resource-pattern-type prefixed: the cluster has one name, kafka-cluster"),
    ([*ADD, "--operation", "read"],
     "give a resource: --topic, --group, --cluster, --transactional-id or --delegation-token"),
    (["acls", "add", "--operation", "read", "--topic", "t"], "give a principal: --allow-principal or --deny-principal"),
    ([*ADD, "--topic", "t"], "give an --operation (or --producer / --consumer)"),
    ([*ADD, "--allow-host", "", "--operation", "read", "--topic", "t"], "the host is empty"),
    (["acls", "add", "--deny-principal", "User:x", "--allow-host", "h", "--operation", "read", "--topic", "t"],
     "--allow-host goes with --allow-principal"),
    ([*ADD, "--producer"], "--producer needs a --topic"),
    ([*ADD, "--producer", "--topic", "t", "--operation", "read"], "--producer sets the operations itself"),
    ([*ADD, "--producer", "--topic", "t", "--group", "g"], "--producer takes no --group"),
    ([*ADD, "--producer", "--topic", "t", "--cluster"], "--producer takes no --cluster (--idempotent gives"),
    ([*ADD, "--consumer", "--topic", "t"], "--consumer needs a --group"),
    ([*ADD, "--consumer", "--topic", "t", "--group", "g", "--transactional-id", "x"],
     "--consumer takes no --cluster or --transactional-id"),
    (["acls", "add", "--deny-principal", "User:x", "--consumer", "--topic", "t", "--group", "g"],
     "--consumer makes ALLOW ACLs"),
    ([*ADD, "--idempotent", "--topic", "t", "--operation", "write"], "--idempotent goes with --producer"),
    (["acls", "remove", "--consumer", "--topic", "t", "--group", "g"],
     "--producer and --consumer remove the ACLs of an --allow-principal"),
    (["acls", "remove", "--allow-principal", "User:alice"], "give a resource"),
    (["acls", "remove", "--topic", "t"], "needs --force (standard input is not a terminal to ask on)"),
])
def test_bad_usage_is_one_line_and_exit_2(argv: list[str], says: str) -> None:
    line = one_line_error(Ctl(UNREACHABLE)(*argv, input=""), 2)
    assert says in line, line
