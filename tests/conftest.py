"""Shared fixtures: a real broker process on ephemeral ports.

``broker`` is a running broker (``python -m broker --config <tmp>/broker.yaml``,
listener and metrics on port 0) with its data in ``tmp_path``;
``broker_factory(**overrides)`` starts more, with any Kafka properties given as
keyword arguments using underscores for dots (``num_partitions=3``) or as a
``props`` dict, and a ``command_prefix``; a property given as ``None`` is left out, so the broker's own
default applies (test brokers otherwise start groups without the initial rebalance
delay). Each :class:`BrokerProcess` knows its ``bootstrap`` address,
``metrics_url``, ``data_dir`` and can ``stop()`` (SIGTERM, returns the exit
status), ``kill()`` (SIGKILL) and ``start()`` again on the same port and data.
``command_prefix`` (say ``["ip", "netns", "exec", NS]``) runs the process
through a command that execs it, keeping its PID. Every process is stopped by
PID at teardown.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

READY = re.compile(r"broker ready: listener=([\d.]+):(\d+) metrics=(?:([\d.]+):(\d+)|off)")
START_LIMIT_S = 60  # a guard against a hung start, not a performance assertion


class BrokerProcess:
    """One broker process under test (see the module docstring)."""

    def __init__(self, workdir: Path, props: dict) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.props = {
            "broker.id": 0,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            "metrics.port": 0,
            "offsets.topic.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0,
            **props,
        }
        self.props = {k: v for k, v in self.props.items() if v is not None}
        self.config_path = self.workdir / "broker.yaml"
        self.stderr_path = self.workdir / "broker.stderr"
        self.proc: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.metrics_port: int | None = None
        self.command_prefix: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, same_port: bool = True) -> "BrokerProcess":
        props = dict(self.props)
        if same_port and self.port is not None:
            # the first listener (the one the ready line names) keeps the port it was given; the others
            # have the ports the test chose
            first, *others = str(props["listeners"]).split(",")
            name = first.split("://", 1)[0]
            props["listeners"] = ",".join([f"{name}://{self.host}:{self.port}", *others])
        self.config_path.write_text(yaml.safe_dump(props))
        stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [*self.command_prefix, sys.executable, "-m", "broker", "--config", str(self.config_path)],
            stdout=subprocess.PIPE, stderr=stderr, cwd=self.workdir,
        )
        stderr.close()
        line = self._read_ready_line()
        match = READY.search(line)
        if match is None:
            self.kill()
            raise RuntimeError(f"broker did not get ready: {line!r}\n{self.stderr_tail()}")
        self.host, self.port = match.group(1), int(match.group(2))
        self.metrics_port = int(match.group(4)) if match.group(4) else None
        return self

    def _read_ready_line(self) -> str:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_LIMIT_S
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
        sel.close()
        return buf.decode(errors="replace")

    def stderr_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def traceback_excerpt(self, before: int = 5, after: int = 40) -> str:
        """The stderr lines around the first ``Traceback`` (the tail may be far past it)."""
        lines = self.stderr_text().splitlines()
        at = next((i for i, line in enumerate(lines) if "Traceback" in line), len(lines))
        return "\n".join(lines[max(0, at - before):at + after])

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Signal the broker (by PID) and wait for it; returns its exit status. One still running after
        ``timeout`` is asked for its stacks (SIGQUIT: every thread and task, into its stderr) and then killed."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGQUIT)
                try:
                    self.proc.wait(3)
                except subprocess.TimeoutExpired:
                    pass
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        code = self.proc.returncode
        return code

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)

    def restart(self) -> "BrokerProcess":
        code = self.stop()
        assert code == 0, f"broker exited with {code}\n{self.stderr_tail()}"
        return self.start()


# -- running the suite on several workers (pytest-xdist; ``./dev test`` runs two) ----------------------

# Files whose tests go out one by one: each runs a process of its own and shares nothing with the others
# (every benchmark's short form is one such test, up to two minutes each).
SPLIT_FILES = {"tests/bench/test_short_forms.py"}
# Files sent out first, longest first, so that the run does not end on one of them alone: the others follow in
# the order collected.
FIRST_FILES = ["tests/ansible/test_deploy.py"]


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(FIRST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown with -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """A file's tests run on one worker, in order (module fixtures such as the Ansible deployment are made
    once), except those of ``SPLIT_FILES``; work goes out in collection order (``FIRST_FILES`` first)."""
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path in SPLIT_FILES else path

    config.option.loadscopereorder = False
    return FileScheduling(config, log)


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(props: dict | None = None, *, command_prefix: list[str] | None = None, **kwargs) -> BrokerProcess:
        merged = {k.replace("_", "."): v for k, v in kwargs.items()}
        merged.update(props or {})
        proc = BrokerProcess(tmp_path / f"broker{len(started)}", merged)
        proc.command_prefix = list(command_prefix or [])
        started.append(proc)
        return proc.start()

    yield make
    problems = []
    for proc in started:
        if proc.running():
            code = proc.stop()
            if code != 0:
                problems.append(f"broker in {proc.workdir} exited with {code} on SIGTERM; its stderr ends:\n"
                                f"{proc.stderr_tail(150)}")
        if "Traceback" in proc.stderr_text():
            problems.append(f"broker in {proc.workdir} logged a traceback:\n{proc.traceback_excerpt()}")
    assert not problems, "\n".join(problems)


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()


# -- ZooKeeper (Debian's package, see tests/zookeeper.py) ---------------------------------

@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One standalone ZooKeeper server for the whole session (use ``zk_connect`` for a private chroot)."""
    from tests.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper) -> str:
    """A connect string with a fresh, existing chroot: ``127.0.0.1:PORT/t-<hex>``."""
    import uuid

    from kazoo.client import KazooClient

    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    zk = KazooClient(hosts=zookeeper.connect, timeout=10)
    zk.start(timeout=30)
    try:
        zk.ensure_path(chroot)
    finally:
        zk.stop()
        zk.close()
    return zookeeper.connect + chroot


@pytest.fixture
def zk(zk_connect):
    """A kazoo client on the test's own chroot (``zk_connect``), closed at teardown."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_connect, timeout=10)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_ensemble_factory(tmp_path):
    """``make(size=3)`` starts a ZooKeeper ensemble in the test's directory; all are stopped at teardown."""
    from tests.zookeeper import ZooKeeperEnsemble

    made = []

    def make(size: int = 3):
        ensemble = ZooKeeperEnsemble(tmp_path / f"ensemble{len(made)}", size)
        made.append(ensemble)
        return ensemble.start()

    yield make
    for ensemble in made:
        ensemble.stop()
