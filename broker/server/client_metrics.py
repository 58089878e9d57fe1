"""Client metrics (KIP-714): subscriptions, the clients that push, and their metrics on this broker's ``/metrics``.

A client (librdkafka 2.5+, the Java client 3.7+) that finds GetTelemetrySubscriptions (71) advertised asks which
of its metrics to send, then pushes them every interval with PushTelemetry (72) as an OpenTelemetry (OTLP)
``MetricsData``. Which clients send what is decided by **subscriptions**, the config resource CLIENT_METRICS
(type 16), made with IncrementalAlterConfigs or AlterConfigs (``kafkactl client-metrics``, Kafka's
``kafka-client-metrics.sh``). Without a subscription a client sends nothing, and asks again every 5 minutes.

**Subscriptions.** Three configs, as Kafka's ``ClientMetricsConfigs``::

    metrics      LIST  []       metric name prefixes (``org.apache.kafka.producer.``); ``*`` all, none when empty
    interval.ms  INT   300000   push interval, 100..3600000
    match        LIST  []       ``selector=regex`` pairs, all of which must match the client (none: every client);
                                selectors client_instance_id, client_id, client_software_name,
                                client_software_version, client_source_address, client_source_port

A LIST is split at commas (spaces around them dropped) and may neither repeat a value nor hold an empty one (Kafka
4.2's rule: an empty metric prefix would ask for every metric); no value may exceed 32,767 characters. Each regex
must match the whole value; they run on RE2 (linear time, as the broker's other regexes): Java's syntax but for
backreferences and lookaround. A subscription exists while one of its configs is set. It is stored as
``/config/client-metrics/<name>`` with a ``client-metrics/<name>`` change notification, so every broker follows.
Errors are Kafka's: an empty name, an unknown config or an interval out of range INVALID_REQUEST (42); a value that
does not parse, a repeated list value or a bad ``match`` pair INVALID_CONFIG (40).

**A client** is known by its instance id (a UUID the broker makes at its first GetTelemetrySubscriptions, as
Kafka does). What it gets is made from every subscription that matches it: the union of their metrics (``*`` when
one has it), the least of their intervals and 300000 ms, and a subscription id that is the same on every broker
(CRC32C over the metrics and interval, XOR the instance id's hash, as Kafka's). The broker keeps at most
16,384 clients, each until ``max(60 s, 3 × interval)`` passes without a request from it or its connection closes;
a change of subscriptions makes each client's next request rebuild its entry (a push then gets
UNKNOWN_SUBSCRIPTION_ID and the client asks again).

**Requests and errors**, in Kafka 4.2's order:

* GetTelemetrySubscriptions sooner than the interval after the client's last Get or push:
  THROTTLING_QUOTA_EXCEEDED, unless its last push failed with UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE.
* PushTelemetry: a zero (or reserved) instance id INVALID_REQUEST; after a terminating push INVALID_REQUEST; sooner
  than the interval after the last push (the first push after a Get may come at once, and a terminating one
  always) THROTTLING_QUOTA_EXCEEDED; another subscription id UNKNOWN_SUBSCRIPTION_ID; an unknown codec
  UNSUPPORTED_COMPRESSION_TYPE; more than ``telemetry.max.bytes`` compressed TELEMETRY_TOO_LARGE; data that does
  not decompress within that size or is not an OTLP MetricsData INVALID_RECORD.

**Export.** Kafka hands the pushed bytes to a metric reporter plugin; this broker is its own exporter: the latest
push of every client is served on ``/metrics``, each metric under its OTLP name as OpenTelemetry's Prometheus
exporter writes it (``org.apache.kafka.producer.record.queue.time.avg`` ->
``org_apache_kafka_producer_record_queue_time_avg``; a monotonic sum is a counter, ``..._total``; other sums and
gauges are gauges), labelled with the client (``client_instance_id``, ``client_id``, ``client_software_name``,
``client_software_version``, ``client_source_address``), the push's resource attributes (``group_id``,
``member_id``, ``transactional_id``, ...) and each data point's (``node_id``, ``topic``, ...; keys Prometheus
reserves, ``__*``, dropped). Only Kafka client metrics (``org.apache.kafka.*``) the client was asked for are kept,
at most :data:`MAX_SERIES_PER_CLIENT` series of at most :data:`MAX_LABELS` labels per client and
:data:`MAX_SERIES` in all (the rest counted, ``kafkapy_client_telemetry_series_dropped_total``); histograms and
summaries are skipped (no client sends them). A client's series go when it does (expiry, a closed connection, a
terminating push). Clients are told to send cumulative sums (``delta_temporality`` false, where Kafka says true),
so a counter is the client's own total whichever broker it pushes to; delta sums a client sends anyway are left
out.

``telemetry.exporter.enable`` (default true) advertises GetTelemetrySubscriptions and PushTelemetry; false leaves
them out of ApiVersions (as Kafka does when no metric reporter exports client metrics), so clients never start
telemetry. ``telemetry.max.bytes`` (1048576) bounds a push.
"""

from __future__ import annotations

import collections
import functools
import logging
import re
import struct
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import crc32c
import re2
from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from broker.coordinator.consumer_group import RegexError, compile_regex
from broker.protocol import ErrorCode
from broker.records.compression import Compression, CompressionError, decompress_bounded
from broker.sasl import desanitize_user, sanitize_user
from broker.server.topics import TopicError, store_call
from broker.topic_ids import format_topic_id

if TYPE_CHECKING:
    from broker.server.broker import Broker
    from broker.server.context import RequestContext

log = logging.getLogger("broker.client_metrics")

#: The config resource type of subscriptions (Kafka's ``ConfigResource.Type.CLIENT_METRICS``)
CLIENT_METRICS = 16
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
CONFIG_NAMES = (METRICS, INTERVAL_MS, MATCH)
DEFAULT_INTERVAL_MS = 300000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600000
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
#: Codecs a client may push with, in the order asked for (Kafka's: zstd, lz4, gzip, snappy)
ACCEPTED_COMPRESSION = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
MAX_CLIENTS = 16384
MIN_EXPIRY_S = 60.0
#: Longest config value (Kafka's controller refuses longer ones; DescribeConfigs v0-3 could not carry them)
MAX_VALUE_LENGTH = 32767
#: Bounds on what pushes may make this broker hold and serve (each client's pushes are otherwise bounded only
#: by telemetry.max.bytes): series of one client, labels of one series, series of all clients together
MAX_SERIES_PER_CLIENT = 2000
MAX_LABELS = 32
MAX_SERIES = 200_000
#: Clients whose expiry is checked at most this often (a sweep of the whole cache, not one per request)
EXPIRY_SWEEP_S = 1.0
#: Only metrics of Kafka clients are served: the prefix both the Java client and librdkafka give every name
METRIC_PREFIX = "org.apache.kafka."
_ZERO, _ONE = bytes(16), bytes(15) + b"\x01"  # Kafka's reserved instance ids


# -- subscriptions -----------------------------------------------------------------------------------------------

_LIST_SEPARATOR = re2.compile(r"\s*,\s*")  # RE2: linear however many spaces a value holds
_INTEGER = re.compile(r"[-+]?\d+")


def parse_list(text: str) -> list[str]:
    """A LIST config as Kafka's ``ConfigDef`` reads it: trimmed, [] when empty, else split at commas (spaces around
    them dropped; empty items kept)."""
    text = text.strip()
    return [] if not text else _LIST_SEPARATOR.split(text)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscription, checked: its metric prefixes, interval and selector -> compiled regex."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, Any]

    def matches(self, client: Mapping[str, str]) -> bool:
        return all(client.get(selector) is not None and pattern.fullmatch(client[selector]) is not None
                   for selector, pattern in self.match.items())


def validate(name: str, configs: Mapping[str, str | None]) -> Subscription:
    """Kafka's ``ClientMetricsConfigs.validate`` of a subscription's complete configs: the subscription, or
    TopicError with Kafka's error (see the module docstring)."""
    check_name(name)
    unknown = sorted(k for k in configs if k not in CONFIG_NAMES)
    if unknown:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown client metric configuration: [{', '.join(unknown)}]")
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise TopicError(ErrorCode.INVALID_CONFIG,
                         f"Null value not supported for client metrics configs: [{', '.join(nulls)}]")
    for key, value in configs.items():
        if len(value) > MAX_VALUE_LENGTH:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Value of configuration {key} is longer than "
                                                       f"{MAX_VALUE_LENGTH} characters")
    lists = {}
    for key in (METRICS, MATCH):
        items = parse_list(configs.get(key, ""))
        if "" in items:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid value {configs[key]} for configuration {key}: "
                                                       f"Configuration '{key}' values must not be empty.")
        if len(set(items)) != len(items):
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid value {configs[key]} for configuration {key}: "
                                                       f"Configuration '{key}' values must not be duplicated.")
        lists[key] = items
    interval = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in configs:
        text = configs[INTERVAL_MS].strip()
        if not _INTEGER.fullmatch(text) or not -2**31 <= int(text) < 2**31:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid value {configs[INTERVAL_MS]} for configuration "
                                                       f"{INTERVAL_MS}: Not a number of type INT")
        interval = int(text)
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL_MS}, interval "
                                                        f"must be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    match = {}
    for pair in lists[MATCH]:
        parts = [p.strip() for p in pair.split("=")]
        while parts and not parts[-1]:  # Java's split drops trailing empty strings
            parts.pop()
        if len(parts) != 2 or not parts[0]:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pair}")
        if parts[0] not in SELECTORS:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid client matching pattern: {pair}: unknown "
                                                       f"selector {parts[0]} (one of {', '.join(SELECTORS)})")
        try:
            match[parts[0]] = compile_regex(parts[1])
        except RegexError as exc:
            reason = exc.args[0] if exc.args else exc
            reason = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid regex in client matching pattern {pair}: "
                                                       f"{reason}") from None
    return Subscription(name, tuple(lists[METRICS]), interval, match)


def check_name(name: str) -> None:
    """TopicError(INVALID_REQUEST) for a name no subscription may have: empty, or ``.`` and ``..`` (no znode can be
    named so)."""
    if not name:
        raise TopicError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Subscription name {name!r} is not allowed")


# -- clients -----------------------------------------------------------------------------------------------------

def uuid_hash(raw: bytes) -> int:
    """Java's ``Uuid.hashCode`` of a 16-byte id."""
    msb, lsb = struct.unpack(">qq", raw)
    x = msb ^ lsb
    return ((x >> 32) ^ x) & 0xFFFFFFFF


def subscription_id(metrics: Iterable[str], interval_ms: int, instance_id: bytes) -> int:
    """The id of what a client was given, the same on every broker of ours: CRC32C of the sorted metrics and the
    interval (Kafka hashes a Java set's text the same way, in its own order) XOR the instance id's hash, as a
    signed 32-bit int."""
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    value = crc32c.crc32c(text.encode()) ^ uuid_hash(instance_id)
    return value - 2**32 if value >= 2**31 else value


@dataclass(slots=True)
class ClientInstance:
    """One client that asked for its subscription: what it was given, and its last requests."""

    instance_id: bytes
    attributes: dict[str, str]  # the selectors' values: client_id, client_source_address, ...
    version: int  # of the subscriptions it was built from
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int
    connection: Any = None
    last_get: float = float("-inf")  # the clock of ClientMetricsManager.now; -inf never
    last_push: float = float("-inf")
    terminating: bool = False
    last_error: int = ErrorCode.NONE
    expires_at: float = 0.0
    #: The latest pushed metrics: (family, type, help, sample suffix, labels, value) per series, replaced whole
    series: tuple = ()


class ClientMetricsManager:
    """This broker's subscriptions and clients (see the module docstring); ``broker.client_metrics``.

    :meth:`load` and :meth:`read` block on the store (at start, or in an executor); everything else runs on the
    loop, except :meth:`collect`, which the scrape thread calls on snapshots (each client's ``series`` is replaced
    whole, never changed in place)."""

    def __init__(self, broker: "Broker", now: Callable[[], float] = time.monotonic) -> None:
        self.broker = broker
        self.max_bytes: int = broker.config["telemetry.max.bytes"]
        #: the clock of intervals and expiry, seconds (the loop's clock: ``loop.time()`` is ``time.monotonic()``)
        self.now = now
        self._configs: dict[str, dict[str, str]] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0
        self._clients: collections.OrderedDict[bytes, ClientInstance] = collections.OrderedDict()
        self._by_connection: dict[Any, bytes] = {}  # open connection -> the client last made on it
        self._swept = float("-inf")  # when expired clients were last looked for
        #: series held by all clients (bounded by MAX_SERIES), and those left out for a bound since start
        self.series_held = 0
        self.series_dropped = 0
        self.pushes: collections.Counter = collections.Counter()  # error name -> pushes answered with it

    # -- subscriptions ---------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The names of the subscriptions in force here."""
        return sorted(self._configs)

    def get(self, name: str) -> dict[str, str]:
        """A subscription's configs as stored; {} when there is none such."""
        return dict(self._configs.get(name, {}))

    def load(self) -> None:
        """Blocking: read every subscription (at start, before the listeners accept)."""
        for sanitized in self.broker.metadata.client_metrics_subscriptions():
            self.apply(*self.read(sanitized))
        if self._configs:
            log.info("%d client metrics subscription(s) loaded", len(self._configs))

    def read(self, sanitized: str) -> tuple[str, dict[str, str]]:
        """Blocking: ``(name, configs)`` of the node a ``client-metrics/<sanitized>`` notification names."""
        return desanitize_user(sanitized), self.broker.metadata.client_metrics_config(sanitized)

    def apply(self, name: str, configs: Mapping[str, str]) -> None:
        """Put a subscription (as read from the store) in force here; clients get it at their next request."""
        if configs:
            try:
                subscription = validate(name, configs)
            except TopicError as exc:
                log.warning("client metrics subscription %s: ignoring bad stored configs (%s)", name, exc.message)
                return
            self._configs[name] = dict(configs)
            self.subscriptions[name] = subscription
        elif name in self._configs:
            del self._configs[name]
            del self.subscriptions[name]
        else:
            return
        self.version += 1

    async def alter(self, name: str, change: Callable[[dict[str, str]], dict], validate_only: bool) -> None:
        """Apply ``change`` (current configs -> new ones) to a subscription: checked, stored, notified and in force
        here at once; TopicError."""
        check_name(name)
        sanitized = sanitize_user(name)  # URL-encoded as Kafka's Sanitizer
        current = await store_call(self.broker, self.broker.metadata.client_metrics_config, sanitized)
        new = change(dict(current))
        if new:
            validate(name, new)
        if validate_only:
            return
        await store_call(self.broker, self.broker.metadata.set_client_metrics_config, sanitized, new)
        self.apply(name, new)
        log.info("client metrics subscription %s: %s", name,
                 ", ".join(f"{k}={v}" for k, v in sorted(new.items())) if new else "deleted")

    # -- clients ---------------------------------------------------------------------------------------------
    def clients(self) -> list[ClientInstance]:
        """The clients known here (a snapshot)."""
        return list(self._clients.values())

    def _build(self, instance_id: bytes, attributes: dict[str, str], connection: Any) -> ClientInstance:
        metrics: set[str] = set()
        interval = DEFAULT_INTERVAL_MS
        every = False
        for subscription in self.subscriptions.values():
            if subscription.matches(attributes):
                every = every or "*" in subscription.metrics
                metrics.update(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        chosen = ("*",) if every else tuple(sorted(metrics))
        return ClientInstance(instance_id, attributes, self.version, subscription_id(chosen, interval, instance_id),
                              chosen, interval, connection)

    def _client(self, instance_id: bytes, ctx: "RequestContext") -> ClientInstance:
        """The client's entry: made from this request when unknown (a client new here, or moved from another
        broker), rebuilt when the subscriptions changed since; its expiry pushed back."""
        now = self.now()
        self._expire(now)
        client = self._clients.get(instance_id)
        if client is None:
            client = self._build(instance_id, self._attributes(instance_id, ctx), ctx.connection)
            self._clients[instance_id] = client
            while len(self._clients) > MAX_CLIENTS:
                self._drop(self._clients.popitem(last=False)[1])
            conn = ctx.connection
            if conn is not None:  # as Kafka, a connection's latest new client goes when it closes
                if conn not in self._by_connection:
                    conn.closed.add_done_callback(lambda _f, conn=conn: self._gone(conn))
                self._by_connection[conn] = instance_id
        elif client.version < self.version:
            self._drop(client)
            rebuilt = self._build(instance_id, client.attributes, client.connection)
            self._clients[instance_id] = client = rebuilt
        self._clients.move_to_end(instance_id)
        client.expires_at = now + max(MIN_EXPIRY_S, 3 * client.interval_ms / 1000)
        return client

    @staticmethod
    def _attributes(instance_id: bytes, ctx: "RequestContext") -> dict[str, str]:
        conn = ctx.connection
        port = ctx.peer.rpartition(":")[2] if ":" in ctx.peer else None
        return {
            "client_instance_id": format_topic_id(uuid.UUID(bytes=instance_id)),
            "client_id": ctx.client_id or "",
            "client_software_name": getattr(conn, "client_software_name", "") or "unknown",
            "client_software_version": getattr(conn, "client_software_version", "") or "unknown",
            "client_source_address": conn.host if conn is not None else ctx.peer.rpartition(":")[0],
            "client_source_port": port,
        }

    def _gone(self, connection: Any) -> None:
        """A connection closed: the client last made on it goes, with its metrics (as in Kafka)."""
        instance_id = self._by_connection.pop(connection, None)
        client = self._clients.get(instance_id)
        if client is not None and client.connection is connection:
            self._drop(self._clients.pop(instance_id))

    def _expire(self, now: float) -> None:
        if now - self._swept < EXPIRY_SWEEP_S:
            return
        self._swept = now
        expired = [key for key, client in self._clients.items() if client.expires_at <= now]
        for key in expired:
            self._drop(self._clients.pop(key))

    def _drop(self, client: ClientInstance) -> None:
        self.series_held -= len(client.series)

    def _new_instance_id(self) -> bytes:
        while True:
            raw = uuid.uuid4().bytes
            if raw not in (_ZERO, _ONE) and not format_topic_id(uuid.UUID(bytes=raw)).startswith("-") and raw not in self._clients:
                return raw

    def get_subscriptions(self, ctx: "RequestContext", request: dict) -> dict:
        """The GetTelemetrySubscriptions answer (see the module docstring)."""
        raw = request["client_instance_id"].bytes
        if raw == _ZERO:
            raw = self._new_instance_id()
        client = self._client(raw, ctx)
        now = self.now()
        if (now - max(client.last_get, client.last_push)) * 1000 < client.interval_ms and client.last_error not in (
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            return _get_answer(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        client.last_get = now
        client.last_error = ErrorCode.NONE
        return {**_get_answer(ErrorCode.NONE), "client_instance_id": uuid.UUID(bytes=raw),
                "subscription_id": client.subscription_id,
                "accepted_compression_types": [int(c) for c in ACCEPTED_COMPRESSION],
                "push_interval_ms": client.interval_ms, "telemetry_max_bytes": self.max_bytes,
                "delta_temporality": False, "requested_metrics": list(client.metrics)}

    def push(self, ctx: "RequestContext", request: dict) -> int:
        """The PushTelemetry answer's error code (see the module docstring); a good push's metrics are kept."""
        error = self._push(ctx, request)
        self.pushes[ErrorCode(error).name] += 1
        return error

    def _push(self, ctx: "RequestContext", request: dict) -> int:
        raw = request["client_instance_id"].bytes
        if raw in (_ZERO, _ONE):
            return ErrorCode.INVALID_REQUEST
        client = self._client(raw, ctx)
        terminating = bool(request["terminating"])
        try:
            error = self._check_push(client, request, terminating)
            if error == ErrorCode.NONE and request["metrics"]:
                try:
                    self._export(client, request)
                except (CompressionError, DecodeError, ValueError) as exc:
                    log.debug("push of client %s refused: %s", format_topic_id(uuid.UUID(bytes=raw)), exc)
                    error = ErrorCode.INVALID_RECORD
            client.last_error = error
        finally:
            client.terminating = terminating
        if terminating:  # the client is closing: its metrics go with it
            self._drop(client)
            client.series = ()
        return error

    def _check_push(self, client: ClientInstance, request: dict, terminating: bool) -> int:
        if client.terminating:
            return ErrorCode.INVALID_REQUEST
        now = self.now()
        if terminating:
            client.last_push = now
        elif client.last_get > client.last_push or (now - client.last_push) * 1000 >= client.interval_ms:
            client.last_push = now
        else:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if request["subscription_id"] != client.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if request["compression_type"] not in tuple(Compression):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(request["metrics"]) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _export(self, client: ClientInstance, request: dict) -> None:
        data = decompress_bounded(request["compression_type"], request["metrics"], self.max_bytes)
        payload = metrics_pb2.MetricsData.FromString(data)
        if not client.metrics:  # asked for nothing: nothing is kept
            return
        room = min(MAX_SERIES_PER_CLIENT, MAX_SERIES - self.series_held + len(client.series))
        series, dropped = series_of(payload, client.attributes, client.metrics, max(room, 0))
        if dropped:
            if not self.series_dropped:
                log.warning("client %s pushed more series than this broker keeps for it (%d left out); "
                            "see kafkapy_client_telemetry_series_dropped_total", client.attributes["client_id"],
                            dropped)
            self.series_dropped += dropped
        self.series_held += len(series) - len(client.series)
        client.series = series

    # -- export ----------------------------------------------------------------------------------------------
    def collect(self) -> list[Metric]:
        """Every client's latest metrics as Prometheus families (called at scrape time, from any thread)."""
        families: dict[str, Metric] = {}
        samples: dict[str, str] = {}  # sample name -> its family: no two families may make one name
        for client in self.live_clients():
            for family, kind, doc, suffix, labels, value in client.series:
                metric = families.get(family)
                if metric is None:
                    if samples.setdefault(family + suffix, family) != family:
                        continue
                    metric = families[family] = Metric(family, doc, kind)
                elif metric.type != kind:
                    continue  # one name pushed as two types: the first seen is kept
                metric.add_sample(family + suffix, labels, value)
        return list(families.values())

    def live_clients(self) -> list[ClientInstance]:
        """The clients not expired (a snapshot; expired ones may wait for the next sweep to go)."""
        now = self.now()
        return [c for c in list(self._clients.values()) if c.expires_at > now]


def _get_answer(error: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "client_instance_id": uuid.UUID(bytes=_ZERO),
            "subscription_id": 0, "accepted_compression_types": [], "push_interval_ms": 0,
            "telemetry_max_bytes": 0, "delta_temporality": False, "requested_metrics": []}


# -- OTLP to Prometheus ------------------------------------------------------------------------------------------

_CLIENT_LABELS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                  "client_source_address")
_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")


@functools.lru_cache(maxsize=4096)
def prometheus_name(name: str) -> str:
    """An OTLP metric name as OpenTelemetry's Prometheus exporter writes it: every character outside
    ``[a-zA-Z0-9_:]`` an underscore, a leading digit behind one."""
    out = _INVALID_NAME.sub("_", name)
    return "_" + out if out[:1].isdigit() else out or "_"


@functools.lru_cache(maxsize=4096)
def label_name(key: str) -> str | None:
    """An attribute key as a label name (``node.id`` -> ``node_id``); None for one Prometheus reserves (``__*``)."""
    out = _INVALID_LABEL.sub("_", key)
    out = "_" + out if out[:1].isdigit() else out or "_"
    return None if out.startswith("__") else out


def _any_value(value) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind in ("int_value", "double_value"):
        return str(getattr(value, kind))
    if kind == "bytes_value":
        return value.bytes_value.hex()
    if kind == "array_value":
        return "[" + ",".join(_any_value(v) for v in value.array_value.values) + "]"
    return "{" + ",".join(f"{kv.key}={_any_value(kv.value)}" for kv in value.kvlist_value.values) + "}"


def _attributes(pairs) -> dict[str, str]:
    out = {}
    for kv in pairs:
        key = label_name(kv.key)
        if key is not None:
            out[key] = _any_value(kv.value)
    return out


def _requested(name: str, metrics: tuple[str, ...]) -> bool:
    """Whether the client was asked for ``name`` (its requested prefixes; ``*`` all), a Kafka client's metric."""
    return name.startswith(METRIC_PREFIX) and (metrics == ("*",) or name.startswith(metrics))


def series_of(payload, client: Mapping[str, str], metrics: tuple[str, ...], room: int) -> tuple[tuple, int]:
    """The Prometheus series of one pushed ``MetricsData``: ``(series, left out)``, each series (family, type, help,
    sample suffix, labels, value). Only Kafka client metrics the client was asked for (``metrics``: its requested
    prefixes) are taken, gauges and cumulative sums (delta sums are not what it was asked for; histograms and
    summaries are not sent by Kafka clients), at most ``room`` series of at most :data:`MAX_LABELS` labels."""
    base = {name: client.get(name) or "" for name in _CLIENT_LABELS}
    out: dict[tuple, tuple] = {}
    dropped = 0
    for resource_metrics in payload.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                if not _requested(metric.name, metrics):
                    continue
                kind = metric.WhichOneof("data")
                family = prometheus_name(metric.name)
                if kind == "gauge":
                    points, prom_type, suffix = metric.gauge.data_points, "gauge", ""
                elif kind == "sum":
                    if metric.sum.aggregation_temporality != metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE:
                        continue
                    if metric.sum.is_monotonic:
                        family = family[:-6] if family.endswith("_total") else family
                        prom_type, suffix = "counter", "_total"
                    else:
                        prom_type, suffix = "gauge", ""
                    points = metric.sum.data_points
                else:
                    continue
                for point in points:
                    if len(out) >= room:  # full: what is left is counted, not read
                        dropped += 1
                        continue
                    labels = {**resource, **_attributes(point.attributes), **base}
                    if len(labels) > MAX_LABELS:
                        dropped += 1
                        continue
                    key = (family, tuple(sorted(labels.items())))
                    value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
                    out[key] = (family, prom_type, metric.description or metric.name, suffix, labels, value)
    return tuple(out.values()), dropped


class ClientMetricsCollector(Collector):
    """Serves :meth:`ClientMetricsManager.collect` and the broker's own figures on pushes."""

    def __init__(self, manager: ClientMetricsManager) -> None:
        self._manager = manager

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        try:
            families = self._manager.collect()
            clients = len(self._manager.live_clients())
            pushes = dict(self._manager.pushes)
            dropped = self._manager.series_dropped
        except Exception:  # a scrape must never take anything down
            log.exception("collecting client metrics failed")
            families, clients, pushes, dropped = [], 0, {}, 0
        yield from families
        count = GaugeMetricFamily("kafkapy_client_telemetry_clients",
                                  "Clients known to this broker's client metrics (KIP-714).")
        count.add_metric([], clients)
        yield count
        pushed = CounterMetricFamily("kafkapy_client_telemetry_pushes", "PushTelemetry requests answered, by error.",
                                     labels=["error"])
        for error, n in sorted(pushes.items()):
            pushed.add_metric([error], n)
        yield pushed
        left_out = CounterMetricFamily("kafkapy_client_telemetry_series_dropped",
                                       "Pushed series not kept for a bound: per client, per series' labels, in all.")
        left_out.add_metric([], dropped)
        yield left_out
