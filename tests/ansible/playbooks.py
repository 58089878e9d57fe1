"""Running ``ansible-playbook`` from the test suite against this machine (``connection: local``).

The roles are found in ``ansible/roles`` and ``ansible/ansible.cfg`` applies, as
when an operator runs a playbook from ``ansible/``. :func:`run` returns the
exit code, the whole output and the PLAY RECAP's counts, so a test can assert
what changed (``changed=0`` on a second run) and read a role's failure message.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"
BIN = Path(sys.executable).parent
# A guard against a hung play, not a performance assertion.
PLAY_LIMIT_S = 600
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@dataclass
class Play:
    returncode: int
    output: str

    def recap(self, host: str = "localhost") -> dict[str, int]:
        for m in RECAP.finditer(self.output):
            if m[1] == host:
                return {"ok": int(m[2]), "changed": int(m[3]), "unreachable": int(m[4]), "failed": int(m[5])}
        raise AssertionError(f"no PLAY RECAP for {host}:\n{self.output[-3000:]}")

    def message(self) -> str:
        """The output joined into one line, for matching a role's (wrapped) failure message."""
        return " ".join(self.output.split())


def env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
            "ANSIBLE_ROLES_PATH": str(ANSIBLE_DIR / "roles"), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}


def run(playbook: Path, *args: str, inventory: str = "localhost,") -> Play:
    res = subprocess.run([str(BIN / "ansible-playbook"), "-i", inventory, str(playbook), *args], cwd=ANSIBLE_DIR,
                         env=env(), capture_output=True, text=True, timeout=PLAY_LIMIT_S)
    return Play(res.returncode, res.stdout + res.stderr)
