"""Connection limits, as Kafka 2.7's ``ConnectionQuotas`` (KIP-402, and KIP-612's broker and listener rates).

What an operator sets (each also changed on a running broker, per broker or as the cluster
default, like Kafka's dynamic broker configs; see :mod:`broker.server.dynamic_config`):

``max.connections.per.ip`` and ``max.connections.per.ip.overrides``
    Connections one client address may hold, on all listeners together. A connection beyond
    that is closed as soon as it is accepted, with one INFO line ("Rejected connection from
    ADDR, address already has the configured maximum of N connections."), as Kafka does.
    Overrides are ``host:count,...``; a host name counts for each address it resolves to, looked
    up when the setting is read. ``0`` is allowed only with overrides: only the addresses named
    there may connect. An IPv4-mapped IPv6 address counts as its IPv4 address.

``max.connections`` and ``listener.name.<l>.max.connections``
    Connections the broker, and each listener, holds at most. At the limit a listener stops
    accepting: the next connection waits, accepted by the kernel, in the listen backlog (the
    listener holds one accepted socket) until a connection closes or the limit is raised.
    Connections are counted from their accept, TLS handshakes included, until they close. A
    listener without a limit of its own takes the broker-wide value (Kafka's
    ``valuesWithPrefixOverride``).

    The inter-broker listener, when the broker has more than one listener, is exempt from the
    broker-wide limit (only its listener limit holds): replication and the controller keep
    working when clients take every connection. When its connections take the broker over the
    broker-wide limit, or the limit is lowered below the connections open, the least recently
    active connection of another listener is closed, one at a time, until the broker is within
    it again (Kafka's ``closeExcessConnections``).

``max.connection.creation.rate`` and ``listener.name.<l>.max.connection.creation.rate``
    New connections per second (KIP-612), measured the way client quotas are
    (``quota.window.num`` samples of ``quota.window.size.seconds``). Every accept is counted;
    when the rate is above the limit the listener waits ``(rate - limit) / limit * window``,
    at most one window, before it accepts the next connection. Both the broker-wide rate
    (not on the inter-broker listener) and the listener's rate are counted, and the longer
    wait holds. A listener without a rate of its own takes the broker-wide value.

``connection_creation_rate`` of a client address (a client quota of an ``ip`` entity, Kafka 2.8;
:class:`broker.server.quotas.IpConnectionQuota`)
    Checked after the waits above: a connection that would take its address over its rate is not
    taken (:class:`ConnectionThrottled`): the listener holds the socket, unread, for the throttle
    time and then closes it, so that the client does not come straight back; it is taken back out of
    the broker's and the listener's rates and counts nowhere.

Invariant: every accepted socket holds exactly one :class:`ConnectionSlot` from its accept
until its close (:meth:`ConnectionSlot.release` is idempotent), so the counts return to zero
when every connection has closed, whichever way it closed (refused, TLS handshake failed,
closed by the client, by the broker, at shutdown).

Metrics: ``kafkapy_listener_connections{listener}`` and ``kafkapy_listener_max_connections``,
``kafkapy_connections_refused_total{listener,limit}`` (``max.connections.per.ip``, or
``max.connections`` for a connection closed to make room), ``kafkapy_acceptor_blocked_seconds_total``
(time a listener did not accept because of a limit or the rate; Kafka's
``AcceptorBlockedPercent``), ``kafkapy_connection_accept_throttle_seconds_total`` and
``kafkapy_connection_accept_throttled_total`` (the rate's waits; Kafka's
``connection-accept-throttle-time`` is their quotient).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from broker.server.quotas import Rate

if TYPE_CHECKING:
    from broker.metrics import BrokerMetrics

log = logging.getLogger("broker.network")

INT_MAX = 2**31 - 1
#: The settings this module reads, and the ones a listener may set for itself
SETTINGS = ("max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
            "max.connection.creation.rate")
LISTENER_SETTINGS = ("max.connections", "max.connection.creation.rate")


def client_address(host: str) -> str:
    """The address a connection counts against: an IPv4-mapped IPv6 address as IPv4, IPv6 without a scope."""
    bare = host.partition("%")[0]
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return host
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def resolve_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """Blocking: ``{host: count}`` -> ``{address: count}``. A name that does not resolve is an error
    (ValueError), as in Kafka, where ``InetAddress.getByName`` fails the config."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            out[client_address(str(ipaddress.ip_address(host)))] = count
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ValueError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None
        for info in infos:
            out[client_address(info[4][0])] = count
    return out


class ConnectionThrottled(Exception):
    """The address is over its connection_creation_rate: close the socket after ``delay_s``."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s)
        self.delay_s = delay_s


class ConnectionSlot:
    """One accepted socket's place in the counts; :meth:`release` gives it back, once."""

    __slots__ = ("_quotas", "listener", "address", "_held")

    def __init__(self, quotas: "ConnectionQuotas", listener: str, address: str) -> None:
        self._quotas, self.listener, self.address = quotas, listener, address
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._quotas._release(self)


class ConnectionQuotas:
    """The counts and limits of one broker's connections; loop-only. See the module docstring."""

    def __init__(self, listeners: Iterable[str], protected: str | None, metrics: "BrokerMetrics | None",
                 samples: int, window_s: int,
                 close_least_active: Callable[[set[str], int], int] | None = None,
                 ip_rate: Callable[[str], float] | None = None) -> None:
        self.listeners = list(listeners)
        #: The inter-broker listener when there are several (exempt from the broker-wide limit and rate)
        self.protected = protected if len(self.listeners) > 1 else None
        self.metrics = metrics
        self._samples, self._window_ms = samples, window_s * 1000.0
        self._max_throttle_ms = window_s * 1000.0
        #: Closes the N least recently active connections on the given listeners; how many it closed
        self._close_least_active = close_least_active
        #: Counts an accept against the address's connection_creation_rate: 0, or the throttle in ms (not counted)
        self._ip_rate = ip_rate
        self._ip_logged: dict[str, float] = {}
        self.per_ip = INT_MAX
        self.per_ip_overrides: dict[str, int] = {}
        self.max_connections = INT_MAX
        self.rate_limit = INT_MAX
        self.listener_max: dict[str, int] = {name: INT_MAX for name in self.listeners}
        self.listener_rate_limit: dict[str, int] = {name: INT_MAX for name in self.listeners}
        self.counts: dict[str, int] = {}
        self.listener_counts: dict[str, int] = {name: 0 for name in self.listeners}
        self.total = 0
        self._rate = Rate(samples, self._window_ms)
        self._listener_rates = {name: Rate(samples, self._window_ms) for name in self.listeners}
        self._waiters: list[asyncio.Future] = []

    # -- settings ----------------------------------------------------------------------
    def configure(self, values: dict[str, Any], listener_values: dict[str, dict[str, Any]],
                  overrides: dict[str, int]) -> None:
        """Put new limits to work: ``values`` the broker-wide settings (:data:`SETTINGS`), ``listener_values``
        each listener's own (:data:`LISTENER_SETTINGS`), ``overrides`` resolved (:func:`resolve_overrides`)."""
        changed = []
        for attr, name in (("per_ip", "max.connections.per.ip"), ("max_connections", "max.connections"),
                           ("rate_limit", "max.connection.creation.rate")):
            if getattr(self, attr) != values[name]:
                setattr(self, attr, values[name])
                changed.append(f"{name}={values[name]}")
        if overrides != self.per_ip_overrides:
            self.per_ip_overrides = dict(overrides)
            changed.append("max.connections.per.ip.overrides=" +
                           ",".join(f"{k}:{v}" for k, v in sorted(overrides.items())))
        for name in self.listeners:
            own = listener_values.get(name, {})
            limit = own.get("max.connections", self.max_connections)
            rate = own.get("max.connection.creation.rate", self.rate_limit)
            if (limit, rate) != (self.listener_max[name], self.listener_rate_limit[name]):
                self.listener_max[name], self.listener_rate_limit[name] = limit, rate
                changed.append(f"listener {name}: max.connections={limit} max.connection.creation.rate={rate}")
            if self.metrics is not None:
                self.metrics.listener_max_connections.labels(name).set(limit)
        if changed:
            log.info("connection limits: %s", "; ".join(changed))
        self._wake()
        self.close_excess()

    # -- accepting -----------------------------------------------------------------------
    async def admit(self, listener: str, host: str) -> ConnectionSlot | None:
        """Called by a listener's acceptor with each socket it accepted, before anything else is done with it.

        Counts the accept against the rates and waits (the listener accepts nothing meanwhile) for the
        rates' throttle and for a free place under the listener's and the broker's limits; then takes
        the per-address limit: None when the address holds its maximum already (the caller closes the
        socket), else the slot the connection holds until it closes.
        """
        loop = asyncio.get_running_loop()
        throttle_ms = self._record_accept(listener)
        if throttle_ms > 0 or not self._slot_available(listener):
            started = loop.time()
            until = started + throttle_ms / 1000.0
            if throttle_ms > 0 and self.metrics is not None:
                self.metrics.connection_accept_throttle.labels(listener).inc(throttle_ms / 1000.0)
                self.metrics.connection_accept_throttled.labels(listener).inc()
            while True:
                remaining = until - loop.time()
                if remaining <= 0 and self._slot_available(listener):
                    break
                waiter = loop.create_future()
                self._waiters.append(waiter)
                if remaining > 0:
                    handle = loop.call_later(remaining, _settle, waiter)
                    try:
                        await waiter
                    finally:
                        handle.cancel()
                else:
                    await waiter
            if self.metrics is not None:
                self.metrics.acceptor_blocked.labels(listener).inc(loop.time() - started)
        address = client_address(host)
        if self._ip_rate is not None:
            ip_throttle_ms = self._ip_rate(address)
            if ip_throttle_ms > 0:
                self._unrecord_accept(listener)
                if self.metrics is not None:
                    self.metrics.connections_refused.labels(listener, "connection_creation_rate").inc()
                now = time.monotonic()
                if now - self._ip_logged.get(address, -1e9) >= 60:  # one line per address a minute
                    self._ip_logged = {a: t for a, t in self._ip_logged.items() if now - t < 60}
                    self._ip_logged[address] = now
                    log.info("Throttled connection from %s on listener %s: over its connection_creation_rate "
                             "quota; closing it in %d ms (more are counted in kafkapy_connections_refused_total)",
                             address, listener, ip_throttle_ms)
                raise ConnectionThrottled(ip_throttle_ms / 1000.0)
        limit = self.per_ip_overrides.get(address, self.per_ip)
        if self.counts.get(address, 0) >= limit:
            log.info("Rejected connection from %s on listener %s, address already has the configured maximum "
                     "of %d connections.", address, listener, limit)
            if self.metrics is not None:
                self.metrics.connections_refused.labels(listener, "max.connections.per.ip").inc()
            return None
        self.counts[address] = self.counts.get(address, 0) + 1
        self.listener_counts[listener] += 1
        self.total += 1
        if self.metrics is not None:
            self.metrics.listener_connections.labels(listener).inc()
        if listener == self.protected:
            self.close_excess()
        return ConnectionSlot(self, listener, address)

    def _release(self, slot: ConnectionSlot) -> None:
        count = self.counts.get(slot.address, 0)
        if count <= 1:
            self.counts.pop(slot.address, None)
        else:
            self.counts[slot.address] = count - 1
        self.listener_counts[slot.listener] -= 1
        self.total -= 1
        if self.metrics is not None:
            self.metrics.listener_connections.labels(slot.listener).dec()
        self._wake()

    def _slot_available(self, listener: str) -> bool:
        if self.listener_counts[listener] >= self.listener_max[listener]:
            return False
        return listener == self.protected or self.total < self.max_connections

    def close_excess(self) -> None:
        """Over the broker-wide limit (the inter-broker listener's connections, or a lowered limit): close the
        least recently active connections of the other listeners until within it."""
        excess = self.total - self.max_connections
        if excess > 0 and self._close_least_active is not None:
            self._close_least_active({name for name in self.listeners if name != self.protected}, excess)

    def _record_accept(self, listener: str) -> float:
        """Count one accept in the listener's rate and (but on the inter-broker listener) the broker's; the
        longer throttle in ms (0: within both)."""
        now_ms = time.monotonic() * 1000.0
        throttle = self._throttle(self._listener_rates[listener], self.listener_rate_limit[listener], now_ms)
        if listener != self.protected:
            throttle = max(throttle, self._throttle(self._rate, self.rate_limit, now_ms))
        return throttle

    def _unrecord_accept(self, listener: str) -> None:
        """Take an accept back out of the rates (a connection the address's quota refused)."""
        now_ms = time.monotonic() * 1000.0
        self._listener_rates[listener].record(-1.0, now_ms)
        if listener != self.protected:
            self._rate.record(-1.0, now_ms)

    def _throttle(self, rate: Rate, limit: int, now_ms: float) -> float:
        rate.record(1.0, now_ms)
        return 0.0 if limit >= INT_MAX else rate.throttle_ms(limit, now_ms, self._max_throttle_ms)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _settle(waiter)


def _settle(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
