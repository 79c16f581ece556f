"""Spark sessions and the jobs behind `kafkalog export` and `kafkalog scan`."""

import os
import shutil
import sys
import threading
import time
import uuid

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
    """Write the records under ``path`` to ``output`` as parquet, json or csv.

    Parquet is written by the tasks themselves: each reads its slice of a segment exactly as
    the data source does (``source.read_slice``) and writes the Arrow batches with pyarrow, so
    the records never go through the JVM's row format, which costs more than decoding them
    (and a task then keeps one core busy, not two). The result is the dataset Spark writes:
    part files, hive-style ``col=value`` directories for ``partition_by``, a _SUCCESS marker.
    JSON and CSV go through a DataFrame of the data source.
    """
    if fmt == "parquet":
        return _export_parquet(spark, path, output, list(partition_by), mode, options or {})
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


def _prepare_output(output, mode):
    if os.path.exists(output):
        if mode == "errorifexists":
            raise FileExistsError("%s already exists (--mode overwrite or append)" % output)
        if mode == "overwrite":
            shutil.rmtree(output)
    os.makedirs(output, exist_ok=True)


def _export_parquet(spark, path, output, partition_by, mode, options):
    from .source import DEFAULT_MAX_BYTES_PER_PARTITION
    opts = {k.lower(): v for k, v in options.items()}
    topics = [t for t in opts.get("topics", "").split(",") if t]
    max_bytes = int(opts.get("maxbytesperpartition", DEFAULT_MAX_BYTES_PER_PARTITION))
    slices = [(s.path, s.start, s.end) for s in segment_slices(path, topics, max_bytes)]
    _prepare_output(output, mode)
    if slices:
        run = uuid.uuid4().hex
        tasks = list(enumerate(slices))
        spark.sparkContext.parallelize(tasks, len(tasks)).map(
            lambda task: write_parquet_slice(task, output, partition_by, opts, run)).collect()
    open(os.path.join(output, "_SUCCESS"), "w").close()


def write_parquet_slice(task, output, partition_by, options, run):
    """One task: the records of one slice as Parquet part files (one per partition_by value)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from .source import SegmentSlice, _arrow_schema, read_slice
    # One task, one core (spark.task.cpus): Arrow's own thread pools would make a task take
    # more cores than Spark gave it, and tasks fight over them.
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    number, (path, start, end) = task
    schema = _arrow_schema()
    data_schema = pa.schema([f for f in schema if f.name not in partition_by])
    writers = {}
    rows = 0
    try:
        for batch in read_slice(SegmentSlice(path, start, end), options):
            rows += batch.num_rows
            table = pa.Table.from_batches([batch])
            groups = [((), table)]
            if partition_by:
                keys = table.select(partition_by).to_pylist()
                order = {}
                for i, k in enumerate(keys):
                    order.setdefault(tuple(k[c] for c in partition_by), []).append(i)
                groups = [(k, table.take(pa.array(idx))) for k, idx in order.items()]
            for key, part in groups:
                if key not in writers:
                    directory = os.path.join(output, *("%s=%s" % (c, v) for c, v in
                                                       zip(partition_by, key)))
                    os.makedirs(directory, exist_ok=True)
                    name = "part-%05d-%s.snappy.parquet" % (number, run)
                    writers[key] = pq.ParquetWriter(os.path.join(directory, name), data_schema,
                                                    compression="snappy")
                writers[key].write_table(part.select(data_schema.names))
    finally:
        for w in writers.values():
            w.close()
    return rows


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
