"""A TCP forwarder on 127.0.0.1 that a test opens, shuts or silences: :class:`TcpGate`.

The gate listens on its own port and forwards each connection to one upstream
port on 127.0.0.1, a thread per direction. It is in one of three modes:

* open (from the start): a new connection is forwarded; one the upstream
  refuses is closed.
* shut: the port is closed, so new connections are refused; the open ones are
  cut. ``open()`` binds the same port again.
* silent: the open connections are cut; new ones are accepted and then never
  answered nor closed, as ZooKeeper 3.8 treats a connection made between
  binding its port and serving. They stay silent until :meth:`close`, also
  after ``open()``: a client must give up on them itself.

``tap``, when given, is called once for each forwarded connection and returns
``(to_upstream, to_client)``: two functions (either may be None) given, in
order, every chunk the client sends upstream and every chunk sent back to it.
A chunk reaches its function before it is forwarded, so a request is seen
before its response can be. :func:`frames` turns a function of whole Kafka
frames into such a function of chunks. Used by the ZooKeeper tests and by the
recorders in ``tests/vectors`` (``capture_records``, ``protocol/capture``).
Thread-safe: the modes may be changed from any thread.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Callable

HOST = "127.0.0.1"
Feed = Callable[[bytes], None]
UPSTREAM_CONNECT_S = 5  # a guard against a hung connect, not a performance assertion


class TcpGate:
    """A forwarder to ``HOST:upstream_port`` (see the module docstring)."""

    def __init__(self, upstream_port: int, *, tap: Callable[[], tuple[Feed | None, Feed | None]] | None = None) -> None:
        self.upstream = (HOST, upstream_port)
        self.tap = tap
        self.port = 0
        self._lock = threading.Lock()
        self._silent = False
        self._listener: socket.socket | None = None
        self._forwarded: list[socket.socket] = []
        self._held: list[socket.socket] = []  # silent connections
        self.open()

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def held(self) -> int:
        """How many connections the gate has accepted and left silent."""
        with self._lock:
            return len(self._held)

    def __enter__(self) -> "TcpGate":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- modes ---------------------------------------------------------------------------
    def open(self) -> None:
        """Forward new connections (binding the gate's port again if it was shut)."""
        self._listen(silent=False)

    def silence(self) -> None:
        """Cut the forwarded connections; accept new ones and never answer nor close them."""
        self._listen(silent=True)

    def shut(self) -> None:
        """Refuse new connections and cut the forwarded ones."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._cut()
        if listener is not None:
            _shutdown(listener)  # wakes the accepting thread: close() alone does not
            listener.close()

    def close(self) -> None:
        """Shut the gate and close the silent connections too."""
        self.shut()
        with self._lock:
            held, self._held = self._held, []
        for sock in held:
            sock.close()

    # -- forwarding ----------------------------------------------------------------------
    def _listen(self, silent: bool) -> None:
        with self._lock:
            self._silent = silent
            if silent:
                self._cut()
            if self._listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((HOST, self.port))
            listener.listen(16)
            self.port = listener.getsockname()[1]
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _cut(self) -> None:
        for sock in self._forwarded:
            _shutdown(sock)  # its pipes end and close it

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if not self._hold(listener, client):
                self._forward(listener, client)

    def _hold(self, listener: socket.socket, client: socket.socket) -> bool:
        """Keep ``client`` silent (True) when the gate is silent; close it when the gate was shut."""
        with self._lock:
            if self._listener is not listener:
                client.close()
                return True
            if self._silent:
                self._held.append(client)
                return True
            return False

    def _forward(self, listener: socket.socket, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=UPSTREAM_CONNECT_S)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            if self._listener is not listener or self._silent:  # the mode changed meanwhile
                upstream.close()
                client.close()
                return
            self._forwarded += [client, upstream]
        pipes_left = [2]

        def pipe(src: socket.socket, dst: socket.socket, feed: Callable[[bytes], None] | None) -> None:
            try:
                while data := src.recv(65536):
                    if feed is not None:
                        feed(data)
                    dst.sendall(data)
            except OSError:
                pass
            _shutdown(src)
            _shutdown(dst)
            with self._lock:
                pipes_left[0] -= 1
                if pipes_left[0]:
                    return
                for sock in (client, upstream):
                    if sock in self._forwarded:
                        self._forwarded.remove(sock)
            client.close()
            upstream.close()

        to_upstream, to_client = self.tap() if self.tap is not None else (None, None)
        threading.Thread(target=pipe, args=(client, upstream, to_upstream), daemon=True).start()
        threading.Thread(target=pipe, args=(upstream, client, to_client), daemon=True).start()


def frames(on_frame: Callable[[bytes], None]) -> Feed:
    """A tap function for one direction of a Kafka connection: ``on_frame`` gets each whole frame,
    without its 4-byte size prefix, in order."""
    buf = bytearray()

    def feed(data: bytes) -> None:
        buf.extend(data)
        while len(buf) >= 4:
            end = 4 + struct.unpack_from(">i", buf)[0]
            if len(buf) < end:
                return
            frame = bytes(buf[4:end])
            del buf[:end]
            on_frame(frame)

    return feed


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
