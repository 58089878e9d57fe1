"""Dynamic broker configs (KIP-226): broker settings an operator changes on a running cluster.

Stored as Kafka 2.7 stores them: ``/config/brokers/<id>`` for one broker and
``/config/brokers/<default>`` for every broker, each ``{"version":1,"config":{...}}``,
followed by a ``/config/changes/config_change_N`` notification with the
``entity_path`` ``brokers/<id>`` or ``brokers/<default>`` that makes every broker
read them again. A broker's value is its own override, else the cluster
default, else its static config (file or ``--override``), else Kafka's default.

The configs that can change this way (:data:`DYNAMIC`), each applied at once:

* ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
  (bytes/s, unlimited by default): the replication quotas of
  :mod:`broker.replica.quota`;
* ``num.replica.fetchers``: the follower fetchers are redistributed
  (:meth:`~broker.replica.fetcher.ReplicaFetcherManager.resize`);
* ``unclean.leader.election.enable``: the default the controller uses for topics
  without their own override;
* ``log.cleaner.threads``: the log cleaner runs that many threads from now on
  (:meth:`~broker.log.manager.LogManager.resize_cleaner`). As Kafka's
  ``LogCleaner.validateReconfiguration``, a new value must be at least 1 and
  within half and double this broker's current one, else INVALID_CONFIG.
* the connection limits (:mod:`broker.server.connection_quotas`): ``max.connections.per.ip``,
  ``max.connections.per.ip.overrides``, ``max.connections``, ``max.connection.creation.rate``,
  and per listener ``listener.name.<l>.max.connections`` and
  ``listener.name.<l>.max.connection.creation.rate`` (at least 1). A lower
  ``max.connections`` closes the least recently active connections beyond it; host names
  in the overrides must resolve (else INVALID_CONFIG), and are resolved again whenever the
  configs are read.

* a TLS listener's stores, ``listener.name.<l>.ssl.keystore.location`` and
  ``listener.name.<l>.ssl.truststore.location`` (PEM files, as at start), for one
  broker only (certificates are a broker's own: at ``<default>`` INVALID_REQUEST,
  as Kafka). The files are read and checked before the change is stored (a file
  that cannot be used, or a key store whose certificate names another subject
  or other alternative names than the listener's current one: INVALID_CONFIG,
  nothing changed); new connections then get the new stores, open ones keep
  theirs, and so do the broker's own connections to other brokers when it is
  the inter-broker listener. Setting the same path again
  reads the file again: that is how a certificate renewed in place is put in
  force. Deleting the settings puts the static stores back. At start, and when
  another process writes the node, stores that cannot be used are logged and
  the previous ones kept, as Kafka does.

AlterConfigs and IncrementalAlterConfigs change them for a BROKER resource
named by this broker's id (that broker's overrides) or empty (``<default>``);
another config name is INVALID_REQUEST ("cannot update these broker configs
dynamically"), a bad value INVALID_CONFIG. DescribeConfigs reports their
sources: DYNAMIC_BROKER_CONFIG (2), DYNAMIC_DEFAULT_BROKER_CONFIG (3), and
``read_only`` false for them alone.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from broker.cluster.znodes import BrokerConfigZNode
from broker.config import CONNECTION_LISTENER_PROPERTIES, PROPERTIES, TLS_PROTOCOLS
from broker.server.connection_quotas import SETTINGS as CONNECTION_SETTINGS
from broker.server.connection_quotas import resolve_overrides
from broker.protocol import ErrorCode
from broker.replica.quota import UNLIMITED
from broker.server.topics import TopicError

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.config")

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
DEFAULT = BrokerConfigZNode.DEFAULT


def _rate(value: Any) -> int:
    rate = int(str(value).strip())
    if rate < 0:
        raise ValueError("must be at least 0")
    return rate


#: name -> (parser, default, documentation) of the configs that are only dynamic (no static property)
THROTTLE_RATES: dict[str, tuple[Callable[[Any], Any], Any, str]] = {
    "leader.replication.throttled.rate": (_rate, UNLIMITED, "Bytes/s a leader sends to throttled replicas."),
    "follower.replication.throttled.rate": (_rate, UNLIMITED, "Bytes/s a follower fetches for throttled replicas."),
}
DYNAMIC = frozenset({*THROTTLE_RATES, "num.replica.fetchers", "unclean.leader.election.enable", "log.cleaner.threads",
                     *CONNECTION_SETTINGS})


def listener_setting(name: str) -> tuple[str, str] | None:
    """``listener.name.internal.max.connections`` -> ``("INTERNAL", "max.connections")``: a listener's own
    connection limit; None for any other name."""
    if not name.startswith("listener.name."):
        return None
    listener, _dot, prop = name[len("listener.name."):].partition(".")
    if listener and listener == listener.lower() and prop in CONNECTION_LISTENER_PROPERTIES:
        return listener.upper(), prop
    return None


#: A TLS listener's stores, replaceable on a running broker (KIP-226), per broker only
TLS_STORES = ("ssl.keystore.location", "ssl.truststore.location")


def tls_setting(name: str) -> tuple[str, str] | None:
    """``listener.name.ssl.ssl.keystore.location`` -> ``("SSL", "ssl.keystore.location")``; None for any other
    name."""
    if not name.startswith("listener.name."):
        return None
    listener, _dot, prop = name[len("listener.name."):].partition(".")
    if listener and listener == listener.lower() and prop in TLS_STORES:
        return listener.upper(), prop
    return None


def is_dynamic(name: str) -> bool:
    return name in DYNAMIC or listener_setting(name) is not None or tls_setting(name) is not None


def parse(name: str, value: str) -> Any:
    """A dynamic config's value parsed; ValueError (or TypeError) when it is bad."""
    if name in THROTTLE_RATES:
        return THROTTLE_RATES[name][0](value)
    if tls_setting(name) is not None:
        if not str(value).strip():
            raise ValueError("the path of a PEM file is empty")
        return str(value).strip()
    own = listener_setting(name)
    if own is not None:
        parsed = PROPERTIES[own[1]].parse(value)
        if parsed <= 0:
            raise ValueError("must be at least 1")
        return parsed
    return PROPERTIES[name].parse(value)


def _file_stamp(path: str) -> tuple:
    """What tells a replaced file from the one read before: inode, size, modification time (None: unreadable)."""
    try:
        st = os.stat(path)
    except OSError:
        return (None,)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _check_cleaner_threads(new: int, current: int) -> None:
    """Kafka's bounds on a live change of log.cleaner.threads (a slip of the operator's finger, not a plan)."""
    if new < 1:
        raise ValueError("log cleaner threads should be at least 1")
    if new < current // 2:
        raise ValueError(f"log cleaner threads cannot be reduced to less than half the current value {current}")
    if new > current * 2:
        raise ValueError(f"log cleaner threads cannot be increased to more than double the current value {current}")


class DynamicBrokerConfig:
    """This broker's view of the dynamic configs; see the module docstring. Loop-only except :meth:`load`."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.overrides: dict[str, str] = {}  # /config/brokers/<our id>
        self.defaults: dict[str, str] = {}   # /config/brokers/<default>
        self._static_log_config = broker.default_log_config
        #: max.connections.per.ip.overrides in force, its host names resolved (by :meth:`load`)
        self.ip_overrides: dict[str, int] = {}
        self._resolved = False
        #: per TLS listener: the dynamic stores and their files' (inode, size, mtime) last put in force
        self._tls_applied: dict[str, tuple] = {}

    def load(self) -> None:
        """Blocking: read both znodes (at start, and when a notification names one), and resolve the host
        names of max.connections.per.ip.overrides (the static ones failing stops the start)."""
        metadata = self.broker.metadata
        self.overrides = metadata.broker_config(str(self.broker.broker_id))
        self.defaults = metadata.broker_config(DEFAULT)
        self._load_tls_stores()
        name = "max.connections.per.ip.overrides"
        if self.entry(name) is not None:
            try:
                self.ip_overrides = resolve_overrides(self.value(name))
                self._resolved = True
                return
            except ValueError as exc:
                log.warning("ignoring dynamic %s: %s", name, exc)
        try:
            self.ip_overrides = resolve_overrides(self.broker.config[name])
        except ValueError as exc:
            if not self._resolved:  # at start: the broker does not start (Kafka's behaviour)
                raise
            log.warning("keeping %s as resolved before: %s", name, exc)  # a DNS outage must not stop config changes
        self._resolved = True

    # -- TLS stores ------------------------------------------------------------------------
    def tls_stores(self, listener: str, overrides: dict[str, str] | None = None) -> dict[str, str]:
        """The dynamic stores of a listener (``ssl.keystore.location`` -> path), from ``overrides`` (default:
        this broker's node as last read)."""
        overrides = self.overrides if overrides is None else overrides
        return {prop: str(overrides[f"listener.name.{listener.lower()}.{prop}"]).strip() for prop in TLS_STORES
                if f"listener.name.{listener.lower()}.{prop}" in overrides}

    def _tls_listeners(self) -> list[str]:
        config = self.broker.config
        return [e.listener_name for e in config.listeners if config.security_protocol(e.listener_name) in TLS_PROTOCOLS]

    def _load_tls_stores(self) -> None:
        """Blocking: put in force the dynamic stores that changed (their settings or their files) since last
        time; a store that cannot be used is logged and the one in force kept (at start: the static one)."""
        from broker.tls import TlsSetupError, rebuild

        contexts = self.broker.tls
        first = not self._tls_applied  # at start the stores may name another identity than the static ones
        for listener in self._tls_listeners():
            stores = self.tls_stores(listener)
            stamp = (tuple(sorted(stores.items())), tuple(_file_stamp(p) for _k, p in sorted(stores.items())))
            before = self._tls_applied.get(listener, ((), ()))
            if stamp == before and not first:
                continue
            self._tls_applied[listener] = stamp
            if not stores and not before[0]:
                continue  # none before and none now: the static stores, in force since the start
            try:
                rebuilt = rebuild(self.broker.config, listener, stores, contexts, same_identity=not first)
            except (TlsSetupError, OSError) as exc:
                log.warning("listener %s: dynamic TLS stores not put in force, keeping those in use: %s", listener,
                            exc)
                continue
            rebuilt.install(contexts)
            log.info("listener %s: TLS stores in force: %s", listener,
                     ", ".join(f"{prop} {path}" for prop, path in sorted(stores.items())) or "the static ones")

    async def _check_tls_stores(self, entity: str, new: dict[str, str]) -> None:
        """The stores this change would put in force here, read and checked (INVALID_CONFIG when unusable)."""
        from broker.tls import TlsSetupError, rebuild

        named = sorted(name for name in new if tls_setting(name) is not None)
        if not named:
            return
        if entity == DEFAULT:
            raise TopicError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                        f"broker id must be specified: {', '.join(named)}")
        tls_listeners = self._tls_listeners()
        for name in named:
            listener = tls_setting(name)[0]
            if listener not in tls_listeners:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"{name}: this broker has no SSL or SASL_SSL listener "
                                                           f"named {listener}")
        for listener in sorted({tls_setting(name)[0] for name in named}):
            try:
                await self.broker.run_blocking(rebuild, self.broker.config, listener, self.tls_stores(listener, new),
                                               self.broker.tls)
            except (TlsSetupError, OSError) as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def connection_limits(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The broker-wide connection settings in force, and each listener's own ones (dynamic over static)."""
        values = {name: self.value(name) for name in CONNECTION_SETTINGS}
        listeners: dict[str, dict[str, Any]] = {}
        static = self.broker.config.listener_overrides
        for endpoint in self.broker.config.listeners:
            listener = endpoint.listener_name
            own = {}
            for prop in CONNECTION_LISTENER_PROPERTIES:
                found = self.entry(f"listener.name.{listener.lower()}.{prop}")
                if found is not None:
                    try:
                        own[prop] = parse(f"listener.name.{listener.lower()}.{prop}", found[0])
                        continue
                    except (ValueError, TypeError):
                        log.warning("ignoring bad dynamic broker config listener.name.%s.%s=%r", listener.lower(),
                                    prop, found[0])
                if static.get(listener, {}).get(prop) is not None:
                    own[prop] = static[listener][prop]
            listeners[listener] = own
        return values, listeners

    def apply_connection_limits(self) -> None:
        """Put the connection limits in force (before the listeners accept, and at each change)."""
        network = self.broker.network
        if network is not None:
            values, listeners = self.connection_limits()
            network.configure_limits(values, listeners, self.ip_overrides)

    def entry(self, name: str) -> tuple[str, int] | None:
        """``(value, source)`` of a dynamic setting of ``name``, or None when neither znode sets it."""
        if name in self.overrides:
            return self.overrides[name], DYNAMIC_BROKER_CONFIG
        if name in self.defaults:
            return self.defaults[name], DYNAMIC_DEFAULT_BROKER_CONFIG
        return None

    def layers(self, name: str) -> list[tuple[str, int]]:
        """``(value, source)`` of each dynamic layer setting ``name``, most specific first."""
        out = [(self.overrides[name], DYNAMIC_BROKER_CONFIG)] if name in self.overrides else []
        if name in self.defaults:
            out.append((self.defaults[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        return out

    def value(self, name: str) -> Any:
        found = self.entry(name)
        if found is not None:
            try:
                return parse(name, found[0])
            except (ValueError, TypeError):
                log.warning("ignoring bad dynamic broker config %s=%r", name, found[0])
        if name in THROTTLE_RATES:
            return THROTTLE_RATES[name][1]
        return self.broker.config[name]

    def apply(self) -> None:
        """Put the current values to work (on the loop)."""
        replicas = self.broker.replicas
        replicas.leader_quota.rate = self.value("leader.replication.throttled.rate")
        replicas.follower_quota.rate = self.value("follower.replication.throttled.rate")
        replicas.fetchers.resize(self.value("num.replica.fetchers"))
        self.broker.log_manager.resize_cleaner(self.value("log.cleaner.threads"))
        self.broker.default_log_config = replace(
            self._static_log_config, unclean_leader_election_enable=self.value("unclean.leader.election.enable"))
        self.apply_connection_limits()

    async def _check_connection_limits(self, entity: str, new: dict[str, str]) -> None:
        """Kafka's rules across the connection settings, for the values this change would put in force here."""
        overrides_name, per_ip_name = "max.connections.per.ip.overrides", "max.connections.per.ip"
        def effective(name: str) -> Any:
            for layer in ([self.overrides, new] if entity == DEFAULT else [new, self.defaults]):
                if name in layer:
                    return parse(name, layer[name])
            return self.broker.config[name]
        overrides = effective(overrides_name)
        if effective(per_ip_name) == 0 and not overrides:
            raise TopicError(ErrorCode.INVALID_CONFIG,
                             f"{per_ip_name} can be 0 only when {overrides_name} is set")
        if overrides_name in new:
            try:
                await self.broker.run_blocking(resolve_overrides, parse(overrides_name, new[overrides_name]))
            except ValueError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        listeners = {e.listener_name for e in self.broker.config.listeners}
        for name in new:  # the cluster default may name listeners other brokers have
            own = listener_setting(name)
            if entity != DEFAULT and own is not None and own[0] not in listeners:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"{name}: no listener is named {own[0]}")

    async def reload(self) -> None:
        await self.broker.run_blocking(self.load)
        self.apply()

    async def alter(self, resource_name: str, change, validate_only: bool) -> None:
        """Apply ``change`` (current overrides -> new ones) to this broker's or the default configs; TopicError."""
        entity = DEFAULT if resource_name == "" else resource_name
        metadata = self.broker.metadata
        current = await self.broker.run_blocking(metadata.broker_config, entity)
        new = change(dict(current))
        refused = sorted(name for name in new if not is_dynamic(name))
        if refused:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"cannot update these broker configs dynamically: {', '.join(refused)}")
        for name, value in new.items():
            try:
                parsed = parse(name, value)
                if name == "log.cleaner.threads" and current.get(name) != value:
                    _check_cleaner_threads(parsed, self.value(name))
            except (ValueError, TypeError) as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {name}: {exc}") from None
        await self._check_connection_limits(entity, new)
        await self._check_tls_stores(entity, new)
        if validate_only:
            return
        await self.broker.run_blocking(metadata.set_broker_config, entity, new)
        await self.reload()
