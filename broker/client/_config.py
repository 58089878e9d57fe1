"""Client configuration.

The primary style is pythonic keyword arguments with Kafka's property names in
snake_case::

    Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5, compression_type="zstd")

Kafka's dotted names are accepted as a mapping too, so existing property
files carry over unchanged; both may be mixed and keywords win::

    Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})

Values may be given as text, as in a Kafka properties file: a string for a
numeric or boolean property is converted (``{"linger.ms": "2"}``,
``{"enable.auto.commit": "false"}``); text that is not a number (or not
``true``/``false``) raises :class:`~broker.client.errors.ConfigError` naming
the property. Unknown names raise ConfigError too.

TLS (every client: :class:`CommonConfig`) uses librdkafka's names, the Java
client's PEM spellings being accepted too; the semantics are in
:mod:`broker.client._tls`::

    Producer({"bootstrap.servers": "kafka1:9093", "security.protocol": "SSL",
              "ssl.ca.location": "/etc/kafka/ca.pem",              # absent: the system's CAs
              "ssl.certificate.location": "/etc/kafka/client.pem",  # client auth, if the broker wants it
              "ssl.key.location": "/etc/kafka/client.key", "ssl.key.password": "...",
              "enable.ssl.certificate.verification": "true",        # default
              "ssl.endpoint.identification.algorithm": "https"})    # default; or none

The files are read when the client is built (a bad one is a ConfigError naming
the property and the file); the config's ``ssl_context`` attribute is the one
:class:`ssl.SSLContext` its connections use (None without TLS).

SASL (every client) is ``security.protocol`` SASL_PLAINTEXT or SASL_SSL (TLS as
above, then SASL) with librdkafka's ``sasl.*`` names, or the Java client's
``sasl.jaas.config``; the semantics are in :mod:`broker.client._sasl`::

    Producer({"bootstrap.servers": "kafka1:9094", "security.protocol": "SASL_SSL",
              "ssl.ca.location": "/etc/kafka/ca.pem",
              "sasl.mechanism": "SCRAM-SHA-512",      # or PLAIN, SCRAM-SHA-256; sasl.mechanisms too
              "sasl.username": "alice", "sasl.password": "alice-secret"})

OAUTHBEARER takes its token from an identity provider (the OAuth 2 client-credentials
grant) or, for development brokers, makes an unsecured JWT; the names are librdkafka's,
the Java client's ``sasl.jaas.config`` with ``OAuthBearerLoginModule`` too (see
:mod:`broker.client._oauth`)::

    Producer({"bootstrap.servers": "kafka1:9094", "security.protocol": "SASL_SSL",
              "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
              "sasl.oauthbearer.client.id": "orders-app", "sasl.oauthbearer.client.secret": "...",
              "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
              "sasl.oauthbearer.scope": "kafka"})   # optional; sasl.oauthbearer.extensions too

The config's ``sasl`` attribute is the :class:`~broker.client._sasl.SaslSettings`
every connection authenticates with (None without SASL).
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ._sasl import SaslSettings, settings_from as sasl_settings_from
from ._tls import build_context as build_ssl_context
from .errors import ConfigError


@dataclass
class CommonConfig:
    bootstrap_servers: str | list[str] = "127.0.0.1:9092"
    client_id: str = "kafkapy"
    request_timeout_ms: int = 30000
    connections_max_idle_ms: int = 540000
    reconnect_backoff_ms: int = 50
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 300000
    socket_connection_setup_timeout_ms: int = 10000
    max_frame_bytes: int = 128 * 1024 * 1024
    # TLS: librdkafka's names and meanings, see broker.client._tls
    security_protocol: str = "PLAINTEXT"
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    enable_ssl_certificate_verification: bool = True
    ssl_endpoint_identification_algorithm: str = "https"
    # the Java client's spellings (PEM stores only), see broker.client._tls
    ssl_truststore_location: str | None = None
    ssl_truststore_type: str | None = None
    ssl_truststore_password: str | None = field(default=None, repr=False)  # accepted, unused: see _tls
    ssl_keystore_location: str | None = None
    ssl_keystore_type: str | None = None
    ssl_keystore_password: str | None = field(default=None, repr=False)  # accepted, unused: see _tls
    # SASL: librdkafka's names (sasl.mechanisms is its other spelling) and the Java client's
    # sasl.jaas.config, see broker.client._sasl
    sasl_mechanism: str | None = None
    sasl_mechanisms: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_jaas_config: str | None = field(default=None, repr=False)
    # OAUTHBEARER's token: librdkafka's names (OIDC client credentials, or unsecured JWTs for development),
    # and the Java client's login callback handler (with sasl.jaas.config); see broker.client._oauth
    sasl_oauthbearer_method: str | None = None
    sasl_oauthbearer_client_id: str | None = None
    sasl_oauthbearer_client_secret: str | None = field(default=None, repr=False)
    sasl_oauthbearer_token_endpoint_url: str | None = None
    sasl_oauthbearer_scope: str | None = None
    sasl_oauthbearer_extensions: str | None = None
    sasl_oauthbearer_config: str | None = None
    enable_sasl_oauthbearer_unsecure_jwt: bool = False
    sasl_login_callback_handler_class: str | None = None
    # GSSAPI (Kerberos): librdkafka's names; see broker.client._sasl
    sasl_kerberos_service_name: str | None = None
    sasl_kerberos_keytab: str | None = None
    sasl_kerberos_principal: str | None = None
    https_ca_location: str | None = None  # CAs of an https:// token endpoint (default: the system's)

    def __post_init__(self) -> None:
        # One SSLContext per client (None without TLS); every file is read and checked here.
        self.ssl_context: ssl.SSLContext | None = build_ssl_context(self)
        # What every connection authenticates with (None without SASL)
        self.sasl: SaslSettings | None = sasl_settings_from(self)

    def bootstrap_list(self) -> list[tuple[str, int]]:
        """``bootstrap_servers`` as ``[(host, port), ...]`` (comma-separated string or list)."""
        items = self.bootstrap_servers
        if isinstance(items, str):
            items = [s for s in items.split(",")]
        out = []
        for item in items:
            item = item.strip()
            if not item:
                continue
            if "://" in item:
                item = item.split("://", 1)[1]
            host, sep, port = item.rpartition(":")
            if not sep:
                host, port = item, "9092"
            host = host.strip("[]") or "127.0.0.1"
            try:
                out.append((host, int(port)))
            except ValueError:
                raise ConfigError(f"bad bootstrap server {item!r}: expected HOST:PORT") from None
        if not out:
            raise ConfigError("bootstrap_servers is empty")
        return out


@dataclass
class ProducerConfig(CommonConfig):
    acks: int | str = -1
    batch_size: int = 16384
    linger_ms: float = 5
    buffer_memory: int = 32 * 1024 * 1024
    compression_type: str | None = "none"
    compression_level: int | None = None
    retries: int = 2147483647
    max_in_flight_requests_per_connection: int = 5
    delivery_timeout_ms: int = 120000
    max_request_size: int = 1048576
    max_block_ms: int = 60000
    enable_idempotence: bool | None = None  # None: on unless other settings rule it out (see below)
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    partitioner: Any = None
    key_serializer: Callable | None = None
    value_serializer: Callable | None = None

    def __post_init__(self) -> None:
        if isinstance(self.acks, str) and self.acks.strip().lower() == "all":
            self.acks = -1
        try:
            self.acks = int(self.acks)
        except (TypeError, ValueError):
            raise ConfigError(f"acks must be 0, 1 or all, not {self.acks!r}") from None
        if self.acks not in (-1, 0, 1):
            raise ConfigError(f"acks must be 0, 1 or all, not {self.acks!r}")
        ct = (self.compression_type or "none").lower()
        if ct not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise ConfigError(f"unknown compression_type {self.compression_type!r}")
        self.compression_type = ct
        if self.max_in_flight_requests_per_connection < 1:
            raise ConfigError("max_in_flight_requests_per_connection must be >= 1")
        if self.transactional_id is not None:
            if not self.transactional_id:
                raise ConfigError("transactional_id must not be empty")
            if self.acks != -1:
                raise ConfigError(f"a transactional producer needs acks=all, not {self.acks!r}")
            if self.transaction_timeout_ms < 1:
                raise ConfigError("transaction_timeout_ms must be >= 1")
            if self.enable_idempotence is False:
                raise ConfigError("a transactional producer needs enable_idempotence, not false")
        # Kafka 3.2+ ProducerConfig: idempotence is on by default, silently off when the user's
        # acks, retries or max_in_flight rule it out; asked for explicitly, those are errors.
        self.idempotence_explicit = self.enable_idempotence is not None
        if self.enable_idempotence is None:
            self.enable_idempotence = (self.acks == -1 and self.retries > 0
                                       and self.max_in_flight_requests_per_connection <= 5)
        elif self.enable_idempotence:
            if self.acks != -1:
                raise ConfigError(f"enable_idempotence needs acks=all, not {self.acks!r}")
            if self.retries < 1:
                raise ConfigError("enable_idempotence needs retries >= 1")
            if self.max_in_flight_requests_per_connection > 5:
                raise ConfigError("enable_idempotence needs max_in_flight_requests_per_connection <= 5, not "
                                  f"{self.max_in_flight_requests_per_connection}")
        super().__post_init__()


@dataclass
class ConsumerConfig(CommonConfig):
    group_id: str | None = None
    group_instance_id: str | None = None
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    max_poll_records: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1048576
    isolation_level: str = "read_uncommitted"
    client_rack: str = ""
    check_crcs: bool = True
    partition_assignment_strategy: Any = ("range", "roundrobin")
    key_deserializer: Callable | None = None
    value_deserializer: Callable | None = None
    exclude_internal_topics: bool = True
    # legacy ZooKeeper groups and offsets (broker.client._zk_group, broker.client._offset_storage)
    group_protocol: str = "classic"
    offsets_storage: str = "kafka"
    dual_commit_enabled: bool = False
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    rebalance_backoff_ms: int = 2000

    def __post_init__(self) -> None:
        self.group_protocol = str(self.group_protocol).lower()
        if self.group_protocol not in ("classic", "zookeeper"):
            raise ConfigError(f"group_protocol must be classic or zookeeper, not {self.group_protocol!r}")
        self.offsets_storage = str(self.offsets_storage).lower()
        if self.offsets_storage not in ("kafka", "zookeeper"):
            raise ConfigError(f"offsets_storage must be kafka or zookeeper, not {self.offsets_storage!r}")
        if self.uses_zookeeper() and not self.zookeeper_connect:
            raise ConfigError("zookeeper_connect is needed with group_protocol=zookeeper, "
                              "offsets_storage=zookeeper or dual_commit_enabled")
        if self.group_protocol == "zookeeper" and not self.group_id:
            raise ConfigError("group_protocol=zookeeper needs group_id")
        reset = str(self.auto_offset_reset).lower()
        reset = {"smallest": "earliest", "beginning": "earliest", "largest": "latest", "end": "latest"}.get(reset, reset)
        if reset not in ("earliest", "latest", "none"):
            raise ConfigError(f"auto_offset_reset must be earliest, latest or none, not {self.auto_offset_reset!r}")
        self.auto_offset_reset = reset
        if self.isolation_level not in ("read_uncommitted", "read_committed"):
            raise ConfigError(f"bad isolation_level {self.isolation_level!r}")
        if isinstance(self.partition_assignment_strategy, str):
            self.partition_assignment_strategy = [
                s.strip() for s in self.partition_assignment_strategy.split(",") if s.strip()
            ]
        super().__post_init__()

    def uses_zookeeper(self) -> bool:
        return self.group_protocol == "zookeeper" or self.offsets_storage == "zookeeper" or self.dual_commit_enabled


@dataclass
class AdminConfig(CommonConfig):
    pass


def build_config(cls, config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]):
    """Merge a dotted-name mapping and keyword arguments into ``cls``, converting
    text values of numeric and boolean properties (see the module docstring)."""
    kinds = _field_kinds(cls)
    values: dict[str, Any] = {}
    for source in (config or {}), kwargs:
        for key, value in source.items():
            name = key.replace(".", "_").replace("-", "_")
            if name not in kinds:
                raise ConfigError(f"unknown configuration {key!r} for {cls.__name__}")
            if isinstance(value, str) and kinds[name] is not None:
                value = _from_text(key, value, kinds[name])
            values[name] = value
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(str(exc)) from None


_KINDS_CACHE: dict[type, dict[str, type | None]] = {}


def _field_kinds(cls) -> dict[str, type | None]:
    """``{field: bool | int | float | None}``: the type text converts to (None: keep text).

    A field whose type admits ``str`` (``acks: int | str``) keeps text: its own
    ``__post_init__`` reads it.
    """
    kinds = _KINDS_CACHE.get(cls)
    if kinds is None:
        hints = typing.get_type_hints(cls)
        kinds = {}
        for f in dataclasses.fields(cls):
            args = set(typing.get_args(hints[f.name])) or {hints[f.name]}
            args.discard(type(None))
            kind = None
            if str not in args and Any not in args:
                for candidate in (bool, int, float):
                    if candidate in args:
                        kind = candidate
                        break
            kinds[f.name] = kind
        _KINDS_CACHE[cls] = kinds
    return kinds


def _from_text(key: str, text: str, kind: type):
    t = text.strip()
    if kind is bool:
        if t.lower() in ("true", "false"):
            return t.lower() == "true"
        raise ConfigError(f"configuration {key!r} must be true or false, not {text!r}")
    if kind is int:
        try:
            return int(t)
        except ValueError:
            raise ConfigError(f"configuration {key!r} must be an integer, not {text!r}") from None
    try:
        return float(t)
    except ValueError:
        raise ConfigError(f"configuration {key!r} must be a number, not {text!r}") from None


def default_client_id() -> str:
    return f"kafkapy-{socket.gethostname()}"
