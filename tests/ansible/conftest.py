"""Fixtures for the playbook tests: booted nspawn hosts (:mod:`tests.ansible.hosts`) and
``ansible-playbook`` runs against them. A host that cannot be built or booted fails the test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ansible.hosts import Hosts

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"
BIN = Path(sys.executable).parent
PLAYBOOK_LIMIT_S = 1800  # a guard against a hung play, not a performance assertion
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@pytest.fixture(scope="module")
def nspawn_hosts(tmp_path_factory):
    """``make(["h1", "h2"], disks_each=2)`` boots those hosts; all are torn down after the module's
    tests (a deployment is shared by the tests of a module)."""
    made: list[Hosts] = []

    def make(names: list[str], disks_each: int = 2) -> Hosts:
        if os.geteuid() != 0:
            pytest.fail("the nspawn test hosts need root (./dev test runs as root in CI)")
        hosts = Hosts(tmp_path_factory.mktemp("hosts"), names, disks_each)
        made.append(hosts)
        try:
            return hosts.__enter__()
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            pytest.fail(f"cannot build the test hosts: {exc}")

    yield make
    for hosts in made:
        hosts.close()


@dataclass
class PlayResult:
    returncode: int
    output: str

    def recap(self) -> dict[str, dict[str, int]]:
        """PLAY RECAP per host: ok, changed, unreachable, failed."""
        return {m[1]: {"ok": int(m[2]), "changed": int(m[3]), "unreachable": int(m[4]), "failed": int(m[5])}
                for m in RECAP.finditer(self.output)}

    def changed(self) -> dict[str, int]:
        return {host: r["changed"] for host, r in self.recap().items() if r["changed"]}


def ansible_playbook(hosts: Hosts, inventory: Path, playbook: str, *args: str) -> PlayResult:
    """Run ``ansible-playbook`` from ansible/ (its ansible.cfg) with ssh into ``hosts``."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOST_KEY_CHECKING": "False",
           # each task's time in the output, for a failure's report
           "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
           "ANSIBLE_SSH_ARGS": " ".join(hosts.ssh_options()[2:] + ["-o", "ControlMaster=auto",
                                                                   "-o", "ControlPersist=60s"]),
           "ANSIBLE_PRIVATE_KEY_FILE": str(hosts.private_key), "ANSIBLE_REMOTE_USER": "root",
           "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    res = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), playbook, *args], cwd=ANSIBLE_DIR,
                         env=env, capture_output=True, text=True, timeout=PLAYBOOK_LIMIT_S)
    return PlayResult(res.returncode, res.stdout + res.stderr)
