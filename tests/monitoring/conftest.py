"""Real Prometheus, Alertmanager and ZooKeeper exporter processes for the monitoring tests.

- ``prometheus``: ``start(scrape_configs, alertmanager=None)`` runs Debian's
  Prometheus (1 s scrape and evaluation interval) with every rule file of
  ``monitoring/rules``, sending alerts to ``alertmanager`` (``HOST:PORT``) if
  given; returns its base URL.
- ``alertmanager``: ``start()`` runs Debian's Alertmanager with one receiver
  that notifies nobody (alerts are read from its API), without its cluster
  port; returns ``HOST:PORT``.
- ``zk_exporter_factory``: ``make(zookeeper_port)`` runs
  ``python -m zookeeper_exporter`` for a server on 127.0.0.1 and returns a
  :class:`ExporterProcess` (its ``target``; ``stop()``).

Every process is stopped by PID (SIGTERM, then SIGKILL) at teardown; a missing
package fails the test (``./dev test`` installs them).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.cluster.conftest import wait_until
from tests.zookeeper import free_port

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
RULES = sorted((MONITORING / "rules").glob("*.yml"))
START_LIMIT_S = 30  # a guard against a hung start, not a performance assertion


def api(url: str, path: str, raw: bool = False, **params):
    query = "?" + urllib.parse.urlencode(params) if params else ""
    with urllib.request.urlopen(url + path + query, timeout=10) as response:
        body = response.read()
    return body if raw else json.loads(body)


def _binary(name: str) -> str:
    binary = shutil.which(name)
    if binary is None:
        pytest.fail(f"{name} is not installed (./dev test installs Debian's prometheus and prometheus-alertmanager)")
    return binary


class _Processes:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def popen(self, args: list[str], log: Path) -> subprocess.Popen:
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def prometheus(tmp_path):
    procs = _Processes()

    def start(scrape_configs: list[dict], alertmanager: str | None = None) -> str:
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "rule_files": [str(p) for p in RULES], "scrape_configs": scrape_configs}
        if alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        workdir = tmp_path / f"prometheus{len(procs.procs)}"
        workdir.mkdir()
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        procs.popen([_binary("prometheus"), f"--config.file={workdir / 'prometheus.yml'}",
                     f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                    workdir / "prometheus.log")
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: api(url, "/-/ready", raw=True), "Prometheus to be ready", limit=START_LIMIT_S,
                   interval=0.2)
        return url

    yield start
    procs.stop_all()


@pytest.fixture
def alertmanager(tmp_path):
    procs = _Processes()

    def start() -> str:
        workdir = tmp_path / "alertmanager"
        workdir.mkdir()
        config = {"route": {"receiver": "nobody", "group_wait": "0s"}, "receivers": [{"name": "nobody"}]}
        (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
        address = f"127.0.0.1:{free_port()}"
        procs.popen([_binary("prometheus-alertmanager"), f"--config.file={workdir / 'alertmanager.yml'}",
                     f"--storage.path={workdir / 'data'}", f"--web.listen-address={address}",
                     "--cluster.listen-address="], workdir / "alertmanager.log")
        wait_until(lambda: api(f"http://{address}", "/-/ready", raw=True), "Alertmanager to be ready",
                   limit=START_LIMIT_S, interval=0.2)
        return address

    yield start
    procs.stop_all()


class ExporterProcess:
    def __init__(self, proc: subprocess.Popen, port: int) -> None:
        self.proc, self.port = proc, port

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop(self.proc)
        assert self.proc.returncode == 0, f"the exporter exited with {self.proc.returncode}"


@pytest.fixture
def zk_exporter_factory(tmp_path):
    procs = _Processes()

    def make(zookeeper_port: int) -> ExporterProcess:
        log = tmp_path / f"exporter{len(procs.procs)}.log"
        proc = procs.popen([sys.executable, "-m", "zookeeper_exporter", "--zookeeper",
                            f"127.0.0.1:{zookeeper_port}", "--host", "127.0.0.1", "--port", "0"], log)

        def ready():
            assert proc.poll() is None, log.read_text()
            m = re.search(r"zookeeper exporter ready: .* metrics=127\.0\.0\.1:(\d+)", log.read_text())
            return m and int(m.group(1))

        return ExporterProcess(proc, wait_until(ready, "the exporter's ready line", limit=START_LIMIT_S))

    yield make
    procs.stop_all()
