"""The ACL authorizer (``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``): ACLs made, listed
and deleted with librdkafka's admin client, stored where Kafka stores them and kept over a restart; super
users; who may change ACLs; principals from SASL and from client certificates; start-up refusals; and every
API the broker serves having its authorization stated (``broker.acl.API_CHECKS``).

What each API enforces is tested with the API (test_authorization_*.py); here is the authorizer itself.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from broker.acl import API_CHECKS, AclOperation as Op, Authorizer, Entry, PatternType, Resource
from broker.acl import AclPermission, ResourceType as RT, java_host, principal_of_certificate
from broker.server.registry import api_name, load_apis
from tests.pki import make_pki
from tests.security import acl_broker
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


def _admin(broker, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
                        "log_level": 0})


def _create(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for future in admin.create_acls(bindings).values():
        future.result(timeout=15)


def test_acls_are_made_listed_matched_and_deleted_and_kept_as_kafka_keeps_them(broker_factory):
    broker = acl_broker(broker_factory)
    admin = _admin(broker, "admin")
    bindings = [
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", "10.0.0.1",
                   AclOperation.READ, AclPermissionType.DENY),
        AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:*", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:carol", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "billing", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]
    _create(admin, bindings)
    _create(admin, bindings[:1])  # again: nothing doubles
    assert sorted(map(str, admin.describe_acls(EVERYTHING).result(timeout=10))) == sorted(map(str, bindings))
    # MATCH: what applies to topic "orders": its own ACLs, the wildcard and the prefix "ord"
    match = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(match).result(timeout=10))) == sorted(map(str, bindings[:4]))
    only_alice = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert len(admin.describe_acls(only_alice).result(timeout=10)) == 3

    # stored in Kafka's layout, with the change notifications Kafka's brokers read
    nodes = json.loads((broker.workdir / "data" / "metadata-store.json").read_text())["nodes"]
    orders = json.loads(nodes["/kafka-acl/Topic/orders"]["data"])
    assert orders["version"] == 1 and {"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
                                       "host": "*"} in orders["acls"]
    assert json.loads(nodes["/kafka-acl-extended/prefixed/Topic/ord"]["data"])["acls"] == [
        {"principal": "User:*", "permissionType": "Allow", "operation": "Describe", "host": "*"}]
    assert "/kafka-acl/Cluster/kafka-cluster" in nodes and "/kafka-acl/Group/billing" in nodes
    assert any(n.startswith("/kafka-acl-changes/acl_changes_") and nodes[n]["data"] == "Topic:orders" for n in nodes)

    broker.restart()
    admin = _admin(broker, "admin")
    assert len(admin.describe_acls(EVERYTHING).result(timeout=10)) == len(bindings)
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)])
    assert len(list(deleted.values())[0].result(timeout=10)) == 4
    left = admin.describe_acls(EVERYTHING).result(timeout=10)
    assert sorted(map(str, left)) == sorted(map(str, bindings[4:]))
    nodes = json.loads((broker.workdir / "data" / "metadata-store.json").read_text())["nodes"]
    assert "/kafka-acl/Topic/orders" not in nodes  # a resource without ACLs has no node, as in Kafka


def test_only_principals_allowed_to_may_see_or_change_acls_and_bad_bindings_are_refused(broker_factory):
    broker = acl_broker(broker_factory)
    admin, alice = _admin(broker, "admin"), _admin(broker, "alice")
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|Cluster authorization failed"):
        _create(alice, [binding])
    # (librdkafka hands over DescribeAcls's list only, empty here, not its top-level error)
    assert alice.describe_acls(EVERYTHING).result(timeout=10) == []
    # DESCRIBE on the cluster lets alice list, not change
    _create(admin, [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.DESCRIBE, AclPermissionType.ALLOW)])
    assert len(alice.describe_acls(EVERYTHING).result(timeout=10)) == 1
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|Cluster authorization failed"):
        _create(alice, [binding])
    # ... and ALTER lets her change them
    _create(admin, [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.ALTER, AclPermissionType.ALLOW)])
    _create(alice, [binding])
    for bad, why in (
        (AclBinding(ResourceType.BROKER, "my-cluster", ResourcePatternType.LITERAL, "User:x", "*",
                    AclOperation.ALTER, AclPermissionType.ALLOW), "only valid name for the CLUSTER resource"),
        (AclBinding(ResourceType.TOPIC, "a/b", ResourcePatternType.LITERAL, "User:x", "*",
                    AclOperation.READ, AclPermissionType.ALLOW), "cannot be stored"),
        (AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "alice", "*",
                    AclOperation.READ, AclPermissionType.ALLOW), "is not Type:name"),
    ):
        with pytest.raises(Exception, match=why):
            _create(admin, [bad])
    assert len(admin.describe_acls(EVERYTHING).result(timeout=10)) == 3


def test_the_principal_of_a_client_certificate_is_its_subject(broker_factory, tmp_path):
    """On an SSL listener with client authentication the principal is ``User:`` + the certificate's subject in
    RFC 2253's form, as Kafka's default principal builder makes it."""
    pki = make_pki(tmp_path)
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}",
                             "ssl.keystore.location": str(pki["server"]), "ssl.client.auth": "required",
                             "ssl.truststore.location": str(pki["ca"]),
                             "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                             "super.users": "User:ANONYMOUS"})  # the PLAINTEXT listener's clients: the operator
    subject = x509.load_pem_x509_certificate(pki["client_cert"].read_bytes()).subject
    # Java's RFC 2253 form, as Kafka names it: most specific first, '#' escaped anywhere in a value
    principal = "User:" + ",".join(f"{a.rfc4514_attribute_name}={a.value}".replace("#", "\\#")
                                   for rdn in reversed(subject.rdns) for a in rdn)
    tls = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                       "ssl.ca.location": str(pki["ca"]), "ssl.certificate.location": str(pki["client_cert"]),
                       "ssl.key.location": str(pki["client_key"]), "log_level": 0})
    upsert = [UserScramCredentialUpsertion("someone", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")]
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|Cluster authorization failed"):
        tls.alter_user_scram_credentials(upsert)["someone"].result(timeout=10)
    operator = AdminClient({"bootstrap.servers": broker.bootstrap})
    _create(operator, [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, "*",
                                  AclOperation.ALTER, AclPermissionType.ALLOW)])
    tls.alter_user_scram_credentials(upsert)["someone"].result(timeout=10)


def test_the_authorizers_decisions():
    """Kafka's rules, on the in-memory authorizer: super users, wildcard and prefixed names, DENY first,
    implied DESCRIBE and DESCRIBE_CONFIGS, hosts, and allow.everyone.if.no.acl.found."""
    allow, deny = AclPermission.ALLOW, AclPermission.DENY
    authorizer = Authorizer(None, ["User:admin"])
    authorizer.replace({
        Resource(RT.TOPIC, "t"): {Entry("User:alice", "*", Op.WRITE, allow),
                                  Entry("User:bob", "10.0.0.1", Op.READ, allow)},
        Resource(RT.TOPIC, "*"): {Entry("User:carol", "*", Op.READ, allow)},
        Resource(RT.TOPIC, "logs-", PatternType.PREFIXED): {Entry("User:*", "*", Op.ALTER_CONFIGS, allow),
                                                            Entry("User:mallory", "*", Op.ALL, deny)},
    })
    ok = authorizer.authorize
    assert ok("User:admin", "h", Op.DELETE, RT.TOPIC, "anything")
    assert ok("User:alice", "h", Op.WRITE, RT.TOPIC, "t") and ok("User:alice", "h", Op.DESCRIBE, RT.TOPIC, "t")
    assert not ok("User:alice", "h", Op.READ, RT.TOPIC, "t")
    assert ok("User:bob", "10.0.0.1", Op.READ, RT.TOPIC, "t") and not ok("User:bob", "10.0.0.2", Op.READ, RT.TOPIC, "t")
    assert ok("User:carol", "h", Op.READ, RT.TOPIC, "t") and ok("User:carol", "h", Op.READ, RT.TOPIC, "other")
    assert ok("User:zed", "h", Op.DESCRIBE_CONFIGS, RT.TOPIC, "logs-app")
    assert not ok("User:zed", "h", Op.DESCRIBE, RT.TOPIC, "logs-app")
    assert not ok("User:mallory", "h", Op.ALTER_CONFIGS, RT.TOPIC, "logs-app")  # DENY beats the wildcard ALLOW
    assert not ok("User:alice", "h", Op.READ, RT.GROUP, "g")  # no ACL at all: refused by default
    assert Authorizer(None, [], allow_if_no_acl=True).authorize("User:alice", "h", Op.READ, RT.GROUP, "g")
    authorizer.update(Resource(RT.TOPIC, "t"), set())  # a change takes effect at once (the decision cache)
    assert not ok("User:alice", "h", Op.WRITE, RT.TOPIC, "t")
    # the subject as Java writes it: keywords for RFC 2253's attributes, OID=#DER-hex for the others
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example, Inc"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "x#y"),
                      x509.NameAttribute(NameOID.SERIAL_NUMBER, "42"),
                      x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    assert principal_of_certificate(cert.public_bytes(serialization.Encoding.DER)) == (
        "User:CN=alice,1.2.840.113549.1.9.1=#16056140622e63,2.5.4.5=#13023432,OU=x\\#y,O=Example\\, Inc,C=DE")
    # client hosts as Java writes them, which Kafka's ACL hosts are matched against
    assert [java_host(h) for h in ("::1", "::ffff:10.0.0.7", "10.0.0.7", "2001:db8::1")] == [
        "0:0:0:0:0:0:0:1", "10.0.0.7", "10.0.0.7", "2001:db8:0:0:0:0:0:1"]
    # thousands of PREFIXED ACLs: each decision finds the ones that apply among them
    many = Authorizer(None, [])
    many.replace({Resource(RT.TOPIC, f"team-{i}-", PatternType.PREFIXED): {Entry("User:*", "*", Op.READ, allow)}
                  for i in range(10_000)} | {Resource(RT.TOPIC, "team-", PatternType.PREFIXED):
                                             {Entry("User:eve", "*", Op.READ, deny)}})
    assert many.authorize("User:bob", "h", Op.READ, RT.TOPIC, "team-4711-orders")
    assert not many.authorize("User:eve", "h", Op.READ, RT.TOPIC, "team-4711-orders")
    assert not many.authorize("User:bob", "h", Op.READ, RT.TOPIC, "team-x")


def test_every_api_served_states_its_authorization():
    served = {api_name(key) for key in load_apis().versions()}
    assert served == set(API_CHECKS), (served ^ set(API_CHECKS))


@pytest.mark.parametrize("props,fragment", [
    ({"authorizer.class.name": "com.example.MyAuthorizer"}, "is not served"),
    ({"super.users": "admin"}, "is not a principal"),
])
def test_authorizer_settings_that_cannot_be_used_stop_the_start(tmp_path, props, fragment):
    import yaml

    config = tmp_path / "broker.yaml"
    config.write_text(yaml.safe_dump({"log.dirs": str(tmp_path / "data"), "metrics.port": -1,
                                      "listeners": "PLAINTEXT://127.0.0.1:0", **props}))
    result = subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_ssl_principal_mapping_rules_turn_a_subject_into_a_short_name(broker_factory, tmp_path):
    """``ssl.principal.mapping.rules`` (KIP-371): the first rule whose regex matches the whole subject makes the
    name; a certificate no rule applies to is refused."""
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    for name, unit in (("alice", "eng"), ("olga", "ops")):
        ca.issue_cert(f"{name}.example", common_name=name.capitalize(), organization_unit_name=unit) \
            .private_key_and_cert_chain_pem.write_to_path(str(tmp_path / f"{name}.pem"))
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}",
                             "ssl.keystore.location": str(tmp_path / "server.pem"), "ssl.client.auth": "required",
                             "ssl.truststore.location": str(tmp_path / "ca.pem"),
                             "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=eng,.*$/$1/L",
                             "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                             "super.users": "User:ANONYMOUS"})
    operator = AdminClient({"bootstrap.servers": broker.bootstrap})
    _create(operator, [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice",
                                  "*", AclOperation.ALTER, AclPermissionType.ALLOW)])

    def tls_admin(name: str, errors: list | None = None) -> AdminClient:
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                "ssl.ca.location": str(tmp_path / "ca.pem"), "ssl.certificate.location": str(tmp_path / f"{name}.pem"),
                "ssl.key.location": str(tmp_path / f"{name}.pem"), "log_level": 0}
        if errors is not None:
            conf["error_cb"] = errors.append
        return AdminClient(conf)

    upsert = [UserScramCredentialUpsertion("svc", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")]
    alice = tls_admin("alice")
    alice.alter_user_scram_credentials(upsert)["svc"].result(timeout=10)  # User:alice, by the rule
    errors: list = []
    olga = tls_admin("olga", errors)
    with pytest.raises(Exception):
        olga.list_topics(timeout=5)
    assert "no rule of ssl.principal.mapping.rules applies to 'CN=Olga,OU=ops," in broker.stderr_text()


def test_mapping_rules_that_cannot_be_read_stop_the_start(tmp_path):
    import yaml

    config = tmp_path / "broker.yaml"
    config.write_text(yaml.safe_dump({"log.dirs": str(tmp_path / "data"), "metrics.port": -1,
                                      "listeners": "PLAINTEXT://127.0.0.1:0",
                                      "ssl.principal.mapping.rules": "RULE:^CN=(.*$/$1/"}))
    result = subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and "ssl.principal.mapping.rules" in result.stderr, result.stderr
    assert not (tmp_path / "data").exists()


def test_a_malformed_acl_node_holds_no_acl_and_stops_nothing(broker_factory):
    """A node another tool wrote badly is read as empty (logged): the broker starts, and every other ACL,
    and every later change, is in force (as Kafka reads such a node)."""
    broker = acl_broker(broker_factory)
    admin = _admin(broker, "admin")
    grant = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    _create(admin, [grant])
    broker.stop()
    store = broker.workdir / "data" / "metadata-store.json"
    doc = json.loads(store.read_text())
    doc["nodes"]["/kafka-acl/Topic/junk"] = {"version": 0, "data": "{not json"}
    doc["nodes"]["/kafka-acl/Topic/listed"] = {"version": 0, "data": "[1, 2]"}
    store.write_text(json.dumps(doc))
    broker.start()
    admin = _admin(broker, "admin")
    assert [str(b) for b in admin.describe_acls(EVERYTHING).result(timeout=10)] == [str(grant)]
    later = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    _create(admin, [later])
    assert len(admin.describe_acls(EVERYTHING).result(timeout=10)) == 2
    assert "ACL node /kafka-acl/Topic/junk is not Kafka's JSON" in broker.stderr_text()
