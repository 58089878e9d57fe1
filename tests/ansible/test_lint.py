"""ansible-lint (production profile, ansible/.ansible-lint) and ``--syntax-check`` of every playbook."""

from __future__ import annotations

import subprocess

from tests.ansible import playbooks

DIR = playbooks.ANSIBLE_DIR


def test_ansible_lint_passes():
    res = subprocess.run([str(playbooks.BIN / "ansible-lint")], cwd=DIR, env=playbooks.env(), capture_output=True,
                         text=True, timeout=playbooks.PLAY_LIMIT_S)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in res.stderr


def test_every_playbook_passes_syntax_check():
    books = sorted(p.name for p in DIR.glob("*.yml") if p.name != "inventory.example.yml")
    assert "site.yml" in books
    res = subprocess.run([str(playbooks.BIN / "ansible-playbook"), "--syntax-check", "-i", "inventory.example.yml",
                          *books], cwd=DIR, env=playbooks.env(), capture_output=True, text=True,
                         timeout=playbooks.PLAY_LIMIT_S)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert res.stdout.count("playbook: ") == len(books)
