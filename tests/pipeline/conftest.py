"""Spark and broker fixtures for the pipeline tests.

A Spark session takes seconds to start, so ``spark`` (``local[2]``, UI off,
session time zone UTC, Python workers running this interpreter) and ``kafka``
(one broker process) are shared by the tests of a module; each test uses its
own topics (``topic_name``). ``produce`` writes keyed records with headers and
explicit timestamps and returns what landed where.
"""

from __future__ import annotations

import itertools
import os
import sys

import pytest

from broker.client import Admin, NewTopic, Producer
from tests.conftest import BrokerProcess

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

_names = itertools.count()


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession
    import pipeline

    session = (SparkSession.builder.master("local[2]").appName("kafkapy-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pipeline.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("broker"), {"num.partitions": 1}).start()
    yield proc
    code = proc.stop()
    assert code == 0, f"broker exited with {code}\n{proc.stderr_tail()}"


@pytest.fixture
def topic_name():
    return lambda: f"pipe{next(_names)}-{os.getpid()}"


def create(bootstrap: str, *topics: tuple[str, int]) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(t, n, 1) for t, n in topics])


def produce(bootstrap: str, topic: str, partitions: int, count: int, base_ts: int = 1_700_000_000_000,
            step_ms: int = 1000, tag: str = "") -> list[dict]:
    """``count`` records spread over the partitions; returns them as rows of Spark's Kafka schema."""
    futures = []
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(count):
            key, value = f"k{tag}{i}".encode(), f"value {tag}{i}".encode() * (1 + i % 3)
            headers = [("n", str(i).encode()), ("empty", None)] if i % 2 else []
            ts = base_ts + i * step_ms
            fut = producer.send(topic, value, key, partition=i % partitions, timestamp_ms=ts, headers=headers)
            futures.append((key, value, headers, ts, fut))
        producer.flush()
    out = []
    for key, value, headers, ts, fut in futures:
        md = fut.result(30)
        out.append({"key": key, "value": value, "topic": topic, "partition": md.partition, "offset": md.offset,
                    "timestamp_ms": ts, "timestampType": 0, "headers": headers})
    return out
