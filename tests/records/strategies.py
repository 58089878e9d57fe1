"""Hypothesis strategies shared by the record tests."""

from hypothesis import strategies as st

from broker.records.batch import Header

maybe_bytes = st.one_of(st.none(), st.just(b""), st.binary(max_size=300), st.binary(min_size=2000, max_size=5000))
headers = st.lists(st.builds(Header, st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=50))), max_size=12)
timestamps = st.integers(0, 2**45)
# (timestamp, key, value, headers)
records = st.lists(st.tuples(timestamps, maybe_bytes, maybe_bytes, headers), min_size=1, max_size=20)
