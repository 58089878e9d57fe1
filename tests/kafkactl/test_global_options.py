"""Global options as operators type them: before or after the command, on every
command; ``--version``; ``--command-config`` with a Kafka tool's properties file
reaching the clients against a real broker; bad files as one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from kafkactl.main import GLOBAL_OPTIONS, build_command
from broker.properties import PropertiesError, parse
from tests.kafkactl.conftest import RUN_LIMIT_S, Ctl, one_line_error


def test_every_command_takes_every_global_option() -> None:
    root = build_command()
    flags = {p.name: set(p.opts) for p in root.params if p.name in GLOBAL_OPTIONS}
    assert set(flags) == set(GLOBAL_OPTIONS)

    def walk(command, path):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, path + [name])

    commands = [(path, c) for path, c in walk(root, []) if path]
    assert len(commands) > 20
    for path, command in commands:
        have = {p.name: set(p.opts) for p in command.params}
        for name, opts in flags.items():
            assert have.get(name) == opts, (path, name)


def test_options_after_the_command(ctl: Ctl, broker) -> None:
    bare = Ctl(None)  # no -b before the command
    assert bare("topics", "create", "t", "--bootstrap-server", broker.bootstrap).returncode == 0
    res = bare("topics", "list", "--output", "json", "-b", broker.bootstrap)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == ["t"]
    # before and after: the last one given wins
    res = ctl("-o", "table", "topics", "list", "-o", "json")
    assert json.loads(res.stdout) == ["t"]
    res = bare("-b", "127.0.0.1:1", "topics", "list", "-b", broker.bootstrap)
    assert res.returncode == 0 and res.stdout == "t\n"
    assert bare("produce", "t", "-b", broker.bootstrap, input="a\nb\n").returncode == 0
    res = bare("groups", "describe", "nobody", "--bootstrap-server", broker.bootstrap, "-o", "json")
    assert "GROUP_ID_NOT_FOUND" in one_line_error(res, 2)  # a name that does not exist: bad input
    lines = bare("consume", "t", "--from-beginning", "-n", "2", "-b", broker.bootstrap, "--output", "json").stdout
    assert [json.loads(line)["value"] for line in lines.splitlines()] == ["a", "b"]
    # offline commands: the output option after the path and the flags
    broker.stop()
    res = bare("log", "dump", str(broker.data_dir / "t-0"), "--records", "-o", "json")
    assert res.returncode == 0, res.stderr
    batches = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["value"] for b in batches for r in b["records"]] == ["a", "b"]


def test_version() -> None:
    expected = f"kafkactl {metadata.version('kafkapy')}\n"
    for argv in (["--version"], ["topics", "list", "--version"], ["log", "dump", "--version"]):
        res = subprocess.run([sys.executable, "-m", "kafkactl", *argv], capture_output=True, text=True,
                             timeout=RUN_LIMIT_S)
        assert (res.returncode, res.stdout, res.stderr) == (0, expected, ""), argv


def test_properties_format() -> None:
    text = ("# a comment\n  ! another\n\n"
            "client.id = ops\\\n    -probe\n"
            "request.timeout.ms:5000\n"
            "a\\=b c\\:d\n"
            "empty=\n"
            "tab=x\\ty \\u00e9\n"
            "client.id=twice\n")
    got = {k: v for k, (_, v) in parse(text).items()}
    assert got == {"client.id": "twice", "request.timeout.ms": "5000", "a=b": "c:d", "empty": "", "tab": "x\ty \u00e9"}
    assert parse("x=1\n\ny=2\n")["y"][0] == 3  # line numbers for errors
    with pytest.raises(PropertiesError, match="line 1"):
        parse("x=\\u12")


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


def test_command_config_reaches_the_clients(ctl: Ctl, broker, tmp_path: Path) -> None:
    conf = _config(tmp_path, "# as kafka-*.sh take it\nsecurity.protocol=PLAINTEXT\nclient.id=ops-probe\n"
                             "request.timeout.ms=15000\nacks=0\n")
    assert ctl("topics", "create", "t", "--command-config", conf).returncode == 0  # acks: not the admin's
    # the producer takes acks=0 from the file: no offsets come back; --acks on the command line wins
    [rec] = ctl.lines("produce", "t", "--command-config", conf, input="x\n")
    assert rec["offset"] == -1
    [rec] = ctl.lines("--command-config", conf, "produce", "t", "--acks", "1", input="y\n")
    assert rec["offset"] >= 0
    # a consumer in a group shows the file's client.id to the coordinator
    argv = [sys.executable, "-m", "kafkactl", "-b", broker.bootstrap, "consume", "t", "--group", "g",
            "--timeout", "30", "--command-config", conf]
    consumer = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + RUN_LIMIT_S
        clients = []
        while time.monotonic() < deadline and not clients:
            res = ctl("-o", "json", "groups", "describe", "g")
            if res.returncode == 0:
                clients = [m["client_id"] for m in json.loads(res.stdout)[0]["members"]]
            time.sleep(0.2)
        assert clients == ["ops-probe"]
    finally:
        consumer.kill()
        consumer.wait()


@pytest.mark.parametrize("text, says", [
    ("client.id=x\nfoo.bar=1\n", "line 2: unknown or unsupported client setting 'foo.bar'"),
    ("security.protocol=SASL_SSL\n", "security.protocol=SASL_SSL needs sasl.mechanism"),
    ("ssl.truststore.location=/etc/ts.jks\n", "unsupported client setting 'ssl.truststore.location'"),
    ("request.timeout.ms=soon\n", "'request.timeout.ms' must be an integer, not 'soon'"),
])
def test_bad_command_config_is_one_line(ctl: Ctl, tmp_path: Path, text: str, says: str) -> None:
    conf = _config(tmp_path, text)
    line = one_line_error(ctl("topics", "list", "--command-config", conf), 2)
    assert conf in line and says in line


def test_missing_command_config(ctl: Ctl, tmp_path: Path) -> None:
    line = one_line_error(ctl("--command-config", str(tmp_path / "nope.properties"), "topics", "list"), 2)
    assert line.endswith("nope.properties: no such file")
