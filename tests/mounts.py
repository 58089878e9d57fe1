"""Real small file systems for tests that need a disk to fill up: a tmpfs mounted for the test.

Mounting needs root; without it, or when the mount fails, the test is
skipped with the reason. The mount is always undone (lazily if busy).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest


def umount(mnt: Path) -> None:
    """Unmount ``mnt``; lazily when it is still busy."""
    if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@contextlib.contextmanager
def tmpfs(mnt: Path, options: str):
    """Mount a tmpfs with ``options`` (e.g. ``size=256k``, ``nr_inodes=64``) on the new dir ``mnt``."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        umount(mnt)
