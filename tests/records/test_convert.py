"""Up-conversion for old producers and down-conversion for old consumers."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records import (
    BatchBuilder,
    Compression,
    ControlRecordType,
    EndTransactionMarker,
    Header,
    LegacyMessage,
    UnsupportedCompressionTypeError,
    build_end_txn_marker_batch,
    decode_batch,
    decode_message_set,
    downconvert,
    encode_message_set,
    iter_batches,
    iter_legacy_entries,
    upconvert_to_v2,
)
from .strategies import records as record_lists

LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


def v2(rows, base_offset=0, **kwargs):
    builder = BatchBuilder(base_offset=base_offset, **kwargs)
    for ts, key, value, headers in rows:
        builder.append(ts, key, value, headers)
    return builder.build()


ROWS = [(1000, b"a", b"1", [Header("h", b"x")]), (990, None, b"2", []), (1010, b"c", None, [])]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_downconvert_keeps_offsets_codec_and_v1_timestamps(magic, codec):
    data = v2(ROWS, base_offset=50, compression=codec) + v2(ROWS[:1], base_offset=53)
    out = downconvert(data, magic)
    msgs = decode_message_set(out)
    assert [(m.offset, m.key, m.value) for m in msgs] == [(50, b"a", b"1"), (51, None, b"2"), (52, b"c", None),
                                                          (53, b"a", b"1")]
    assert [m.timestamp for m in msgs] == ([1000, 990, 1010, 1000] if magic == 1 else [-1] * 4)
    assert {m.magic for m in msgs} == {magic}
    top = list({id(w): w for w, _ in iter_legacy_entries(out)}.values())
    assert [w.compression for w in top][0] == codec
    assert len(top) == (2 if codec else 4)


def test_downconvert_drops_control_and_empty_batches_and_trailing_partial():
    marker = build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 3), 9, 0, 5000, base_offset=3)
    from broker.records import RecordBatch, encode_batch

    empty = encode_batch(RecordBatch(base_offset=4, last_offset_delta=2))
    tail = v2(ROWS, base_offset=7)
    data = v2(ROWS, base_offset=0, is_transactional=True, producer_id=9) + marker + empty + tail
    for cut in (len(data), len(data) - 1, len(data) - len(tail) + 20):
        msgs = decode_message_set(downconvert(data[:cut], 1))
        assert [m.offset for m in msgs] == ([0, 1, 2, 7, 8, 9] if cut == len(data) else [0, 1, 2])


def test_downconvert_log_append_time():
    from broker.records import BatchView, set_log_append_time

    buf = bytearray(v2(ROWS, compression=Compression.GZIP))
    set_log_append_time(BatchView(buf), 77777)
    msgs = decode_message_set(downconvert(bytes(buf), 1))
    assert [m.timestamp for m in msgs] == [77777] * 3 and msgs[0].timestamp_type == 1


def test_downconvert_refuses_zstd():
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        downconvert(v2(ROWS, compression=Compression.ZSTD), 1)
    assert info.value.error_code == 76


def test_downconvert_legacy_input():
    v1 = encode_message_set([LegacyMessage(i, 1, 0, 100 + i, b"k", b"v") for i in range(3)], 1, Compression.GZIP)
    assert downconvert(v1, 1) == v1
    v0 = decode_message_set(downconvert(v1, 0))
    assert [(m.magic, m.offset, m.timestamp) for m in v0] == [(0, 0, -1), (0, 1, -1), (0, 2, -1)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_upconvert_keeps_codec_and_timestamps(magic, codec):
    msgs = [LegacyMessage(i, magic, 0, 1000 - i, b"k%d" % i, b"v" * i or None) for i in range(4)]
    data = encode_message_set(msgs, magic, codec)
    (batch,) = list(iter_batches(upconvert_to_v2(data, partition_leader_epoch=3)))
    assert batch.compression == codec and batch.partition_leader_epoch == 3
    assert [(batch.offset_of(r), r.key, r.value, r.headers) for r in batch.records] == [
        (m.offset, m.key, m.value, []) for m in msgs
    ]
    timestamps = [batch.timestamp_of(r) for r in batch.records]
    assert timestamps == ([1000, 999, 998, 997] if magic == 1 else [-1] * 4)
    assert batch.max_timestamp == (1000 if magic == 1 else -1)


def test_upconvert_one_batch_per_wrapper_or_run():
    plain = encode_message_set([LegacyMessage(i, 1, 0, 5, b"k", b"v") for i in range(3)], 1)
    wrapped = encode_message_set([LegacyMessage(i, 1, 0, 6, b"k", b"v") for i in range(3, 5)], 1, Compression.LZ4)
    batches = list(iter_batches(upconvert_to_v2(plain + wrapped + plain + plain[:-4])))
    assert [(b.compression, len(b.records), b.base_offset) for b in batches] == [
        (Compression.NONE, 3, 0), (Compression.LZ4, 2, 3), (Compression.NONE, 5, 0)]  # 3 + 2 whole, 1 cut


@given(record_lists, st.sampled_from(LEGACY_CODECS), st.sampled_from([0, 1]))
@settings(max_examples=40, deadline=None)
def test_down_then_up_keeps_keys_values(rows, codec, magic):
    original = decode_batch(v2(rows, base_offset=10, compression=codec))
    back = list(iter_batches(upconvert_to_v2(downconvert(v2(rows, base_offset=10, compression=codec), magic))))
    got = [(b.offset_of(r), r.key, r.value, b.timestamp_of(r)) for b in back for r in b.records]
    assert got == [
        (original.offset_of(r), r.key, r.value, original.timestamp_of(r) if magic == 1 else -1)
        for r in original.records
    ]
