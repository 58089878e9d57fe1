"""Real ZooKeeper servers for tests: Debian's ``zookeeper`` package (3.8), started by PID.

``ZooKeeperServer`` runs one standalone server (or one member of an ensemble)
on 127.0.0.1 with its data in a directory of the test's; ``ZooKeeperEnsemble``
runs N of them with ``server.N`` lines, ``myid`` files and a short tick so an
election takes about two seconds. Both report their ``connect`` string and stop
by PID (SIGTERM, then SIGKILL). ``kill(i)`` SIGKILLs one member of an ensemble,
``start(i)`` brings it back on the same ports and data.

The fixtures in ``tests/conftest.py`` build on these: ``zookeeper`` is one
server for the whole test session; ``zk_connect`` gives each test a fresh
chroot on it (``127.0.0.1:PORT/t-<uuid>``), so tests never see each other's
znodes. A missing package or a server that does not answer ``ruok`` fails the
test: ``./dev test`` installs the package.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
START_LIMIT_S = 60  # a guard against a hung start, not a performance assertion


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def four_letter(port: int, word: str = "ruok", timeout: float = 2.0) -> str:
    """Send one of ZooKeeper's four-letter words; '' when the server does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One ZooKeeper JVM (see the module docstring)."""

    def __init__(self, workdir: Path, *, myid: int = 0, servers: str = "") -> None:
        if not ZOOKEEPER_JAR.exists():
            raise RuntimeError(f"{ZOOKEEPER_JAR} missing: install Debian's zookeeper package (./dev test does)")
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.myid = myid
        self.port = free_port()
        self.servers = servers  # "server.N=..." lines for an ensemble, empty for standalone
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        lines = [
            "tickTime=500", "initLimit=10", "syncLimit=5",
            f"dataDir={self.data_dir}", f"clientPort={self.port}", "clientPortAddress=127.0.0.1",
            "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr,mntr,stat",
            "maxSessionTimeout=60000",
        ]
        if self.servers:
            lines.append(self.servers)
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text("\n".join(lines) + "\n")
        return cfg

    def start(self, wait: bool = True) -> "ZooKeeperServer":
        cfg = self._write_config()
        log = open(self.workdir / "zookeeper.log", "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Dzookeeper.admin.enableServer=false",
             "-cp", f"{SLF4J_JAR}:{ZOOKEEPER_JAR}", MAIN_CLASS, str(cfg)],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True,
        )
        log.close()
        if wait:
            self.wait_serving()
        return self

    def serving(self) -> bool:
        """True when the server answers requests (``srvr`` reports a mode; ``ruok`` alone does not)."""
        return "Mode:" in four_letter(self.port, "srvr")

    def wait_serving(self, limit: float = START_LIMIT_S) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.serving():
                return
            time.sleep(0.1)
        raise RuntimeError(f"zookeeper on {self.connect} not serving after {limit}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.workdir / "zookeeper.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


class ZooKeeperEnsemble:
    """``size`` servers forming one ensemble (see the module docstring)."""

    def __init__(self, workdir: Path, size: int = 3) -> None:
        peers = [(free_port(), free_port()) for _ in range(size)]
        lines = "\n".join(f"server.{i + 1}=127.0.0.1:{p}:{e}" for i, (p, e) in enumerate(peers))
        self.servers = [ZooKeeperServer(Path(workdir) / f"zk{i + 1}", myid=i + 1, servers=lines)
                        for i in range(size)]

    @property
    def connect(self) -> str:
        return ",".join(s.connect for s in self.servers)

    def start(self) -> "ZooKeeperEnsemble":
        for s in self.servers:
            s.start(wait=False)
        for s in self.servers:
            s.wait_serving()
        return self

    def kill(self, i: int) -> None:
        self.servers[i].kill()

    def start_member(self, i: int) -> None:
        self.servers[i].start()

    def leader_index(self) -> int | None:
        for i, s in enumerate(self.servers):
            if "Mode: leader" in four_letter(s.port, "srvr"):
                return i
        return None

    def stop(self) -> None:
        for s in self.servers:
            s.stop()



def expire_session(client_id: tuple[int, bytes], gate, hosts: str) -> None:
    """Expire the session ``client_id`` (``(id, password)``) the documented ZooKeeper way: another
    client opens it and closes it.

    Its owner reaches ZooKeeper through ``gate`` (a :class:`tests.tcp_gate.TcpGate`), shut
    meanwhile: an owner that could reconnect would take its session back at once (kazoo retries
    its hosts without a pause) and cut the other client off before it closes it.
    """
    from kazoo.client import KazooClient

    gate.shut()
    try:
        other = KazooClient(hosts=hosts, client_id=client_id, timeout=10)
        other.start(timeout=30)
        other.stop()
        other.close()
    finally:
        gate.open()
