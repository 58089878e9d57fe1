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

AlterConfigs and IncrementalAlterConfigs change them for a BROKER resource
named by this broker's id (that broker's overrides) or empty (``<default>``);
another config name is INVALID_REQUEST ("cannot update these broker configs
dynamically"), a bad value INVALID_CONFIG. DescribeConfigs reports their
sources: DYNAMIC_BROKER_CONFIG (2), DYNAMIC_DEFAULT_BROKER_CONFIG (3), and
``read_only`` false for them alone.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from broker.cluster.znodes import BrokerConfigZNode
from broker.config import PROPERTIES
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
DYNAMIC = frozenset({*THROTTLE_RATES, "num.replica.fetchers", "unclean.leader.election.enable", "log.cleaner.threads"})


def parse(name: str, value: str) -> Any:
    """A dynamic config's value parsed; ValueError (or TypeError) when it is bad."""
    if name in THROTTLE_RATES:
        return THROTTLE_RATES[name][0](value)
    return PROPERTIES[name].parse(value)


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

    def load(self) -> None:
        """Blocking: read both znodes (at start, and when a notification names one)."""
        metadata = self.broker.metadata
        self.overrides = metadata.broker_config(str(self.broker.broker_id))
        self.defaults = metadata.broker_config(DEFAULT)

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

    async def reload(self) -> None:
        await self.broker.run_blocking(self.load)
        self.apply()

    async def alter(self, resource_name: str, change, validate_only: bool) -> None:
        """Apply ``change`` (current overrides -> new ones) to this broker's or the default configs; TopicError."""
        entity = DEFAULT if resource_name == "" else resource_name
        metadata = self.broker.metadata
        current = await self.broker.run_blocking(metadata.broker_config, entity)
        new = change(dict(current))
        refused = sorted(set(new) - DYNAMIC)
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
        if validate_only:
            return
        await self.broker.run_blocking(metadata.set_broker_config, entity, new)
        await self.reload()
