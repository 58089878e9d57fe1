"""One TCP connection to one broker, with request pipelining and version negotiation.

Kafka framing is a 4-byte big-endian size followed by the message; responses on
a connection come back in request order, matched here by correlation id. On
connect we send ApiVersions (v3, falling back to v0 when the broker answers
UNSUPPORTED_VERSION) and keep, for every API key, the highest version that the
broker, the codec (``broker.protocol``) and this client (:data:`CLIENT_VERSIONS`)
all support.

With an ``ssl_context`` (the client's, see :mod:`broker.client._tls`) the
connection is TLS: the handshake, with ``server_hostname`` the host connected
to, is part of connecting and counts against ``connect_timeout_ms``; a failed
handshake raises :class:`KafkaConnectionError` with a readable reason
("certificate verify failed: ..."). Without one (the default, as the broker's
own inter-broker connections use) it is plain TCP.

With ``sasl`` (a :class:`~broker.client._sasl.SaslSettings`, the client's
``config.sasl``) the connection authenticates after ApiVersions (SaslHandshake,
SaslAuthenticate: see :mod:`broker.client._sasl`) before ``connect`` returns; a
refusal raises :class:`~broker.client.errors.AuthenticationError` and closes the
connection. With OAUTHBEARER the token is got before the TCP connection is opened
(:mod:`broker.client._oauth`). A connection whose SASL session the broker limited
(``session_lifetime_ms``) is ``usable`` no longer once the session is nearly
over: its owner opens another and :meth:`BrokerConnection.retire` closes this one
when its last answer is in.

A connection is owned by one event loop and is not thread-safe.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import ssl
import time
from typing import Any

from broker.protocol import ApiKey, FrameDecoder, api_versions_table, decode_response, encode_request
from broker.protocol.throttling import client_throttles

from ._sasl import SaslSettings, authenticate, session_deadline
from ._tls import describe_error as describe_tls_error
from .errors import KafkaConnectionError, KafkaTimeoutError, ProtocolError, UnsupportedApiError, error_for_code

log = logging.getLogger("broker.client")


# The client speaks the same API keys the protocol package declares.
Api = ApiKey


# (min, max) versions whose request/response fields this client fills and reads.
# Upper bounds stop before versions that change field meaning (topic ids in
# Fetch 13, batched groups in OffsetFetch 8 / FindCoordinator 4, ...).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    Api.PRODUCE: (3, 9),
    Api.FETCH: (4, 12),
    Api.LIST_OFFSETS: (1, 7),
    Api.METADATA: (1, 12),
    Api.OFFSET_COMMIT: (2, 8),
    Api.OFFSET_FETCH: (1, 7),
    Api.FIND_COORDINATOR: (1, 3),
    Api.JOIN_GROUP: (1, 7),
    Api.HEARTBEAT: (0, 4),
    Api.LEAVE_GROUP: (0, 4),
    Api.SYNC_GROUP: (0, 5),
    Api.DESCRIBE_GROUPS: (0, 5),
    Api.LIST_GROUPS: (0, 5),
    Api.API_VERSIONS: (0, 3),
    Api.CREATE_TOPICS: (2, 6),
    Api.DELETE_TOPICS: (1, 5),
    Api.DELETE_RECORDS: (0, 2),
    Api.DESCRIBE_CONFIGS: (1, 4),
    Api.ALTER_CONFIGS: (0, 2),
    Api.CREATE_PARTITIONS: (0, 3),
    Api.ELECT_LEADERS: (0, 2),
    Api.DELETE_GROUPS: (0, 2),
    Api.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    Api.OFFSET_DELETE: (0, 0),
    Api.INIT_PRODUCER_ID: (0, 4),
    Api.ADD_PARTITIONS_TO_TXN: (0, 3),
    Api.ADD_OFFSETS_TO_TXN: (0, 3),
    Api.END_TXN: (0, 3),
    Api.TXN_OFFSET_COMMIT: (0, 3),
    Api.DESCRIBE_LOG_DIRS: (1, 2),
    Api.ALTER_REPLICA_LOG_DIRS: (0, 1),
    Api.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    Api.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    Api.WRITE_TXN_MARKERS: (0, 1),
    Api.DESCRIBE_PRODUCERS: (0, 0),
    Api.DESCRIBE_TRANSACTIONS: (0, 0),
    Api.LIST_TRANSACTIONS: (0, 0),
    Api.SASL_HANDSHAKE: (1, 1),
    Api.SASL_AUTHENTICATE: (0, 2),
    Api.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    Api.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    Api.CREATE_DELEGATION_TOKEN: (0, 2),
    Api.RENEW_DELEGATION_TOKEN: (0, 2),
    Api.EXPIRE_DELEGATION_TOKEN: (0, 2),
    Api.DESCRIBE_DELEGATION_TOKEN: (0, 2),
    Api.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    Api.ALTER_CLIENT_QUOTAS: (0, 1),
    Api.CONSUMER_GROUP_DESCRIBE: (0, 1),
    Api.SHARE_GROUP_DESCRIBE: (1, 1),
    Api.DESCRIBE_SHARE_GROUP_OFFSETS: (1, 1),
    Api.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    Api.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}

UNSUPPORTED_VERSION = 35
_correlation = itertools.count(1)


class _ReaderProtocol(asyncio.BufferedProtocol):
    """Reads straight into the connection's frame decoder (see :mod:`broker.protocol.framing`)."""

    def __init__(self, conn: "BrokerConnection") -> None:
        self.conn = conn

    def connection_made(self, transport) -> None:
        self.conn._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.conn._on_data(nbytes)

    def connection_lost(self, exc) -> None:
        self.conn._on_lost(exc)

    def pause_writing(self) -> None:
        self.conn._write_paused = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        fut, self.conn._write_paused = self.conn._write_paused, None
        if fut is not None and not fut.done():
            fut.set_result(None)


class BrokerConnection:
    """A connection to ``host:port`` (``node_id`` -1 for a bootstrap address); TLS with an
    ``ssl_context``, plain TCP without one; SASL with ``sasl`` (see the module docstring)."""

    def __init__(self, host: str, port: int, *, node_id: int = -1, client_id: str = "kafkapy",
                 request_timeout_ms: int = 30000, connect_timeout_ms: int = 10000,
                 max_frame_bytes: int = 128 * 1024 * 1024, ssl_context: ssl.SSLContext | None = None,
                 sasl: SaslSettings | None = None) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._authenticating = False
        self._served = False  # an answer came after ApiVersions (and SASL): see _on_lost
        self._session_deadline: float | None = None  # monotonic; None: the session lasts as long as the connection
        self._retiring = False
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.connect_timeout = connect_timeout_ms / 1000
        self.versions: dict[int, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._transport: asyncio.Transport | None = None
        self._decoder = None
        self._max_frame_bytes = max_frame_bytes
        self._in_flight: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._write_paused: asyncio.Future | None = None
        self._closed_exc: BaseException | None = None
        self._negotiated = False
        self.closed = False
        #: Loop time until which the broker asked us to send nothing (a quota's ``throttle_time_ms``, KIP-219)
        self.throttled_until = 0.0

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def usable(self) -> bool:
        """Open, and not in the last part of a SASL session the broker limited (see the module docstring)."""
        if self.closed or self._retiring:
            return False
        return self._session_deadline is None or time.monotonic() < self._session_deadline

    def retire(self) -> None:
        """No longer ``usable`` (its owner hands it out no more); closed once the answers in flight are in,
        at once if none are."""
        self._retiring = True
        if not self._in_flight:
            self.close()

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        # OAUTHBEARER: the current token first (perhaps a new one from the identity provider, on a thread),
        # so that the broker never waits on the provider with the connection open
        token = None
        if self.sasl is not None and self.sasl.token_provider is not None:
            token = await self.sasl.token_provider.token()
        self._decoder = FrameDecoder(self._max_frame_bytes)
        tls: dict[str, Any] = {}
        if self.ssl_context is not None:
            tls = {"ssl": self.ssl_context, "server_hostname": self.host}
            if self.connect_timeout > 0:
                tls["ssl_handshake_timeout"] = self.connect_timeout
        try:
            # the TLS handshake is part of create_connection, so within the timeout; asyncio.timeout, not
            # wait_for, which on 3.11 loses a cancellation that comes as the connection is made
            async with asyncio.timeout(self.connect_timeout):
                await loop.create_connection(lambda: _ReaderProtocol(self), self.host, self.port, **tls)
        except OSError as exc:  # TimeoutError among them
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: "
                                       f"{self._connect_failure(exc)}") from None
        try:
            await self._negotiate()
            self._negotiated = True
            if self.sasl is not None:
                self._authenticating = True
                self._session_deadline = session_deadline(await authenticate(self, self.sasl, token))
                self._authenticating = False
        except BaseException:
            self.close()
            raise

    def _connect_failure(self, exc: BaseException) -> str:
        """Why connecting failed, readably (TLS errors and bare exceptions say what happened)."""
        if isinstance(exc, ssl.SSLError):
            return describe_tls_error(exc)
        if isinstance(exc, TimeoutError) and not str(exc):
            what = "connection and TLS handshake" if self.ssl_context is not None else "connection"
            return f"{what} not done within {self.connect_timeout:g} s"
        if self.ssl_context is not None and isinstance(exc, (ConnectionResetError, ConnectionAbortedError,
                                                             BrokenPipeError)):
            return (f"the broker closed the connection during the TLS handshake{': ' + str(exc) if str(exc) else ''}"
                    " (is it a PLAINTEXT listener? does it require a client certificate? "
                    "see security.protocol, ssl.certificate.location)")
        return str(exc) or type(exc).__name__

    async def _negotiate(self) -> None:
        body = {"client_software_name": "kafkapy", "client_software_version": "0.1.0"}
        resp = await self.request(Api.API_VERSIONS, body, version=3)
        if resp["error_code"] == UNSUPPORTED_VERSION:
            resp = await self.request(Api.API_VERSIONS, {}, version=0)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"], context="ApiVersions")
        codec = api_versions_table()
        for entry in resp["api_keys"]:
            key = entry["api_key"]
            self.broker_versions[key] = (entry["min_version"], entry["max_version"])
            ours = CLIENT_VERSIONS.get(key)
            theirs_codec = codec.get(key)
            if ours is None or theirs_codec is None:
                continue
            lo = max(ours[0], entry["min_version"], theirs_codec[0])
            hi = min(ours[1], entry["max_version"], theirs_codec[1])
            if lo <= hi:
                self.versions[key] = hi

    def version(self, api_key: int) -> int:
        try:
            return self.versions[api_key]
        except KeyError:
            raise UnsupportedApiError(
                f"broker {self.host}:{self.port} supports no usable version of API {Api(api_key).name}"
            ) from None

    async def request(self, api_key: int, body: dict[str, Any], *, version: int | None = None,
                      expect_response: bool = True, timeout: float | None = None) -> dict[str, Any] | None:
        """Send one request and wait for its decoded response body.

        With ``expect_response=False`` (Produce with acks=0) returns None once written.
        """
        await self.wait_throttle()
        fut = self.send(api_key, body, version=version, expect_response=expect_response)
        if fut is None:
            if self._write_paused is not None:
                await self._write_paused
            return None
        # asyncio.wait (not wait_for): on 3.11 wait_for can swallow a cancellation
        # that arrives as the response does, which would make the caller unstoppable.
        done, _ = await asyncio.wait((fut,), timeout=timeout or self.request_timeout)
        if not done:
            exc = KafkaTimeoutError(f"request {Api(api_key).name} to {self.host}:{self.port} timed out")
            self.close(exc)
            raise exc
        return fut.result()

    async def wait_throttle(self) -> None:
        """Wait out a throttle the broker asked for (a client quota: KIP-219's client-side throttling; the
        broker would hold our next requests for that long anyway)."""
        delay = self.throttled_until - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)

    def send(self, api_key: int, body: dict[str, Any], *, version: int | None = None,
             expect_response: bool = True) -> asyncio.Future | None:
        """Write a request now; return the future of its response body (None without one)."""
        if self.closed:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed: {self._closed_exc}")
        v = self.version(api_key) if version is None else version
        cid = next(_correlation) & 0x7FFFFFFF
        frame = encode_request(int(api_key), v, cid, self.client_id, body)
        self._transport.write(frame)
        if not expect_response:
            return None
        fut = asyncio.get_running_loop().create_future()
        self._in_flight[cid] = (int(api_key), v, fut)
        return fut

    def _on_data(self, nbytes: int) -> None:
        try:
            frames = self._decoder.buffer_updated(nbytes)
        except Exception as exc:
            self.close(ProtocolError(f"bad frame from {self.host}:{self.port}: {exc}{self._tls_hint(exc)}"))
            return
        decode = decode_response
        for frame in frames:
            cid = int.from_bytes(bytes(frame[:4]), "big", signed=True)
            entry = self._in_flight.pop(cid, None)
            if entry is None:
                self.close(ProtocolError(f"unexpected correlation id {cid} from {self.host}:{self.port}"))
                return
            api_key, version, fut = entry
            self._served = self._served or (self._negotiated and not self._authenticating)
            try:
                _, body = decode(api_key, version, frame)
            except Exception as exc:
                if not fut.done():
                    fut.set_exception(ProtocolError(f"cannot decode {Api(api_key).name} v{version}: {exc}"))
                continue
            throttle = body.get("throttle_time_ms") if isinstance(body, dict) else None
            if throttle and throttle > 0 and client_throttles(api_key, version):
                self.throttled_until = max(self.throttled_until,
                                           asyncio.get_running_loop().time() + throttle / 1000)
            if not fut.done():
                fut.set_result(body)
        if self._retiring and not self._in_flight:
            self.close()

    def _tls_hint(self, exc: Exception) -> str:
        """A hint when a plain connection's "frame size" is the start of a TLS record (a TLS listener)."""
        match = re.match(r"frame size (-?\d+)", str(exc))
        if self.ssl_context is None and match:
            size = int(match.group(1)) & 0xFFFFFFFF
            if size >> 24 in (0x15, 0x16) and (size >> 16) & 0xFF == 0x03:
                return " (the broker answered with TLS: set security.protocol=SSL)"
        return ""

    def _on_lost(self, exc) -> None:
        if isinstance(exc, ssl.SSLError):
            why = describe_tls_error(exc)
        elif self._authenticating and (exc is None or isinstance(exc, ConnectionResetError)):
            why = (f"{'closed by peer' if exc is None else exc} during SASL {self.sasl.mechanism} "
                   "authentication (is it a SASL listener? see security.protocol)")
        elif (self._negotiated and not self._served and self.sasl is None
              and (exc is None or isinstance(exc, ConnectionResetError))):
            # a SASL listener closes a connection whose first request after ApiVersions is not SaslHandshake
            why = (f"{'closed by peer' if exc is None else exc} at the first request after ApiVersions (does the "
                   "listener require SASL? see security.protocol, sasl.mechanism)")
        elif not self._negotiated and (exc is None or isinstance(exc, ConnectionResetError)):
            closed = "closed by peer" if exc is None else str(exc)
            if self.ssl_context is not None:
                # TLS 1.3: a broker refusing our (missing) client certificate does so after our handshake is done
                why = (f"{closed} right after the TLS handshake (does the broker require a client "
                       "certificate? see ssl.certificate.location)")
            else:
                why = f"{closed} before answering ApiVersions (is it a TLS listener? see security.protocol)"
        else:
            why = exc or "closed by peer"
        self.close(KafkaConnectionError(f"connection to {self.host}:{self.port} lost: {why}"))

    def close(self, exc: BaseException | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        self._closed_exc = exc
        err = exc or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        for _, _, fut in self._in_flight.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # awaiting callers still get it; nobody else must be warned
        self._in_flight.clear()
        if self._write_paused is not None and not self._write_paused.done():
            self._write_paused.set_result(None)  # the next send() sees the closed connection
        if self._transport is not None:
            self._transport.close()
