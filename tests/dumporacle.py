"""``kafkalog dump`` against Kafka's own DumpLogSegments, file list by file list.

``compare(files, options, version, kafka_format)`` runs DumpLogSegments of Kafka ``version``
(one JVM for the whole list) and ``kafkalog dump --kafka-format kafka_format`` with the same
``--files`` list and options, and returns a ``Comparison``:

* ``chunks``: runs of files that Kafka dumped to the end; for each, both tools' stdout, stderr
  and exit status, which must be equal;
* ``stopped``: the files on which Kafka's tool stopped with an exception (a Java stack trace on
  stderr, exit 1, the files after it not dumped). kafkalog says what is wrong in one line and
  goes on; what Kafka printed of the file before it stopped must be what kafkalog prints first
  (``Stopped.kafka_stdout`` a prefix of ``Stopped.kafkalog_stdout``), and the exception's class
  and message are kept for the test to pin.

Kafka stopping ends its run; the comparison starts it again after the file it stopped on, and
at the end runs every file it dumped to the end once more in one run (one chunk), so that its
end-of-run summaries on stderr (``Non-consecutive offsets``, index mismatches) are compared over
the same files as kafkalog's. Each Kafka run is kept for the process's life (the same list and
options give the same output), so comparing a second kafkalog (``env``) starts no JVM.
"""

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import kafkajvm

KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]
_EXCEPTION = re.compile(r'^Exception in thread "main" (\S+?)(?::\s(.*))?$', re.M)


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str


@dataclass
class Chunk:
    files: list
    kafka: Result
    kafkalog: Result


@dataclass
class Stopped:
    file: str
    exception: str
    message: str
    kafka_stdout: str
    kafkalog: Result


@dataclass
class Comparison:
    options: tuple
    version: str
    kafka_format: str
    chunks: list = field(default_factory=list)
    stopped: list = field(default_factory=list)

    def mismatches(self):
        """One text per difference: a chunk whose outputs differ, a stop not matched."""
        out = []
        for c in self.chunks:
            for what in ("rc", "stdout", "stderr"):
                a, b = getattr(c.kafka, what), getattr(c.kafkalog, what)
                if a != b:
                    out.append(f"{what} differs over {len(c.files)} files from {c.files[0]}:\n"
                               + diff_text(str(a), str(b)))
        for s in self.stopped:
            if not s.kafkalog.stdout.startswith(s.kafka_stdout):
                out.append(f"Kafka stopped on {s.file} ({s.exception}); what it printed before "
                           f"is not how kafkalog's output starts:\n"
                           + diff_text(s.kafka_stdout, s.kafkalog.stdout[:len(s.kafka_stdout) + 200]))
        return out


def diff_text(a, b, n=40):
    import difflib
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "kafka", "kafkalog",
                                      lineterm="", n=1))
    return "\n".join(lines[:n]) + ("\n..." if len(lines) > n else "")


def kafkalog_dump(files, options, kafka_format, env=None) -> Result:
    proc = subprocess.run([*KAFKALOG, "dump", "--files", ",".join(str(f) for f in files),
                           "--kafka-format", kafka_format, *options],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600,
                          env=env)
    return Result(proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
                  proc.stderr.decode("utf-8", "surrogateescape"))


_KAFKA_RUNS = {}  # (files, options, version) -> Result: Kafka's output is the same every time


def kafka_dump(files, options, version) -> Result:
    key = (tuple(files), tuple(options), version)
    if key not in _KAFKA_RUNS:
        rc, out, err = kafkajvm.dump_log_segments(files, options, version)
        _KAFKA_RUNS[key] = Result(rc, out, err)
    return _KAFKA_RUNS[key]


def _last_dumped(stdout, files):
    """The index in ``files`` of the last file whose ``Dumping`` line Kafka printed."""
    last = -1
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            name = line[len("Dumping "):]
            # the next file in order with that name (a list may name a file twice)
            for i in range(last + 1, len(files)):
                if str(files[i]) == name:
                    last = i
                    break
    return last


def compare(files, options=(), version=kafkajvm.KAFKA, kafka_format="4.3", env=None):
    files = [str(f) for f in files]
    options = tuple(options)
    result = Comparison(options, version, kafka_format)
    dumped = []   # the files Kafka dumped to the end
    whole = None  # Kafka's run over exactly those, when it had one
    rest = files
    while rest:
        kafka = kafka_dump(rest, options, version)
        m = _EXCEPTION.search(kafka.stderr)
        if kafka.rc == 0 or m is None:
            whole = kafka if not dumped else None
            dumped.extend(rest)
            break
        stop = _last_dumped(kafka.stdout, rest)
        if stop < 0:  # stopped before its first file: compare nothing, say so
            raise AssertionError(f"DumpLogSegments failed before any file: {kafka.stderr[-2000:]}")
        dumped.extend(rest[:stop])
        crashed = rest[stop]
        # what Kafka printed of the file it stopped on: from its Dumping line to the end
        at = kafka.stdout.rfind(f"Dumping {crashed}\n")
        result.stopped.append(Stopped(
            crashed, m.group(1), m.group(2) or "", kafka.stdout[at:],
            kafkalog_dump([crashed], options, kafka_format, env)))
        rest = rest[stop + 1:]
    if dumped:
        # the files Kafka dumps to the end, in one run: its end-of-run summaries over them all
        kafka = whole or kafka_dump(dumped, options, version)
        result.chunks.append(Chunk(dumped, kafka, kafkalog_dump(dumped, options, kafka_format, env)))
    return result


# -- the files of a log directory --------------------------------------------------------------

DUMPED_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint")


def dumpable_files(root):
    """Every file of ``root`` that DumpLogSegments reads by its suffix, partition by partition,
    in name order (deleted topics' directories too)."""
    root = Path(root)
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(d.iterdir()):
            if f.is_file() and f.suffix in DUMPED_SUFFIXES:
                out.append(str(f))
    return out


def kind_of(path):
    name = os.path.basename(path)
    if name.endswith(".checkpoint"):
        return "kraft-snapshot"
    return name.rsplit(".", 1)[-1]
