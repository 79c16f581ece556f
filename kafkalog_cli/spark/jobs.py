"""The jobs behind `kafkalog export` and `kafkalog scan`, on the Spark that spark/start.py
starts."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, NamedTuple,
                    Optional, Sequence, Tuple)

from ..errors import KafkalogError
from ..log.files import os_error_text
from ..log.summary import merge_slices, summarize_segment, summarize_slice
from .source import Options, Piece, Problem, SegmentSlice, partition_logs, slices
from .start import Spark, spark_context

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.status import StatusTracker


class Progress:
    """A rich progress bar on stderr (when it is a terminal) of Spark's tasks: "starting Spark"
    until the first stage runs (the session given later with ``attach``), then the tasks done
    out of the running stages' own count; a stage that ended stays at its final count."""

    def __init__(self, enabled: bool, spark: Optional[Spark] = None) -> None:
        self.spark = spark
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._complete = False

    def attach(self, spark: Spark) -> Spark:
        """The session or context whose stages to show (started after the bar)."""
        self.spark = spark
        return spark

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _counts(self, tracker: Optional[StatusTracker],
                seen: List[int]) -> Optional[Tuple[str, int, int]]:
        """(description, done, total) of the running stages, else of those last seen (which
        ended: their final counts), else None before any."""
        if tracker is None:  # no session yet
            return None
        active = sorted(tracker.getActiveStageIds())
        if active:
            seen[:] = active
        done = total = 0
        for sid in seen:
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        if not seen or not total:
            return None
        return "stage %s" % ",".join(map(str, seen)), done, total

    def _run(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress as Bar, ProgressColumn, Task, TextColumn
        from rich.text import Text

        class Tasks(ProgressColumn):
            def render(self, task: Task) -> Text:
                if task.total is None:
                    return Text("")
                return Text("%d/%d tasks" % (task.completed, task.total))

        seen: List[int] = []
        with Bar(TextColumn("{task.description}"), BarColumn(), Tasks(),
                 console=Console(stderr=True)) as bar:
            task = bar.add_task("starting Spark", total=None)
            while True:
                stopping = self._stop.is_set()
                try:
                    tracker = spark_context(self.spark).statusTracker() \
                        if self.spark is not None else None
                    counts = self._counts(tracker, seen)
                except Exception:  # a session stopping under us: keep what the bar shows
                    counts = None
                if counts is not None:
                    description, done, total = counts
                    if stopping and self._complete:
                        done = total  # every task ran; the status store may lag behind
                    bar.update(task, description=description, completed=done, total=total)
                if stopping:
                    break
                self._stop.wait(0.2)

    def finish(self) -> None:
        """The job succeeded: the bar's last look, while the session still runs, ends at the
        stages' full count (Spark's status store may not have counted the last tasks yet)."""
        self._complete = True
        self.__exit__()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


class ExportResult(NamedTuple):
    """What an export wrote: ``rows``, and the invalid data its tasks met (``problems``: one
    ``(topic, partition, segment, Problem)`` each, in file order), which became rows only with
    includeInvalid."""
    rows: int
    problems: List[Tuple[str, int, str, Problem]]

    @property
    def invalid_batches(self) -> int:
        return sum(1 for *_, p in self.problems if p.size is None)

    @property
    def invalid_bytes(self) -> int:
        return sum(p.size or 0 for *_, p in self.problems)


def export(spark: Spark, path: str, output: str, fmt: str,
           partition_by: Sequence[str] = (), mode: str = "errorifexists",
           options: Optional[Mapping[str, str]] = None) -> ExportResult:
    """Write the records under ``path`` to ``output`` as parquet, json or csv; the invalid data
    met on the way comes back in the result (as `kafkalog scan` counts it), whether or not it
    was written as rows (includeInvalid).

    Parquet is written by the tasks themselves: each reads its slice of a segment exactly as
    the data source does (``source.read_slice``) and writes the Arrow batches with pyarrow, so
    the records never go through the JVM's row format, which costs more than decoding them
    (and a task then keeps one core busy, not two). The result is the dataset Spark writes:
    part files, hive-style ``col=value`` directories for ``partition_by``, a _SUCCESS marker.
    JSON Lines and CSV are written by the tasks too (write_text_slice), in the JSON vocabulary
    `kafkalog dump` uses (README, "JSON output"): epoch-ms timestamps, timestampType names,
    keys and values as UTF-8 text or base64 with a marker, headers as [key, value] pairs.
    """
    if fmt == "parquet":
        return _export_parquet(spark, path, output, list(partition_by), mode, options or {})
    return _export_text(spark, path, output, fmt, list(partition_by), mode, options or {})


def _prepare_output(output: str, mode: str) -> None:
    if os.path.exists(output):
        if mode == "errorifexists":
            raise FileExistsError("%s already exists (--mode overwrite or append)" % output)
        if mode == "overwrite":
            shutil.rmtree(output)
    os.makedirs(output, exist_ok=True)


def _export_parquet(spark: Spark, path: str, output: str, partition_by: Sequence[str],
                    mode: str, options: Mapping[str, str]) -> ExportResult:
    return _export_tasks(spark, path, output, mode, options,
                  lambda task, opts, run: write_parquet_slice(task, output, partition_by, opts,
                                                              run))


def _export_text(spark: Spark, path: str, output: str, fmt: str,
                 partition_by: Sequence[str], mode: str,
                 options: Mapping[str, str]) -> ExportResult:
    return _export_tasks(spark, path, output, mode, options,
                  lambda task, opts, run: write_text_slice(task, output, fmt, partition_by, opts,
                                                           run))


def cores(spark: Spark, settle_s: float = 2.0) -> int:
    """Spark's defaultParallelism once the cluster's executors have registered. On a cluster
    Spark counts the cores of the executors registered so far (CoarseGrainedSchedulerBackend:
    at least 2), and right after the session starts there may be none yet: slices cut then
    would leave most cores idle. So wait, up to spark.scheduler.maxRegisteredResourcesWaitingTime
    (Spark's own bound for the same wait, 30 s by default), for a first executor and then until
    their number has held still for ``settle_s``. At once for a local master or when
    spark.default.parallelism is set (Spark then takes it as it is)."""
    sc = spark_context(spark)
    conf = sc.getConf()
    if (sc.master or "").startswith("local") or conf.contains("spark.default.parallelism"):
        return sc.defaultParallelism
    jsc = sc._jsc.sc()
    limit = jsc.conf().getTimeAsSeconds("spark.scheduler.maxRegisteredResourcesWaitingTime", "30s")
    deadline = time.monotonic() + limit
    seen, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        executors = jsc.getExecutorMemoryStatus().size() - 1  # the driver is counted too
        if executors != seen:
            seen, since = executors, time.monotonic()
        elif executors > 0 and time.monotonic() - since >= settle_s:
            break
        time.sleep(0.1)
    return sc.defaultParallelism


# One export task: (its number, its slice), the options, the run's id -> what it wrote
WriteSlice = Callable[[Tuple[int, Piece], Options, str], "SliceResult"]


def _export_tasks(spark: Spark, path: str, output: str, mode: str,
                  options: Mapping[str, str], write: WriteSlice) -> ExportResult:
    if not any(k.lower() == "minpartitions" for k in options):
        # a slice for every core (unless maxBytesPerPartition is given)
        options = dict(options, minPartitions=str(cores(spark)))
    opts = Options(options)
    parts = slices(path, opts)
    _prepare_output(output, mode)
    results: List[SliceResult] = []
    if parts:
        run = uuid.uuid4().hex
        tasks = list(enumerate(parts))
        results = spark_context(spark).parallelize(tasks, len(tasks)).map(
            lambda task: write(task, opts, run)).collect()
    open(os.path.join(output, "_SUCCESS"), "w").close()
    problems = [(piece.topic, piece.partition, os.path.basename(piece.path), p)
                for piece, result in zip(parts, results) for p in result.problems]
    return ExportResult(sum(r.rows for r in results), problems)


class SliceResult(NamedTuple):
    """What one export task did: the rows it wrote, the invalid data it met."""
    rows: int
    problems: List[Problem]


# The columns of a JSON or CSV export, in dump's record vocabulary (README, "JSON output"):
# name in the export, column of the data source
EXPORT_COLUMNS = (("topic", "topic"), ("partition", "partition"), ("file", "segment"),
                  ("offset", "offset"), ("position", "batchPosition"),
                  ("timestamp", "timestamp"), ("timestampType", "timestampType"),
                  ("key", "key"), ("value", "value"), ("headers", "headers"),
                  ("magic", "magic"), ("compresscodec", "codec"), ("producerId", "producerId"),
                  ("isTransactional", "isTransactional"), ("isControl", "isControl"),
                  ("isValid", "isValid"))
CSV_COLUMNS = [name for name, _ in EXPORT_COLUMNS[:8]] + ["keyEncoding", "value",
                                                          "valueEncoding"] + \
    [name for name, _ in EXPORT_COLUMNS[9:]]


def export_rows(batch: pa.RecordBatch) -> Iterator[Dict[str, Any]]:
    """The rows of one Arrow batch of the data source as dump's record objects."""
    import pyarrow as pa
    from ..jsonvocab import bytes_json, headers_json
    from ..format.records import TIMESTAMP_TYPE_NAMES
    cols = {name: batch.column(source) for name, source in EXPORT_COLUMNS}
    cols["timestamp"] = cols["timestamp"].cast(pa.int64())  # microseconds
    values = {name: col.to_pylist() for name, col in cols.items()}
    for i in range(batch.num_rows):
        row = {name: values[name][i] for name, _ in EXPORT_COLUMNS}
        ts = row["timestamp"]
        row["timestamp"] = -1 if ts is None else ts // 1000
        tt = row["timestampType"]
        row["timestampType"] = TIMESTAMP_TYPE_NAMES.get(-1 if tt is None else tt, str(tt))
        if row["partition"] == -1:  # a directory not named <topic>-<n>
            row["topic"] = row["partition"] = None
        row["key"] = bytes_json(row["key"])
        row["value"] = bytes_json(row["value"])
        row["headers"] = headers_json((h["key"], h["value"]) for h in row["headers"] or ())
        yield row


def _csv_row(row: Dict[str, Any]) -> Dict[str, Any]:
    """A record object as a CSV row: key and value as their text, or base64 with
    keyEncoding/valueEncoding "base64" ("text" for text, empty for null); headers as JSON."""
    import json
    out = dict(row)
    for side in ("key", "value"):
        v = row[side]
        if isinstance(v, dict):
            out[side], out[side + "Encoding"] = v["base64"], "base64"
        else:
            out[side], out[side + "Encoding"] = v, "" if v is None else "text"
    out["headers"] = json.dumps(row["headers"], ensure_ascii=False, separators=(",", ":"))
    return out


def write_text_slice(task: "tuple[int, Piece]", output: str, fmt: str,
                     partition_by: Sequence[str], options: Options, run: str) -> SliceResult:
    """One task: the rows of one slice as JSON Lines or CSV part files (one per partition_by
    value, in hive-style ``col=value`` directories as Spark writes them)."""
    import csv
    import json
    from .source import read_piece
    number, piece = task
    files: Dict[tuple, Any] = {}
    writers: Dict[tuple, Any] = {}
    rows = 0
    problems: List[Problem] = []
    columns = [c for c in CSV_COLUMNS if c not in partition_by]
    try:
        for batch in read_piece(piece, options, problems):
            for row in export_rows(batch):
                rows += 1
                key = tuple(row[c] for c in partition_by)
                if key not in files:
                    directory = os.path.join(output, *("%s=%s" % (c, v) for c, v in
                                                       zip(partition_by, key)))
                    os.makedirs(directory, exist_ok=True)
                    name = "part-%05d-%s.%s" % (number, run, fmt)
                    f = files[key] = open(os.path.join(directory, name), "w", encoding="utf-8",
                                          newline="")
                    if fmt == "csv":
                        writers[key] = csv.DictWriter(f, columns, extrasaction="ignore")
                        writers[key].writeheader()
                for c in partition_by:
                    del row[c]
                if fmt == "csv":
                    writers[key].writerow(_csv_row(row))
                else:
                    row = dict(type="record", **row)
                    files[key].write(json.dumps(row, ensure_ascii=False, separators=(",", ":"))
                                     + "\n")
    finally:
        for f in files.values():
            f.close()
    return SliceResult(rows, problems)


def write_parquet_slice(task: "tuple[int, Piece]", output: str,
                        partition_by: Sequence[str], options: Options,
                        run: str) -> SliceResult:
    """One task: the rows of one slice (numbered, as ``slices`` made it) as Parquet part files
    (one per partition_by value)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from .source import _arrow_schema, arrow_array, read_piece
    # One task, one core (spark.task.cpus): Arrow's own thread pools would make a task take
    # more cores than Spark gave it, and tasks fight over them.
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    number, piece = task
    schema = _arrow_schema()
    data_schema = pa.schema([f for f in schema if f.name not in partition_by])
    writers: Dict[tuple, Any] = {}
    rows = 0
    problems: List[Problem] = []
    try:
        for batch in read_piece(piece, options, problems):
            rows += batch.num_rows
            table = pa.Table.from_batches([batch])
            groups: List[Tuple[tuple, Any]] = [((), table)]
            if partition_by:
                keys = table.select(partition_by).to_pylist()
                order: Dict[tuple, List[int]] = {}
                for i, k in enumerate(keys):
                    order.setdefault(tuple(k[c] for c in partition_by), []).append(i)
                groups = [(k, table.take(arrow_array(idx, pa.int64())))
                          for k, idx in order.items()]
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
    return SliceResult(rows, problems)


class ScanResult(NamedTuple):
    """What `kafkalog scan` found: one total per partition (``partition_totals``), in topic
    and partition order, and whether anything was invalid."""
    partitions: List[Dict[str, Any]]
    invalid: bool


def scan(spark: Spark, path: str, topics: Optional[Sequence[str]] = None) -> ScanResult:
    """Every segment under ``path`` checked and summed up by Spark tasks, then totalled per
    partition on the driver. The tasks take the slices the export takes (source.slices, a
    slice for every core: a segment larger than the split size is cut at batch starts of its
    .index): a segment of one slice is summed up whole (log.summary.summarize_segment), each
    slice of a larger one apart (summarize_slice), and its slices put together on the driver
    (merge_slices). Slices that do not join into what a reading of the whole segment gives
    (anything invalid in them, batches not end to end across a cut, offsets going back across
    one) leave their segment to be read again whole, by a task of a second job: the totals and
    problems are always those of whole segments."""
    sc = spark_context(spark)
    parts = partition_logs(path, topics or ())
    if not any(p.logs for p in parts):
        return ScanResult([], False)
    opts = Options({"topics": ",".join(topics or ()), "minPartitions": str(cores(spark))})
    by_log: Dict[str, List[Tuple[int, int]]] = {}
    for piece in slices(path, opts):
        assert isinstance(piece, SegmentSlice)  # not compacted
        by_log.setdefault(piece.path, []).append((piece.start, piece.end))
    tasks = [(log, None) if len(cuts) == 1 else (log, cut)
             for log, cuts in by_log.items() for cut in cuts]
    pieces = sc.parallelize(tasks, len(tasks)).map(_scan_task).collect()
    _raise_first_error(pieces)
    summaries: Dict[str, Dict[str, Any]] = {}
    sliced: Dict[str, List[Dict[str, Any]]] = {}
    for (log, cut), s in zip(tasks, pieces):
        if cut is None:
            summaries[log] = s
        else:
            sliced.setdefault(log, []).append(s)
    again = []
    for log, parts_of_log in sliced.items():
        merged = merge_slices(parts_of_log)
        if merged is None:
            again.append((log, None))
        else:
            summaries[log] = merged
    if again:
        wholes = sc.parallelize(again, len(again)).map(_scan_task).collect()
        _raise_first_error(wholes)
        summaries.update((log, s) for (log, _), s in zip(again, wholes))
    totals = sorted((partition_totals(p.topic, p.partition,
                                      sorted((summaries[log] for log in p.logs),
                                             key=lambda s: s["segment"]))
                     for p in parts if p.logs),
                    key=lambda t: (t["topic"], t["partition"]))
    return ScanResult(totals, any(t["invalid_batches"] or t["invalid_bytes"] for t in totals))


def _scan_task(task: Tuple[str, Optional[Tuple[int, int]]]) -> Dict[str, Any]:
    """One scan task: (segment, None) summed up whole, (segment, (start, stop)) a slice of it;
    or {"error": one line naming the file} when it cannot be read (a FileChangedError:
    truncated or replaced under the task), said on the driver rather than as a worker's
    traceback."""
    path, cut = task
    try:
        if cut is None:
            return summarize_segment(path)
        return summarize_slice(path, *cut)
    except OSError as e:
        return {"segment": path, "error": os_error_text(e.filename or path, e)}


def _raise_first_error(summaries: Sequence[Dict[str, Any]]) -> None:
    """KafkalogError for the first segment (in path order) whose task could not read it."""
    errors = sorted((s["segment"], s["error"]) for s in summaries if "error" in s)
    if errors:
        raise KafkalogError(errors[0][1])


def partition_totals(topic: str, partition: int,
                     summaries: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The totals of one partition's segment summaries: segments, batches, records, bytes,
    offset and time ranges, codecs, invalid batches and bytes, and each problem named after
    its segment."""
    segs = summaries
    first = [s["first_offset"] for s in segs if s["first_offset"] is not None]
    last = [s["last_offset"] for s in segs if s["last_offset"] is not None]
    tmin = [s["min_timestamp"] for s in segs if s["min_timestamp"] is not None]
    tmax = [s["max_timestamp"] for s in segs if s["max_timestamp"] is not None]
    return {"topic": topic, "partition": partition, "segments": len(segs),
            "batches": sum(s["batches"] for s in segs), "records": sum(s["records"] for s in segs),
            "bytes": sum(s["bytes"] for s in segs),
            "first_offset": min(first) if first else None,
            "last_offset": max(last) if last else None,
            "min_timestamp": min(tmin) if tmin else None,
            "max_timestamp": max(tmax) if tmax else None,
            "codecs": sorted({c for s in segs for c in s["codecs"]}),
            "invalid_batches": sum(s["invalid_batches"] for s in segs),
            "invalid_bytes": sum(s["invalid_bytes"] for s in segs),
            "problems": ["%s: %s" % (os.path.basename(s["segment"]), p)
                         for s in segs for p in s["problems"]]}
