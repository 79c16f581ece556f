"""`kafkalog dump` of index, time index, transaction index, producer snapshot and checkpoint files,
and of whole partition / log directories. Expected entries come from tests/indexgen.py (a
broker-equivalent builder over kafka-python's parse), never from kafkalog_cli."""

import json
import os
import re

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import dump, json_objects

T0 = kg.T0


# -- fixtures ----------------------------------------------------------------------------------------

def make_partition(directory, preallocate_active=False):
    d0, n0 = ig.busy_segment(0, txn_at=5, backwards_every=7)
    d1, n1 = ig.busy_segment(n0, n_batches=30, t0=T0 + 100000, txn_at=10, seed=1)
    return ig.write_partition(directory, [(0, d0), (n0, d1)],
                              preallocate_active=preallocate_active), n1


@pytest.fixture
def part(tmp_path):
    segs, _ = make_partition(tmp_path / "topic-0")
    return segs


def index_lines(entries):
    return ["offset: %d position: %d" % e for e in entries]


def time_lines(entries):
    return ["timestamp: %d offset: %d" % e for e in entries]


def no_traceback(res):
    assert "Traceback" not in res.err, res
    assert "Traceback" not in res.out, res


def one_line_error(res):
    no_traceback(res)
    lines = [line for line in res.err_lines if line.strip()]
    assert len(lines) == 1, res.err
    return lines[0]


def write_corrupt_index(seg, entries=None, data=None, kind="index"):
    """Overwrite a segment's .index/.timeindex with ``entries`` (or raw ``data``)."""
    if data is None:
        enc = ig.encode_offset_index if kind == "index" else ig.encode_time_index
        data = enc(entries, seg.base_offset)
    return ig.write_file(seg.paths[kind], data)


# -- the builder itself --------------------------------------------------------------------------------

def test_builder_follows_the_broker_rules(part):
    """Sanity of the oracle: entries at batch starts, > 4096 bytes apart, first batch never,
    strictly increasing; time entries increasing and equal to the batch maxima."""
    for seg in part:
        by_pos = {b.position: b for b in seg.batches}
        prev_pos = 0
        prev_off = -1
        assert seg.indexes.offset_entries, "the sample must produce offset-index entries"
        for off, pos in seg.indexes.offset_entries:
            assert pos in by_pos and pos > 0
            assert by_pos[pos].last_offset == off
            assert pos - prev_pos > ig.INDEX_INTERVAL_BYTES
            # no batch start between prev_pos + 4096 and pos could have triggered an entry
            earlier = [b.position for b in seg.batches
                       if prev_pos + ig.INDEX_INTERVAL_BYTES < b.position < pos]
            assert not earlier
            assert off > prev_off
            prev_pos, prev_off = pos, off
        prev_ts = -1
        for ts, off in seg.indexes.time_entries:
            assert ts > prev_ts
            b = next(b for b in seg.batches if b.last_offset == off)
            assert b.record_max_timestamp == ts == b.max_timestamp
            assert ts == max(x.max_timestamp for x in seg.batches if x.last_offset <= off)
            prev_ts = ts
        assert seg.indexes.time_entries[-1][0] == max(b.max_timestamp for b in seg.batches)
        assert not ig.kafka_offset_index_mismatches(seg.indexes.offset_entries, seg.batches,
                                                    seg.base_offset)
        assert not ig.kafka_time_index_errors(seg.indexes.time_entries,
                                              seg.indexes.offset_entries, seg.batches,
                                              seg.base_offset).any()
    assert [len(s.txns) for s in part] == [1, 1]


# -- offset index ------------------------------------------------------------------------------------

def test_dump_offset_index(part):
    for seg in part:
        path = seg.paths["index"]
        res = dump(path)
        assert res.code == 0, res
        assert res.lines == ["Dumping %s" % path] + index_lines(seg.indexes.offset_entries)
        assert "Mismatches" not in res.err
        no_traceback(res)


def test_dump_offset_index_relative_path_as_given(part, monkeypatch):
    seg = part[1]
    monkeypatch.chdir(os.path.dirname(seg.paths["index"]))
    name = os.path.basename(seg.paths["index"])
    bad = ig.replace_entry(seg.indexes.offset_entries, 1,
                           (seg.indexes.offset_entries[1][0] - 1, seg.indexes.offset_entries[1][1]))
    write_corrupt_index(seg, bad)
    res = dump(name)
    assert res.lines[0] == "Dumping %s" % name
    # Kafka's summary names the index by its absolute path
    assert "Mismatches in :%s" % os.path.abspath(name) in res.err_lines, res.err


def test_dump_empty_offset_index(tmp_path):
    data, _ = ig.busy_segment(0, n_batches=3)
    seg = ig.write_partition(tmp_path, [(0, data)])[0]
    assert seg.indexes.offset_entries == []
    path = seg.paths["index"]
    assert os.path.getsize(path) == 0
    res = dump(path)
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % path, "%s is empty." % path]


def test_dump_preallocated_offset_index(tmp_path):
    segs, _ = make_partition(tmp_path, preallocate_active=True)
    seg = segs[-1]
    assert os.path.getsize(seg.paths["index"]) == ig.OFFSET_INDEX_MAX_BYTES
    res = dump(seg.paths["index"])
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % seg.paths["index"]] + index_lines(seg.indexes.offset_entries)
    no_traceback(res)


def test_dump_offset_index_stops_at_zero_tail(part):
    seg = part[0]
    ig.write_file(seg.paths["index"], ig.zero_entries(
        ig.encode_offset_index(seg.indexes.offset_entries, seg.base_offset), 5))
    res = dump(seg.paths["index"])
    assert res.lines == ["Dumping %s" % seg.paths["index"]] + index_lines(seg.indexes.offset_entries)
    no_traceback(res)


@pytest.mark.parametrize("which", [[0], [2], [1, 3]])
def test_dump_offset_index_mismatch(part, which):
    seg = part[0]
    entries = list(seg.indexes.offset_entries)
    for i in which:  # each batch holds 3 records: lastOffset - 1 keeps the order strict
        entries[i] = (entries[i][0] - 1, entries[i][1])
    write_corrupt_index(seg, entries)
    path = seg.paths["index"]
    res = dump(path)
    assert res.code == 1, res
    assert res.lines == ["Dumping %s" % path] + index_lines(entries)
    expected = ig.offset_index_summary_lines(os.path.abspath(path),
                                             ig.kafka_offset_index_mismatches(entries, seg.batches, 0))
    assert len(expected) == 1 + len(which)
    at = res.err_lines.index(expected[0])
    got = res.err_lines[at:at + len(expected)]
    # Scala prints reverse discovery order, 4.3 descending offsets: the same here
    assert got == expected, res.err
    no_traceback(res)


def test_dump_verify_index_only(part):
    seg = part[0]
    path = seg.paths["index"]
    res = dump("--verify-index-only", path)
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % path]
    entries = ig.replace_entry(seg.indexes.offset_entries, 2,
                               (seg.indexes.offset_entries[2][0] - 1, seg.indexes.offset_entries[2][1]))
    write_corrupt_index(seg, entries)
    res = dump("--verify-index-only", path)
    assert res.code == 1, res
    assert res.lines == ["Dumping %s" % path]
    assert res.err_lines[:2] == ig.offset_index_summary_lines(
        os.path.abspath(path), ig.kafka_offset_index_mismatches(entries, seg.batches, 0))


def test_dump_offset_index_truncated_entry(part):
    seg = part[0]
    path = seg.paths["index"]
    full = ig.encode_offset_index(seg.indexes.offset_entries, 0)
    ig.write_file(path, ig.truncated_bytes(full, 3))
    res = dump(path)
    no_traceback(res)
    # the trailing partial entry is not an entry (floor(length / 8) entries, as Kafka reads it)
    assert res.lines[:len(seg.indexes.offset_entries)] == (
        ["Dumping %s" % path] + index_lines(seg.indexes.offset_entries[:-1]))
    assert not [line for line in res.lines[1:] if not line.startswith("offset: ")]


@pytest.mark.parametrize("where", ["past-end", "inside-batch"])
def test_dump_offset_index_bad_position(part, where):
    seg = part[0]
    path = seg.paths["index"]
    off, pos = seg.indexes.offset_entries[1]
    pos = len(seg.data) + 100 if where == "past-end" else pos + 7
    write_corrupt_index(seg, ig.replace_entry(seg.indexes.offset_entries, 1, (off, pos)))
    res = dump(path)
    no_traceback(res)
    assert res.code == 1, res
    assert os.path.abspath(path) in res.err or path in res.err, res.err


def test_dump_offset_index_without_log(tmp_path):
    path = ig.write_file(tmp_path / "00000000000000000000.index", ig.encode_offset_index([(5, 100)], 0))
    res = dump(path)
    no_traceback(res)
    assert res.code == 1, res  # entries that point into no log: invalid data found
    assert res.err.strip(), res


# -- sanity check ------------------------------------------------------------------------------------

def sanity(path):
    res = dump("--index-sanity-check", path)
    no_traceback(res)
    return res


def test_sanity_check_clean(part):
    for seg in part:
        for kind in ("index", "timeindex"):
            path = seg.paths[kind]
            res = sanity(path)
            assert res.code == 0, res
            assert res.lines == ["Dumping %s" % path, "%s passed sanity check." % path]


def test_sanity_check_preallocated(tmp_path):
    segs, _ = make_partition(tmp_path, preallocate_active=True)
    seg = segs[-1]
    # offset index: a zero tail has relative offset 0 == base: passes
    res = sanity(seg.paths["index"])
    assert res.code == 0, res
    assert res.lines[-1] == "%s passed sanity check." % seg.paths["index"]
    # time index: last slot timestamp 0 < first entry's timestamp: corrupt
    # (``TimeIndex.sanityCheck``)
    res = sanity(seg.paths["timeindex"])
    assert res.code == 1, res
    assert "passed sanity check" not in res.out
    assert res.err.strip()


def test_sanity_check_empty_index_says_empty(tmp_path):
    data, _ = ig.busy_segment(0, n_batches=2)
    seg = ig.write_partition(tmp_path, [(0, data)])[0]
    res = sanity(seg.paths["index"])
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % seg.paths["index"], "%s is empty." % seg.paths["index"]]


@pytest.mark.parametrize("case", ["partial-entry", "last-below-base"])
def test_sanity_check_offset_index_fails(part, case):
    seg = part[1]
    entries = seg.indexes.offset_entries
    if case == "partial-entry":
        data = ig.truncated_bytes(ig.encode_offset_index(entries, seg.base_offset), 5)
    else:
        data = ig.encode_offset_index(entries + [(seg.base_offset - 1, 0)], seg.base_offset)
    ig.write_file(seg.paths["index"], data)
    res = sanity(seg.paths["index"])
    assert res.code == 1, res
    assert "passed sanity check" not in res.out
    assert res.err.strip()


def test_sanity_check_offset_index_passes_kafka_conditions_only(part):
    """Mismatching but sane entries pass Kafka's sanity check (it only looks at the last slot
    and the length)."""
    seg = part[0]
    entries = ig.swap_entries(seg.indexes.offset_entries, 0, 1)
    write_corrupt_index(seg, entries)
    res = sanity(seg.paths["index"])
    assert res.code == 0, res
    assert res.lines[-1] == "%s passed sanity check." % seg.paths["index"]


@pytest.mark.parametrize("case", ["partial-entry", "last-ts-below-first", "last-offset-below-base"])
def test_sanity_check_time_index_fails(part, case):
    seg = part[1]
    entries = seg.indexes.time_entries
    base = seg.base_offset
    if case == "partial-entry":
        data = ig.truncated_bytes(ig.encode_time_index(entries, base), 4)
    elif case == "last-ts-below-first":
        data = ig.encode_time_index(entries + [(entries[0][0] - 1, entries[-1][1])], base)
    else:
        data = ig.encode_time_index(entries + [(entries[-1][0] + 1, base - 1)], base)
    ig.write_file(seg.paths["timeindex"], data)
    res = sanity(seg.paths["timeindex"])
    assert res.code == 1, res
    assert "passed sanity check" not in res.out
    assert res.err.strip()


def test_sanity_check_time_index_out_of_order_middle_passes(part):
    seg = part[0]
    entries = ig.swap_entries(seg.indexes.time_entries, 1, 2)
    write_corrupt_index(seg, entries, kind="timeindex")
    res = sanity(seg.paths["timeindex"])
    assert res.code == 0, res


# -- time index --------------------------------------------------------------------------------------

def test_dump_time_index(part):
    for seg in part:
        path = seg.paths["timeindex"]
        res = dump(path)
        assert res.code == 0, res
        assert res.lines == ["Dumping %s" % path] + time_lines(seg.indexes.time_entries)
        assert not res.err.strip(), res.err


def test_dump_time_index_first_entry_at_base_offset(tmp_path):
    """Entry 0 may have relative offset 0 (the first batch holds one record and the max
    timestamp); only entries after the first stop the dump at relative offset 0."""
    w = kg.SegmentWriter(50)
    w.add_v2([kg.Rec(b"k", b"v" * 5000, T0 + 10 ** 6)])
    for i in range(12):
        w.add_v2([kg.Rec(b"k", b"v" * 400, T0 + i)] * 3)
    seg = ig.write_partition(tmp_path, [(50, w.data())])[0]
    assert seg.indexes.time_entries == [(T0 + 10 ** 6, 50)]
    res = dump(seg.paths["timeindex"])
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % seg.paths["timeindex"], "timestamp: %d offset: 50" % (T0 + 10 ** 6)]


def test_dump_preallocated_time_index(tmp_path):
    segs, _ = make_partition(tmp_path, preallocate_active=True)
    seg = segs[-1]
    assert os.path.getsize(seg.paths["timeindex"]) == ig.TIME_INDEX_MAX_BYTES
    res = dump(seg.paths["timeindex"])
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % seg.paths["timeindex"]] + time_lines(seg.indexes.time_entries)


def _time_corruption(seg, case):
    entries = list(seg.indexes.time_entries)
    if case == "wrong-timestamp":
        ts, off = entries[1]
        entries[1] = (ts + 1, off)
    elif case == "out-of-order":
        entries = ig.swap_entries(entries, 1, 2)
    elif case == "offset-not-last-of-batch":
        ts, off = entries[2]
        entries[2] = (ts, off - 1)
    elif case == "offset-past-end":
        last_ts = entries[-1][0]
        entries.append((last_ts + 5, seg.batches[-1].last_offset + 50))
    else:
        raise AssertionError(case)
    return entries


TIME_CASES = ["wrong-timestamp", "out-of-order", "offset-not-last-of-batch", "offset-past-end"]


@pytest.mark.parametrize("case", TIME_CASES)
def test_dump_time_index_errors(part, case):
    seg = part[0]
    entries = _time_corruption(seg, case)
    write_corrupt_index(seg, entries, kind="timeindex")
    path = seg.paths["timeindex"]
    res = dump(path)
    no_traceback(res)
    assert res.code == 1, res
    assert res.lines == ["Dumping %s" % path] + time_lines(entries)
    errs = ig.kafka_time_index_errors(entries, seg.indexes.offset_entries, seg.batches, 0)
    assert errs.any()
    assert res.err_lines == ig.time_index_summary_lines(os.path.abspath(path), errs), res.err


def test_dump_time_index_verify_only(part):
    seg = part[0]
    entries = _time_corruption(seg, "wrong-timestamp")
    write_corrupt_index(seg, entries, kind="timeindex")
    res = dump("--verify-index-only", seg.paths["timeindex"])
    assert res.code == 1, res
    assert res.lines == ["Dumping %s" % seg.paths["timeindex"]]
    errs = ig.kafka_time_index_errors(entries, seg.indexes.offset_entries, seg.batches, 0)
    assert res.err_lines == ig.time_index_summary_lines(os.path.abspath(seg.paths["timeindex"]), errs)


def test_dump_time_index_truncated_entry(part):
    seg = part[0]
    full = ig.encode_time_index(seg.indexes.time_entries, 0)
    ig.write_file(seg.paths["timeindex"], ig.truncated_bytes(full, 5))
    res = dump(seg.paths["timeindex"])
    no_traceback(res)
    assert res.lines[1:len(seg.indexes.time_entries)] == time_lines(seg.indexes.time_entries[:-1])


# -- transaction index -------------------------------------------------------------------------------

def test_dump_txn_index(part):
    for seg in part:
        path = seg.paths["txnindex"]
        res = dump(path)
        assert res.code == 0, res
        assert res.lines == ["Dumping %s" % path] + [ig.txn_line(t) for t in seg.txns]


def test_dump_txn_index_several_entries_and_partial_tail(tmp_path):
    entries = [ig.AbortedTxn(5, 10, 20, 21), ig.AbortedTxn(-1 + 2 ** 40, 0, 30, 15),
               ig.AbortedTxn(6, 25, 40, 41)]
    path = ig.write_file(tmp_path / "00000000000000000000.txnindex",
                         ig.encode_txn_index(entries) + b"\x00" * 20)
    res = dump(path)
    no_traceback(res)
    assert res.lines == ["Dumping %s" % path] + [ig.txn_line(t) for t in entries]


def test_dump_txn_index_bad_version(tmp_path):
    data = bytearray(ig.encode_txn_index([ig.AbortedTxn(5, 10, 20, 21)]))
    data[0] = 0x05
    path = ig.write_file(tmp_path / "00000000000000000000.txnindex", bytes(data))
    res = dump(path)
    assert res.code == 1, res  # a malformed file is invalid data found (exit 1), not unreadable
    one_line_error(res)


def test_dump_empty_txn_index(tmp_path):
    path = ig.write_file(tmp_path / "00000000000000000000.txnindex", b"")
    res = dump(path)
    no_traceback(res)
    assert res.code == 0, res
    assert res.lines[0] == "Dumping %s" % path
    assert not [line for line in res.lines if line.startswith("version:")]


# -- producer snapshot -------------------------------------------------------------------------------

SNAPSHOT_ENTRIES = [
    ig.SnapshotEntry(1000, 2, 9, 41, 2, T0 + 41, 5, -1),
    ig.SnapshotEntry(1001, 0, -1, -1, 0, T0 + 51, 6, -1),          # no batch metadata
    ig.SnapshotEntry(2000, 1, 1, 61, 1, T0 + 60, -1, 55),          # open transaction
    ig.SnapshotEntry(3000, 32767, 2147483646, 70, 3, T0, 0, -1),   # firstSequence wraps below
    ig.SnapshotEntry(3001, 0, 1, 80, 3, T0, 0, -1),                # firstSequence wraps
]


def test_snapshot_line_oracle():
    assert ig.snapshot_line(SNAPSHOT_ENTRIES[1]).endswith("lastTimestamp: %d " % (T0 + 51))
    # BatchMetadata.firstSeq = decrementSequence(1, 3) wraps to Integer.MAX_VALUE - 1
    assert ig.snapshot_line(SNAPSHOT_ENTRIES[4]).count("firstSequence: 2147483646 ") == 1


def test_dump_snapshot(tmp_path):
    path = ig.write_file(tmp_path / "00000000000000000121.snapshot",
                         ig.encode_snapshot(SNAPSHOT_ENTRIES))
    res = dump(path)
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % path] + [ig.snapshot_line(e) for e in SNAPSHOT_ENTRIES]
    assert not res.err.strip()


def test_dump_snapshot_kafka_43(tmp_path):
    path = ig.write_file(tmp_path / "00000000000000000121.snapshot",
                         ig.encode_snapshot(SNAPSHOT_ENTRIES))
    res = dump("--kafka-format", "4.3", path)
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % path] + [ig.snapshot_line(e, "4.3")
                                                 for e in SNAPSHOT_ENTRIES]


def test_dump_empty_snapshot(tmp_path):
    path = ig.write_file(tmp_path / "00000000000000000000.snapshot", ig.encode_snapshot([]))
    res = dump(path)
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % path]


def test_dump_snapshot_bad_crc(tmp_path):
    data = ig.bad_snapshot_crc(ig.encode_snapshot(SNAPSHOT_ENTRIES))
    path = ig.write_file(tmp_path / "00000000000000000121.snapshot", data)
    res = dump(path)
    assert res.code == 1, res
    line = one_line_error(res)
    stored, computed = ig.snapshot_crc(data)
    assert ("Snapshot is corrupt (CRC is no longer valid). Stored crc: %d. Computed crc: %d"
            % (stored, computed)) in line, line
    assert res.lines == ["Dumping %s" % path]


@pytest.mark.parametrize("case", ["version-0", "version-2", "truncated", "junk-tail",
                                  "negative-count", "count-too-high", "short-header", "empty"])
def test_dump_corrupt_snapshot(tmp_path, case):
    good = ig.encode_snapshot(SNAPSHOT_ENTRIES)
    data = {
        "version-0": lambda: ig.snapshot_with_version(good, 0),
        "version-2": lambda: ig.snapshot_with_version(good, 2),
        "truncated": lambda: good[:-10],
        "junk-tail": lambda: good + b"junk",
        "negative-count": lambda: ig.encode_snapshot([], count=-1),
        "count-too-high": lambda: ig.encode_snapshot(SNAPSHOT_ENTRIES, count=9),
        "short-header": lambda: good[:5],
        "empty": lambda: b"",
    }[case]()
    path = ig.write_file(tmp_path / "00000000000000000121.snapshot", data)
    res = dump(path)
    assert res.code == 1, res
    line = one_line_error(res)
    if case == "junk-tail":
        assert "CRC" in line, line
    if case.startswith("version"):
        assert "version" in line.lower(), line


def test_dump_corrupt_snapshot_continues_with_next_file(tmp_path):
    bad = ig.write_file(tmp_path / "00000000000000000010.snapshot",
                        ig.bad_snapshot_crc(ig.encode_snapshot(SNAPSHOT_ENTRIES)))
    good = ig.write_file(tmp_path / "00000000000000000121.snapshot",
                         ig.encode_snapshot(SNAPSHOT_ENTRIES[:2]))
    res = dump(bad, good)
    assert res.code == 1, res
    no_traceback(res)
    assert res.lines == ["Dumping %s" % bad, "Dumping %s" % good] + [
        ig.snapshot_line(e) for e in SNAPSHOT_ENTRIES[:2]]


# -- checkpoint files --------------------------------------------------------------------------------

def tokens_on_one_line(text, values):
    """Some line of ``text`` holds every value of ``values`` as a whole token."""
    pats = [re.compile(r"(?<![\w.-])%s(?![\w.-])" % re.escape(str(v))) for v in values]
    return any(all(p.search(line) for p in pats) for line in text.split("\n"))


OFFSET_ENTRIES = [("orders", 0, 1234), ("orders", 1, 0), ("my.topic-with_dash", 17, 987654321012),
                  ("__consumer_offsets", 42, 7)]


@pytest.mark.parametrize("name", ig.CHECKPOINT_NAMES)
def test_dump_offset_checkpoint(tmp_path, name):
    path = ig.write_file(tmp_path / name, ig.offset_checkpoint(OFFSET_ENTRIES))
    res = dump(path)
    assert res.code == 0, res
    no_traceback(res)
    assert res.lines[0] == "Dumping %s" % path
    for topic, partition, offset in OFFSET_ENTRIES:
        assert tokens_on_one_line(res.out, [topic, partition, offset]) or tokens_on_one_line(
            res.out, ["%s-%d" % (topic, partition), offset]), (topic, partition, offset, res.out)


@pytest.mark.parametrize("name", ig.CHECKPOINT_NAMES)
def test_dump_offset_checkpoint_json(tmp_path, name):
    path = ig.write_file(tmp_path / name, ig.offset_checkpoint(OFFSET_ENTRIES))
    res = dump("--format", "json", path)
    assert res.code == 0, res
    objs = json_objects(res)
    assert all("file" in o and "type" in o for o in objs[:-1])
    text = json.dumps(objs)
    for topic, partition, offset in OFFSET_ENTRIES:
        assert topic in text and str(offset) in text


def test_dump_empty_offset_checkpoint(tmp_path):
    """An empty checkpoint file reads as no entries in Kafka."""
    path = ig.write_file(tmp_path / "recovery-point-offset-checkpoint", "")
    res = dump(path)
    no_traceback(res)
    assert res.code == 0, res


@pytest.mark.parametrize("case", sorted(ig.MALFORMED_OFFSET_CHECKPOINTS))
def test_dump_malformed_offset_checkpoint(tmp_path, case):
    path = ig.write_file(tmp_path / "replication-offset-checkpoint",
                         ig.MALFORMED_OFFSET_CHECKPOINTS[case])
    res = dump(path)
    assert res.code == 1, res  # a malformed file is invalid data found (exit 1), not unreadable
    one_line_error(res)


def test_dump_leader_epoch_checkpoint(tmp_path):
    entries = [(0, 0), (3, 121), (4, 5000), (17, 99999999999)]
    path = ig.write_file(tmp_path / "leader-epoch-checkpoint", ig.leader_epoch_checkpoint(entries))
    res = dump(path)
    assert res.code == 0, res
    no_traceback(res)
    assert res.lines[0] == "Dumping %s" % path
    for epoch, start in entries:
        assert tokens_on_one_line(res.out, [epoch, start]), (epoch, start, res.out)


@pytest.mark.parametrize("case", sorted(ig.MALFORMED_LEADER_EPOCH_CHECKPOINTS))
def test_dump_malformed_leader_epoch_checkpoint(tmp_path, case):
    path = ig.write_file(tmp_path / "leader-epoch-checkpoint",
                         ig.MALFORMED_LEADER_EPOCH_CHECKPOINTS[case])
    res = dump(path)
    assert res.code == 1, res  # a malformed file is invalid data found (exit 1), not unreadable
    one_line_error(res)


def test_dump_partition_metadata(tmp_path):
    tid = ig.topic_id(5)
    assert len(tid) == 22
    path = ig.write_file(tmp_path / "partition.metadata", ig.partition_metadata(tid))
    res = dump(path)
    assert res.code == 0, res
    no_traceback(res)
    assert res.lines[0] == "Dumping %s" % path
    assert tid in res.out


@pytest.mark.parametrize("case", sorted(ig.MALFORMED_PARTITION_METADATA))
def test_dump_malformed_partition_metadata(tmp_path, case):
    path = ig.write_file(tmp_path / "partition.metadata", ig.MALFORMED_PARTITION_METADATA[case])
    res = dump(path)
    assert res.code == 1, res  # a malformed file is invalid data found (exit 1), not unreadable
    one_line_error(res)


# -- JSON --------------------------------------------------------------------------------------------

def entry_objects(objs, keys):
    return [o for o in objs if all(k in o for k in keys)]


def test_json_index_files(part):
    seg = part[0]
    res = dump("--format", "json", seg.paths["index"], seg.paths["timeindex"], seg.paths["txnindex"])
    assert res.code == 0, res
    objs = json_objects(res)
    assert objs and all("file" in o and "type" in o for o in objs[:-1])
    by_file = {}
    for o in objs[:-1]:
        by_file.setdefault(os.path.abspath(o["file"]), []).append(o)
    idx = entry_objects(by_file[os.path.abspath(seg.paths["index"])], ["offset", "position"])
    assert [(o["offset"], o["position"]) for o in idx] == seg.indexes.offset_entries
    tix = entry_objects(by_file[os.path.abspath(seg.paths["timeindex"])], ["timestamp", "offset"])
    assert [(o["timestamp"], o["offset"]) for o in tix] == seg.indexes.time_entries
    txn = entry_objects(by_file[os.path.abspath(seg.paths["txnindex"])],
                        ["producerId", "firstOffset", "lastOffset", "lastStableOffset"])
    assert [(o["producerId"], o["firstOffset"], o["lastOffset"], o["lastStableOffset"])
            for o in txn] == [tuple(t) for t in seg.txns]


def test_json_snapshot(tmp_path):
    path = ig.write_file(tmp_path / "00000000000000000121.snapshot",
                         ig.encode_snapshot(SNAPSHOT_ENTRIES))
    res = dump("--format", "json", path)
    assert res.code == 0, res
    objs = json_objects(res)
    assert all("file" in o and "type" in o for o in objs[:-1])
    ents = entry_objects(objs, ["producerId"])
    assert [o["producerId"] for o in ents] == [e.producer_id for e in SNAPSHOT_ENTRIES]


def test_json_index_mismatch(part):
    seg = part[0]
    entries = ig.replace_entry(seg.indexes.offset_entries, 1,
                               (seg.indexes.offset_entries[1][0] - 1, seg.indexes.offset_entries[1][1]))
    write_corrupt_index(seg, entries)
    res = dump("--format", "json", seg.paths["index"])
    assert res.code == 1, res
    no_traceback(res)
    objs = json_objects(res)
    idx = entry_objects(objs, ["offset", "position"])
    assert [(o["offset"], o["position"]) for o in idx] == entries


# -- directories -------------------------------------------------------------------------------------

def dumping_order(res):
    return [line[len("Dumping "):] for line in res.lines if line.startswith("Dumping ")]


def populate_partition(directory):
    segs, end = make_partition(directory)
    snaps = [ig.write_file(os.path.join(str(directory), "%020d.snapshot" % off),
                           ig.encode_snapshot(SNAPSHOT_ENTRIES[:k]))
             for off, k in ((segs[1].base_offset, 1), (end, 2))]
    other = [ig.write_file(os.path.join(str(directory), "leader-epoch-checkpoint"),
                           ig.leader_epoch_checkpoint([(0, 0), (1, 5)])),
             ig.write_file(os.path.join(str(directory), "partition.metadata"),
                           ig.partition_metadata(ig.topic_id(2)))]
    return segs, snaps, other


def test_dump_partition_directory(tmp_path):
    d = tmp_path / "orders-3"
    segs, snaps, other = populate_partition(d)
    unknown = ig.write_file(d / "notes.txt", "hello")
    res = dump(str(d))
    no_traceback(res)
    assert res.code == 0, res
    order = dumping_order(res)
    expected_files = []
    for seg in segs:
        expected_files += [seg.paths[k] for k in ("log", "index", "timeindex", "txnindex")]
    assert order[:len(expected_files)] == expected_files, order
    assert order[len(expected_files):len(expected_files) + 2] == snaps
    assert sorted(order[len(expected_files) + 2:]) == sorted(other)
    assert unknown not in order
    ignoring = [line for line in res.err_lines if line.startswith("Ignoring unknown file ")]
    assert ignoring == ["Ignoring unknown file %s" % unknown], res.err
    # the index lines of each index file follow its Dumping line
    at = res.lines.index("Dumping %s" % segs[0].paths["index"])
    assert res.lines[at + 1:at + 1 + len(segs[0].indexes.offset_entries)] == index_lines(
        segs[0].indexes.offset_entries)


def test_dump_partition_directory_unknown_file_does_not_change_status(tmp_path):
    d = tmp_path / "orders-3"
    populate_partition(d)
    clean = dump(str(d))
    ig.write_file(d / "stray.bin", b"\x00\x01")
    ig.write_file(d / "00000000000000000000.index.bak", b"")
    res = dump(str(d))
    assert res.code == clean.code == 0, res
    assert len([line for line in res.err_lines if line.startswith("Ignoring unknown file ")]) == 2


def test_dump_log_directory(tmp_path):
    logdir = tmp_path / "logdir"
    parts = {}
    for name in ("orders-0", "orders-1"):
        parts[name] = populate_partition(logdir / name)
    cps = [ig.write_file(logdir / n, ig.offset_checkpoint([("orders", 0, 151), ("orders", 1, 151)]))
           for n in ig.CHECKPOINT_NAMES]
    res = dump(str(logdir))
    no_traceback(res)
    assert res.code == 0, res
    order = dumping_order(res)
    for cp in cps:
        assert cp in order, (cp, order)
    for name, (segs, snaps, other) in parts.items():
        files = [p for s in segs for p in s.paths.values()] + snaps + other
        assert set(files) <= set(order), (name, order)
    # partitions are not interleaved: orders-0's files come before orders-1's
    first1 = min(order.index(p) for p in order if os.sep + "orders-1" + os.sep in p)
    last0 = max(order.index(p) for p in order if os.sep + "orders-0" + os.sep in p)
    assert last0 < first1
    # every checkpoint's values are printed
    assert tokens_on_one_line(res.out, ["orders", 1, 151]) or tokens_on_one_line(
        res.out, ["orders-1", 151])


def test_dump_directory_with_corrupt_files_no_traceback(tmp_path):
    d = tmp_path / "orders-0"
    segs, snaps, other = populate_partition(d)
    ig.write_file(segs[0].paths["index"], b"\x00\x00\x00")
    ig.write_file(segs[0].paths["timeindex"], b"\xff" * 13)
    ig.write_file(segs[0].paths["txnindex"], b"\x07" * 40)
    ig.write_file(snaps[0], b"\x00\x01\x02")
    ig.write_file(other[0], "garbage")
    ig.write_file(other[1], "garbage")
    res = dump(str(d))
    no_traceback(res)
    assert res.code == 1, res  # malformed files are invalid data; each is one line
    # the clean second segment is still dumped
    assert "Dumping %s" % segs[1].paths["index"] in res.lines


def test_dump_time_index_without_offset_index(part):
    """Kafka needs the sibling .index to look entries up (and creates it); without one the time
    index is still printed, without a traceback."""
    seg = part[0]
    os.remove(seg.paths["index"])
    res = dump(seg.paths["timeindex"])
    no_traceback(res)
    assert res.lines[:1 + len(seg.indexes.time_entries)] == (
        ["Dumping %s" % seg.paths["timeindex"]] + time_lines(seg.indexes.time_entries))


def test_dump_two_index_files_two_summaries(part):
    wrong = []
    for seg in part:
        entries = ig.replace_entry(seg.indexes.offset_entries, 0,
                                   (seg.indexes.offset_entries[0][0] - 2,
                                    seg.indexes.offset_entries[0][1]))
        write_corrupt_index(seg, entries)
        wrong.append((seg, entries))
    res = dump(part[0].paths["index"], part[1].paths["index"])
    assert res.code == 1, res
    for seg, entries in wrong:
        expected = ig.offset_index_summary_lines(
            os.path.abspath(seg.paths["index"]),
            ig.kafka_offset_index_mismatches(entries, seg.batches, seg.base_offset))
        at = res.err_lines.index(expected[0])
        assert res.err_lines[at:at + len(expected)] == expected, res.err


# -- what Kafka's readers accept ---------------------------------------------------------------------

@pytest.mark.parametrize("text", ["0\r\n1\r\norders 3 55\r\n", "0\n1\norders   3  55\n",
                                  "0\n1\norders\t3\t55\n", "0\n1\norders 3 55"])
def test_offset_checkpoint_reader_tolerance(tmp_path, text):
    """BufferedReader.readLine accepts \\r\\n and a missing final newline; fields split on \\s+."""
    path = ig.write_file(tmp_path / "replication-offset-checkpoint", text)
    res = dump(path)
    assert res.code == 0, res
    assert tokens_on_one_line(res.out, ["orders", 3, 55]) or tokens_on_one_line(
        res.out, ["orders-3", 55]), res.out


def test_empty_checkpoints_with_zero_count(tmp_path):
    for name in ("leader-epoch-checkpoint", "recovery-point-offset-checkpoint"):
        res = dump(ig.write_file(tmp_path / name, "0\n0\n"))
        assert res.code == 0, res
        no_traceback(res)


def test_partition_metadata_trailing_newline(tmp_path):
    tid = ig.topic_id(9)
    res = dump(ig.write_file(tmp_path / "partition.metadata", ig.partition_metadata(tid) + "\n"))
    assert res.code == 0, res
    assert tid in res.out


def test_txn_index_negative_version_byte(tmp_path):
    """The version is read as the signed first byte: 0x80..0xFF pass
    (``TransactionIndex``, as ``DumpLogSegments.dumpTxnIndex`` prints it)."""
    data = bytearray(ig.encode_txn_index([ig.AbortedTxn(5, 10, 20, 21)]))
    data[0] = 0x80
    path = ig.write_file(tmp_path / "00000000000000000000.txnindex", bytes(data))
    res = dump(path)
    assert res.code == 0, res
    assert res.lines == ["Dumping %s" % path, ig.txn_line(ig.AbortedTxn(5, 10, 20, 21), -128)]


def test_dump_all_zero_preallocated_indexes(tmp_path):
    """A freshly rolled active segment: empty log, both indexes 10 MiB of zeros. Kafka itself
    prints slot 0 (it never stops at i = 0) and fails reading the empty log; here: no traceback,
    at most that one line, and no scan of the 10 MiB of zeros into entry lines."""
    d0, n0 = ig.busy_segment(0, n_batches=20)
    segs = ig.write_partition(tmp_path / "t-0", [(0, d0), (n0, b"")], preallocate_active=True)
    for kind in ("index", "timeindex"):
        res = dump(segs[1].paths[kind])
        no_traceback(res)
        assert res.lines[0] == "Dumping %s" % segs[1].paths[kind]
        assert len(res.lines) <= 2, res.lines[:5]
