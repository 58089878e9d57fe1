"""Broker processes for the benchmarks, and what /proc says about them.

Two kinds of broker are started, each as a child process of the benchmark on
127.0.0.1 with an ephemeral port, and each stopped by its own PID:

* :class:`OurBroker` runs ``python -m broker --config FILE`` with ``listeners``
  on port 0 and ``log.dirs`` in a temporary directory; the port is read from the
  ``broker ready: listener=HOST:PORT metrics=...`` line it prints.
* :class:`TansuBroker` runs ``tansu broker`` with the in-memory storage engine
  (tansu keeps no data on disk). tansu takes its port on the command line, so a
  free port is picked by binding port 0 first and the broker is ready once that
  port accepts connections.

:class:`ProcStats` reads ``/proc/PID/stat`` (``utime`` and ``stime``, fields 14
and 15, in clock ticks) and ``/proc/PID/status`` (``VmRSS``, ``VmHWM`` in kB).
The peak (``VmHWM``) is reset between cases by writing ``5`` to
``/proc/PID/clear_refs`` where the kernel allows it; ``hwm_reset`` says whether
that worked, and without it the peak is the peak since the broker started.
Only Linux is supported.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TANSU_BINARY = REPO_ROOT / ".cache" / "tansu" / "tansu"
READY = re.compile(r"broker ready: listener=([\d.]+):(\d+)(?: metrics=([\d.]+):(\d+))?")
START_LIMIT_S = 60.0  # a guard against a hung start
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class CpuMem:
    """A snapshot of one process: CPU seconds used so far and memory in bytes."""

    cpu_s: float
    rss_bytes: int
    hwm_bytes: int


class ProcStats:
    """Reads CPU and memory of one PID from /proc (Linux)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.hwm_reset = True

    def snapshot(self) -> CpuMem:
        with open(f"/proc/{self.pid}/stat", "rb") as f:
            stat = f.read().decode()
        # The command name (field 2) may hold spaces; fields after ")" are fixed.
        fields = stat[stat.rindex(")") + 2:].split()
        utime, stime = int(fields[11]), int(fields[12])
        rss = hwm = 0
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
        return CpuMem((utime + stime) / CLOCK_TICKS, rss, hwm)

    def context_switches(self) -> tuple[int, int]:
        """Voluntary and involuntary context switches of every thread so far (threads that ended are not counted)."""
        voluntary = involuntary = 0
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            voluntary += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches:"):
                            involuntary += int(line.split()[1])
            except FileNotFoundError:  # the thread ended meanwhile
                pass
        return voluntary, involuntary

    def reset_peak(self) -> None:
        """Reset VmHWM to the current RSS (Linux >= 4.0; needs ptrace rights)."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            self.hwm_reset = False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerBase:
    """A broker child process; ``name``, ``bootstrap``, ``pid``, ``stats``."""

    name = "?"
    deletes_topics = True  # DeleteTopics is safe to use between cases

    nice = 0  # niceness for the child (see set_nice); the same for every broker in a run

    def __init__(self, data_root: str | None = None) -> None:
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix=f"bench-{self.name}-", dir=data_root))
        self.stats: ProcStats | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def data_bytes(self) -> int:
        """Bytes the broker keeps on disk under its work directory."""
        total = 0
        for root, _dirs, files in os.walk(self.workdir):
            for name in files:
                try:
                    total += os.stat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    pass
        return total

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM this broker by PID (SIGKILL after ``timeout``); remove its data."""
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            code = self.proc.returncode
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        return code

    def stderr_tail(self, lines: int = 20) -> str:
        path = self.workdir / "stderr.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class OurBroker(BrokerBase):
    """``python -m broker`` with its log dirs in a temporary directory."""

    name = "ours"

    def __init__(self, props: dict | None = None, python: str = sys.executable,
                 data_root: str | None = None) -> None:
        super().__init__(data_root)
        self.python = python
        self.data_root = data_root
        self.props = {
            "broker.id": 0,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.workdir / "data"),
            "metrics.port": -1,
            "offsets.topic.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0,
            **(props or {}),
        }

    def fresh(self) -> "OurBroker":
        """A new, not yet started broker like this one, with an empty data directory."""
        props = {k: v for k, v in self.props.items() if k != "log.dirs"}
        return OurBroker(props, self.python, self.data_root)

    def start(self, extra_args: list[str] | None = None) -> "OurBroker":
        import yaml

        config = self.workdir / "broker.yaml"
        config.write_text(yaml.safe_dump(self.props))
        with open(self.workdir / "stderr.log", "ab") as err:
            self.proc = subprocess.Popen(
                [self.python, *(extra_args or []), "-m", "broker", "--config", str(config)],
                stdout=subprocess.PIPE, stderr=err, cwd=self.workdir, preexec_fn=_preexec(self.nice),
            )
        line = _read_line(self.proc, START_LIMIT_S)
        match = READY.search(line)
        if match is None:
            self.stop()
            raise RuntimeError(f"our broker did not start: {line!r}\n{self.stderr_tail()}")
        self.port = int(match.group(2))
        #: the /metrics port, when ``metrics.port`` is not -1
        self.metrics_port = int(match.group(4)) if match.group(4) else None
        self.stats = ProcStats(self.proc.pid)
        return self


class TansuBroker(BrokerBase):
    """tansu with ``--storage-engine memory://tansu/`` (data in memory only)."""

    name = "tansu"
    deletes_topics = False  # tansu 0.6 with memory://tansu/ exits on DeleteTopics

    def __init__(self, binary: Path | str = TANSU_BINARY) -> None:
        super().__init__()
        self.binary = str(binary)

    def fresh(self) -> "TansuBroker":
        return TansuBroker(self.binary)

    def start(self) -> "TansuBroker":
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError(f"tansu binary not found at {self.binary} (./dev bench fetches it)")
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        with open(self.workdir / "stderr.log", "ab") as err:
            self.proc = subprocess.Popen(
                [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=err, stderr=err, cwd=self.workdir, preexec_fn=_preexec(self.nice),
            )
        deadline = time.monotonic() + START_LIMIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                self.stats = ProcStats(self.proc.pid)
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not start\n{self.stderr_tail()}")


def set_nice(nice: int) -> None:
    """Run this process (threads created from now on) and every broker started later at ``nice``.

    Negative values need root; they give the benchmark precedence over other work on a shared
    machine, the same for both brokers.
    """
    if nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    BrokerBase.nice = nice


def _preexec(nice: int):
    if not nice:
        return None
    return lambda: os.setpriority(os.PRIO_PROCESS, 0, nice)


def _read_line(proc: subprocess.Popen, limit_s: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + limit_s
    buf = b""
    try:
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
    finally:
        sel.close()
    return buf.decode(errors="replace")
