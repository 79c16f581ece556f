"""Seeking: `kafkalog dump --from-offset/--to-offset/--from-timestamp/--to-timestamp` prints exactly
the record lines of a full dump filtered here (offset bounds inclusive; --from-timestamp T starts at
the first record, in offset order, whose timestamp is >= T; --to-timestamp T keeps records with
timestamp <= T), with good, missing and corrupt indexes."""

import os
import re

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import dump, json_objects

pytestmark = pytest.mark.usefixtures("implementation")

T0 = kg.T0
RECORD = re.compile(r"^\| offset: (\d+) (?:CreateTime|LogAppendTime|NoTimestampType): (-?\d+) ")


def make_partition(directory):
    """Three segments with broker-built indexes. Segment 0's timestamps go backwards now and then;
    segment 1 starts earlier in time than segment 0 ends (offsets-for-times must still pick the
    first record in offset order); aborted transactions give control batches."""
    d0, n0 = ig.busy_segment(0, n_batches=40, backwards_every=6, txn_at=8)
    d1, n1 = ig.busy_segment(n0, n_batches=35, t0=T0 + 30000, txn_at=20, seed=1)
    d2, n2 = ig.busy_segment(n1, n_batches=30, t0=T0 + 70000, records_per_batch=4, seed=2)
    segs = ig.write_partition(directory, [(0, d0), (n0, d1), (n1, d2)])
    return segs, n2


@pytest.fixture(scope="module")
def partition(tmp_path_factory):
    d = tmp_path_factory.mktemp("seek") / "orders-0"
    segs, end = make_partition(d)
    full = dump("--deep-iteration", str(d))
    assert full.code == 0, full
    records = [(int(m.group(1)), int(m.group(2)), line)
               for line in full.lines for m in [RECORD.match(line)] if m]
    # the full dump holds every record kafka-python reads, in offset order
    expected = [(o, t) for s in segs for b in s.batches for o, t in b.records]
    assert [(o, t) for o, t, _ in records] == expected
    return str(d), segs, end, records


def record_lines(res):
    return [line for line in res.lines if RECORD.match(line)]


def by_offset(records, lo=None, hi=None):
    return [line for o, _, line in records
            if (lo is None or o >= lo) and (hi is None or o <= hi)]


def by_time(records, t_from=None, t_to=None):
    start = 0
    if t_from is not None:
        start = next((i for i, (_, t, _) in enumerate(records) if t >= t_from), len(records))
    return [line for _, t, line in records[start:] if t_to is None or t <= t_to]


def seek(*args):
    res = dump("--deep-iteration", *args)
    assert "Traceback" not in res.err, res
    return res


# -- offsets -----------------------------------------------------------------------------------------

def offset_cases(segs, end):
    b1 = segs[1].base_offset
    b2 = segs[2].base_offset
    return [
        (0, end - 1),                  # everything
        (0, 0),                        # the first record
        (1, 1),                        # a record inside the first batch
        (50, 80),                      # inside segment 0, not at batch boundaries
        (b1, b1),                      # a segment's first offset
        (b1 - 1, b1 + 1),              # across a segment boundary
        (b1 + 37, b2 + 20),            # through a whole segment
        (b2 + 61, end - 1),            # the tail of the last segment
        (end - 1, end + 100),          # the last record, upper bound past the end
        (end, end + 5),                # nothing
        (segs[0].txns[0].last_offset, segs[0].txns[0].last_offset),  # an ABORT marker alone
    ]


def test_offset_ranges(partition):
    d, segs, end, records = partition
    for lo, hi in offset_cases(segs, end):
        res = seek("--from-offset", lo, "--to-offset", hi, d)
        assert res.code == 0, (lo, hi, res)
        assert record_lines(res) == by_offset(records, lo, hi), (lo, hi)


@pytest.mark.parametrize("lo", [0, 7, 121, 140, 250])
def test_from_offset_only(partition, lo):
    d, segs, end, records = partition
    res = seek("--from-offset", lo, d)
    assert res.code == 0, res
    assert record_lines(res) == by_offset(records, lo)


@pytest.mark.parametrize("hi", [0, 7, 120, 121, 250])
def test_to_offset_only(partition, hi):
    d, segs, end, records = partition
    res = seek("--to-offset", hi, d)
    assert res.code == 0, res
    assert record_lines(res) == by_offset(records, None, hi)


@pytest.mark.parametrize("option", ["offset", "timestamp"])
def test_to_below_from_is_a_usage_error(partition, option):
    """An empty range is a mistake in the command line, not an empty answer: exit 2, nothing
    printed on stdout, the error naming both options."""
    d, segs, end, records = partition
    res = seek("--from-" + option, 100, "--to-" + option, 50, d)
    assert res.code == 2, res
    assert res.out == ""
    assert "--from-%s 100 is above --to-%s 50" % (option, option) in res.err


def test_offset_range_on_a_segment_file(partition):
    d, segs, end, records = partition
    seg = segs[1]
    lo, hi = seg.base_offset + 40, seg.base_offset + 70
    res = seek("--from-offset", lo, "--to-offset", hi, seg.paths["log"])
    assert res.code == 0, res
    assert record_lines(res) == by_offset(records, lo, hi)


def test_batch_lines_only_when_not_deep(partition):
    """Without --deep-iteration, the printed batches are those holding the selected offsets."""
    d, segs, end, records = partition
    lo, hi = 50, 80
    res = dump("--from-offset", lo, "--to-offset", hi, d)
    assert res.code == 0, res
    got = [line for line in res.lines if line.startswith("baseOffset: ")]
    want = [b for s in segs for b in s.batches if b.last_offset >= lo and b.base_offset <= hi]
    assert len(got) == len(want)
    for line, b in zip(got, want):
        assert line.startswith("baseOffset: %d lastOffset: %d " % (b.base_offset, b.last_offset))


# -- timestamps --------------------------------------------------------------------------------------

def time_cases(records):
    ts = sorted({t for _, t, _ in records})
    return [
        T0 - 5,              # before everything
        ts[0],               # the smallest
        T0 + 5000,           # a batch's first record
        T0 + 5003,           # exact record timestamp (middle of the batch, not its max)
        T0 + 5004,           # between record timestamps
        T0 + 31000,          # first found in segment 0 although segment 1 holds smaller ones later
        T0 + 39007,          # segment 0's max
        T0 + 39008,          # just above segment 0's max: segment 1
        T0 + 75000,          # segment 2
        ts[-1],              # the largest
        ts[-1] + 1,          # after everything
    ]


def test_from_timestamp(partition):
    d, segs, end, records = partition
    for t in time_cases(records):
        res = seek("--from-timestamp", t, d)
        assert res.code == 0, (t, res)
        assert record_lines(res) == by_time(records, t), t


def test_to_timestamp(partition):
    d, segs, end, records = partition
    for t in time_cases(records):
        res = seek("--to-timestamp", t, d)
        assert res.code == 0, (t, res)
        assert record_lines(res) == by_time(records, None, t), t


@pytest.mark.parametrize("window", [(T0 + 5000, T0 + 9000), (T0 + 31000, T0 + 45000),
                                    (T0 + 20000, T0 + 20000), (T0 + 90000, T0 + 10)])
def test_timestamp_window(partition, window):
    d, segs, end, records = partition
    lo, hi = window
    res = seek("--from-timestamp", lo, "--to-timestamp", hi, d)
    assert res.code in ((0,) if lo <= hi else (0, 2)), res
    assert record_lines(res) == by_time(records, lo, hi)


# -- missing and corrupt indexes ---------------------------------------------------------------------

def broken_copy(tmp_path, how, kind="index", seg_no=1):
    d = tmp_path / "orders-0"
    segs, end = make_partition(d)
    seg = segs[seg_no]
    path = seg.paths[kind]
    if how == "missing":
        os.remove(path)
    elif how == "partial-entry":
        with open(path, "rb") as f:
            data = f.read()
        ig.write_file(path, ig.truncated_bytes(data, 3))
    elif how == "last-below-base":
        if kind == "index":
            ig.write_file(path, ig.encode_offset_index(
                seg.indexes.offset_entries + [(seg.base_offset - 1, 0)], seg.base_offset))
        else:
            e = seg.indexes.time_entries
            ig.write_file(path, ig.encode_time_index(e + [(e[0][0] - 1, e[-1][1])], seg.base_offset))
    elif how == "garbage":
        # random entries whose last relative offset is negative: fails the sanity check
        size = ig.OFFSET_ENTRY if kind == "index" else ig.TIME_ENTRY
        data = bytearray(kg.random_bytes(size * 7))
        data[size * 6 + (0 if kind == "index" else 8)] |= 0x80
        ig.write_file(path, bytes(data))
    elif how == "positions-past-end":
        ig.write_file(path, ig.encode_offset_index(
            [(o, p + len(seg.data)) for o, p in seg.indexes.offset_entries], seg.base_offset))
    elif how == "positions-inside-batches":
        ig.write_file(path, ig.encode_offset_index(
            [(o, p + 5) for o, p in seg.indexes.offset_entries], seg.base_offset))
    elif how == "preallocated":
        with open(path, "rb") as f:
            data = f.read()
        size = ig.OFFSET_INDEX_MAX_BYTES if kind == "index" else ig.TIME_INDEX_MAX_BYTES
        ig.write_file(path, ig.preallocated(data, size))
    else:
        raise AssertionError(how)
    return str(d), segs, path


def mentions(res, path):
    name = os.path.basename(path)
    prefix = name.split(".")[0]
    return path in res.err or name in res.err or prefix in res.err


@pytest.mark.parametrize("how", ["missing", "partial-entry", "last-below-base", "garbage"])
def test_offset_seek_with_bad_index(tmp_path, partition, how):
    _, _, end, records = partition
    d, segs, path = broken_copy(tmp_path, how, "index")
    lo, hi = segs[1].base_offset + 40, segs[1].base_offset + 70
    res = seek("--from-offset", lo, "--to-offset", hi, d)
    assert record_lines(res) == by_offset(records, lo, hi)
    assert res.err.strip(), "a note on stderr is expected"
    assert mentions(res, path), res.err


@pytest.mark.parametrize("how", ["positions-past-end", "positions-inside-batches"])
def test_offset_seek_with_sane_but_wrong_index(tmp_path, partition, how):
    """The index passes Kafka's sanity check but its entries are wrong: the output must still be
    the filtered full scan."""
    _, _, end, records = partition
    d, segs, path = broken_copy(tmp_path, how, "index")
    lo, hi = segs[1].base_offset + 40, segs[1].base_offset + 70
    res = seek("--from-offset", lo, "--to-offset", hi, d)
    assert record_lines(res) == by_offset(records, lo, hi)


def test_offset_seek_with_preallocated_index(tmp_path, partition):
    _, _, end, records = partition
    d, segs, path = broken_copy(tmp_path, "preallocated", "index", seg_no=2)
    lo, hi = segs[2].base_offset + 30, segs[2].base_offset + 90
    res = seek("--from-offset", lo, "--to-offset", hi, d)
    assert res.code == 0, res
    assert record_lines(res) == by_offset(records, lo, hi)


@pytest.mark.parametrize("how", ["missing", "partial-entry", "last-below-base", "garbage"])
@pytest.mark.parametrize("seg_no", [0, 1])
def test_time_seek_with_bad_time_index(tmp_path, partition, how, seg_no):
    _, _, end, records = partition
    d, segs, path = broken_copy(tmp_path, how, "timeindex", seg_no=seg_no)
    notes = []
    for t in (T0 + 5003, T0 + 31000, T0 + 39008):
        res = seek("--from-timestamp", t, "--to-timestamp", t + 20000, d)
        assert record_lines(res) == by_time(records, t, t + 20000), t
        notes.append(res)
    assert any(r.err.strip() for r in notes), "a note on stderr is expected"
    assert any(mentions(r, path) for r in notes), [r.err for r in notes]


@pytest.mark.parametrize("how", ["missing", "partial-entry"])
def test_time_seek_with_bad_offset_index(tmp_path, partition, how):
    _, _, end, records = partition
    d, segs, path = broken_copy(tmp_path, how, "index", seg_no=1)
    t = T0 + 45000
    res = seek("--from-timestamp", t, d)
    assert record_lines(res) == by_time(records, t)


def test_time_seek_with_preallocated_time_index(tmp_path, partition):
    """The active segment's time index as a live broker leaves it (zero tail)."""
    _, _, end, records = partition
    d, segs, path = broken_copy(tmp_path, "preallocated", "timeindex", seg_no=2)
    for t in (T0 + 75000, T0 + 30000):
        res = seek("--from-timestamp", t, d)
        assert res.code == 0, res
        assert record_lines(res) == by_time(records, t), t


# -- JSON --------------------------------------------------------------------------------------------

def test_json_records_offset_range(partition):
    d, segs, end, records = partition
    full = json_objects(dump("--format", "json", "--deep-iteration", d))
    full_recs = [o for o in full if o.get("type") == "record"]
    assert [o["offset"] for o in full_recs] == [o for o, _, _ in records]
    for lo, hi in offset_cases(segs, end):
        res = dump("--format", "json", "--deep-iteration", "--from-offset", lo, "--to-offset", hi, d)
        assert res.code == 0, res
        objs = json_objects(res)
        assert objs[-1]["type"] == "summary"
        assert all("file" in o and "type" in o for o in objs[:-1])
        got = [o for o in objs if o["type"] == "record"]
        assert got == [o for o in full_recs if lo <= o["offset"] <= hi], (lo, hi)


def test_json_records_timestamp_range(partition):
    d, segs, end, records = partition
    full = json_objects(dump("--format", "json", "--deep-iteration", d))
    full_recs = [o for o in full if o.get("type") == "record"]
    for t in (T0 + 5003, T0 + 31000, T0 + 75000):
        res = dump("--format", "json", "--deep-iteration", "--from-timestamp", t,
                   "--to-timestamp", t + 30000, d)
        assert res.code == 0, res
        got = [o for o in json_objects(res) if o["type"] == "record"]
        start = next(i for i, o in enumerate(full_recs) if o["timestamp"] >= t)
        assert got == [o for o in full_recs[start:] if o["timestamp"] <= t + 30000], t


# -- bad values --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["--from-offset", "-1"], ["--from-offset", "abc"],
                                  ["--to-timestamp", "soon"]])
def test_bad_bound_values(partition, args):
    d = partition[0]
    res = dump("--deep-iteration", *args, d)
    assert res.code == 2, res
    assert "Traceback" not in res.err


# -- indexes that pass the sanity check but lie ------------------------------------------------------

def test_offset_seek_with_unordered_index(tmp_path, partition):
    _, _, end, records = partition
    d = tmp_path / "orders-0"
    segs, _ = make_partition(d)
    seg = segs[1]
    e = seg.indexes.offset_entries
    ig.write_file(seg.paths["index"], ig.encode_offset_index(
        [e[0], e[4], e[2], e[3], e[1], e[5]] + e[6:], seg.base_offset))
    for lo in [o for o, _ in e] + [o + 1 for o, _ in e] + [o - 1 for o, _ in e]:
        res = seek("--from-offset", lo, "--to-offset", lo + 10, str(d))
        assert record_lines(res) == by_offset(records, lo, lo + 10), lo


def test_time_seek_with_wrong_but_sane_time_index(tmp_path, partition):
    """Every time entry's timestamp lowered to the segment's smallest one except the last: the
    file passes Kafka's sanity check (last >= first, offsets >= base), but its entries do not
    match the log (verify-index reports timestamp mismatches). Seeking must not trust it into
    skipping records."""
    _, _, end, records = partition
    d = tmp_path / "orders-0"
    segs, _ = make_partition(d)
    seg = segs[0]
    e = seg.indexes.time_entries
    lied = [(T0, off) for _, off in e[:-1]] + [e[-1]]
    path = ig.write_file(seg.paths["timeindex"], ig.encode_time_index(lied, seg.base_offset))
    assert kafkalog_verify(path).code == 1
    for t in (T0 + 5003, T0 + 20000, T0 + 31000):
        res = seek("--from-timestamp", t, str(d))
        assert record_lines(res) == by_time(records, t), t


def kafkalog_verify(*paths):
    from dumpcheck import kafkalog
    return kafkalog("verify-index", *paths)


# -- other shapes of data ----------------------------------------------------------------------------

def check_seek_cases(d, records, offsets, times):
    for lo, hi in offsets:
        res = seek("--from-offset", lo, "--to-offset", hi, d)
        assert res.code == 0, res
        assert record_lines(res) == by_offset(records, lo, hi), (lo, hi)
    for lo, hi in times:
        res = seek("--from-timestamp", lo, "--to-timestamp", hi, d)
        assert res.code == 0, res
        assert record_lines(res) == by_time(records, lo, hi), (lo, hi)


def full_records(d, segs):
    full = dump("--deep-iteration", d)
    assert full.code == 0, full
    recs = [(int(m.group(1)), int(m.group(2)), line)
            for line in full.lines for m in [RECORD.match(line)] if m]
    assert [(o, t) for o, t, _ in recs] == [(o, t) for s in segs for b in s.batches
                                            for o, t in b.records]
    return recs


def test_compacted_gaps_and_high_base_offset(tmp_path):
    """Offsets with gaps inside and between batches (a compacted log) in a partition whose first
    segment starts at 10000: bounds falling into gaps, below the log start, between segments."""
    segments = []
    base = 10000
    for s in range(3):
        w = kg.SegmentWriter(base)
        for i in range(25):
            recs = [kg.Rec(b"k%d" % j, kg.filler(i + j, repeat=20), T0 + 1000 * (25 * s + i) + j)
                    for j in range(4)]
            w.add_v2(recs, offset_deltas=[0, 3, 4, 9], gap=5 if i % 3 == 0 else 0)
        segments.append((base, w.data()))
        base = w.next_offset + 7
    d = str(tmp_path / "c-0")
    segs = ig.write_partition(d, segments)
    assert all(len(s.indexes.offset_entries) >= 3 for s in segs)
    records = full_records(d, segs)
    offs = [o for o, _, _ in records]
    b1, b2 = segs[1].base_offset, segs[2].base_offset
    cases = [(0, 10000), (0, 10001), (10001, 10002), (10005, 10040), (b1 - 3, b1 + 2),
             (offs[200] - 1, offs[230] + 1), (b2 - 1, b2 - 1), (offs[-1], offs[-1] + 1000)]
    cases += [(o, o + 1) for o in offs[95:110]]
    times = [(T0 + 20500, T0 + 40003), (T0 + 24999, T0 + 26001), (T0 - 1, T0),
             (T0 + 74003, T0 + 10 ** 9)]
    check_seek_cases(d, records, cases, times)


def test_log_append_time_batches(tmp_path):
    """LogAppendTime batches: record timestamps are the batch's maxTimestamp."""
    d = str(tmp_path / "lat-0")
    segs = ig.write_partition(d, [(0, kg.log_append_time_segment())])
    assert len(segs[0].indexes.time_entries) > 3
    records = full_records(d, segs)
    times = [(T0 + 100000, T0 + 10 ** 9), (T0 + 105000, T0 + 131000), (T0 + 200, T0 + 400),
             (T0 + 159000, T0 + 10 ** 9), (T0 + 159001, T0 + 10 ** 9)]
    check_seek_cases(d, records, [(10, 50)], times)


def test_log_directory_each_partition_bounded(tmp_path):
    logdir = tmp_path / "logdir"
    parts = {}
    for p in range(2):
        d = logdir / ("orders-%d" % p)
        s0, n0 = ig.busy_segment(0, n_batches=30, t0=T0 + 7 * p, seed=p, txn_at=4)
        s1, _ = ig.busy_segment(n0, n_batches=30, t0=T0 + 50000 + 7 * p, seed=p)
        parts[str(d)] = ig.write_partition(d, [(0, s0), (n0, s1)])
    full = dump("--deep-iteration", str(logdir))
    assert full.code == 0, full
    # record lines of each partition, in dump order
    by_part, current = {}, None
    for line in full.lines:
        if line.startswith("Dumping "):
            current = os.path.dirname(line[len("Dumping "):])
        m = RECORD.match(line)
        if m:
            by_part.setdefault(current, []).append((int(m.group(1)), int(m.group(2)), line))
    assert sorted(by_part) == sorted(parts)
    order = list(by_part)
    for lo, hi in ((50, 70), (85, 100), (0, 0)):
        res = seek("--from-offset", lo, "--to-offset", hi, str(logdir))
        assert res.code == 0, res
        assert record_lines(res) == [x for p in order for x in by_offset(by_part[p], lo, hi)]
    for t in (T0 + 20000, T0 + 50005):
        res = seek("--from-timestamp", t, "--to-timestamp", t + 15000, str(logdir))
        assert res.code == 0, res
        assert record_lines(res) == [x for p in order for x in by_time(by_part[p], t, t + 15000)]


def test_offset_and_timestamp_bounds_together(partition):
    d, segs, end, records = partition
    for lo, t in ((0, T0 + 20000), (100, T0 + 5000), (60, T0 + 45000)):
        res = seek("--from-offset", lo, "--from-timestamp", t, d)
        assert res.code == 0, res
        sel = [(o, ts, line) for o, ts, line in records if o >= lo]
        assert record_lines(res) == by_time(sel, t), (lo, t)


def test_messages_format_bounded(partition):
    d, segs, end, records = partition
    full = dump("--format", "messages", d)
    assert full.code == 0, full

    def messages(res):  # (a directory dump also prints the index files' entry lines)
        return [(int(line.split(" ", 2)[1]), line) for line in res.lines
                if line.startswith("offset: ") and " isvalid: " in line]
    assert [o for o, _ in messages(full)] == [o for o, _, _ in records]
    lo, hi = 130, 170
    res = dump("--format", "messages", "--from-offset", lo, "--to-offset", hi, d)
    assert res.code == 0, res
    assert messages(res) == [(o, line) for o, line in messages(full) if lo <= o <= hi]


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_compressed_partition(tmp_path, codec):
    d0, n0 = ig.busy_segment(0, n_batches=120, value_size=600, codec=codec, backwards_every=5,
                             txn_at=30)
    d1, _ = ig.busy_segment(n0, n_batches=80, value_size=600, codec=codec, t0=T0 + 100000)
    d = str(tmp_path / "z-0")
    segs = ig.write_partition(d, [(0, d0), (n0, d1)])
    assert len(segs[0].indexes.offset_entries) >= 2
    records = full_records(d, segs)
    check_seek_cases(d, records, [(100, 130), (n0 - 2, n0 + 2), (300, 10 ** 6)],
                     [(T0 + 50003, T0 + 70000), (T0 + 99999, T0 + 150000)])


# -- records without a timestamp -----------------------------------------------------------------

@pytest.mark.parametrize("bounds", [["--to-timestamp", kg.T0 + 5], ["--from-timestamp", 0],
                                    ["--from-timestamp", -1, "--to-timestamp", kg.T0 + 100]])
def test_a_record_without_timestamp_is_outside_any_time_bound(tmp_path, bounds):
    """Magic 0 messages have no timestamp: no time bound holds them (as a filter on the null
    timestamp column of the Spark source, and as offsets-for-times, which never finds one)."""
    w = kg.SegmentWriter()
    recs = [kg.Rec(b"k", b"v%d" % i, kg.T0 + i) for i in range(10)]
    w.add_legacy(0, recs[:4])
    w.add_legacy(1, recs[4:7])
    w.add_legacy(1, recs[7:], "gzip")
    data = w.data()
    path = kg.write_segment(str(tmp_path / "t-0"), 0, data)
    lo = bounds[bounds.index("--from-timestamp") + 1] if "--from-timestamp" in bounds else None
    hi = bounds[bounds.index("--to-timestamp") + 1] if "--to-timestamp" in bounds else None
    expected = []
    for kb in kg.kafka_python_read(data):
        for r in kb.records:
            ts = r.timestamp  # None for magic 0, as kafka-python reads it
            if ts is None or (lo is not None and ts < lo) or (hi is not None and ts > hi):
                continue
            expected.append(r.offset)
    assert expected and expected[0] >= 4
    res = seek("--format", "json", *bounds, path)
    assert res.code == 0, res
    assert [o["offset"] for o in json_objects(res) if o["type"] == "record"] == expected
