"""Spark sessions and the jobs behind `kafkalog export` and `kafkalog scan`."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, NamedTuple,
                    Optional, Sequence, Tuple, Union)

from ..errors import KafkalogError, UsageError
from ..log.files import os_error_text
from ..log.summary import merge_slices, summarize_segment, summarize_slice
from . import register
from .source import Options, Piece, Problem, SegmentSlice, partition_logs, slices

if TYPE_CHECKING:
    import pyarrow as pa
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession
    from pyspark.status import StatusTracker

# What the jobs run on: a SparkSession, or the SparkContext of `context`
Spark = Union["SparkSession", "SparkContext"]


# The master URLs Spark takes (SparkContext.createTaskScheduler and the cluster managers)
MASTER_URL = re.compile(r"^(local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"
                        r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
                        r"|spark://[^/\s]+|yarn|k8s://\S+)$")
CONNECT_TIMEOUT_S = 5.0

# Spark's own log4j2 configuration prints its start-up lines and warnings on stderr before a
# session can lower the level: the driver's JVM gets this one from the start instead (the REPL
# logger at the root's level: otherwise Spark announces "Setting default log level").
LOG4J2 = """rootLogger.level = %(level)s
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = %(level)s
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = %(level)s
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = spark: %%p %%c{1}: %%m%%n%%ex
"""


class SparkUnavailable(KafkalogError):
    """Spark could not be started or reached (exit 2)."""


def check_master(master: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Before a JVM starts: UsageError for a master URL Spark does not take, SparkUnavailable
    when no master of a ``spark://`` URL accepts a connection within ``timeout`` seconds
    (Spark itself retries for over a minute, printing Java stack traces)."""
    if not MASTER_URL.match(master):
        raise UsageError("--master %r: not a Spark master URL (local, local[N], local[*], "
                         "local-cluster[N,C,M], spark://HOST:PORT, yarn, k8s://...)" % master)
    if not master.startswith("spark://"):
        return
    errors = []
    for hostport in master[len("spark://"):].split(","):
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError("--master %r: expected spark://HOST:PORT" % master)
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout).close()
            return
        except OSError as e:
            errors.append("%s: %s" % (hostport, e.strerror or e))
    raise SparkUnavailable("cannot reach the Spark master (%s)" % "; ".join(errors))


def _log4j2_file(verbose: bool) -> str:
    fd, path = tempfile.mkstemp(prefix="kafkalog-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        # Without --verbose nothing: a failure is said in one line by the command itself (a
        # failed task's Java and Python stack traces would come first otherwise).
        f.write(LOG4J2 % {"level": "warn" if verbose else "off"})

    def remove() -> None:
        if os.path.exists(path):
            os.unlink(path)

    atexit.register(remove)
    return path


# The JIT of the JVMs that run the export and scan jobs: C1 only. Their tasks read and write
# in Python (the JVM only hands each task its slice and takes back a few numbers), so C2's
# compiling never pays for itself there: it costs a second of a core at start-up and, in local
# mode, takes CPU from the Python workers all through the job (a 1 GB export's JVM spent
# 0.3-0.9 s of CPU on it, against 0.15 s with C1 only).
JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
DAEMON_MODULE = "kafkalog_cli.spark.daemon"


def session(master: str = "local[*]", conf: Sequence[Tuple[str, str]] = (),
            app: str = "kafkalog", verbose: bool = False) -> SparkSession:
    """A Spark session with the kafkalog data source registered, its Python workers running
    the interpreter the user chose (``spark.pyspark.python`` in ``conf``, else the environment's
    PYSPARK_PYTHON) or else this very one (a virtual environment included, which has
    kafkalog_cli: not whatever python3 is first on PATH). SparkUnavailable when Spark cannot
    start; UsageError for a master URL it does not take."""
    spark_conf, _ = _start(master, conf, app, verbose, jobs_only=False)
    from pyspark.sql import SparkSession
    try:
        spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    except Exception as e:
        raise _unavailable(e, None) from None
    return register(spark)


def context(master: str = "local[*]", conf: Sequence[Tuple[str, str]] = (),
            app: str = "kafkalog", verbose: bool = False) -> SparkContext:
    """What `kafkalog export` and `kafkalog scan` run on: a SparkContext as ``session`` starts
    it (the same interpreters, errors and quiet), without the SQL session and the data source's
    registration, which their jobs (plain RDD tasks) do not use and which cost a third of the
    start-up. Unless ``conf`` says otherwise: no web UI, the JVMs' JIT at C1 only
    (JOB_JAVA_OPTIONS), the driver JVM's class-data archive (spark/classarchive.py); with a
    local master whose workers run this interpreter, workers forked from kafkalog's daemon
    (spark/daemon.py: pyspark's, with pyspark and the tasks' modules imported once, from
    compiled files), talking to the JVM over Unix sockets. A context already running in this
    process is returned as it is."""
    return _start(master, conf, app, verbose, jobs_only=True)[1]


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def _start(master: str, conf: Sequence[Tuple[str, str]], app: str, verbose: bool,
           jobs_only: bool) -> Tuple[SparkConf, SparkContext]:
    """The SparkConf of a session or context and the SparkContext started with it (see
    ``session`` and ``context``)."""
    check_master(master)
    given = dict(conf)
    python = given.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") \
        or sys.executable
    driver = given.get("spark.pyspark.driver.python") \
        or os.environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable
    # pyspark takes the executors' interpreter from the environment (SparkContext.pythonExec)
    os.environ["PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_DRIVER_PYTHON"] = driver
    from pyspark import SparkConf, SparkContext
    launching = SparkContext._gateway is None  # the JVM not started yet in this process
    java_options = "-Dlog4j2.configurationFile=file:%s" % _log4j2_file(verbose)
    executor_options = given.get("spark.executor.extraJavaOptions")
    defaults = []
    archive = None
    if jobs_only:
        _light_numpy_converters()
        java_options += " " + JOB_JAVA_OPTIONS
        executor_options = " ".join(filter(None, (JOB_JAVA_OPTIONS, executor_options)))
        defaults.append(("spark.ui.enabled", "false"))
        # this very interpreter: not another path to its binary (a virtual environment's
        # python links to its base interpreter, without the environment's packages)
        if _is_local(master) and os.path.abspath(python) == os.path.abspath(sys.executable):
            defaults.append(("spark.python.daemon.module", DAEMON_MODULE))
            # the JVM and its Python workers talk over Unix sockets rather than TCP on
            # loopback, where each task waited some 45 ms on its small messages; kafkalog's
            # daemon keeps a worker whose socket the JVM closed as it stopped from saying so
            # (a cluster's executors keep TCP, their directories' paths may be longer than a
            # socket's name can be)
            defaults.append(("spark.python.unix.domain.socket.enabled", "true"))
        if launching:
            from . import classarchive
            archive, options = classarchive.for_start(given)
            if options:
                java_options += " " + options
            home = classarchive.spark_home()
            if home and "SPARK_HOME" not in os.environ:
                # spark-submit would start a Python of its own to find it (find-spark-home)
                os.environ["SPARK_HOME"] = home
    if given.get("spark.driver.extraJavaOptions"):
        java_options += " " + given["spark.driver.extraJavaOptions"]  # the user's own win
    settings = [("spark.master", master), ("spark.app.name", app),
                ("spark.pyspark.python", python), ("spark.pyspark.driver.python", driver),
                ("spark.ui.showConsoleProgress", "false"),
                # base64() without line breaks every 76 characters (CSV export)
                ("spark.sql.chunkBase64String.enabled", "false")]
    settings += [(k, v) for k, v in defaults if k not in given]
    settings += list(conf) + [("spark.driver.extraJavaOptions", java_options)]
    if executor_options:
        settings.append(("spark.executor.extraJavaOptions", executor_options))
    spark_conf = SparkConf(loadDefaults=False).setAll(settings)
    stderr = None
    try:
        if launching:
            stderr = _JvmStderr(verbose)
            sc = SparkContext(conf=spark_conf, gateway=stderr.launch(spark_conf))
        else:
            sc = SparkContext.getOrCreate(spark_conf)
    except Exception as e:  # a JVM that did not start, a cluster that refused the application
        raise _unavailable(e, stderr) from None
    finally:
        if stderr is not None:
            stderr.started()
    if archive is not None and archive.writing is not None:
        archive.started(sc)
        atexit.register(archive.finish)
    # a failed job's Java exception as pyspark's own (a Python worker's failure as its
    # traceback), as a SparkSession has them
    from pyspark.errors.exceptions.captured import install_exception_handler
    install_exception_handler()
    sc.setLogLevel("WARN" if verbose else "OFF")
    return spark_conf, sc


def _light_numpy_converters() -> None:
    """pyspark's py4j converters of numpy arrays and scalars (pyspark.sql.types) ask, for the
    arguments of every call into the JVM, whether numpy is installed by importing
    pyspark.testing.utils, which imports pandas: 0.4 s of a context's start-up, spent the first
    time. An object can be a numpy array or scalar only once numpy has been imported: these ask
    sys.modules instead, with the same answers."""
    from py4j import protocol
    from pyspark.sql import types
    checks = {getattr(types, "NumpyArrayConverter", None): _is_numpy_vector,
              getattr(types, "NumpyScalarConverter", None): _is_numpy_scalar}
    for converter in protocol.INPUT_CONVERTER:
        check = checks.get(type(converter))
        if check is not None:
            converter.can_convert = check


def _is_numpy_vector(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray) and obj.ndim == 1


def _is_numpy_scalar(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.generic)


def _unavailable(error: Exception, stderr: "Optional[_JvmStderr]") -> SparkUnavailable:
    lines = str(error).strip().splitlines()
    said = stderr.first_line() if stderr is not None else None
    return SparkUnavailable("Spark could not start: %s%s" % (
        lines[0] if lines else type(error).__name__, " (%s)" % said if said else ""))


def spark_context(spark: Spark) -> SparkContext:
    """The SparkContext of a SparkSession, or the SparkContext given."""
    from pyspark.sql import SparkSession
    return spark.sparkContext if isinstance(spark, SparkSession) else spark


class _JvmStderr:
    """The driver JVM's stderr, through a pipe read by a thread of ours: what the JVM (and
    spark-submit before it) writes while starting, such as Java's "WARNING: Using incubator
    modules", is held back (shown with --verbose; its first line said if Spark cannot start);
    from then on every line is passed on to our stderr (Spark's errors, the Python workers'
    output in local mode)."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.held: List[str] = []
        self._starting = True
        self._read, self._write = os.pipe()
        threading.Thread(target=self._pump, daemon=True,
                         name="kafkalog-jvm-stderr").start()

    def launch(self, spark_conf: SparkConf) -> JavaGateway:
        """The py4j gateway of a new driver JVM whose stderr is this pipe."""
        from pyspark.java_gateway import launch_gateway
        try:
            return launch_gateway(spark_conf, popen_kwargs={"stderr": self._write})
        finally:
            os.close(self._write)  # the JVM holds its own copy

    def started(self) -> None:
        self._starting = False

    def first_line(self) -> Optional[str]:
        lines = [x.strip() for x in self.held if x.strip()
                 and "incubator modules" not in x]
        return lines[0] if lines else None

    def _pump(self) -> None:
        with open(self._read, "rb", buffering=0) as pipe:
            for raw in iter(pipe.readline, b""):
                line = raw.decode("utf-8", "replace")
                if self._starting and not self.verbose:
                    self.held.append(line)
                    continue
                try:
                    sys.stderr.write(line)
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass


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
