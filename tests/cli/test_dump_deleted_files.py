"""`dump` of a partition whose segments retention has renamed `.deleted` (the broker removes
them after file.delete.delay.ms): their records are shown, each such file with a note that its
records are no longer in the log (stderr; in JSON a `deleted_segment` note and `deletedSegment`
on its batches), and the JSON summary counts them apart (`deletedFiles`, `deletedBatches`,
`deletedRecords`, not in `batches`/`records`)."""

import json
import os

import jsonschema
import pytest

import kafkagen as kg
from dumpcheck import kafkalog

from kafkalog_cli.schema import load

VALIDATOR = jsonschema.Draft202012Validator(load())
NOTE = ("%s is a deleted segment (renamed .deleted by retention or the log cleaner; the broker "
        "removes it after file.delete.delay.ms): its records are no longer in the log")


@pytest.fixture
def retained(tmp_path):
    """Offsets 0-21 in segments of 4 records (0, 4, ..., 20), then retain to log start 19:
    the segments 0-15 renamed .deleted, 16-19 and 20-21 live."""
    d = tmp_path / "ev-0"
    d.mkdir()
    for base in range(0, 22, 4):
        w = kg.SegmentWriter(base)
        for o in range(base, min(base + 4, 22)):
            w.add_v2([kg.Rec(None, b"v%d" % o, kg.T0 + o)])
        w.write(d)
    res = kafkalog("retain", "--log-start-offset", 19, d)
    assert res.code == 0, res
    assert sorted(n for n in os.listdir(d) if n.endswith(".log.deleted")) == [
        kg.segment_name(b) + ".deleted" for b in (0, 4, 8, 12)]
    return str(d)


def test_text_dump_says_so_on_each_deleted_file(retained):
    res = kafkalog("dump", "--from-offset", 0, "--to-offset", 2, retained)
    assert res.code == 0, res
    first = os.path.join(retained, kg.segment_name(0) + ".deleted")
    assert "kafkalog: note: " + NOTE % first in res.err_lines, res
    assert "baseOffset: 0 lastOffset: 0" in res.out
    res = kafkalog("dump", retained)
    assert res.code == 0, res
    notes = [line for line in res.err_lines if "is a deleted segment" in line]
    assert notes == ["kafkalog: note: " + NOTE % os.path.join(retained, kg.segment_name(b)
                                                               + ".deleted")
                     for b in (0, 4, 8, 12)], res.err


def test_json_dump_counts_them_apart(retained):
    res = kafkalog("dump", "--format", "json", "--deep-iteration", retained)
    assert res.code == 0, res
    objs = [json.loads(line) for line in res.out.splitlines()]
    for o in objs:
        errors = [e.message for e in VALIDATOR.iter_errors(o)]
        assert not errors, (o, errors)
    notes = [o for o in objs if o["type"] == "note" and o.get("kind") == "deleted_segment"]
    assert [n["file"] for n in notes] == [
        os.path.join(retained, kg.segment_name(b) + ".deleted") for b in (0, 4, 8, 12)]
    batches = [o for o in objs if o["type"] == "batch"]
    assert [b["baseOffset"] for b in batches if b.get("deletedSegment")] == list(range(16))
    assert all("deletedSegment" not in b for b in batches if b["baseOffset"] >= 16)
    summary = objs[-1]
    assert (summary["batches"], summary["records"]) == (6, 6), summary
    assert (summary["deletedFiles"], summary["deletedBatches"], summary["deletedRecords"]) == (
        4, 16, 16), summary


def test_a_partition_without_deleted_files_has_no_note(tmp_path):
    d = tmp_path / "ev-0"
    d.mkdir()
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(None, b"v", kg.T0)])
    w.write(d)
    res = kafkalog("dump", "--format", "json", str(d))
    assert res.code == 0 and res.err == "", res
    summary = json.loads(res.out.splitlines()[-1])
    assert (summary["batches"], summary["deletedFiles"], summary["deletedBatches"]) == (1, 0, 0)
