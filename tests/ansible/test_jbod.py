"""The ``jbod`` role against real loop devices on this machine (``connection: local``).

Disks are sparse files behind loop devices; mounts go under the test's tmp dir
and into a tmp fstab (``jbod_fstab``), so the machine's own ``/etc/fstab`` is
untouched. Finalizers unmount and detach only the devices a test made.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.ansible import playbooks
from tests.mounts import umount

# mkfs.xfs refuses file systems under 300 MiB; sparse, so they cost nothing.
DISK_SIZE = 320 << 20


def blkid(device: str) -> dict[str, str]:
    out = subprocess.run(["blkid", "-p", "-o", "export", device], capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def mounts_of(device: str) -> list[tuple[str, str]]:
    """(target, options) of every mount of ``device``."""
    out = subprocess.run(["findmnt", "-n", "-r", "-o", "TARGET,OPTIONS", "--source", device],
                         capture_output=True, text=True).stdout
    return [tuple(line.split(" ", 1)) for line in out.splitlines()]


@pytest.fixture
def disks(tmp_path):
    """``make(n)``: n new loop devices over sparse files in tmp_path."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root (./dev test runs as root in CI)")
    made: list[str] = []

    def make(n: int) -> list[str]:
        devices = []
        for _ in range(n):
            image = tmp_path / f"disk{len(made)}.img"
            with open(image, "wb") as f:
                f.truncate(DISK_SIZE)
            device = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True,
                                    check=True).stdout.strip()
            made.append(device)
            devices.append(device)
        return devices

    yield make
    for device in made:
        for target, _ in mounts_of(device):
            umount(Path(target))
        subprocess.run(["losetup", "-d", device], capture_output=True)


def jbod_play(tmp_path: Path, devices: list[str], **extra) -> Path:
    """A playbook running the role on this machine for ``devices``, mounting under tmp_path/data."""
    variables = {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
                 "jbod_disks": devices, "jbod_mount_root": str(tmp_path / "data"),
                 "jbod_fstab": str(tmp_path / "fstab"), "jbod_owner": "nobody", "jbod_group": "nogroup", **extra}
    path = tmp_path / f"jbod-{len(list(tmp_path.glob('jbod-*.yml')))}.yml"
    # JSON is YAML.
    path.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "vars": variables,
                                 "roles": ["jbod"]}]))
    (tmp_path / "fstab").touch()
    return path


def test_formats_labels_and_mounts_by_uuid_then_changes_nothing(tmp_path, disks):
    devices = disks(2)
    play = jbod_play(tmp_path, devices)

    checked = playbooks.run(play, "--check")
    assert checked.returncode == 0, checked.output[-3000:]
    assert checked.recap()["changed"] > 0
    assert [blkid(d) for d in devices] == [{}, {}], "check mode formatted a disk"
    assert (tmp_path / "fstab").read_text() == ""

    first = playbooks.run(play)
    assert first.returncode == 0, first.output[-3000:]
    fstab = (tmp_path / "fstab").read_text().splitlines()
    uuids = []
    for i, device in enumerate(devices):
        found = blkid(device)
        assert (found["TYPE"], found["LABEL"]) == ("xfs", f"kafka-disk{i}")
        uuids.append(found["UUID"])
        mount_point = tmp_path / "data" / f"disk{i}"
        [(target, options)] = mounts_of(device)
        assert target == str(mount_point)
        assert "noatime" in options.split(",")
        assert f"UUID={found['UUID']} {mount_point} xfs noatime,nofail 0 0" in fstab
        assert mount_point.owner() == "nobody" and mount_point.group() == "nogroup"
        assert oct(mount_point.stat().st_mode & 0o777) == "0o750"
    (tmp_path / "data" / "disk0" / "kept").write_text("a log segment")

    second = playbooks.run(play)
    assert second.returncode == 0, second.output[-3000:]
    assert second.recap()["changed"] == 0, second.output[-3000:]
    assert [blkid(d)["UUID"] for d in devices] == uuids
    assert (tmp_path / "data" / "disk0" / "kept").read_text() == "a log segment"


def test_refuses_a_foreign_file_system_unless_forced(tmp_path, disks):
    [device] = disks(1)
    subprocess.run(["mkfs.ext4", "-q", "-L", "backups", device], check=True)

    refused = playbooks.run(jbod_play(tmp_path, [device]))
    assert refused.returncode != 0
    assert (f"jbod: {device} holds a file system of type ext4 labelled 'backups', which this role did not make"
            in refused.message()), refused.output[-3000:]
    assert "set jbod_force_format: true to wipe it" in refused.message()
    assert blkid(device)["TYPE"] == "ext4" and mounts_of(device) == []

    forced = playbooks.run(jbod_play(tmp_path, [device], jbod_force_format=True))
    assert forced.returncode == 0, forced.output[-3000:]
    found = blkid(device)
    assert (found["TYPE"], found["LABEL"]) == ("xfs", "kafka-disk0")
    assert mounts_of(device)[0][0] == str(tmp_path / "data" / "disk0")


def test_never_formats_a_mounted_disk(tmp_path, disks):
    [device] = disks(1)
    subprocess.run(["mkfs.ext4", "-q", device], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["mount", device, str(elsewhere)], check=True)
    (elsewhere / "data").write_text("someone's data")

    refused = playbooks.run(jbod_play(tmp_path, [device], jbod_force_format=True))
    assert refused.returncode != 0
    assert (f"jbod: {device} is mounted on {elsewhere} and holds a file system of type ext4 without a label"
            in refused.message()), refused.output[-3000:]
    assert "a mounted disk is never formatted" in refused.message()
    assert blkid(device)["TYPE"] == "ext4"
    assert (elsewhere / "data").read_text() == "someone's data"
