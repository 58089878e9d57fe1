"""Hypothesis strategies shared by the record tests."""

import random

from hypothesis import strategies as st

from broker.records.batch import Header

# Values of 2-5 KB made from a drawn seed (random, so incompressible), not drawn byte by byte: lists of
# twenty such records drawn bytewise exceed Hypothesis's input budget and fail its data_too_large check.
large_bytes = st.builds(lambda seed, size: random.Random(seed).randbytes(size), st.integers(0, 2**32 - 1),
                        st.integers(2000, 5000))
maybe_bytes = st.one_of(st.none(), st.just(b""), st.binary(max_size=300), large_bytes)
headers = st.lists(st.builds(Header, st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=50))), max_size=12)
timestamps = st.integers(0, 2**45)
# (timestamp, key, value, headers)
records = st.lists(st.tuples(timestamps, maybe_bytes, maybe_bytes, headers), min_size=1, max_size=20)
