"""A class-data archive for the driver JVM of `kafkalog export` and `kafkalog scan` (HotSpot's
dynamic AppCDS, JDK 13 and later): the classes a Spark start loads and links, written once by a
JVM as it exits (-XX:ArchiveClassesAtExit) and mapped by the JVMs after it
(-XX:SharedArchiveFile), which then start Spark about a second sooner (of some 3 s of JVM and
SparkContext start-up on a 2-core machine).

The archive lives in the user's cache directory ($XDG_CACHE_HOME/kafkalog, else
~/.cache/kafkalog), named after what it depends on (the java binary, Spark's jars, the driver's
extra class path), about 70 MB. The first start without one asks its JVM to write one to a name
of its own; at the command's exit (``finish``) the JVM is let go (its stdin closed, on which
Spark's gateway ends) and waited for, and its archive is checked by a JVM that must map it
(-Xshare:on: a file cut short would crash a JVM that maps it) before it takes the archive's
name, atomically: a JVM never maps a file being written. An archive a JVM cannot use (another
class path, a Java updated in place) is passed over by it in silence (-Xshare:auto, the
default); what CDS says goes nowhere (-Xlog:cds*=off), as the JVM's stdout is the command's.
Options of the user's that touch class sharing (-Xshare, SharedArchiveFile,
ArchiveClassesAtExit in spark.driver.extraJavaOptions) leave it all out.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
import subprocess
import time
from typing import Any, List, Optional, Tuple

QUIET = "-Xlog:cds*=off"
USER_OPTIONS = ("Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")
EXIT_TIMEOUT_S = 120.0  # for the JVM to write its archive and end
STALE_S = 24 * 3600  # a left-over partial archive (a run killed meanwhile) older than this goes
# another installation's archive (another java, Spark or class path) neither written nor read
# for this long goes when a new archive is about to be written: a JVM that still wants it
# writes it again (once, a few seconds)
UNUSED_S = 30 * 24 * 3600
ARCHIVE_GLOB = "spark-classes-*.jsa"


def cache_dir() -> Optional[str]:
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.path.expanduser("~"), ".cache") if os.path.expanduser("~") != "~"
        else None)
    return os.path.join(base, "kafkalog") if base else None


def _java() -> Optional[str]:
    """The java that Spark's launch scripts run (bin/spark-class): JAVA_HOME's, else PATH's."""
    if os.environ.get("JAVA_HOME"):
        return os.path.join(os.environ["JAVA_HOME"], "bin", "java")
    from shutil import which
    return which("java")


def archive_path(spark_home: str, extra_classpath: str = "") -> Optional[str]:
    """Where the archive of this java, Spark and class path lives (None: no cache directory,
    no java found, or a path that Spark's option parsing would split)."""
    java, directory = _java(), cache_dir()
    if not java or not directory:
        return None
    key = hashlib.sha256()
    try:
        java = os.path.realpath(java)
        st = os.stat(java)
        key.update(("%s %d %d\n" % (java, st.st_size, st.st_mtime_ns)).encode())
        jars = os.path.join(spark_home, "jars")
        for name in sorted(os.listdir(jars)):
            st = os.stat(os.path.join(jars, name))
            key.update(("%s %d %d\n" % (name, st.st_size, st.st_mtime_ns)).encode())
    except OSError:
        return None
    key.update(("%s\n%s\n" % (os.path.realpath(spark_home), extra_classpath)).encode())
    path = os.path.join(directory, ARCHIVE_GLOB.replace("*", key.hexdigest()[:16]))
    if any(c.isspace() or c in "\"'\\" for c in path):
        return None
    return path


class Archive:
    """The class-data archive of one driver JVM start: ``options`` for its
    spark.driver.extraJavaOptions (empty: none); ``finish`` at exit."""

    def __init__(self, spark_home: str, given_options: str, extra_classpath: str) -> None:
        self.options = ""
        self.path: Optional[str] = None
        self.writing: Optional[str] = None  # the name this JVM writes its archive to
        if any(o in given_options for o in USER_OPTIONS):
            return
        path = archive_path(spark_home, extra_classpath)
        if path is None:
            return
        if os.path.isfile(path):
            self.options = "-XX:SharedArchiveFile=%s %s" % (path, QUIET)
            return
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.access(os.path.dirname(path), os.W_OK):
                return
        except OSError:
            return
        _remove_stale(path)
        _remove_unused(path)
        self.path = path
        self.writing = "%s.%d.tmp" % (path, os.getpid())
        try:  # a stale file, or a symlink, at this process's name: removed, never written through
            os.unlink(self.writing)
        except FileNotFoundError:
            pass
        except OSError:
            self.path = self.writing = None
            return
        self.options = "-XX:ArchiveClassesAtExit=%s %s" % (self.writing, QUIET)

    def started(self, sc: Any) -> None:
        """Note what checking the archive takes from the running JVM (its java, class path and
        heap): a start that writes one only."""
        if self.writing is None:
            return
        try:
            jvm = sc._jvm
            system = jvm.java.lang.System
            self.java = os.path.join(system.getProperty("java.home"), "bin", "java")
            self.classpath = system.getProperty("java.class.path")
            args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                        .getInputArguments())
            self.jvm_args = [a for a in args if a.startswith(("-Xmx", "-XX:+UseCompressed",
                                                              "-XX:-UseCompressed"))]
            self.process = sc._gateway.proc
        except Exception:  # a gateway of another kind: no archive this time
            self.writing = None

    def finish(self) -> None:
        """At exit, after the context stopped: end the JVM (its stdin closed), wait for it to
        write its archive, check it and give it its name; else remove it."""
        tmp, self.writing = self.writing, None
        if tmp is None or self.path is None:
            return
        try:
            proc = self.process
            if proc is not None:
                if proc.stdin is not None:
                    proc.stdin.close()
                try:
                    proc.wait(EXIT_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if os.path.isfile(tmp) and _usable(self.java, self.classpath, self.jvm_args, tmp):
                os.replace(tmp, self.path)
        except (OSError, AttributeError, subprocess.SubprocessError):
            pass
        finally:
            if os.path.exists(tmp):
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def _usable(java: str, classpath: str, jvm_args: List[str], archive: str) -> bool:
    """Whether a JVM of this java, class path and heap maps ``archive`` (-Xshare:on fails
    rather than going on without it)."""
    try:
        # (a file cut short crashes the JVM: no hs_err file or core dump of that left behind)
        p = subprocess.run([java, "-Xshare:on", "-XX:SharedArchiveFile=" + archive, QUIET,
                            "-XX:ErrorFile=" + os.devnull, "-XX:-CreateCoredumpOnCrash",
                            "-cp", classpath] + jvm_args + ["-version"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0


def _remove_stale(path: str) -> None:
    """Partial archives of runs killed while writing them, a day old."""
    now = time.time()
    for tmp in glob.glob(glob.escape(path) + ".*.tmp"):
        try:
            if now - os.path.getmtime(tmp) > STALE_S:
                os.unlink(tmp)
        except OSError:
            pass


def _remove_unused(path: str) -> None:
    """The other archives of the cache directory (other installations') unused for UNUSED_S:
    neither modified nor read since (the access time a relatime mount keeps to within a day;
    under noatime an archive in use may go too, and is written again)."""
    now = time.time()
    for other in glob.glob(os.path.join(glob.escape(os.path.dirname(path)), ARCHIVE_GLOB)):
        if other == path:
            continue
        try:
            st = os.lstat(other)
            if stat.S_ISREG(st.st_mode) and now - max(st.st_atime, st.st_mtime) > UNUSED_S:
                os.unlink(other)
        except OSError:
            pass


def spark_home() -> Optional[str]:
    try:
        from pyspark.find_spark_home import _find_spark_home
        return _find_spark_home()
    except (Exception, SystemExit):  # it exits when it finds none
        return None


def for_start(given: dict) -> Tuple[Optional[Archive], str]:
    """The Archive of a driver JVM about to start with the settings ``given`` (the user's
    --spark-conf), and its Java options."""
    home = spark_home()
    if home is None:
        return None, ""
    archive = Archive(home, given.get("spark.driver.extraJavaOptions", ""),
                      given.get("spark.driver.extraClassPath", ""))
    return archive, archive.options
