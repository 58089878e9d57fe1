"""The asyncio network layer: listeners, connections, ordered pipelined responses.

One event loop serves every connection. Per connection:

* bytes are read straight into a :class:`~broker.protocol.FrameDecoder`
  (``asyncio.BufferedProtocol``: no new buffer per read; limit
  ``socket.request.max.bytes``); each complete frame is decoded and, when the
  order of effects allows (below), its API handler is started at once, inside
  ``buffer_updated`` (the first step of its coroutine runs eagerly, as Python
  3.12's eager tasks do). A handler that finishes without suspending (Produce
  with acks 0/1, Metadata, ApiVersions, most Fetches with data) costs no task
  and no extra pass of the event loop; one that suspends (a produce waiting for
  its appends, a long poll, a group join, executor work) goes on in a task;
* order of effects: every request sees the effects of every earlier request on
  its connection, as in Apache Kafka, which mutes a connection until the
  response to its current request is sent (a ListOffsets after a DeleteRecords
  sees the new log start offset, an OffsetFetch after an OffsetCommit the new
  offset). A request starts only when every earlier one has finished, with
  one exception that keeps pipelined produce fast: a Produce may start while
  the earlier requests still running are all Produces whose appends are
  queued (:meth:`RequestContext.appends_queued`), because each log dir's
  writer appends in queue order. A request that may not start yet waits, in
  arrival order, with its place in the response order already taken; so a
  Produce behind a long-poll Fetch starts when the Fetch answers (at the
  latest after its ``max_wait_ms``), as in Kafka;
* responses leave strictly in request order. While nothing is queued and the
  writer is idle, an all-bytes response is written straight to the transport;
  otherwise it waits in a FIFO (``_pending``, futures and tasks) that one
  writer task drains. A handler task writes its own all-bytes response when
  every earlier one is sent: when the writer waits for exactly it (one pass of
  the loop fewer), or when it was first in line with the writer idle, in which
  case the writer is not even woken for it (a lone produce at a low rate costs
  no step of the writer task at all).
  A response is a list of parts: bytes are written to the transport, a file
  slice (an object with ``file``, ``position`` and ``length``, e.g. the log's
  ``FetchSlice``) is sent with ``loop.sendfile`` straight from the segment
  file (``os.sendfile``: zero copy); on a TLS connection the slice is read in
  chunks and encrypted instead (no zero copy under TLS, as in Kafka), waiting
  for room in the send buffer between chunks;
* listeners: each listener of ``listeners`` is bound on its own; an SSL one
  (``listener.security.protocol.map``) accepts TLS with the context
  :mod:`broker.tls` built at start (see :class:`_TlsHandshake`), and a handshake
  not finished within ``TLS_HANDSHAKE_TIMEOUT_S`` (or a client speaking
  plaintext to it) closes only that connection, with one log line. A connection remembers its listener: Metadata,
  FindCoordinator and DescribeCluster answer with the endpoints of the
  listener the request came in on, as Kafka does;
* back-pressure: reading pauses while more than ``MAX_IN_FLIGHT`` requests
  (running or waiting to start) wait for their responses, and the writer
  waits while the transport's send buffer is above its high-water mark (a
  slow reader cannot grow our memory).

Client quotas (:mod:`broker.server.quotas`), only while any quota is
configured: a Produce's bytes are counted as it arrives, every other request
when its handler has answered (record bytes of a consumer Fetch, the loop time
its steps took, the partitions it created or deleted). A throttle goes into the
response's ``throttle_time_ms`` and mutes the connection: reading pauses, and
requests already read wait to start, until it ends (:meth:`Connection.throttle`);
a request version from before KIP-219 also gets its answer only then.

Bad input closes only the offending connection, with one log line: a size
prefix that is negative or above the limit, an undecodable request, an unknown
api key or version (except ApiVersions, which is answered at v0 with
UNSUPPORTED_VERSION and our version table, as the protocol requires), or a
handler that raised. Everyone else carries on.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import functools
import heapq
import logging
import os
import socket
import struct
import time
import types
from typing import TYPE_CHECKING

from broker.protocol import (
    ApiKey,
    ErrorCode,
    FrameDecoder,
    FrameTooLargeError,
    InvalidRequestError,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    encode_response,
)
from broker.acl import ANONYMOUS, NoMatchingRule, PrincipalMapper, java_host, principal_of_certificate
from broker import oauth
from broker.config import SASL_PROTOCOLS
from broker.sasl import MECHANISMS as SASL_MECHANISMS
from broker.sasl import GSSAPI, AuthenticationFailed, SaslServerSession
from broker.server.context import CloseConnection, RequestContext
from broker.protocol.throttling import client_throttles
from broker.server.connection_quotas import ConnectionQuotas, ConnectionSlot, ConnectionThrottled
from broker.server.quotas import produce_throttle, throttle_time
from broker.server.registry import api_name

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.network")

MAX_IN_FLIGHT = 128
#: What a client on a SASL listener may send before its SASL exchange succeeds, by the exchange's state
#: (Kafka's SaslServerAuthenticator): ApiVersions and SaslHandshake first, then SaslAuthenticate only.
_ALLOWED = {"handshake": frozenset((ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)),
            "authenticate": frozenset((ApiKey.SASL_AUTHENTICATE,)), "failed": frozenset()}
TLS_HANDSHAKE_TIMEOUT_S = 10.0
#: The shortest SASL session given to a credential that expires sooner (KIP-368; see _start_session)
MIN_SESSION_MS = 1000
TLS_SLICE_CHUNK = 256 * 1024
_BYTES_LIKE = (bytes, bytearray, memoryview)
_monotonic = time.monotonic
#: accept() errors that mean the process or the system is out of something: wait, then accept again
_ACCEPT_RESOURCE_ERRNOS = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))


class _CloseConnection(Exception):
    """Raised inside a request task to close its connection (after logging once)."""


@types.coroutine
def _resume(coro, awaiting):
    """Finish, inside a task, a coroutine whose first step already ran outside one.

    ``awaiting`` is what that step yielded (the future it waits for, or None
    for a bare yield). The task driving this generator sees that same object
    first, so it waits exactly as it would have for ``coro`` itself; values and
    exceptions (cancellation) the task sends in are passed through to ``coro``.
    """
    while True:
        try:
            sent = yield awaiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: B036 - cancellation must reach the handler
            try:
                awaiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                awaiting = coro.send(sent)
            except StopIteration as stop:
                return stop.value


@types.coroutine
def _resume_timed(coro, awaiting, ctx: RequestContext):
    """:func:`_resume` that adds the time of each step to ``ctx.loop_ns`` (client request quotas)."""
    perf_ns = time.perf_counter_ns
    while True:
        try:
            sent = yield awaiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: B036 - cancellation must reach the handler
            ctx.step_ns = perf_ns()
            try:
                awaiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            ctx.step_ns = perf_ns()
            try:
                awaiting = coro.send(sent)
            except StopIteration as stop:
                return stop.value
        ctx.loop_ns += perf_ns() - ctx.step_ns
        ctx.step_ns = 0


def _settle(slot: asyncio.Future, task: asyncio.Task) -> None:
    """Give a request's place in the response order the outcome of the task that ran it."""
    exc = _CloseConnection() if task.cancelled() else task.exception()  # (marks a failure as seen)
    if slot.done():
        return
    if exc is not None:
        slot.set_exception(exc)
    else:
        slot.set_result(task.result())


def _cancel_with(task: asyncio.Task, slot: asyncio.Future) -> None:
    """A place cancelled (the connection closed): stop the handler too."""
    if slot.cancelled():
        task.cancel()


class _SliceFile:
    """A file-like view of a segment file for one ``loop.sendfile`` call.

    It holds its own duplicate of the segment file's descriptor (``os.dup``):

    * asyncio's native sendfile spans several loop passes and then ``lseek``s the
      descriptor it was given. The segment file may be closed meanwhile (its
      replica deleted or moved, the broker stopping); with the shared descriptor
      that would raise inside a loop callback and leave the send unfinished, and
      a reused descriptor number would send another file's bytes. The duplicate
      keeps the open file readable until the send ends, as Kafka's delayed
      segment deletion does for readers.
    * asyncio's final ``lseek`` moves the file offset, which the duplicate shares
      with the segment file (one open file description). That is harmless: every
      read and write of a segment file is positional (``pread``/``pwritev``).

    The fallback path (no native sendfile, e.g. TLS) ``seek``s and ``readinto``s;
    those work on a private position with ``pread``. ``close`` must be called once
    the send has ended.
    """

    mode = "rb"

    def __init__(self, file) -> None:
        self._fd = os.dup(file.fileno())  # ValueError if the segment file is closed already
        self._pos = 0

    def fileno(self) -> int:
        return self._fd

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos
        return pos

    def readinto(self, buf) -> int:
        data = os.pread(self._fd, len(buf), self._pos)
        buf[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        os.close(self._fd)


class Connection(asyncio.BufferedProtocol):
    """One client connection (see the module docstring)."""

    def __init__(self, server: "NetworkServer", listener: str = "PLAINTEXT", tls: bool = False,
                 slot: ConnectionSlot | None = None) -> None:
        self.server = server
        #: This connection's place in the connection limits (:mod:`broker.server.connection_quotas`)
        self.slot = slot
        #: When bytes last arrived (monotonic seconds): the least recently active goes first when the
        #: broker closes connections to get within max.connections
        self.last_active = _monotonic()
        #: The listener this connection came in on: Metadata and FindCoordinator answer its endpoints.
        self.listener = listener
        #: TLS (an SSL listener): no half-close, and file slices are read and written, not sendfile'd.
        self.tls = tls
        self._made = False  # connection_made ran (a failed TLS handshake never gets there)
        # Frames that arrived with the client's last handshake message, before connection_made
        self._early_frames: list | None = None
        self.broker = server.broker
        self.loop = server.loop
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        #: The SASL exchange of a connection on a SASL listener (None elsewhere); see :mod:`broker.sasl`.
        self.sasl: SaslServerSession | None = server.sasl_session(listener)
        #: Who the client is: ``User:<name>`` once its SASL exchange succeeded, else ``User:ANONYMOUS``.
        self.principal = ANONYMOUS
        #: The client's IP address, for ACLs' host
        self.host = "?"
        #: What the client's ApiVersions v3+ named it (client metrics subscriptions match on them)
        self.client_software_name = ""
        self.client_software_version = ""
        self._sasl_held: list | None = None  # frames that came behind a bare token being checked
        #: a Kafka request has come (until then a SASL listener with GSSAPI takes Kafka 0.9's bare first token)
        self._saw_request = False
        #: KIP-368: loop time the authenticated session ends (None: never; connections.max.reauth.ms 0), what
        #: the last SaslAuthenticate told the client, and the principal and mechanism a re-authentication keeps
        self.session_expires_at: float | None = None
        self.session_lifetime_ms = 0
        self._reauth_of: tuple[str, str] | None = None
        config = self.broker.config
        self._decoder = FrameDecoder(config["sasl.server.max.receive.size"] if self.sasl is not None
                                     else config["socket.request.max.bytes"])
        self._pending: collections.deque[asyncio.Future] = collections.deque()
        # Requests not started yet (see "order of effects"): (entry, ctx, body, slot), where
        # ``slot`` is their place in ``_pending``.
        self._waiting: collections.deque[tuple] = collections.deque()
        self._running = 0  # handlers started and not finished
        self._produces_queued = 0  # of those, Produces whose appends are all queued
        self._starting = False  # _start_waiting is on the stack
        self._wakeup = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._reading_paused = False
        self._throttled_until = 0.0  # loop time a quota's throttle ends (reading paused until then)
        self._unthrottle: asyncio.TimerHandle | None = None
        self._closing = False
        self._closing_after_drain = False
        self._writer: asyncio.Task | None = None
        self._writer_idle = False  # the writer waits for work and nothing is being sent
        self._awaited: asyncio.Future | None = None  # the head of _pending the writer waits for, sending nothing
        self._sending_file = False  # the writer is inside loop.sendfile (see _close_transport)
        self.closed = self.loop.create_future()

    # -- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport) -> None:
        if self._closing:  # TLS: bad input came with the handshake's end; nothing was registered yet
            transport.abort()
            return
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = java_host(peer[0]) if peer else "?"
        if self.tls:  # a client certificate names the principal (SASL_SSL: until SASL names it)
            ssl_object = transport.get_extra_info("ssl_object")
            try:
                self.principal = principal_of_certificate(
                    ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None,
                    self.server.principal_mapper(self.listener)) or ANONYMOUS
            except NoMatchingRule as exc:  # never a connection: not counted, not registered
                log.info("connection from %s on listener %s refused: %s", self.peer, self.listener, exc)
                self.broker.metrics.tls_handshake_failures.labels(self.listener).inc()
                self._closing = True
                transport.abort()
                return
        self.transport = transport
        self._made = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.server.connections.add(self)
        self.broker.metrics.connections.inc()
        self.broker.metrics.active_connections.inc()
        self._writer = self.loop.create_task(self._write_loop())
        early, self._early_frames = self._early_frames, None
        for frame in early or ():
            if self._closing:
                break
            self._dispatch(frame)

    def connection_lost(self, exc) -> None:
        self._closing = True
        if self.slot is not None:
            self.slot.release()
        if not self._made:  # a TLS handshake that failed: never counted, never registered
            return
        self.server.connections.discard(self)
        self.broker.metrics.active_connections.dec()
        if self._unthrottle is not None:
            self._unthrottle.cancel()
        self._drop_pending()
        self._can_write.set()
        self._wakeup.set()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._closing:
            return
        self.last_active = _monotonic()
        try:
            frames = self._decoder.buffer_updated(nbytes)
        except FrameTooLargeError as exc:
            self.close_for("too_large", str(exc))
            return
        if not self._made:  # TLS: requests that came with the handshake's end wait for connection_made
            self._early_frames = (self._early_frames or []) + frames
            return
        for frame in frames:
            if self._closing:
                return
            self._dispatch(frame)

    def eof_received(self):
        # The client half-closed: answer what is in flight, then close. TLS has no half-close (asyncio
        # closes an SSL transport at the peer's close_notify whatever this returns).
        self._closing_after_drain = True
        self._wakeup.set()
        return not self.tls

    # -- requests ----------------------------------------------------------------------
    def _dispatch(self, frame: bytes) -> None:
        sasl = self.sasl
        if sasl is not None and not sasl.complete:
            if self._closing_after_drain:
                return  # the exchange was broken off: nothing more is read from this client
            if self._sasl_held is not None:  # a bare token is being checked: what follows waits for it
                self._sasl_held.append(frame)
                return
            if sasl.raw and sasl.state == "authenticate":
                self._raw_token(frame)  # after SaslHandshake v0 the client's tokens come as bare frames
                return
            if not self._saw_request and frame[:1] == b"\x60" and GSSAPI in sasl.sasl.mechanisms:
                # Kafka 0.9's clients send their first GSSAPI token at once, with no SaslHandshake (as
                # Kafka, taken as GSSAPI in bare frames): a token starts with 0x60 (RFC 2743 3.1), which
                # no request does (its api key would be 24576 or more)
                sasl.handshake(GSSAPI, 0)
                self._raw_token(frame)
                return
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as exc:
            self._unsupported(exc.header)
            return
        except (InvalidRequestError, ProtocolError) as exc:
            self.close_for("invalid_request", str(exc))
            return
        entry = self.broker.registry.get(header.api_key)
        if entry is None or not entry.supports(header.api_version):
            self._unsupported(header)
            return
        if self.session_expires_at is not None and sasl.complete:
            # KIP-368: a request after the session ended closes the connection (Kafka's
            # expired-connections-killed); a SaslHandshake before then re-authenticates it
            if self.loop.time() >= self.session_expires_at:
                self.broker.metrics.expired_connections_killed.labels(self.listener).inc()
                log.info("closing connection from %s on listener %s (%s): %s after its SASL session of %d ms "
                         "ended without re-authentication", self.peer, self.listener, self.principal,
                         api_name(header.api_key), self.session_lifetime_ms)
                self._abort()
                return
            if header.api_key == ApiKey.SASL_HANDSHAKE:
                self._begin_reauthentication()
                sasl = self.sasl
        if sasl is not None and not sasl.complete:
            self._saw_request = True  # only before authentication does it matter (Kafka 0.9's first token)
            if header.api_key not in _ALLOWED[sasl.state]:
                # as Kafka: closed unanswered (after the failed-authentication delay)
                self.sasl_refused(f"{api_name(header.api_key)} " + (
                    "before SASL authentication" if sasl.state == "handshake" else "during SASL authentication"))
                delay = self.broker.config["connection.failed.authentication.delay.ms"]
                self.loop.call_later(delay / 1000, self._abort)
                return
        ctx = RequestContext(self.broker, header, self.peer, self.loop.time(), listener=self.listener,
                             connection=self)
        throttle = 0
        if self.broker.quotas.active:
            ctx.request_bytes = len(frame) + 4  # with its size prefix, as Kafka counts a request
            if header.api_key == ApiKey.PRODUCE:
                # counted as it arrives: a throttle holds back the produces pipelined behind it
                throttle = produce_throttle(self.broker.quotas, ctx)
        if self._waiting or self._throttled_until or not self._may_start(header.api_key):
            slot = self.loop.create_future()
            self._enqueue(slot)
            self._waiting.append((entry, ctx, body, slot))
        else:
            self._start(entry, ctx, body, None)
        if throttle:
            self.throttle(throttle)

    def _may_start(self, api_key: int) -> bool:
        """Whether a request may start now without running beside one whose effects it must see."""
        return self._running == 0 or (api_key == ApiKey.PRODUCE and self._running == self._produces_queued)

    def _start(self, entry, ctx: RequestContext, body: dict, slot: asyncio.Future | None) -> None:
        """Run a handler's first step now; ``slot`` is its place in ``_pending`` if it has one already."""
        self._running += 1
        ctx.started_at = self.loop.time()
        if ctx.header.api_key == ApiKey.PRODUCE:
            ctx.on_appends_queued = self._appends_queued
        coro = self._run(entry, ctx, body)
        timed = self.broker.quotas.active  # client request quotas: the loop time of each step
        if timed:
            ctx.step_ns = time.perf_counter_ns()
        try:
            awaiting = coro.send(None)
        except StopIteration as done:
            full = self._note(entry.name, ctx)
            if slot is None:
                self._respond(done.value)
            else:
                slot.set_result(done.value)
            if full:
                self.broker.metrics.count_answered()
            return
        except (_CloseConnection, asyncio.CancelledError):
            # Close in request order: earlier responses still go out first.
            if slot is None:
                slot = self.loop.create_future()
                self._enqueue(slot)
            slot.set_exception(_CloseConnection())
            return
        if timed:
            ctx.loop_ns += time.perf_counter_ns() - ctx.step_ns
            ctx.step_ns = 0
        task = self.loop.create_task(self._finish(coro, awaiting, entry.name, ctx, timed))
        if slot is None:
            # First in line with the writer idle: the task answers by itself (see _finish) and the
            # writer sleeps on, two passes of its loop fewer per request at low rates.
            self._enqueue(task, wake=not (self._writer_idle and not self._pending))
        else:
            task.add_done_callback(functools.partial(_settle, slot))
            slot.add_done_callback(functools.partial(_cancel_with, task))

    async def _finish(self, coro, awaiting, name: str, ctx: RequestContext, timed: bool = False):
        """The task body for a handler whose first step ran inline (see :meth:`_start`).

        ``loop.create_task`` takes only native coroutines from Python 3.12 on, so the
        generator-based :func:`_resume` is awaited from this one rather than given to it.
        When every earlier response is sent, the response goes out from here, a
        pass of the loop earlier: either the writer waits for exactly this task
        (it then gets ``[]``, nothing left to send), or the task was first in
        line with the writer idle and not woken for it (it then takes itself off
        ``_pending``; the writer is woken only for what it cannot send here).
        """
        try:
            parts = await (_resume_timed(coro, awaiting, ctx) if timed else _resume(coro, awaiting))
        except BaseException:
            self._wakeup.set()  # the writer may not have been woken for this task: it must see the failure
            raise
        full = self._note(name, ctx)
        try:
            me = asyncio.current_task(self.loop)
            awaited = self._awaited is me
            if not awaited and not (self._writer_idle and self._pending and self._pending[0] is me):
                return parts  # behind others: the writer sends it in order
            if not parts or (not self._closing and self._can_write.is_set() and not self.transport.is_closing()
                             and all(isinstance(p, _BYTES_LIKE) for p in parts)):
                if parts:
                    write = self.transport.write
                    for part in parts:
                        write(part)
                if not awaited:
                    self._pending.popleft()
                return []
            self._wakeup.set()  # a file slice, a full send buffer or a closing connection: the writer's work
            return parts
        finally:
            if full:
                self.broker.metrics.count_answered()

    def _appends_queued(self) -> None:
        """A running Produce queued all its appends (see "order of effects")."""
        self._produces_queued += 1
        self._maybe_start_waiting()

    def _finished(self, ctx: RequestContext) -> None:
        """A handler ended (answered, failed or cancelled)."""
        self._running -= 1
        # The hook is dropped once called: a Produce that queued its appends was counted.
        if ctx.header.api_key == ApiKey.PRODUCE and ctx.on_appends_queued is None:
            self._produces_queued -= 1
        self._maybe_start_waiting()

    def _maybe_start_waiting(self) -> None:
        if self._waiting and not self._starting:
            # We may be inside a handler's task: start the next ones outside it, as every
            # handler's first step runs outside any task.
            self.loop.call_soon(self._start_waiting)

    def _start_waiting(self) -> None:
        """Start the waiting requests that the order of effects now allows, in arrival order."""
        if self._starting:  # called from a handler's first step: the loop below goes on after it
            return
        self._starting = True
        try:
            waiting = self._waiting
            while (waiting and not self._closing and not self._throttled_until
                   and self._may_start(waiting[0][1].header.api_key)):
                entry, ctx, body, slot = waiting.popleft()
                if not slot.done():  # else the connection is closing
                    self._start(entry, ctx, body, slot)
        finally:
            self._starting = False

    def _respond(self, parts: list | None) -> None:
        """Send a finished response now if nothing is ahead of it, else queue it for the writer."""
        if parts is None:  # no response (acks=0): nothing to keep in order
            return
        if (self._writer_idle and not self._pending and not self._closing and not self._closing_after_drain
                and self._can_write.is_set() and not self.transport.is_closing()
                and (isinstance(parts[0], _BYTES_LIKE) if len(parts) == 1
                     else all(isinstance(p, _BYTES_LIKE) for p in parts))):
            write = self.transport.write
            for part in parts:
                write(part)
            return
        done = self.loop.create_future()
        done.set_result(parts)
        self._enqueue(done)

    def _unsupported(self, header: RequestHeader | None) -> None:
        if header is not None and header.api_key == ApiKey.API_VERSIONS:
            # Answer at v0 with UNSUPPORTED_VERSION and our table so the client can pick a version.
            body = {
                "error_code": ErrorCode.UNSUPPORTED_VERSION,
                "api_keys": [
                    {"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in self.broker.registry.versions().items()
                ],
            }
            v0 = RequestHeader(header.api_key, 0, header.correlation_id, header.client_id)
            self._respond(encode_response(v0, body))
            return
        if header is None:
            self.close_for("unsupported_version", "request for an unknown api")
        else:
            self.close_for(
                "unsupported_version",
                f"{api_name(header.api_key)} (key {header.api_key}) v{header.api_version} is not supported",
            )

    def _enqueue(self, future: asyncio.Future, wake: bool = True) -> None:
        self._pending.append(future)
        if wake:
            self._wakeup.set()
        if len(self._pending) >= MAX_IN_FLIGHT and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    async def _run(self, entry, ctx: RequestContext, body: dict):
        name = entry.name
        throttle = 0
        try:
            response = await entry.handler(ctx, body)
            quotas = self.broker.quotas
            if quotas.active:
                throttle = throttle_time(quotas, ctx, response)
            parts = None if response is None else encode_response(ctx.header, response)
        except asyncio.CancelledError:
            raise
        except CloseConnection as exc:
            self.broker.metrics.request_errors.labels(name, "CloseConnection").inc()
            log.info("closing connection from %s: %s", self.peer, exc)
            raise _CloseConnection() from exc
        except Exception as exc:
            self.broker.metrics.request_errors.labels(name, type(exc).__name__).inc()
            log.error(
                "closing connection from %s: %s v%d handler failed: %r",
                self.peer, name, ctx.api_version, exc, exc_info=log.isEnabledFor(logging.DEBUG),
            )
            raise _CloseConnection() from exc
        finally:
            self._finished(ctx)
        if throttle:
            self.throttle(throttle)
            if parts is not None and not client_throttles(ctx.header.api_key, ctx.api_version):
                await asyncio.sleep(throttle / 1000)  # an older client: its answer waits out the throttle
        ctx.answered_at = self.loop.time()
        return parts

    def throttle(self, throttle_ms: int) -> None:
        """Take nothing more from this client for ``throttle_ms`` (a quota's throttle; Kafka mutes the
        channel): reading pauses, and requests already read wait to start until it ends (Kafka would not
        have read them yet). A later throttle that ends later extends it."""
        until = self.loop.time() + throttle_ms / 1000
        if until <= self._throttled_until:
            return
        self._throttled_until = until
        if self.transport is not None and not self._closing:
            self.transport.pause_reading()
        if self._unthrottle is not None:
            self._unthrottle.cancel()
        self._unthrottle = self.loop.call_at(until, self._throttle_ended)

    def _throttle_ended(self) -> None:
        self._unthrottle = None
        self._throttled_until = 0.0
        self._maybe_start_waiting()  # what was read before the throttle began
        if (not self._reading_paused and not self._closing and not self._closing_after_drain
                and self.transport is not None and not self.transport.is_closing()):
            self.transport.resume_reading()

    def _note(self, name: str, ctx: RequestContext) -> bool:
        """Note a handled request before its response can reach the client (see BrokerMetrics.count_request).

        Noting it only after the write would let a client that scrapes as soon as
        it is answered (the scrape runs on another thread, and the socket write
        lets it run) find the request not counted yet. True: a batch is due, to be
        counted once the response is written.
        """
        return self.broker.metrics.count_request(name, ctx.received_at, ctx.started_at, ctx.answered_at,
                                                 ctx.produced)

    # -- SASL -------------------------------------------------------------------------
    def _raw_token(self, frame: bytes) -> None:
        """A bare SASL token (after SaslHandshake v0): answered as a bare size-prefixed frame, in order.
        Frames behind it wait until it is checked (they are requests once it succeeds)."""
        slot = self.loop.create_future()
        self._enqueue(slot)
        self._sasl_held = []
        self.loop.create_task(self._raw_step(bytes(frame), slot))

    async def _raw_step(self, token: bytes, slot: asyncio.Future) -> None:
        try:
            await self._raw_check(token, slot)
        finally:
            held, self._sasl_held = self._sasl_held, None
            for frame in held or ():
                if self._closing:
                    break
                self._dispatch(frame)

    async def _raw_check(self, token: bytes, slot: asyncio.Future) -> None:
        try:
            answer = await self.sasl.step(token)
        except AuthenticationFailed as exc:
            await self.sasl_failed(exc)  # v0 has no error response: the connection just closes
            if not slot.done():
                slot.set_result([])
            return
        except Exception as exc:  # noqa: BLE001 - a lookup that failed: this connection only
            log.warning("SASL exchange with %s on listener %s failed: %r", self.peer, self.listener, exc)
            if not slot.done():
                slot.set_exception(_CloseConnection())
            return
        if self.sasl.complete:
            self.sasl_succeeded()
            if self.sasl.mechanism == GSSAPI and not answer:
                # GSSAPI's last step has no answer: in bare frames nothing is sent (Java's GssKrb5Server
                # gives null there, and clients read the next frame as a response)
                if not slot.done():
                    slot.set_result([])
                return
        if not slot.done():
            slot.set_result([struct.pack(">i", len(answer)) + answer])

    def _begin_reauthentication(self) -> None:
        """KIP-368: a SaslHandshake on an authenticated connection whose session ends starts a new exchange;
        until it succeeds the connection keeps its principal, and takes only that exchange's requests."""
        self._reauth_of = (self.principal, self.sasl.mechanism)
        self.sasl = self.server.sasl_session(self.listener)

    def sasl_succeeded(self) -> bool:
        """The SASL exchange proved who the client is: every request is open to it from now on. A
        re-authentication must name the same principal with the same mechanism; False (the connection
        closes after the answer) when it does not."""
        sasl = self.sasl
        metrics = self.broker.metrics
        if self._reauth_of is not None:
            principal, mechanism = self._reauth_of
            self._reauth_of = None
            if sasl.principal != principal or sasl.mechanism != mechanism:
                metrics.failed_reauthentication.labels(self.listener, sasl.mechanism).inc()
                self._sasl_closing(f"re-authentication as {sasl.principal} ({sasl.mechanism}) refused: the "
                                   f"connection is {principal} ({mechanism})", sasl.mechanism)
                return False
            metrics.successful_reauthentication.labels(self.listener, sasl.mechanism).inc()
        else:
            self.principal = sasl.principal
            self._decoder.max_frame_bytes = self.broker.config["socket.request.max.bytes"]
            metrics.successful_authentication.labels(self.listener, sasl.mechanism).inc()
        self._start_session(sasl)
        log.debug("%s authenticated as %s on listener %s (%s)", self.peer, self.principal, self.listener,
                  sasl.mechanism)
        return True

    def _start_session(self, sasl: SaslServerSession) -> None:
        """KIP-368: with ``connections.max.reauth.ms`` above 0 for the listener and mechanism, the session
        lasts that long, or until the credential expires (an OAUTHBEARER token's exp) if sooner."""
        max_reauth = self.broker.config.max_reauth_ms(self.listener, sasl.mechanism)
        if max_reauth <= 0:
            self.session_expires_at, self.session_lifetime_ms = None, 0
            return
        lifetime = max_reauth
        if sasl.expires_at_ms is not None:
            # a token accepted within the clock skew may have expired already: a second to re-authenticate
            # (0 would tell the client "no limit" and end the session at once)
            lifetime = min(lifetime, max(int(sasl.expires_at_ms - time.time() * 1000), MIN_SESSION_MS))
        self.session_lifetime_ms = lifetime
        self.session_expires_at = self.loop.time() + self.session_lifetime_ms / 1000

    async def sasl_failed(self, exc: AuthenticationFailed) -> None:
        """A failed authentication: one log line, the metric, Kafka's delay; closed after the answer."""
        if self._reauth_of is not None:
            self.broker.metrics.failed_reauthentication.labels(self.listener, self.sasl.mechanism).inc()
        self._sasl_closing(f"SASL {'re-' if self._reauth_of else ''}authentication failed ({self.sasl.mechanism}): "
                           f"{exc.detail}", self.sasl.mechanism)
        await self.failure_delay()

    async def failure_delay(self) -> None:
        """``connection.failed.authentication.delay.ms`` before a failure is answered (no fast guessing)."""
        delay = self.broker.config["connection.failed.authentication.delay.ms"]
        if delay:
            await asyncio.sleep(delay / 1000)

    def sasl_refused(self, why: str, mechanism: str | None = None) -> None:
        """A SASL exchange broken off (a mechanism not enabled, a request out of turn): closed after the answer."""
        self._sasl_closing(f"SASL exchange refused: {why}", mechanism or (self.sasl.mechanism if self.sasl else None))

    def _sasl_closing(self, line: str, mechanism: str | None) -> None:
        # the label only ever takes the mechanisms served: a client's made-up names must not grow the metrics
        label = mechanism if mechanism in SASL_MECHANISMS else ("none" if mechanism is None else "unsupported")
        self.broker.metrics.failed_authentication.labels(self.listener, label).inc()
        log.info("connection from %s on listener %s: %s", self.peer, self.listener, line)
        self._closing_after_drain = True
        if self.transport is not None and not self.transport.is_closing() and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wakeup.set()

    # -- responses --------------------------------------------------------------------
    async def _write_loop(self) -> None:
        try:
            while True:
                if not self._pending:
                    if self._closing or self._closing_after_drain:
                        break
                    self._wakeup.clear()
                    self._writer_idle = True
                    try:
                        await self._wakeup.wait()
                    finally:
                        self._writer_idle = False
                    continue
                head = self._pending[0]
                self._awaited = head
                try:
                    parts = await head
                except _CloseConnection:
                    self._abort()
                    return
                except asyncio.CancelledError:
                    if self._closing:
                        return
                    raise
                finally:
                    self._awaited = None
                if self._pending and self._pending[0] is head:
                    self._pending.popleft()
                if (self._reading_paused and len(self._pending) < MAX_IN_FLIGHT // 2 and not self._closing
                        and not self._closing_after_drain):
                    self._reading_paused = False
                    if not self._throttled_until:
                        self.transport.resume_reading()
                if not self._closing and (parts or not self._can_write.is_set()):
                    await self._send(parts or [])  # ([] after _finish sent it: wait for room only)
        except (ConnectionError, OSError, RuntimeError, ValueError) as exc:
            # RuntimeError: loop.sendfile on a transport the peer already closed. ValueError: a fetched
            # slice's segment file was closed meanwhile (its replica deleted or the broker stopping);
            # the client fetches again on a new connection, as after any lost connection.
            if not self._closing:
                log.info("connection from %s lost while sending: %s", self.peer, exc)
            self._abort()
            return
        except asyncio.CancelledError:
            return
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def _send(self, parts: list) -> None:
        transport = self.transport
        if transport.is_closing():
            # The peer went away (connection_lost is on its way): writing now only
            # gets each write refused, and asyncio's "socket.send() raised exception."
            # logged after the first few.
            return
        for part in parts:
            if isinstance(part, _BYTES_LIKE):
                transport.write(part)
                continue
            if part.length == 0:
                continue
            if not self._can_write.is_set():
                await self._can_write.wait()
            if self.tls:
                await self._send_slice_tls(transport, part)
                continue
            view = _SliceFile(part.file)
            self._sending_file = True
            try:
                sent = await self.loop.sendfile(transport, view, part.position, part.length)
            finally:
                # A cancelled send removes its writer callback before this task resumes, so
                # nothing touches the descriptor after this.
                self._sending_file = False
                view.close()
                if self._closing:  # closed meanwhile, the frame perhaps cut short: nothing left worth sending
                    self._close_transport(hard=True)
            if sent != part.length:
                # The file got shorter under us: the frame size is now wrong, so the stream is lost.
                raise ConnectionError(f"sent {sent} of {part.length} bytes of a file slice")
        if not self._can_write.is_set():
            await self._can_write.wait()

    async def _send_slice_tls(self, transport, part) -> None:
        """A file slice on a TLS connection: ``pread`` in chunks of ``TLS_SLICE_CHUNK`` and written
        through the TLS transport, waiting for room between chunks (``pause_writing``), so a slow
        reader holds at most about one chunk beyond the transport's high-water mark. (asyncio's own
        fallback for ``loop.sendfile`` can leave the protocol unpaused above the mark.) The read runs
        on the loop, as ``sendfile`` does for plaintext: segment data is read from the page cache."""
        fd = os.dup(part.file.fileno())  # ValueError if the segment file is closed already
        try:
            position, left = part.position, part.length
            while left > 0:
                if not self._can_write.is_set():
                    await self._can_write.wait()
                if self._closing or transport.is_closing():
                    return
                chunk = os.pread(fd, min(left, TLS_SLICE_CHUNK), position)
                if not chunk:  # the file got shorter under us: the frame size is now wrong
                    raise ConnectionError(f"sent {part.length - left} of {part.length} bytes of a file slice")
                transport.write(chunk)
                position += len(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)

    # -- closing -----------------------------------------------------------------------
    def close_for(self, reason: str, detail: str) -> None:
        """Close because of bad input: one log line, one metric, nothing else affected."""
        if self._closing:
            return
        self.broker.metrics.protocol_errors.labels(reason).inc()
        log.warning("closing connection from %s: %s", self.peer, detail)
        self._abort()

    def _drop_pending(self) -> None:
        """Cancel what is still running; mark failures of finished ones as seen (no GC warning)."""
        for future in self._pending:
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()
        self._pending.clear()
        self._waiting.clear()

    def _abort(self, hard: bool = False) -> None:
        self._closing = True
        self._drop_pending()
        self._wakeup.set()
        self._close_transport(hard)

    def _close_transport(self, hard: bool) -> None:
        """Close the transport (``hard``: abort it, dropping unsent bytes), or, while the writer is
        inside ``loop.sendfile``, cancel that send and let it abort the transport once unwound.

        CPython 3.11's native sendfile holds the transport's "empty waiter", already resolved,
        until it returns; a transport closed under it fails in ``connection_lost``
        (InvalidStateError, logged by the loop) and strands the send, its writer callback gone.
        """
        if self._sending_file:
            self._writer.cancel()
            return
        if self.transport is None:
            return
        if hard:
            self.transport.abort()
        elif not self.transport.is_closing():
            self.transport.close()

    def stop_reading(self) -> None:
        """For shutdown: take no new requests, answer those in flight, then close."""
        if self.transport is not None and not self.transport.is_closing() and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._closing_after_drain = True
        self._wakeup.set()

    def busy(self) -> str:
        """What keeps the connection open, for the shutdown's log line."""
        return (f"{len(self._pending)} response(s) unsent, {self._running} handler(s) running, "
                f"{len(self._waiting)} request(s) waiting to start")

    def abort(self) -> None:
        """For shutdown: drop the connection now, unsent responses with it."""
        self._abort(hard=True)


#: OpenSSL's reasons for a failed server-side handshake that an operator meets most, in words
_HANDSHAKE_REASONS = {
    "WRONG_VERSION_NUMBER": "not TLS (a plaintext client on the TLS port?) (WRONG_VERSION_NUMBER)",
    "HTTP_REQUEST": "an HTTP request, not TLS (HTTP_REQUEST)",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "no client certificate, and ssl.client.auth is required "
                                         "(PEER_DID_NOT_RETURN_A_CERTIFICATE)",
    "UNSUPPORTED_PROTOCOL": "the client offered no TLS version of ssl.enabled.protocols (UNSUPPORTED_PROTOCOL)",
}


class _TlsHandshake(asyncio.Protocol):
    """A TCP connection on an SSL listener until its TLS handshake is done; then its :class:`Connection`.

    ``loop.start_tls`` instead of ``create_server(ssl=...)`` so that a failed handshake is seen: asyncio
    drops those silently, while an operator needs to know which clients were refused and why (Kafka
    logs them as failed authentications). One INFO line and ``kafkapy_tls_handshake_failures_total``
    for each; a peer that connects and closes without a TLS word (a load balancer's or an
    orchestrator's TCP health check, a client that gave up) is neither (a DEBUG line). The :class:`Connection` is counted and registered only once the
    handshake is done (its ``connection_made``); requests that arrive with the handshake's last
    message wait for that.
    """

    def __init__(self, server: "NetworkServer", listener: str, context, slot: ConnectionSlot | None = None) -> None:
        self.server, self.listener, self.context = server, listener, context
        self.slot = slot
        self.task: asyncio.Task | None = None

    def connection_made(self, transport) -> None:
        if self.server.stopping:
            self._release()
            transport.abort()
            return
        # start_tls's first step, up to its first wait, runs here: it takes the transport over (its
        # protocol swapped for TLS) before the loop can read a byte, so the ClientHello is not lost to
        # data_received below. (pause_reading would not hold: the transport adds its reader after this.)
        coro = self._handshake(transport)
        try:
            awaiting = coro.send(None)
        except StopIteration:
            return
        except BaseException:  # noqa: BLE001 - _handshake catches what start_tls raises; anything else
            transport.abort()
            raise
        self.task = self.server.loop.create_task(self._finish(coro, awaiting))
        self.server.handshakes.add(self.task)
        self.task.add_done_callback(functools.partial(self._done, transport))

    @staticmethod
    async def _finish(coro, awaiting) -> None:
        await _resume(coro, awaiting)

    def _done(self, transport, task: asyncio.Task) -> None:
        self.server.handshakes.discard(task)
        if task.cancelled():  # shutdown, perhaps before the task's first step: close the socket
            self._release()
            transport.abort()

    def _release(self) -> None:
        if self.slot is not None:
            self.slot.release()

    def data_received(self, data: bytes) -> None:  # start_tls took the transport before any read
        pass

    def connection_lost(self, exc) -> None:  # closed before start_tls took the transport over
        self._release()

    async def _handshake(self, transport) -> None:
        conn = Connection(self.server, self.listener, tls=True, slot=self.slot)
        try:
            await self._handshake_for(transport, conn)
        finally:
            if not conn._made:  # no connection came of it (a made one gives its slot back as it closes)
                self._release()

    async def _handshake_for(self, transport, conn: Connection) -> None:
        peer = transport.get_extra_info("peername")
        peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        conn.peer = peer
        try:
            tls = await self.server.loop.start_tls(transport, conn, self.context, server_side=True,
                                                   ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except (ConnectionResetError, BrokenPipeError) as exc:
            # the peer went away without a TLS word: a TCP health check, or a client that gave up
            log.debug("connection from %s on listener %s closed during its TLS handshake: %r",
                      peer, self.listener, exc)
            transport.abort()
            return
        except (OSError, asyncio.TimeoutError, ConnectionError, RuntimeError) as exc:
            self._failed(peer, exc)
            transport.abort()
            return
        if tls is None or tls.is_closing():  # the peer closed before or during the handshake
            if tls is not None:
                tls.abort()
            transport.abort()
            return
        conn.connection_made(tls)

    def _failed(self, peer: str, exc: BaseException) -> None:
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        if reason == "CERTIFICATE_VERIFY_FAILED":
            reason = f"client certificate not accepted: {getattr(exc, 'verify_message', '') or 'verify failed'}"
        elif isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or "taking longer than" in reason:
            reason = f"not finished within {TLS_HANDSHAKE_TIMEOUT_S:g} s"
        else:
            reason = _HANDSHAKE_REASONS.get(reason, reason)
        log.info("TLS handshake with %s on listener %s failed: %s", peer, self.listener, reason)
        self.server.broker.metrics.tls_handshake_failures.labels(self.listener).inc()


class NetworkServer:
    """The listeners, their acceptors and their connections.

    Each listener's sockets are bound by :meth:`start` and accepted from by one task per socket
    (:meth:`_accept`), not by asyncio's own server: the connection limits
    (:mod:`broker.server.connection_quotas`) decide for each accepted socket whether it becomes a
    connection, and a listener at its limit stops accepting, leaving new connections in the kernel's
    backlog, as Kafka's acceptor does.
    """

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.loop = asyncio.get_running_loop()
        #: (listener, listening socket) of every bound address
        self.sockets: list[tuple[str, socket.socket]] = []
        self._acceptors: list[asyncio.Task] = []
        self.connections: set[Connection] = set()
        self.handshakes: set[asyncio.Task] = set()  # TLS handshakes under way (_TlsHandshake)
        self.stopping = False
        self.bound: dict[str, tuple[str, int]] = {}
        config = broker.config
        self._mappers: dict[str, PrincipalMapper] = {}
        #: The SASL settings of each SASL listener (checked when the configuration was read)
        self.sasl = {e.listener_name: config.sasl_settings(e.listener_name) for e in config.listeners
                     if config.security_protocol(e.listener_name) in SASL_PROTOCOLS}
        self.quotas = ConnectionQuotas([e.listener_name for e in config.listeners], config.inter_broker_listener,
                                       broker.metrics, config["quota.window.num"], config["quota.window.size.seconds"],
                                       close_least_active=self._close_least_active,
                                       ip_rate=broker.quotas.ips.record)
        #: Sockets refused by an address's connection_creation_rate, held until their close (closed at stop)
        self._held: set[socket.socket] = set()

    def principal_mapper(self, listener: str) -> PrincipalMapper:
        """The listener's ``ssl.principal.mapping.rules`` (checked when the configuration was read)."""
        mapper = self._mappers.get(listener)
        if mapper is None:
            rules = self.broker.config.ssl_settings(listener)["ssl.principal.mapping.rules"]
            mapper = self._mappers[listener] = PrincipalMapper.parse(rules)
        return mapper

    def sasl_session(self, listener: str) -> SaslServerSession | None:
        settings = self.sasl.get(listener)
        return None if settings is None else SaslServerSession(settings, self.broker.scram_credential, self.broker.token_auth)

    async def start(self) -> dict[str, tuple[str, int]]:
        """Bind every listener, not yet accepting (see :meth:`serve`); returns name -> (host, bound port)."""
        for endpoint in self.broker.config.listeners:
            sockets = _bind(endpoint.host or None, endpoint.port)
            self.sockets.extend((endpoint.listener_name, sock) for sock in sockets)
            sockname = sockets[0].getsockname()
            self.bound[endpoint.listener_name] = (endpoint.host or sockname[0], sockname[1])
        return self.bound

    async def serve(self) -> None:
        """Start accepting connections on every bound listener."""
        for listener, settings in self.sasl.items():
            if settings.oauth is not None:
                if settings.oauth.kind == "unsecured":
                    log.warning("listener %s accepts unsecured OAUTHBEARER tokens (Kafka 2.7's default): anyone can "
                                "name any principal. For signed tokens set listener.name.%s.oauthbearer.sasl.server."
                                "callback.handler.class=%s and sasl.oauthbearer.jwks.endpoint.url", listener,
                                listener.lower(), oauth.JWKS_VALIDATOR_CLASSES[1])
                settings.oauth.start()  # the JWKS validator reads its keys on a thread of its own
        for listener, sock in self.sockets:
            self._acceptors.append(self.loop.create_task(self._accept(listener, sock), name=f"acceptor {listener}"))

    def configure_limits(self, values: dict, listener_values: dict[str, dict], overrides: dict[str, int]) -> None:
        """New connection limits (at start, and when a dynamic broker config changes them)."""
        self.quotas.configure(values, listener_values, overrides)

    async def _accept(self, listener: str, sock: socket.socket) -> None:
        """One listening socket's acceptor: accept, let the connection limits admit, hand to a protocol (TLS
        with the listener's context as it is now: a key store replaced on the running broker serves the
        connections accepted after it, :mod:`broker.tls`)."""
        loop = self.loop
        contexts = self.broker.tls.listeners
        while not self.stopping:
            try:
                client, address = await loop.sock_accept(sock)
            except asyncio.CancelledError:
                raise
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if self.stopping:
                    return
                if exc.errno in _ACCEPT_RESOURCE_ERRNOS:  # out of file descriptors or memory: not ours to fix now
                    log.error("listener %s cannot accept connections: %s; accepting again in 1 s", listener, exc)
                    await asyncio.sleep(1.0)
                    continue
                log.error("listener %s: accept failed: %r", listener, exc)
                await asyncio.sleep(0.1)
                continue
            slot = None
            try:
                try:
                    slot = await self.quotas.admit(listener, address[0] if isinstance(address, tuple) else "?")
                except ConnectionThrottled as throttled:  # held unread, then closed: no instant reconnect
                    self._held.add(client)
                    loop.call_later(throttled.delay_s, self._release_held, client)
                    continue
                if slot is None or self.stopping:
                    if slot is not None:
                        slot.release()
                    client.close()
                    continue
                context = contexts.get(listener)
                protocol = (Connection(self, listener, slot=slot) if context is None
                            else _TlsHandshake(self, listener, context, slot))
                await loop.connect_accepted_socket(lambda: protocol, client)
            except asyncio.CancelledError:
                if slot is not None:
                    slot.release()
                client.close()
                raise
            except Exception as exc:  # noqa: BLE001 - one connection's failure must not end the acceptor
                if slot is not None:  # (once its transport is made, the connection gives it back: idempotent)
                    slot.release()
                client.close()
                if isinstance(exc, OSError):  # the client went away before its transport was made
                    log.debug("connection from %s on listener %s lost at accept: %r", address, listener, exc)
                else:
                    log.exception("listener %s: taking the connection from %s failed", listener, address)

    def _release_held(self, client: socket.socket) -> None:
        self._held.discard(client)
        client.close()

    def _close_least_active(self, listeners: set[str], count: int) -> int:
        """Close the ``count`` least recently active open connections on ``listeners``; how many were closed."""
        candidates = [conn for conn in self.connections if conn.listener in listeners and not conn._closing]
        victims = heapq.nsmallest(count, candidates, key=lambda c: c.last_active)
        if len(victims) > 5:  # a lowered limit: one line, not one per connection
            log.info("closing %d connections, the least recently active: the broker is over max.connections %d",
                     len(victims), self.quotas.max_connections)
        for conn in victims:
            if len(victims) <= 5:
                log.info("closing connection from %s on listener %s, the least recently active: the broker is over "
                         "max.connections %d", conn.peer, conn.listener, self.quotas.max_connections)
            self.broker.metrics.connections_refused.labels(conn.listener, "max.connections").inc()
            if conn.slot is not None:
                conn.slot.release()
            conn.abort()
        return len(victims)

    async def stop(self, timeout: float) -> None:
        """Stop accepting, let in-flight requests finish (up to ``timeout``), close everything."""
        self.stopping = True
        for acceptor in self._acceptors:
            acceptor.cancel()
        for _listener, sock in self.sockets:
            sock.close()
        for client in list(self._held):
            self._release_held(client)
        for settings in self.sasl.values():
            if settings.oauth is not None:
                settings.oauth.stop()
        for handshake in list(self.handshakes):  # not a client yet: nothing in flight to answer
            handshake.cancel()
        connections = list(self.connections)
        for conn in connections:
            conn.stop_reading()
        if connections:
            done, pending = await asyncio.wait([c.closed for c in connections], timeout=timeout)
            aborted = [conn for conn in connections if not conn.closed.done()]
            for conn in aborted:
                log.warning("shutdown: connection from %s still busy after %.1f s (%s); closing it",
                            conn.peer, timeout, conn.busy())
                conn.abort()
            if aborted:  # their connection_lost runs in a later loop pass
                await asyncio.wait([c.closed for c in aborted], timeout=1)
        if self._acceptors:
            await asyncio.wait(self._acceptors, timeout=1)


def _bind(host: str | None, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Listening, non-blocking sockets for ``host`` (None: every interface, IPv4 and IPv6) and ``port``, as
    asyncio's ``create_server`` binds them; port 0 binds one ephemeral port, the same for every address."""
    infos = socket.getaddrinfo(host, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    seen, sockets = set(), []
    try:
        for family, kind, proto, _name, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:  # every address on the one port the first was given
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address {address!r}: "
                                         f"{(exc.strerror or str(exc)).lower()}") from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
