"""Spark sessions and the jobs behind `kafkalog export` and `kafkalog scan`."""

import os
import sys
import threading
import time

from ..log.summary import summarize_segment
from . import register
from .source import segment_slices, topic_partition


def session(master="local[*]", conf=(), app="kafkalog"):
    """A Spark session whose Python workers run this very interpreter (a virtual environment
    included), with the kafkalog data source registered."""
    # Workers must import kafkalog_cli and its dependencies: the same Python as ours, not
    # whatever python3 is first on PATH.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.pyspark.python", sys.executable)
               .config("spark.pyspark.driver.python", sys.executable)
               .config("spark.ui.showConsoleProgress", "false")
               # base64() without line breaks every 76 characters (CSV export)
               .config("spark.sql.chunkBase64String.enabled", "false"))
    for key, value in conf:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return register(spark)


class Progress:
    """A rich progress bar of Spark's tasks (done/total of the running stages), on a terminal."""

    def __init__(self, spark, enabled):
        self.spark = spark
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        if self.enabled:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self):
        from rich.progress import BarColumn, Progress as Bar, TextColumn
        tracker = self.spark.sparkContext.statusTracker()
        with Bar(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} tasks"),
                 transient=True) as bar:
            task = bar.add_task("spark", total=None)
            while not self._stop.is_set():
                done = total = 0
                stages = []
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        done += info.numCompletedTasks
                        total += info.numTasks
                        stages.append(str(sid))
                bar.update(task, completed=done, total=total or None,
                           description="stage %s" % ",".join(stages) if stages else "spark")
                time.sleep(0.2)

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


def export(spark, path, output, fmt, partition_by=(), mode="errorifexists", options=None):
    """Write the records under ``path`` to ``output`` as parquet, json or csv."""
    df = spark.read.format("kafkalog").options(**(options or {})).load(path)
    if fmt == "csv":
        from pyspark.sql import functions as F
        # CSV holds no binary or nested columns: bytes as base64, headers as JSON
        df = (df.withColumn("key", F.base64("key")).withColumn("value", F.base64("value"))
              .withColumn("headers", F.to_json(F.transform(
                  "headers", lambda h: F.struct(h["key"].alias("key"),
                                                F.base64(h["value"]).alias("value"))))))
    writer = df.write.mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if fmt == "csv":
        writer = writer.option("header", "true").option("escape", '"')  # quotes doubled, as in RFC 4180
    getattr(writer, fmt)(output)


def scan(spark, path, topics=None):
    """Summaries of every segment under ``path``, computed by Spark tasks, grouped by
    (topic, partition): {(topic, partition): [segment summary, ...]}."""
    logs = sorted({s.path for s in segment_slices(path, topics, max_bytes=2 ** 62)})
    if not logs:
        return {}
    summaries = spark.sparkContext.parallelize(logs, len(logs)).map(summarize_segment).collect()
    out = {}
    for summary in summaries:
        out.setdefault(topic_partition(summary["segment"]), []).append(summary)
    return out
