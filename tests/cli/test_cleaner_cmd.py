"""`kafkalog cleaner` end to end: the JSON and text a user reads, the exit codes for cron, the
terminal table, bad input. The partitions are written by kafka-python's builders (kafkagen);
the expected figures are what the test wrote (see tests/log/test_cleaner.py for the rules)."""

import json
import os
import subprocess
import sys

import pytest

from dumpcheck import REPO, on_a_terminal
from kafkagen import Rec, SegmentWriter, garbage_tail
from kafkalog_cli.log import names

T0 = 1_700_000_000_000
NOW = T0 + 3_600_000


def run(*args, env=None):
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "cleaner",
                        *[str(a) for a in args]], cwd=REPO, capture_output=True, timeout=120,
                       env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.fixture
def log_dir(tmp_path):
    for topic in ("compacted", "plain"):
        d = tmp_path / ("%s-0" % topic)
        s0 = SegmentWriter(0)
        s0.add_v2([Rec(b"k%d" % (i % 3), b"v%d" % i, T0) for i in range(6)])
        s0.write(str(d))
        SegmentWriter(6).write(str(d))
    return tmp_path


def test_json_says_what_the_cleaner_would_do_and_why(log_dir):
    code, out, err = run("--now", NOW, "--cleanup-policy", "compact", "--format", "json",
                         log_dir / "compacted-0")
    assert (code, err) == (0, "")
    obj, summary = [json.loads(line) for line in out.splitlines()]
    assert obj["type"] == "partition" and obj["topic"] == "compacted" and obj["partition"] == 0
    assert obj["compacted"] is True and obj["wouldClean"] is True
    # the active segment is empty: the log end offset (the high watermark, the last stable
    # offset) is its base offset, and both bounds stop the cleaner there
    assert (obj["firstDirtyOffset"], obj["firstUncleanableOffset"], obj["stoppedBy"]) == (
        0, 6, ["last stable offset", "active segment"])
    assert obj["firstDirtyReset"] == "no entry in cleaner-offset-checkpoint"
    assert (obj["dirtyKeys"], obj["dirtyRecords"], obj["recordsRemovable"]) == (3, 6, 3)
    assert obj["cleanableBytes"] == os.path.getsize(log_dir / "compacted-0" / names.offset_name(
        0, names.LOG))
    assert obj["config"]["cleanup.policy"] == {"value": "compact", "source": "given"}
    assert obj["config"]["delete.retention.ms"] == {"value": 86400000, "source": "default"}
    assert obj["problems"] == []
    assert summary == {"type": "summary", "command": "cleaner", "partitions": 1,
                       "compacted": 1, "wouldClean": 1, "overdue": 0, "withProblems": 0}


def test_text_lines_and_a_partition_left_to_retention(log_dir):
    code, out, err = run("--now", "2023-11-14T23:13:20Z", log_dir)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].endswith("compacted-0: not compacted (cleanup.policy delete (default)): "
                             "the cleaner leaves it to retention")
    assert lines[-1] == "2 partitions, 0 compacted: 0 would be cleaned, 0 overdue, 0 with problems"
    code, out, _ = run("--now", NOW, "--cleanup-policy", "compact", log_dir / "plain-0")
    first, second, last = out.splitlines()
    assert "first dirty offset 0 (no entry in cleaner-offset-checkpoint); cleanable up to " \
        "offset 6 (stopped by the last stable offset and the active segment); dirty ratio " \
        "1.000" in first
    assert first.endswith("the cleaner would clean it now")
    assert second.endswith("a pass to offset 6 would find 3 distinct keys in 6 dirty records "
                           "and remove 3 records")


def test_exit_1_when_a_partition_is_overdue_or_would_stop_the_cleaner(log_dir):
    code, out, _ = run("--now", NOW, "--cleanup-policy", "compact", "--max-compaction-lag-ms",
                       "1000", "--min-cleanable-dirty-ratio", "1", log_dir / "compacted-0")
    assert code == 1 and "(compaction overdue by" in out
    path = log_dir / "compacted-0" / names.offset_name(0, names.LOG)
    path.write_bytes(garbage_tail(path.read_bytes()))
    code, out, _ = run("--now", NOW, "--cleanup-policy", "compact", log_dir / "compacted-0")
    assert code == 1
    assert "problem: " in out and "hold no batch" in out and "marks the partition uncleanable" \
        in out


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    code, out, err = run(tmp_path / "missing")
    assert code == 2 and err.count("\n") == 1 and err.startswith("kafkalog: ")
    code, out, err = run("--now", "yesterday", tmp_path)
    assert code == 2 and err.count("\n") == 1 and "--now 'yesterday'" in err
    (tmp_path / "x.txt").write_text("hello")
    code, out, err = run(tmp_path / "x.txt")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_a_table_on_a_terminal(log_dir):
    code, out = on_a_terminal(["cleaner", "--now", NOW, "--cleanup-policy", "compact", log_dir],
                              columns=220)
    assert code == 0
    assert "kafkalog cleaner" in out and "dirty ratio" in out and "stopped by" in out
    assert "compacted-0" in out and "plain-0" in out
    assert "a pass to offset" not in out  # not the text lines
