"""The reports' one output layer (cli/output.py ``Output``): JSON Lines, plain lines on a pipe,
tables on a terminal; every report command's last JSON object is its one summary, with the keys
README's "JSON output" documents for it, in that order.

The expected keys and layouts are README's; the figures, the fixtures' own (their directory
listing), never kafkalog_cli's.
"""

import json
import os
import shutil

import pytest

from dumpcheck import REPO, kafkalog, on_a_terminal
from kafkalog_cli.cli.output import Output

FIXTURES = os.path.join(REPO, "fixtures", "logdir")
PARTITIONS = sorted(n for n in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, n)))

# README, "JSON output": each command's summary after "type" and "command"
SUMMARY_KEYS = {
    "verify-index": ["files", "entries", "problems", "unreadable"],
    "append": ["topic", "partition", "directory", "records", "firstOffset", "lastOffset"],
    "transactions": ["partitions", "transactions", "committed", "aborted", "open", "hanging",
                     "problems"],
    "describe": ["topics", "partitions", "segments", "kraftSnapshots", "records", "batches",
                 "sizeBytes", "problems", "notes", "unreadable", "consistent"],
    "quarantine list": ["partitions", "runs", "restored", "files", "bytes", "problems"],
    "quarantine restore": ["topic", "partition", "directory", "run", "steps", "displacedRun",
                           "dryRun"],
    "quarantine purge": ["runs", "bytes", "dryRun"],
    "recover": ["partitions", "changed", "recordsRemoved", "bytesCut", "segmentsCut",
                "segmentsSetAside", "bytesSetAside", "tornRecords", "tornBatches",
                "tornBatchesOffsetsUnknown", "logEndOffsets", "dryRun"],
    "retain": ["partitions", "segmentsDeleted", "recordsRemoved", "bytesRemoved",
               "deletedFilesRemoved", "logStartOffsets", "dryRun"],
}


def _logdir(tmp_path):
    d = tmp_path / "logdir"
    shutil.copytree(FIXTURES, d)
    return d


def _torn(tmp_path):
    """A copy whose metrics-0 first segment ends in the middle of a batch: recover --full cuts
    it and sets the second segment aside, in a quarantine run."""
    d = _logdir(tmp_path)
    log = d / "metrics-0" / ("%020d.log" % 0)
    os.truncate(log, os.path.getsize(log) // 2 + 1)
    return d


def _json_run(*args, stdin=None):
    """The JSON objects of ``kafkalog ARGS --format json``, checked to end with the one summary,
    with README's keys for the command."""
    if stdin is None:
        res = kafkalog(*args, "--format", "json")
    else:
        from click.testing import CliRunner
        from kafkalog_cli.cli.main import cli
        r = CliRunner().invoke(cli, [str(a) for a in args] + ["--format", "json"], input=stdin)
        res = type("R", (), {"out": r.stdout_bytes.decode(), "code": r.exit_code})
    objs = [json.loads(line) for line in res.out.splitlines()]
    assert objs and objs[-1]["type"] == "summary", res.out
    summary = objs[-1]
    assert list(summary)[:2] == ["type", "command"]
    assert list(summary)[2:] == SUMMARY_KEYS[summary["command"]], summary
    assert sum(1 for o in objs if o["type"] == "summary") == 1
    return objs


def test_describe_summary(tmp_path):
    d = _logdir(tmp_path)
    s = _json_run("describe", d)[-1]
    assert s["command"] == "describe"
    assert s["partitions"] == len(PARTITIONS)
    assert s["topics"] == len({p.rsplit("-", 1)[0] for p in PARTITIONS})
    assert s["unreadable"] == 0 and s["consistent"] is True


def test_transactions_summary(tmp_path):
    s = _json_run("transactions", _logdir(tmp_path))[-1]
    assert s["command"] == "transactions" and s["partitions"] == len(PARTITIONS)


def test_verify_index_summary(tmp_path):
    d = _logdir(tmp_path)
    objs = _json_run("verify-index", d)
    files = [o for o in objs if o["type"] == "file"]
    assert objs[-1]["command"] == "verify-index" and objs[-1]["files"] == len(files)
    assert objs[-1]["problems"] == 0 and objs[-1]["unreadable"] == 0


def test_recover_and_quarantine_summaries(tmp_path):
    d = _torn(tmp_path)
    s = _json_run("recover", "--full", d)[-1]
    assert s["command"] == "recover" and s["partitions"] == len(PARTITIONS)
    assert s["changed"] == 1 and s["dryRun"] is False
    assert s["logEndOffsets"] and list(s["logEndOffsets"][0]) == ["topic", "partition",
                                                                  "logEndOffset"]
    objs = _json_run("quarantine", "list", d)
    runs = [o for o in objs if o["type"] == "quarantineRun"]
    assert len(runs) == 1 and objs[-1]["runs"] == 1 and objs[-1]["restored"] == 0
    s = _json_run("quarantine", "restore", "--dry-run", d, runs[0]["run"])[-1]
    assert s["command"] == "quarantine restore" and s["run"] == runs[0]["run"]
    assert (s["topic"], s["partition"], s["dryRun"]) == ("metrics", 0, True)
    s = _json_run("quarantine", "purge", "--older-than", "0", "--dry-run", d)[-1]
    assert s["command"] == "quarantine purge" and s["runs"] == 1 and s["dryRun"] is True


def test_retain_summary(tmp_path):
    d = _logdir(tmp_path)
    s = _json_run("retain", "--dry-run", "--log-start-offset", "1", d / "orders-0")[-1]
    assert s["command"] == "retain" and s["partitions"] == 1 and s["dryRun"] is True


def test_append_summary(tmp_path):
    d = tmp_path / "t-0"
    objs = _json_run("append", d, "--flush-messages", "2", "--batch-records", "1",
                     stdin="a\nb\nc\n")
    assert objs[0]["type"] == "flushed"
    assert {o["type"] for o in objs[:-1]} == {"flushed"}
    s = objs[-1]
    assert (s["topic"], s["partition"], s["records"]) == ("t", 0, 3)
    assert (s["firstOffset"], s["lastOffset"]) == (0, 2)


def test_output_json_lines(capsys):
    out = Output("json")
    out.emit({"type": "x", "n": 1}, "x 1")
    out.emit(lambda: {"type": "y"}, "y")
    out.emit({"type": "z"}, None)
    out.summary("cmd", "1 thing", some_count=2, dry_run=False)
    got = capsys.readouterr()
    assert got.err == ""
    assert [json.loads(line) for line in got.out.splitlines()] == [
        {"type": "x", "n": 1}, {"type": "y"}, {"type": "z"},
        {"type": "summary", "command": "cmd", "someCount": 2, "dryRun": False}]


def test_output_plain_lines(capsys):
    out = Output("text")
    assert not out.table  # capsys: not a terminal
    out.emit({"type": "x"}, "x 1")
    out.emit(lambda: pytest.fail("JSON made for text"), "y")
    out.emit({"type": "z"}, None)  # an item only JSON has
    out.summary("cmd", "the end", n=1)
    out.summary("cmd", None, n=1)  # a command without a summary line
    assert capsys.readouterr() == ("x 1\ny\nthe end\n", "")


def test_output_buffered_and_stderr(capsys):
    out = Output("text", buffered=True, err=True)
    out.emit({}, "a")
    out.emit({}, "b")
    assert capsys.readouterr() == ("", "")
    out.flush()
    out.flush()
    assert capsys.readouterr() == ("", "a\nb\n")
    out = Output("json", buffered=True, err=True)  # JSON stays on stdout
    out.emit({"type": "a"}, "a")
    out.summary("cmd")
    assert capsys.readouterr() == ('{"type": "a"}\n{"type": "summary", "command": "cmd"}\n', "")


def test_output_verbatim(capsys):
    out = Output("text", verbatim=True)
    out.emit({}, "dir-\x1b[31m-0")
    assert capsys.readouterr().out == "dir-\x1b[31m-0\n"


def test_terminal_tables_and_lines_beside(tmp_path):
    """On a terminal, recover's segments are a table and its summary line comes last."""
    d = _torn(tmp_path)
    code, out = on_a_terminal(["recover", "--full", "--dry-run", d])
    assert code == 1
    lines = [line for line in out.splitlines() if line.strip()]
    assert any("segment" in line and "rule" in line for line in lines), out
    assert lines[-1].startswith("%d partitions, 1 to repair" % len(PARTITIONS)), out
    assert lines[-1].endswith("(dry run: nothing changed)"), out
