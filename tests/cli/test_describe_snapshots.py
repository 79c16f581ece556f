"""`kafkalog describe` of KRaft snapshots (``<20-digit end offset>-<10-digit epoch>.checkpoint``,
Snapshots.java) in a metadata partition, of a snapshot file named alone, and of several paths in
one run. The snapshots are written by tests/cli/test_kraft_snapshots.py's builders (kafka-python
batches, control records encoded by hand from Kafka's layouts); the figures expected are
counted here from what was written."""

import json

import jsonschema
import pytest

import kafkagen as kg
from dumpcheck import kafkalog, on_a_terminal
from test_kraft_snapshots import RECORDS, snapshot_bytes, write

from kafkalog_cli.schema import load

VALIDATOR = jsonschema.Draft202012Validator(load())
# (end offset, epoch), written out of order: described by end offset, then epoch
SNAPSHOTS = [(5000, 3), (20, 1), (1000, 2), (20, 0)]


def name(end, epoch):
    return "%020d-%010d.checkpoint" % (end, epoch)


def describe(*args):
    res = kafkalog("describe", *args)
    assert "Traceback" not in res.out + res.err, res.err
    return res


def objects(res):
    objs = [json.loads(line) for line in res.out.splitlines()]
    for o in objs:
        errors = list(VALIDATOR.iter_errors(o))
        assert not errors, (o, [e.message for e in errors])
    assert objs and objs[-1]["type"] == "summary", res.out
    return objs


@pytest.fixture
def metadata(tmp_path):
    """A log directory holding a metadata partition: one segment, four snapshots (the newest
    with all of RECORDS, the others with one record) and a quorum-state file."""
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    write(part / "00000000000000000000.log", kg.v2_batch([kg.Rec(None, RECORDS[0])]))
    for end, epoch in SNAPSHOTS:
        write(part / name(end, epoch),
              snapshot_bytes(RECORDS if (end, epoch) == (5000, 3) else RECORDS[:1]))
    write(part / "quorum-state", b'{"leaderId":1}')
    return part


def counted(data):
    """(batches, records) of a snapshot's bytes as kafka-python reads them."""
    read = list(kg.kafka_python_read(data, deep=True))
    return len(read), sum(len(kb.records) for kb in read)


def test_partition_json_names_its_snapshots(metadata):
    res = describe("--format", "json", metadata.parent)
    assert res.code == 0, res
    objs = objects(res)
    (part,) = [o for o in objs if o["type"] == "partition"]
    newest = metadata / name(5000, 3)
    batches, records = counted(newest.read_bytes())
    assert part["kraftSnapshots"] == 4
    assert part["newestKraftSnapshot"] == {
        "file": str(newest), "endOffset": 5000, "epoch": 3,
        "sizeBytes": newest.stat().st_size, "records": records, "batches": batches}
    oldest = metadata / name(20, 0)
    assert part["oldestKraftSnapshot"] == {
        "file": str(oldest), "endOffset": 20, "epoch": 0, "sizeBytes": oldest.stat().st_size,
        "records": None, "batches": None}
    assert objs[-1]["kraftSnapshots"] == 4
    # the segment's figures are untouched by the snapshots beside it
    (seg,) = [o for o in objs if o["type"] == "segment"]
    assert (seg["records"], seg["batches"]) == (1, 1)


def test_partition_line_and_table_name_its_snapshots(metadata):
    newest = metadata / name(5000, 3)
    batches, records = counted(newest.read_bytes())
    res = describe(metadata)
    assert res.code == 0, res
    line = [x for x in res.out.splitlines() if x.startswith(str(metadata) + ":")][0]
    assert line.endswith("; KRaft snapshots 4, end offsets 20-5000, epochs 0-3, newest %s "
                         "(%d records, %d batches, %d B)"
                         % (newest.name, records, batches, newest.stat().st_size)), line
    assert res.out.splitlines()[-1].startswith("1 topics, 1 partitions, 1 segments, 1 records, "
                                               "1 batches, 91 B; 4 KRaft snapshots; 0 problems")
    code, out = on_a_terminal(["describe", metadata], columns=220)
    assert code == 0, out
    assert "KRaft snapshots" in out
    row = [x for x in out.splitlines() if newest.name in x]
    assert len(row) == 1, out
    cells = [c.strip() for c in row[0].replace("┃", "│").split("│") if c.strip()]
    assert cells == ["__cluster_metadata-0", newest.name, "4", "20-5000", "0-3", str(records),
                     str(batches), "%d B" % newest.stat().st_size], row


def test_partition_without_snapshots_says_none(tmp_path):
    part = tmp_path / "events-0"
    part.mkdir()
    write(part / "00000000000000000000.log", kg.v2_batch([kg.Rec(None, RECORDS[0])]))
    (obj,) = [o for o in objects(describe("--format", "json", part)) if o["type"] == "partition"]
    assert (obj["kraftSnapshots"], obj["oldestKraftSnapshot"], obj["newestKraftSnapshot"]) == (
        0, None, None)
    assert "KRaft" not in describe(part).out


def test_snapshot_file_named_alone(metadata):
    path = metadata / name(1000, 2)
    data = path.read_bytes()
    batches, records = counted(data)
    res = describe("--format", "json", path)
    assert res.code == 0, res
    objs = objects(res)
    assert objs[0] == {"type": "kraftSnapshot", "topic": "__cluster_metadata", "partition": 0,
                       "file": str(path), "endOffset": 1000, "epoch": 2,
                       "sizeBytes": len(data), "records": records, "batches": batches,
                       "problems": 0}
    assert (objs[-1]["kraftSnapshots"], objs[-1]["segments"]) == (1, 0)
    res = describe(path)
    assert res.code == 0, res
    assert res.out.splitlines()[0] == (
        "%s: KRaft snapshot, end offset 1000, epoch 2, %d records, %d batches, %d B (%d bytes)"
        % (path, records, batches, len(data), len(data)))


def test_damaged_snapshot_file_exits_1(metadata):
    path = metadata / name(1000, 2)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records: its CRC no longer holds
    path.write_bytes(bytes(data))
    res = describe("--crc", "--format", "json", path)
    assert res.code == 1, res
    objs = objects(res)
    assert objs[0]["problems"] == 1
    assert [o["kind"] for o in objs if o["type"] == "problem"] == ["crc_mismatch"]


def test_several_paths_one_report_worst_exit(metadata, tmp_path):
    other = tmp_path / "events-0"
    other.mkdir()
    write(other / "00000000000000000000.log", kg.v2_batch([kg.Rec(None, RECORDS[1])]))
    res = describe("--format", "json", metadata, other, metadata / name(20, 1))
    assert res.code == 0, res
    objs = objects(res)
    assert sorted(o["directory"] for o in objs if o["type"] == "partition") == sorted(
        [str(metadata), str(other)])
    assert [o["file"] for o in objs if o["type"] == "kraftSnapshot"] == [
        str(metadata / name(20, 1))]
    summary = objs[-1]
    assert (summary["partitions"], summary["segments"], summary["kraftSnapshots"],
            summary["consistent"]) == (2, 2, 5, True)
    # a path that cannot be read: one line for it, the others still described, exit 2
    res = describe("--format", "json", metadata, tmp_path / "missing", other)
    assert res.code == 2, res
    assert res.err.strip().splitlines() == [
        "kafkalog: %s: No such file or directory" % (tmp_path / "missing")], res.err
    objs = objects(res)
    assert len([o for o in objs if o["type"] == "partition"]) == 2
    assert (objs[-1]["unreadable"], objs[-1]["consistent"]) == (1, False)


def test_damaged_newest_snapshot_of_a_partition_exits_1(metadata):
    """The newest snapshot is read: bytes in it that hold no batch are a problem of the
    partition, said with its file; the older ones are known by name only."""
    newest = metadata / name(5000, 3)
    newest.write_bytes(newest.read_bytes()[:-5])  # its last batch cut short
    for fmt in ("json", "text"):
        res = describe("--format", fmt, metadata)
        assert res.code == 1, res
        if fmt == "json":
            objs = objects(res)
            (problem,) = [o for o in objs if o["type"] == "problem"]
            assert (problem["file"], problem["kind"]) == (str(newest), "invalid_bytes")
            (part,) = [o for o in objs if o["type"] == "partition"]
            assert part["problems"] == 1
        else:
            said = [x for x in res.out.splitlines() if "invalid_bytes" in x]
            assert len(said) == 1 and said[0].startswith(str(newest) + ": "), res.out
            assert res.out.splitlines()[-1].endswith("INCONSISTENT")
