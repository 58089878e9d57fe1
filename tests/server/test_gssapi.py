"""SASL/GSSAPI (Kerberos) on a listener, against a real MIT KDC (:mod:`tests.kdc`) and real clients:
kafka-python and aiokafka (python-gssapi, with tickets from ``kinit``), kcat (librdkafka with Cyrus SASL,
getting its tickets from a keytab), our client and kafkactl (a keytab, or the Java client's
``Krb5LoginModule`` entry).

Every broker is a real process whose listener ``SASL_PLAINTEXT://localhost:<port>`` accepts as
``kafka/localhost@KAFKA.TEST`` with the keys of its keytab; the first listener (PLAINTEXT) is the one the
ready line names and is where the tests act as the operator.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from broker.client import Consumer, Producer, TopicPartition
from broker.client.errors import AuthenticationError, ConfigError
from tests import kdc as kdc_mod
from tests.zookeeper import free_port

pytestmark = pytest.mark.clients

SERVICE = "kafka/localhost"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@pytest.fixture(scope="module")
def realm(tmp_path_factory):
    """A KDC with the broker's service principal and three users, each with a keytab; alice and bob also
    have tickets (their ticket caches filled by ``kinit``)."""
    missing = kdc_mod.available()
    assert missing is None, f"the GSSAPI tests need a KDC: {missing} (./dev test installs it)"
    base = tmp_path_factory.mktemp("realm")
    kdc = kdc_mod.Kdc(base / "kdc").start()
    kdc.keytabs = {}
    kdc.ccaches = {}
    for name in (SERVICE, "alice", "bob", "carol"):
        keytab = base / f"{name.replace('/', '_')}.keytab"
        kdc.add_principal(name, keytab)
        kdc.keytabs[name] = keytab
    for user in ("alice", "bob"):
        kdc.ccaches[user] = base / f"{user}.ccache"
        kdc.kinit(user, kdc.keytabs[user], kdc.ccaches[user])
    kdc.use_here()
    yield kdc
    kdc.stop()


def _jaas(keytab: Path, principal: str = f"{SERVICE}@{kdc_mod.REALM}") -> str:
    return (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
            f'keyTab="{keytab}" principal="{principal}";')


def _gssapi_broker(broker_factory, realm, **props):
    port = free_port()
    base = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://localhost:{port}",
            "sasl.enabled.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": _jaas(realm.keytabs[SERVICE])}
    base.update(props)
    broker = broker_factory({k: v for k, v in base.items()})
    broker.gssapi_bootstrap = f"localhost:{port}"
    return broker


def _kafka_python(broker, **extra) -> dict:
    return {"bootstrap_servers": broker.gssapi_bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": "kafka", **extra}


def _as(realm, user: str) -> None:
    """This process's Kerberos clients (kafka-python, aiokafka) use ``user``'s ticket cache."""
    realm.set_ccache_here(realm.ccaches[user])


def _grant(broker, principal: str, topic: str, group: str | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ,
                                                               AclOperation.DESCRIBE, AclOperation.CREATE)]
    if group:
        bindings.append(AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*",
                                   AclOperation.READ, AclPermissionType.ALLOW))
    # idempotent producers (kafka-python's default) need it on the cluster, as in Kafka 2.7
    bindings.append(AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, "*",
                               AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(timeout=15)


def _send(broker, topic: str, value: bytes) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(**_kafka_python(broker))
    try:
        producer.send(topic, value).get(timeout=30)
    finally:
        producer.close()


def _send_refused(broker, topic: str) -> None:
    """kafka-python cannot authenticate (so cannot send) as this process's ticket cache stands."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        producer = KafkaProducer(max_block_ms=8000, **_kafka_python(broker))
        try:
            producer.send(topic, b"refused").get(timeout=10)
        finally:
            producer.close()


def _consume_kafka_python(conf: dict, topic: str, want: int, group: str | None = None) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             enable_auto_commit=False, **conf)
    got = []
    try:
        for message in consumer:
            got.append(message.value)
            if len(got) >= want:
                break
    finally:
        consumer.close()
    return got


# kafka-python's GSSAPI in bare frames (api_version below 1.0) waits for an answer to its last token, which
# Kafka never sends (nor this broker): librdkafka's bare frames are tested with kcat below
def test_kafka_python_with_tickets_from_kinit(broker_factory, realm):
    """alice's ticket (kinit) authenticates her as User:alice: the ACLs made for that principal let her
    write and read, and bob, with a ticket as good, is refused the same topic."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    broker = _gssapi_broker(broker_factory, realm, **{"authorizer.class.name": ACL_AUTHORIZER,
                                                       "super.users": "User:ANONYMOUS"})
    topic = f"krb-{uuid.uuid4().hex[:8]}"
    _grant(broker, "User:alice", topic, group="alice-group")
    _as(realm, "alice")
    producer = KafkaProducer(acks="all", **_kafka_python(broker))
    for future in [producer.send(topic, f"alice-{i}".encode()) for i in range(20)]:
        future.get(timeout=30)
    producer.close()
    assert _consume_kafka_python(_kafka_python(broker), topic, 20, group="alice-group") == [
        f"alice-{i}".encode() for i in range(20)]

    _as(realm, "bob")
    producer = KafkaProducer(acks="all", max_block_ms=10000, **_kafka_python(broker))
    with pytest.raises(KafkaError) as refused:
        producer.send(topic, b"bob").get(timeout=20)
    producer.close()
    assert "TopicAuthorization" in type(refused.value).__name__ or "uthoriz" in str(refused.value)


@pytest.mark.parametrize("protocol", [
    [], ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.10.0"],
    ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"],
], ids=["SaslAuthenticate", "SaslHandshake v0 and bare frames", "Kafka 0.9 (no SaslHandshake)"])
def test_kcat_gets_its_tickets_from_a_keytab(broker_factory, realm, tmp_path, protocol):
    """librdkafka (kcat, Cyrus SASL's GSSAPI plugin) runs kinit with the keytab itself. Speaking Kafka 0.10.0's
    protocol it sends its tokens in bare frames after SaslHandshake v0, and Kafka 0.9's its first token at once,
    without SaslHandshake; in both it reads no answer to its last token, as Kafka sends none."""
    assert shutil.which("kcat"), "kcat is not installed (./dev test installs it)"
    broker = _gssapi_broker(broker_factory, realm)
    env = realm.client_env(tmp_path / "carol.ccache")
    common = ["-b", broker.gssapi_bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
              "-X", f"sasl.kerberos.keytab={realm.keytabs['carol']}", "-X",
              f"sasl.kerberos.principal=carol@{kdc_mod.REALM}", "-X", "sasl.kerberos.service.name=kafka", *protocol]
    lines = "".join(f"kcat-{i}\n" for i in range(50))
    produced = subprocess.run(["kcat", *common, "-P", "-t", "kcat-krb", "-X", "acks=all"], input=lines, env=env,
                              capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", *common, "-C", "-t", "kcat-krb", "-o", "beginning", "-e", "-q"], env=env,
                              capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"kcat-{i}" for i in range(50)]


def test_aiokafka(broker_factory, realm):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    broker = _gssapi_broker(broker_factory, realm)
    _as(realm, "alice")
    conf = {"bootstrap_servers": broker.gssapi_bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": "kafka"}

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **conf)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait("aio-krb", f"aio-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-krb", auto_offset_reset="earliest", **conf)
        await consumer.start()
        got = []
        try:
            async with asyncio.timeout(30):
                while len(got) < 10:
                    got.append((await consumer.getone()).value)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"aio-{i}".encode() for i in range(10)]


def test_our_client_with_a_keytab_and_with_a_jaas_entry(broker_factory, realm):
    broker = _gssapi_broker(broker_factory, realm, **{"authorizer.class.name": ACL_AUTHORIZER,
                                                       "super.users": "User:ANONYMOUS"})
    _grant(broker, "User:carol", "ours-krb")
    producer = Producer(bootstrap_servers=broker.gssapi_bootstrap, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="GSSAPI", sasl_kerberos_keytab=str(realm.keytabs["carol"]),
                        sasl_kerberos_principal=f"carol@{kdc_mod.REALM}", acks="all")
    try:
        for i in range(10):
            producer.send("ours-krb", value=f"ours-{i}".encode())
        producer.flush(30)
    finally:
        producer.close()
    consumer = Consumer(bootstrap_servers=broker.gssapi_bootstrap, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="GSSAPI", sasl_jaas_config=_jaas(realm.keytabs["carol"],
                                                                        f"carol@{kdc_mod.REALM}"),
                        group_id=None, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition("ours-krb", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(1000))
    finally:
        consumer.close()
    assert got == [f"ours-{i}".encode() for i in range(10)]


def test_kafkactl_with_a_command_config(broker_factory, realm, tmp_path):
    broker = _gssapi_broker(broker_factory, realm)
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
                      "sasl.kerberos.service.name=kafka\n"
                      f"sasl.jaas.config={_jaas(realm.keytabs['carol'], f'carol@{kdc_mod.REALM}')}\n")
    kafkactl = [sys.executable, "-m", "kafkactl", "--bootstrap-server", broker.gssapi_bootstrap,
                "--command-config", str(config)]
    made = subprocess.run([*kafkactl, "topics", "create", "ctl-krb", "--partitions", "2"], capture_output=True,
                          text=True, timeout=60, env=realm.env)
    assert made.returncode == 0, made.stderr
    listed = subprocess.run([*kafkactl, "topics", "list"], capture_output=True, text=True, timeout=60, env=realm.env)
    assert listed.returncode == 0, listed.stderr
    assert "ctl-krb" in listed.stdout
    # without a keytab the ticket cache is used; an empty one is a failed authentication: one line, exit 1
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    refused = subprocess.run([*kafkactl, "topics", "list"], capture_output=True, text=True, timeout=60,
                             env=realm.client_env(tmp_path / "empty.ccache"))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.count("\n") == 1 and "SASL_AUTHENTICATION_FAILED" in refused.stderr
    assert "No Kerberos credentials available" in refused.stderr


def test_principal_to_local_rules_decide_who_gets_in(broker_factory, realm):
    """With a rule for alice only (no DEFAULT), bob's valid ticket maps to no short name: his authentication
    fails, and the broker's log says why."""
    broker = _gssapi_broker(broker_factory, realm, **{
        "sasl.kerberos.principal.to.local.rules": rf"RULE:[1:$1@$0](alice@{kdc_mod.REALM.replace('.', '[.]')})s/@.*//"})
    _as(realm, "alice")
    _send(broker, "ruled", b"alice")
    _as(realm, "bob")
    _send_refused(broker, "ruled")
    deadline = time.monotonic() + 10
    while "bob@KAFKA.TEST" not in broker.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = broker.stderr_text()
    assert "SASL authentication failed (GSSAPI)" in log and "bob@KAFKA.TEST" in log, log[-2000:]


def test_a_client_without_credentials_fails_at_once_with_the_reason(broker_factory, realm, tmp_path):
    broker = _gssapi_broker(broker_factory, realm)
    realm.set_ccache_here(tmp_path / "empty.ccache")  # no kinit done
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as failed:
        producer = Producer(bootstrap_servers=broker.gssapi_bootstrap, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="GSSAPI")
        try:
            producer.send("nobody", value=b"x")
            producer.flush(20)
        finally:
            producer.close()
    assert time.monotonic() - started < 20
    assert "Kerberos credentials" in str(failed.value) and "ticket cache" in str(failed.value)


def test_client_settings_are_checked_when_built(realm, tmp_path):
    base = {"bootstrap_servers": "localhost:1", "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI"}
    with pytest.raises(ConfigError, match="sasl.kerberos.keytab needs sasl.kerberos.principal"):
        Producer(**base, sasl_kerberos_keytab=str(realm.keytabs["carol"]))
    with pytest.raises(ConfigError, match="cannot be read"):
        Producer(**base, sasl_kerberos_keytab=str(tmp_path / "absent.keytab"), sasl_kerberos_principal="carol")
    not_a_keytab = tmp_path / "text.keytab"
    not_a_keytab.write_text("hello")
    with pytest.raises(ConfigError, match="is not a keytab"):
        Producer(**base, sasl_kerberos_keytab=str(not_a_keytab), sasl_kerberos_principal="carol")
    with pytest.raises(ConfigError, match="serviceName=other conflicts with sasl.kerberos.service.name=kafka"):
        Producer(**base, sasl_kerberos_service_name="kafka", sasl_jaas_config=_jaas(
            realm.keytabs["carol"], "carol").replace(";", ' serviceName="other";'))
    with pytest.raises(ConfigError, match="is not used by GSSAPI"):
        Producer(**base, sasl_username="carol", sasl_password="x")
    with pytest.raises(ConfigError, match="is a GSSAPI setting"):
        Producer(**{**base, "sasl_mechanism": "PLAIN"}, sasl_username="a", sasl_password="b",
                 sasl_kerberos_service_name="kafka")


def test_a_rotated_service_key_is_taken_from_the_keytab_without_a_restart(broker_factory, realm, tmp_path):
    """The KDC's key for the broker changes (kadmin ktadd into a new keytab): tickets for the new key fail
    against the old keytab, and once the operator puts the new keytab in place the next client gets in,
    without a restart."""
    keytab = tmp_path / "broker.keytab"
    shutil.copy(realm.keytabs[SERVICE], keytab)
    broker = _gssapi_broker(broker_factory, realm, **{
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": _jaas(keytab)})
    _as(realm, "alice")
    _send(broker, "rotated", b"before")

    rotated = tmp_path / "rotated.keytab"
    realm.keytab_for(SERVICE, rotated)  # a new key at the KDC (and in the module's keytab no longer)
    fresh = tmp_path / "alice-after.ccache"
    realm.kinit("alice", realm.keytabs["alice"], fresh)
    realm.set_ccache_here(fresh)  # no cached service ticket for the old key
    _send_refused(broker, "rotated")
    shutil.copy(rotated, keytab.with_suffix(".new"))
    os.replace(keytab.with_suffix(".new"), keytab)
    _send(broker, "rotated", b"after")
    assert _consume_kafka_python(_kafka_python(broker), "rotated", 2) == [b"before", b"after"]
    shutil.copy(rotated, realm.keytabs[SERVICE])  # the module's other tests go on with the current key


@pytest.mark.parametrize("props,message", [
    ({"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": None},
     "enables GSSAPI but listener.name.sasl_plaintext.gssapi.sasl.jaas.config is not set"),
    ({"sasl.kerberos.service.name": None}, "GSSAPI needs sasl.kerberos.service.name"),
    ({"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": "KEYTAB:alice"},
     "cannot accept as kafka/localhost@KAFKA.TEST with keytab"),
    ({"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": "KEYTAB:absent"}, "cannot be read"),
    ({"sasl.kerberos.principal.to.local.rules": "RULE:[1:$1](.*"}, "sasl.kerberos.principal.to.local.rules"),
    ({"sasl.kerberos.service.name": "other"}, "serviceName=kafka conflicts with sasl.kerberos.service.name=other"),
])
def test_start_refused_with_one_line_and_nothing_written(realm, tmp_path, props, message):
    props = dict(props)
    jaas = props.get("listener.name.sasl_plaintext.gssapi.sasl.jaas.config", "")
    if props.get("sasl.kerberos.service.name") == "other":
        props["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"] = _jaas(realm.keytabs[SERVICE]).replace(
            ";", ' serviceName="kafka";')
    if jaas == "KEYTAB:alice":
        props["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"] = _jaas(realm.keytabs["alice"])
    elif jaas == "KEYTAB:absent":
        props["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"] = _jaas(tmp_path / "absent.keytab")
    base = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://localhost:{free_port()}",
            "sasl.enabled.mechanisms": "GSSAPI", "sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": _jaas(realm.keytabs[SERVICE]),
            "log.dirs": str(tmp_path / "data"), "metrics.port": 0, "broker.id": 0}
    base.update(props)
    base = {k: v for k, v in base.items() if v is not None}
    args = [x for k, v in base.items() for x in ("--override", f"{k}={v}")]
    done = subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True, timeout=60,
                          env=realm.env)
    assert done.returncode == 2, done.stderr  # a configuration error, as the README states
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
