"""End to end: ``site.yml`` deploys a cluster onto three bare Debian hosts (nspawn, two loop
disks each) and the operations playbooks run against it; a fourth bare host, h4, booted with
them but in no group of the first inventory, is the broker ``add-broker.yml`` adds.

The deployment (once per module): ZooKeeper on all three hosts, a broker on each with both
disks as JBOD log dirs, a mirror-maker on h3 (copying ``orders`` into ``self.orders`` of the
same cluster, named a second time), Prometheus on h1. kafkapy comes from a wheelhouse built
from this source tree by ``./dev wheelhouse`` (the hosts have no package index). Clients run here, in the test, and
reach the brokers over the hosts' bridge.

- the CI form: the deployment itself, both disks of each broker mounted by UUID and used as
  log dirs, librdkafka producing (acks=all) and consuming through the cluster, the mirror's
  copy, a second ``site.yml`` run that changes nothing, and Prometheus with every target up;
  check mode on the deployed cluster: ``site.yml --check`` changes nothing,
  ``rolling-restart.yml`` and ``replace-disk.yml`` with ``--check`` pass their real gates and
  only report the restarts and the unmount (no broker restarted, the disk still mounted);
  ``add-broker.yml`` adding h4 with ``reassign_onto_new_broker``: in check mode first (h4 left
  bare), then for real: broker 4 registered, partitions of ``orders`` moved onto it (on its
  disks), full ISR, every record still there, a client producing and consuming through four
  brokers, Prometheus scraping it, and a second run that changes nothing;
- the slow form adds ``rolling-restart.yml`` under a steady acks=all load (no partition ever
  offline, nothing acknowledged lost, the controller restarted last), the broker-down
  alert firing in Prometheus for a stopped broker (its rule waits 1 min), and
  ``replace-disk.yml`` after a disk of h2 fails (``xfs_io`` shutdown) and is wiped as a blank
  replacement: a new file system by a new UUID in fstab, the replicas it held rebuilt, full
  ISR, every record still there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests import kdc as kdc_mod
from tests.ansible.conftest import ansible_playbook
from tests.cluster.conftest import wait_until
from tests.cluster.workload import LoadProducer, read_all

REPO = Path(__file__).resolve().parents[2]
NAMES = ["h1", "h2", "h3"]
NEW = "h4"  # in no group of site.yml's inventory: the broker add-broker.yml adds
TOPIC, PARTITIONS = "orders", 6
WAIT_S = 120  # a guard against a hang, not a performance assertion


def build_wheelhouse(dest: Path) -> Path:
    """kafkapy's wheel and its dependencies' with the kerberos extra (the gssapi wheel), built from this source
    tree by ``./dev wheelhouse DIR kerberos``."""
    res = subprocess.run([str(REPO / "dev"), "wheelhouse", str(dest), "kerberos"], capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return dest


def write_pki(root: Path, hosts) -> Path:
    """A CA and, for every host, a PEM file of its private key and a certificate for its address
    (``root/<name>.pem``), plus a client certificate (``root/client.pem``); made once, kept for later calls."""
    import trustme

    if (root / "ca.pem").exists():
        return root
    root.mkdir(parents=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    for host in hosts.hosts:
        ca.issue_cert(host.address).private_key_and_cert_chain_pem.write_to_path(str(root / f"{host.name}.pem"))
    ca.issue_cert("e2e-client", common_name="e2e-client").private_key_and_cert_chain_pem.write_to_path(
        str(root / "client.pem"))
    return root


SASL_USERS = {"broker": 'broker-"secret', "admin": "admin-secret", "app": "app-secret"}


def broker_keytab(realm, hosts, name: str) -> Path:
    """The keytab of broker ``name``'s principal, ``kafka/<its address>``, made at the KDC on first use."""
    keytab = realm.dir.parent / "keytabs" / f"{name}.keytab"
    if not keytab.exists():
        keytab.parent.mkdir(exist_ok=True)
        realm.add_principal(f"kafka/{hosts[name].address}", keytab)
    return keytab


def write_inventory(path: Path, hosts, wheelhouse: Path, realm, brokers: list[str] = NAMES) -> Path:
    """The inventory of the deployment; ``brokers`` in kafka_brokers (a host left out is not touched).

    Every broker has an SSL listener (9093) and a SASL_SSL listener (9094, PLAIN and SCRAM-SHA-512)
    beside PLAINTEXT, requires client certificates on both, and talks to the other brokers over SASL_SSL
    (``broker_sasl_inter_broker``, as the user ``broker``): replication, the controller, controlled
    shutdowns and the moves of add-broker.yml all go over TLS with SASL. That listener takes GSSAPI too, each
    broker with its own principal and keytab from ``realm``, a KDC that the hosts reach on the bridge. The
    ACL authorizer is on: the
    super users are ``admin`` and the PLAINTEXT listener's clients (the operations playbooks, the mirror,
    the test's own), a certificate's principal is its CN (``ssl.principal.mapping.rules``).
    """
    h = {host.name: host for host in hosts.hosts}
    pki = write_pki(path.parent / "pki", hosts)
    inventory = {"all": {
        "vars": {
            "ansible_python_interpreter": "/usr/bin/python3", "ansible_user": "root",
            # containers: the clock and /proc/sys are the machine's
            "common_time_sync_required": False, "common_sysctl_apply": False,
            "kafkapy_wheelhouse": str(wheelhouse), "zookeeper_heap": "128m", "kafkapy_extras": ["kerberos"],
            "monitoring_scrape_interval": "2s",
        },
        "children": {
            "zookeeper": {"hosts": {n: {"ansible_host": h[n].address, "zookeeper_id": i}
                                    for i, n in enumerate(NAMES, start=1)}},
            "kafka_brokers": {
                "hosts": {n: {"ansible_host": h[n].address, "broker_id": i, "broker_rack": f"rack-{n}",
                              "jbod_disks": h[n].disks, "broker_tls_cert": str(pki / f"{n}.pem"),
                              "broker_kerberos_keytab": str(broker_keytab(realm, hosts, n))}
                          for i, n in enumerate(brokers, start=1)},
                "vars": {"kafka_broker_config": {"num.partitions": 3, "replica.lag.time.max.ms": 10000,
                                                 "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT"},
                         "broker_tls_ca": str(pki / "ca.pem"), "broker_tls_client_auth": "required",
                         "broker_sasl_mechanisms": ["PLAIN", "SCRAM-SHA-512", "GSSAPI"],
                         "broker_sasl_inter_broker": True,
                         "broker_kerberos_realm": realm.realm, "broker_kerberos_kdcs": [f"{hosts.gateway}:{realm.port}"],
                         "broker_sasl_users": SASL_USERS, "broker_authorizer": True,
                         "broker_super_users": ["User:admin", "User:ANONYMOUS"]},
            },
            "mirror_makers": {"hosts": {"h3": {"kafka_mirror_config": {
                "clusters": {"self": {"bootstrap.servers": bootstrap(hosts)}},
                "flows": [{"source": "self", "target": "local", "topics": TOPIC,
                           "topic.rename": "{source}.{topic}"}],
            }}}},
            "monitoring": {"hosts": {"h1": {}}},
        },
    }}
    path.write_text(json.dumps(inventory, indent=2))  # JSON is YAML
    return path


def bootstrap(hosts, brokers: list[str] = NAMES) -> str:
    return ",".join(f"{hosts[n].address}:9092" for n in brokers)


def produce_acknowledged(servers: str, values: list[bytes], client: dict | None = None, topic: str = TOPIC) -> None:
    """Produce ``values`` to ``topic`` with acks=all (``client``: more librdkafka properties); every one
    must be acknowledged."""
    import confluent_kafka as ck

    producer = ck.Producer({**(client or {}), "bootstrap.servers": servers, "acks": "all"})
    failures = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, _msg: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures


def wait_for_acls(hosts, name: str, count: int) -> None:
    """Wait until every broker holds ``count`` ACLs on resources named ``name``: ACL changes reach the other
    brokers through ZooKeeper a moment after the answer (as in Kafka), and a client may ask any of them."""
    from broker.protocol import ApiKey
    from tests.server.wire import Wire

    flt = {"resource_type_filter": 1, "resource_name_filter": name, "pattern_type_filter": 1,
           "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}

    def held(address: str) -> bool:
        with Wire(f"{address}:9092", timeout=10) as w:  # PLAINTEXT: User:ANONYMOUS, a super user here
            answer = w.call(ApiKey.DESCRIBE_ACLS, 1, flt)
        return sum(len(r["acls"]) for r in answer["resources"]) >= count

    for n in NAMES:
        wait_until(lambda: held(hosts[n].address), f"broker {n} to hold the ACLs of {name}", limit=WAIT_S)


def subscribed_values(topic: str, count: int, config: dict) -> set[bytes]:
    """The values a librdkafka consumer (``config``, from the earliest offset) reads from ``topic``,
    until it has ``count`` of them or ``WAIT_S`` has passed."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
    finally:
        consumer.close()
    return got


def prometheus(hosts, path: str, **params) -> dict:
    url = f"http://{hosts['h1'].address}:9090/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as response:
        doc = json.load(response)
    assert doc["status"] == "success", doc
    return doc["data"]


def restarted_in_order(output: str) -> list[str]:
    """The hosts rolling-restart.yml restarted, in the order it did."""
    order, in_restart = [], False
    for line in output.splitlines():
        if line.startswith("TASK ["):
            in_restart = line.startswith("TASK [Restart the broker")
        elif in_restart and line.startswith("changed: ["):
            order.append(line[len("changed: ["):].split("]")[0])
    return order


def kafkactl(hosts, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkactl", "-b", bootstrap(hosts), *args],
                          capture_output=True, text=True, timeout=WAIT_S)


@pytest.fixture(scope="module")
def realm(tmp_path_factory):
    """A KDC on this machine (it listens on every address: the hosts reach it at their bridge's address)."""
    missing = kdc_mod.available()
    assert missing is None, f"the deployment needs a KDC: {missing} (./dev test installs it)"
    kdc = kdc_mod.Kdc(tmp_path_factory.mktemp("realm") / "kdc").start()
    kdc.use_here()
    yield kdc
    kdc.stop()


@pytest.fixture(scope="module")
def deployed(nspawn_hosts, tmp_path_factory, realm):
    """Three hosts after one ``site.yml`` run: ``(hosts, inventory, first run's result)``."""
    work = tmp_path_factory.mktemp("deploy")
    wheelhouse = build_wheelhouse(work / "wheelhouse")
    hosts = nspawn_hosts(NAMES + [NEW], disks_each=2)  # NEW waits, bare, for add-broker.yml
    inventory = write_inventory(work / "inventory.yml", hosts, wheelhouse, realm)
    first = ansible_playbook(hosts, inventory, "site.yml")
    assert first.returncode == 0, first.output[-6000:]
    return hosts, inventory, first


def test_site_deploys_a_working_cluster_and_a_second_run_changes_nothing(deployed, realm):
    import confluent_kafka as ck
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    hosts, inventory, first = deployed
    assert all(first.recap(n)["failed"] == 0 and first.recap(n)["unreachable"] == 0 for n in NAMES)

    for i, name in enumerate(NAMES):
        host = hosts[name]
        mounts = hosts.ssh(host, "findmnt -n -o SOURCE,TARGET,FSTYPE,OPTIONS -l | grep ' /data/'")
        for n, disk in enumerate(host.disks):
            assert any(line.split()[:3] == [disk, f"/data/disk{n}", "xfs"] and "noatime" in line
                       for line in mounts.splitlines()), mounts
        fstab = hosts.ssh(host, "grep ' /data/disk' /etc/fstab")
        assert len([line for line in fstab.splitlines() if line.startswith("UUID=")]) == 2, fstab
        assert hosts.ssh(host, "systemctl is-active kafkapy-broker zookeeper").split() == ["active", "active"]

    res = kafkactl(hosts, "cluster", "await-healthy", "--timeout", "60", "--brokers", "3")
    assert res.returncode == 0, res.stderr
    admin = AdminClient({"bootstrap.servers": bootstrap(hosts)})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
    wait_until(lambda: all(p.leader >= 0 for p in admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
                           .partitions.values()), "a leader for every partition", limit=WAIT_S)

    # both disks of every broker hold replicas
    for name in NAMES:
        dirs = hosts.ssh(hosts[name], "ls /data/disk0/kafka-logs /data/disk1/kafka-logs")
        assert dirs.count(f"{TOPIC}-") >= 2 and all(
            f"{TOPIC}-" in part for part in dirs.split("\n\n")), dirs

    values = [b"record-%04d" % i for i in range(1000)]
    produce_acknowledged(bootstrap(hosts), values)
    read = read_all(bootstrap(hosts), TOPIC, range(PARTITIONS))
    assert sorted(v for _p, _o, v in read) == values

    # the same records over TLS, with the client certificate the brokers require, once ACLs allow its
    # principal (its CN) to read; the key stays private
    pki = inventory.parent / "pki"
    tls = {"ssl.ca.location": str(pki / "ca.pem"), "ssl.certificate.location": str(pki / "client.pem"),
           "ssl.key.location": str(pki / "client.pem")}
    grant = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:e2e-client", "*",
                        AclOperation.READ, AclPermissionType.ALLOW),
             AclBinding(ResourceType.GROUP, "e2e-", ResourcePatternType.PREFIXED, "User:e2e-client", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)]
    for future in admin.create_acls(grant).values():
        future.result(timeout=30)
    wait_for_acls(hosts, TOPIC, 1)
    wait_for_acls(hosts, "e2e-", 1)
    over_tls = subscribed_values(TOPIC, len(values), {
        "bootstrap.servers": ",".join(f"{hosts[n].address}:9093" for n in NAMES), "security.protocol": "SSL",
        **tls, "group.id": "e2e-tls", "enable.auto.commit": False})
    assert over_tls == set(values)
    for name in NAMES:
        assert hosts.ssh(hosts[name], "stat -c '%a %U %G' /etc/kafkapy/tls/broker.pem").split() == \
            ["640", "root", "kafka"]
        assert hosts.ssh(hosts[name], "stat -c '%a %U %G' /etc/kafkapy/server.yaml").split() == \
            ["640", "root", "kafka"]  # it holds the SASL passwords

    # SASL_SSL with PLAIN: the user app may not write to a topic until an ACL says so
    admin.create_topics([NewTopic("e2e-sasl", 1, 3)])["e2e-sasl"].result(60)
    over_sasl = {"bootstrap.servers": ",".join(f"{hosts[n].address}:9094" for n in NAMES),
                 "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "app",
                 "sasl.password": SASL_USERS["app"], **tls}
    refused = ck.Producer({**over_sasl, "acks": "all", "message.timeout.ms": 10000})
    errors: list = []
    refused.produce("e2e-sasl", b"not allowed", on_delivery=lambda err, _msg: errors.append(err))
    refused.flush(30)
    del refused  # its connections go now, not at the containers' teardown
    assert [e.code() for e in errors] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "e2e-sasl", ResourcePatternType.LITERAL,
                                                "User:app", "*", AclOperation.WRITE,
                                                AclPermissionType.ALLOW)]).values():
        future.result(timeout=30)
    wait_for_acls(hosts, "e2e-sasl", 1)
    produce_acknowledged(over_sasl["bootstrap.servers"], [b"over-sasl"], over_sasl, topic="e2e-sasl")

    # the same listener with Kerberos: app@REALM is User:app too (the DEFAULT rule), so its ACL lets kcat
    # (librdkafka with Cyrus SASL) write, with tickets from app's keytab for each broker's kafka/<address>
    app_keytab = inventory.parent / "app.keytab"
    realm.add_principal("app", app_keytab)
    kcat = subprocess.run(
        ["kcat", "-b", over_sasl["bootstrap.servers"], "-X", "security.protocol=SASL_SSL", "-X",
         "sasl.mechanisms=GSSAPI", "-X", f"sasl.kerberos.keytab={app_keytab}", "-X",
         f"sasl.kerberos.principal=app@{realm.realm}", *[x for k, v in tls.items() for x in ("-X", f"{k}={v}")],
         "-X", "acks=all", "-P", "-t", "e2e-sasl"], input="over-kerberos\n", capture_output=True, text=True,
        timeout=WAIT_S, env=realm.client_env(inventory.parent / "app.ccache"))
    assert kcat.returncode == 0, kcat.stderr
    sasl_values = subscribed_values("e2e-sasl", 2, {"bootstrap.servers": bootstrap(hosts), "group.id": "e2e-krb"})
    assert sasl_values == {b"over-sasl", b"over-kerberos"}
    for name in NAMES:
        assert hosts.ssh(hosts[name], "stat -c '%a %U %G' /etc/kafkapy/kafka.keytab").split() == \
            ["640", "root", "kafka"]

    # the mirror on h3 copies orders into self.orders
    mirrored = subscribed_values(f"self.{TOPIC}", len(values),
                                 {"bootstrap.servers": bootstrap(hosts), "group.id": "e2e-mirror"})
    assert mirrored == set(values)

    second = ansible_playbook(hosts, inventory, "site.yml")
    assert second.returncode == 0, second.output[-6000:]
    assert {n: second.recap(n)["changed"] for n in NAMES} == {n: 0 for n in NAMES}, second.output[-6000:]

    def all_up():
        targets = prometheus(hosts, "targets")["activeTargets"]
        return targets if targets and all(t["health"] == "up" for t in targets) else None

    targets = wait_until(all_up, "every Prometheus target up", limit=WAIT_S, interval=0.5)
    jobs = {}
    for t in targets:
        jobs.setdefault(t["labels"]["job"], set()).add(t["labels"]["instance"])
    assert jobs["kafka"] == {f"{hosts[n].address}:9308" for n in NAMES}
    assert jobs["kafka-mirror"] == {f"{hosts['h3'].address}:9309"}
    assert jobs["zookeeper"] == {f"{hosts[n].address}:7000" for n in NAMES}  # kafkapy-zookeeper-exporter
    assert [r["value"][1] for r in prometheus(hosts, "query", query="synced_followers")["result"]] == ["2"]


def broker_pids(hosts, names: list[str]) -> dict[str, str]:
    return {n: hosts.ssh(hosts[n], "systemctl show -p MainPID --value kafkapy-broker").strip() for n in names}


def test_check_mode_on_the_deployed_cluster_changes_nothing(deployed):
    hosts, inventory, _first = deployed
    pids = broker_pids(hosts, NAMES)
    fstab = hosts.ssh(hosts["h2"], "cat /etc/fstab")

    site = ansible_playbook(hosts, inventory, "site.yml", "--check")
    assert site.returncode == 0, site.output[-6000:]
    assert {n: site.recap(n)["changed"] for n in NAMES} == {n: 0 for n in NAMES}, site.output[-6000:]

    # the operations playbooks: their gates read the real cluster, the restarts and the
    # unmount are only reported (changed), none is done
    restart = ansible_playbook(hosts, inventory, "rolling-restart.yml", "--check")
    assert restart.returncode == 0, restart.output[-6000:]
    assert sorted(restarted_in_order(restart.output)) == NAMES, restart.output[-6000:]
    replace = ansible_playbook(hosts, inventory, "replace-disk.yml", "--check", "-e", "replace_disk_host=h2",
                               "-e", f"replace_disk_device={hosts['h2'].disks[1]}")
    assert replace.returncode == 0, replace.output[-6000:]
    assert broker_pids(hosts, NAMES) == pids
    assert hosts.ssh(hosts["h2"], "cat /etc/fstab") == fstab
    assert hosts.ssh(hosts["h2"], "findmnt -n -o SOURCE /data/disk1").strip() == hosts["h2"].disks[1]


@pytest.mark.slow
def test_rolling_restart_under_load_loses_nothing_and_prometheus_alerts_on_a_stopped_broker(deployed):
    from confluent_kafka.admin import AdminClient

    hosts, inventory, _first = deployed
    admin = AdminClient({"bootstrap.servers": bootstrap(hosts)})
    controller = json.loads(kafkactl(hosts, "cluster", "describe", "-o", "json").stdout)["controller_id"]
    offline: list[str] = []
    watching = threading.Event()

    def watch():
        while not watching.is_set():
            try:
                meta = admin.list_topics(TOPIC, timeout=5)
            except Exception as exc:  # noqa: BLE001 - a failed look is noted, the watch goes on
                offline.append(f"metadata: {exc}")
                continue
            offline.extend(f"{TOPIC}-{p.id}" for p in meta.topics[TOPIC].partitions.values() if p.leader < 0)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    load = LoadProducer(bootstrap(hosts), TOPIC, range(PARTITIONS), rate=200, prefix="rolling").start()
    watcher.start()
    try:
        load.wait_acknowledged(200)
        restart = ansible_playbook(hosts, inventory, "rolling-restart.yml")
        assert restart.returncode == 0, restart.output[-6000:]
        load.wait_acknowledged(200)
    finally:
        watching.set()
        recorder = load.stop()
        watcher.join()
    assert not offline, offline[:20]
    assert not recorder.errors and not recorder.indeterminate, dict(recorder.errors)
    report = recorder.check([r for r in read_all(bootstrap(hosts), TOPIC, range(PARTITIONS))
                             if r[2].startswith(b"rolling-")])
    assert report.valid(allow_duplicates=True), str(report)
    # the controller went last
    order = restarted_in_order(restart.output)
    assert sorted(order) == NAMES and order[-1] == NAMES[controller - 1], restart.output[-6000:]

    # a stopped broker: Prometheus sees its target down and fires KafkaBrokerDown (after its 1 min)
    hosts.ssh(hosts["h2"], "systemctl stop kafkapy-broker")
    try:
        def firing():
            alerts = prometheus(hosts, "alerts")["alerts"]
            return [a for a in alerts if a["labels"].get("alertname") == "KafkaBrokerDown"
                    and a["state"] == "firing"]
        alerts = wait_until(firing, "KafkaBrokerDown to fire", limit=180, interval=2)
        assert {a["labels"]["instance"] for a in alerts} == {f"{hosts['h2'].address}:9308"}
    finally:
        hosts.ssh(hosts["h2"], "systemctl start kafkapy-broker")
    res = kafkactl(hosts, "cluster", "await-healthy", "--timeout", "120", "--brokers", "3")
    assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_replace_disk_rebuilds_the_replicas_of_a_failed_disk(deployed):
    hosts, inventory, _first = deployed
    h2, disk = hosts["h2"], hosts["h2"].disks[1]
    before = read_all(bootstrap(hosts), TOPIC, range(PARTITIONS))
    old_uuid = hosts.ssh(h2, f"blkid -p -o value -s UUID {disk}").strip()
    held = set(hosts.ssh(h2, "ls /data/disk1/kafka-logs").split()) - {"meta.properties"}
    held = {name for name in held if name.startswith(f"{TOPIC}-")}
    assert held, "disk1 of h2 holds no replica of orders"

    # the disk fails under the running broker, and is swapped for a blank one at the same device name
    hosts.ssh(h2, "xfs_io -x -c shutdown /data/disk1")
    hosts.ssh(h2, f"wipefs -a -f {disk}")
    res = ansible_playbook(hosts, inventory, "replace-disk.yml", "-e", "replace_disk_host=h2",
                           "-e", f"replace_disk_device={disk}")
    assert res.returncode == 0, res.output[-6000:]

    new_uuid = hosts.ssh(h2, f"blkid -p -o value -s UUID {disk}").strip()
    assert new_uuid and new_uuid != old_uuid
    fstab = hosts.ssh(h2, "cat /etc/fstab")
    assert f"UUID={new_uuid} /data/disk1 xfs" in fstab and old_uuid not in fstab, fstab
    assert hosts.ssh(h2, "findmnt -n -o SOURCE /data/disk1").strip() == disk
    rebuilt = set(hosts.ssh(h2, "ls /data/disk0/kafka-logs /data/disk1/kafka-logs").split())
    assert held <= rebuilt, (held, rebuilt)
    res = kafkactl(hosts, "topics", "describe", "--under-replicated-partitions", "-o", "json")
    assert res.returncode == 0 and json.loads(res.stdout) == [], res.stdout + res.stderr
    after = read_all(bootstrap(hosts), TOPIC, range(PARTITIONS))
    assert sorted(after) == sorted(before)


def test_add_broker_joins_a_new_host_and_moves_partitions_onto_it(deployed, realm):
    hosts, inventory, _first = deployed
    brokers = NAMES + [NEW]
    before = read_all(bootstrap(hosts), TOPIC, range(PARTITIONS))
    inventory = write_inventory(inventory.with_name("inventory-add.yml"), hosts, inventory.parent / "wheelhouse",
                                realm, brokers)
    args = ("-e", f"new_broker={NEW}", "-e", "reassign_onto_new_broker=true")
    # check mode on the bare host: it tells what it would do and does none of it
    check = ansible_playbook(hosts, inventory, "add-broker.yml", *args, "--check")
    assert check.returncode == 0 and check.recap(NEW)["changed"] > 0, check.output[-6000:]
    untouched = hosts.ssh(hosts[NEW], "ls -d /opt/kafkapy /data; findmnt -n -l -o TARGET | grep -c ^/data",
                          check=False)
    assert untouched.split() == ["0"], untouched

    add = ansible_playbook(hosts, inventory, "add-broker.yml", *args)
    assert add.returncode == 0, add.output[-6000:]

    res = kafkactl(hosts, "cluster", "describe", "-o", "json")
    assert sorted(b["node_id"] for b in json.loads(res.stdout)["brokers"]) == [1, 2, 3, 4], res.stdout
    # the topics created before are spread over the four brokers: the new one holds replicas, on its disks
    res = kafkactl(hosts, "topics", "describe", TOPIC, "-o", "json")
    replicas = [p["replicas"] for t in json.loads(res.stdout) for p in t["partitions"]]
    assert any(4 in r for r in replicas) and all(len(r) == 3 for r in replicas), replicas
    held = hosts.ssh(hosts[NEW], "ls /data/disk0/kafka-logs /data/disk1/kafka-logs").split()
    assert len([d for d in held if d.startswith(f"{TOPIC}-")]) == sum(4 in r for r in replicas), held
    res = kafkactl(hosts, "cluster", "await-healthy", "--timeout", "60", "--brokers", "4")
    assert res.returncode == 0, res.stderr

    # nothing lost by the moves, and a client produces and consumes through the four brokers
    assert sorted(read_all(bootstrap(hosts, brokers), TOPIC, range(PARTITIONS))) == sorted(before)
    values = [b"added-%04d" % i for i in range(300)]
    produce_acknowledged(bootstrap(hosts, brokers), values)
    read = read_all(bootstrap(hosts, brokers), TOPIC, range(PARTITIONS))
    assert sorted(v for _p, _o, v in read if v.startswith(b"added-")) == values

    # Prometheus scrapes the new broker
    target = f"{hosts[NEW].address}:9308"
    wait_until(lambda: any(t["labels"]["instance"] == target and t["health"] == "up"
                           for t in prometheus(hosts, "targets")["activeTargets"]),
               f"Prometheus scraping {target}", limit=WAIT_S, interval=0.5)

    # a second run changes nothing: the moves it made are not proposed again
    again = ansible_playbook(hosts, inventory, "add-broker.yml", *args)
    assert again.returncode == 0, again.output[-6000:]
    assert {n: again.recap(n)["changed"] for n in (NEW, "h1")} == {NEW: 0, "h1": 0}, again.output[-6000:]
    res = kafkactl(hosts, "topics", "describe", TOPIC, "-o", "json")
    assert [p["replicas"] for t in json.loads(res.stdout) for p in t["partitions"]] == replicas
