"""Fixtures of the broker tests beyond the suite's own (tests/conftest.py)."""

from __future__ import annotations

import pytest

#: the record lock duration of :func:`share_broker` (ms): short, so that expiries happen within a test
SHARE_LOCK_MS = 1000


@pytest.fixture
def share_broker(broker_factory):
    """A broker process whose share groups lock records for :data:`SHARE_LOCK_MS`."""
    return broker_factory({"group.share.record.lock.duration.ms": SHARE_LOCK_MS,
                           "group.share.min.record.lock.duration.ms": SHARE_LOCK_MS})
