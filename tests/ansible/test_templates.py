"""The roles' templates rendered for an inventory of three hosts and checked by what reads them.

A playbook on this machine loads each role's defaults and vars, as the role
does, and renders its templates into a tmp dir per host: ``server.yaml`` must
load with the broker's own configuration loader, ``mirror.yaml`` with the
mirror's, ``prometheus.yml`` with ``promtool check config`` (the repository's
alert rules included), ``alertmanager.yml`` with ``amtool check-config``, and
``systemd-analyze verify`` must print nothing for every unit (it only warns
about unknown keys, so any output fails).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from broker.config import load_config
from mirror.config import load as load_mirror_config
from tests import kdc as kdc_mod
from tests.ansible import playbooks

ROLES = playbooks.ANSIBLE_DIR / "roles"
REPO = playbooks.ANSIBLE_DIR.parent
HOSTS = {"kafka1": "10.0.0.1", "kafka2": "10.0.0.2", "kafka3": "10.0.0.3"}
# role, template, rendered file name, group whose hosts get it
TEMPLATES = [
    ("broker", "server.yaml.j2", "server.yaml", "kafka_brokers"),
    ("broker", "kafkapy-broker.service.j2", "kafkapy-broker.service", "kafka_brokers"),
    ("mirror", "mirror.yaml.j2", "mirror.yaml", "mirror_makers"),
    ("mirror", "kafkapy-mirror.service.j2", "kafkapy-mirror.service", "mirror_makers"),
    ("zookeeper", "zoo.cfg.j2", "zoo.cfg", "zookeeper"),
    ("zookeeper", "zookeeper.service.j2", "zookeeper.service", "zookeeper"),
    ("zookeeper", "kafkapy-zookeeper-exporter.service.j2", "kafkapy-zookeeper-exporter.service", "zookeeper"),
    ("monitoring", "prometheus.yml.j2", "prometheus.yml", "monitoring"),
    ("monitoring", "alertmanager.yml.j2", "alertmanager.yml", "monitoring"),
]


def inventory() -> dict:
    return {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"},
        "children": {
            "zookeeper": {"hosts": {h: {"ansible_host": a, "zookeeper_id": i + 1}
                                    for i, (h, a) in enumerate(HOSTS.items())}},
            "kafka_brokers": {
                "hosts": {h: {"broker_id": i + 1, "broker_rack": f"rack-{'abc'[i]}"} for i, h in enumerate(HOSTS)},
                "vars": {"jbod_disks": ["/dev/sdb", "/dev/sdc"],
                         "kafka_broker_config": {"num.partitions": 6, "log.retention.hours": 72,
                                                 "auto.create.topics.enable": False}}},
            "mirror_makers": {"hosts": {"kafka3": {"kafka_mirror_config": {
                "clusters": {"dc1": {"bootstrap.servers": "10.1.0.1:9092"}},
                "flows": [{"source": "dc1", "target": "local", "topics": "orders.*",
                           "topic.rename": "{source}.{topic}"}]}}}},
            "monitoring": {"hosts": {"kafka3": {}}},
        }}}


def render(out: Path, templates: list[tuple[str, str, str, str]], overrides: dict) -> Path:
    """Render ``templates`` for every host of :func:`inventory` into ``out/<host>/``, with the roles'
    defaults and vars loaded as the roles load them and ``overrides`` as extra vars."""
    out.mkdir(parents=True, exist_ok=True)
    tasks = [{"ansible.builtin.include_vars": str(ROLES / role / kind / "main.yml")}
             for role in ("kafkapy", "broker", "mirror", "zookeeper", "monitoring") for kind in ("defaults", "vars")
             if (ROLES / role / kind / "main.yml").is_file()]
    tasks.append({"ansible.builtin.file": {"path": f"{out}/{{{{ inventory_hostname }}}}", "state": "directory",
                                           "mode": "0755"}})
    for role, template, name, group in templates:
        tasks.append({"ansible.builtin.template": {"src": str(ROLES / role / "templates" / template),
                                                   "dest": f"{out}/{{{{ inventory_hostname }}}}/{name}",
                                                   "mode": "0644"},
                      "when": f"inventory_hostname in groups['{group}']"})
    (out / "inventory.json").write_text(json.dumps(inventory()))
    (out / "render.yml").write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": tasks}]))
    play = playbooks.run(out / "render.yml", "-e", json.dumps(overrides), inventory=str(out / "inventory.json"))
    assert play.returncode == 0, play.output[-3000:]
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    # Extra vars, as include_vars of the defaults would override the inventory's: ExecStart must
    # name a program that exists for systemd-analyze (this venv's), and promtool must find the rules.
    # TLS, SASL and ACLs as the broker role's variables set them (files are not copied here: only
    # templates render); a password with a quote and a backslash, as JAAS must read them
    overrides = {"kafkapy_venv": sys.prefix, "monitoring_rules_dir": str(REPO / "monitoring" / "rules"),
                 "broker_tls_cert": "/srv/pki/broker.pem", "broker_tls_ca": "/srv/pki/ca.pem",
                 "broker_tls_client_auth": "required",
                 "broker_sasl_mechanisms": ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"], "broker_sasl_inter_broker": True,
                 "broker_sasl_oauthbearer_jwks_url": "https://idp.example.com/certs",
                 "broker_sasl_oauthbearer_audience": ["kafka", "kafka-eu"],
                 "broker_sasl_oauthbearer_issuer": "https://idp.example.com", "broker_sasl_reauth_ms": 3600000,
                 "broker_sasl_users": {"broker": 'br"o\\ker', "alice": "alice-secret"},
                 "broker_delegation_token_master_key": "shared token secret",
                 "broker_authorizer": True, "broker_super_users": ["User:admin"],
                 "monitoring_alertmanager": True, "monitoring_alertmanager_receivers": [
                     {"name": "oncall", "webhook_configs": [{"url": "http://10.0.0.9:8080/alerts"}]}]}
    return render(out, TEMPLATES, overrides)


@pytest.fixture(scope="module")
def kerberized(tmp_path_factory):
    """``server.yaml`` and ``krb5.conf`` of brokers with GSSAPI, also between brokers, against a real KDC
    whose realm holds every broker's principal (``kafka/10.0.0.N``); one keytab with all three stands in for
    each host's own (the keytab's place is where the broker reads it, here a file of this machine)."""
    missing = kdc_mod.available()
    assert missing is None, f"this test needs a KDC: {missing} (./dev test installs it)"
    base = tmp_path_factory.mktemp("kerberized")
    kdc = kdc_mod.Kdc(base / "kdc").start()
    keytab = base / "brokers.keytab"
    for address in HOSTS.values():
        kdc.add_principal(f"kafka/{address}", keytab)
    overrides = {"kafkapy_extras": ["kerberos"], "broker_sasl_mechanisms": ["GSSAPI", "SCRAM-SHA-512"],
                 "broker_sasl_inter_broker": True, "broker_sasl_inter_broker_mechanism": "GSSAPI",
                 "broker_kerberos_keytab": "/srv/keytabs/broker.keytab", "broker_kerberos_keytab_dest": str(keytab),
                 "broker_kerberos_realm": kdc.realm, "broker_kerberos_kdcs": [f"127.0.0.1:{kdc.port}"],
                 "broker_kerberos_principal_to_local_rules": [f"RULE:[1:$1@$0](.*@{kdc.realm})s/@.*//", "DEFAULT"],
                 "broker_authorizer": True, "broker_super_users": ["User:admin"]}
    out = render(base / "out", [("broker", "server.yaml.j2", "server.yaml", "kafka_brokers"),
                                ("broker", "krb5.conf.j2", "krb5.conf", "kafka_brokers")], overrides)
    yield out, kdc, keytab
    kdc.stop()


def test_server_yaml_with_kerberos_loads_and_krb5_conf_reaches_the_kdc(kerberized, monkeypatch):
    out, kdc, keytab = kerberized
    for i, (host, address) in enumerate(HOSTS.items()):
        # the broker reads the realm from the host's krb5.conf: the one the role wrote
        monkeypatch.setenv("KRB5_CONFIG", str(out / host / "krb5.conf"))
        config = load_config(out / host / "server.yaml")
        assert not config.ignored
        sasl = config.sasl_settings("SASL_PLAINTEXT")
        assert sasl.mechanisms == ("GSSAPI", "SCRAM-SHA-512")
        assert sasl.kerberos.login.principal == f"kafka/{address}@{kdc.realm}"
        assert sasl.kerberos.service_name == "kafka"
        assert sasl.kerberos.short_name(f"alice@{kdc.realm}") == "alice"
        credentials = config.inter_broker_sasl()
        assert (credentials.mechanism, credentials.kerberos.keytab, credentials.service_name) == (
            "GSSAPI", str(keytab), "kafka")
        assert config["super.users"] == ["User:admin", "User:kafka"]
        assert config.inter_broker_listener == "SASL_PLAINTEXT"
        # the krb5.conf names the KDC so that kinit gets the broker's ticket from it with the keytab
        got = subprocess.run(["kinit", "-k", "-t", str(keytab), "-c", f"FILE:{out / host / 'ccache'}",
                              f"kafka/{address}"], env={**kdc.env, "KRB5_CONFIG": str(out / host / "krb5.conf")},
                             capture_output=True, text=True, timeout=30)
        assert got.returncode == 0, got.stderr


def test_server_yaml_loads_with_the_brokers_config_loader(rendered):
    for i, (host, address) in enumerate(HOSTS.items()):
        config = load_config(rendered / host / "server.yaml")
        assert not config.ignored
        assert config["broker.id"] == i + 1
        assert config["broker.rack"] == f"rack-{'abc'[i]}"
        assert [str(d) for d in config.log_dirs] == ["/data/disk0/kafka-logs", "/data/disk1/kafka-logs"]
        assert config["zookeeper.connect"] == "10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181"
        assert [(e.listener_name, e.host, e.port) for e in config.listeners] == [
            ("PLAINTEXT", address, 9092), ("SSL", address, 9093), ("SASL_SSL", address, 9094)]
        assert [(e.host, e.port) for e in config.advertised_endpoints()] == [(address, 9092), (address, 9093),
                                                                             (address, 9094)]
        assert (config.security_protocol("SASL_SSL"), config.inter_broker_listener) == ("SASL_SSL", "SASL_SSL")
        assert config.ssl_settings("SASL_SSL").items() >= {"ssl.keystore.location": "/etc/kafkapy/tls/broker.pem",
                                                       "ssl.truststore.location": "/etc/kafkapy/tls/ca.pem",
                                                       "ssl.client.auth": "required"}.items()
        sasl = config.sasl_settings("SASL_SSL")
        assert sasl.mechanisms == ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER")
        assert sasl.oauth.kind == "jwks"
        assert (sasl.oauth.settings.url, sasl.oauth.settings.audience, sasl.oauth.settings.issuer) == (
            "https://idp.example.com/certs", ("kafka", "kafka-eu"), "https://idp.example.com")
        assert config.max_reauth_ms("SASL_SSL", "PLAIN") == 3600000
        assert config["delegation.token.master.key"] == "shared token secret"
        assert dict(sasl.plain_users) == {"broker": 'br"o\\ker', "alice": "alice-secret"}
        credentials = config.inter_broker_sasl()
        assert (credentials.mechanism, credentials.username, credentials.password) == ("PLAIN", "broker",
                                                                                      'br"o\\ker')
        assert config["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
        assert config["super.users"] == ["User:admin", "User:broker"]
        assert (config["num.partitions"], config["log.retention.hours"]) == (6, 72)
        assert config["auto.create.topics.enable"] is False
        assert (config["default.replication.factor"], config["min.insync.replicas"]) == (3, 2)
        assert config["metrics.port"] == 9308


def test_mirror_yaml_loads_with_the_mirrors_config_loader(rendered):
    config = load_mirror_config(rendered / "kafka3" / "mirror.yaml")
    assert config.clusters["local"].properties == {"bootstrap.servers": "10.0.0.1:9092,10.0.0.2:9092,10.0.0.3:9092"}
    assert config.clusters["dc1"].properties == {"bootstrap.servers": "10.1.0.1:9092"}
    [flow] = config.flows
    assert (flow.source, flow.target, flow.target_topic("orders")) == ("dc1", "local", "dc1.orders")
    assert (config.metrics_host, config.metrics_port) == ("10.0.0.3", 9309)


def test_zoo_cfg_lists_the_ensemble(rendered):
    lines = (rendered / "kafka2" / "zoo.cfg").read_text().splitlines()
    props = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert {k: v for k, v in props.items() if k.startswith("server.")} == {
        "server.1": "10.0.0.1:2888:3888", "server.2": "10.0.0.2:2888:3888", "server.3": "10.0.0.3:2888:3888"}
    assert (props["clientPort"], props["dataDir"], props["admin.enableServer"]) == ("2181", "/var/lib/zookeeper",
                                                                                    "false")


def test_prometheus_yml_passes_promtool_and_scrapes_the_inventory(rendered):
    path = rendered / "kafka3" / "prometheus.yml"
    res = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    # every rule file of the repository was found and checked
    assert res.stdout.count("SUCCESS") >= 1 + len(list((REPO / "monitoring" / "rules").glob("*.yml")))
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in yaml.safe_load(path.read_text())["scrape_configs"]}
    assert jobs["kafka"] == ["10.0.0.1:9308", "10.0.0.2:9308", "10.0.0.3:9308"]
    assert jobs["kafka-mirror"] == ["10.0.0.3:9309"]
    assert jobs["node"] == ["10.0.0.1:9100", "10.0.0.2:9100", "10.0.0.3:9100"]
    # kafkapy's ZooKeeper exporter on every member (no metricsProvider.className in zookeeper_config)
    assert jobs["zookeeper"] == ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"]
    assert yaml.safe_load(path.read_text())["alerting"]["alertmanagers"][0]["static_configs"] == [
        {"targets": ["localhost:9093"]}]


def test_alertmanager_yml_passes_amtool_with_the_inventorys_receivers(rendered):
    path = rendered / "kafka3" / "alertmanager.yml"
    res = subprocess.run(["amtool", "check-config", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    config = yaml.safe_load(path.read_text())
    assert config["route"]["receiver"] == "oncall"
    assert config["receivers"] == [{"name": "oncall", "webhook_configs": [{"url": "http://10.0.0.9:8080/alerts"}]}]


def test_systemd_units_verify_cleanly(rendered):
    units = [rendered / "kafka3" / name for name in ("kafkapy-broker.service", "kafkapy-mirror.service",
                                                      "zookeeper.service", "kafkapy-zookeeper-exporter.service")]
    res = subprocess.run(["systemd-analyze", "verify", *map(str, units)], capture_output=True, text=True)
    assert (res.returncode, res.stdout + res.stderr) == (0, "")
    broker_unit = units[0].read_text()
    assert "RequiresMountsFor=/data/disk0/kafka-logs /data/disk1/kafka-logs" in broker_unit
    assert f"ExecStart={sys.prefix}/bin/kafka-broker --config /etc/kafkapy/server.yaml" in broker_unit
    exporter_unit = units[3].read_text()
    assert (f"ExecStart={sys.prefix}/bin/kafkapy-zookeeper-exporter --zookeeper 127.0.0.1:2181 --host 0.0.0.0 "
            "--port 7000") in exporter_unit
