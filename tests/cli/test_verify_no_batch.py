"""`verify-index` of a `.log` whose bytes are not a batch (a text file named as a segment) says
that the file holds no batch: a problem, exit 1, whether the file is the partition's active
segment or a sealed one passed alone; an empty `.log` (a new active segment) is none."""

import json
import os

import pytest

from dumpcheck import kafkalog

TEXT = b"hello world\nthis is text, not a record batch\n"


@pytest.mark.parametrize("where", ["partition", "alone"])
def test_a_text_file_as_a_log_holds_no_batch(tmp_path, where):
    if where == "partition":
        d = tmp_path / "notes-0"
        d.mkdir()
        log = d / "00000000000000000000.log"   # the partition's active segment
    else:
        log = tmp_path / "notes.log"              # a sealed segment, passed by its name
    log.write_bytes(TEXT)
    res = kafkalog("verify-index", log)
    assert res.code == 1, res
    line = "%s: no_batch: %s holds no batch: its %d bytes from position 0 are not a batch (" % (
        log, log.name, len(TEXT))
    assert [x for x in res.err_lines if x.startswith(line)], res
    res = kafkalog("verify-index", "--format", "json", log)
    assert res.code == 1, res
    objs = [json.loads(x) for x in res.out.splitlines()]
    problems = [o for o in objs if o["type"] == "problem" and o["kind"] == "no_batch"]
    assert [(p["file"], p["position"], p["bytes"]) for p in problems] == [
        (str(log), 0, len(TEXT))]
    assert {"type": "file", "file": str(log), "kind": "log", "entries": 0,
            "problems": 1} in objs
    assert objs[-1]["problems"] >= 1


def test_an_empty_active_segment_is_no_problem(tmp_path):
    d = tmp_path / "notes-0"
    d.mkdir()
    for suffix in (".log", ".index", ".timeindex"):
        (d / ("00000000000000000000" + suffix)).write_bytes(b"")
    res = kafkalog("verify-index", d)
    assert (res.code, res.err) == (0, ""), res
    assert "no_batch" not in res.out
    assert os.path.getsize(d / "00000000000000000000.log") == 0
