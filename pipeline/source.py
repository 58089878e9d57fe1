"""The ``kafkapy`` data source: Spark's Kafka source and sink on our client.

Rows have the schema of Spark's Kafka source::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int[, headers array<struct<key: string, value: binary>>]

``headers`` is there with ``includeHeaders=true``. Options are described in
:mod:`pipeline.options`. Batch reads plan offset ranges on the driver (one per
Kafka partition, split by ``minPartitions``) and each Spark task reads its range
with its own Fetch requests, decoding whole fetched answers into Arrow record
batches (:mod:`pipeline.reading`, :mod:`pipeline.columns`). Streaming reads keep
``{"topic": {"partition": offset}}`` in Spark's checkpoint and commit the
offsets Spark has finished to the group (``groupIdCommit`` or
``kafka.group.id``) so the group's lag shows the job's progress (Spark reports
a micro-batch finished when it plans the next one, so the group trails by the
last batch); a batch read
with a group commits each partition's end offset when the task reading its last
range is done. Writes take ``key``, ``value`` (binary or string), optional
``topic``, ``partition`` and ``headers`` columns, with a ``topic`` option as the
default topic.
"""

from __future__ import annotations

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter,
                                    DataSourceWriter, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from . import options as opt
from .reading import RangePartition, commit, read_range

_HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool) -> StructType:
    """The schema of Spark's Kafka source."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", _HEADERS))
    return StructType(fields)


def _partitions(ranges: list[opt.OffsetRange]) -> list[RangePartition]:
    last_end: dict[tuple[str, int], int] = {}
    for r in ranges:
        last_end[(r.topic, r.partition)] = max(last_end.get((r.topic, r.partition), 0), r.end)
    return [RangePartition(r, r.end == last_end[(r.topic, r.partition)]) for r in ranges]


class KafkaDataSource(DataSource):
    """``spark.read.format("kafkapy")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "kafkapy"

    def schema(self) -> StructType:
        return kafka_schema(opt.flag(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> "KafkaReader":
        return KafkaReader(dict(self.options))

    def streamReader(self, schema: StructType) -> "KafkaStreamReader":
        return KafkaStreamReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> "KafkaWriter":
        return KafkaWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> "KafkaStreamWriter":
        return KafkaStreamWriter(dict(self.options), schema)


def _admin(options):
    from broker.client import Admin
    return Admin(opt.client_config(options))


class KafkaReader(DataSourceReader):
    def __init__(self, options: dict) -> None:
        self.options = options
        self.include_headers = opt.flag(options, "includeHeaders", False)
        self.group = opt.group_id(options)

    def partitions(self) -> list[RangePartition]:
        o = self.options
        with _admin(o) as admin:
            tps = opt.topic_partitions(o, admin)
            start = opt.starting_offsets(o, admin, tps)
            start = opt.check_data_loss(start, admin, opt.flag(o, "failOnDataLoss", True))
            end = opt.ending_offsets(o, admin, tps)
        return _partitions(opt.plan(start, end, opt.int_option(o, "minPartitions")))

    def read(self, partition: RangePartition):
        return read_range(self.options, partition, self.include_headers, self.group)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"topic": {"partition": next offset}}``; new partitions start at earliest.

    ``maxOffsetsPerTrigger`` is the default read limit, shared among partitions in
    proportion to their backlog; ``trigger(availableNow=True)`` reads, in such
    batches, up to the end offsets of when the query started.
    """

    def __init__(self, options: dict) -> None:
        self.options = options
        self.include_headers = opt.flag(options, "includeHeaders", False)
        self.group = opt.group_id(options)
        self.max_per_trigger = opt.int_option(options, "maxOffsetsPerTrigger")
        self.target: dict | None = None  # availableNow's end offsets

    def _latest(self) -> dict[str, dict[str, int]]:
        with _admin(self.options) as admin:
            tps = opt.topic_partitions(self.options, admin)
            ends = opt.ending_offsets({**self.options, "endingOffsets": "latest"}, admin, tps)
        return _encode(ends)

    def initialOffset(self) -> dict:
        with _admin(self.options) as admin:
            tps = opt.topic_partitions(self.options, admin)
            return _encode(opt.starting_offsets(self.options, admin, tps, default="latest"))

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def latestOffset(self, start: dict, limit) -> dict:
        latest = self.target if self.target is not None else self._latest()
        if isinstance(limit, ReadMaxRows):
            return _capped(start, latest, limit.max_rows)
        return latest

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        s, e = _decode(start), _decode(end)
        with _admin(self.options) as admin:
            new = [tp for tp in e if tp not in s]
            if new:  # partitions added since the last batch are read from their beginning
                s.update(opt.resolve(dict.fromkeys(new, opt.EARLIEST), admin))
            s = opt.check_data_loss(s, admin, opt.flag(self.options, "failOnDataLoss", True))
        return _partitions(opt.plan(s, e, opt.int_option(self.options, "minPartitions")))

    def read(self, partition: RangePartition):
        return read_range(self.options, partition, self.include_headers, None)

    def commit(self, end: dict) -> None:
        if self.group:
            commit(opt.client_config(self.options), self.group, _decode(end))


def _encode(offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, off in offsets.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(off)
    return out


def _decode(offsets: dict):
    from broker.client import TopicPartition
    return {TopicPartition(t, int(p)): int(off) for t, ps in offsets.items() for p, off in ps.items()}


def _capped(start: dict, latest: dict, limit: int) -> dict:
    """``latest`` moved back so at most ``limit`` offsets are read, shared in proportion to the backlog."""
    s, e = _decode(start), _decode(latest)
    backlog = {tp: max(0, off - s.get(tp, off)) for tp, off in e.items()}
    total = sum(backlog.values())
    if total <= limit:
        return latest
    out = {tp: s.get(tp, off) + (backlog[tp] * limit) // total for tp, off in e.items()}
    return _encode(out)


class _WriteDone(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


def write_rows(options: dict, schema: StructType, rows) -> _WriteDone:
    """Produce every row (runs in an executor); waits for every acknowledgement."""
    from broker.client import Producer
    names = set(schema.names)
    if "value" not in names:
        raise ValueError("the DataFrame written to kafkapy needs a value column")
    default_topic = {k.lower(): v for k, v in options.items()}.get("topic")
    if default_topic is None and "topic" not in names:
        raise ValueError("no topic: give the topic option or a topic column")
    count = 0
    with Producer(opt.client_config(options)) as producer:
        for row in rows:
            topic = default_topic or row["topic"]
            if topic is None:
                raise ValueError("a row has a null topic and no topic option is given")
            headers = [(h["key"], _bytes(h["value"])) for h in row["headers"] or []] if "headers" in names else None
            producer.send(topic, _bytes(row["value"]), _bytes(row["key"]) if "key" in names else None,
                          partition=row["partition"] if "partition" in names else None, headers=headers)
            count += 1
        producer.flush()
    return _WriteDone(count)


def _bytes(v):
    return v.encode() if isinstance(v, str) else (bytes(v) if v is not None else None)


class KafkaWriter(DataSourceWriter):
    def __init__(self, options: dict, schema: StructType) -> None:
        self.options, self.schema = options, schema

    def write(self, iterator) -> _WriteDone:
        return write_rows(self.options, self.schema, iterator)


class KafkaStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: dict, schema: StructType) -> None:
        self.options, self.schema = options, schema

    def write(self, iterator) -> _WriteDone:
        return write_rows(self.options, self.schema, iterator)

    def commit(self, messages, batchId: int) -> None:
        pass  # every record was acknowledged by write()

    def abort(self, messages, batchId: int) -> None:
        pass  # records already produced stay: Kafka's sink is at least once
