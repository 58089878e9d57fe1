"""Client quotas: byte rates and request time per user and client id, as Kafka 2.7 enforces them.

Quotas (KIP-13, KIP-55 user quotas, KIP-124 request quotas) bound what one
client may take of a broker; each broker enforces them on its own traffic.

Storage, as Kafka 2.7 keeps it (so Kafka's tools and ours read the same nodes):
``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``,
``/config/clients/<client-id>``, each ``{"version":1,"config":{...}}`` with the
names URL-encoded (:func:`broker.sasl.sanitize_user`) and ``<default>`` for the
default entity of its type. A user's node also holds its SCRAM credentials
(:mod:`broker.sasl`); only the quota keys below are quotas. A change writes the
node and a ``/config/changes/config_change_N`` notification naming the entity
(``users/alice/clients/app``); every broker then reads that node again.

The keys (:data:`QUOTA_KEYS`):

* ``producer_byte_rate`` (bytes/s): Produce request bytes;
* ``consumer_byte_rate`` (bytes/s): record bytes a consumer's Fetch returns;
* ``request_percentage`` (percent): time the broker's event loop spends on the
  client's requests, 100 being the whole loop (Kafka counts it per request
  handler and network thread; here one loop serves every request);
* ``controller_mutation_rate`` (partitions/s, KIP-599): topic and partition
  creations and deletions, through CreateTopics (v6+), CreatePartitions (v3+)
  and DeleteTopics (v5+).

Which quota applies to a request of principal ``user`` with ``client-id``: the
first that exists of ``users/<user>/clients/<client-id>``,
``users/<user>/clients/<default>``, ``users/<user>``,
``users/<default>/clients/<client-id>``, ``users/<default>/clients/<default>``,
``users/<default>``, ``clients/<client-id>``, ``clients/<default>``, then the
static ``quota.producer.default`` / ``quota.consumer.default`` (Kafka's
``DefaultQuotaCallback``). Clients that match the same entity share one rate:
every client id of a user with a user quota counts against that user's quota.

Measurement (Kafka's ``Rate`` over a ``SampledStat``): ``quota.window.num``
samples (11) of ``quota.window.size.seconds`` (1 s); the rate is the sum of the
live samples over the time they span, at least ``(num - 1) * size``. When a
recorded value takes the rate above the quota, the throttle time is what brings
it back: ``(rate - quota) / quota * window`` (capped at one window for request
time, as Kafka caps it). The client is told (``throttle_time_ms`` in the
response) and its connection is muted for that long: nothing more is read from
it. Clients of the versions after KIP-219 back off themselves and get their
answer at once; older request versions (Produce v0-5, Fetch v0-7, ...) get it
only when the throttle ends. A throttled consumer Fetch is answered without
records (they are not counted against the quota), and a Fetch never asks for
more bytes than the quota allows in one window. Produce with acks=0 and
requests between brokers are never throttled for request time; follower
fetches have their own replication quotas (:mod:`broker.replica.quota`).

Rates idle for an hour are dropped (Kafka's sensor expiry). With no quota
configured anywhere (the common case), a request pays one attribute test.

Connection creation rate per client IP address (Kafka 2.8's part of KIP-612; :class:`IpConnectionQuota`):
``connection_creation_rate`` (new connections per second, a whole number) of ``ips/<address>`` or
``ips/<default>``, the address's own first. Counted at each accept, with the rest of the connection
limits (:mod:`broker.server.connection_quotas`); a connection that would take the address over its
rate is not taken: the socket is held, unread, for the throttle time (so that the client does not
reconnect at once) and then closed. It counts in no rate and no connection count.

Metrics (on scrape): ``kafkapy_client_quota_rate`` and
``kafkapy_client_quota_limit`` by ``quota``, ``user`` and ``client_id`` (the
entity the rate belongs to, empty for the level not used), and
``kafkapy_client_quota_throttle_seconds_total`` /
``kafkapy_client_quota_throttled_total`` by the same labels.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Iterable

from broker.protocol import ApiKey
from broker.sasl import desanitize_user, sanitize_user

log = logging.getLogger("broker.quotas")

DEFAULT = "<default>"
PRODUCE, FETCH, REQUEST, MUTATION = "producer_byte_rate", "consumer_byte_rate", "request_percentage", \
    "controller_mutation_rate"
#: key -> whether its values are whole numbers (Kafka's LONG) rather than doubles
QUOTA_KEYS: dict[str, bool] = {PRODUCE: True, FETCH: True, REQUEST: False, MUTATION: False}
#: The quota of an IP address entity (Kafka 2.8), the only one such an entity takes: a whole number
IP_CONNECTION_RATE = "connection_creation_rate"
#: Seconds a rate may sit idle before it is dropped (Kafka's InactiveSensorExpirationTimeSeconds)
IDLE_EXPIRY_S = 3600.0
#: The metric label of each quota type (Kafka's QuotaType names)
QUOTA_TYPE_NAMES = {PRODUCE: "Produce", FETCH: "Fetch", REQUEST: "Request", MUTATION: "ControllerMutation"}

# Kafka's QuotaTypes: which levels have quotas (decides the entity a rate belongs to)
_CLIENT, _USER, _USER_CLIENT = 1, 2, 4

#: An entity: (user, client id), each a name, DEFAULT, or None when the entity has no such part.
Entity = tuple["str | None", "str | None"]


def entity_path(entity: Entity) -> str:
    """The entity's path under ``/config`` (names sanitized): ``users/alice/clients/app``."""
    user, client = entity
    if user is not None:
        path = f"users/{_sanitize(user)}"
        return path if client is None else f"{path}/clients/{_sanitize(client)}"
    if client is None:
        raise ValueError("an entity names a user, a client id or both")
    return f"clients/{_sanitize(client)}"


def parse_entity_path(path: str) -> Entity | None:
    """The entity of ``users/<u>``, ``users/<u>/clients/<c>`` or ``clients/<c>``; None for any other path."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return _desanitize(parts[1]), None
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return _desanitize(parts[1]), _desanitize(parts[3])
    if len(parts) == 2 and parts[0] == "clients":
        return None, _desanitize(parts[1])
    return None


def parse_ip_path(path: str) -> str | None:
    """The address (or DEFAULT) of ``ips/<address>``; None for any other path."""
    parts = path.split("/")
    return parts[1] if len(parts) == 2 and parts[0] == "ips" and parts[1] else None


def _sanitize(name: str) -> str:
    return name if name == DEFAULT else sanitize_user(name)


def _desanitize(node: str) -> str:
    return node if node == DEFAULT else desanitize_user(node)


def quota_values(config: dict[str, str]) -> dict[str, float]:
    """The quota keys of an entity's stored config, as numbers (a value that is not a number is dropped
    with a warning: it cannot have come from a tool that checks, and must not stop the broker)."""
    out = {}
    for key, text in config.items():
        if key in QUOTA_KEYS:
            try:
                value = float(text)
            except (TypeError, ValueError):
                log.warning("ignoring quota %s=%r: not a number", key, text)
                continue
            if math.isfinite(value) and value > 0:
                out[key] = value
            else:
                log.warning("ignoring quota %s=%r: not a positive number", key, text)
    return out


class Rate:
    """Kafka's sampled rate: ``samples`` windows of ``window_ms``; see the module docstring.

    Each sample is ``[start_ms, total]``. A record goes into the current sample,
    which is replaced by the next one (the oldest, reset) once it is a window
    old; samples older than ``samples * window_ms`` count for nothing.
    """

    __slots__ = ("_n", "_window", "_samples", "_current")

    def __init__(self, samples: int, window_ms: float) -> None:
        self._n = samples
        self._window = window_ms
        self._samples: list[list[float]] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        samples = self._samples
        if not samples:
            samples.append([now_ms, 0.0])
            self._current = 0
        sample = samples[self._current]
        if now_ms - sample[0] >= self._window:
            self._current = (self._current + 1) % self._n
            if self._current >= len(samples):
                sample = [now_ms, 0.0]
                samples.append(sample)
            else:
                sample = samples[self._current]
                sample[0], sample[1] = now_ms, 0.0
        sample[1] += value

    def _purge(self, now_ms: float) -> None:
        expiry = self._n * self._window
        for sample in self._samples:
            if now_ms - sample[0] >= expiry:
                sample[0], sample[1] = now_ms, 0.0

    def window_ms(self, now_ms: float) -> float:
        """The span the rate divides by: from the oldest sample to now, at least ``samples - 1`` windows."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // self._window)
        if full < self._n - 1:
            elapsed += (self._n - 1 - full) * self._window
        return elapsed

    def total(self) -> float:
        """The sum of the samples (after :meth:`window_ms` purged the expired ones)."""
        return sum(s[1] for s in self._samples)

    def throttle_ms(self, bound: float, now_ms: float, max_ms: float | None = None) -> float:
        """Kafka's throttle time for this rate against ``bound`` (0 when within it): what brings the rate back
        to the bound, ``(rate - bound) / bound * window``, capped at ``max_ms``; a bound of 0 takes ``max_ms``."""
        window = self.window_ms(now_ms)
        observed = self.total() / (window / 1000.0) if window > 0 else 0.0
        if observed <= bound:
            return 0.0
        throttle = (observed - bound) / bound * window if bound > 0 else math.inf
        return throttle if max_ms is None else min(throttle, max_ms)

    def per_second(self, now_ms: float) -> float:
        """The rate now, without changing anything (a scrape's thread reads it while the loop records)."""
        expiry = self._n * self._window
        live = [s for s in list(self._samples) if now_ms - s[0] < expiry]
        elapsed = now_ms - min((s[0] for s in live), default=now_ms)
        full = int(elapsed // self._window)
        if full < self._n - 1:
            elapsed += (self._n - 1 - full) * self._window
        return sum(s[1] for s in live) / (elapsed / 1000.0) if elapsed > 0 else 0.0


@dataclass(slots=True)
class _Sensor:
    """The rate of one entity for one quota type, and what throttling it cost."""

    rate: Rate
    last_used: float
    throttle_ms_total: float = 0.0
    throttled: int = 0


class ClientQuota:
    """One quota type (``producer_byte_rate``, ...): its configured entities and the live rates."""

    def __init__(self, key: str, samples: int, window_s: int, static_default: float | None = None,
                 max_throttle_ms: float | None = None) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000.0
        self.static_default = static_default  # quota.{producer,consumer}.default: the client-id level's last resort
        self.max_throttle_ms = max_throttle_ms
        self.overrides: dict[Entity, float] = {}
        # Kafka keeps the levels it has seen enabled until a restart (so a rate keeps its entity)
        self._levels = _CLIENT if static_default is not None else 0
        self.enabled = static_default is not None
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._tags: dict[tuple[str, str], tuple[str, str]] = {}  # (user, client id) -> the rate's entity
        self._limits: dict[tuple[str, str], float | None] = {}
        self._swept = time.monotonic()

    # -- configuration ------------------------------------------------------------------
    def set(self, entity: Entity, value: float | None) -> None:
        """Set (or with None remove) the quota of ``entity``."""
        user, client = entity
        if value is None:
            if self.overrides.pop(entity, None) is None:
                return
        else:
            if self.overrides.get(entity) == value:
                return
            self.overrides[entity] = value
            self._levels |= (_USER_CLIENT if client is not None else _USER) if user is not None else _CLIENT
            self.enabled = True
        self._tags.clear()
        self._limits.clear()

    def _level_only(self) -> int | None:
        """The one level enabled, when only one is (Kafka's optimisation: the entity follows at once)."""
        return self._levels if self._levels in (0, _CLIENT, _USER, _USER_CLIENT) else None

    def tags(self, user: str, client: str) -> tuple[str, str]:
        """The entity whose rate a request of ``user`` (principal name) and ``client`` counts against."""
        key = (user, client)
        found = self._tags.get(key)
        if found is not None:
            return found
        only = self._level_only()
        if only in (0, _CLIENT):
            found = ("", client)
        elif only == _USER:
            found = (user, "")
        elif only == _USER_CLIENT:
            found = (user, client)
        else:
            o = self.overrides
            if (user, client) in o or (user, DEFAULT) in o:
                found = (user, client)
            elif (user, None) in o:
                found = (user, "")
            elif (DEFAULT, client) in o or (DEFAULT, DEFAULT) in o:
                found = (user, client)
            elif (DEFAULT, None) in o:
                found = (user, "")
            else:
                found = ("", client)
        if len(self._tags) < 100_000:
            self._tags[key] = found
        return found

    def limit(self, tags: tuple[str, str]) -> float | None:
        """The quota of the entity ``tags`` (None: unlimited), by Kafka's order of precedence."""
        if tags in self._limits:
            return self._limits[tags]
        user, client = tags
        o = self.overrides
        found = None
        if user and client:
            for entity in ((user, client), (user, DEFAULT), (DEFAULT, client), (DEFAULT, DEFAULT)):
                if entity in o:
                    found = o[entity]
                    break
        elif user:
            found = o.get((user, None), o.get((DEFAULT, None)))
        elif client:
            found = o.get((None, client), o.get((None, DEFAULT), self.static_default))
        if len(self._limits) < 100_000:
            self._limits[tags] = found
        return found

    # -- measurement --------------------------------------------------------------------
    def _sensor(self, tags: tuple[str, str], now: float) -> _Sensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            if now - self._swept > 60.0:
                self._sweep(now)
            sensor = self._sensors[tags] = _Sensor(Rate(self.samples, self.window_ms), now)
        else:
            sensor.last_used = now
        return sensor

    def _sweep(self, now: float) -> None:
        self._swept = now
        for tags in [t for t, s in self._sensors.items() if now - s.last_used > IDLE_EXPIRY_S]:
            del self._sensors[tags]

    def record(self, user: str, client: str, value: float, check: bool = True) -> int:
        """Count ``value`` for the client; the throttle time in ms (0: within its quota)."""
        now = time.monotonic()
        tags = self.tags(user, client)
        sensor = self._sensor(tags, now)
        now_ms = now * 1000.0
        sensor.rate.record(value, now_ms)
        if not check:
            return 0
        bound = self.limit(tags)
        if bound is None:
            return 0
        return int(round(sensor.rate.throttle_ms(bound, now_ms, self.max_throttle_ms)))

    def unrecord(self, user: str, client: str, value: float) -> None:
        """Take back a value recorded for a response that was not sent (a throttled fetch)."""
        self.record(user, client, -value, check=False)

    def max_in_window(self, user: str, client: str) -> float | None:
        """The most that can be taken at once without being throttled for sure (None: no quota)."""
        bound = self.limit(self.tags(user, client))
        return None if bound is None else bound * (self.samples - 1) * self.window_ms / 1000.0

    def throttled(self, user: str, client: str, throttle_ms: int) -> None:
        sensor = self._sensor(self.tags(user, client), time.monotonic())
        sensor.throttle_ms_total += throttle_ms
        sensor.throttled += 1

    def snapshot(self) -> list[tuple[tuple[str, str], float, float | None, float, int]]:
        """``(entity, rate per second, quota, throttle ms in all, times throttled)`` of each live rate."""
        now = time.monotonic()
        return [(tags, s.rate.per_second(now * 1000.0), self.limit(tags), s.throttle_ms_total, s.throttled)
                for tags, s in list(self._sensors.items())]


class MutationQuota(ClientQuota):
    """``controller_mutation_rate`` (KIP-599): a token bucket per entity instead of a sampled rate.

    The bucket holds up to ``quota * samples * window`` partition mutations and
    refills at the quota; each created or deleted partition takes one token, and
    may take it below zero. A request of a strict version (CreateTopics v6+,
    CreatePartitions v3+, DeleteTopics v5+) finds a topic refused with
    THROTTLING_QUOTA_EXCEEDED while the bucket is below zero; older versions are
    always served and only throttled. Either way the throttle time is what the
    bucket needs to be back at zero.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._buckets: dict[tuple[str, str], list[float]] = {}  # tags -> [tokens, at (monotonic s)]

    def _tokens(self, tags: tuple[str, str], bound: float, now: float) -> list[float]:
        burst = bound * self.samples * self.window_ms / 1000.0
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = [burst, now]
        else:
            bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * bound)
            bucket[1] = now
        return bucket

    def exceeded(self, user: str, client: str) -> int:
        """The throttle time (ms) while the entity's bucket is below zero, else 0."""
        tags = self.tags(user, client)
        bound = self.limit(tags)
        if bound is None:
            return 0
        tokens = self._tokens(tags, bound, time.monotonic())[0]
        return int(math.ceil(-tokens / bound * 1000)) if tokens < 0 else 0

    def record(self, user: str, client: str, value: float, check: bool = True) -> int:
        now = time.monotonic()
        tags = self.tags(user, client)
        self._sensor(tags, now).rate.record(value, now * 1000.0)
        bound = self.limit(tags)
        if bound is None:
            return 0
        bucket = self._tokens(tags, bound, now)
        bucket[0] -= value
        return int(math.ceil(-bucket[0] / bound * 1000)) if bucket[0] < 0 and check else 0


class IpConnectionQuota:
    """``connection_creation_rate`` per client address (see the module docstring); loop-only."""

    def __init__(self, samples: int, window_s: int) -> None:
        self._samples, self._window_ms = samples, window_s * 1000.0
        #: address (or DEFAULT) -> connections per second
        self.limits: dict[str, int] = {}
        self._rates: dict[str, _Sensor] = {}
        self._swept = 0.0

    def set(self, address: str, value: int | None) -> None:
        if value is None:
            self.limits.pop(address, None)
        else:
            self.limits[address] = value

    def limit(self, address: str) -> int | None:
        found = self.limits.get(address)
        return self.limits.get(DEFAULT) if found is None else found

    def record(self, address: str) -> float:
        """An accept from ``address``: 0 when within its rate (counted), else the throttle in ms (not counted)."""
        bound = self.limit(address)
        if bound is None:
            return 0.0
        now = time.monotonic()
        if now - self._swept > 60:
            self._swept = now
            for key in [k for k, sensor in self._rates.items() if now - sensor.last_used > IDLE_EXPIRY_S]:
                del self._rates[key]
        sensor = self._rates.get(address)
        if sensor is None:
            sensor = self._rates[address] = _Sensor(Rate(self._samples, self._window_ms), now)
        sensor.last_used = now
        now_ms = now * 1000.0
        sensor.rate.record(1.0, now_ms)
        throttle = sensor.rate.throttle_ms(bound, now_ms, self._window_ms)
        if throttle > 0:
            sensor.rate.record(-1.0, now_ms)  # not accepted: not counted
            sensor.throttled += 1
        return throttle


class QuotaManager:
    """The broker's client quotas; loop-only, except :meth:`read_all` and :meth:`read_entity` (blocking reads)."""

    def __init__(self, config) -> None:
        samples, window_s = config["quota.window.num"], config["quota.window.size.seconds"]
        produce_default = config["quota.producer.default"]
        consume_default = config["quota.consumer.default"]
        max_long = 2**63 - 1
        self.produce = ClientQuota(PRODUCE, samples, window_s,
                                   None if produce_default == max_long else float(produce_default))
        self.fetch = ClientQuota(FETCH, samples, window_s,
                                 None if consume_default == max_long else float(consume_default))
        self.request = ClientQuota(REQUEST, samples, window_s, max_throttle_ms=window_s * 1000.0)
        self.mutation = MutationQuota(MUTATION, samples, window_s)
        self.by_key = {q.key: q for q in (self.produce, self.fetch, self.request, self.mutation)}
        #: Any quota configured (or a static default): the network layer looks at nothing else otherwise.
        self.active = self.produce.enabled or self.fetch.enabled
        #: What each entity holds now (entity -> {key: value}), for describing and for reloads
        self.entities: dict[Entity, dict[str, float]] = {}
        #: connection_creation_rate per IP address (read by the connection limits at each accept)
        self.ips = IpConnectionQuota(samples, window_s)

    def apply(self, entity: Entity, values: dict[str, float]) -> None:
        """Take ``entity``'s quotas as now stored (an empty dict removes them all)."""
        old = self.entities.get(entity, {})
        if values:
            self.entities[entity] = values
        else:
            self.entities.pop(entity, None)
        for key, quota in self.by_key.items():
            if values.get(key) != old.get(key):
                quota.set(entity, values.get(key))
                if key in values or key in old:
                    log.info("%s quota of %s: %s", key, describe_entity(entity),
                             "removed" if key not in values else _number(values[key]))
        self.active = any(q.enabled for q in self.by_key.values())

    @staticmethod
    def read_all(metadata) -> dict[Entity, dict[str, float]]:
        """Blocking: every stored entity with quotas."""
        out = {}
        for path, config in metadata.quota_entity_configs():
            entity = parse_entity_path(path)
            values = quota_values(config) if entity is not None else {}
            if values:
                out[entity] = values
        return out

    @staticmethod
    def read_entity(metadata, path: str) -> tuple[Entity, dict[str, float]] | None:
        """Blocking: one entity's quotas, from its path in a change notification (None: not a quota entity)."""
        entity = parse_entity_path(path)
        if entity is None:
            return None
        return entity, quota_values(metadata.quota_entity_config(path))

    @staticmethod
    def read_ip(metadata, path: str) -> tuple[str, int | None] | None:
        """Blocking: an IP address entity's connection_creation_rate (None: none), from its path; None when
        ``path`` is no such entity."""
        address = parse_ip_path(path)
        if address is None:
            return None
        text = metadata.quota_entity_config(path).get(IP_CONNECTION_RATE)
        if text is None:
            return address, None
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value <= 0:
            log.warning("ignoring %s=%r of %s: not a positive whole number", IP_CONNECTION_RATE, text, path)
            return address, None
        return address, value

    @staticmethod
    def read_all_ips(metadata) -> dict[str, int]:
        """Blocking: every IP address entity with a connection_creation_rate."""
        out = {}
        for path, _config in metadata.quota_entity_configs():
            found = QuotaManager.read_ip(metadata, path)
            if found is not None and found[1] is not None:
                out[found[0]] = found[1]
        return out

    def apply_ip(self, address: str, value: int | None) -> None:
        if self.ips.limits.get(address) != value:
            log.info("%s quota of ip %s: %s", IP_CONNECTION_RATE, address, "removed" if value is None else value)
        self.ips.set(address, value)

    def load_ips(self, found: dict[str, int]) -> None:
        for address in set(self.ips.limits) - set(found):
            self.apply_ip(address, None)
        for address, value in found.items():
            self.apply_ip(address, value)

    def load(self, found: dict[Entity, dict[str, float]]) -> None:
        """Replace every entity's quotas with ``found`` (start-up, a lost ZooKeeper session)."""
        for entity in set(self.entities) - set(found):
            self.apply(entity, {})
        for entity, values in found.items():
            self.apply(entity, values)

    def snapshot(self) -> Iterable[tuple[str, tuple[str, str], float, float | None, float, int]]:
        for quota in self.by_key.values():
            for tags, rate, limit, throttle_ms, throttled in quota.snapshot():
                yield QUOTA_TYPE_NAMES[quota.key], tags, rate, limit, throttle_ms, throttled


def describe_entity(entity: Entity) -> str:
    user, client = entity
    parts = []
    if user is not None:
        parts.append("default user" if user == DEFAULT else f"user {user!r}")
    if client is not None:
        parts.append("default client id" if client == DEFAULT else f"client id {client!r}")
    return ", ".join(parts)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# -- what the network layer asks: a request's throttle time ------------------------------------------

#: Never throttled for request time: the connection's set-up and what brokers send each other (Kafka
#: exempts what needs CLUSTER_ACTION); follower fetches and acks=0 produce are told apart per request.
REQUEST_EXEMPT = frozenset({
    ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS,
    ApiKey.ALTER_ISR,
})


def who(ctx) -> tuple[str, str]:
    """(principal name, client id) of a request: the names its quotas go by."""
    conn = ctx.connection
    return (conn.principal.partition(":")[2] if conn is not None else ""), ctx.header.client_id or ""


def produce_throttle(quotas: QuotaManager, ctx) -> int:
    """Count a Produce request's bytes against its client's ``producer_byte_rate`` as it arrives; the
    throttle time in ms (kept in ``ctx.produce_throttle_ms`` for its response).

    Kafka reads one request of a connection at a time, so a throttle holds back
    everything behind the request that crossed the quota; counted on arrival,
    the same throttle holds back the produces a client pipelined behind it.
    """
    conn = ctx.connection
    if conn is None or not quotas.produce.enabled:
        return 0
    throttle = quotas.produce.record(*who(ctx), ctx.request_bytes)
    ctx.produce_throttle_ms = throttle
    return throttle


def throttle_time(quotas: QuotaManager, ctx, response: dict | None) -> int:
    """Count a finished request against its client's quotas; the throttle time in ms (0: none; a
    Produce's bytes were counted on arrival).

    Called by the network layer for every request while any quota is configured,
    after the handler and before the response is encoded: a throttle time goes
    into the response's ``throttle_time_ms``, and a throttled consumer Fetch
    loses its records (taken back from the fetch rate), as in Kafka.
    """
    conn = ctx.connection
    if conn is None:
        return 0
    user, client = who(ctx)
    key = ctx.header.api_key
    bandwidth = 0
    band_quota = None
    if key == ApiKey.PRODUCE:
        band_quota = quotas.produce
        bandwidth = ctx.produce_throttle_ms  # counted on arrival (produce_throttle)
        exempt = response is None  # acks=0
    elif key == ApiKey.FETCH:
        exempt = ctx.response_bytes < 0  # a follower
        if not exempt and quotas.fetch.enabled:
            band_quota = quotas.fetch
            bandwidth = band_quota.record(user, client, ctx.response_bytes)
    else:
        exempt = key in REQUEST_EXEMPT
    request = 0
    if not exempt and quotas.request.enabled:
        taken_ns = ctx.loop_ns + (time.perf_counter_ns() - ctx.step_ns if ctx.step_ns else 0)
        request = quotas.request.record(user, client, taken_ns * 1e-7)  # percent of one second
    mutation = ctx.mutation_throttle_ms
    throttle = max(bandwidth, request, mutation)
    emptied = throttle > 0 and key == ApiKey.FETCH and not exempt
    if ctx.fetched is not None and not emptied:
        ctx.broker.metrics.count_bytes_out(ctx.fetched)
    if throttle <= 0:
        return 0
    if emptied:
        if band_quota is quotas.fetch:
            band_quota.unrecord(user, client, ctx.response_bytes)
        if response is not None:
            response["responses"] = []
            if ctx.fetch_undo is not None:
                ctx.fetch_undo(response)
    if mutation == throttle:
        quotas.mutation.throttled(user, client, mutation)
    elif bandwidth > request and band_quota is not None:
        band_quota.throttled(user, client, bandwidth)
    else:
        quotas.request.throttled(user, client, request)
    if response is not None:  # (a version without the field does not encode it)
        response["throttle_time_ms"] = throttle
    return throttle


#: The first version of each API that refuses a mutation over the quota (KIP-599's strict mode)
_STRICT_MUTATIONS_FROM = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
THROTTLED_MUTATION = "The throttling quota has been exceeded."


def mutation_refused(ctx) -> int:
    """For a topic of a CreateTopics, CreatePartitions or DeleteTopics: the throttle time (ms) when its
    mutations must be refused (a strict version, the client's bucket below zero), else 0."""
    quota = ctx.broker.quotas.mutation
    if not quota.enabled or ctx.connection is None:
        return 0
    if ctx.api_version < _STRICT_MUTATIONS_FROM[ctx.header.api_key]:
        return 0
    throttle = quota.exceeded(*who(ctx))
    ctx.mutation_throttle_ms = max(ctx.mutation_throttle_ms, throttle)
    return throttle


def record_mutations(ctx, partitions: int) -> None:
    """Count ``partitions`` created or deleted for the client (the throttle goes into the response)."""
    quota = ctx.broker.quotas.mutation
    if partitions <= 0 or not quota.enabled or ctx.connection is None:
        return
    ctx.mutation_throttle_ms = max(ctx.mutation_throttle_ms, quota.record(*who(ctx), partitions))
