"""Stream framing, sans-I/O: split a byte stream into Kafka frames.

    frame := size int32 (big-endian, >= 0) | size bytes (request or response header + body)

:class:`FrameDecoder` is fed whatever arrived and returns every frame completed so far, without
the size prefix. Bytes after the last complete frame are kept for the next call. A size that is
negative or above ``max_frame_bytes`` raises :class:`FrameTooLargeError`; the stream cannot be
resynchronised after that, so the decoder stays failed and the connection should be closed.

Not thread-safe: one decoder belongs to one connection.
"""

from __future__ import annotations

import struct

from .errors import FrameTooLargeError

_I32 = struct.Struct(">i")


class FrameDecoder:
    """Incremental frame splitter (see the module docstring)."""

    def __init__(self, max_frame_bytes: int):
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need = -1  # size of the frame being read, or -1 while reading a prefix
        self._failed: FrameTooLargeError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet make a whole frame (a consumed size prefix not counted)."""
        return len(self._buf)

    def feed(self, data) -> list[bytes]:
        """Add ``data``; return the frames it completed, in order (possibly none)."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                (size,) = _I32.unpack_from(buf, pos)
                if size < 0 or size > self.max_frame_bytes:
                    self._failed = FrameTooLargeError(
                        f"frame size {size} outside 0..{self.max_frame_bytes}")
                    del buf[:]
                    raise self._failed
                pos += 4
                self._need = size
            if end - pos < self._need:
                break
            frames.append(bytes(buf[pos:pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames
