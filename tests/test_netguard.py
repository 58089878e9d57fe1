"""tests/netguard.py: a test network's /24 never falls to the default route, bridge or no bridge."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests import netguard
from tests.cluster.netns import _free_subnet
from tests.netguard import ip

ROOT = Path(__file__).resolve().parent.parent


def _connect_error(addr: str) -> int:
    with pytest.raises(OSError) as info:
        socket.create_connection((addr, 9), timeout=5).close()
    return info.value.errno


def test_a_guarded_subnet_is_unreachable_unless_a_bridge_holds_it_and_the_guard_goes_with_its_process():
    net = _free_subnet()
    addr = str(net.network_address + 7)
    bridge = f"kpgt{uuid.uuid4().hex[:6]}"
    # A process of its own makes the guard and exits, as a finished test session does.
    subprocess.run([sys.executable, "-c", f"import ipaddress; from tests import netguard; "
                    f"netguard.guard(ipaddress.IPv4Network('{net}'))"], check=True, cwd=ROOT)
    try:
        assert [pid for n, pid in netguard.guards() if n == net], netguard.guards()
        # No bridge: refused on this machine, nothing sent out by the default route.
        assert subprocess.run(["ip", "route", "get", addr], capture_output=True).returncode != 0
        assert _connect_error(addr) == errno.EHOSTUNREACH

        # A bridge holding the /24: its own route wins over the guard.
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{net.network_address + 254}/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        assert f"dev {bridge} " in ip("route", "get", addr)
        ip("link", "del", bridge)
        assert _connect_error(addr) == errno.EHOSTUNREACH  # gone again with the bridge

        # The process that made the guard has exited: the next guard of any network drops it.
        netguard.drop_stale_guards()
        assert not [pid for n, pid in netguard.guards() if n == net]
    finally:
        ip("link", "del", bridge, check=False)
        for n, pid in netguard.guards():
            if n == net:
                ip("route", "del", "unreachable", str(n), "metric", str(netguard.GUARD_METRIC_BASE + pid),
                   check=False)
