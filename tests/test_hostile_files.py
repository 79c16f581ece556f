"""Hostile directory contents: names that are not Kafka's, files that are not regular files,
names that are not UTF-8, unreadable partition directories, and index files large enough to
expose work that grows faster than the input.

Every command runs as a real process (``python -m kafkalog_cli``), with a timeout and, where a
reader could read without end, an address-space limit (RLIMIT_AS), so that a hang or an
unbounded read fails the test instead of the machine.
"""

import json
import os
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tempfile

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO

T0 = kg.T0
# Enough for the interpreter and its imports, far from what reading /dev/zero would take.
ADDRESS_SPACE = 1_500_000_000


class Run:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    @property
    def out_text(self):
        return self.out.decode("utf-8")

    @property
    def err_lines(self):
        return self.err.decode("utf-8", "replace").splitlines()

    @property
    def out_lines(self):
        return self.out_text.splitlines()

    def __repr__(self):
        return "Run(code=%r, out=%r, err=%r)" % (self.code, self.out[-3000:], self.err[-3000:])


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run(*args, timeout=60, env=None, user=None, cwd=None):
    """``python -m kafkalog_cli ARGS`` with a timeout and a memory limit; never a traceback."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *[os.fsencode(a) for a in args]],
                       cwd=cwd or REPO, capture_output=True, timeout=timeout, env=full_env,
                       preexec_fn=_limit_memory, **({"user": user} if user is not None else {}))
    res = Run(p.returncode, p.stdout, p.stderr)
    assert b"Traceback" not in p.stderr and b"Traceback" not in p.stdout, res
    assert res.code in (0, 1, 2), res
    return res


def partition(directory, n_segments=2, n_batches=12):
    """A partition of ``n_segments`` segments with the broker's indexes, a producer snapshot,
    leader-epoch-checkpoint and partition.metadata. Returns indexgen's SegmentFiles."""
    segments = []
    base = 0
    for i in range(n_segments):
        data, nxt = ig.busy_segment(base, n_batches=n_batches, t0=T0 + 100000 * i, seed=i)
        segments.append((base, data))
        base = nxt
    out = ig.write_partition(directory, segments)
    ig.write_snapshots(directory, [base])
    ig.write_file(os.path.join(str(directory), "leader-epoch-checkpoint"),
                  ig.leader_epoch_checkpoint([(0, 0)]))
    ig.write_file(os.path.join(str(directory), "partition.metadata"),
                  ig.partition_metadata(ig.topic_id(1)))
    return out


def batch_lines(res):
    return [line for line in res.out_lines if line.startswith("baseOffset: ")]


def expected_batch_count(segs):
    return sum(len(kg.kafka_python_read(s.data, deep=False)) for s in segs)


def json_lines(res):
    return [json.loads(line) for line in res.out_lines]


def escaped(name):
    """How a file name must be printed: bytes that are not UTF-8 as \\xNN, control characters
    escaped (written here independently of kafkalog_cli.log.files.printable_name)."""
    raw = os.fsencode(name)
    out = []
    text = raw.decode("utf-8", "surrogateescape")
    for ch in text:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append("\\x%02x" % (o - 0xDC00))
        elif o < 0x20 or o == 0x7F or 0x80 <= o < 0xA0:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return "".join(out)


# -- 1, 2: names that are not Kafka's, beside real segments ---------------------------------------

# A Kafka suffix without Kafka's name: never a segment, index or snapshot of the partition.
NOT_KAFKA_NAMES = [
    "abc.log",
    b"\xff.index",
    "\u0660\u0661\u0662.log",            # Arabic-Indic digits: str.isdigit() says yes
    "-00000000000000000001.log",
    "-000..1.log",
    "00000000000000000000.log.log",
    "00000000000000000000.index.index",
    "00000000000000000000.log.swap.log",
    "00000000000000000000.snapshot.timeindex",
    "x00000000000000000000.timeindex",
    "\uff10\uff10.txnindex",             # fullwidth digits
    "00000000000000000000.deleted",
    "00000000000000000007.log\n.log",
]


def _write(directory, name, data):
    path = os.path.join(os.fsencode(str(directory)), os.fsencode(name))
    with open(path, "wb") as f:
        f.write(data)
    return os.fsdecode(path)


@pytest.mark.parametrize("name", NOT_KAFKA_NAMES, ids=repr)
def test_dump_names_an_unknown_name_and_dumps_the_rest(tmp_path, name):
    part = tmp_path / "t-0"
    segs = partition(part)
    # the bytes of a real segment, so that reading it as one would show
    path = _write(part, name, segs[0].data)
    res = run("dump", part)
    assert res.code == 0, res
    assert "Ignoring unknown file %s" % escaped(path) in res.err_lines, res
    assert len(batch_lines(res)) == expected_batch_count(segs), res
    dumped = [line[len("Dumping "):] for line in res.out_lines if line.startswith("Dumping ")]
    assert escaped(path) not in dumped
    assert len(dumped) == len(set(dumped))


@pytest.mark.parametrize("name", [n for n in NOT_KAFKA_NAMES if n != "00000000000000000000.deleted"],
                         ids=repr)  # (verify-index names the unknown files with a suffix it checks)
def test_verify_index_names_an_unknown_name_and_checks_the_rest(tmp_path, name):
    part = tmp_path / "t-0"
    segs = partition(part)
    path = _write(part, name, segs[0].data if os.fsencode(name).endswith(b"log") else bytes(24))
    res = run("verify-index", part)
    assert res.code == 0, res
    assert "Ignoring unknown file %s" % escaped(path) in res.err_lines, res
    res = run("verify-index", "--format", "json", part)
    assert res.code == 0, res
    files = [o["file"] for o in json_lines(res) if o["type"] == "file"]
    expected = [p for s in segs for k, p in s.paths.items() if k != "log"]
    assert sorted(files) == sorted(expected), res


def test_log_log_is_not_segment_zero(tmp_path):
    """``00000000000000000000.log.log`` beside segment 0's indexes and no ``.log``: the indexes
    have no log (each reported once), and the ``.log.log`` is an unknown file."""
    part = tmp_path / "orders-1"
    segs = partition(part, n_segments=1)
    log = segs[0].paths["log"]
    os.rename(log, log + ".log")
    res = run("verify-index", "--format", "json", part)
    problems = [o for o in json_lines(res) if o["type"] == "problem"]
    assert res.code == 1, res
    assert sorted((p["file"], p["kind"]) for p in problems) == sorted(
        (p, "missing_log") for k, p in segs[0].paths.items() if k != "log"), res
    res = run("dump", part)
    assert "Ignoring unknown file %s" % (log + ".log") in res.err_lines, res
    assert batch_lines(res) == [], res


def test_named_explicitly_a_file_is_read_by_its_suffix(tmp_path):
    """A file named on the command line is read as its suffix says, whatever its name
    (``--base-offset`` exists for segments whose name is not their offset)."""
    data, _ = ig.busy_segment(0, n_batches=5)
    path = _write(tmp_path, "00000000000000000000.log.log", data)
    res = run("dump", path)
    assert res.code == 0, res
    assert len(batch_lines(res)) == len(kg.kafka_python_read(data, deep=False))
    other = _write(tmp_path, "copy-of-segment.log", data)
    res = run("dump", "--base-offset", "0", other)
    assert res.code == 0, res
    assert len(batch_lines(res)) == len(kg.kafka_python_read(data, deep=False))


def test_kafka_names_with_lifecycle_suffixes_are_still_read(tmp_path):
    """The strict naming keeps every name Kafka gives, lifecycle suffixes included."""
    part = tmp_path / "t-0"
    segs = partition(part)
    for kind in ("log", "index", "timeindex"):
        os.rename(segs[0].paths[kind], segs[0].paths[kind] + ".deleted")
    res = run("dump", part)
    assert res.code == 0, res
    assert not any(line.startswith("Ignoring") for line in res.err_lines), res
    assert len(batch_lines(res)) == expected_batch_count(segs)
