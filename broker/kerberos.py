"""SASL/GSSAPI (Kerberos, RFC 4752) for listeners, the brokers' links to each other and the client.

Kerberos is done by the system's Kerberos library (MIT krb5) through the ``gssapi`` package, which this
module imports only when GSSAPI is configured (``pip install 'kafkapy[kerberos]'``; it builds against
Debian's ``libkrb5-dev``). Which realm, which KDC and how host names are treated come from the library's
own configuration (``/etc/krb5.conf``, or the file ``KRB5_CONFIG`` names), as for Kafka's JVM.

Where keys and tickets come from (:class:`KerberosLogin`):

- A keytab and a principal, as Kafka's JAAS entry gives them::

      com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true
          keyTab="/etc/kafka/kafka.keytab" principal="kafka/broker1.example.com@EXAMPLE.COM";

  A listener accepts with the principal's keys from the keytab. As initiator (a broker towards the
  others, or a client given a keytab) the library gets the principal's tickets from the keytab itself,
  when first needed and again before they expire, into a memory ticket cache of this process: there is
  no login thread to keep alive, and nothing is written to the file system's ticket caches.
- Or, for a client only, the ticket cache (``kinit`` done beforehand; ``KRB5CCNAME`` or the library's
  default), Java's ``useTicketCache=true`` and librdkafka's default without a keytab.

The exchange, in SaslAuthenticate requests or v0's bare frames (Java's ``GssKrb5Server`` /
``GssKrb5Client``, which Kafka uses, and Cyrus SASL's, which librdkafka uses)::

    client: the initial context token (the AP-REQ for <service>/<host>)
    server: the answer token (the AP-REP: mutual authentication), possibly empty
    ... more context tokens while the context is not established
    client: an empty token
    server: wrap(conf=False) of 4 bytes: the security layers offered (1: none), then the largest
            buffer it receives (3 bytes, big-endian)
    client: wrap of 4 bytes: the layer chosen (must be 1: Kafka offers no integrity or confidentiality
            layer; TLS is for that) and its buffer size, then an optional authorization id
    server: empty: authenticated

The authenticated name is the client's Kerberos principal. An authorization id in the last message is
ignored, as Kafka's callback handler ignores it (kafka-python sends the service's name there). The
Kafka principal is ``User:<short name>``, the short name given by ``sasl.kerberos.principal.to.local.rules``
(:mod:`broker.kerberos_names`), as Kafka's default principal builder makes it.

The calls into the library that may block (the acceptor's first step reads the keytab and writes the
replay cache; the initiator's first asks the KDC for tickets) run on threads, never on the event loop;
the later steps (the mutual authentication token, wrapping and unwrapping 4 bytes) are computation only
and run where they are called (:attr:`ServerExchange.blocking`).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

GSSAPI = "GSSAPI"
LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
#: The security layer "none" (RFC 4752 3.3): the only one Kafka offers or accepts
QOP_AUTH = 1
QOP_NAMES = {1: "none", 2: "integrity", 4: "confidentiality"}
#: The largest wrapped message this side says it takes (Java's default receive buffer)
MAX_BUFFER = 65536
INSTALL_HINT = "pip install 'kafkapy[kerberos]' (it builds against Debian's libkrb5-dev)"


class KerberosConfigError(ValueError):
    """A Kerberos setting that cannot be used; ``str(err)`` is one line naming the setting."""


class GssapiFailed(Exception):
    """An exchange that failed; ``str(err)`` is what the peer may be told, ``detail`` for the log."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


def gssapi_module() -> Any:
    """The ``gssapi`` package, or a :class:`KerberosConfigError` saying how to install it."""
    try:
        import gssapi
    except ImportError as exc:  # also a libgssapi_krb5 that cannot be loaded
        raise KerberosConfigError(f"GSSAPI needs the 'gssapi' package ({exc}): {INSTALL_HINT}") from None
    return gssapi


def _gss_text(exc: BaseException) -> str:
    """One line from a GSS error (the library's major and minor messages)."""
    text = re.sub(r"(?:Major|Minor) \(\d+\): ", "", " ".join(str(exc).split()))
    return text.strip(" ,") or type(exc).__name__


# -- where keys and tickets come from --------------------------------------------------------

@dataclass(frozen=True)
class KerberosLogin:
    """A principal and its keytab (``keytab`` None: the client's ticket cache, ``principal`` then
    optional: the cache's own)."""

    principal: str | None
    keytab: str | None

    def describe(self) -> str:
        if self.keytab:
            return f"{self.principal} (keytab {self.keytab})"
        return f"{self.principal} (ticket cache)" if self.principal else "the ticket cache's principal"

    def _name(self) -> Any:
        gssapi = gssapi_module()
        return gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)

    def acceptor_credentials(self) -> Any:
        """The keys a listener accepts with (blocking: reads the keytab). Raises KerberosConfigError
        when the keytab does not hold the principal's keys."""
        gssapi = gssapi_module()
        try:
            return gssapi.Credentials(name=self._name(), usage="accept", store={"keytab": self.keytab})
        except gssapi.exceptions.GSSError as exc:
            raise KerberosConfigError(f"cannot accept as {self.principal} with keytab {self.keytab}: "
                                      f"{_gss_text(exc)}") from None

    def initiator_credentials(self) -> Any:
        """The credentials an initiator authenticates with (blocking: may ask the KDC). With a keytab,
        tickets are got from it into this process's memory cache; else the ticket cache's."""
        gssapi = gssapi_module()
        try:
            if self.keytab is not None:
                store = {"client_keytab": self.keytab, "ccache": f"MEMORY:kafkapy-{os.getpid()}-{id(self)}"}
                return gssapi.Credentials(name=self._name(), usage="initiate", store=store)
            name = self._name() if self.principal else None
            return gssapi.Credentials(name=name, usage="initiate")
        except gssapi.exceptions.GSSError as exc:
            raise GssapiFailed(f"no Kerberos credentials for {self.describe()}: {_gss_text(exc)}") from None


def _truthy(value: str | None) -> bool:
    return str(value).strip().lower() == "true"


def login_from_jaas(options: Mapping[str, str], prop: str, *, server: bool) -> KerberosLogin:
    """The :class:`KerberosLogin` of a ``Krb5LoginModule`` entry's options (``useKeyTab``, ``keyTab``,
    ``principal``, ``useTicketCache``). A listener (``server``) needs a keytab and a principal."""
    keytab = options.get("keyTab")
    principal = options.get("principal") or None
    use_keytab = _truthy(options.get("useKeyTab"))
    if server or use_keytab:
        if not use_keytab or not keytab:
            raise KerberosConfigError(f"{prop}: {'a listener' if server else 'useKeyTab=true'} needs "
                                      f"useKeyTab=true and keyTab=\"<path>\" (the keys to "
                                      f"{'accept' if server else 'authenticate'} with)")
        if not principal:
            raise KerberosConfigError(f"{prop}: principal=\"<name>\" is missing (whose keys the keytab holds, "
                                      f"e.g. kafka/broker1.example.com@EXAMPLE.COM)")
        check_keytab(keytab, prop)
        return KerberosLogin(principal, keytab)
    if not _truthy(options.get("useTicketCache")):
        raise KerberosConfigError(f"{prop}: give useKeyTab=true with keyTab and principal, or useTicketCache=true "
                                  f"(tickets from kinit); a password prompt is not possible here")
    return KerberosLogin(principal, None)


def service_name(options: Mapping[str, str], setting: str | None, prop: str) -> str | None:
    """The brokers' service name: a JAAS entry's ``serviceName`` (its ``options``, given as ``prop``) or
    ``sasl.kerberos.service.name`` (``setting``); they must agree, as in Kafka. None when neither is set."""
    own = options.get("serviceName") or None
    if own and setting and own != setting:
        raise KerberosConfigError(f"{prop}: serviceName={own} conflicts with sasl.kerberos.service.name={setting}; "
                                  f"give one, or the same in both")
    return own or setting


def check_keytab(path: str, prop: str) -> None:
    """A keytab that can be read (its content is checked by the library when it is used)."""
    if path.startswith(("FILE:", "WRFILE:")):
        path = path.partition(":")[2]
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError as exc:
        raise KerberosConfigError(f"{prop}: keytab {path} cannot be read ({exc.strerror})") from None
    if head not in (b"\x05\x01", b"\x05\x02"):
        raise KerberosConfigError(f"{prop}: {path} is not a keytab (made with kadmin ktadd or ktutil)")


# -- the server side -----------------------------------------------------------------------------

class ServerExchange:
    """GSSAPI's server side for one connection (the stages of Java's ``GssKrb5Server``; see the module
    docstring). While :attr:`blocking`, :meth:`step` may block: call it off the event loop."""

    def __init__(self, credentials: Any) -> None:
        gssapi = gssapi_module()
        self._gssapi = gssapi
        self._ctx = gssapi.SecurityContext(creds=credentials, usage="accept")
        self._stage = 0
        #: the client's Kerberos principal, once its context is established
        self.peer: str | None = None

    @property
    def blocking(self) -> bool:
        """The next step reads files (the keytab, the replay cache): the context is not established yet."""
        return self._stage == 0

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """One client token in: ``(answer, authenticated)``. Raises :class:`GssapiFailed`."""
        gssapi = self._gssapi
        try:
            if self._stage == 0:
                answer = self._ctx.step(token)
                if self._ctx.complete:
                    self.peer = str(self._ctx.initiator_name)
                    self._stage = 1
                return answer or b"", False
            if self._stage == 1:
                # the client's empty token after the context: offer the layers, wrapped for integrity
                offer = struct.pack(">I", (QOP_AUTH << 24) | MAX_BUFFER)
                self._stage = 2
                return self._ctx.wrap(offer, False).message, False
            if self._stage == 2:
                reply = self._ctx.unwrap(token).message
                if len(reply) < 4:
                    raise GssapiFailed("Invalid GSSAPI security layer reply", f"{self.peer}: a reply of "
                                       f"{len(reply)} bytes (4 at least)")
                chosen = reply[0]
                if chosen != QOP_AUTH:
                    names = ", ".join(n for bit, n in QOP_NAMES.items() if chosen & bit) or str(chosen)
                    raise GssapiFailed("Client selected unsupported protection",
                                       f"{self.peer} asked for security layer {names}; only none is served "
                                       f"(use SASL_SSL for encryption)")
                self._stage = 3
                return b"", True
        except gssapi.exceptions.GSSError as exc:
            raise GssapiFailed("GSSAPI authentication failed", _gss_text(exc)) from None
        raise GssapiFailed("Unexpected SASL token", "a GSSAPI token after the exchange ended")


@dataclass(frozen=True)
class Acceptor:
    """What a listener that enables GSSAPI accepts with: its login, credentials and short namer."""

    login: KerberosLogin
    service_name: str
    credentials: Any = field(repr=False)
    namer: Any = field(repr=False)  # broker.kerberos_names.ShortNamer

    def exchange(self) -> ServerExchange:
        return ServerExchange(self.credentials)

    def short_name(self, principal: str) -> str:
        return self.namer.short_name(principal)


# -- the client side -----------------------------------------------------------------------------

class ClientExchange:
    """GSSAPI's client side towards ``<service>@<host>`` (Java's ``GssKrb5Client``; module docstring).
    :meth:`first` may block (the KDC is asked for tickets): call it off the event loop; :meth:`step` is
    computation only."""

    def __init__(self, login: KerberosLogin, service: str, host: str) -> None:
        gssapi = gssapi_module()
        self._gssapi = gssapi
        self.target = f"{service}@{host}"
        self._login = login
        self._ctx: Any = None
        #: the last token is made: the server's answer to it (empty) ends the exchange
        self.finished = False

    def first(self) -> bytes:
        """The initial context token."""
        gssapi = self._gssapi
        creds = self._login.initiator_credentials()
        try:
            name = gssapi.Name(self.target, gssapi.NameType.hostbased_service)
            flags = gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity
            self._ctx = gssapi.SecurityContext(name=name, creds=creds, usage="initiate", flags=flags)
            return self._ctx.step(None) or b""
        except gssapi.exceptions.GSSError as exc:
            raise GssapiFailed(f"no Kerberos service ticket for {self.target} as {self._login.describe()}: "
                               f"{_gss_text(exc)}") from None

    def step(self, challenge: bytes) -> bytes:
        """The server's token in, the next token out (after the last one, :attr:`finished`)."""
        gssapi = self._gssapi
        try:
            if not self._ctx.complete:
                return self._ctx.step(challenge) or b""
            if not self.finished:  # the context is established: the server's security layer offer
                offer = self._ctx.unwrap(challenge).message
                if len(offer) != 4 or not offer[0] & QOP_AUTH:
                    raise GssapiFailed(f"the broker ({self.target}) offers no plain GSSAPI security layer "
                                       f"({offer[:1].hex() or 'nothing'}); Kafka brokers offer 'none'")
                self.finished = True
                reply = struct.pack(">I", (QOP_AUTH << 24) | MAX_BUFFER)
                return self._ctx.wrap(reply, False).message
        except gssapi.exceptions.GSSError as exc:
            raise GssapiFailed(f"GSSAPI exchange with {self.target} failed: {_gss_text(exc)}") from None
        raise GssapiFailed(f"GSSAPI exchange with {self.target}: a token from the broker after the exchange ended")
