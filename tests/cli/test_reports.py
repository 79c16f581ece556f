"""What `recover` and `retain` report: offsets and records removed, not only bytes; totals that
agree with the per-segment figures; dry runs in the conditional; one layout per output (lines on
a pipe, tables on a terminal); camelCase JSON; a dry run beside a broker holding `.lock`.

The expected figures come from kafka-python reading the same files (``kafkagen.kafka_python_read``),
never from ``kafkalog_cli``.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import kafkagen as kg
from appendcheck import lock_held
from dumpcheck import REPO, kafkalog, on_a_terminal

FIXTURES = os.path.join(REPO, "fixtures", "logdir")
SEG0, SEG1 = "%020d.log" % 0, "%020d.log" % 300
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


def copy_logdir(tmp_path):
    d = tmp_path / "logdir"
    shutil.copytree(FIXTURES, d)
    return d


def batches(path):
    with open(path, "rb") as f:
        return kg.kafka_python_read(f.read(), deep=False)


def records(kbs):
    return sum(kb.batch.records_count for kb in kbs)


def json_objs(res):
    return [json.loads(line) for line in res.out.splitlines()]


def torn_metrics(tmp_path, bad_batch=None):
    """A copy of the fixtures whose metrics-0 first segment (offsets 0-299, 30 batches) is
    truncated in the middle of its last batch, and, with ``bad_batch``, a byte of that batch's
    records flipped (its CRC fails: it and the whole batches after it are cut). The second
    segment (offsets 300-599) exists, so recovery sets it aside."""
    d = copy_logdir(tmp_path)
    part = d / "metrics-0"
    kbs0 = batches(part / SEG0)
    kbs1 = batches(part / SEG1)
    torn_at = kbs0[-1].position + 100
    with open(part / SEG0, "r+b") as f:
        f.truncate(torn_at)
        if bad_batch is not None:
            at = kbs0[bad_batch].position + kbs0[bad_batch].size - 5
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 0xFF]))
    return d, part, kbs0, kbs1, torn_at


# -- recover ------------------------------------------------------------------------------------

def test_recover_torn_tail_reports_the_segment_set_aside(tmp_path):
    """A segment truncated mid-batch while a later segment exists. The
    segment keeps its whole batches; the torn tail holds no whole batch; the later segment
    (offsets 300-599) is set aside and counted in the partition's and the summary's totals."""
    d, part, kbs0, kbs1, torn_at = torn_metrics(tmp_path)
    kept = kbs0[:-1]
    end = kept[-1].position + kept[-1].size
    size1 = os.path.getsize(part / SEG1)
    for dry in (True, False):
        args = ["--dry-run"] if dry else []
        res = kafkalog("recover", "--full", "--format", "json", *args, part)
        assert res.code == 1, res
        objs = json_objs(res)
        p = [o for o in objs if o["type"] == "partition"]
        segs = {os.path.basename(o["file"]): o for o in objs if o["type"] == "segment"}
        assert len(p) == 1
        p = p[0]
        s0, s1 = segs[SEG0], segs[SEG1]
        assert (s0["firstOffset"], s0["lastOffset"], s0["records"], s0["bytesKept"]) == (
            0, kept[-1].batch.last_offset, records(kept), end)
        assert (s0["bytesCut"], s0["recordsRemoved"], s0["bytesWithoutBatch"]) == (
            torn_at - end, 0, torn_at - end)
        assert s0["firstOffsetRemoved"] is None and not s0["setAside"]
        assert s1["setAside"] and s1["bytesSetAside"] == size1 and s1["bytesCut"] == 0
        assert (s1["firstOffsetRemoved"], s1["lastOffsetRemoved"], s1["recordsRemoved"]) == (
            kbs1[0].batch.base_offset, kbs1[-1].batch.last_offset, records(kbs1))
        assert p["logEndOffset"] == kept[-1].batch.last_offset + 1
        assert (p["recordsRemoved"], p["bytesCut"], p["bytesSetAside"], p["segmentsSetAside"]) \
            == (records(kbs1), torn_at - end, size1, 1)
        assert (p["firstOffsetRemoved"], p["lastOffsetRemoved"]) == (300, 599)
        summary = objs[-1]
        assert summary["type"] == "summary" and summary["command"] == "recover"
        # the summary agrees with the segments
        assert summary["bytesCut"] == sum(o["bytesCut"] for o in segs.values())
        assert summary["bytesSetAside"] == sum(o["bytesSetAside"] for o in segs.values())
        assert summary["recordsRemoved"] == sum(o["recordsRemoved"] for o in segs.values())
        assert summary["logEndOffsets"] == [{"topic": "metrics", "partition": 0,
                                             "logEndOffset": p["logEndOffset"]}]
        assert summary["dryRun"] is dry and all(o["dryRun"] is dry for o in segs.values())
        if dry:
            text = kafkalog("recover", "--full", "--dry-run", part)
            lines = text.out.splitlines()
            assert lines[-1] == (
                "1 partition, 1 to repair: %d records would be removed; %d bytes would be cut "
                "from 1 segment; 1 segment (%d bytes) would be set aside; %d records of a torn "
                "batch would be lost; new log end offset %d (dry run: nothing changed)"
                % (records(kbs1), torn_at - end, size1, kbs0[-1].batch.records_count,
                   p["logEndOffset"]))
            line1 = [line for line in lines if line.startswith(str(part / SEG1))]
            assert line1 == ["%s: after a corrupt segment: would be moved to quarantine: "
                             "offsets 300-599, 300 records, %d bytes" % (part / SEG1, size1)]
            line0 = [line for line in lines if line.startswith(str(part / SEG0))]
            assert len(line0) == 1
            assert ("would keep offsets 0-%d, %d records, %d bytes; would be cut: no whole "
                    "batch, %d bytes, at position %d" % (kept[-1].batch.last_offset,
                                                         records(kept), end, torn_at - end,
                                                         end)) in line0[0]
            # the conditional everywhere: no change said as done
            for line in lines:
                assert not re.search(r"(?<!would be )(moved to quarantine|written \(|cut:)",
                                     line), line
                assert not re.search(r"(?<!would )keep", line), line
            assert lines[0] == (
                "%s: recovery point 600, --full; new log end offset %d; would remove offsets "
                "300-599 (300 records): %d bytes would be cut, 1 segment (%d bytes) would be set "
                "aside; a torn batch, offsets %d-%d (%d records), would be lost"
                % (part, p["logEndOffset"], torn_at - end, size1, kbs0[-1].batch.base_offset,
                   kbs0[-1].batch.last_offset, kbs0[-1].batch.records_count))
    assert sorted(os.listdir(part / "kafkalog-quarantine"))


def test_recover_torn_batch_offsets_and_records_from_its_header(tmp_path):
    """The torn last batch's header is whole (100 of its bytes are there): its offsets and
    record count, as kafka-python reads them from the intact file, are reported lost (would be,
    in a dry run) in the JSON, the lines on a pipe and the table on a terminal."""
    d, part, kbs0, kbs1, torn_at = torn_metrics(tmp_path)
    torn = kbs0[-1]
    first, last, count = torn.batch.base_offset, torn.batch.last_offset, torn.batch.records_count
    assert torn_at - torn.position == 100 and (first, last, count) == (290, 299, 10)
    for dry in (True, False):
        args = ["--dry-run"] if dry else []
        lost = "would be lost" if dry else "lost"
        if dry:
            # the table on a terminal
            code, out = on_a_terminal(["recover", "--full", "--dry-run", part], columns=250)
            assert code == 1, out
            assert "torn batch: offsets %d-%d, %d records would be lost" % (first, last, count) \
                in out, out
        # text on a pipe
        code, out = on_a_pipe(["recover", "--full", *args, part])
        assert code == 1, out
        line0 = [line for line in out.splitlines() if line.startswith(str(part / SEG0))]
        assert ("at position %d, offset %d on (" % (torn.position, first)) in line0[0], line0
        assert ("; the last %d bytes are the start of a torn batch, offsets %d-%d (%d records): "
                "%s;" % (torn_at - torn.position, first, last, count, lost)) in line0[0], line0
        partition = out.splitlines()[0]
        assert partition.endswith("; a torn batch, offsets %d-%d (%d records), %s"
                                  % (first, last, count, lost)), partition
        assert ("; %d records of a torn batch %s;" % (count, lost)) in out.splitlines()[-1]
        if not dry:
            break
        # JSON
        res = kafkalog("recover", "--full", "--format", "json", *args, part)
        assert res.code == 1, res
        objs = json_objs(res)
        s0 = [o for o in objs if o["type"] == "segment" and o["file"].endswith(SEG0)][0]
        assert (s0["tornFirstOffset"], s0["tornLastOffset"], s0["tornRecords"],
                s0["tornOffsetsKnown"], s0["bytesWithoutBatch"], s0["firstBadOffset"]) == (
            first, last, count, True, torn_at - torn.position, first)
        s1 = [o for o in objs if o["type"] == "segment" and o["file"].endswith(SEG1)][0]
        assert (s1["tornRecords"], s1["tornOffsetsKnown"]) == (None, None)
        p = [o for o in objs if o["type"] == "partition"][0]
        assert (p["tornFirstOffset"], p["tornLastOffset"], p["tornRecords"],
                p["tornBatchesOffsetsUnknown"]) == (first, last, count, 0)
        assert (objs[-1]["tornRecords"], objs[-1]["tornBatches"],
                objs[-1]["tornBatchesOffsetsUnknown"]) == (count, 1, 0)


def test_recover_torn_batch_without_a_readable_header(tmp_path):
    """30 bytes of the last batch (its header is 61): the offsets are said to be unknown;
    zeros after the last batch (a pre-allocated file) likewise."""
    d, part, kbs0, kbs1, _ = torn_metrics(tmp_path)
    torn = kbs0[-1]
    with open(part / SEG0, "r+b") as f:
        f.truncate(torn.position + 30)
    res = kafkalog("recover", "--full", "--dry-run", "--format", "json", part)
    assert res.code == 1, res
    objs = json_objs(res)
    s0 = [o for o in objs if o["type"] == "segment" and o["file"].endswith(SEG0)][0]
    assert (s0["tornFirstOffset"], s0["tornLastOffset"], s0["tornRecords"],
            s0["tornOffsetsKnown"], s0["bytesWithoutBatch"]) == (None, None, None, False, 30)
    p = [o for o in objs if o["type"] == "partition"][0]
    assert (p["tornRecords"], p["tornFirstOffset"], p["tornBatchesOffsetsUnknown"]) == (0, None, 1)
    assert (objs[-1]["tornRecords"], objs[-1]["tornBatches"],
            objs[-1]["tornBatchesOffsetsUnknown"]) == (0, 1, 1)
    code, out = on_a_pipe(["recover", "--full", "--dry-run", part])
    assert code == 1, out
    assert ("the last 30 bytes hold no batch header that can be read: the offsets of the torn "
            "batch are unknown") in out, out
    assert out.splitlines()[0].endswith("; a torn batch of unknown offsets would be cut"), out
    # zeros where the next batch would start: no header, offsets unknown
    with open(part / SEG0, "r+b") as f:
        f.truncate(torn.position)
        f.seek(torn.position)
        f.write(b"\0" * 4096)
    res = kafkalog("recover", "--full", "--dry-run", "--format", "json", part)
    s0 = [o for o in json_objs(res) if o["type"] == "segment" and o["file"].endswith(SEG0)][0]
    assert (s0["tornOffsetsKnown"], s0["bytesWithoutBatch"]) == (False, 4096), s0


def test_recover_whole_batches_cut_are_counted(tmp_path):
    """A batch whose CRC fails: it and the whole batches after it are cut (their offsets and
    records said), then the torn bytes holding no whole batch."""
    d, part, kbs0, kbs1, torn_at = torn_metrics(tmp_path, bad_batch=20)
    cut = kbs0[20:-1]   # whole batches from the bad one on (the last is torn)
    end = kbs0[20].position
    res = kafkalog("recover", "--full", "--dry-run", "--format", "json", part)
    assert res.code == 1, res
    objs = json_objs(res)
    s0 = [o for o in objs if o["type"] == "segment" and o["file"].endswith(SEG0)][0]
    assert (s0["firstOffsetRemoved"], s0["lastOffsetRemoved"], s0["recordsRemoved"]) == (
        cut[0].batch.base_offset, cut[-1].batch.last_offset, records(cut))
    last_whole = cut[-1].position + cut[-1].size
    assert (s0["bytesCut"], s0["bytesWithoutBatch"]) == (torn_at - end, torn_at - last_whole)
    assert s0["lastOffset"] == kbs0[19].batch.last_offset
    p = [o for o in objs if o["type"] == "partition"][0]
    assert (p["firstOffsetRemoved"], p["lastOffsetRemoved"]) == (cut[0].batch.base_offset, 599)
    assert p["recordsRemoved"] == records(cut) + records(kbs1)
    assert p["logEndOffset"] == cut[0].batch.base_offset
    text = kafkalog("recover", "--full", part)
    line0 = [line for line in text.out.splitlines() if line.startswith(str(part / SEG0))][0]
    assert ("cut: offsets %d-%d, %d records, %d bytes (the last %d hold no batch), at position %d"
            % (cut[0].batch.base_offset, cut[-1].batch.last_offset, records(cut), torn_at - end,
               torn_at - last_whole, end)) in line0, line0


def test_recover_json_keys_are_camel_case(tmp_path):
    d, part, *_ = torn_metrics(tmp_path)
    for args in (("--dry-run",), ()):
        res = kafkalog("recover", "--full", "--format", "json", *args, d)
        objs = json_objs(res)
        assert objs[-1]["type"] == "summary"
        for o in objs:
            assert all(CAMEL.match(k) for k in o), o
            assert CAMEL.match(o["type"]), o
            if o["type"] != "summary":
                assert "topic" in o and "partition" in o, o
        assert {"partition", "segment", "moved", "recoveryPoint"} <= {o["type"] for o in objs}
        seg = [o for o in objs if o["type"] == "segment"][0]
        assert {"baseOffset", "bytesCut", "recordsRemoved", "firstOffsetRemoved",
                "lastOffsetRemoved", "dryRun", "topic", "partition"} <= set(seg)


# -- retain -------------------------------------------------------------------------------------

def test_retain_reports_offsets_records_and_the_new_log_start(tmp_path):
    d = copy_logdir(tmp_path)
    part = d / "metrics-0"
    kbs0 = batches(part / SEG0)
    size0 = os.path.getsize(part / SEG0)
    args = ["--log-start-offset", 300, "--file-delete-delay-ms", 0]
    res = kafkalog("retain", "--dry-run", "--format", "json", *args, part)
    assert res.code == 1, res
    objs = json_objs(res)
    for o in objs:
        assert all(CAMEL.match(k) for k in o), o
        if o["type"] != "summary":
            assert (o["topic"], o["partition"]) == ("metrics", 0), o
    p, s0, s1, summary = objs
    assert (p["type"], p["logStartOffset"], p["previousLogStartOffset"], p["recordsRemoved"],
            p["bytesRemoved"], p["segmentsDeleted"], p["dryRun"]) == (
        "partition", 300, 0, records(kbs0), size0, 1, True)
    assert (p["firstOffsetRemoved"], p["lastOffsetRemoved"]) == (0, kbs0[-1].batch.last_offset)
    assert (s0["baseOffset"], s0["firstOffset"], s0["lastOffset"], s0["records"],
            s0["sizeBytes"], s0["fate"]) == (0, 0, 299, records(kbs0), size0, "deleted")
    assert s1["fate"] == "kept" and s1["records"] == 300
    assert summary == {"type": "summary", "command": "retain", "partitions": 1,
                       "segmentsDeleted": 1, "recordsRemoved": 300, "bytesRemoved": size0,
                       "logStartOffsets": [{"topic": "metrics", "partition": 0,
                                            "logStartOffset": 300}],
                       "deletedFilesRemoved": 0, "dryRun": True}
    res = kafkalog("retain", "--dry-run", *args, part)
    lines = res.out.splitlines()
    assert lines[0].endswith("; offsets 0-299 (300 records, 1 segment, %d bytes) would be "
                             "deleted; new log start offset would be 300" % size0), lines
    assert lines[1] == "%s: would be deleted (log start offset 300): offsets 0-299, 300 records, " \
        "%d bytes" % (part / SEG0, size0)
    assert lines[-1] == ("1 partition: 1 segment (300 records, %d bytes) would be deleted; new "
                         "log start offset 300 (dry run: nothing changed)" % size0)
    res = kafkalog("retain", *args, part)
    assert res.code == 0, res
    lines = res.out.splitlines()
    assert lines[0].endswith("; offsets 0-299 (300 records, 1 segment, %d bytes) deleted; new "
                             "log start offset 300" % size0), lines
    assert lines[-1] == ("1 partition: 1 segment (300 records, %d bytes) deleted; new log start "
                         "offset 300" % size0)
    assert not os.path.exists(part / SEG0)


# -- one layout per output ----------------------------------------------------------------------

def on_a_pipe(args):
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli"] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=120)
    return p.returncode, p.stdout.decode() + p.stderr.decode()


def named(out, name):
    """How many times ``name`` is what a line or table row is about (a mention inside a reason,
    "after the corrupt segment X", is not)."""
    return out.count(name) - out.count("corrupt segment " + name)


def test_recover_shows_its_output_once_on_a_terminal_and_on_a_pipe(tmp_path):
    d, part, *_ = torn_metrics(tmp_path)
    args = ["recover", "--full", "--dry-run", part]
    code, out = on_a_terminal(args, stderr_too=True)
    assert code == 1, out
    assert "━" in out or "─" in out, out          # a table
    assert named(out, SEG0) == 1 and named(out, SEG1) == 1, out
    assert out.count("1 partition, 1 to repair") == 1, out
    assert "58.8 KiB" in out, out                  # bytes human-readable on a terminal
    code, out = on_a_pipe(args)
    assert code == 1, out
    assert not any(c in out for c in "┏━│┃─"), out  # no table
    assert named(out, SEG0) == 1 and named(out, SEG1) == 1, out
    assert out.count("1 partition, 1 to repair") == 1, out


def test_retain_shows_its_output_once_on_a_terminal_and_on_a_pipe(tmp_path):
    d = copy_logdir(tmp_path)
    part = d / "metrics-0"
    args = ["retain", "--dry-run", "--log-start-offset", 300, part]
    # a terminal just wide enough for the table (test_table_widths.py: narrower ones)
    code, out = on_a_terminal(args, columns=120, stderr_too=True)
    assert code == 1, out
    assert "━" in out or "─" in out, out
    assert out.count(SEG0) == 1 and out.count(SEG1) == 1, out
    assert out.count("1 partition: 1 segment") == 1, out
    assert "58.8 KiB" in out and "60216" not in out, out
    code, out = on_a_pipe(args)
    assert code == 1, out
    assert not any(c in out for c in "┏━│┃─"), out
    assert out.count(SEG0) == 1 and out.count(SEG1) == 1, out
    assert out.count("1 partition: 1 segment") == 1, out


# -- a dry run beside a broker ------------------------------------------------------------------

def test_dry_runs_read_while_a_broker_holds_the_lock(tmp_path):
    d, part, *_ = torn_metrics(tmp_path)
    before = {n: (part / n).read_bytes() for n in os.listdir(part)}
    with lock_held(d):
        res = kafkalog("recover", "--full", "--dry-run", part)
        assert res.code == 1, res
        assert len(res.err_lines) == 1 and "warning" in res.err and "may change" in res.err, res
        assert res.out.splitlines()[-1].startswith("1 partition, 1 to repair"), res
        res = kafkalog("retain", "--dry-run", "--log-start-offset", 300, part)
        assert res.code == 1, res
        assert len(res.err_lines) == 1 and "warning" in res.err and "may change" in res.err, res
        assert "would be deleted" in res.out, res
        # the real runs still refuse
        for args in (("recover", "--full", part),
                     ("retain", "--log-start-offset", 300, part)):
            res = kafkalog(*args)
            assert res.code == 2 and "locked by a running process" in res.err, res
            assert "warning" not in res.err
    assert {n: (part / n).read_bytes() for n in os.listdir(part)} == before
