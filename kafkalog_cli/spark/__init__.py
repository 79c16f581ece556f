"""The Spark pipeline: a `kafkalog` data source (``register(spark)``) and the jobs of the
`kafkalog export` and `kafkalog scan` commands. Needs the `spark` extra (pyspark)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> SparkSession:
    """Make ``spark.read.format("kafkalog")`` available in this Spark session."""
    from .source import KafkalogDataSource
    spark.dataSource.register(KafkalogDataSource)
    return spark
