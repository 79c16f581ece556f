"""`kafkalog describe`: every figure checked against one computed independently with
kafka-python over the same files (kafkagen.kafka_python_read), the indexes' entry counts
against the broker-equivalent builder (indexgen), the checkpoints against the text written
here; inconsistent checkpoints and damaged files exit 1, unreadable input exits 2."""

import json
import os
import re
import shutil

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO, kafkalog, on_a_terminal

FIXTURES = os.path.join(REPO, "fixtures", "logdir")
LOG_APPEND_TIME, DELETE_HORIZON = 1, 0x40
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


# -- the independent figures -----------------------------------------------------------------------

def kp_segment(data):
    """What kafka-python reads from a segment's bytes: batches (entries), records (every record
    decoded, wrappers and v2 batches alike), first and last offsets, the time range, codecs,
    magic values. The time range of a v2 batch is its header's (baseTimestamp, the first
    record's, to maxTimestamp; maxTimestamp alone for LogAppendTime or a delete horizon); a
    legacy message's, its records'."""
    out = {"batches": 0, "records": 0, "firstOffset": None, "lastOffset": None,
           "minTimestamp": None, "maxTimestamp": None, "codecs": set(), "magic": set()}
    stamps = []
    for kb in kg.kafka_python_read(data, deep=True):
        b = kb.batch
        out["batches"] += 1
        out["records"] += len(kb.records)
        out["codecs"].add(kg.CODEC_NAMES[b.compression_type])
        out["magic"].add(b.magic)
        if b.magic >= 2:
            first, last = b.base_offset, b.last_offset
            if kb.records:
                if b.timestamp_type == LOG_APPEND_TIME or b.attributes & DELETE_HORIZON:
                    stamps.append(b.max_timestamp)
                else:
                    stamps.append(b.first_timestamp)
                stamps.append(b.max_timestamp)
        else:
            first, last = kb.records[0].offset, kb.records[-1].offset
            stamps += [r.timestamp for r in kb.records if r.timestamp is not None]
        if out["firstOffset"] is None:
            out["firstOffset"] = first
        out["lastOffset"] = last
    stamps = [t for t in stamps if t >= 0]
    if stamps:
        out["minTimestamp"], out["maxTimestamp"] = min(stamps), max(stamps)
    out["codecs"] = sorted(out["codecs"])
    out["magic"] = sorted(out["magic"])
    out["sizeBytes"] = len(data)
    return out


# -- running the command ---------------------------------------------------------------------------

def describe(*args):
    res = kafkalog("describe", *args)
    assert "Traceback" not in res.out + res.err, res.err
    return res


def describe_json(path, *options):
    """(exit code, {type: [objects]}) of ``describe --format json [OPTIONS] PATH``."""
    res = describe("--format", "json", *options, path)
    objs = [json.loads(line) for line in res.out.splitlines()]
    assert objs and objs[-1]["type"] == "summary", res.out
    by_type = {}
    for o in objs:
        by_type.setdefault(o["type"], []).append(o)
    return res.code, by_type


def segment_figures(obj):
    keys = ("batches", "records", "firstOffset", "lastOffset", "minTimestamp", "maxTimestamp",
            "codecs", "magic", "sizeBytes")
    return {k: obj[k] for k in keys}


def write(directory, segments, **kw):
    return ig.write_partition(str(directory), segments, **kw)


def write_checkpoints(log_dir, **offsets):
    """The log directory's offset checkpoints: name -> [(topic, partition, offset)]."""
    names = {"recovery": "recovery-point-offset-checkpoint",
             "log_start": "log-start-offset-checkpoint",
             "hw": "replication-offset-checkpoint", "cleaner": "cleaner-offset-checkpoint"}
    for key, entries in offsets.items():
        ig.write_file(os.path.join(str(log_dir), names[key]), ig.offset_checkpoint(entries))


# -- figures -------------------------------------------------------------------------------------------

CASES = ([(0, c) for c in kg.LEGACY_CODECS] + [(1, c) for c in kg.LEGACY_CODECS]
         + [(2, c) for c in kg.V2_CODECS])


@pytest.mark.parametrize("crc", [(), ("--crc",)], ids=["headers", "crc"])
@pytest.mark.parametrize("magic,codec", CASES)
def test_segment_figures_match_kafka_python(tmp_path, magic, codec, crc):
    data = kg.sample_segment(magic, codec)
    write(tmp_path / "t-0", [(0, data)])
    code, objs = describe_json(tmp_path / "t-0", *crc)
    assert code == 0, objs
    (seg,) = objs["segment"]
    assert segment_figures(seg) == kp_segment(data)
    (part,) = objs["partition"]
    expected = kp_segment(data)
    assert (part["topic"], part["partition"]) == ("t", 0)
    assert (seg["topic"], seg["partition"]) == ("t", 0)
    assert part["logStartOffset"] == 0
    assert part["logEndOffset"] == expected["lastOffset"] + 1
    assert (part["records"], part["batches"], part["sizeBytes"]) == (
        expected["records"], expected["batches"], len(data))


def test_compacted_batches_count_their_records_not_their_offset_range(tmp_path):
    """A batch the cleaner left with gaps keeps lastOffsetDelta: its records are the header's
    count; an emptied control batch holds none."""
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k%d" % i, kg.filler(i), kg.T0 + i) for i in range(3)], "zstd",
             offset_deltas=[0, 5, 9])
    w.add_v2([kg.Rec(b"a", b"x", kg.T0 + 20)], gap=4)
    w.add_empty_control(4000, 0, last_offset_delta=2)
    w.add_v2([kg.Rec(b"k%d" % i, kg.filler(i), kg.T0 + 30 + i) for i in range(4)], "lz4",
             offset_deltas=[1, 2, 6, 7])
    data = w.data()
    write(tmp_path / "c-0", [(0, data)])
    code, objs = describe_json(tmp_path / "c-0")
    (seg,) = objs["segment"]
    assert segment_figures(seg) == kp_segment(data)
    assert seg["records"] == 3 + 1 + 0 + 4
    assert objs["partition"][0]["logEndOffset"] == w.next_offset
    assert code == 0


def test_partition_of_segments_with_an_empty_active_one(tmp_path):
    """Several segments, the last one empty (just rolled): the log end offset is its base
    offset; each segment's figures and index entry counts are kafka-python's and the broker's."""
    first, end1 = ig.busy_segment(0, n_batches=40, codec="gzip")
    second, end2 = ig.busy_segment(end1, n_batches=30, seed=1)
    files = write(tmp_path / "p-3", [(0, first), (end1, second), (end2, b"")],
                  preallocate_active=True)
    code, objs = describe_json(tmp_path / "p-3")
    assert code == 0, objs
    segs = objs["segment"]
    assert [s["baseOffset"] for s in segs] == [0, end1, end2]
    for s, data, f in zip(segs, (first, second), files):
        assert segment_figures(s) == kp_segment(data)
        assert s["indexEntries"] == len(f.indexes.offset_entries)
        assert s["timeIndexEntries"] == len(f.indexes.time_entries)
    assert segs[0]["indexEntries"] > 0
    empty = segs[2]
    assert (empty["records"], empty["batches"], empty["firstOffset"], empty["sizeBytes"]) == (
        0, 0, None, 0)
    assert (empty["indexEntries"], empty["timeIndexEntries"], empty["active"]) == (0, 0, True)
    (part,) = objs["partition"]
    assert part["logEndOffset"] == end2
    kp = [kp_segment(first), kp_segment(second)]
    assert part["records"] == sum(k["records"] for k in kp)
    assert part["batches"] == sum(k["batches"] for k in kp)
    assert part["sizeBytes"] == len(first) + len(second)
    assert part["segments"] == 3


def test_header_time_range_is_the_records_time_range(tmp_path):
    """For batches as producers write them (the first record first in time or not), the
    header range equals the range over every record kafka-python decodes."""
    data, _ = ig.busy_segment(0, n_batches=12, backwards_every=4, codec="lz4")
    write(tmp_path / "t-0", [(0, data)])
    _, objs = describe_json(tmp_path / "t-0")
    stamps = [r.timestamp for kb in kg.kafka_python_read(data) for r in kb.records]
    (seg,) = objs["segment"]
    assert (seg["minTimestamp"], seg["maxTimestamp"]) == (min(stamps), max(stamps))


@pytest.mark.parametrize("kind", ["log_append_time", "delete_horizon"])
def test_time_range_of_batches_whose_base_timestamp_is_not_a_record_time(tmp_path, kind):
    """A LogAppendTime batch's records all carry its maxTimestamp; a delete horizon takes the
    place of baseTimestamp: either way the batch spans its maxTimestamp alone."""
    w = kg.SegmentWriter(0)
    recs = [kg.Rec(b"k%d" % i, kg.filler(i), kg.T0 + 10 + i) for i in range(3)]
    if kind == "log_append_time":
        w.add_v2(recs, "gzip", log_append_time=kg.T0 + 5000)
        expected = (kg.T0 + 5000, kg.T0 + 5000)
    else:
        w.add_v2(recs, "gzip", delete_horizon_ms=kg.T0 + 86400000)
        expected = (kg.T0 + 12, kg.T0 + 12)
    write(tmp_path / "t-0", [(0, w.data())])
    _, objs = describe_json(tmp_path / "t-0")
    (seg,) = objs["segment"]
    assert (seg["minTimestamp"], seg["maxTimestamp"]) == expected
    assert segment_figures(seg) == kp_segment(w.data())


def _kp_partition(directory):
    segs = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    figures = []
    for n in segs:
        with open(os.path.join(directory, n), "rb") as f:
            figures.append((int(n[:20]), kp_segment(f.read())))
    return figures


def _checkpoint(path):
    with open(path) as f:
        lines = f.read().splitlines()[2:]
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines)}


def _epochs(path):
    with open(path) as f:
        lines = f.read().splitlines()[2:]
    return [{"epoch": int(e), "startOffset": int(o)} for e, o in (line.split() for line in lines)]


def test_shipped_fixtures(tmp_path):
    code, objs = describe_json(FIXTURES)
    assert code == 0, objs.get("problem")
    assert "problem" not in objs
    parts = {(p["topic"], p["partition"]): p for p in objs["partition"]}
    dirs = sorted(d for d in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, d)))
    assert sorted("%s-%d" % k for k in parts) == dirs
    recovery = _checkpoint(os.path.join(FIXTURES, "recovery-point-offset-checkpoint"))
    hw = _checkpoint(os.path.join(FIXTURES, "replication-offset-checkpoint"))
    segs = {}
    for s in objs["segment"]:
        segs.setdefault((s["topic"], s["partition"]), []).append(s)
    for key, part in parts.items():
        directory = os.path.join(FIXTURES, "%s-%d" % key)
        kp = _kp_partition(directory)
        assert [(s["baseOffset"], segment_figures(s)) for s in segs[key]] == kp
        assert part["logEndOffset"] == kp[-1][1]["lastOffset"] + 1
        assert part["logStartOffset"] == kp[0][0]
        assert part["records"] == sum(k["records"] for _, k in kp)
        assert part["recoveryPoint"] == recovery[key]
        assert part["highWatermark"] == hw[key]
        assert part["leaderEpochs"] == _epochs(os.path.join(directory, "leader-epoch-checkpoint"))
        snaps = sorted(n for n in os.listdir(directory) if n.endswith(".snapshot"))
        assert [s["offset"] for s in part["producerSnapshots"]] == [int(n[:20]) for n in snaps]
    summary = objs["summary"][0]
    assert summary["consistent"] is True
    assert summary["records"] == sum(p["records"] for p in parts.values())
    assert summary["topics"] == len({t for t, _ in parts})


def test_json_vocabulary(tmp_path):
    """camelCase keys, no spaces; every partition, segment, problem and note object carries
    topic and partition; the summary comes last."""
    shutil.copytree(FIXTURES, tmp_path / "logdir")
    write_checkpoints(tmp_path / "logdir", recovery=[("orders", 0, 999)])
    res = describe("--format", "json", tmp_path / "logdir")
    objs = [json.loads(line) for line in res.out.splitlines()]
    assert {o["type"] for o in objs} >= {"partition", "segment", "problem", "summary"}
    for o in objs:
        bad = [k for k in o if not CAMEL.match(k)]
        assert not bad, o
        if o["type"] != "summary":
            assert "topic" in o and "partition" in o, o
    assert objs[-1]["type"] == "summary" and [o["type"] for o in objs].count("summary") == 1


# -- inconsistencies -----------------------------------------------------------------------------------

def _consistent_partition(log_dir):
    data, end = ig.busy_segment(100, n_batches=10)
    write(os.path.join(str(log_dir), "orders-0"), [(100, data)])
    return end


def test_consistent_checkpoints_exit_0(tmp_path):
    end = _consistent_partition(tmp_path)
    write_checkpoints(tmp_path, recovery=[("orders", 0, end)], log_start=[("orders", 0, 105)],
                      hw=[("orders", 0, end)], cleaner=[("orders", 0, 100)])
    code, objs = describe_json(tmp_path)
    assert code == 0, objs.get("problem")
    (part,) = objs["partition"]
    assert (part["recoveryPoint"], part["highWatermark"], part["cleanerOffset"]) == (end, end, 100)
    assert (part["checkpointedLogStartOffset"], part["logStartOffset"]) == (105, 105)
    assert part["logEndOffset"] == end


@pytest.mark.parametrize("checkpoints,kind", [
    ({"recovery": "end+1"}, "recovery_point_past_end"),
    ({"log_start": "end+5"}, "log_start_past_end"),
    ({"hw": "end+1"}, "high_watermark_out_of_range"),
    ({"hw": 100, "log_start": 103}, "high_watermark_out_of_range"),
])
def test_inconsistent_checkpoints_exit_1(tmp_path, checkpoints, kind):
    end = _consistent_partition(tmp_path)
    entries = {k: [("orders", 0, end + int(v[4:]) if isinstance(v, str) else v)]
               for k, v in checkpoints.items()}
    write_checkpoints(tmp_path, **entries)
    code, objs = describe_json(tmp_path)
    assert code == 1
    assert [p["kind"] for p in objs["problem"]] == [kind]
    problem = objs["problem"][0]
    assert (problem["topic"], problem["partition"]) == ("orders", 0)
    assert objs["summary"][0]["consistent"] is False


def test_log_start_below_the_first_segment_is_a_note(tmp_path):
    """The broker takes the first segment's base offset then (LogLoader): no problem."""
    _consistent_partition(tmp_path)
    write_checkpoints(tmp_path, log_start=[("orders", 0, 50)])
    code, objs = describe_json(tmp_path)
    assert code == 0
    assert [n["kind"] for n in objs["note"]] == ["log_start_below_log"]
    assert objs["partition"][0]["logStartOffset"] == 100


def test_truncated_segment_is_a_problem(tmp_path):
    data = kg.sample_segment(2, "gzip")
    cut = kg.truncated(data, 10)
    write(tmp_path / "t-0", [(0, cut)])
    code, objs = describe_json(tmp_path / "t-0")
    assert code == 1
    assert [p["kind"] for p in objs["problem"]] == ["invalid_bytes"]
    kp = kp_segment(cut)  # kafka-python stops at the incomplete entry as well
    assert segment_figures(objs["segment"][0]) == dict(kp, sizeBytes=len(cut))


def test_crc_mismatch_is_a_problem_with_crc(tmp_path):
    """--crc reads every byte and computes each batch's CRC; by default only headers are
    read (the flipped bit lies in a record, outside every header)."""
    data = kg.sample_segment(2, "none")
    write(tmp_path / "t-0", [(0, kg.flip_bit(data, 100))])
    code, objs = describe_json(tmp_path / "t-0", "--crc")
    assert code == 1
    assert [p["kind"] for p in objs["problem"]] == ["crc_mismatch"]
    code, objs = describe_json(tmp_path / "t-0")
    assert code == 0
    assert segment_figures(objs["segment"][0]) == kp_segment(data)


@pytest.mark.parametrize("crc", [(), ("--crc",)], ids=["headers", "crc"])
def test_offsets_going_back_within_a_segment_are_a_problem(tmp_path, crc):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k%d" % i, b"v", kg.T0 + i) for i in range(5)])
    w.add_v2([kg.Rec(b"again", b"v", kg.T0 + 9)], gap=-3)  # offset 2 again
    w.add_v2([kg.Rec(b"k", b"v", kg.T0 + 10)], gap=10)
    write(tmp_path / "t-0", [(0, w.data())])
    code, objs = describe_json(tmp_path / "t-0", *crc)
    assert code == 1
    (problem,) = objs["problem"]
    assert problem["kind"] == "offset_order"
    assert "last offset 2 does not follow offset 4" in problem["message"]
    seg = objs["segment"][0]
    assert segment_figures(seg) == dict(kp_segment(w.data()), lastOffset=w.next_offset - 1)
    assert objs["partition"][0]["logEndOffset"] == w.next_offset


@pytest.mark.parametrize("crc", [(), ("--crc",)], ids=["headers", "crc"])
def test_legacy_and_v2_in_one_segment(tmp_path, crc):
    """A log whose message format was upgraded: v0 and v1 messages and wrappers, then v2
    batches, one segment (the header walk hands each legacy entry to the shared scan)."""
    w = kg.SegmentWriter(0)
    w.add_legacy(0, [kg.Rec(b"a%d" % i, kg.filler(i), kg.T0 + i) for i in range(3)])
    w.add_legacy(0, [kg.Rec(b"b%d" % i, kg.filler(i), kg.T0 + i) for i in range(4)], "gzip")
    w.add_v2([kg.Rec(b"c%d" % i, kg.filler(i), kg.T0 + 20 + i) for i in range(3)], "lz4")
    w.add_legacy(1, [kg.Rec(b"d%d" % i, kg.filler(i), kg.T0 + 30 + i) for i in range(5)],
                 "snappy", gap=2)
    w.add_v2([kg.Rec(b"e%d" % i, kg.filler(i), kg.T0 + 40 + i) for i in range(2)])
    data = w.data()
    write(tmp_path / "m-0", [(0, data)])
    code, objs = describe_json(tmp_path / "m-0", *crc)
    assert code == 0, objs.get("problem")
    assert segment_figures(objs["segment"][0]) == kp_segment(data)
    assert objs["segment"][0]["magic"] == [0, 1, 2]


def test_index_failing_the_sanity_check_is_a_problem(tmp_path):
    data, _ = ig.busy_segment(0, n_batches=30)
    files = write(tmp_path / "t-0", [(0, data), (kp_segment(data)["lastOffset"] + 1, b"")])
    with open(files[0].paths["index"], "ab") as f:
        f.write(b"\x00\x00\x00")  # not a whole number of entries
    code, objs = describe_json(tmp_path / "t-0")
    assert code == 1
    (problem,) = objs["problem"]
    assert problem["kind"] == "index_sanity"
    assert problem["file"].endswith("00000000000000000000.index")


def test_overlapping_segments_are_a_problem(tmp_path):
    first, _ = ig.busy_segment(0, n_batches=5)
    second, _ = ig.busy_segment(10, n_batches=5)  # the first reaches offset 14
    write(tmp_path / "t-0", [(0, first), (10, second)])
    code, objs = describe_json(tmp_path / "t-0")
    assert code == 1
    assert [p["kind"] for p in objs["problem"]] == ["segment_overlap"]


def test_snapshots_and_leader_epochs(tmp_path):
    _consistent_partition(tmp_path)
    part = tmp_path / "orders-0"
    ig.write_file(str(part / "leader-epoch-checkpoint"), ig.leader_epoch_checkpoint([(1, 100)]))
    ig.write_snapshots(part, [100])
    entry = ig.SnapshotEntry(7, 0, 4, 120, 4, kg.T0, -1, -1)
    ig.write_file(str(part / ("%020d.snapshot" % 130)), ig.encode_snapshot([entry]))
    code, objs = describe_json(part)
    assert code == 0, objs.get("problem")
    p = objs["partition"][0]
    assert p["leaderEpochs"] == [{"epoch": 1, "startOffset": 100}]
    assert p["producerSnapshots"] == [{"offset": 100, "producers": 0},
                                      {"offset": 130, "producers": 1}]
    # a corrupt snapshot: a problem
    with open(str(part / ("%020d.snapshot" % 100)), "r+b") as f:
        f.seek(3)
        f.write(b"\xff")
    code, objs = describe_json(part)
    assert code == 1
    assert [x["kind"] for x in objs["problem"]] == ["unreadable"]
    assert objs["partition"][0]["producerSnapshots"][0] == {"offset": 100, "producers": None}


def test_a_segment_file_alone(tmp_path):
    data = kg.sample_segment(1, "gzip")
    write(tmp_path / "t-0", [(0, data)])
    code, objs = describe_json(tmp_path / "t-0" / "00000000000000000000.log")
    assert code == 0
    assert "partition" not in objs
    (seg,) = objs["segment"]
    assert segment_figures(seg) == kp_segment(data)
    assert (seg["topic"], seg["partition"]) == ("t", 0)


# -- bad input -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", ["missing", "not-a-log", "empty-dir"])
def test_unreadable_path_exits_2_with_one_line(tmp_path, make):
    path = tmp_path / "x"
    if make == "not-a-log":
        path = tmp_path / "notes.txt"
        path.write_text("hello")
    elif make == "empty-dir":
        path.mkdir()
    for fmt in ("text", "json"):
        res = describe("--format", fmt, path)
        assert res.code == 2
        assert res.out == ""
        assert len(res.err.strip().splitlines()) == 1, res.err
        assert res.err.startswith("kafkalog: "), res.err


# -- text output: lines on a pipe, tables on a terminal, never both ----------------------------------

def test_text_on_a_pipe_is_lines(tmp_path):
    res = describe(FIXTURES)
    assert res.code == 0
    lines = res.out.splitlines()
    assert not any(c in res.out for c in "┏━│┃")
    assert sum("orders-0/00000000000000000042.log: offsets 42-69, 24 records" in line
               for line in lines) == 1
    assert lines[-1].endswith("consistent")


def test_text_on_a_terminal_is_tables_once(tmp_path):
    code, out = on_a_terminal(["describe", FIXTURES])
    assert code == 0
    assert "segments" in out and "topic orders" in out
    assert "━" in out or "─" in out
    assert "offsets 42-69, 24 records" not in out  # the pipe's lines are not printed too
    assert out.count("00000000000000000042.log") == 1


def test_a_malformed_checkpoint_is_a_problem(tmp_path):
    _consistent_partition(tmp_path)
    ig.write_file(str(tmp_path / "recovery-point-offset-checkpoint"),
                  ig.MALFORMED_OFFSET_CHECKPOINTS["count-too-high"])
    code, objs = describe_json(tmp_path)
    assert code == 1
    (problem,) = objs["problem"]
    assert problem["kind"] == "unreadable"
    assert problem["file"].endswith("recovery-point-offset-checkpoint")
    assert objs["partition"][0]["recoveryPoint"] is None


def test_an_unreadable_segment_exits_2_and_the_others_are_described(tmp_path):
    _consistent_partition(tmp_path)
    os.makedirs(str(tmp_path / "other-0" / "00000000000000000000.log"))  # not a regular file
    res = describe("--format", "json", tmp_path)
    assert res.code == 2
    (line,) = res.err.strip().splitlines()
    assert line.startswith("kafkalog: ") and "other-0" in line
    objs = [json.loads(x) for x in res.out.splitlines()]
    assert [(o["topic"], o["partition"]) for o in objs if o["type"] == "partition"] == [
        ("orders", 0)]
    assert objs[-1]["type"] == "summary" and objs[-1]["unreadable"] == 1


def test_what_the_broker_takes_in_its_stride_is_a_note(tmp_path):
    """A sealed segment without its .index (rebuilt at load), a leader epoch and a producer
    snapshot past the log end (dropped at load), a cleaner offset past the log end (the
    cleaner starts over): notes, exit 0."""
    first, end1 = ig.busy_segment(0, n_batches=10)
    second, end2 = ig.busy_segment(end1, n_batches=5)
    part = tmp_path / "orders-0"
    files = write(part, [(0, first), (end1, second)])
    os.remove(files[0].paths["index"])
    ig.write_file(str(part / "leader-epoch-checkpoint"),
                  ig.leader_epoch_checkpoint([(1, 0), (2, end2 + 5)]))
    ig.write_snapshots(part, [end1, end2 + 7])
    write_checkpoints(tmp_path, cleaner=[("orders", 0, end2 + 1)])
    code, objs = describe_json(tmp_path)
    assert code == 0, objs.get("problem")
    assert "problem" not in objs
    assert sorted(n["kind"] for n in objs["note"]) == [
        "cleaner_offset_out_of_range", "index_missing", "leader_epoch_past_end",
        "snapshot_past_end"]
    assert objs["segment"][0]["indexEntries"] is None
    assert objs["summary"][0]["notes"] == 4


@pytest.mark.parametrize("crc", [(), ("--crc",)], ids=["headers", "crc"])
def test_no_v2_batch_is_decompressed(tmp_path, crc):
    """A gzip v2 batch whose records area is not gzip at all (its CRC made right): its
    records are its header's count; nothing tries to inflate it (dump would fail on it)."""
    plain = kg.v2_batch([kg.Rec(b"k%d" % i, b"v", kg.T0 + i) for i in range(7)])
    bogus = kg.recompress_v2(plain, "gzip", lambda raw: b"not gzip at all " * 8)
    data = bogus + kg.v2_batch([kg.Rec(b"z", b"v", kg.T0 + 9)], base_offset=7)
    kg.write_segment(str(tmp_path / "t-0"), 0, data)  # no indexes: the active segment
    code, objs = describe_json(tmp_path / "t-0", *crc)
    assert code == 0, objs.get("problem")
    seg = objs["segment"][0]
    kp = kg.kafka_python_read(data, deep=False)
    assert seg["records"] == sum(kb.batch.records_count for kb in kp) == 8
    assert (seg["batches"], seg["codecs"], seg["lastOffset"]) == (2, ["gzip", "none"], 7)
    assert dump_fails(tmp_path / "t-0")


def dump_fails(path):
    return kafkalog("dump", "--deep-iteration", path).code != 0
