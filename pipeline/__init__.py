"""PySpark data source and loading jobs on our client (``pip install kafkapy[spark]``).

``pipeline.register(spark)`` registers :class:`~pipeline.source.KafkaDataSource`
under the name ``kafkapy``; ``spark.read.format("kafkapy")`` then reads and
``df.write.format("kafkapy")`` writes with the options and schema of Spark's
Kafka connector (:mod:`pipeline.source`, :mod:`pipeline.options`). The loader
job is ``python -m pipeline load`` (:mod:`pipeline.loader`).
"""

from __future__ import annotations


def register(spark) -> None:
    """Register the ``kafkapy`` data source with ``spark`` (a SparkSession)."""
    from .source import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)
