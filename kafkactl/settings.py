"""What the global options resolve to, and the client configuration built from them.

Global options (``--bootstrap-server``, ``--output``, ``--command-config``,
``--debug``, ``--version``) are accepted before the command and after it
(:func:`kafkactl.main.build_command` adds them to every command); the last one
given wins. :class:`Settings` holds them in the root context's ``obj``.

The bootstrap list comes from ``--bootstrap-server``, else
``$KAFKACTL_BOOTSTRAP``, else ``bootstrap_server`` in the config file
(``$KAFKACTL_CONFIG``, default ``~/.config/kafkactl/config.yaml``), else
127.0.0.1:9092; it is resolved only when a command needs the cluster, so
offline commands never read the config file.

Client settings, later layers winning::

    kafkactl's defaults        client.id=kafkactl, a 3 s connection set-up timeout, ...
    --command-config FILE      a Kafka tool's properties file (client.id, request.timeout.ms, ...)
    -X / --*-property NAME=V   the command's own client properties
    the command's options      --acks, --group, --from-beginning, the bootstrap list ...

The file is checked as a whole when a command first needs a client: a setting
none of our clients (admin, producer, consumer) knows, or one it cannot honour
(a JKS or PKCS12 ``ssl.truststore.*``/``ssl.keystore.*``, an ``ssl.*`` or
``sasl.*`` name not listed below, ``sasl.mechanism`` GSSAPI),
is one line naming the file, line and setting, exit 2; so is a bad value, and
a TLS file that cannot be used (missing, unreadable, not PEM, a key not
matching its certificate, a wrong ``ssl.key.password``): one line naming the
setting and that file. Each client takes the settings it knows: ``acks`` in the
file reaches the producer of ``produce``, not the admin client of ``topics
list`` (as Kafka's clients ignore settings of another kind).

TLS (every client; semantics in :mod:`broker.client._tls`)::

    security.protocol=SSL                      PLAINTEXT (default) or SSL, either case
    ssl.ca.location=FILE|DIR                   CAs that verify the broker (default: the system's)
    ssl.certificate.location=FILE              client certificate (PEM), for brokers requiring one
    ssl.key.location=FILE                      its private key (PEM; default: in the certificate file)
    ssl.key.password=TEXT                      the key's password, if it is encrypted
    enable.ssl.certificate.verification=false  accept any broker certificate (default true)
    ssl.endpoint.identification.algorithm=none do not match the certificate to the host name
                                               (default https: it must match)

SASL (every client; semantics in :mod:`broker.client._sasl`)::

    security.protocol=SASL_PLAINTEXT|SASL_SSL  SASL on TCP, or on TLS with the ssl.* settings above
    sasl.mechanism=PLAIN                       or SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI
                                               (librdkafka: sasl.mechanisms)
    sasl.username=NAME, sasl.password=TEXT     the credentials (librdkafka's names), or the Java client's
    sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
        username="NAME" password="TEXT";       (or ...scram.ScramLoginModule), not both

GSSAPI (Kerberos; semantics in :mod:`broker.kerberos`), librdkafka's names::

    sasl.kerberos.service.name=kafka           the brokers' service (default kafka): tickets for kafka/<host>
    sasl.kerberos.keytab=FILE                  with sasl.kerberos.principal=NAME: tickets from the keytab;
                                               without: from the ticket cache (kinit; KRB5CCNAME)

or the Java client's ``sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true
keyTab="FILE" principal="NAME";`` (or ``useTicketCache=true``).

OAUTHBEARER's token (semantics in :mod:`broker.client._oauth`), librdkafka's names::

    sasl.oauthbearer.method=oidc               the OAuth 2 client-credentials grant at the identity provider:
    sasl.oauthbearer.client.id=ID              sasl.oauthbearer.client.secret=TEXT
    sasl.oauthbearer.token.endpoint.url=URL    sasl.oauthbearer.scope=SCOPE (optional)
    sasl.oauthbearer.extensions=k=v,k2=v2      SASL extensions (optional)
    enable.sasl.oauthbearer.unsecure.jwt=true  or an unsigned token made here (development brokers), with
    sasl.oauthbearer.config=principal=NAME [scope=a,b] [lifeSeconds=N] ...

or the Java client's: ``sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule
required clientId="ID" clientSecret="TEXT" [scope="..."];`` with
``sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler``
and ``sasl.oauthbearer.token.endpoint.url``, or without a handler ``unsecuredLoginStringClaim_sub="NAME"``
(unsecured).

and the Java client's PEM spellings, so a Kafka tool's file works unchanged::

    ssl.truststore.location=FILE + ssl.truststore.type=PEM    as ssl.ca.location
    ssl.keystore.location=FILE + ssl.keystore.type=PEM        one PEM file with the private key and
                                                              the certificate chain
    ssl.truststore.password, ssl.keystore.password            accepted and ignored: PEM stores have
                                                              no store password (JKS/PKCS12 are refused)

A truststore or keystore of type JKS (the Java default when ``*.type`` is not
given) or PKCS12 is refused with a hint to convert it to PEM (keytool, openssl).
The same names work in ``-X`` (``--producer-property`` ...), where a bad one is
exit 2 as well.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from broker.client import AdminConfig, ConsumerConfig, ProducerConfig, build_config, errors
from broker.client import _tls as tls
from broker import properties
from kafkactl.errors import CliError
from kafkactl.output import OutputFormat

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CONFIG_FILE = Path(os.environ.get("KAFKACTL_CONFIG", Path.home() / ".config" / "kafkactl" / "config.yaml"))

# Fail fast on an unreachable cluster: operators want an answer in seconds, not the
# client's default of 10 s per connection attempt.
CONNECT_TIMEOUT_MS = 3000
REQUEST_TIMEOUT_MS = 30000

CLIENT_KINDS = {"admin": AdminConfig, "producer": ProducerConfig, "consumer": ConsumerConfig}
# Fields of the client's config classes that are Python objects, not settings a file can carry.
_NOT_SETTINGS = {"partitioner", "key_serializer", "value_serializer", "key_deserializer", "value_deserializer"}
_SETTINGS = {kind: {f.name for f in dataclasses.fields(cls)} - _NOT_SETTINGS for kind, cls in CLIENT_KINDS.items()}


@dataclass
class Settings:
    """The global options; commands read it with :func:`kafkactl._common.settings`."""

    bootstrap_server: str | None = None  # as given; see bootstrap()
    output: OutputFormat = OutputFormat.table
    debug: bool = False
    command_config: Path | None = None
    _file_settings: dict[str, Any] | None = field(default=None, repr=False)

    def bootstrap(self) -> str:
        """The bootstrap list to use (see the module docstring for where it comes from)."""
        return self.bootstrap_server or _configured_bootstrap()

    def file_settings(self) -> dict[str, Any]:
        """``{name: text}`` from ``--command-config``, checked (see the module docstring)."""
        if self._file_settings is None:
            self._file_settings = {} if self.command_config is None else load_command_config(self.command_config)
        return self._file_settings

    def client_config(self, kind: str, props: Mapping[str, str] | None = None,
                      defaults: Mapping[str, Any] | None = None, **command: Any) -> dict[str, Any]:
        """Keyword configuration for a client of ``kind`` (admin, producer, consumer): the layers
        of the module docstring, ``defaults`` being the command's own defaults below the file."""
        config: dict[str, Any] = {}
        layers = ({"client_id": "kafkactl", "socket_connection_setup_timeout_ms": CONNECT_TIMEOUT_MS,
                   "request_timeout_ms": REQUEST_TIMEOUT_MS}, defaults or {},
                  {k: v for k, v in self.file_settings().items() if _snake(k) in _SETTINGS[kind]},
                  props or {}, command, {"bootstrap_servers": self.bootstrap()})
        for layer in layers:
            for key, value in layer.items():
                # one entry per setting, under the spelling of the layer that set it last,
                # so the client's errors name it as the user wrote it
                for other in [k for k in config if _snake(k) == _snake(key)]:
                    del config[other]
                config[key] = value
        return config


def _configured_bootstrap() -> str:
    env = os.environ.get("KAFKACTL_BOOTSTRAP")
    if env:
        return env
    if CONFIG_FILE.is_file():
        import yaml

        try:
            data = yaml.safe_load(CONFIG_FILE.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CliError(f"cannot read config file {CONFIG_FILE}: {exc}") from exc
        if isinstance(data, dict) and data.get("bootstrap_server"):
            return str(data["bootstrap_server"])
    return DEFAULT_BOOTSTRAP


def _snake(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


SASL_SETTINGS = ("sasl.mechanism (GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)", "sasl.username",
                 "sasl.password", "sasl.jaas.config", "sasl.kerberos.service.name, .keytab, .principal", "sasl.oauthbearer.method, .client.id, .client.secret, "
                 ".token.endpoint.url, .scope, .extensions, .config", "enable.sasl.oauthbearer.unsecure.jwt",
                 "sasl.login.callback.handler.class")
TLS_SETTINGS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                "enable.ssl.certificate.verification", "ssl.endpoint.identification.algorithm",
                "ssl.truststore.location/type (PEM)", "ssl.keystore.location/type (PEM)")


def _check_stores(path: Path, entries: Mapping[str, tuple[int, str]]) -> None:
    """A Java truststore or keystore that is not PEM: one line naming the file and line, with how to
    convert it (the client library refuses it too, without the line)."""
    for kind in ("truststore", "keystore"):
        location, store_type = entries.get(f"ssl.{kind}.location"), entries.get(f"ssl.{kind}.type")
        given = store_type[1].strip().upper() if store_type else None
        if given == "PEM" or (given is None and location is None):
            continue
        line, _ = location or store_type
        key = f"ssl.{kind}.location" if location else f"ssl.{kind}.type"
        what = f"a {given} {kind}" if given else f"a JKS {kind} (the default without ssl.{kind}.type=PEM)"
        convert = tls.CONVERT_TRUSTSTORE if kind == "truststore" else tls.CONVERT_KEYSTORE
        raise CliError(f"{path} line {line}: unsupported client setting {key!r}: {what}; kafkactl reads PEM "
                       f"only: {convert}")


def load_command_config(path: Path) -> dict[str, str]:
    """The client settings of a ``--command-config`` file, every one checked; a bad one is a CliError."""
    try:
        entries = properties.load(path)
    except properties.PropertiesError as exc:
        raise CliError(str(exc)) from None
    every = set().union(*_SETTINGS.values())
    out: dict[str, str] = {}
    for key, (line, value) in entries.items():
        where = f"{path} line {line}"
        name = _snake(key)
        if name not in every:
            hint = ""
            if key.startswith("sasl."):
                hint = f" (kafkactl's SASL settings: {', '.join(SASL_SETTINGS)})"
            elif key.startswith("ssl."):
                hint = f" (kafkactl's TLS settings: {', '.join(TLS_SETTINGS)})"
            raise CliError(f"{where}: unknown or unsupported client setting {key!r}{hint}")
        out[key] = value
    _check_stores(path, entries)
    for kind, cls in CLIENT_KINDS.items():  # bad values: say so now, naming the file
        try:
            build_config(cls, {k: v for k, v in out.items() if _snake(k) in _SETTINGS[kind]}, {})
        except errors.ConfigError as exc:
            raise CliError(f"{path}: {exc}") from None
    return out
