"""Helpers for the kafkactl cluster-command tests: run the CLI as a subprocess
(``python -m kafkactl``) against the ``broker`` fixture from tests/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

RUN_LIMIT_S = 60  # a guard against a hung command, not a performance assertion


class Ctl:
    """``ctl("topics", "list")`` runs ``kafkactl -b <broker> topics list``; ``ctl.json(...)``
    adds ``--output json`` and parses stdout."""

    def __init__(self, bootstrap: str | None) -> None:
        self.bootstrap = bootstrap

    def __call__(self, *args: str, input: bytes | str | None = None, env: dict | None = None,
                 bootstrap: str | None = None) -> subprocess.CompletedProcess:
        server = bootstrap or self.bootstrap
        argv = [sys.executable, "-m", "kafkactl"] + (["-b", server] if server else []) + list(args)
        return run(argv, input=input, env=env)

    def json(self, *args: str, **kw):
        res = self("--output", "json", *args, **kw)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def lines(self, *args: str, **kw) -> list:
        """``--output json`` for commands that write one JSON object per line."""
        res = self("--output", "json", *args, **kw)
        assert res.returncode == 0, res.stderr
        return [json.loads(line) for line in res.stdout.splitlines()]


def run(argv: list[str], input=None, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("KAFKACTL_DEBUG", None)
    text = not isinstance(input, bytes)
    return subprocess.run(argv, input=input, capture_output=True, text=text, timeout=RUN_LIMIT_S, env=full_env)


def one_line_error(res: subprocess.CompletedProcess, code: int) -> str:
    """Assert the command failed with ``code`` and said so in exactly one line, no traceback."""
    err = res.stderr if isinstance(res.stderr, str) else res.stderr.decode()
    assert res.returncode == code, (res.returncode, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kafkactl: ")
    return lines[0]


@pytest.fixture
def ctl(broker) -> Ctl:
    return Ctl(broker.bootstrap)
