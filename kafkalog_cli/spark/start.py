"""Starting Spark for kafkalog: the master URL checked before a JVM starts, the SparkSession
of the data source (``session``) or the lighter SparkContext the export and scan jobs run on
(``context``), their JVM's log configuration and stderr."""

from __future__ import annotations

import atexit
import os
import re
import socket
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, Union

from ..errors import KafkalogError, UsageError
from . import register

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

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
