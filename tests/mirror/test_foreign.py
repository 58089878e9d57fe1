"""tansu (a Kafka-compatible broker in Rust) as the source and as the target."""

from __future__ import annotations

import uuid

import pytest

from tests.client.conftest import tansu_broker  # noqa: F401  (session fixture)

from .conftest import create_topic, mirror_config, mirrored_count, produce_records, read_all, wait_for



@pytest.mark.parametrize("direction", ["tansu->ours", "ours->tansu"])
def test_tansu_peer(broker_factory, mirror_factory, tansu_broker, direction):  # noqa: F811
    ours = broker_factory()
    src, dst = (tansu_broker.bootstrap, ours.bootstrap) if direction == "tansu->ours" else \
        (ours.bootstrap, tansu_broker.bootstrap)
    topic = f"peer-{uuid.uuid4().hex[:8]}"
    create_topic(src, topic, 2)
    sent = produce_records(src, topic, 150, partitions=2)
    proc = mirror_factory(mirror_config({"s": src, "d": dst}, [{"source": "s", "target": "d", "topics": topic}]))
    wait_for(lambda: mirrored_count(dst, topic) == 150, 60, "the copy")
    more = produce_records(src, topic, 50, partitions=2, start=150)
    proc.kill()
    mirror_factory(mirror_config({"s": src, "d": dst}, [{"source": "s", "target": "d", "topics": topic}]))
    wait_for(lambda: mirrored_count(dst, topic) == 200, 60, "the copy after a SIGKILL")
    assert read_all(dst, topic) == read_all(src, topic)
    assert sorted(read_all(dst, topic)) == sorted(sent + more)
