"""A tiny blocking Kafka client over a raw socket, for tests that need exact bytes."""

from __future__ import annotations

import socket
import struct

from broker.protocol import decode_response, encode_request
from broker.records import BatchBuilder


class Wire:
    def __init__(self, address: str, timeout: float = 30, source: str | None = None) -> None:
        """``source``: the local address to connect from (another loopback address, 127.0.0.2, is another client)."""
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, api_key: int, version: int, body: dict, client_id: str | None = "wire") -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation_id, client_id, body))
        return self.correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exact(4))[0]
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self, api_key: int, version: int) -> tuple[int, dict]:
        return decode_response(api_key, version, self.read_frame())

    def call(self, api_key: int, version: int, body: dict) -> dict:
        cid = self.send(api_key, version, body)
        got, response = self.receive(api_key, version)
        assert got == cid
        return response

    def is_closed_by_peer(self) -> bool:
        """True when the broker closed the connection (reads EOF or a reset)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def make_batch(values, keys=None, timestamp: int = 1_700_000_000_000, compression: int = 0,
               timestamps=None) -> bytes:
    """One RecordBatch v2 holding ``values`` (and ``keys``), timestamps counting up from ``timestamp``."""
    builder = BatchBuilder(compression=compression)
    for i, value in enumerate(values):
        key = keys[i] if keys else None
        ts = timestamps[i] if timestamps else timestamp + i
        builder.append(timestamp=ts, key=key, value=value)
    return builder.build()
