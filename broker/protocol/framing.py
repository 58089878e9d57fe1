"""Stream framing, sans-I/O: split a byte stream into Kafka frames.

    frame := size int32 (big-endian, >= 0) | size bytes (request or response header + body)

:class:`FrameDecoder` is fed whatever arrived and returns every frame completed so far, without
the size prefix. Bytes after the last complete frame are kept for the next call. A size that is
negative or above ``max_frame_bytes`` raises :class:`FrameTooLargeError`; the stream cannot be
resynchronised after that, so the decoder stays failed and the connection should be closed.

It can also be read into (the protocol of ``asyncio.BufferedProtocol``):
:meth:`FrameDecoder.get_buffer` says where the next socket read should land
and :meth:`FrameDecoder.buffer_updated` takes what it wrote. The rest of a
frame that is being filled is read straight into the frame, so a large
request (a 1 MiB produce batch) is copied once, from the kernel; anything else
is read into a scratch buffer that every decoder of the thread shares (its
bytes are taken out before ``buffer_updated`` returns). A plain
``asyncio.Protocol`` gets each read as a new 256 KiB ``bytes`` object cut
down to what arrived, whose bytes are then copied into the frame (the README,
Performance, says what reading requests into their frames gained).

Not thread-safe: one decoder belongs to one connection.
"""

from __future__ import annotations

import struct
import threading

from .errors import FrameTooLargeError

_I32 = struct.Struct(">i")

SCRATCH_BYTES = 256 * 1024  # one read's most outside a frame (what asyncio reads at a time)
_per_thread = threading.local()


def _scratch() -> memoryview:
    """This thread's scratch buffer for reads (shared by its decoders: each takes its bytes out at once)."""
    try:
        return _per_thread.scratch
    except AttributeError:
        scratch = _per_thread.scratch = memoryview(bytearray(SCRATCH_BYTES))
        return scratch


class FrameDecoder:
    """Incremental frame splitter (see the module docstring).

    Each frame is returned as its own ``bytearray``, allocated once at its
    final size when the size prefix arrives and filled in place as data comes
    in: one copy from the socket buffer, none afterwards. Frames are writable,
    so the broker can patch ``baseOffset``/``partitionLeaderEpoch`` of produced
    batches inside the request buffer itself.
    """

    def __init__(self, max_frame_bytes: int):
        self.max_frame_bytes = max_frame_bytes
        self._prefix = bytearray()
        self._frame: bytearray | None = None  # the frame being filled
        self._filled = 0
        self._failed: FrameTooLargeError | None = None
        self._read_into: memoryview | None = None  # what get_buffer handed out

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet make a whole frame (a consumed size prefix not counted)."""
        return len(self._prefix) + self._filled

    def feed(self, data) -> list[bytearray]:
        """Add ``data``; return the frames it completed, in order (possibly none)."""
        if self._failed is not None:
            raise self._failed
        mv = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else memoryview(data)
        n = len(mv)
        pos = 0
        frames = []
        while pos < n:
            frame = self._frame
            if frame is None:
                prefix = self._prefix
                if not prefix and n - pos >= 4:
                    (size,) = _I32.unpack_from(mv, pos)
                    pos += 4
                else:
                    take = min(4 - len(prefix), n - pos)
                    prefix += mv[pos:pos + take]
                    pos += take
                    if len(prefix) < 4:
                        break
                    (size,) = _I32.unpack_from(prefix, 0)
                    prefix.clear()
                if size < 0 or size > self.max_frame_bytes:
                    self._failed = FrameTooLargeError(f"frame size {size} outside 0..{self.max_frame_bytes}")
                    raise self._failed
                if n - pos >= size:  # the whole frame is here: one copy
                    frames.append(bytearray(mv[pos:pos + size]))
                    pos += size
                    continue
                frame = self._frame = bytearray(size)
                self._filled = 0
            take = min(len(frame) - self._filled, n - pos)
            frame[self._filled:self._filled + take] = mv[pos:pos + take]
            self._filled += take
            pos += take
            if self._filled == len(frame):
                frames.append(frame)
                self._frame = None
                self._filled = 0
        return frames

    def get_buffer(self) -> memoryview:
        """Where the next read should land (never empty): the rest of the frame being filled, else
        this thread's scratch buffer. :meth:`buffer_updated` must follow before any other call."""
        frame = self._frame
        buf = self._read_into = memoryview(frame)[self._filled:] if frame is not None else _scratch()
        return buf

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """The last :meth:`get_buffer` got ``nbytes``: the frames they completed, as :meth:`feed`."""
        buf, self._read_into = self._read_into, None
        if buf is None:
            raise RuntimeError("buffer_updated without get_buffer")
        if self._frame is None:  # (no frame was being filled when get_buffer ran: the scratch buffer)
            return self.feed(buf[:nbytes])
        buf.release()  # the frame's own view: no export left on it once filled
        self._filled += nbytes
        if self._filled < len(self._frame):
            return []
        frame, self._frame, self._filled = self._frame, None, 0
        return [frame]
