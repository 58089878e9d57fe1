"""Typed broker configuration with Apache Kafka's property names, loaded from YAML.

A configuration file is a flat YAML mapping of property name to value::

    broker.id: 0
    listeners: PLAINTEXT://127.0.0.1:9092
    log.dirs: data/kafka-logs
    num.partitions: 1

Values may be written as YAML scalars or as strings (``"true"``, ``"1048588"``).
A Kafka ``server.properties`` file (Java properties syntax, :mod:`broker.properties`)
is read as well: by its ``.properties`` suffix, or by its content when the name
says nothing (:func:`read_config_file`). Every property has Kafka's default;
``configs/broker.yaml`` (mirrored by :data:`EMBEDDED_DEFAULTS`) is what
``python -m broker`` runs when no ``--config`` is given.

A broker property of Apache Kafka 2.7 that this broker does not implement
(``num.network.threads``, ``quota.producer.default``, ...) is accepted and
listed in :attr:`BrokerConfig.ignored` (the CLI warns once for each), so an
operator's existing file works. Any other unknown name is refused as a typo,
with the closest known name as a hint. Bad values raise :class:`ConfigError`
with a one-line message that names the property, the value and, from
:func:`load_config`, where it came from (``--override`` or the file).

Properties that are ours, not Apache Kafka's:

``metrics.port``
    TCP port of the Prometheus ``/metrics`` HTTP endpoint, bound on the host of
    the first listener. ``0`` picks an ephemeral port, ``-1`` turns it off.
``metadata.store``
    ``embedded`` (cluster metadata kept in the first log dir) or ``zookeeper``
    (on ``zookeeper.connect``). Unset, it follows ``zookeeper.connect``: set
    means ZooKeeper, as in Kafka, absent means embedded.
``fetch.purgatory.max.wait.ms``
    Upper bound applied to a fetch request's ``max_wait_ms`` (default 30000),
    so a long poll never outlives a client's own request timeout by much.
``shutdown.timeout.ms``
    How long a graceful shutdown waits for in-flight requests before closing
    connections (default 10000).
``group.new.member.join.timeout.ms``
    How long the JoinGroup of a member new to the group may be held before the
    member is removed (default 300000, the constant Apache Kafka 2.7 hard-codes).

Invariants: a :class:`BrokerConfig` is immutable after construction and every
value in it has passed its property's parser and validator.
"""

from __future__ import annotations

import difflib
import math
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from broker import properties
from broker.kafka_properties import KAFKA_27_BROKER_PROPERTIES, is_kafka_broker_property
from broker.replica.selector import parse_selector
from broker.log.config import LATEST_FORMAT_VERSION, TOPIC_CONFIGS, format_version_magic

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A configuration problem; ``str(err)`` is one line meant for the operator.

    ``property`` names the property at fault, when one is (not for a rule
    between several properties).
    """

    def __init__(self, message: str, property: str | None = None) -> None:
        super().__init__(message)
        self.property = property


# -- value parsers ---------------------------------------------------------------


def _int(value: Any, *, lo: int = -(2**63), hi: int = LONG_MAX) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer, got a boolean")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"expected an integer, got {value!r}")
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {value!r}") from None
    if not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    if value < lo or value > hi:
        raise ValueError(f"{value} is out of range [{lo}, {hi}]")
    return value


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {value!r}")


def _str(value: Any) -> str:
    if isinstance(value, (dict, list)):
        raise ValueError(f"expected a string, got {value!r}")
    return str(value)


def _float(value: Any, *, lo: float = -math.inf, hi: float = math.inf) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{value} is out of range [{lo}, {hi}]")
    return value


def _ip_overrides(value: Any) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...`` (split at the last colon, as Kafka) -> {host: count}."""
    text = ",".join(f"{k}:{v}" for k, v in value.items()) if isinstance(value, dict) else _str(value)
    out: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, colon, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not colon or not host:
            raise ValueError(f"{item!r} is not host:count")
        if not re.fullmatch(r"[A-Za-z0-9._:%-]+", host):
            raise ValueError(f"{host!r} is not a host name or an address")
        out[host] = _int(count, lo=0, hi=INT_MAX)
    return out


def _list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        items = [str(v).strip() for v in value]
    else:
        items = [v.strip() for v in str(value).split(",")]
    return [v for v in items if v]


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _str(value)
        if text not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _subset_of(*choices: str) -> Callable[[Any], list[str]]:
    def parse(value: Any) -> list[str]:
        items = _list(value)
        if not items or any(item not in choices for item in items):
            raise ValueError(f"{value!r} is not a list of {', '.join(choices)}")
        return items

    return parse


def _cleanup_policy(value: Any) -> list[str]:
    # Kafka accepts an empty list: logs neither deleted by retention nor compacted.
    items = _list(value)
    if any(item not in ("delete", "compact") for item in items):
        raise ValueError(f"{value!r} is not a list of delete, compact")
    return items


def _format_version(value: Any) -> str:
    text = _str(value)
    format_version_magic(text)  # ValueError names the value
    return text


def _ranged(lo: int = -(2**63), hi: int = LONG_MAX) -> Callable[[Any], int]:
    return lambda value: _int(value, lo=lo, hi=hi)


def _optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None or value == "" else parse(value)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: ``NAME://host:port``. An empty host means every interface."""

    listener_name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener_name}://{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    name, sep, rest = text.partition("://")
    if not sep or not name:
        raise ValueError(f"listener {text!r} is not NAME://host:port")
    host, colon, port_text = rest.rpartition(":")
    if not colon:
        raise ValueError(f"listener {text!r} has no port")
    host = host.strip("[]")
    port = _int(port_text, lo=0, hi=65535)
    return Endpoint(name.upper(), host, port)


def split_zookeeper_connect(connect: str) -> tuple[str, str]:
    """``"h1:p1,h2:p2/kafka"`` -> ``("h1:p1,h2:p2", "/kafka")``; the chroot is ``""`` when absent."""
    hosts, slash, chroot = str(connect).strip().partition("/")
    if not hosts:
        raise ValueError(f"{connect!r} names no ZooKeeper server")
    for server in hosts.split(","):
        host, colon, port = server.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{server!r} in {connect!r} is not host:port")
    parts = [p for p in chroot.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"chroot of {connect!r} may not contain . or ..")
    return hosts, "".join("/" + p for p in parts)


def _zookeeper_connect(value: Any) -> str:
    text = _str(value).strip()
    split_zookeeper_connect(text)
    return text


def _listeners(value: Any) -> list[Endpoint]:
    endpoints = [parse_endpoint(item) for item in _list(value)]
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError("each listener name may appear only once")
    return endpoints


#: Kafka's security protocols. A listener's is looked up by its name in ``listener.security.protocol.map``.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Their ids in the protocol (UpdateMetadata's endpoints, ``security_protocol``).
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
#: What this broker serves (every protocol of Kafka but Kerberos' mechanism).
SERVED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The protocols whose listeners speak TLS, and those that authenticate with SASL.
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


def _protocol_map(value: Any) -> dict[str, str]:
    """``"INTERNAL:PLAINTEXT,EXTERNAL:SSL"`` -> ``{"INTERNAL": "PLAINTEXT", "EXTERNAL": "SSL"}``."""
    result: dict[str, str] = {}
    for item in _list(value):
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name or not protocol:
            raise ValueError(f"{item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{protocol!r} is not a security protocol ({', '.join(SECURITY_PROTOCOLS)})")
        if name in result:
            raise ValueError(f"listener name {name} appears twice")
        result[name] = protocol
    return result


def _mapping_rules(value: Any) -> str:
    from broker.acl import PrincipalMapper

    text = _str(value).strip() or "DEFAULT"
    PrincipalMapper.parse(text)  # ValueError names the rule that cannot be read
    return text


def _authorizer(value: Any) -> str:
    from broker.acl import AUTHORIZER_CLASSES

    text = _str(value).strip()
    if text and text not in AUTHORIZER_CLASSES:
        raise ValueError(f"{text!r} is not served: {AUTHORIZER_CLASSES[0]} (Kafka's ACL authorizer), or empty")
    return text


def _super_users(value: Any) -> list[str]:
    """``User:admin;User:broker`` (Kafka separates them with ';', since a principal may hold ',')."""
    users = [u.strip() for u in _str(value).split(";") if u.strip()]
    for user in users:
        kind, colon, name = user.partition(":")
        if not colon or not kind or not name:
            raise ValueError(f"{user!r} is not a principal (Type:name, e.g. User:admin)")
    return users


def _upper(value: Any) -> str:
    return _str(value).strip().upper()


def _endpoint_identification(value: Any) -> str:
    """``https`` or empty (Kafka's two values, any case); anything else is refused, never read as off."""
    text = _str(value).strip().lower()
    if text not in ("https", ""):
        raise ValueError(f"{value!r} is not https or empty (empty: the other broker's host name is not checked)")
    return text


#: The TLS properties this broker implements (PEM key stores and trust stores, KIP-651's inline forms).
#: Each may also be given for one listener as ``listener.name.<listener>.<property>`` (lower-case name).
SSL_PROPERTIES = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
)

#: The SASL properties that may be given per listener as ``listener.name.<listener>.<property>``, besides
#: each mechanism's ``<mechanism>.sasl.jaas.config`` (see :mod:`broker.sasl`).
SASL_LISTENER_PROPERTIES = ("sasl.enabled.mechanisms",)
#: The connection limits that may be given per listener (``listener.name.<listener>.max.connections``); a
#: listener without its own takes the broker-wide value (see :mod:`broker.server.connection_quotas`).
CONNECTION_LISTENER_PROPERTIES = ("max.connections", "max.connection.creation.rate")
_JAAS_SUFFIX = ".sasl.jaas.config"
#: Per listener and mechanism, as ``listener.name.<listener>.<mechanism>.<property>``: the JAAS entry, and
#: OAUTHBEARER's validator class (Kafka's server callback handler)
_MECHANISM_SUFFIXES = (_JAAS_SUFFIX, ".sasl.server.callback.handler.class", ".connections.max.reauth.ms")


# -- the property table ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prop:
    """One configuration property: its Kafka name, parser and default."""

    name: str
    parse: Callable[[Any], Any]
    default: Any
    doc: str
    ours: bool = False
    #: A password or key: DescribeConfigs answers it as null with ``is_sensitive``, and no log line shows it.
    sensitive: bool = False


_PROPS: list[Prop] = [
    Prop("broker.id", _ranged(-1, INT_MAX), -1, "Id of this broker; -1 takes meta.properties', else a generated one."),
    Prop("broker.id.generation.enable", _bool, True, "Generate an id from /brokers/seqid when none is set."),
    Prop("reserved.broker.max.id", _ranged(0, INT_MAX), 1000, "Largest id an operator may set; generated ids are above."),
    Prop("broker.rack", _optional(_str), None, "Rack of this broker (reported in Metadata)."),
    Prop("listeners", _listeners, "PLAINTEXT://:9092", "Comma-separated NAME://host:port; port 0 binds an ephemeral port."),
    Prop("advertised.listeners", _optional(_listeners), None, "Addresses given to clients; defaults to listeners."),
    Prop("listener.security.protocol.map", _protocol_map,
         "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
         "Listener name -> security protocol (PLAINTEXT or SSL served here)."),
    Prop("inter.broker.listener.name", _optional(_upper), None,
         "Listener other brokers connect to; defaults to the one named security.inter.broker.protocol."),
    Prop("security.inter.broker.protocol", _choice(*SECURITY_PROTOCOLS), "PLAINTEXT",
         "Security protocol between brokers, when inter.broker.listener.name is not set."),
    Prop("ssl.keystore.type", _choice("PEM", "JKS", "PKCS12"), "PEM",
         "Format of the key store: PEM only here (Kafka's default, JKS, must be converted)."),
    Prop("ssl.keystore.location", _optional(_str), None,
         "PEM file holding the private key and the certificate chain of this broker."),
    Prop("ssl.keystore.certificate.chain", _optional(_str), None, "The certificate chain itself, PEM (KIP-651).",
         sensitive=True),
    Prop("ssl.keystore.key", _optional(_str), None, "The private key itself, PEM (KIP-651).", sensitive=True),
    Prop("ssl.keystore.password", _optional(_str), None, "Password of a JKS/PKCS12 key store (not used by PEM).",
         sensitive=True),
    Prop("ssl.key.password", _optional(_str), None, "Password of an encrypted PEM private key.", sensitive=True),
    Prop("ssl.truststore.type", _choice("PEM", "JKS", "PKCS12"), "PEM", "Format of the trust store: PEM only here."),
    Prop("ssl.truststore.location", _optional(_str), None, "PEM file of CA certificates trusted for client certificates."),
    Prop("ssl.truststore.certificates", _optional(_str), None, "The trusted CA certificates themselves, PEM (KIP-651).",
         sensitive=True),
    Prop("ssl.truststore.password", _optional(_str), None, "Password of a JKS/PKCS12 trust store (not used by PEM).",
         sensitive=True),
    Prop("ssl.client.auth", _choice("none", "requested", "required"), "none",
         "Client certificates on SSL listeners: none, requested (checked when sent) or required."),
    Prop("ssl.enabled.protocols", _list, "TLSv1.2,TLSv1.3", "TLS versions accepted (TLSv1.2, TLSv1.3)."),
    Prop("ssl.endpoint.identification.algorithm", _endpoint_identification, "https",
         "https: a broker's certificate must name the host another broker connects to; empty: not checked."),
    Prop("authorizer.class.name", _authorizer, "",
         "kafka.security.authorizer.AclAuthorizer enables ACLs; empty: every request is allowed."),
    Prop("super.users", _super_users, "", "Principals allowed everything, ';'-separated (User:admin;User:broker)."),
    Prop("allow.everyone.if.no.acl.found", _bool, False, "Allow access to a resource that has no ACL at all."),
    Prop("sasl.enabled.mechanisms", _list, "GSSAPI",
         "SASL mechanisms of SASL listeners: GSSAPI (Kerberos), PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER."),
    Prop("sasl.kerberos.service.name", _optional(_str), None,
         "GSSAPI: the first part of the brokers' Kerberos principals (kafka); or serviceName in the JAAS entry."),
    Prop("sasl.kerberos.principal.to.local.rules", _list, "DEFAULT",
         "GSSAPI: how a client's Kerberos principal becomes its short name (DEFAULT, RULE:[n:fmt](re)s/a/b/[LU])."),
    Prop("sasl.mechanism.inter.broker.protocol", _upper, "GSSAPI",
         "SASL mechanism between brokers when the inter-broker listener is SASL."),
    Prop("connection.failed.authentication.delay.ms", _ranged(0, INT_MAX), 100,
         "Delay before a failed authentication is answered and its connection closed."),
    Prop("sasl.server.max.receive.size", _ranged(1, INT_MAX), 524288,
         "Largest frame accepted from a client before it has authenticated."),
    Prop("connections.max.reauth.ms", _ranged(0), 0,
         "SASL sessions last this long (or to their token's expiry, if sooner) unless the client re-authenticates "
         "(KIP-368); 0: for the connection's life. Per listener and mechanism as "
         "listener.name.<l>.<mechanism>.connections.max.reauth.ms."),
    Prop("delegation.token.master.key", _optional(_str), None,
         "The secret every broker shares for delegation tokens (KIP-48); unset: tokens are disabled.",
         sensitive=True),
    Prop("delegation.token.max.lifetime.ms", _ranged(1), 7 * 24 * 3600 * 1000,
         "Delegation tokens: no renewal takes a token past this lifetime."),
    Prop("delegation.token.expiry.time.ms", _ranged(1), 24 * 3600 * 1000,
         "Delegation tokens: how long a token lives between renewals."),
    Prop("delegation.token.expiry.check.interval.ms", _ranged(1), 3600 * 1000,
         "Delegation tokens: how often the controller removes expired tokens."),
    Prop("sasl.oauthbearer.jwks.endpoint.url", _optional(_str), None,
         "OAUTHBEARER: where the identity provider's signing keys are (https://, http:// or file:), for the "
         "JWKS validator (Kafka 3.1)."),
    Prop("sasl.oauthbearer.expected.audience", _list, "", "OAUTHBEARER: a token's aud must name one of these."),
    Prop("sasl.oauthbearer.expected.issuer", _optional(_str), None, "OAUTHBEARER: a token's iss must be this."),
    Prop("sasl.oauthbearer.sub.claim.name", _str, "sub", "OAUTHBEARER: the claim naming the principal."),
    Prop("sasl.oauthbearer.scope.claim.name", _str, "scope", "OAUTHBEARER: the claim holding the scopes."),
    Prop("sasl.oauthbearer.clock.skew.seconds", _ranged(0, INT_MAX), 30,
         "OAUTHBEARER: leeway for a token's times against the broker's clock."),
    Prop("sasl.oauthbearer.jwks.endpoint.refresh.ms", _ranged(1, LONG_MAX), 3600000,
         "OAUTHBEARER: how often the JWKS is read again."),
    Prop("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _ranged(1, LONG_MAX), 100,
         "OAUTHBEARER: first wait before reading a JWKS again after a failure (doubling)."),
    Prop("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _ranged(1, LONG_MAX), 10000,
         "OAUTHBEARER: longest wait between attempts to read the JWKS."),
    Prop("ssl.principal.mapping.rules", _mapping_rules, "DEFAULT",
         "How a client certificate's subject becomes its principal: DEFAULT, or RULE:regex/replacement/[LU], ..."),
    Prop("log.dirs", _optional(_list), None, "Comma-separated log directories (JBOD); overrides log.dir."),
    Prop("log.dir", _str, "/tmp/kafka-logs", "The log directory when log.dirs is not set."),
    Prop("num.partitions", _ranged(1, INT_MAX), 1, "Partitions of an auto-created topic."),
    Prop("default.replication.factor", _ranged(1, INT_MAX), 1, "Replication factor of an auto-created topic."),
    Prop("auto.create.topics.enable", _bool, True, "Create unknown topics on Metadata/Produce."),
    Prop("delete.topic.enable", _bool, True, "Allow DeleteTopics."),
    Prop("message.max.bytes", _ranged(0, INT_MAX), 1048588, "Largest record batch accepted (topic: max.message.bytes)."),
    Prop("socket.request.max.bytes", _ranged(1, INT_MAX), 104857600, "Largest request frame accepted."),
    Prop("log.retention.hours", _ranged(-1, INT_MAX), 168, "Retention time in hours."),
    Prop("log.retention.minutes", _optional(_ranged(-1, INT_MAX)), None, "Retention time in minutes; beats hours."),
    Prop("log.retention.ms", _optional(_ranged(-1)), None, "Retention time in ms; beats minutes; -1 keeps forever."),
    Prop("log.retention.bytes", _ranged(-1), -1, "Retention size per partition; -1 is unlimited."),
    Prop("log.segment.bytes", _ranged(14, INT_MAX), 1073741824, "Size at which a segment rolls."),
    Prop("log.roll.hours", _ranged(1, INT_MAX), 168, "Age at which a segment rolls, in hours."),
    Prop("log.roll.ms", _optional(_ranged(1)), None, "Age at which a segment rolls, in ms; beats hours."),
    Prop("log.index.interval.bytes", _ranged(0, INT_MAX), 4096, "Bytes between offset index entries."),
    Prop("log.index.size.max.bytes", _ranged(4, INT_MAX), 10485760, "Maximum size of an offset index."),
    Prop("log.flush.interval.messages", _ranged(1), LONG_MAX, "Messages appended before a forced fsync."),
    Prop("log.flush.interval.ms", _optional(_ranged(0)), None, "Age of unflushed data before a forced fsync."),
    Prop("log.flush.offset.checkpoint.interval.ms", _ranged(0, INT_MAX), 60000,
         "How often the recovery points (and the other log dir checkpoints) are written."),
    Prop("log.flush.scheduler.interval.ms", _ranged(0), LONG_MAX, "How often the flusher checks log.flush.interval.ms."),
    Prop("log.retention.check.interval.ms", _ranged(1), 300000, "How often retention runs."),
    Prop("log.segment.delete.delay.ms", _ranged(0), 60000, "Delay before a deleted segment's files are removed."),
    Prop("log.cleanup.policy", _cleanup_policy, "delete", "delete and/or compact."),
    Prop("log.cleaner.enable", _bool, True, "Run the log cleaner for compacted topics."),
    Prop("log.cleaner.delete.retention.ms", _ranged(0), 86400000, "How long tombstones survive compaction."),
    Prop("log.cleaner.min.compaction.lag.ms", _ranged(0), 0, "Minimum age of a record before compaction."),
    Prop("log.cleaner.backoff.ms", _ranged(0), 15000, "Sleep between log cleaner passes."),
    Prop("log.cleaner.threads", _ranged(0, INT_MAX), 1, "Log cleaner threads (compacting logs in parallel)."),
    Prop("log.cleaner.min.cleanable.ratio", lambda v: _float(v, lo=0, hi=1), 0.5, "Dirty ratio that triggers compaction."),
    Prop("log.preallocate", _bool, False, "Preallocate segment files."),
    Prop("log.message.timestamp.type", _choice("CreateTime", "LogAppendTime"), "CreateTime", "Timestamp kept in the log."),
    Prop("log.message.timestamp.difference.max.ms", _ranged(0), LONG_MAX, "Largest CreateTime distance from broker time."),
    Prop("log.message.format.version", _format_version, LATEST_FORMAT_VERSION,
         "Kafka 2.7's version strings, validated; the log always writes v2 batches."),
    Prop("log.message.downconversion.enable", _bool, True, "Down-convert v2 batches for fetchers older than v4."),
    Prop("min.insync.replicas", _ranged(1, INT_MAX), 1, "Replicas that must acknowledge acks=all."),
    Prop("unclean.leader.election.enable", _bool, False, "Allow out-of-sync replicas to lead."),
    Prop("controlled.shutdown.enable", _bool, True,
         "At SIGTERM, ask the controller to move this broker's leaderships away before closing."),
    Prop("controlled.shutdown.max.retries", _ranged(1, INT_MAX), 3, "Attempts of a controlled shutdown."),
    Prop("controlled.shutdown.retry.backoff.ms", _ranged(0), 5000, "Pause between controlled shutdown attempts."),
    Prop("auto.leader.rebalance.enable", _bool, True, "The controller moves leaderships back to preferred replicas."),
    Prop("leader.imbalance.per.broker.percentage", _ranged(0, 100), 10,
         "Share of a broker's preferred partitions led elsewhere that triggers a rebalance."),
    Prop("leader.imbalance.check.interval.seconds", _ranged(1), 300, "How often the controller checks leader balance."),
    Prop("num.replica.fetchers", _ranged(1, INT_MAX), 1, "Fetchers per source broker (follower replication)."),
    Prop("replica.lag.time.max.ms", _ranged(1), 30000, "A follower not caught up for this long leaves the ISR."),
    Prop("replica.fetch.wait.max.ms", _ranged(0, INT_MAX), 500, "Longest wait of a follower's fetch at the leader."),
    Prop("replica.fetch.min.bytes", _ranged(1, INT_MAX), 1, "Bytes a follower's fetch waits for."),
    Prop("replica.fetch.max.bytes", _ranged(0, INT_MAX), 1048576, "Bytes a follower fetches per partition."),
    Prop("replica.fetch.response.max.bytes", _ranged(0, INT_MAX), 10485760, "Bytes of a follower's fetch answer."),
    Prop("replica.fetch.backoff.ms", _ranged(0, INT_MAX), 1000, "Wait of a follower after a fetch error."),
    Prop("replica.selector.class", _optional(parse_selector), None,
         "Replica a consumer with client.rack reads from (KIP-392): RackAwareReplicaSelector; unset: the leader."),
    Prop("replica.socket.timeout.ms", _ranged(1, INT_MAX), 30000, "A follower's request timeout at the leader."),
    Prop("num.recovery.threads.per.data.dir", _ranged(1, INT_MAX), 1, "Threads recovering logs at start."),
    Prop("offsets.topic.num.partitions", _ranged(1, INT_MAX), 50, "Partitions of __consumer_offsets."),
    Prop("offsets.topic.replication.factor", _ranged(1, 32767), 3, "Replication factor of __consumer_offsets."),
    Prop("offsets.topic.segment.bytes", _ranged(1, INT_MAX), 104857600, "Segment size of __consumer_offsets."),
    Prop("offsets.retention.minutes", _ranged(1, INT_MAX), 10080, "How long committed offsets of empty groups live."),
    Prop("offsets.retention.check.interval.ms", _ranged(1), 600000, "How often expired offsets are removed."),
    Prop("offset.metadata.max.bytes", _ranged(0, INT_MAX), 4096, "Largest metadata string of an offset commit."),
    Prop("offsets.commit.timeout.ms", _ranged(1, INT_MAX), 5000, "Wait for an offset commit to be replicated."),
    Prop("group.initial.rebalance.delay.ms", _ranged(0, INT_MAX), 3000, "Delay of a new group's first rebalance."),
    Prop("group.min.session.timeout.ms", _ranged(0, INT_MAX), 6000, "Smallest session timeout a member may ask for."),
    Prop("group.max.session.timeout.ms", _ranged(0, INT_MAX), 1800000, "Largest session timeout a member may ask for."),
    Prop("group.max.size", _ranged(1, INT_MAX), INT_MAX, "Largest number of members in a group."),
    # the consumer rebalance protocol (KIP-848), Kafka 4.x's settings and defaults
    Prop("group.coordinator.rebalance.protocols", _subset_of("classic", "consumer"), "classic,consumer",
         "Group protocols served: classic (JoinGroup/SyncGroup), consumer (ConsumerGroupHeartbeat, KIP-848)."),
    Prop("group.consumer.max.size", _ranged(1, INT_MAX), INT_MAX, "Largest number of members in a consumer group."),
    Prop("group.consumer.migration.policy", _choice("bidirectional", "upgrade", "downgrade", "disabled"),
         "bidirectional", "Which online conversions between a classic group with members and a consumer group "
         "are allowed (empty groups convert either way always)."),
    # share groups (KIP-932), Kafka 4.2's settings and defaults
    Prop("group.share.enable", _bool, True, "Serve share groups (KIP-932): ShareGroupHeartbeat, ShareFetch, ..."),
    Prop("group.share.max.size", _ranged(1, 1000), 200, "Largest number of members in a share group."),
    Prop("group.share.session.timeout.ms", _ranged(1, INT_MAX), 45000,
         "A share group member's session timeout, unless its group sets share.session.timeout.ms."),
    Prop("group.share.min.session.timeout.ms", _ranged(1, INT_MAX), 45000, "Smallest share.session.timeout.ms."),
    Prop("group.share.max.session.timeout.ms", _ranged(1, INT_MAX), 60000, "Largest share.session.timeout.ms."),
    Prop("group.share.heartbeat.interval.ms", _ranged(1, INT_MAX), 5000,
         "A share group member's heartbeat interval, unless its group sets share.heartbeat.interval.ms."),
    Prop("group.share.min.heartbeat.interval.ms", _ranged(1, INT_MAX), 5000, "Smallest share.heartbeat.interval.ms."),
    Prop("group.share.max.heartbeat.interval.ms", _ranged(1, INT_MAX), 15000, "Largest share.heartbeat.interval.ms."),
    Prop("group.share.record.lock.duration.ms", _ranged(1000, 3600000), 30000,
         "How long a share consumer holds the records it fetched, unless its group sets share.record.lock.duration.ms."),
    Prop("group.share.min.record.lock.duration.ms", _ranged(1000, 30000), 15000,
         "Smallest share.record.lock.duration.ms."),
    Prop("group.share.max.record.lock.duration.ms", _ranged(30000, 3600000), 60000,
         "Largest share.record.lock.duration.ms."),
    Prop("group.share.delivery.count.limit", _ranged(2, 10), 5,
         "Deliveries of a record to a share group before it is archived, unless the group sets "
         "share.delivery.count.limit."),
    Prop("group.share.min.delivery.count.limit", _ranged(2, 10), 2, "Smallest share.delivery.count.limit."),
    Prop("group.share.max.delivery.count.limit", _ranged(2, 10), 10, "Largest share.delivery.count.limit."),
    Prop("group.share.partition.max.record.locks", _ranged(100, 10000), 2000,
         "Records of one partition a share group may hold at once, unless the group sets "
         "share.partition.max.record.locks."),
    Prop("group.share.min.partition.max.record.locks", _ranged(100, 10000), 100,
         "Smallest share.partition.max.record.locks."),
    Prop("group.share.max.partition.max.record.locks", _ranged(100, 10000), 4000,
         "Largest share.partition.max.record.locks."),
    Prop("group.share.max.share.sessions", _ranged(1, INT_MAX), 2000, "Share sessions one broker keeps."),
    Prop("group.consumer.session.timeout.ms", _ranged(1, INT_MAX), 45000,
         "Default of the group config consumer.session.timeout.ms."),
    Prop("group.consumer.min.session.timeout.ms", _ranged(1, INT_MAX), 45000, "Smallest consumer.session.timeout.ms."),
    Prop("group.consumer.max.session.timeout.ms", _ranged(1, INT_MAX), 60000, "Largest consumer.session.timeout.ms."),
    Prop("group.consumer.heartbeat.interval.ms", _ranged(1, INT_MAX), 5000,
         "Default of the group config consumer.heartbeat.interval.ms."),
    Prop("group.consumer.min.heartbeat.interval.ms", _ranged(1, INT_MAX), 5000,
         "Smallest consumer.heartbeat.interval.ms."),
    Prop("group.consumer.max.heartbeat.interval.ms", _ranged(1, INT_MAX), 15000,
         "Largest consumer.heartbeat.interval.ms."),
    Prop("transaction.state.log.num.partitions", _ranged(1, INT_MAX), 50, "Partitions of __transaction_state."),
    Prop("transaction.state.log.replication.factor", _ranged(1, 32767), 3,
         "Replication factor of __transaction_state."),
    Prop("transaction.state.log.min.isr", _ranged(1, INT_MAX), 2, "min.insync.replicas of __transaction_state."),
    Prop("transaction.state.log.segment.bytes", _ranged(1, INT_MAX), 104857600,
         "Segment size of __transaction_state."),
    Prop("transaction.max.timeout.ms", _ranged(1, INT_MAX), 900000, "Largest transaction timeout a producer may ask for."),
    Prop("transactional.id.expiration.ms", _ranged(1, INT_MAX), 604800000,
         "How long a transactional id with nothing open lives without an update; in Kafka 2.7 also a "
         "partition's idle producer ids."),
    Prop("transaction.abort.timed.out.transaction.cleanup.interval.ms", _ranged(1, INT_MAX), 10000,
         "How often transactions past their timeout are aborted."),
    Prop("transaction.remove.expired.transaction.cleanup.interval.ms", _ranged(1, INT_MAX), 3600000,
         "How often expired transactional ids are removed."),
    Prop("quota.window.num", _ranged(1, INT_MAX), 11, "Samples kept to measure a client's rate against its quota."),
    Prop("quota.window.size.seconds", _ranged(1, INT_MAX), 1, "Span of each sample of a client quota's rate."),
    Prop("quota.producer.default", _ranged(1), LONG_MAX,
         "Bytes/s any client id may produce without a quota of its own (deprecated in Kafka; use "
         "the <default> client-id quota)."),
    Prop("quota.consumer.default", _ranged(1), LONG_MAX,
         "Bytes/s any client id may fetch without a quota of its own (deprecated in Kafka; use "
         "the <default> client-id quota)."),
    Prop("max.incremental.fetch.session.cache.slots", _ranged(0, INT_MAX), 1000,
         "Incremental fetch sessions (KIP-227) the broker keeps at most; 0: none."),
    Prop("max.connections.per.ip", _ranged(0, INT_MAX), INT_MAX,
         "Connections one IP address may hold; one more is closed as it is accepted (0: only addresses "
         "in max.connections.per.ip.overrides may connect)."),
    Prop("max.connections.per.ip.overrides", _ip_overrides, "",
         "host:count,... exceptions to max.connections.per.ip (a host name counts for each of its addresses)."),
    Prop("max.connections", _ranged(0, INT_MAX), INT_MAX,
         "Connections the broker holds at most (the inter-broker listener aside); at the limit listeners stop "
         "accepting. Per listener: listener.name.<l>.max.connections."),
    Prop("max.connection.creation.rate", _ranged(0, INT_MAX), INT_MAX,
         "New connections per second the broker accepts (the inter-broker listener aside); above it accepting "
         "waits. Per listener: listener.name.<l>.max.connection.creation.rate."),
    Prop("zookeeper.connect", _optional(_zookeeper_connect), None, "host:port,host:port[/chroot]: run on ZooKeeper."),
    Prop("zookeeper.session.timeout.ms", _ranged(1, INT_MAX), 18000, "ZooKeeper session timeout."),
    Prop("zookeeper.connection.timeout.ms", _optional(_ranged(1, INT_MAX)), None,
         "Wait for a ZooKeeper connection; defaults to the session timeout."),
    Prop("metrics.port", _ranged(-1, 65535), -1, "Prometheus /metrics HTTP port: 0 ephemeral, -1 off.", ours=True),
    # client metrics (KIP-714): this broker exports what clients push on /metrics (broker.server.client_metrics)
    Prop("telemetry.exporter.enable", _bool, True,
         "Serve client metrics (KIP-714): advertise GetTelemetrySubscriptions and PushTelemetry and export what "
         "subscribed clients push on /metrics; false leaves both APIs out, as Kafka without a telemetry reporter.",
         ours=True),
    Prop("telemetry.max.bytes", _ranged(1, INT_MAX), 1048576,
         "Largest client metrics push, compressed and decompressed (KIP-714)."),
    Prop("metadata.store", _optional(_choice("embedded", "zookeeper")), None,
         "Where cluster metadata lives; follows zookeeper.connect when unset.", ours=True),
    Prop("fetch.purgatory.max.wait.ms", _ranged(0, INT_MAX), 30000, "Cap on a fetch's max_wait_ms.", ours=True),
    Prop("shutdown.timeout.ms", _ranged(0, INT_MAX), 10000, "Graceful shutdown wait for in-flight requests.", ours=True),
    Prop("group.new.member.join.timeout.ms", _ranged(1, INT_MAX), 300000,
         "How long a new member's JoinGroup may wait before the member is removed.", ours=True),
    Prop("producer.id.expiration.ms", _optional(_ranged(1, INT_MAX)), None,
         "Idle time after which a partition forgets a producer id (Kafka 2.8's name); "
         "defaults to transactional.id.expiration.ms, as in Kafka 2.7."),
    Prop("producer.id.expiration.check.interval.ms", _ranged(1, INT_MAX), 600000,
         "How often partitions look for expired producer ids (Kafka 2.8's name; 2.7 hard-codes 10 minutes)."),
]

PROPERTIES: dict[str, Prop] = {p.name: p for p in _PROPS}
_SNAKE: dict[str, str] = {p.name.replace(".", "_"): p.name for p in _PROPS}

#: The embedded single-node default; ``configs/broker.yaml`` holds the same values.
EMBEDDED_DEFAULTS: dict[str, Any] = {
    "broker.id": 0,
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "data/kafka-logs",
    "num.partitions": 1,
    "default.replication.factor": 1,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    # for development (Kafka's sample server.properties does the same); the default is Kafka's 3000
    "group.initial.rebalance.delay.ms": 0,
    "metrics.port": 9308,
}

#: Broker property -> the topic config it gives the default of, where it is the only one (Kafka's mapping;
#: retention.ms, segment.ms and flush.ms, fed by several, are derived in :meth:`BrokerConfig.log_config_properties`).
TOPIC_PROPERTY_OF: dict[str, str] = {
    d.synonyms[0]: name for name, d in TOPIC_CONFIGS.items() if len(d.synonyms) == 1
}


class BrokerConfig:
    """An immutable, validated broker configuration.

    Read a property by its Kafka name (``cfg["log.segment.bytes"]``) or by the
    same name in snake_case (``cfg.log_segment_bytes``). Derived values that
    combine several properties (``log_dirs``, ``retention_ms``, ...) are
    properties of this class.
    """

    __slots__ = ("_values", "_explicit", "ignored", "_listener_raw", "listener_overrides")

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        parsed: dict[str, Any] = {}
        explicit: set[str] = set()
        given = dict(values or {})
        ignored = []
        #: ``listener.name.<listener>.<ssl property>`` as given, and parsed per (upper-case) listener name
        self._listener_raw: dict[str, Any] = {}
        self.listener_overrides: dict[str, dict[str, Any]] = {}
        for name in given:
            if name in PROPERTIES:
                continue
            listener, prop = _listener_override(name)
            if prop is not None:
                raw = given[name]
                try:
                    base = prop.partition(".")[2]  # after the mechanism, for a mechanism's own property
                    mechanism_scoped = prop.endswith(_MECHANISM_SUFFIXES) or _oauthbearer_setting(prop)
                    parse = (PROPERTIES[base].parse if mechanism_scoped and base in PROPERTIES
                             else _str if mechanism_scoped else PROPERTIES[prop].parse)
                    value = parse(raw) if raw is not None else None
                except (ValueError, TypeError) as exc:
                    raise ConfigError(f"{name}: {exc}", name) from None
                self._listener_raw[name] = raw
                self.listener_overrides.setdefault(listener, {})[prop] = value
                continue
            if is_kafka_broker_property(name):
                ignored.append(name)
                continue
            close = difflib.get_close_matches(name, [*PROPERTIES, *KAFKA_27_BROKER_PROPERTIES], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown property {name!r}{hint}", name)
        for prop in _PROPS:
            raw = given.get(prop.name, prop.default)
            if prop.name in given:
                explicit.add(prop.name)
            try:
                parsed[prop.name] = prop.parse(raw) if raw is not None else None
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{prop.name}: {exc}", prop.name) from None
        self._values = parsed
        self._explicit = frozenset(explicit)
        #: Kafka 2.7 broker properties that were given but that this broker does not implement.
        self.ignored: tuple[str, ...] = tuple(sorted(ignored))
        self._check()

    def _check(self) -> None:
        if "classic" not in self["group.coordinator.rebalance.protocols"]:
            raise ConfigError("group.coordinator.rebalance.protocols must contain classic",
                              "group.coordinator.rebalance.protocols")
        if self["group.min.session.timeout.ms"] > self["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        for kind in ("share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
                     "share.delivery.count.limit", "share.partition.max.record.locks",
                     "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"):
            group, _, rest = kind.partition(".")
            low, default, high = (self[f"group.{group}.{m}{rest}"] for m in ("min.", "", "max."))
            if not low <= default <= high:
                raise ConfigError(f"group.{kind} ({default}) must lie within group.{group}.min.{rest} ({low}) "
                                  f"and group.{group}.max.{rest} ({high})", f"group.{kind}")
        if self.metadata_store_kind == "zookeeper" and not self["zookeeper.connect"]:
            raise ConfigError("metadata.store=zookeeper needs zookeeper.connect")
        broker_id, reserved = self["broker.id"], self["reserved.broker.max.id"]
        if self["broker.id.generation.enable"] and broker_id > reserved:
            raise ConfigError(f"broker.id {broker_id} is above reserved.broker.max.id {reserved}, "
                              f"where generated ids live")
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
        names = {e.listener_name for e in self.listeners}
        if self["advertised.listeners"] is not None:
            for endpoint in self["advertised.listeners"]:
                if endpoint.listener_name not in names:
                    raise ConfigError(f"advertised listener {endpoint} names no listener")
        protocols = self["listener.security.protocol.map"]
        for endpoint in self.listeners:
            protocol = protocols.get(endpoint.listener_name)
            if protocol is None:
                raise ConfigError(f"listener {endpoint.listener_name} has no security protocol in "
                                  f"listener.security.protocol.map", "listener.security.protocol.map")
            if protocol not in SERVED_PROTOCOLS:
                raise ConfigError(f"listener {endpoint.listener_name}: security protocol {protocol} is not "
                                  f"supported yet (PLAINTEXT and SSL are)", "listeners")
        for listener in self.listener_overrides:
            if listener not in names:
                raise ConfigError(f"listener.name.{listener.lower()}.*: no listener is named {listener}")
        if self["max.connections.per.ip"] == 0 and not self["max.connections.per.ip.overrides"]:
            raise ConfigError("max.connections.per.ip can be 0 only when max.connections.per.ip.overrides is set",
                              "max.connections.per.ip")
        for listener, overrides in self.listener_overrides.items():
            for prop in CONNECTION_LISTENER_PROPERTIES:
                if overrides.get(prop) == 0:
                    raise ConfigError(f"listener.name.{listener.lower()}.{prop} must be at least 1",
                                      f"listener.name.{listener.lower()}.{prop}")
        if self.is_set("inter.broker.listener.name") and self.is_set("security.inter.broker.protocol"):
            raise ConfigError("only one of inter.broker.listener.name and security.inter.broker.protocol "
                              "may be set")
        if self.metadata_store_kind == "zookeeper":
            # as Kafka: other brokers find this one by its registration, which holds the advertised ones
            inter = self.inter_broker_listener
            advertised = {e.listener_name for e in (self["advertised.listeners"] or self.listeners)}
            if inter not in advertised:
                raise ConfigError(f"inter-broker listener {inter} is not among the advertised listeners "
                                  f"({', '.join(sorted(advertised))}): set inter.broker.listener.name, or "
                                  f"advertise it", "inter.broker.listener.name")
        for endpoint in self.listeners:
            if protocols[endpoint.listener_name] in TLS_PROTOCOLS:
                self._check_ssl(endpoint.listener_name)
            if protocols[endpoint.listener_name] in SASL_PROTOCOLS:
                self.sasl_settings(endpoint.listener_name)
        if self.metadata_store_kind == "zookeeper":
            if self.security_protocol(self.inter_broker_listener) in TLS_PROTOCOLS:
                self._check_ssl(self.inter_broker_listener)
            self.inter_broker_sasl()

    def sasl_settings(self, listener_name: str):
        """A SASL listener's mechanisms and JAAS entries (:class:`broker.sasl.ListenerSasl`), checked."""
        from broker import sasl

        overrides = self.listener_overrides.get(listener_name, {})
        mechanisms = overrides.get("sasl.enabled.mechanisms", self._values["sasl.enabled.mechanisms"])
        where = (f"listener.name.{listener_name.lower()}.sasl.enabled.mechanisms"
                 if "sasl.enabled.mechanisms" in overrides else "sasl.enabled.mechanisms")
        jaas = {prop[:-len(_JAAS_SUFFIX)].upper(): value for prop, value in overrides.items()
                if prop.endswith(_JAAS_SUFFIX) and value is not None}
        handlers = {prop.partition(".")[0].upper(): value for prop, value in overrides.items()
                    if prop.endswith(_MECHANISM_SUFFIXES[1]) and value is not None}
        jwks = self._jwks_settings(listener_name)
        krb = sasl.KerberosSettings(self._values["sasl.kerberos.service.name"],
                                    tuple(self._values["sasl.kerberos.principal.to.local.rules"]))
        try:
            return sasl.listener_sasl(mechanisms, jaas, listener_name, where, handlers, jwks, krb)
        except sasl.SaslConfigError as exc:
            raise ConfigError(str(exc), where) from None

    def max_reauth_ms(self, listener_name: str, mechanism: str) -> int:
        """``connections.max.reauth.ms`` for a listener and mechanism (KIP-368): its
        ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``, else the broker's; 0 = never."""
        own = self.listener_overrides.get(listener_name, {}).get(f"{mechanism.lower()}.connections.max.reauth.ms")
        return self._values["connections.max.reauth.ms"] if own is None else own

    def _jwks_settings(self, listener_name: str):
        """The ``sasl.oauthbearer.*`` settings of a listener's JWKS validator: each its
        ``listener.name.<l>.oauthbearer.sasl.oauthbearer.*`` if given, else the broker's (None without an
        endpoint)."""
        from broker.oauth import JwksSettings

        own = self.listener_overrides.get(listener_name, {})
        v = {name: own.get(f"oauthbearer.{name}", self._values[name]) for name in PROPERTIES
             if name.startswith("sasl.oauthbearer.")}
        url = v["sasl.oauthbearer.jwks.endpoint.url"]
        if not url:
            return None
        if not url.startswith(("https://", "http://", "file:")):
            prop = ("listener.name." + listener_name.lower() + ".oauthbearer." if "oauthbearer.sasl.oauthbearer."
                    "jwks.endpoint.url" in own else "") + "sasl.oauthbearer.jwks.endpoint.url"
            raise ConfigError(f"{prop}={url}: an https://, http:// or file: URL", prop)
        return JwksSettings(url, tuple(v["sasl.oauthbearer.expected.audience"]), v["sasl.oauthbearer.expected.issuer"],
                            v["sasl.oauthbearer.sub.claim.name"], v["sasl.oauthbearer.scope.claim.name"],
                            v["sasl.oauthbearer.clock.skew.seconds"], v["sasl.oauthbearer.jwks.endpoint.refresh.ms"],
                            v["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"],
                            v["sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"])

    def inter_broker_sasl(self):
        """What this broker authenticates with to the others (:class:`broker.sasl.ClientCredentials`),
        or None when the inter-broker listener is not SASL or there is no cluster."""
        from broker import sasl

        listener = self.inter_broker_listener
        if self.metadata_store_kind != "zookeeper" or self.security_protocol(listener) not in SASL_PROTOCOLS:
            return None
        prop = "sasl.mechanism.inter.broker.protocol"
        try:
            return sasl.inter_broker_credentials(self.sasl_settings(listener), self._values[prop], prop)
        except sasl.SaslConfigError as exc:
            raise ConfigError(str(exc), prop) from None

    def _check_ssl(self, listener: str) -> None:
        """The TLS settings of an SSL listener: a PEM key store given one way, no JKS or PKCS12."""
        ssl = self.ssl_settings(listener)
        where = lambda prop: self.ssl_source(listener, prop)  # noqa: E731
        for kind in ("keystore", "truststore"):
            if ssl[f"ssl.{kind}.type"] != "PEM":
                raise ConfigError(f"{where(f'ssl.{kind}.type')}={ssl[f'ssl.{kind}.type']}: only PEM {kind}s are "
                                  f"read here; convert it to PEM (keytool -importkeystore to PKCS12, then openssl "
                                  f"pkcs12 -nodes) and set {where(f'ssl.{kind}.type')}=PEM")
            if ssl[f"ssl.{kind}.password"] is not None:
                raise ConfigError(f"{where(f'ssl.{kind}.password')} applies to JKS and PKCS12 {kind}s, not PEM"
                                  + (" (an encrypted PEM key takes ssl.key.password)" if kind == "keystore" else ""))
        if ssl["ssl.keystore.location"] is None and ssl["ssl.keystore.certificate.chain"] is None:
            raise ConfigError(f"listener {listener} is {self.security_protocol(listener)} but has no key store: set {where('ssl.keystore.location')} "
                              f"(a PEM file with the private key and the certificate chain)")
        if ssl["ssl.keystore.location"] is not None and (
                ssl["ssl.keystore.certificate.chain"] is not None or ssl["ssl.keystore.key"] is not None):
            raise ConfigError(f"listener {listener}: set either ssl.keystore.location or "
                              f"ssl.keystore.certificate.chain with ssl.keystore.key, not both")
        if (ssl["ssl.keystore.certificate.chain"] is None) != (ssl["ssl.keystore.key"] is None):
            raise ConfigError(f"listener {listener}: ssl.keystore.certificate.chain and ssl.keystore.key "
                              f"go together")
        if ssl["ssl.truststore.location"] is not None and ssl["ssl.truststore.certificates"] is not None:
            raise ConfigError(f"listener {listener}: set either ssl.truststore.location or "
                              f"ssl.truststore.certificates, not both")
        unknown = [v for v in ssl["ssl.enabled.protocols"] if v not in ("TLSv1.2", "TLSv1.3")]
        if unknown or not ssl["ssl.enabled.protocols"]:
            raise ConfigError(f"{where('ssl.enabled.protocols')}: {','.join(unknown) or 'empty'}: "
                              f"TLSv1.2 and TLSv1.3 are served")

    # -- access --------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[_SNAKE[name]]
        except KeyError:
            raise AttributeError(name) from None

    def is_set(self, name: str) -> bool:
        """True when ``name`` was given explicitly rather than defaulted."""
        return name in self._explicit

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "BrokerConfig":
        values = {name: self._raw(name) for name in self._explicit}
        values.update(self._listener_raw)
        values.update(overrides)
        return BrokerConfig(values)

    def _raw(self, name: str) -> Any:
        value = self._values[name]
        return to_property_string(value) if isinstance(value, (list, dict)) else value

    # -- derived values -------------------------------------------------------
    @property
    def metadata_store_kind(self) -> str:
        """``zookeeper`` or ``embedded``: ``metadata.store`` when set, else whether ``zookeeper.connect`` is."""
        explicit = self._values["metadata.store"]
        if explicit is not None:
            return explicit
        return "zookeeper" if self._values["zookeeper.connect"] else "embedded"

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self._values["log.dirs"] or [self._values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def listeners(self) -> list[Endpoint]:
        return self._values["listeners"]

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of a listener (``listener.security.protocol.map``)."""
        return self._values["listener.security.protocol.map"].get(listener_name, listener_name)

    @property
    def inter_broker_listener(self) -> str:
        """The listener other brokers reach this one on: ``inter.broker.listener.name``, else the listener
        named after ``security.inter.broker.protocol`` (Kafka's rule)."""
        return self._values["inter.broker.listener.name"] or self._values["security.inter.broker.protocol"]

    def ssl_settings(self, listener_name: str) -> dict[str, Any]:
        """The TLS properties of one listener: ``listener.name.<listener>.ssl.*`` over the broker-wide ones."""
        settings = {prop: self._values[prop] for prop in SSL_PROPERTIES}
        settings.update(self.listener_overrides.get(listener_name, {}))
        return settings

    def ssl_source(self, listener_name: str, prop: str) -> str:
        """The property name that sets ``prop`` for a listener (its per-listener name when that is given)."""
        if prop in self.listener_overrides.get(listener_name, {}):
            return f"listener.name.{listener_name.lower()}.{prop}"
        return prop

    def advertised_endpoints(self, bound_ports: Mapping[str, int] | None = None) -> list[Endpoint]:
        """Endpoints given to clients, with port 0 replaced by the bound port."""
        bound_ports = bound_ports or {}
        advertised = self._values["advertised.listeners"] or self.listeners
        by_name = {e.listener_name: e for e in self.listeners}
        result = []
        for endpoint in advertised:
            host = endpoint.host
            if host in ("", "0.0.0.0", "::"):
                host = socket.gethostname()
            port = endpoint.port
            if port == 0 or advertised is self.listeners:
                port = bound_ports.get(endpoint.listener_name, by_name[endpoint.listener_name].port)
            result.append(Endpoint(endpoint.listener_name, host, port))
        return result

    @property
    def producer_id_expiration_ms(self) -> int:
        """How long a partition keeps an idle producer id: producer.id.expiration.ms, else Kafka 2.7's
        transactional.id.expiration.ms."""
        explicit = self._values["producer.id.expiration.ms"]
        return explicit if explicit is not None else self._values["transactional.id.expiration.ms"]

    @property
    def retention_ms(self) -> int:
        """Effective retention: log.retention.ms, else minutes, else hours (Kafka's precedence)."""
        if self._values["log.retention.ms"] is not None:
            return self._values["log.retention.ms"]
        if self._values["log.retention.minutes"] is not None:
            minutes = self._values["log.retention.minutes"]
            return -1 if minutes < 0 else minutes * 60_000
        hours = self._values["log.retention.hours"]
        return -1 if hours < 0 else hours * 3_600_000

    @property
    def segment_ms(self) -> int:
        if self._values["log.roll.ms"] is not None:
            return self._values["log.roll.ms"]
        return self._values["log.roll.hours"] * 3_600_000

    @property
    def flush_ms(self) -> int:
        value = self._values["log.flush.interval.ms"]
        return self._values["log.flush.scheduler.interval.ms"] if value is None else value

    def log_config_properties(self) -> dict[str, str]:
        """The broker-wide log defaults as topic-level properties (strings, as Kafka keeps them)."""
        props: dict[str, str] = {}
        for broker_name, topic_name in TOPIC_PROPERTY_OF.items():
            props[topic_name] = to_property_string(self._values[broker_name])
        props["cleanup.policy"] = ",".join(sorted(set(self._values["log.cleanup.policy"])))
        props["retention.ms"] = str(self.retention_ms)
        props["segment.ms"] = str(self.segment_ms)
        if self.flush_ms != LONG_MAX:
            props["flush.ms"] = str(self.flush_ms)
        if self._values["log.flush.interval.messages"] == LONG_MAX:
            del props["flush.messages"]  # absent means never, as LogConfig keeps it
        return props


def _oauthbearer_setting(prop: str) -> bool:
    """``oauthbearer.sasl.oauthbearer.<setting>``: a ``sasl.oauthbearer.*`` setting of one listener."""
    return prop.lower().startswith("oauthbearer.") and prop.partition(".")[2] in PROPERTIES and \
        prop.partition(".")[2].startswith("sasl.oauthbearer.")


def _listener_override(name: str) -> tuple[str, str | None]:
    """``listener.name.external.ssl.keystore.location`` -> ``("EXTERNAL", "ssl.keystore.location")``;
    ``listener.name.sasl_ssl.plain.sasl.jaas.config`` -> ``("SASL_SSL", "plain.sasl.jaas.config")``;
    ``(name, None)`` for anything that is not a per-listener TLS or SASL property."""
    if not name.startswith("listener.name."):
        return name, None
    listener, _dot, prop = name[len("listener.name."):].partition(".")
    jaas = (any(prop.endswith(s) and prop.count(".") == s.count(".") for s in _MECHANISM_SUFFIXES)
            or _oauthbearer_setting(prop))
    if jaas and prop != prop.lower():
        raise ConfigError(f"{name}: write the mechanism in lower case (listener.name.{listener}.{prop.lower()})",
                          name)
    if listener and (prop in SSL_PROPERTIES or prop in SASL_LISTENER_PROPERTIES or prop in
                     CONNECTION_LISTENER_PROPERTIES or jaas):
        if listener != listener.lower():  # Kafka reads only the lower-case prefix and ignores others
            raise ConfigError(f"{name}: write the listener's name in lower case "
                              f"(listener.name.{listener.lower()}.{prop})", name)
        return listener.upper(), prop
    return name, None


def to_property_string(value: Any) -> str:
    """A parsed value as Kafka writes it in a properties file (booleans, lists, the protocol map)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):  # listener.security.protocol.map, as Kafka writes it
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


# -- loading -------------------------------------------------------------------------


def default_config_path() -> Path | None:
    """``configs/broker.yaml`` beside the package when running from a source tree."""
    candidate = Path(__file__).resolve().parent.parent / "configs" / "broker.yaml"
    return candidate if candidate.is_file() else None


def read_config_file(path: Path) -> dict[str, Any]:
    """A config file as property -> value: YAML or a Java properties file (``server.properties``).

    ``*.properties`` is read as a properties file, ``*.yaml`` / ``*.yml`` as YAML;
    any other name as YAML when it holds a YAML mapping, else as a properties
    file (``key=value`` lines are one YAML string, never a mapping).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read config file {path}: not UTF-8 text") from None
    suffix = path.suffix.lower()
    if suffix == ".properties":
        return _properties_of(path, text)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        if suffix not in (".yaml", ".yml"):
            return _properties_of(path, text)
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}{where} is not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        if suffix not in (".yaml", ".yml"):
            return _properties_of(path, text)
        raise ConfigError(f"config file {path} must be a mapping of property: value")
    return {str(k): v for k, v in data.items()}


def _properties_of(path: Path, text: str) -> dict[str, str]:
    try:
        return {key: value for key, (_line, value) in properties.parse(text, f"config file {path}").items()}
    except properties.PropertiesError as exc:
        raise ConfigError(str(exc)) from None


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` strings from the command line."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not key=value")
        result[key.strip()] = value
    return result


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
    """Load ``path`` (or the embedded default) and apply ``overrides``.

    An error names where the bad setting came from: the override that set the
    property, else the config file.
    """
    if path is None:
        default_path = default_config_path()
        values = read_config_file(default_path) if default_path else dict(EMBEDDED_DEFAULTS)
        source = f"config file {default_path}" if default_path else "the embedded defaults"
    else:
        values = read_config_file(Path(path))
        source = f"config file {path}"
    overrides = dict(overrides or {})
    values.update(overrides)
    try:
        return BrokerConfig(values)
    except ConfigError as exc:
        if exc.property is not None and exc.property in overrides:
            where = f"--override {exc.property}={overrides[exc.property]}"
        elif exc.property is None and overrides:
            where = f"{source} with its overrides"
        else:
            where = source
        raise ConfigError(f"{exc} (in {where})", exc.property) from None
