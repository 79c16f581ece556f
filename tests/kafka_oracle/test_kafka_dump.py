"""``kafkalog dump`` against Kafka's own DumpLogSegments: every file of a real broker's
log directories (cleanly stopped and SIGKILLed: ``kafka_traffic``) and of ``fixtures/logdir``
(legacy v0/v1 messages, every codec), under every option set, for each ``--kafka-format``
choice against the release it matches (``kafkajvm.DUMP_RELEASES``). stdout, stderr and the
exit status are compared byte for byte, over one ``--files`` list per option set (one JVM).

Where kafkalog deliberately differs it is pinned here (README, "Where kafkalog differs from
DumpLogSegments, deliberately"):

* a file on which Kafka's tool dies with an exception (the rest of its list never dumped):
  kafkalog prints what Kafka printed of it, says what is wrong in at most one line and goes on
  (``test_dump_matches_kafka``'s ``_check_stop``);
* ``--cluster-metadata-decoder`` and ``--offsets-decoder`` for releases before 4.3: kafkalog
  reads every record with the newest layouts it has, where an older release's tool cannot read
  a newer broker's record (``Error at <offset>, skipping. ...``) or leaves its newer fields out
  (``_lines_differ_only_in_layouts``).
"""

import json
import os
import re
from pathlib import Path

import pytest

import dumporacle
import kafkajvm
from dumpcheck import REPO
from kafkalog_cli.cli.dump import KAFKA_FORMATS

pytestmark = pytest.mark.kafka

FIXTURES = Path(REPO, "fixtures", "logdir")
DEFAULT_FORMAT = "4.2"  # kafkalog dump's default --kafka-format

OPTION_SETS = {
    "none": (),
    "deep-iteration": ("--deep-iteration",),
    "print-data-log": ("--print-data-log",),
    "verify-index-only": ("--verify-index-only",),
    "index-sanity-check": ("--index-sanity-check",),
    "skip-record-metadata": ("--deep-iteration", "--skip-record-metadata"),
    "max-bytes": ("--max-bytes", "3000"),
    "offsets-decoder": ("--offsets-decoder",),
    "transaction-log-decoder": ("--transaction-log-decoder",),
    "cluster-metadata-decoder": ("--cluster-metadata-decoder",),
}

# Every option set for the newest release and for the default; for the others (in the time the
# file may take: about 4 minutes on two cores), the option sets where the releases differ from
# one another: record lines (control records, legacy records, the non-consecutive summary's
# wording and order) and the coordinators' decoders. The index summaries' wording and order
# are the Scala tool's in 3.x-4.2 and the Java tool's in 4.3-4.4: 4.2 and 4.4 hold both.
SOME = ("deep-iteration", "transaction-log-decoder", "offsets-decoder")
CASES = ([("4.4", name, impl) for name in OPTION_SETS for impl in ("c", "py")]
         + [(DEFAULT_FORMAT, name, "c") for name in OPTION_SETS]
         + [(fmt, name, "c") for fmt in ("3.x", "4.0", "4.1", "4.3") for name in SOME])

# Kafka's tool dies on these (a Java stack trace, exit 1); kafkalog's behaviour is pinned
STOPS = {
    # dumpIndex: a pre-allocated .index whose slot 0 is zeros, beside a log with no batch at
    # position 0 (an active segment nothing was appended to): slice(0, ..).batches().iterator()
    # .next(); kafkalog prints no entry, nothing on stderr, exit 0
    "java.util.NoSuchElementException",
    # --index-sanity-check on a pre-allocated (crashed, or active) index: kafkalog prints one
    # line, "kafkalog: <file>: corrupt ...: <why>", exit 1
    "CorruptIndexException",
}


# The releases whose tools read the broker's newer records with older layouts, and the decoders
# where it shows
OLDER_LAYOUTS = ("3.x", "4.0", "4.1", "4.2")
LAYOUT_DECODERS = ("cluster-metadata-decoder", "offsets-decoder")


def test_every_kafka_format_has_a_release():
    assert set(KAFKA_FORMATS) == set(kafkajvm.DUMP_RELEASES)


def _all_files(traffic):
    files = (dumporacle.dumpable_files(traffic.clean) + dumporacle.dumpable_files(traffic.crashed)
             + dumporacle.dumpable_files(FIXTURES))
    # indexes with zeros after their entries (pre-allocated) last: Kafka's tool dies on some,
    # and each death is a new JVM for the files after it
    return sorted(files, key=_zero_tail)


def _zero_tail(path):
    from kafkalog_cli.log.index import OffsetIndex, TimeIndex
    kind = {".index": OffsetIndex, ".timeindex": TimeIndex}.get(os.path.splitext(path)[1])
    return kind is not None and kind(path).zero_tail > 0


def _files(traffic, name):
    files = _all_files(traffic)
    if name == "offsets-decoder":
        return [f for f in files if "/__consumer_offsets-" in f and f.endswith(".log")]
    if name == "transaction-log-decoder":
        return [f for f in files if "/__transaction_state-" in f and f.endswith(".log")]
    if name == "cluster-metadata-decoder":
        return [f for f in files if "/__cluster_metadata-" in f
                and f.endswith((".log", ".checkpoint"))]
    return files


def test_the_files_cover_every_kind(kafka_traffic):
    files = _all_files(kafka_traffic)
    kinds = {dumporacle.kind_of(f) for f in files}
    assert {"log", "index", "timeindex", "txnindex", "snapshot", "kraft-snapshot"} <= kinds
    assert len(files) >= 30
    for name in ("offsets-decoder", "transaction-log-decoder", "cluster-metadata-decoder"):
        assert _files(kafka_traffic, name), name


def _env(impl):
    env = dict(os.environ)
    if impl == "py":
        env["KAFKALOG_PURE_PYTHON"] = "1"
    return env


def _first_file(text, differing_line):
    """The file whose ``Dumping`` line comes last before line ``differing_line`` of stdout."""
    name = None
    for line in text.splitlines()[:differing_line + 1]:
        if line.startswith("Dumping "):
            name = line[len("Dumping "):]
    return name


def _where(a, b):
    """The first line where two outputs differ (0-based)."""
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return i
    return min(len(la), len(lb))


_PAYLOAD = re.compile(r"^(\| offset: \d+ .*? )(payload: .*)$")


def _subset(older, newer):
    """Is the JSON value ``older`` ``newer`` without some object members (fields a newer
    layout added)?"""
    if isinstance(older, dict) and isinstance(newer, dict):
        return all(k in newer and _subset(v, newer[k]) for k, v in older.items())
    if isinstance(older, list) and isinstance(newer, list):
        return len(older) == len(newer) and all(map(_subset, older, newer))
    return older == newer


def _lines_differ_only_in_layouts(kafka, kafkalog):
    """An older release reads records with its own layouts; kafkalog with Kafka 4.3.1's (the
    newest it has). Every line must be equal but a record line's payload, where Kafka's is
    ``Error at <offset>, skipping. ...`` (a record version it does not know) or the same record
    as kafkalog's without the fields a newer layout added. Returns the lines that differ."""
    ka, kb = kafka.splitlines(), kafkalog.splitlines()
    assert len(ka) == len(kb), dumporacle.diff_text(kafka, kafkalog)
    differing = 0
    for x, y in zip(ka, kb):
        if x == y:
            continue
        mx, my = _PAYLOAD.match(x), _PAYLOAD.match(y)
        assert mx and my and mx.group(1) == my.group(1), (x, y)
        px, py = mx.group(2)[len("payload: "):], my.group(2)[len("payload: "):]
        assert px.startswith("Error at ") or _subset(json.loads(px), json.loads(py)), (x, y)
        differing += 1
    return differing


def _check_stop(stop, kafka_format, name):
    assert any(stop.exception.endswith(known) for known in STOPS), (
        f"Kafka {kafka_format} {name}: DumpLogSegments died on {stop.file} with "
        f"{stop.exception}: {stop.message}")
    out = stop.kafkalog
    assert out.stdout.startswith(stop.kafka_stdout), stop.file
    if stop.exception == "java.util.NoSuchElementException":
        assert (out.rc, out.stdout, out.stderr) == (0, f"Dumping {stop.file}\n", ""), stop.file
    else:
        assert out.rc == 1, stop.file
        assert out.stdout == f"Dumping {stop.file}\n", stop.file
        lines = out.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"kafkalog: {stop.file}: corrupt "), (
            stop.file, out.stderr)


@pytest.mark.parametrize("kafka_format,name,impl", CASES,
                         ids=[f"{f}-{n}-{i}" for f, n, i in CASES])
def test_dump_matches_kafka(kafka_traffic, kafka_format, name, impl):
    version = kafkajvm.DUMP_RELEASES[kafka_format]
    files = _files(kafka_traffic, name)
    result = dumporacle.compare(files, OPTION_SETS[name], version, kafka_format, env=_env(impl))
    for stop in result.stopped:
        _check_stop(stop, kafka_format, name)
    for chunk in result.chunks:
        kafka, ours = chunk.kafka, chunk.kafkalog
        if name in LAYOUT_DECODERS and kafka_format in OLDER_LAYOUTS:
            _lines_differ_only_in_layouts(kafka.stdout, ours.stdout)
        else:
            line = _where(kafka.stdout, ours.stdout)
            assert ours.stdout == kafka.stdout, (
                f"Kafka {version} {name}: stdout differs at {_first_file(kafka.stdout, line)}:\n"
                + dumporacle.diff_text(kafka.stdout, ours.stdout))
        assert ours.stderr == kafka.stderr, (
            f"Kafka {version} {name}: stderr differs:\n"
            + dumporacle.diff_text(kafka.stderr, ours.stderr))
        assert ours.rc == kafka.rc, f"Kafka {version} {name}: exit {kafka.rc}, kafkalog {ours.rc}"
