"""FrameDecoder fed whole input, one byte at a time, and with extra bytes after a frame."""

from __future__ import annotations

import os
import struct

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
