"""Broker configuration: Kafka property names, defaults, validation, the CLI's exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from broker.config import (
    EMBEDDED_DEFAULTS,
    BrokerConfig,
    ConfigError,
    Endpoint,
    default_config_path,
    load_config,
    parse_overrides,
)
from broker.log import LogConfig
from broker.properties import PropertiesError, parse


def test_embedded_default_file_matches_the_builtin_defaults():
    path = default_config_path()
    assert path is not None and path.name == "broker.yaml"
    assert yaml.safe_load(path.read_text()) == EMBEDDED_DEFAULTS
    cfg = load_config()
    assert cfg.broker_id == 0
    assert cfg.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    assert [str(d) for d in cfg.log_dirs] == ["data/kafka-logs"]
    assert cfg.metadata_store_kind == "embedded" and cfg["zookeeper.connect"] is None


def test_zookeeper_connect_chooses_the_zookeeper_store():
    cfg = BrokerConfig({"zookeeper.connect": "zk1:2181,zk2:2181/kafka", "zookeeper.session.timeout.ms": 6000})
    assert cfg.metadata_store_kind == "zookeeper"
    assert cfg["zookeeper.session.timeout.ms"] == 6000 and cfg["zookeeper.connection.timeout.ms"] is None
    assert BrokerConfig({}).metadata_store_kind == "embedded"
    assert BrokerConfig({}).zookeeper_session_timeout_ms == 18000
    explicit = BrokerConfig({"zookeeper.connect": "zk1:2181", "metadata.store": "embedded"})
    assert explicit.metadata_store_kind == "embedded"
    cfg = BrokerConfig({})
    assert (cfg.broker_id, cfg.broker_id_generation_enable, cfg.reserved_broker_max_id) == (-1, True, 1000)


def test_kafka_defaults_and_types():
    cfg = BrokerConfig({"log.dirs": "a,b", "auto.create.topics.enable": "false", "num.partitions": "3"})
    assert [str(d) for d in cfg.log_dirs] == ["a", "b"]
    assert cfg.auto_create_topics_enable is False and cfg.num_partitions == 3
    assert cfg["message.max.bytes"] == 1048588
    assert cfg["socket.request.max.bytes"] == 104857600
    assert cfg.retention_ms == 168 * 3_600_000
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert BrokerConfig({"log.retention.minutes": 2}).retention_ms == 120_000
    assert BrokerConfig({"log.retention.minutes": 2, "log.retention.ms": 5}).retention_ms == 5
    assert BrokerConfig({"log.roll.hours": 1}).segment_ms == 3_600_000


def test_log_config_mapping_is_accepted_by_log_config():
    cfg = BrokerConfig({
        "log.segment.bytes": 1024, "log.retention.bytes": 99, "log.cleanup.policy": "delete,compact",
        "log.message.timestamp.type": "LogAppendTime", "message.max.bytes": 5000, "log.flush.interval.messages": 7,
        "log.flush.interval.ms": 300,
    })
    log_cfg = LogConfig.from_properties(cfg.log_config_properties())
    assert (log_cfg.segment_bytes, log_cfg.retention_bytes, log_cfg.max_message_bytes) == (1024, 99, 5000)
    assert log_cfg.cleanup_policy == "compact,delete" and log_cfg.message_timestamp_type == "LogAppendTime"
    assert (log_cfg.flush_messages, log_cfg.flush_ms) == (7, 300)
    default = LogConfig.from_properties(BrokerConfig({}).log_config_properties())
    assert default.flush_messages is None and default.flush_ms is None


@pytest.mark.parametrize(
    "props, fragment",
    [
        ({"no.such.key": 1}, "unknown property 'no.such.key'"),
        ({"num.partitions": 0}, "num.partitions"),
        ({"num.partitions": "many"}, "num.partitions"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"listeners": "127.0.0.1:9092"}, "listeners"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"},
         "enables GSSAPI but listener.name.sasl_plaintext.gssapi.sasl.jaas.config is not set"),
        ({"listeners": "SASL_SSL://127.0.0.1:9093", "sasl.enabled.mechanisms": "SCRAM-SHA-256"},
         "SASL_SSL but has no key store"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "GSSAPI,DIGEST-MD5"},
         "DIGEST-MD5 not supported"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "OAUTHBEARER"},
         "enables OAUTHBEARER but listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config is not set"),
        ({"listeners": "SSL://127.0.0.1:9093"}, "has no key store"),
        ({"listeners": "EXTERNAL://127.0.0.1:9093"}, "no security protocol"),
        ({"listeners": "SSL://:9093", "ssl.keystore.location": "k.jks", "ssl.keystore.type": "JKS"},
         "only PEM keystores"),
        ({"listeners": "SSL://:9093", "ssl.keystore.location": "k.pem", "ssl.keystore.password": "x"},
         "ssl.key.password"),
        ({"listeners": "SSL://:9093", "listener.name.ssl.ssl.keystore.location": "k.pem",
          "listener.name.ssl.ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.1"),
        ({"listeners": "SSL://:9093", "listener.name.other.ssl.keystore.location": "k.pem"}, "no listener is named"),
        ({"listeners": "SSL://:9093", "ssl.keystore.location": "k.pem", "zookeeper.connect": "zk:2181"},
         "inter-broker listener PLAINTEXT is not among the advertised listeners"),
        ({"listeners": "PLAINTEXT://:9092,INTERNAL://:9093", "listener.security.protocol.map":
          "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT", "advertised.listeners": "PLAINTEXT://h:9092",
          "inter.broker.listener.name": "INTERNAL", "zookeeper.connect": "zk:2181"},
         "inter-broker listener INTERNAL is not among the advertised listeners"),
        ({"ssl.endpoint.identification.algorithm": "htps"}, "not https or empty"),
        ({"listeners": "SSL://:9093", "listener.name.SSL.ssl.keystore.location": "k.pem"}, "in lower case"),
        ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "only one of"),
        ({"listener.security.protocol.map": "A:TLS"}, "not a security protocol"),
        ({"log.cleanup.policy": "forever"}, "log.cleanup.policy"),
        ({"log.message.timestamp.type": "Now"}, "log.message.timestamp.type"),
        ({"metrics.port": 70000}, "metrics.port"),
        ({"metadata.store": "zookeeper"}, "zookeeper.connect"),
        ({"zookeeper.connect": "zk1"}, "zookeeper.connect"),
        ({"zookeeper.connect": "zk1:2181,/kafka"}, "zookeeper.connect"),
        ({"zookeeper.connect": "zk1:2181/a/../b"}, "zookeeper.connect"),
        ({"broker.id": 1001}, "reserved.broker.max.id"),
        ({"group.min.session.timeout.ms": 10, "group.max.session.timeout.ms": 5}, "group.min.session"),
    ],
)
def test_bad_values_are_rejected_with_one_line(props, fragment):
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_advertised_listeners_take_the_bound_port():
    cfg = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert cfg.advertised_endpoints({"PLAINTEXT": 4321}) == [Endpoint("PLAINTEXT", "127.0.0.1", 4321)]
    cfg = BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:0", "advertised.listeners": "PLAINTEXT://broker1:0"})
    assert cfg.advertised_endpoints({"PLAINTEXT": 4321}) == [Endpoint("PLAINTEXT", "broker1", 4321)]
    cfg = BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:0", "advertised.listeners": "PLAINTEXT://broker1:9"})
    assert cfg.advertised_endpoints({"PLAINTEXT": 4321}) == [Endpoint("PLAINTEXT", "broker1", 9)]


def test_overrides_parse_and_apply(tmp_path):
    assert parse_overrides(["a.b=1", "c=x=y"]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])
    path = tmp_path / "b.yaml"
    path.write_text("broker.id: 4\nlog.dirs: d\n")
    cfg = load_config(path, {"num.partitions": "6"})
    assert (cfg.broker_id, cfg.num_partitions) == (4, 6)


@pytest.mark.parametrize(
    "text, args, fragment",
    [
        ("bogus.key: 1\n", [], "unknown property 'bogus.key'"),
        ("num.partitions: -4\n", [], "num.partitions"),
        ("broker.id: [1\n", [], "not valid YAML"),
        ("broker.id: 1\n", ["--override", "message.max.bytes=lots"], "message.max.bytes"),
    ],
)
def test_cli_rejects_bad_config_with_exit_2_and_one_line(tmp_path, text, args, fragment):
    path = tmp_path / "broker.yaml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "broker", "--config", str(path), *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert proc.stdout == ""


def test_cli_missing_config_file(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "broker", "--config", str(tmp_path / "nope.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "cannot read config file" in proc.stderr


def test_no_arguments_runs_the_embedded_default_under_the_current_directory(tmp_path):
    """``python -m broker`` alone (ports overridden so tests never clash): data under ./data/kafka-logs,
    SIGINT shuts down gracefully with exit 0."""
    import signal

    from tests.conftest import READY

    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", "metrics.port=0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        line = proc.stdout.readline().decode()
        assert READY.search(line), line
        assert (tmp_path / "data" / "kafka-logs" / "meta.properties").exists()
        assert (tmp_path / "data" / "kafka-logs" / "metadata-store.json").exists()
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
        proc.stdout.close()
    assert code == 0
    assert (tmp_path / "data" / "kafka-logs" / ".kafka_cleanshutdown").exists()


def broker_cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60)


@pytest.mark.parametrize(
    "args, line",
    [
        (["--override", "no.such.key=1"],
         "broker: config error: unknown property 'no.such.key' (in --override no.such.key=1)"),
        (["--override", "num.partitions=abc"],
         "broker: config error: num.partitions: expected an integer, got 'abc' (in --override num.partitions=abc)"),
        (["--override", "log.retentoin.hours=3"],
         "broker: config error: unknown property 'log.retentoin.hours' (did you mean 'log.retention.hours'?) "
         "(in --override log.retentoin.hours=3)"),
        (["--override", "log.cleaner.min.cleanable.ratio=half"],
         "broker: config error: log.cleaner.min.cleanable.ratio: expected a number, got 'half' "
         "(in --override log.cleaner.min.cleanable.ratio=half)"),
        (["--log-level", "LOUD"],
         "broker: argument --log-level: invalid choice: 'LOUD' (choose from 'DEBUG', 'INFO', 'WARNING', 'ERROR', "
         "'CRITICAL')"),
    ],
)
def test_cli_errors_name_their_source_in_one_line(tmp_path, args, line):
    proc = broker_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [line]
    assert not (tmp_path / "data").exists()  # nothing started, nothing written


def test_cli_blames_the_config_file_for_its_own_values(tmp_path):
    (tmp_path / "broker.yaml").write_text("num.partitions: abc\n")
    proc = broker_cli("--config", "broker.yaml", "--override", "num.partitions=2", "--override", "broker.id=x",
                      cwd=tmp_path)
    assert proc.stderr.splitlines() == [
        "broker: config error: broker.id: expected an integer, got 'x' (in --override broker.id=x)"]
    proc = broker_cli("--config", "broker.yaml", "--override", "broker.id=3", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "broker: config error: num.partitions: expected an integer, got 'abc' (in config file broker.yaml)"]


def test_version_comes_from_the_package_metadata(tmp_path):
    from importlib import metadata

    proc = broker_cli("--version", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, f"kafkapy {metadata.version('kafkapy')}\n")
    script = Path(sys.executable).parent / "kafka-broker"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, proc.stdout)


def test_java_properties_syntax():
    text = ("# a comment\n! another\n\n   broker.id = 7\nlog.dirs:/a,\\\n      /b\n"
            "listeners PLAINTEXT://127.0.0.1:0\n#not.a.key=1 \\\nkey\\ with\\=escapes=\\u0041\\tb\\\\\n"
            "empty=\nnum.partitions=1\r\nnum.partitions=3\rtrailing = kept  \n")
    assert {key: value for key, (_line, value) in parse(text).items()} == {
        "broker.id": "7", "log.dirs": "/a,/b", "listeners": "PLAINTEXT://127.0.0.1:0",
        "key with=escapes": "A\tb\\", "empty": "", "num.partitions": "3", "trailing": "kept  ",
    }
    with pytest.raises(PropertiesError, match="line 1: malformed"):
        parse("bad=\\u12\n")


KAFKA_27_SERVER_PROPERTIES = """\
# A Kafka 2.7 server.properties, as its distribution ships it (listeners, log.dirs and zookeeper.connect changed)
broker.id=0
listeners=PLAINTEXT://127.0.0.1:0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={data}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect={zk_connect}
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


@pytest.mark.parametrize("name", ["server.properties", "server.cfg"])
def test_a_kafka_server_properties_file_runs_with_a_warning_per_unimplemented_property(tmp_path, name, zk_connect):
    import signal

    from tests.conftest import READY

    path = tmp_path / name  # by suffix, or by content when the name says nothing
    path.write_text(KAFKA_27_SERVER_PROPERTIES.format(data=tmp_path / "data", zk_connect=zk_connect))
    cfg = load_config(path)
    assert (cfg.broker_id, cfg.num_partitions, [str(d) for d in cfg.log_dirs]) == (0, 1, [str(tmp_path / "data")])
    stderr = tmp_path / "stderr"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "broker", "--config", str(path)], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=err)
    try:
        assert READY.search(proc.stdout.readline().decode())
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        proc.stdout.close()
    assert code == 0
    warnings = [line.split("broker.config: ", 1)[1] for line in stderr.read_text().splitlines()
                if " WARNING broker.config: " in line]
    assert warnings == [f"{p}: a Kafka broker property this broker does not implement; ignored" for p in (
        "num.io.threads", "num.network.threads", "socket.receive.buffer.bytes", "socket.send.buffer.bytes")]
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_a_typo_in_a_properties_file_is_refused(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=0\nnum.partition=3\n")
    proc = broker_cli("--config", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"broker: config error: unknown property 'num.partition' "
                                        f"(did you mean 'num.partitions'?) (in config file {path})"]


def test_endpoint_identification_and_the_protocol_map_read_as_kafka_writes_them():
    config = BrokerConfig({"ssl.endpoint.identification.algorithm": " HTTPS ",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,internal:ssl"})
    assert config["ssl.endpoint.identification.algorithm"] == "https"
    assert BrokerConfig({"ssl.endpoint.identification.algorithm": ""})["ssl.endpoint.identification.algorithm"] == ""
    assert config.security_protocol("INTERNAL") == "SSL"
    again = config.with_overrides({"num.partitions": 2})  # the map survives a round trip through its text
    assert again["listener.security.protocol.map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"}


def test_oauthbearer_settings_per_listener_override_the_brokers():
    """``listener.name.<l>.oauthbearer.sasl.oauthbearer.*`` (as Confluent documents them) over the broker's
    ``sasl.oauthbearer.*``; a listener without them takes the broker's; each is parsed as its property is."""
    handler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    config = BrokerConfig({
        "listeners": "SASL_PLAINTEXT://:9094,OTHER://:9095", "listener.security.protocol.map":
            "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example.com/certs", "sasl.oauthbearer.expected.issuer": "i",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": handler,
        "listener.name.other.oauthbearer.sasl.server.callback.handler.class": handler,
        "listener.name.other.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file:/etc/kafka/jwks.json",
        "listener.name.other.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "5"})
    first, other = config.sasl_settings("SASL_PLAINTEXT").oauth.settings, config.sasl_settings("OTHER").oauth.settings
    assert (first.url, first.issuer, first.clock_skew_s) == ("https://idp.example.com/certs", "i", 30)
    assert (other.url, other.issuer, other.clock_skew_s) == ("file:/etc/kafka/jwks.json", "i", 5)
    with pytest.raises(ConfigError, match="listener.name.other.oauthbearer.sasl.oauthbearer.clock.skew.seconds"):
        BrokerConfig({"listener.name.other.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "soon"})
    with pytest.raises(ConfigError, match="listener.name.other.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=ftp"):
        BrokerConfig({"listeners": "OTHER://:9095", "listener.security.protocol.map": "OTHER:SASL_PLAINTEXT",
                      "sasl.enabled.mechanisms": "OAUTHBEARER",
                      "listener.name.other.oauthbearer.sasl.server.callback.handler.class": handler,
                      "listener.name.other.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"})
