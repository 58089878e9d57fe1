"""Keep a test network's addresses off the machine's default route, also after the network is gone.

A test network is a bridge in the root namespace holding a private /24
(:mod:`tests.cluster.netns`, :mod:`tests.ansible.hosts`). Before anything is
sent, ``ip route get`` must name that bridge. Teardown deletes the bridge, but
a client of the test can outlive it: a producer held by a failed test's
traceback keeps reconnecting, its librdkafka threads running until the object
goes. With the bridge gone, the /24 would fall to the default route and those
packets would leave the machine.

So :func:`guard`, called before the bridge is made, adds an ``unreachable``
route for the /24 with a high metric:

- while the bridge exists, its own connected route (metric 0) wins;
- once the bridge is gone, sending there fails on this machine
  (``EHOSTUNREACH``) and nothing leaves.

The guard outlives the bridge for as long as the process that made it lives.
Its metric is ``GUARD_METRIC_BASE`` plus that process's PID, and every
:func:`guard` first removes the guards of processes that have exited
(:func:`drop_stale_guards`). So after a test session one route per test network
stays on the machine, and the next session removes them.

:func:`ip` runs the ``ip`` tool for the test networks (in a namespace if asked).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess

GUARD_METRIC_BASE = 1_000_000
_PID_LIMIT = 1 << 22  # Linux's largest pid_max


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """Run ``ip ARGS`` (inside network namespace ``netns`` if given); its stdout."""
    cmd = ["ip", *(["netns", "exec", netns, "ip"] if netns else []), *args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return out.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def guards() -> list[tuple[ipaddress.IPv4Network, int]]:
    """Every guard route on this machine: (its /24, the PID of the process that made it)."""
    found = []
    for route in json.loads(ip("-j", "-4", "route", "show", "type", "unreachable") or "[]"):
        pid = route.get("metric", 0) - GUARD_METRIC_BASE
        if 0 < pid < _PID_LIMIT:
            found.append((ipaddress.IPv4Network(route["dst"]), pid))
    return found


def drop_stale_guards() -> None:
    """Remove the guards of processes that have exited (their clients are gone with them)."""
    for net, pid in guards():
        if not _alive(pid):
            ip("route", "del", "unreachable", str(net), "metric", str(GUARD_METRIC_BASE + pid), check=False)


def guard(subnet: ipaddress.IPv4Network) -> None:
    """Make ``subnet`` unreachable from this machine except through a bridge that holds it (see above)."""
    drop_stale_guards()
    ip("route", "add", "unreachable", str(subnet), "metric", str(GUARD_METRIC_BASE + os.getpid()))
