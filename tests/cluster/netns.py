"""Hosts on one machine for network partitions: network namespaces on a private bridge.

:class:`Network` makes a bridge in the root namespace holding a private /24
(``10.X.Y.0/24``, X and Y drawn until no address or route of the machine's
is in it), and one namespace per node with a veth pair into the bridge: node
``i`` is ``10.X.Y.i`` inside namespace ``<prefix>-i`` (``lo`` up, the peer named
``eth0``). The root namespace has two addresses on the bridge: ``.254``, the
source of the test's own clients, and ``.250`` for a ZooKeeper server the test
runs there (:meth:`zookeeper`), so a node can be cut off from ZooKeeper while
the clients still reach it. Before anything is sent, ``ip route get`` of every
node's address must name the bridge: otherwise traffic meant for the nodes
could leave through the machine's default route. An ``unreachable`` route for
the /24 (:mod:`tests.netguard`) keeps it so after :meth:`close` too, for a
client that outlives the network.

A partition is made of blackhole routes inside a node's namespace
(:meth:`isolate`): packets from that node to the given addresses are dropped,
which cuts TCP both ways (the replies of the other side never arrive).
:meth:`heal` removes them. No firewall tool is needed.

``run(node, ...)`` gives the command prefix that runs a process in a node's
namespace (``ip netns exec`` execs it, so the PID is the process's own).
:meth:`close` deletes the namespaces and the bridge; processes in them must be
stopped first (by the caller, by PID).
"""

from __future__ import annotations

import ipaddress
import random
import uuid
from pathlib import Path

from tests.netguard import guard, ip
from tests.zookeeper import ZooKeeperServer

CLIENT_HOST, ZOOKEEPER_HOST = 254, 250


def _free_subnet() -> ipaddress.IPv4Network:
    used = ip("-o", "-4", "addr") + ip("-4", "route", "show", "table", "all")
    rng = random.Random()
    for _ in range(100):
        net = ipaddress.IPv4Network(f"10.{rng.randrange(100, 250)}.{rng.randrange(1, 250)}.0/24")
        prefix = ".".join(str(net.network_address).split(".")[:3]) + "."
        if prefix not in used:
            return net
    raise RuntimeError("no free 10.x.y.0/24 found for the test network")


class Network:
    """Namespaces 1..size on a private bridge (see the module docstring)."""

    def __init__(self, size: int = 3) -> None:
        tag = uuid.uuid4().hex[:6]
        self.bridge = f"brct{tag}"
        self.names = {i: f"ct{tag}-{i}" for i in range(1, size + 1)}
        self.subnet = _free_subnet()
        self._made_bridge = False
        self._made: list[str] = []
        self._isolated: dict[int, list[str]] = {}

    def addr(self, host: int) -> str:
        return str(self.subnet.network_address + host)

    @property
    def zookeeper_addr(self) -> str:
        return self.addr(ZOOKEEPER_HOST)

    def node(self, i: int) -> str:
        return self.addr(i)

    def run(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.names[i]]

    def create(self) -> "Network":
        guard(self.subnet)  # stays after close(): see tests/netguard.py
        ip("link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        for host in (CLIENT_HOST, ZOOKEEPER_HOST):
            ip("addr", "add", f"{self.addr(host)}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i, ns in self.names.items():
            ip("netns", "add", ns)
            self._made.append(ns)
            outer = f"{self.bridge[:9]}v{i}"
            ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", outer, "master", self.bridge)
            ip("link", "set", outer, "up")
            ip("addr", "add", f"{self.addr(i)}/24", "dev", "eth0", netns=ns)
            ip("link", "set", "eth0", "up", netns=ns)
            ip("link", "set", "lo", "up", netns=ns)
        for i in self.names:  # nothing may leave through the machine's own routes
            route = ip("route", "get", self.addr(i))
            if f"dev {self.bridge} " not in route + " ":
                raise RuntimeError(f"ip route get {self.addr(i)} does not name {self.bridge}: {route.strip()}")
        return self

    def isolate(self, i: int, hosts: list[int]) -> None:
        """Drop everything node ``i`` sends to ``hosts`` (node numbers or ZOOKEEPER_HOST)."""
        for host in hosts:
            ip("route", "add", "blackhole", f"{self.addr(host)}/32", netns=self.names[i])
            self._isolated.setdefault(i, []).append(self.addr(host))

    def heal(self, i: int) -> None:
        for addr in self._isolated.pop(i, []):
            ip("route", "del", "blackhole", f"{addr}/32", netns=self.names[i])

    def zookeeper(self, workdir: Path) -> ZooKeeperServer:
        """A ZooKeeper server listening on the bridge's ZooKeeper address (started)."""
        return _BridgeZooKeeper(workdir, self.zookeeper_addr).start()

    def close(self) -> None:
        for ns in self._made:
            ip("netns", "del", ns, check=False)
        if self._made_bridge:
            ip("link", "del", self.bridge, check=False)


class _BridgeZooKeeper(ZooKeeperServer):
    """The tests' ZooKeeper server, listening on one address of the bridge instead of 127.0.0.1."""

    def __init__(self, workdir: Path, host: str) -> None:
        super().__init__(workdir)
        self.host = host

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        cfg = super()._write_config()
        cfg.write_text(cfg.read_text().replace("clientPortAddress=127.0.0.1", f"clientPortAddress={self.host}"))
        return cfg

    def serving(self) -> bool:
        import socket

        try:
            with socket.create_connection((self.host, self.port), timeout=2) as s:
                s.sendall(b"srvr")
                return b"Mode:" in s.recv(4096)
        except OSError:
            return False
