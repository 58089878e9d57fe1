"""Produce payloads captured from real clients (see tests/vectors/records/README.md)."""

import json
from pathlib import Path

import pytest

from broker.records import (
    BatchView,
    Compression,
    LegacyMessage,
    decode_batch,
    decode_message_set,
    decompress,
    downconvert,
    encode_batch,
    encode_message_set,
    iter_legacy_entries,
    iter_records,
    upconvert_to_v2,
)

VECTOR_DIR = Path(__file__).parent.parent / "vectors" / "records"
MANIFEST = json.loads((VECTOR_DIR / "vectors.json").read_text())
VECTORS = {v["file"]: v for v in MANIFEST["vectors"]}
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# The encoder is deterministic; these are the captures it must reproduce exactly.
BYTE_IDENTICAL_V2 = {"librdkafka_v2_none.bin", "librdkafka_v2_gzip.bin", "librdkafka_v2_lz4.bin"}


def unhex(s):
    return None if s is None else bytes.fromhex(s)


def load(name):
    return (VECTOR_DIR / name).read_bytes()


def test_every_format_and_codec_is_covered():
    covered = {(v["magic"], v["codec"]) for v in VECTORS.values()}
    assert {(2, c) for c in CODECS} <= covered
    assert {(m, c) for m in (0, 1) for c in ("none", "gzip", "snappy")} | {(1, "lz4")} <= covered


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_vector_decodes_to_the_produced_records(name):
    vector = VECTORS[name]
    entries = list(iter_records(load(name)))
    got = [(e.key, e.value, [(h.key, h.value) for h in e.headers], e.timestamp) for e in entries]
    want = [(unhex(r["key"]), unhex(r["value"]), [(k, unhex(v)) for k, v in r["headers"]], r["timestamp"])
            for r in vector["records"]]
    assert got == want
    offsets = [e.offset for e in entries]
    assert offsets == list(range(offsets[0], offsets[0] + len(entries)))


@pytest.mark.parametrize("name", sorted(n for n, v in VECTORS.items() if v["magic"] == 2))
def test_v2_vector_header_and_reencoding(name):
    data = load(name)
    view = BatchView(data)
    view.validate()
    assert view.size == len(data) and view.compression == CODECS[VECTORS[name]["codec"]]
    batch = decode_batch(data)
    assert batch.base_offset == 0 and batch.last_offset_delta == len(batch.records) - 1
    assert batch.producer_id == -1 and batch.base_sequence == -1
    assert batch.base_timestamp == MANIFEST["base_timestamp"]
    reencoded = encode_batch(batch)
    if name in BYTE_IDENTICAL_V2:
        assert reencoded == data
    else:
        # same header and records; only the compressor's choices differ
        assert reencoded[:8] + reencoded[12:17] + reencoded[21:61] == data[:8] + data[12:17] + data[21:61]
        assert decode_batch(reencoded).records == batch.records
        assert decompress(batch.compression, reencoded[61:]) == decompress(batch.compression, data[61:])


@pytest.mark.parametrize("name", sorted(n for n, v in VECTORS.items() if v["magic"] < 2))
def test_legacy_vector_reencoding(name):
    data = load(name)
    vector = VECTORS[name]
    entries = list(iter_legacy_entries(data))
    magic, codec = vector["magic"], CODECS[vector["codec"]]
    assert {m.magic for _, m in entries} == {magic}
    msgs = [m for _, m in entries]
    if codec == Compression.NONE:
        assert encode_message_set(msgs, magic) == data
        return
    (wrapper,) = {id(w): w for w, _ in entries}.values()
    # the producer numbers inner messages 0..n-1 in both formats
    inner = [LegacyMessage(i, magic, 0, m.timestamp, m.key, m.value) for i, m in enumerate(msgs)]
    ours = decode_message_set(encode_message_set(inner, magic, codec))
    assert [(m.key, m.value, m.timestamp) for m in ours] == [(m.key, m.value, m.timestamp) for m in msgs]
    assert decompress(codec, wrapper.value) == encode_message_set(inner, magic)


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_vector_conversions(name):
    data = load(name)
    vector = VECTORS[name]
    want = [(unhex(r["key"]), unhex(r["value"])) for r in vector["records"]]
    if vector["magic"] < 2:
        batches = upconvert_to_v2(data)
        assert [(e.key, e.value) for e in iter_records(batches)] == want
        assert [e.timestamp for e in iter_records(batches)] == [r["timestamp"] for r in vector["records"]]
    elif vector["codec"] != "zstd":
        for magic in (0, 1):
            assert [(m.key, m.value) for m in decode_message_set(downconvert(data, magic))] == want
