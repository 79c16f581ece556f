"""Apache Kafka's own classes for the oracle tests: the classpath, resolved by Maven, and the JVM.

The versions are named here only. ``KAFKA`` is the Kafka the tests run as the judge (broker,
StorageTool, DumpLogSegments). ``DUMP_RELEASES`` names, for each ``kafkalog dump
--kafka-format`` choice, the release whose DumpLogSegments it matches (the Scala
``kafka.tools.DumpLogSegments`` up to 4.2, the Java ``org.apache.kafka.tools.DumpLogSegments``
from 4.3); the dump oracle tests run each. ``tests/kafka/pom.xml`` lists the artifacts; ``mvn dependency:build-classpath`` resolves
them (into ``~/.m2``, about 30 s the first time, then offline in a second) and the classpath is
kept in ``tests/kafka/.classpath-<version>.txt`` beside the pom.

Nothing of kafkalog imports this module: the product never needs a JVM, only its tests do.
"""

import fcntl
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

KAFKA = "4.4.0"
DUMP_RELEASES = {"3.x": "3.9.1", "4.0": "4.0.2", "4.1": "4.1.1", "4.2": "4.2.1", "4.3": "4.3.1",
                 "4.4": KAFKA}

POM_DIR = Path(__file__).resolve().parent / "kafka"

# The JVM options of every Kafka process the tests start: a small heap, no JIT tiers beyond C1
# for the short-lived tools (they start in about half the time), nothing written to /tmp by
# hsperfdata.
TOOL_JVM_OPTIONS = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
                    "-Xshare:auto", "-Djava.awt.headless=true")


class KafkaUnavailable(Exception):
    """Kafka's classes cannot be had here (no Java, no Maven, or Maven cannot resolve them)."""


def java() -> str:
    """The java binary: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if not found:
        raise KafkaUnavailable("java is not on PATH (the Kafka tests need Java 17+)")
    return found


def _cached_classpath(cached: Path) -> Optional[str]:
    if cached.is_file():
        text = cached.read_text().strip()
        if text and all(Path(p).is_file() for p in text.split(os.pathsep)):
            return text
    return None


@functools.lru_cache(maxsize=None)
def classpath(version: str = KAFKA) -> str:
    """Kafka ``version``'s broker and tools with every dependency, as a ``java -cp`` value.
    Resolved once by Maven; processes asking at the same time (pytest-xdist's workers on a
    fresh clone) wait for the first one's resolution under a lock file."""
    cached = POM_DIR / f".classpath-{version}.txt"
    text = _cached_classpath(cached)
    if text is not None:
        return text
    with open(POM_DIR / f".classpath-{version}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = _cached_classpath(cached)
        return text if text is not None else _resolve(version, cached)


def _resolve(version: str, cached: Path) -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaUnavailable("mvn is not on PATH: Maven resolves Kafka's jars for the tests "
                               "(tests/kafka/pom.xml)")
    out = POM_DIR / f".classpath-{version}.txt.tmp"
    proc = subprocess.run(
        [mvn, "-B", "-q", "-f", str(POM_DIR / "pom.xml"), "dependency:build-classpath",
         f"-Dkafka.version={version}", f"-Dmdep.outputFile={out}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    if proc.returncode != 0 or not out.is_file():
        last = [line for line in proc.stdout.splitlines() if line.strip()][-1:] or ["no output"]
        raise KafkaUnavailable(f"Maven could not resolve Kafka {version} (tests/kafka/pom.xml): "
                               f"{last[0]}")
    entries = out.read_text().strip().split(os.pathsep)
    if any("slf4j-reload4j" in e for e in entries):
        # Kafka 3.x logs through reload4j: the pom's log4j2 binding would be a second one
        entries = [e for e in entries if "log4j-slf4j-impl" not in e]
    out.write_text(os.pathsep.join(entries))
    os.replace(out, cached)
    return cached.read_text().strip()


def tool_log_options():
    """The logging bin/kafka-run-class.sh gives a tool: warnings on stderr (log4j2 for 4.x,
    log4j 1 for 3.x)."""
    return (f"-Dlog4j2.configurationFile={POM_DIR / 'tools-log4j2.yaml'}",
            f"-Dlog4j.configuration=file:{POM_DIR / 'tools-log4j.properties'}")


def run_class(main_class: str, args, version: str = KAFKA, timeout: float = 600,
              jvm_options=TOOL_JVM_OPTIONS, **kwargs) -> subprocess.CompletedProcess:
    """Run ``main_class`` of Kafka ``version`` to completion in its own process group, with
    the logging of Kafka's tools."""
    # java.io.tmpdir: the native libraries lz4-java and snappy-java unpack, in a directory
    # removed afterwards (not left in /tmp)
    with tempfile.TemporaryDirectory(prefix="kafkalog-jvm-") as tmp:
        return subprocess.run([java(), *jvm_options, f"-Djava.io.tmpdir={tmp}",
                               *tool_log_options(), "-cp", classpath(version), main_class,
                               *[str(a) for a in args]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              start_new_session=True, **kwargs)


def dump_log_segments_class(version: str) -> str:
    """DumpLogSegments is Java (in kafka-tools) from 4.3, Scala (in kafka_2.13) before."""
    major, minor = (int(p) for p in version.split(".")[:2])
    return ("org.apache.kafka.tools.DumpLogSegments" if (major, minor) >= (4, 3)
            else "kafka.tools.DumpLogSegments")


def dump_log_segments(files, options=(), version: str = KAFKA, **kwargs):
    """``kafka-dump-log.sh --files a,b,... OPTIONS`` of Kafka ``version``: (exit, stdout, stderr)
    as text (Kafka writes UTF-8)."""
    proc = run_class(dump_log_segments_class(version),
                     ["--files", ",".join(str(f) for f in files), *options], version, **kwargs)
    return (proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
            proc.stderr.decode("utf-8", "surrogateescape"))


def dump_each(files, options=(), version: str = KAFKA, **kwargs):
    """DumpLogSegments on each of ``files`` on its own (``--files FILE OPTIONS``), all in one
    JVM (tests/kafka/DumpEach.java calls the Java tool's ``main`` per file; what it throws is
    exit 1, its trace on stderr): {file: (exit, stdout, stderr)}. Where the tool stops at a
    file that throws, this goes on with the next. Kafka 4.3+ (the Java DumpLogSegments)."""
    import json
    proc = run_class(str(POM_DIR / "DumpEach.java"), [*options, "--", *files], version, **kwargs)
    if proc.returncode != 0:
        raise RuntimeError("DumpEach failed: " + proc.stderr.decode(errors="replace")[-2000:])
    out = {}
    for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[d["file"]] = (d["rc"], d["stdout"], d["stderr"])
    return out


def main(argv=None) -> int:
    """``python tests/kafkajvm.py``: resolve every Kafka release the tests use (the broker's
    and each DumpLogSegments the dump tests match); one line and exit 1 when that fails."""
    import sys
    import time
    versions = sorted({KAFKA, *DUMP_RELEASES.values()})
    t0 = time.monotonic()
    try:
        java()
        for v in versions:
            classpath(v)
    except KafkaUnavailable as e:
        print(f"kafkajvm: {e}", file=sys.stderr)
        return 1
    print(f"kafkajvm: Kafka {', '.join(versions)} resolved ({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
