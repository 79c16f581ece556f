"""The Spark pipeline: a `kafkalog` data source (``register(spark)``) and the jobs of the
`kafkalog export` and `kafkalog scan` commands. Needs the `spark` extra (pyspark)."""


def register(spark):
    """Make ``spark.read.format("kafkalog")`` available in this Spark session."""
    from .source import KafkalogDataSource
    spark.dataSource.register(KafkalogDataSource)
    return spark
