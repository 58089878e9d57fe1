"""The consumer's fast record decoding (``broker.records.fetched.iter_fetched``)
agrees with the reference decoder (``iter_records``) and rejects what it rejects."""

from __future__ import annotations

import random

import pytest

from broker.records.batch import BatchBuilder, TimestampType, iter_records, set_log_append_time
from broker.records.fetched import decode_record_tuples, iter_fetched
from broker.records.view import BatchView, CorruptRecordError


def _random_batch(rng: random.Random, base_offset: int, codec: int) -> bytes:
    bb = BatchBuilder(compression=codec, base_offset=base_offset)
    ts = 1_700_000_000_000
    for i in range(rng.randint(1, 60)):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 5, 70, 300]))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 63, 64, 100, 1000, 20000]))
        headers = [(f"h{j}", None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 200)))
                   for j in range(rng.choice([0, 0, 1, 3]))]
        bb.append(ts + rng.randint(-5, 100_000_000), key, value, headers)
    return bb.build()


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_agrees_with_the_reference_decoder(codec):
    rng = random.Random(codec)
    data, offset = b"", 0
    for _ in range(8):
        batch = _random_batch(rng, offset, codec)
        data += batch
        offset = BatchView(memoryview(batch), 0).last_offset + 1
    data += data[: len(data) // 3][:40]  # a trailing partial entry is skipped
    expected = [(e.offset, e.timestamp, e.key, e.value, [(h.key, h.value) for h in e.headers])
                for e in iter_records(data)]
    got = [r for fb in iter_fetched(data) for r in fb.records]
    assert got == expected
    middle = expected[len(expected) // 2][0]
    assert [r for fb in iter_fetched(data, 0, middle) for r in fb.records] == [e for e in expected if e[0] >= middle]


def test_log_append_time_and_last_offset():
    bb = BatchBuilder(base_offset=10)
    for i in range(3):
        bb.append(1000 + i, b"k", b"v%d" % i)
    raw = bytearray(bb.build())
    set_log_append_time(BatchView(memoryview(raw), 0), 5555)
    [fb] = iter_fetched(bytes(raw))
    assert fb.timestamp_type == TimestampType.LOG_APPEND_TIME and fb.last_offset == 12
    assert [(r[0], r[1], r[3]) for r in fb.records] == [(10, 5555, b"v0"), (11, 5555, b"v1"), (12, 5555, b"v2")]
    [skipped] = iter_fetched(bytes(raw), 0, 13)  # whole batch below the fetch offset
    assert skipped.records == [] and skipped.last_offset == 12


def test_rejects_corrupt_batches_and_records():
    bb = BatchBuilder()
    bb.append(1, b"key", b"value")
    good = bytearray(bb.build())
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_fetched(bytes(bad_crc)))
    record = bytes(good[61:])
    with pytest.raises(CorruptRecordError):
        decode_record_tuples(record, 2, 0, 0)  # more records declared than present
    with pytest.raises(CorruptRecordError, match="after the 1 declared records"):
        decode_record_tuples(record + b"\x00", 1, 0, 0)
    with pytest.raises(CorruptRecordError):
        decode_record_tuples(record[:-3], 1, 0, 0)
    lying = bytes([record[0] - 2]) + record[1:]  # length one byte short of the fields
    with pytest.raises(CorruptRecordError):
        decode_record_tuples(lying, 1, 0, 0)
