"""One ``recover`` is enough: whatever it leaves, a second run accepts (exit 0)
without changing a byte, and the first run's dry run announces every change the run makes.

On the shipped fixtures after each writing command (a plain ``append``, ``roll``, ``retain``),
and on the log directories a real broker wrote (tests/kafkatraffic.py: one SIGKILLed, one
stopped cleanly). The broker's own load of the same directories, twice, is the reference for
what "converged" means: tests/kafka_oracle/test_kafka_recover.py (a second recover on the recovered copy
changes nothing, and a broker accepts it).

Before: the first run wrote the producer snapshot at the log end offset, the second then set
the older one aside as a stray (at no segment's base offset), exit 1 twice, and the first
run's dry run did not mention it.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpcheck import REPO

FIXTURES = Path(REPO, "fixtures", "logdir")
KAFKALOG = [sys.executable, "-m", "kafkalog_cli"]


def run(*args, stdin=None):
    return subprocess.run([*KAFKALOG, *[str(a) for a in args]], cwd=REPO, input=stdin,
                          capture_output=True, text=True, timeout=300)


def tree(root):
    """{relative path: sha256} of every file under ``root`` (the lock files left out: a run
    may create its own empty one)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f in (".lock", ".kafkalog-append.lock"):
                continue
            p = Path(dirpath, f)
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed(before, after):
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def check_one_run_enough(logdir):
    """recover once, then: a dry run says nothing is left (exit 0), and a second run exits 0
    with every file as the first left it."""
    first = run("recover", logdir)
    assert first.returncode in (0, 1), first.stderr
    assert "Traceback" not in first.stderr
    after_first = tree(logdir)
    dry = run("recover", "--dry-run", logdir)
    assert dry.returncode == 0, dry.stdout[-3000:]
    second = run("recover", logdir)
    assert second.returncode == 0, second.stdout[-3000:]
    assert changed(after_first, tree(logdir)) == [], second.stdout[-3000:]


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "logdir"
    shutil.copytree(FIXTURES, d)
    # the fixtures hold damage on purpose: one recover first, so that the command under test
    # works on a partition as the broker would leave it
    p = run("recover", d)
    assert p.returncode in (0, 1), p.stderr
    return d


def test_after_a_plain_append(logdir):
    lines = "".join("value-%d\n" % i for i in range(500))
    p = run("append", "--batch-records", "40", logdir / "orders-0", stdin=lines)
    assert p.returncode == 0, p.stderr
    check_one_run_enough(logdir)


def test_after_an_idempotent_append(logdir):
    lines = "".join('{"value": "v%d", "producerId": 4242, "producerEpoch": 0, "sequence": %d}\n'
                    % (i, i) for i in range(200))
    p = run("append", "--input-format", "jsonl", "--batch-records", "25", logdir / "events-0",
            stdin=lines)
    assert p.returncode == 0, p.stderr
    check_one_run_enough(logdir)


def test_after_a_roll(logdir):
    p = run("roll", logdir / "orders-1")
    assert p.returncode == 0, p.stderr
    check_one_run_enough(logdir)


def test_after_a_plain_retain(logdir):
    p = run("retain", "--retention-bytes", "100", "--file-delete-delay-ms", "0", logdir)
    assert p.returncode == 0, p.stderr
    check_one_run_enough(logdir)


def test_on_the_fixtures_as_shipped(tmp_path):
    d = tmp_path / "logdir"
    shutil.copytree(FIXTURES, d)
    check_one_run_enough(d)


@pytest.mark.parametrize("which", ["crashed", "clean"])
def test_on_a_real_brokers_directory(kafka_traffic, which, tmp_path):
    d = tmp_path / which
    subprocess.run(["cp", "-a", "--sparse=always", str(getattr(kafka_traffic, which)), str(d)],
                   check=True)
    check_one_run_enough(d)


def test_a_cut_marker_below_the_log_end_is_not_replayed(tmp_path):
    """A segment whose batches jump to offset 999 (a base offset outside the CRC), then a
    producer's transaction marker at offset 3: recover cuts at the marker (offsets go back),
    and the log end offset becomes 1000. The producer state is rebuilt from the segment as the
    cut leaves it: the marker, below the log end but cut, is not replayed (its damaged record
    count would fail the rebuild), so the first run writes the snapshots and a second has
    nothing to do."""
    import kafkagen as kg
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a", b"x" * 40, kg.T0)])
    w.add_v2([kg.Rec(b"b", b"y" * 40, kg.T0)], gap=998)         # offset 999
    marker = bytearray(kg.control_batch(kg.COMMIT, 3, 5, 0, 1))  # goes back: cut there
    marker[57:61] = (-7).to_bytes(4, "big", signed=True)  # and its record count is damaged
    data = w.data() + bytes(marker)
    part = tmp_path / "logdir" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(data)
    check_one_run_enough(tmp_path / "logdir")
    assert (part / "00000000000000001000.snapshot").exists()


def test_a_negative_base_offset_the_broker_cannot_load_is_one_line(tmp_path):
    """A first batch whose base offset (outside the CRC) became -1, its last offset still in
    the segment: LogSegment.recover would assign its leader epoch from offset -1, which
    LeaderEpochFileCache.assign refuses (IllegalArgumentException), so the broker cannot load
    the partition. recover says so in one line, exit 2, no traceback, and changes nothing."""
    import kafkagen as kg
    w = kg.SegmentWriter(0, partition_leader_epoch=3)
    w.add_v2([kg.Rec(b"k%d" % i, b"v", kg.T0) for i in range(6)])
    w.add_v2([kg.Rec(b"n", b"v", kg.T0)])
    data = bytearray(w.data())
    data[0:8] = (-1).to_bytes(8, "big", signed=True)
    part = tmp_path / "logdir" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    before = tree(tmp_path / "logdir")
    res = run("recover", part)
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "negative base offset -1" in lines[0], res.stderr
    assert changed(before, tree(tmp_path / "logdir")) == []
