"""Active-active: dc1 -> dc2 and dc2 -> dc1 over the same topics, with either
rename setting; no record is ever sent back to where it came from."""

from __future__ import annotations

import time
import uuid

import pytest

from broker.client import Admin

from .conftest import create_topic, mirror_config, mirrored_count, produce_records, read_all, wait_for



@pytest.mark.parametrize("rename", ["{topic}", "{source}.{topic}"])
def test_no_loops(broker_factory, mirror_factory, rename):
    dc1, dc2 = broker_factory(), broker_factory()
    tag = uuid.uuid4().hex[:8]
    topic = f"aa-{tag}"
    create_topic(dc1.bootstrap, topic, 2)
    create_topic(dc2.bootstrap, topic, 2)
    from1 = produce_records(dc1.bootstrap, topic, 120, partitions=2, prefix="dc1-")
    from2 = produce_records(dc2.bootstrap, topic, 80, partitions=2, prefix="dc2-")
    flows = [{"source": "dc1", "target": "dc2", "topics": f".*{tag}", "topic.rename": rename},
             {"source": "dc2", "target": "dc1", "topics": f".*{tag}", "topic.rename": rename}]
    cfg = mirror_config({"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}, flows)
    mirror_factory(cfg)
    mirror_factory(cfg)  # two processes sharing both flows
    if rename == "{topic}":
        wait_for(lambda: mirrored_count(dc1.bootstrap, topic) == 200 and mirrored_count(dc2.bootstrap, topic) == 200, 60,
                 "both clusters to hold every record")
        more = produce_records(dc1.bootstrap, topic, 20, partitions=2, start=120, prefix="dc1-")
        wait_for(lambda: mirrored_count(dc2.bootstrap, topic) == 220, 60, "new records to cross")
        time.sleep(3)  # several more rounds of both flows: a loop would show up as extra records
        for b in (dc1, dc2):
            got = read_all(b.bootstrap, topic)
            assert sorted(got) == sorted(from1 + more + from2)
    else:
        copy_in_2, copy_in_1 = f"dc1.{topic}", f"dc2.{topic}"
        wait_for(lambda: mirrored_count(dc2.bootstrap, copy_in_2) == 120 and mirrored_count(dc1.bootstrap, copy_in_1) == 80, 60,
                 "each cluster to hold the other's records under the prefixed name")
        time.sleep(3)
        assert sorted(read_all(dc2.bootstrap, copy_in_2)) == sorted(from1)
        assert sorted(read_all(dc1.bootstrap, copy_in_1)) == sorted(from2)
        assert sorted(read_all(dc1.bootstrap, topic)) == sorted(from1)
        for b in (dc1, dc2):
            with Admin(bootstrap_servers=b.bootstrap) as admin:
                looped = [t for t in admin.list_topics() if t.count(".") > 1 and tag in t]
            assert looped == []  # no dc1.dc2.topic
