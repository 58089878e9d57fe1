"""``kafkactl topics|configs|cluster`` end to end against a broker process, plus
the global options, error lines and shell completion."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tests.kafkactl.conftest import Ctl, one_line_error, run


def test_cluster_describe(ctl: Ctl, broker) -> None:
    data = ctl.json("cluster", "describe")
    assert data["controller_id"] == 0
    assert data["cluster_id"]
    assert data["brokers"] == [{"node_id": 0, "endpoint": f"127.0.0.1:{broker.port}", "host": "127.0.0.1",
                                "port": broker.port, "rack": None, "controller": True, "alive": True,
                                "partitions": 0, "leaders": 0, "preferred_leaders": 0}]
    table = ctl("cluster", "describe")
    assert table.returncode == 0, table.stderr
    assert f"cluster_id: {data['cluster_id']}" in table.stdout
    assert "NODE_ID" in table.stdout and str(broker.port) in table.stdout
    yaml_out = ctl("--output", "yaml", "cluster", "describe")
    assert "controller_id: 0" in yaml_out.stdout


def test_topic_lifecycle(ctl: Ctl, broker) -> None:
    res = ctl("topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
    assert res.returncode == 0, res.stderr
    assert "created topic orders with 3 partition(s)" in res.stdout
    assert ctl.json("topics", "list") == ["orders"]
    assert ctl("topics", "list").stdout.split() == ["orders"]

    [desc] = ctl.json("topics", "describe", "orders", "--configs")
    assert desc["topic"] == "orders" and desc["partition_count"] == 3 and desc["replication_factor"] == 1
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 0 and p["isr"] == [0] and p["replicas"] == [0] for p in desc["partitions"])
    assert desc["configs"] == {"retention.ms": "3600000"}
    # the topic id (KIP-516) in Kafka's text, as in /brokers/topics/orders and each partition.metadata
    assert (broker.data_dir / "orders-0" / "partition.metadata").read_text() == f"version: 0\ntopic_id: {desc['topic_id']}"

    res = ctl("topics", "alter", "orders", "--partitions", "5", "--config", "segment.bytes=1048576",
              "--delete-config", "retention.ms")
    assert res.returncode == 0, res.stderr
    [desc] = ctl.json("topics", "describe", "orders", "--configs")
    assert desc["partition_count"] == 5
    assert desc["configs"] == {"segment.bytes": "1048576"}
    table = ctl("topics", "describe")
    assert table.stdout.splitlines()[0].split() == ["TOPIC", "PARTITION", "LEADER", "LEADER_EPOCH", "REPLICAS",
                                                    "ISR", "OFFLINE"]
    assert len(table.stdout.splitlines()) == 6

    again = ctl("topics", "create", "orders")
    assert "TOPIC_ALREADY_EXISTS (36)" in one_line_error(again, 1)  # refused
    assert ctl.json("topics", "create", "orders", "--if-not-exists") == {"topic": "orders", "created": False}

    assert ctl.json("topics", "delete", "orders") == {"deleted": ["orders"], "missing": []}
    assert ctl.json("topics", "list") == []
    assert ctl.json("topics", "delete", "orders", "--if-exists") == {"deleted": [], "missing": ["orders"]}


def test_topic_errors(ctl: Ctl) -> None:
    for args in (("topics", "describe", "nope"), ("topics", "delete", "nope"), ("topics", "alter", "nope", "-p", "2"),
                 ("configs", "get", "topic", "nope"), ("configs", "set", "topic", "nope", "retention.ms=1")):
        assert one_line_error(ctl(*args), 2) == "kafkactl: unknown topic: nope (UNKNOWN_TOPIC_OR_PARTITION, 3)"
    assert "Invalid value for '--partitions'" in one_line_error(ctl("topics", "create", "x", "--partitions", "0"), 2)
    assert "No such option: --bogus" in one_line_error(ctl("topics", "list", "--bogus"), 2)
    assert "No such command 'frobnicate'" in one_line_error(ctl("frobnicate"), 2)
    assert "expected NAME=VALUE" in one_line_error(ctl("topics", "create", "x", "--config", "novalue"), 2)
    ctl("topics", "create", "small")
    assert "nothing to alter" in one_line_error(ctl("topics", "alter", "small"), 2)
    shrink = ctl("topics", "alter", "small", "--partitions", "1")
    assert "INVALID_PARTITIONS (37)" in one_line_error(shrink, 2)
    bad_value = ctl("configs", "set", "topic", "small", "retention.ms=soon")
    assert "INVALID_CONFIG (40)" in one_line_error(bad_value, 2)


def test_configs_topic_and_broker(ctl: Ctl) -> None:
    ctl("topics", "create", "events")
    assert ctl.json("configs", "get", "topic", "events") == []
    assert "has no config overrides" in ctl("configs", "get", "topic", "events").stdout
    res = ctl("configs", "set", "topic", "events", "retention.ms=60000", "cleanup.policy=compact")
    assert res.returncode == 0, res.stderr
    assert "updated topic events: retention.ms=60000, cleanup.policy=compact" in res.stdout
    rows = {r["name"]: r for r in ctl.json("configs", "get", "topic", "events")}
    assert set(rows) == {"retention.ms", "cleanup.policy"}
    assert rows["retention.ms"]["value"] == "60000" and rows["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"

    ctl("configs", "set", "topic", "events", "--delete", "cleanup.policy")
    everything = {r["name"]: r for r in ctl.json("configs", "get", "topic", "events", "--all")}
    assert everything["cleanup.policy"]["value"] == "delete" and everything["cleanup.policy"]["is_default"]
    assert everything["retention.ms"]["value"] == "60000"
    only = ctl.json("configs", "get", "topic", "events", "--key", "retention.ms")
    assert [r["name"] for r in only] == ["retention.ms"]

    checked = ctl.json("configs", "set", "topic", "events", "retention.ms=1", "--validate-only")
    assert checked["validate_only"] is True
    assert ctl.json("configs", "get", "topic", "events", "--key", "retention.ms")[0]["value"] == "60000"

    broker_rows = {r["name"]: r for r in ctl.json("configs", "get", "broker", "0", "--all")}
    assert broker_rows["broker.id"]["value"] == "0"
    assert "bad broker id 'zero'" in one_line_error(ctl("configs", "get", "broker", "zero"), 2)
    assert "'tpic' is not one of" in one_line_error(ctl("configs", "get", "tpic", "x"), 2)
    assert "nothing to set" in one_line_error(ctl("configs", "set", "topic", "events"), 2)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_cluster_is_one_line_exit_3() -> None:
    port = _closed_port()
    ctl = Ctl(f"127.0.0.1:{port}")
    for args in (("topics", "list"), ("cluster", "describe"), ("groups", "list"), ("consume", "t", "-n", "1"),
                 ("perf", "produce", "t", "-n", "1")):
        line = one_line_error(ctl(*args), 3)
        assert line.startswith(f"kafkactl: cannot reach the cluster at 127.0.0.1:{port}")
    assert "bad bootstrap server" in one_line_error(Ctl("127.0.0.1:notaport")("topics", "list"), 2)


def test_bootstrap_from_env_and_config_file(broker, tmp_path: Path) -> None:
    ctl = Ctl(None)
    res = ctl("cluster", "describe", env={"KAFKACTL_BOOTSTRAP": broker.bootstrap})
    assert res.returncode == 0 and str(broker.port) in res.stdout, res.stderr
    config = tmp_path / "config.yaml"
    config.write_text(f"bootstrap_server: {broker.bootstrap}\n")
    res = ctl("cluster", "describe", env={"KAFKACTL_CONFIG": str(config), "KAFKACTL_BOOTSTRAP": ""})
    assert res.returncode == 0 and str(broker.port) in res.stdout, res.stderr
    # the option wins over both
    res = ctl("cluster", "describe", bootstrap=broker.bootstrap,
              env={"KAFKACTL_CONFIG": str(config), "KAFKACTL_BOOTSTRAP": f"127.0.0.1:{_closed_port()}"})
    assert res.returncode == 0, res.stderr


def test_debug_shows_the_traceback(broker) -> None:
    res = Ctl(broker.bootstrap)("--debug", "topics", "describe", "nope")
    assert res.returncode != 0 and "Traceback" in res.stderr


def test_shell_completion() -> None:
    script = Path(sys.executable).parent / "kafkactl"
    shown = run([str(script), "--show-completion", "bash"])
    assert shown.returncode == 0, shown.stderr
    assert "_KAFKACTL_COMPLETE=complete_bash" in shown.stdout
    # the shell named is the one whose script is shown, also where no shell can be detected:
    # ``setsid -f`` leaves kafkactl with no shell among its parent processes (cron, a CI job)
    for shell, marker in (("bash", "complete_bash"), ("zsh", "#compdef kafkactl")):
        orphan = run(["setsid", "-f", str(script), "--show-completion", shell])
        assert marker in orphan.stdout and orphan.stderr == "", orphan.stderr
    # what bash would ask: complete "kafkactl gr" and "kafkactl groups res"
    env = {"_KAFKACTL_COMPLETE": "complete_bash", "COMP_WORDS": "kafkactl gr", "COMP_CWORD": "1"}
    assert run([str(script)], env=env).stdout.split() == ["groups"]
    env.update(COMP_WORDS="kafkactl groups res", COMP_CWORD="2")
    assert run([str(script)], env=env).stdout.split() == ["reset-offsets"]
    env.update(COMP_WORDS="kafkactl groups reset-offsets g --to-e", COMP_CWORD="4")
    assert run([str(script)], env=env).stdout.split() == ["--to-earliest"]
