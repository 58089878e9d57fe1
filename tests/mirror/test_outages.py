"""A source or a target stopped for a while and started again; bad configs;
SIGTERM; the metrics endpoint."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
import yaml

from .conftest import REPO, create_topic, mirror_config, mirrored_count, produce_records, read_all, wait_for



@pytest.mark.parametrize("stopped", ["source", "target"])
def test_cluster_stopped_and_restarted(broker_factory, mirror_factory, stopped):
    src, dst = broker_factory(), broker_factory()
    topic = f"out-{uuid.uuid4().hex[:8]}"
    create_topic(src.bootstrap, topic, 2)
    produce_records(src.bootstrap, topic, 200, partitions=2)
    mirror = mirror_factory(mirror_config({"a": src.bootstrap, "b": dst.bootstrap},
                                          [{"source": "a", "target": "b", "topics": topic}]))
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 200, 60, "the first copy")
    victim = src if stopped == "source" else dst
    assert victim.stop() == 0
    if stopped == "target":
        produce_records(src.bootstrap, topic, 150, partitions=2, start=200)  # piles up meanwhile
    time.sleep(6)
    victim.start()
    produce_records(src.bootstrap, topic, 100, partitions=2, start=350)
    total = mirrored_count(src.bootstrap, topic)
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) >= total, 90, "the mirror to catch up")
    time.sleep(1)
    assert read_all(dst.bootstrap, topic) == read_all(src.bootstrap, topic)
    troubles = [line for line in mirror.log_text().splitlines() if "trouble" in line]
    assert 0 < len(troubles) <= 12, "\n".join(troubles)  # once per state change, not once per retry
    assert mirror.stop() == 0


@pytest.mark.parametrize("doc, message", [
    ({"clusters": {"a": {"bootstrap.servers": "x:1"}}, "flows": [{"source": "a", "target": "zz"}]},
     "flows[0].target: unknown cluster 'zz'"),
    ({"clusters": {"a": {"bootstrap.servers": "x:1"}, "b": {"bootstrap.servers": "y:1"}},
      "flows": [{"source": "a", "target": "b", "topics": "orders(["}]}, "flows[0].topics: bad regex"),
    ({"clusters": {"a": {"bootstrap.servers": "x:1"}}, "flows": [], "colour": 1}, "unknown key(s): colour"),
    ({"clusters": {"a": {"bootstrap.servers": "x:1", "linger.msec": 1}}, "flows": []},
     "clusters.a: unknown client property 'linger.msec'"),
    ({"clusters": {"a": {"bootstrap.servers": "x:1", "compression.type": "rar"}}, "flows": []},
     "unknown compression_type"),
])
def test_bad_config_is_one_line_and_exit_2(tmp_path, doc, message):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    res = subprocess.run([sys.executable, "-m", "mirror", "--config", str(path)], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and message in res.stderr, res.stderr


def test_metrics_and_sigterm(broker_factory, mirror_factory):
    src, dst = broker_factory(), broker_factory()
    topic = f"met-{uuid.uuid4().hex[:8]}"
    create_topic(src.bootstrap, topic, 1)
    produce_records(src.bootstrap, topic, 50)
    mirror = mirror_factory(mirror_config({"a": src.bootstrap, "b": dst.bootstrap},
                                          [{"source": "a", "target": "b", "topics": topic}]))
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 50, 60, "the copy")

    def scrape():
        with urllib.request.urlopen(f"http://127.0.0.1:{mirror.metrics_port}/metrics", timeout=10) as r:
            return r.read().decode()

    flow = 'flow="a->b"'
    text = wait_for(lambda: (t := scrape()) and f"kafkapy_mirror_lag{{{flow},partition=\"0\",topic=\"{topic}\"}} 0.0"
                    in t and t, 30, "the lag gauge")
    assert f'kafkapy_mirror_records_total{{{flow},topic="{topic}"}} 50.0' in text
    assert f"kafkapy_mirror_replication_latency_seconds_count{{{flow}}} 50.0" in text
    assert f"kafkapy_mirror_topics{{{flow}}} 1.0" in text
    assert f"kafkapy_mirror_partitions{{{flow}}} 1.0" in text
    assert "process_resident_memory_bytes" in text
    assert mirror.stop() == 0


def test_status_with_a_bad_config_exits_2(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("clusters: {a: {bootstrap.servers: 'x:1'}}\nflows: [{source: a, target: b}]\n")
    res = subprocess.run([sys.executable, "-m", "kafkactl", "mirror", "status", "--config", str(path)],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip() == "kafkactl: flows[0].target: unknown cluster 'b'", res.stderr
