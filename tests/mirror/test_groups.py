"""Consumer group offset translation: exact, into a target whose topic already
held other records, from a source whose log was truncated."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from broker.client import Admin, Consumer, TopicPartition

from .conftest import REPO, create_topic, mirror_config, mirrored_count, produce_records, wait_for


def _status(config_path) -> dict:
    res = subprocess.run([sys.executable, "-m", "kafkactl", "-o", "json", "mirror", "status", "--config",
                          str(config_path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_group_moves_to_target_without_gap_or_duplicate(broker_factory, mirror_factory):
    src, dst = broker_factory(), broker_factory()
    topic = f"grp-{uuid.uuid4().hex[:8]}"
    group = f"billing-{uuid.uuid4().hex[:6]}"
    create_topic(src.bootstrap, topic, 2)
    create_topic(dst.bootstrap, topic, 2)
    produce_records(dst.bootstrap, topic, 60, partitions=2, prefix="old-")  # the target held data already
    sent = produce_records(src.bootstrap, topic, 400, partitions=2)
    with Admin(bootstrap_servers=src.bootstrap) as admin:  # a truncated source: offsets differ even more
        admin.delete_records({TopicPartition(topic, 0): 15})
    # the group reads part of the source and commits there
    seen = []
    with Consumer(bootstrap_servers=src.bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=6000) as c:
        c.subscribe([topic])
        while len(seen) < 230:
            seen.extend(c.poll(1000, max_records=230 - len(seen)))
        c.commit()
        committed = {tp.partition: om.offset for tp, om in c.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)]).items() if om is not None}
    mirror = mirror_factory(mirror_config({"src": src.bootstrap, "dst": dst.bootstrap}, [
        {"source": "src", "target": "dst", "topics": topic, "groups": "billing-.*"}]))

    def translated():
        with Admin(bootstrap_servers=dst.bootstrap) as admin:
            got = admin.list_group_offsets(group)
        return len(got) == len(committed) and {tp.partition: om.offset for tp, om in got.items()}

    offsets = wait_for(translated, 60, "the group's offsets to be translated")
    # target copies start after the 30 old records of each partition; partition 0's source starts at 15
    assert offsets == {0: 30 + committed[0] - 15, 1: 30 + committed[1]}
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 60 + 400 - 15, 60, "the copy to finish")
    status = _status(mirror.config_path)
    assert {(r["partition"], r["target_offset"]) for r in status["groups"] if r["group"] == group} == \
        set(offsets.items())
    wait_for(lambda: all(r["lag"] == 0 for r in _status(mirror.config_path)["partitions"]), 30, "zero lag")
    assert {r["partition"]: r["mirrored_offset"] for r in _status(mirror.config_path)["partitions"]} == \
        {0: 200, 1: 200}
    # the group switches to the target and reads on: exactly the records it had not seen
    rest = []
    with Consumer(bootstrap_servers=dst.bootstrap, group_id=group, auto_offset_reset="earliest",
                  session_timeout_ms=6000) as c:
        c.subscribe([topic])
        wait_for(lambda: rest.extend(c.poll(500)) or len(rest) >= 400 - 15 - len(seen), 60, "the rest")
        rest.extend(c.poll(1000))
    seen_keys = {(r.partition, r.key) for r in seen}
    rest_keys = [(r.partition, r.key) for r in rest]
    all_keys = {(part, key) for part, key, *_ in sent if not (part == 0 and int(key[1:]) // 2 < 15)}
    assert len(rest_keys) == len(set(rest_keys))
    assert not seen_keys & set(rest_keys)
    assert seen_keys | set(rest_keys) == all_keys


def test_group_active_in_the_target_is_left_alone(broker_factory, mirror_factory):
    src, dst = broker_factory(), broker_factory()
    topic = f"act-{uuid.uuid4().hex[:8]}"
    group = f"live-{uuid.uuid4().hex[:6]}"
    create_topic(src.bootstrap, topic, 1)
    produce_records(src.bootstrap, topic, 100)
    with Consumer(bootstrap_servers=src.bootstrap, group_id=group, enable_auto_commit=False,
                  session_timeout_ms=6000) as c:
        c.commit({TopicPartition(topic, 0): 80})
    # a member of the same group is consuming in the target: its own commits win
    with Consumer(bootstrap_servers=dst.bootstrap, group_id=group, auto_offset_reset="earliest",
                  session_timeout_ms=6000, metadata_max_age_ms=500) as member:
        member.subscribe([topic])
        mirror = mirror_factory(mirror_config({"src": src.bootstrap, "dst": dst.bootstrap}, [
            {"source": "src", "target": "dst", "topics": topic, "groups": "live-.*"}]))
        wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 100, 60, "the copy")
        got = []
        wait_for(lambda: got.extend(member.poll(200)) or len(got) >= 30, 60, "the member to read")
        member.commit({TopicPartition(topic, 0): 30})
        time.sleep(4)  # several sync rounds (sync.interval.ms is 1 s in these tests)
        with Admin(bootstrap_servers=dst.bootstrap) as admin:
            assert admin.list_group_offsets(group)[TopicPartition(topic, 0)].offset == 30
    assert "group_sync trouble" not in mirror.log_text()  # it did not even try (the broker would refuse)
    assert f"group {group} offsets translated" not in mirror.log_text()
