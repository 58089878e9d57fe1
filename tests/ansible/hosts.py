"""Test hosts for the Ansible playbooks: Debian bookworm machines booted with
``systemd-nspawn --boot`` on this one machine, each with its own network
namespace and loop-device data disks, reached over ssh as a real host is.

The layout::

    CACHE/bookworm-DIGEST     debootstrapped once (minbase + systemd, sshd, python3,
                              and the heavy packages the roles install, so that their
                              ``apt`` tasks find them present: the hosts have no network
                              beyond their bridge); DIGEST is of the package list, so
                              another list builds another root (an old one is removed
                              once no overlay uses it)
    WORK/NAME/{upper,work,root}  an overlay of that root per host (its writes go to upper)
    WORK/NAME/diskN.img       sparse files behind the host's loop devices

    root namespace: bridge kpbrXXXX, address SUBNET.254/24
      └─ veth kpXXXXhN  <->  eth0 in netns kpXXXX-NAME, address SUBNET.(10+N)/24,
                             default route to SUBNET.253 (unused: facts such as
                             ansible_default_ipv4 exist, nothing leaves the bridge)

A host's apt lists are stamped fresh at boot (``update-success-stamp``): a role's
``apt`` task with ``cache_valid_time`` then does not try to reach a mirror.

The /24 is one of 10.213.0.0/16 that no address or route of this machine
covers; before any traffic, ``ip route get`` of a host's address must name
the bridge (else packets would leave by the default route), and an
``unreachable`` route for the /24 (:mod:`tests.netguard`) keeps a client that
outlives the hosts from sending there by the default route. Teardown stops
only the nspawn processes this module started (SIGTERM: systemd powers the
host off; SIGKILL after a grace period), deletes its namespaces, bridge and
loop devices and unmounts its overlays. Building and booting need root.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests import netguard

CACHE = Path(os.environ.get("KAFKAPY_TEST_CACHE", "/var/cache/kafkapy-tests"))
MIRROR = "http://deb.debian.org/debian"
# systemd as PID 1, sshd, what Ansible's modules need (python3-apt for apt, python3-packaging
# for pip, acl for become_user), and what the roles install: present beforehand, their apt tasks change nothing.
PACKAGES = ["systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-venv", "python3-apt",
            "python3-packaging",
            "iproute2", "procps", "acl", "xfsprogs", "zookeeper", "default-jre-headless", "prometheus",
            "prometheus-node-exporter", "libgssapi-krb5-2", "krb5-user"]
# Enabled by their packages; on a real host they run only where a role enables them.
DISABLED_UNITS = ["prometheus.service", "systemd-networkd-wait-online.service"]
BOOT_LIMIT_S = 60
STOP_GRACE_S = 20
DISK_SIZE = 1 << 30


def run(*argv: str, input: str | None = None, check: bool = True, timeout: float = 600) -> str:
    res = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {res.returncode}: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def _in_root(root: Path, script: str, timeout: float = 1800) -> None:
    run("systemd-nspawn", "-q", "--register=no", "--keep-unit", "-D", str(root), "--pipe",
        "sh", "-ec", script, timeout=timeout)


def _root_path() -> Path:
    """The cached root for this package list (another list, another root: one in use stays)."""
    digest = hashlib.sha256("\n".join(PACKAGES).encode()).hexdigest()[:12]
    return CACHE / f"bookworm-{digest}"


def ensure_root() -> Path:
    """The cached root, built (about 3 minutes, from Debian's mirror) if missing; roots of other
    package lists that no overlay uses any more are removed."""
    root = _root_path()
    if (root / ".kafkapy-root").is_file():
        return root
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be building it
        if (root / ".kafkapy-root").is_file():
            return root
        building = root.with_name(root.name + ".building")
        if not (building / ".debootstrapped").is_file():
            shutil.rmtree(building, ignore_errors=True)
            run("debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(building), MIRROR,
                timeout=1800)
            (building / ".debootstrapped").touch()
        _in_root(building, "export DEBIAN_FRONTEND=noninteractive; apt-get update -q; "
                 f"apt-get install -y -q --no-install-recommends {' '.join(PACKAGES)}")
        _in_root(building, f"systemctl disable {' '.join(DISABLED_UNITS)} || true; "
                 "systemctl mask systemd-resolved.service console-getty.service || true")
        (building / ".kafkapy-root").write_text("\n".join(PACKAGES) + "\n")
        building.rename(root)
        in_use = Path("/proc/mounts").read_text()
        for old in CACHE.glob("bookworm-*"):
            if old != root and not old.name.endswith(".building") and f"lowerdir={old}," not in in_use:
                shutil.rmtree(old, ignore_errors=True)
    return root


@dataclass
class Host:
    name: str
    address: str
    disks: list[str]
    dir: Path
    netns: str
    veth: str
    loop_files: list[Path] = field(default_factory=list)
    process: subprocess.Popen | None = None

    @property
    def root(self) -> Path:
        return self.dir / "root"


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.213.0.0/16 that no address or route of this machine covers."""
    taken = [ipaddress.ip_interface(word).network for line in run("ip", "-o", "-4", "addr").splitlines()
             for i, word in enumerate(line.split()) if i > 0 and line.split()[i - 1] == "inet"]
    routes = [ipaddress.ip_network(route["dst"]) for route in json.loads(run("ip", "-j", "-4", "route"))
              if route["dst"] != "default"]  # of every type: a guard (tests/netguard.py) covers its /24 too
    for _ in range(200):
        net = ipaddress.ip_network(f"10.213.{random.randrange(256)}.0/24")
        if not any(net.overlaps(other) for other in taken + routes):
            return net
    raise RuntimeError("no free /24 in 10.213.0.0/16")


class Hosts:
    """Booted test hosts (see the module docstring); a context manager that tears them all down."""

    def __init__(self, work: Path, names: list[str], disks_each: int = 2) -> None:
        self.work = work
        self.names = names
        self.disks_each = disks_each
        self.tag = f"{random.randrange(16 ** 4):04x}"
        self.bridge = f"kpbr{self.tag}"
        self.subnet = _free_subnet()
        self.gateway = str(self.subnet[254])  # the root namespace's address on the bridge
        self.hosts: list[Host] = []
        self.private_key = work / "id_ed25519"
        self._bridge_made = False

    def __enter__(self) -> "Hosts":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getitem__(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def _start(self) -> None:
        root = ensure_root()
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.private_key))
        netguard.guard(self.subnet)  # stays after close(): see tests/netguard.py
        run("ip", "link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for n, name in enumerate(self.names, start=1):
            self._make(root, n, name)
        etc_hosts = "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in self.hosts)
        for host in self.hosts:
            (host.root / "etc/hosts").write_text(etc_hosts)
        for host in self.hosts:
            route = run("ip", "route", "get", host.address)
            if f"dev {self.bridge} " not in route:
                raise RuntimeError(f"{host.address} would not go through {self.bridge}: {route.strip()}")
        for host in self.hosts:
            self._boot(host)
        for host in self.hosts:
            self._await_ssh(host)

    def _make(self, root: Path, n: int, name: str) -> None:
        d = self.work / name
        for sub in ("upper", "work", "root"):
            (d / sub).mkdir(parents=True)
        host = Host(name, str(self.subnet[10 + n]), [], d, f"kp{self.tag}-{name}", f"kp{self.tag}h{n}")
        run("mount", "-t", "overlay", "overlay", "-o",
            f"lowerdir={root},upperdir={d / 'upper'},workdir={d / 'work'}", str(host.root))
        self.hosts.append(host)  # from here on close() undoes it
        ssh_dir = host.root / "root/.ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(self.private_key.with_suffix(".pub").read_text())
        (host.root / "etc/hostname").write_text(name + "\n")
        # The hosts reach no mirror: their package lists count as fresh (apt's
        # cache_valid_time), the packages the roles want being in the root already.
        stamp = host.root / "var/lib/apt/periodic/update-success-stamp"
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        run("ip", "netns", "add", host.netns)
        run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        run("ip", "link", "set", host.veth, "master", self.bridge, "up")
        ns = ("ip", "-n", host.netns)
        run(*ns, "link", "set", "lo", "up")
        run(*ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        run(*ns, "link", "set", "eth0", "up")
        run(*ns, "route", "add", "default", "via", str(self.subnet[253]))
        for i in range(1, self.disks_each + 1):
            image = d / f"disk{i}.img"
            with open(image, "wb") as f:
                f.truncate(DISK_SIZE)
            host.loop_files.append(image)
            host.disks.append(run("losetup", "-f", "--show", str(image)).strip())

    def _boot(self, host: Host) -> None:
        argv = ["systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--console=passive", "-q",
                "-D", str(host.root), f"--machine={host.name}", f"--network-namespace-path=/run/netns/{host.netns}"]
        argv += [f"--bind={disk}" for disk in host.disks]
        log = open(host.dir / "console.log", "wb")
        host.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()

    def _await_ssh(self, host: Host) -> None:
        deadline = time.monotonic() + BOOT_LIMIT_S
        while time.monotonic() < deadline:
            if host.process.poll() is not None:
                raise RuntimeError(f"{host.name}: systemd-nspawn exited {host.process.returncode}: "
                                   f"{(host.dir / 'console.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((host.address, 22), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{host.name}: no sshd on {host.address}:22 after {BOOT_LIMIT_S} s")

    def ssh(self, host: Host, command: str, check: bool = True, timeout: float = 120) -> str:
        """Run a shell command on ``host`` as root."""
        return run("ssh", *self.ssh_options(), f"root@{host.address}", command, check=check, timeout=timeout)

    def ssh_options(self) -> list[str]:
        return ["-i", str(self.private_key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]

    def close(self) -> None:
        for host in self.hosts:
            if host.process is not None and host.process.poll() is None:
                host.process.send_signal(signal.SIGTERM)
        for host in self.hosts:
            if host.process is not None:
                try:
                    host.process.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    os.killpg(host.process.pid, signal.SIGKILL)
                    host.process.wait(STOP_GRACE_S)
        for host in self.hosts:
            run("umount", str(host.root), check=False)
            if subprocess.run(["mountpoint", "-q", str(host.root)]).returncode == 0:
                run("umount", "-l", str(host.root), check=False)
            for disk in host.disks:
                run("losetup", "-d", disk, check=False)
            run("ip", "netns", "del", host.netns, check=False)
            run("ip", "link", "del", host.veth, check=False)
            shutil.rmtree(host.dir, ignore_errors=True)
        if self._bridge_made:
            run("ip", "link", "del", self.bridge, check=False)
        self.hosts = []
