"""FrameDecoder fed whole input, one byte at a time, and with extra bytes after a frame; and read
into (get_buffer / buffer_updated), as the broker's and the client's connections do, over a real
socket pair."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest

from broker.protocol import FrameDecoder, FrameTooLargeError


def framed(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


PAYLOADS = [b"first frame", b"", os.urandom(1000), b"\x00" * 3]


def test_whole_input():
    assert FrameDecoder(4096).feed(framed(*PAYLOADS)) == PAYLOADS


def test_one_byte_at_a_time():
    decoder = FrameDecoder(4096)
    got = []
    for b in framed(*PAYLOADS):
        got.extend(decoder.feed(bytes((b,))))
    assert got == PAYLOADS
    assert decoder.buffered == 0


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 14, 15, 16])
def test_split_anywhere(cut):
    data = framed(*PAYLOADS)
    decoder = FrameDecoder(4096)
    assert decoder.feed(data[:cut]) + decoder.feed(data[cut:]) == PAYLOADS


def test_extra_bytes_after_frame_are_kept():
    decoder = FrameDecoder(4096)
    data = framed(b"abc") + struct.pack(">i", 5) + b"de"
    assert decoder.feed(data) == [b"abc"]
    assert decoder.buffered == 2
    assert decoder.feed(b"fgh" + framed(b"z")) == [b"defgh", b"z"]
    assert decoder.buffered == 0


def test_truncated_frame_yields_nothing():
    decoder = FrameDecoder(4096)
    assert decoder.feed(framed(b"0123456789")[:-1]) == []
    assert decoder.feed(b"") == []


def test_frame_at_exactly_max_is_accepted():
    assert FrameDecoder(10).feed(framed(b"x" * 10)) == [b"x" * 10]


@pytest.mark.parametrize("prefix", [struct.pack(">i", 11), struct.pack(">i", 2**31 - 1),
                                    struct.pack(">i", -1), b"\xff\xff\xff\xfe", b"GET "])
def test_bad_length_prefix(prefix):
    decoder = FrameDecoder(10)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(prefix + b"rest")
    assert info.value.error_code.name == "INVALID_REQUEST"
    with pytest.raises(FrameTooLargeError):  # the stream cannot resynchronise: stays failed
        decoder.feed(framed(b"ok"))


def test_bad_prefix_after_good_frames_raises_after_them():
    decoder = FrameDecoder(100)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(framed(b"good") + struct.pack(">i", 1000))


def read_into(decoder: FrameDecoder, data: bytes, chunks: list[int]) -> tuple[list[bytes], list[bool]]:
    """Send ``data`` through a socket pair and read it into ``decoder``, at most ``chunks[i]`` bytes a
    read (as asyncio does with a BufferedProtocol: recv_into what get_buffer gave); the frames, and
    for each read whether it landed in a frame being filled."""
    a, b = socket.socketpair()
    frames, direct = [], []

    def send() -> None:
        a.sendall(data)
        a.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send, daemon=True)  # more than the socket buffer holds may be sent
    with a, b:
        sender.start()
        i = 0
        while True:
            buf = decoder.get_buffer()
            assert len(buf) > 0
            direct.append(decoder._frame is not None)
            n = b.recv_into(buf, min(len(buf), chunks[i % len(chunks)]))
            i += 1
            if n == 0:
                sender.join()
                return frames, direct
            frames += decoder.buffer_updated(n)


@pytest.mark.parametrize("chunks", [[1], [3], [4, 1], [5], [7, 1000], [65536]])
def test_read_into_splits_anywhere(chunks):
    got, _direct = read_into(FrameDecoder(4096), framed(*PAYLOADS), chunks)
    assert got == PAYLOADS


def test_the_rest_of_a_frame_is_read_straight_into_it():
    decoder = FrameDecoder(1 << 20)
    big = os.urandom(300_000)  # more than the scratch buffer holds
    got, direct = read_into(decoder, framed(big, b"after"), [100, 1 << 20])
    assert got == [big, b"after"]
    assert direct[1]  # after the first 100 bytes the frame's own buffer was read into
    assert isinstance(got[0], bytearray)  # writable: the broker patches produced batches in place


def test_decoders_of_one_thread_share_the_scratch_buffer_safely():
    one, two = FrameDecoder(4096), FrameDecoder(4096)
    buf = one.get_buffer()
    buf[:7] = struct.pack(">i", 3) + b"abc"
    assert one.buffer_updated(7) == [b"abc"]
    # the other decoder reads into the same scratch next: the first one's bytes were taken out
    buf2 = two.get_buffer()
    assert buf2.obj is buf.obj
    buf2[:6] = struct.pack(">i", 4) + b"xy"
    assert two.buffer_updated(6) == []
    buf = one.get_buffer()
    buf[:5] = struct.pack(">i", 1) + b"z"
    assert one.buffer_updated(5) == [b"z"]
    buf2 = two.get_buffer()  # now the rest of two's frame, its own buffer
    assert buf2.obj is not buf.obj and len(buf2) == 2
    buf2[:2] = b"zw"
    assert two.buffer_updated(2) == [b"xyzw"]


def test_read_into_a_bad_prefix_fails_and_stays_failed():
    decoder = FrameDecoder(10)
    buf = decoder.get_buffer()
    buf[:4] = struct.pack(">i", 11)
    with pytest.raises(FrameTooLargeError):
        decoder.buffer_updated(4)
    decoder.get_buffer()
    with pytest.raises(FrameTooLargeError):
        decoder.buffer_updated(0)


def test_buffer_updated_needs_get_buffer():
    decoder = FrameDecoder(10)
    decoder.get_buffer()
    decoder.buffer_updated(0)
    with pytest.raises(RuntimeError):
        decoder.buffer_updated(1)
