"""The kafkapy data source in local Spark against a broker process: the schema
of Spark's Kafka source, every read option compared record by record with what
was produced, data loss, group commits, writes read back with confluent-kafka,
and a streaming query restarted from its checkpoint."""

from __future__ import annotations

import json
import time
from datetime import timezone

import pytest
from pyspark.errors import PySparkException

from broker.client import Admin, TopicPartition

from .conftest import create, produce

# Spark's own Kafka source schema (KafkaRecordToRowConverter), with and without headers
SPARK_KAFKA_SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                      "timestamp:timestamp,timestampType:int>")
SPARK_KAFKA_SCHEMA_HEADERS = SPARK_KAFKA_SCHEMA[:-1] + ",headers:array<struct<key:string,value:binary>>>"


def _read(spark, kafka, **options):
    reader = spark.read.format("kafkapy").option("kafka.bootstrap.servers", kafka.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df, headers=True):
    out = []
    for r in df.collect():
        row = {"key": bytes(r["key"]), "value": bytes(r["value"]), "topic": r["topic"], "partition": r["partition"],
               "offset": r["offset"], "timestamp_ms": int(r["timestamp"].replace(tzinfo=timezone.utc).timestamp() * 1000)
               if r["timestamp"].tzinfo is None else int(r["timestamp"].timestamp() * 1000),
               "timestampType": r["timestampType"]}
        if headers:
            row["headers"] = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]]
        out.append(row)
    return sorted(out, key=lambda x: (x["topic"], x["partition"], x["offset"]))


def _expected(produced, headers=True):
    out = [dict(r) for r in produced]
    if not headers:
        for r in out:
            del r["headers"]
    return sorted(out, key=lambda x: (x["topic"], x["partition"], x["offset"]))


def test_schema_is_sparks_kafka_schema(spark, kafka, topic_name):
    t = topic_name()
    create(kafka.bootstrap, (t, 1))
    assert _read(spark, kafka, subscribe=t).schema.simpleString() == SPARK_KAFKA_SCHEMA
    assert _read(spark, kafka, subscribe=t, includeHeaders="true").schema.simpleString() == SPARK_KAFKA_SCHEMA_HEADERS


def test_batch_read_of_several_topics_record_by_record(spark, kafka, topic_name):
    a, b = topic_name(), topic_name()
    create(kafka.bootstrap, (a, 3), (b, 2))
    produced = produce(kafka.bootstrap, a, 3, 300) + produce(kafka.bootstrap, b, 2, 50, tag="b")
    df = _read(spark, kafka, subscribe=f"{a},{b}", includeHeaders="true")
    assert df.rdd.getNumPartitions() == 5  # one Spark partition per Kafka partition
    assert _rows(df) == _expected(produced)
    assert _rows(_read(spark, kafka, subscribePattern=f"{a[:-2]}.*|{b}"), headers=False) == \
        _expected([r for r in produced if r["topic"] in (a, b)], headers=False)


def test_assign_and_offsets_json(spark, kafka, topic_name):
    t = topic_name()
    create(kafka.bootstrap, (t, 3))
    produced = produce(kafka.bootstrap, t, 3, 90)  # 30 per partition
    df = _read(spark, kafka, assign=json.dumps({t: [0, 2]}),
               startingOffsets=json.dumps({t: {"0": 5, "2": -2}}), endingOffsets=json.dumps({t: {"0": 10, "2": -1}}))
    want = [r for r in produced if (r["partition"] == 0 and 5 <= r["offset"] < 10) or r["partition"] == 2]
    assert _rows(df, headers=False) == _expected(want, headers=False)
    latest = _read(spark, kafka, subscribe=t, startingOffsets="latest")
    assert latest.count() == 0


def test_starting_timestamps(spark, kafka, topic_name):
    t = topic_name()
    create(kafka.bootstrap, (t, 2))
    produced = produce(kafka.bootstrap, t, 2, 40, base_ts=1_700_000_000_000, step_ms=1000)
    cut = 1_700_000_000_000 + 25_000
    df = _read(spark, kafka, subscribe=t, startingTimestamp=str(cut))
    assert _rows(df, headers=False) == _expected([r for r in produced if r["timestamp_ms"] >= cut], headers=False)
    by_partition = _read(spark, kafka, subscribe=t,
                         startingOffsetsByTimestamp=json.dumps({t: {"0": cut, "1": 0}}))
    want = [r for r in produced if r["partition"] == 1 or r["timestamp_ms"] >= cut]
    assert _rows(by_partition, headers=False) == _expected(want, headers=False)
    with pytest.raises(PySparkException, match="no record in .* at or after timestamp"):
        _read(spark, kafka, subscribe=t, startingTimestamp=str(cut + 10**9)).collect()


def test_min_partitions_splits_ranges(spark, kafka, topic_name):
    t = topic_name()
    create(kafka.bootstrap, (t, 2))
    produced = produce(kafka.bootstrap, t, 2, 1000)
    df = _read(spark, kafka, subscribe=t, minPartitions="8", includeHeaders="true")
    assert df.rdd.getNumPartitions() >= 8
    assert _rows(df) == _expected(produced)


def test_data_loss_fails_or_is_skipped(spark, kafka, topic_name):
    t = topic_name()
    create(kafka.bootstrap, (t, 1))
    produced = produce(kafka.bootstrap, t, 1, 50)
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.delete_records({TopicPartition(t, 0): 20})
    gone_from_zero = json.dumps({t: {"0": 0}})
    with pytest.raises(PySparkException, match=r"offsets 0 to 19 are gone .*failOnDataLoss=false"):
        _read(spark, kafka, subscribe=t, startingOffsets=gone_from_zero).collect()
    df = _read(spark, kafka, subscribe=t, startingOffsets=gone_from_zero, failOnDataLoss="false")
    assert _rows(df, headers=False) == _expected(produced[20:], headers=False)


def test_reader_commits_offsets_to_group(spark, kafka, topic_name):
    t = topic_name()
    create(kafka.bootstrap, (t, 2))
    produce(kafka.bootstrap, t, 2, 30)
    group = f"{t}-spark"
    assert _read(spark, kafka, subscribe=t, minPartitions="4", **{"kafka.group.id": group}).count() == 30
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        lag = admin.group_lag(group)
    assert {tp: (p.committed, p.lag) for tp, p in lag.items()} == \
        {TopicPartition(t, 0): (15, 0), TopicPartition(t, 1): (15, 0)}


@pytest.mark.parametrize("options, message", [
    ({}, "exactly one of the options subscribe, subscribePattern, assign"),
    ({"subscribe": "x", "assign": "{}"}, "exactly one of the options"),
    ({"subscribe": "no-such-topic-anywhere"}, "topic 'no-such-topic-anywhere' does not exist"),
    ({"assign": "{not json"}, "option assign is not valid JSON"),
    ({"subscribePattern": "(", "includeHeaders": "false"}, "subscribePattern is not a valid regex"),
    ({"subscribe": "x", "includeHeaders": "yes"}, "includeHeaders must be true or false"),
    ({"subscribe": "x", "kafka.no.such.property": "1"}, "unknown configuration 'no.such.property'"),
])
def test_bad_options_fail_with_one_clear_line(spark, kafka, options, message):
    with pytest.raises(PySparkException, match=message):
        _read(spark, kafka, **options).collect()


def test_batch_write_read_back_with_confluent_kafka(spark, kafka, topic_name):
    from confluent_kafka import Consumer as CKConsumer

    t, other = topic_name(), topic_name()
    create(kafka.bootstrap, (t, 2), (other, 1))
    rows = [(f"k{i}", f"v{i}".encode(), i % 2, [(f"h{i}", b"x")]) for i in range(100)]
    df = spark.createDataFrame(rows, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>")
    df.write.format("kafkapy").option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", t).mode("append").save()
    # without the option each row's topic column says where it goes
    spark.createDataFrame([(other, "only")], "topic string, value string").write.format("kafkapy") \
        .option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()

    c = CKConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"{t}-ck", "auto.offset.reset": "earliest"})
    c.subscribe([t, other])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 101 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append((m.topic(), m.partition(), m.key(), m.value(), m.headers()))
    c.close()
    want = {(t, i % 2, f"k{i}".encode(), f"v{i}".encode(), ((f"h{i}", b"x"),)) for i in range(100)}
    want.add((other, 0, None, b"only", None))
    assert {(tp, p, k, v, tuple(h) if h else None) for tp, p, k, v, h in got} == want
    assert len(got) == 101


def test_streaming_read_restarted_from_checkpoint_reads_each_record_once(spark, kafka, topic_name, tmp_path):
    t = topic_name()
    create(kafka.bootstrap, (t, 2))
    first = produce(kafka.bootstrap, t, 2, 60, tag="a")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run_once():
        q = (spark.readStream.format("kafkapy").option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("subscribe", t).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "25")
             .option("groupIdCommit", f"{t}-stream").load()
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert not q.isActive
        assert q.exception() is None
        return q

    q = run_once()
    assert max(p["numInputRows"] for p in q.recentProgress) <= 25  # maxOffsetsPerTrigger held
    second = produce(kafka.bootstrap, t, 2, 40, tag="b")
    run_once()
    got = _rows(spark.read.parquet(str(out)), headers=False)
    assert got == _expected(first + second, headers=False)
    # Spark tells the source a batch is done when it plans the next one: the group holds
    # a finished batch's end, past everything the first run read, short of the last batch
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        lag = admin.group_lag(f"{t}-stream")
    assert set(lag) == {TopicPartition(t, 0), TopicPartition(t, 1)}
    assert all(30 <= p.committed < 50 for p in lag.values()), lag


def test_streaming_write(spark, kafka, topic_name, tmp_path):
    src, dst = topic_name(), topic_name()
    create(kafka.bootstrap, (src, 1), (dst, 1))
    produced = produce(kafka.bootstrap, src, 1, 30)
    q = (spark.readStream.format("kafkapy").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("subscribe", src).option("startingOffsets", "earliest").load()
         .selectExpr("key", "value").writeStream.format("kafkapy")
         .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    copied = _rows(_read(spark, kafka, subscribe=dst), headers=False)
    assert [(r["key"], r["value"]) for r in copied] == [(r["key"], r["value"]) for r in produced]
