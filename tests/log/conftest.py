"""Fixtures for the log tests (helpers live in log_helpers.py)."""

from __future__ import annotations

import pytest

from broker.log import Log, LogConfig


@pytest.fixture
def open_log(tmp_path):
    """Open logs under tmp_path; all are closed at the end of the test."""
    logs = []

    def _open(config: LogConfig | None = None, name: str = "topic-0", **kw) -> Log:
        log = Log.open(tmp_path / name, config or LogConfig(), **kw)
        logs.append(log)
        return log

    yield _open
    for log in logs:
        log.close()
