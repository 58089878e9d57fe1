"""``encode_batch_tuples`` makes exactly the bytes ``encode_batch`` makes of the same records."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records.batch import Header, Record, RecordBatch, decode_batch, encode_batch, encode_batch_tuples
from broker.records.compression import Compression

_opt_bytes = st.one_of(st.none(), st.binary(max_size=300))
_record = st.tuples(st.integers(-(1 << 40), 1 << 41), _opt_bytes, _opt_bytes,
                    st.lists(st.tuples(st.text(max_size=12), _opt_bytes), max_size=3))


@settings(max_examples=200, deadline=None)
@given(st.lists(_record, min_size=1, max_size=150),
       st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY]))
def test_same_bytes_as_encode_batch(records, compression):
    base = records[0][0]
    expected = encode_batch(RecordBatch(compression=compression, base_timestamp=base, records=[
        Record(i, ts - base, k, v, [Header(hk, hv) for hk, hv in h]) for i, (ts, k, v, h) in enumerate(records)]))
    got = encode_batch_tuples(records, compression)
    if compression != Compression.GZIP:  # gzip output carries a time stamp
        assert got == expected
    batch = decode_batch(got)
    assert [(batch.timestamp_of(r), r.key, r.value, [(h.key, h.value) for h in r.headers])
            for r in batch.records] == [(ts, k, v, h) for ts, k, v, h in records]
