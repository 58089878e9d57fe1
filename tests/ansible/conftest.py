"""Fixtures for the playbook tests: booted nspawn hosts (:mod:`tests.ansible.hosts`) and
``ansible-playbook`` runs against them. A host that cannot be built or booted fails the test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.ansible import playbooks
from tests.ansible.hosts import Hosts

PLAYBOOK_LIMIT_S = 1800  # a guard against a hung play (a first deployment on a busy machine), not a timing


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


def ansible_playbook(hosts: Hosts, inventory: Path, playbook: str, *args: str) -> playbooks.Play:
    """Run ``ansible-playbook`` from ansible/ (its ansible.cfg), as root over ssh into ``hosts``."""
    env = {**playbooks.env(), "ANSIBLE_HOST_KEY_CHECKING": "False",
           "ANSIBLE_SSH_ARGS": " ".join(hosts.ssh_options()[2:] + ["-o", "ControlMaster=auto",
                                                                   "-o", "ControlPersist=60s"]),
           "ANSIBLE_PRIVATE_KEY_FILE": str(hosts.private_key), "ANSIBLE_REMOTE_USER": "root",
           # each task's time in the output, for a failure's report
           "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks"}
    res = subprocess.run([str(playbooks.BIN / "ansible-playbook"), "-i", str(inventory), playbook, *args],
                         cwd=playbooks.ANSIBLE_DIR, env=env, capture_output=True, text=True,
                         timeout=PLAYBOOK_LIMIT_S)
    return playbooks.Play(res.returncode, res.stdout + res.stderr)
