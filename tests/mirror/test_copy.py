"""Copying topics between two clusters: topics created with their partition
count and configs, records compared one by one, exclusions honoured."""

from __future__ import annotations

import uuid

from broker.client import Admin, ConfigResource

from .conftest import create_topic, mirror_config, mirrored_count, produce_records, read_all, wait_for



def test_two_clusters_record_by_record(broker_factory, mirror_factory):
    src, dst = broker_factory(), broker_factory()
    tag = uuid.uuid4().hex[:6]
    orders, payments, hidden = f"orders.{tag}", f"payments{tag}", f"internal.{tag}"
    create_topic(src.bootstrap, orders, 3, **{"retention.ms": "86400000", "cleanup.policy": "delete"})
    create_topic(src.bootstrap, payments, 2)
    create_topic(src.bootstrap, hidden, 1)
    sent_orders = produce_records(src.bootstrap, orders, 300, partitions=3)
    sent_payments = produce_records(src.bootstrap, payments, 100, partitions=2)
    produce_records(src.bootstrap, hidden, 10)
    mirror_factory(mirror_config({"dc1": src.bootstrap, "dc2": dst.bootstrap}, [
        {"source": "dc1", "target": "dc2", "topics": f"orders\\..*|payments{tag}",
         "topics.exclude": "internal\\..*"}]))
    wait_for(lambda: mirrored_count(dst.bootstrap, orders) == 300 and mirrored_count(dst.bootstrap, payments) == 100, 60,
             "the mirror to copy both topics")
    later = f"orders.later{tag}"
    create_topic(src.bootstrap, later, 2)
    sent_later = produce_records(src.bootstrap, later, 50, partitions=2)
    more = produce_records(src.bootstrap, orders, 60, partitions=3, start=300)
    wait_for(lambda: mirrored_count(dst.bootstrap, later) == 50 and mirrored_count(dst.bootstrap, orders) == 360, 60,
             "a topic created later to be copied")
    assert read_all(dst.bootstrap, orders) == read_all(src.bootstrap, orders)
    assert sorted(read_all(dst.bootstrap, orders)) == sorted(sent_orders + more)
    assert read_all(dst.bootstrap, payments) == read_all(src.bootstrap, payments)
    assert sorted(read_all(dst.bootstrap, later)) == sorted(sent_later)
    with Admin(bootstrap_servers=dst.bootstrap) as admin:
        assert hidden not in admin.list_topics()
        described = admin.describe_topics([orders, later])
        assert len(described[orders].partitions) == 3 and len(described[later].partitions) == 2
        res = ConfigResource("topic", orders)
        configs = admin.describe_configs([res])[res]
        assert configs["retention.ms"].value == "86400000"


def test_partitions_and_configs_follow_the_source(broker_factory, mirror_factory):
    src, dst = broker_factory(), broker_factory()
    topic = f"grow-{uuid.uuid4().hex[:8]}"
    create_topic(src.bootstrap, topic, 1, **{"retention.ms": "3600000"})
    produce_records(src.bootstrap, topic, 20)
    mirror_factory(mirror_config({"a": src.bootstrap, "b": dst.bootstrap}, [{"source": "a", "target": "b",
                                                                               "topics": topic}]))
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 20, 60, "the first copy")
    with Admin(bootstrap_servers=src.bootstrap) as admin:
        admin.create_partitions({topic: 3})
        admin.incremental_alter_configs({ConfigResource("topic", topic): {"retention.ms": "7200000"}})
    sent = produce_records(src.bootstrap, topic, 30, partitions=3, start=20)
    wait_for(lambda: mirrored_count(dst.bootstrap, topic) == 50, 60, "records of the new partitions")

    def target_config():
        with Admin(bootstrap_servers=dst.bootstrap) as admin:
            res = ConfigResource("topic", topic)
            return admin.describe_configs([res])[res]["retention.ms"].value == "7200000"

    wait_for(target_config, 30, "the config change to be copied")
    assert read_all(dst.bootstrap, topic) == read_all(src.bootstrap, topic)
    assert {r[0] for r in sent} == {0, 1, 2}
