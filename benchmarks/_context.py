"""Machine context for the broker benchmark: raw disk and loopback TCP throughput.

* :func:`disk_write_mb_s` writes ``total_bytes`` of 1 MiB blocks sequentially to
  a new file in ``directory`` (the file system the broker's log dirs live on),
  then ``fsync``s it; throughput counts the time up to the end of the fsync. The
  file is removed afterwards, and the removal committed (``sync``) before the
  cases start.
* :func:`loopback_mb_s` sends ``total_bytes`` over one TCP connection on
  127.0.0.1 from a child process (1 MiB ``sendall`` calls) to this process,
  which receives into a reused buffer; throughput is measured on the receiving
  side from the first to the last byte.

Both are upper bounds the brokers cannot beat on this machine: the broker's
produce path writes to that disk and every benchmark byte crosses loopback.

* :func:`interpreter` names the Python that runs our broker and times
  ``sum(range(1000))`` in it (best of 5, µs). Builds of one CPython version
  differ by up to 2× on it (Debian's ``/usr/bin/python3``, built with PGO and
  LTO, against a plain source build such as pyenv's), and so does every
  figure of ours that CPU decides; the figure says which kind of build ran.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

BLOCK = 1 << 20


def disk_write_mb_s(directory: str | None, total_bytes: int) -> float:
    block = os.urandom(BLOCK)
    fd, path = tempfile.mkstemp(prefix="bench-disk-", dir=directory)
    try:
        start = time.perf_counter()
        written = 0
        while written < total_bytes:
            written += os.write(fd, block)
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
        # Freeing the file's blocks is a large journal transaction: commit it now, or the first
        # case's appends (our broker's, not tansu's in memory) wait for it.
        os.sync()
    return written / elapsed / 1e6


_SENDER = """
import socket, sys
port, total = int(sys.argv[1]), int(sys.argv[2])
block = b"x" * (1 << 20)
s = socket.create_connection(("127.0.0.1", port))
sent = 0
while sent < total:
    s.sendall(block)
    sent += len(block)
s.close()
"""


def loopback_mb_s(total_bytes: int) -> float:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        sender = subprocess.Popen([sys.executable, "-c", _SENDER, str(port), str(total_bytes)])
        try:
            conn, _ = server.accept()
            with conn:
                buf = bytearray(BLOCK)
                view = memoryview(buf)
                received = conn.recv_into(view)
                start = time.perf_counter()
                first = received
                while True:
                    n = conn.recv_into(view)
                    if not n:
                        break
                    received += n
                elapsed = time.perf_counter() - start
        finally:
            sender.wait(60)
    return (received - first) / max(elapsed, 1e-9) / 1e6


_PROBE = """
import sys, timeit
best = min(timeit.repeat("sum(range(1000))", number=20000, repeat=5)) / 20000
print(sys.version.split()[0], best * 1e6)
"""


def interpreter(python: str) -> str:
    """``PATH (Python X.Y.Z, sum(range(1000)) N µs)`` for the interpreter ``python``."""
    out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    version, micros = out.stdout.split()
    return f"{python} (Python {version}, sum(range(1000)) {float(micros):.1f} µs)"
