"""`kafkalog verify-index`: clean broker-built indexes pass, each problem kind is found (stderr lines
naming the file, JSON problem objects), exit codes, `--sanity-only`."""

import json
import os

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import json_objects, kafkalog, kafkalog_checked

T0 = kg.T0


def make_partition(directory, preallocate_active=False, n_segments=3):
    segments = []
    base = 0
    for i in range(n_segments):
        data, nxt = ig.busy_segment(base, n_batches=25 + 5 * i, t0=T0 + 100000 * i,
                                    txn_at=4 + i, backwards_every=6 if i == 0 else 0, seed=i)
        segments.append((base, data))
        base = nxt
    return ig.write_partition(directory, segments, preallocate_active=preallocate_active)


@pytest.fixture
def part(tmp_path):
    return make_partition(tmp_path / "orders-0")


def verify(*args):
    return kafkalog_checked("verify-index", *args)


def problems_json(*args):
    res = verify("--format", "json", *args)
    objs = json_objects(res)
    for o in objs:
        assert "type" in o, o
    probs = [o for o in objs if o["type"] == "problem"]
    for p in probs:
        assert {"file", "kind", "message"} <= set(p), p
        assert isinstance(p["kind"], str) and p["kind"]
        assert isinstance(p["message"], str) and p["message"]
    return res, probs


def same_file(a, b):
    return os.path.abspath(a) == os.path.abspath(b)


def assert_problem_for(path, *args):
    """verify-index ARGS exits 1, names ``path`` on a stderr line, and its JSON has a problem
    object for ``path``. Returns (human result, problem objects for the file)."""
    res = verify(*args)
    assert res.code == 1, res
    lines = [line for line in res.err_lines if path in line or os.path.abspath(path) in line]
    assert lines, res.err
    jres, probs = problems_json(*args)
    assert jres.code == 1, jres
    mine = [p for p in probs if same_file(p["file"], path)]
    assert mine, probs
    # one stderr line per problem, each naming its file
    named = [line for line in res.err_lines if any(p["file"] in line for p in probs)]
    assert len(named) >= len(probs), (res.err, probs)
    return res, mine


def assert_clean(*args):
    res = verify(*args)
    assert res.code == 0, res
    jres, probs = problems_json(*args)
    assert jres.code == 0, jres
    assert probs == [], probs
    return res


# -- clean -------------------------------------------------------------------------------------------

def test_clean_partition_directory(part):
    assert_clean(os.path.dirname(part[0].paths["log"]))


def test_clean_files(part):
    for seg in part:
        for kind in ("index", "timeindex", "txnindex"):
            assert_clean(seg.paths[kind])
    assert_clean(*[p for seg in part for k, p in seg.paths.items() if k != "log"])


def test_clean_with_preallocated_active_segment(tmp_path):
    segs = make_partition(tmp_path / "orders-0", preallocate_active=True)
    assert os.path.getsize(segs[-1].paths["index"]) == ig.OFFSET_INDEX_MAX_BYTES
    assert os.path.getsize(segs[-1].paths["timeindex"]) == ig.TIME_INDEX_MAX_BYTES
    assert_clean(str(tmp_path / "orders-0"))
    assert_clean(segs[-1].paths["index"], segs[-1].paths["timeindex"])


def test_clean_live_broker_active_segment_without_final_time_entry(tmp_path):
    """A live broker's active segment: preallocated, and no final time entry yet."""
    data, _ = ig.busy_segment(0, n_batches=30)
    segs = ig.write_partition(tmp_path / "t-0", [(0, data)])
    idx = ig.build_indexes(data, final_time_entry=False)
    assert len(idx.time_entries) < len(segs[0].indexes.time_entries)
    ig.write_file(segs[0].paths["index"], ig.preallocated_offset_index(
        ig.encode_offset_index(idx.offset_entries, 0)))
    ig.write_file(segs[0].paths["timeindex"], ig.preallocated_time_index(
        ig.encode_time_index(idx.time_entries, 0)))
    assert_clean(str(tmp_path / "t-0"))


def test_clean_log_directory(tmp_path):
    logdir = tmp_path / "logdir"
    make_partition(logdir / "orders-0")
    make_partition(logdir / "orders-1", n_segments=2)
    ig.write_file(logdir / "recovery-point-offset-checkpoint",
                  ig.offset_checkpoint([("orders", 0, 0), ("orders", 1, 0)]))
    assert_clean(str(logdir))


def test_clean_empty_indexes(tmp_path):
    data, _ = ig.busy_segment(0, n_batches=3)
    seg = ig.write_partition(tmp_path / "t-0", [(0, data)])[0]
    assert os.path.getsize(seg.paths["index"]) == 0
    assert_clean(str(tmp_path / "t-0"))


def test_sanity_only_clean(part):
    res = verify("--sanity-only", os.path.dirname(part[0].paths["log"]))
    assert res.code == 0, res


# -- offset index problems ---------------------------------------------------------------------------

def offset_corruption(seg, case):
    e = list(seg.indexes.offset_entries)
    if case == "lastoffset-mismatch":
        e[1] = (e[1][0] - 1, e[1][1])
    elif case == "not-at-batch-start":
        e[1] = (e[1][0], e[1][1] + 9)
    elif case == "not-increasing":
        e = ig.swap_entries(e, 1, 2)
    elif case == "duplicate-offset":
        e = e[:2] + [e[1]] + e[2:]
    elif case == "past-end":
        e.append((seg.batches[-1].last_offset + 3, len(seg.data) + 500))
    elif case == "last-below-base":
        e.append((seg.base_offset - 1, 0))
    else:
        raise AssertionError(case)
    return ig.encode_offset_index(e, seg.base_offset)


OFFSET_CASES = ["lastoffset-mismatch", "not-at-batch-start", "not-increasing", "duplicate-offset",
                "past-end", "last-below-base"]


@pytest.mark.parametrize("case", OFFSET_CASES)
@pytest.mark.parametrize("seg_no", [0, 2])
def test_offset_index_problem(part, case, seg_no):
    seg = part[seg_no]
    path = ig.write_file(seg.paths["index"], offset_corruption(seg, case))
    directory = os.path.dirname(path)
    _, mine = assert_problem_for(path, directory)
    assert_problem_for(path, path)
    # the other segments' files are not blamed
    _, probs = problems_json(directory)
    for other in part:
        if other is not seg:
            for p in other.paths.values():
                assert not [x for x in probs if same_file(x["file"], p)], (p, probs)


def test_offset_index_problem_kinds_differ(part):
    """Different problems are reported with different kinds (at least mismatch vs order vs
    position past the end)."""
    kinds = {}
    for case in ("lastoffset-mismatch", "not-increasing", "past-end"):
        seg = part[0]
        path = ig.write_file(seg.paths["index"], offset_corruption(seg, case))
        _, probs = problems_json(path)
        kinds[case] = {p["kind"] for p in probs if same_file(p["file"], path)}
    assert kinds["lastoffset-mismatch"] != kinds["not-increasing"], kinds
    assert kinds["past-end"] != kinds["not-increasing"], kinds


def test_offset_index_partial_entry(part):
    seg = part[1]
    path = ig.write_file(seg.paths["index"], ig.truncated_bytes(
        ig.encode_offset_index(seg.indexes.offset_entries, seg.base_offset), 3))
    assert_problem_for(path, path)
    res = verify("--sanity-only", path)
    assert res.code == 1, res


@pytest.mark.parametrize("case", ["lastoffset-mismatch", "not-increasing"])
def test_sanity_only_skips_content_checks(part, case):
    seg = part[1]
    path = ig.write_file(seg.paths["index"], offset_corruption(seg, case))
    assert verify(path).code == 1
    res = verify("--sanity-only", path)
    assert res.code == 0, res


def test_sanity_only_finds_last_below_base(part):
    seg = part[1]
    path = ig.write_file(seg.paths["index"], offset_corruption(seg, "last-below-base"))
    res = verify("--sanity-only", path)
    assert res.code == 1, res
    assert [line for line in res.err_lines if path in line], res.err


def test_sanity_only_time_index(part):
    seg = part[1]
    e = seg.indexes.time_entries
    path = ig.write_file(seg.paths["timeindex"], ig.encode_time_index(
        e + [(e[0][0] - 1, e[-1][1])], seg.base_offset))
    res = verify("--sanity-only", path)
    assert res.code == 1, res
    assert [line for line in res.err_lines if path in line], res.err


def test_zero_tail_in_inactive_segment_is_reported(part):
    """KAFKA-19200: an inactive segment's index left at full preallocated size; the real entries
    still verify, but the file is reported (it is not trimmed)."""
    seg = part[0]
    path = ig.write_file(seg.paths["index"], ig.preallocated_offset_index(
        ig.encode_offset_index(seg.indexes.offset_entries, 0)))
    res = verify(path)
    # Exit 0: the broker's sanity check passes an offset index whose zero slots read as
    # relative offset 0 (OffsetIndex.sanityCheck only refuses a last offset below the base),
    # so the real entries verify; the untrimmed file is reported all the same.
    assert res.code == 0, res
    assert res.err == "", res   # a note, on stdout
    lines = [line for line in res.out.splitlines() if path in line]
    assert lines, res.out
    assert any(w in line.lower() for line in lines
               for w in ("kafka-19200", "preallocat", "pre-allocat", "zero")), lines


# -- time index problems -----------------------------------------------------------------------------

def time_corruption(seg, case):
    e = list(seg.indexes.time_entries)
    if case == "timestamp-mismatch":
        e[1] = (e[1][0] + 1, e[1][1])
    elif case == "out-of-order":
        e = ig.swap_entries(e, 1, 2)
    elif case == "offset-not-found":
        e[2] = (e[2][0], e[2][1] - 1)
    elif case == "offset-past-end":
        e.append((e[-1][0] + 5, seg.batches[-1].last_offset + 40))
    else:
        raise AssertionError(case)
    return ig.encode_time_index(e, seg.base_offset)


TIME_CASES = ["timestamp-mismatch", "out-of-order", "offset-not-found", "offset-past-end"]


@pytest.mark.parametrize("case", TIME_CASES)
@pytest.mark.parametrize("seg_no", [0, 1])
def test_time_index_problem(part, case, seg_no):
    seg = part[seg_no]
    path = ig.write_file(seg.paths["timeindex"], time_corruption(seg, case))
    assert_problem_for(path, os.path.dirname(path))
    assert_problem_for(path, path)


def test_time_index_problem_kinds_differ(part):
    seg = part[0]
    kinds = {}
    for case in ("timestamp-mismatch", "out-of-order", "offset-not-found"):
        path = ig.write_file(seg.paths["timeindex"], time_corruption(seg, case))
        _, probs = problems_json(path)
        kinds[case] = {p["kind"] for p in probs if same_file(p["file"], path)}
    assert kinds["timestamp-mismatch"] != kinds["offset-not-found"], kinds
    assert kinds["out-of-order"] != kinds["offset-not-found"], kinds


def test_time_index_partial_entry(part):
    seg = part[0]
    path = ig.write_file(seg.paths["timeindex"], ig.truncated_bytes(
        ig.encode_time_index(seg.indexes.time_entries, 0), 7))
    assert_problem_for(path, path)


def test_time_index_zero_tail_in_inactive_segment(part):
    seg = part[0]
    path = ig.write_file(seg.paths["timeindex"], ig.zero_entries(
        ig.encode_time_index(seg.indexes.time_entries, 0), 4, ig.TIME_ENTRY))
    res = verify(path)
    # Exit 1: a zero slot's timestamp 0 is below the first entry's, which TimeIndex.sanityCheck
    # refuses (CorruptIndexException: the broker rebuilds the index)
    assert res.code == 1, res
    assert any(path in line for line in res.err_lines), res.err


# -- transaction index -------------------------------------------------------------------------------

def test_txn_index_entry_without_abort_marker(part):
    seg = part[1]
    b = seg.batches[3]  # a plain data batch
    bogus = seg.txns + [ig.AbortedTxn(4242, b.base_offset, b.last_offset, b.last_offset + 1)]
    bogus.sort(key=lambda t: t.last_offset)
    path = ig.write_file(seg.paths["txnindex"], ig.encode_txn_index(bogus))
    assert_problem_for(path, os.path.dirname(path))


def test_txn_index_entry_pointing_at_commit_marker(tmp_path):
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"a", b"x" * 100, T0)] * 3)
    w.add_v2([kg.Rec(b"t", b"y" * 100, T0)] * 2, producer_id=9, producer_epoch=0, base_sequence=0,
             transactional=True)
    w.add_control(kg.COMMIT, 9, 0, 1)
    segs = ig.write_partition(tmp_path / "t-0", [(0, w.data())])
    assert segs[0].txns == []
    path = ig.write_file(tmp_path / "t-0" / "00000000000000000000.txnindex",
                         ig.encode_txn_index([ig.AbortedTxn(9, 3, 5, 6)]))
    assert_problem_for(path, str(tmp_path / "t-0"))


def test_abort_marker_without_txn_index_entry(part):
    seg = part[1]
    os.remove(seg.paths["txnindex"])
    res = verify(os.path.dirname(seg.paths["log"]))
    assert res.code == 1, res
    prefix = "%020d" % seg.base_offset
    assert [line for line in res.err_lines if prefix in line], res.err
    jres, probs = problems_json(os.path.dirname(seg.paths["log"]))
    assert jres.code == 1
    assert [p for p in probs if prefix in os.path.basename(p["file"])], probs


def test_abort_marker_entry_missing_from_non_empty_txn_index(tmp_path):
    """Two aborted transactions in one segment; the index lists only one."""
    w = kg.SegmentWriter(0)
    for pid in (11, 12):
        w.add_v2([kg.Rec(b"t", b"y" * 100, T0)] * 2, producer_id=pid, producer_epoch=0,
                 base_sequence=0, transactional=True)
        w.add_control(kg.ABORT, pid, 0, 1)
    segs = ig.write_partition(tmp_path / "t-0", [(0, w.data())])
    assert len(segs[0].txns) == 2
    ig.write_file(segs[0].paths["txnindex"], ig.encode_txn_index(segs[0].txns[:1]))
    res = verify(str(tmp_path / "t-0"))
    assert res.code == 1, res
    assert [line for line in res.err_lines if "00000000000000000000" in line], res.err


def test_txn_index_from_earlier_segment_transaction_is_clean(tmp_path):
    """A transaction opened in one segment and aborted in the next: the entry belongs to the
    segment with the marker, firstOffset in the previous segment."""
    w0 = kg.SegmentWriter(0)
    w0.add_v2([kg.Rec(b"a", b"x" * 100, T0)] * 3)
    w0.add_v2([kg.Rec(b"t", b"y" * 100, T0)] * 2, producer_id=21, producer_epoch=0,
              base_sequence=0, transactional=True)
    w1 = kg.SegmentWriter(w0.next_offset)
    w1.add_v2([kg.Rec(b"b", b"x" * 100, T0 + 1)] * 3)
    w1.add_control(kg.ABORT, 21, 0, 1)
    segs = ig.write_partition(tmp_path / "t-0", [(0, w0.data()), (w0.next_offset, w1.data())])
    assert segs[0].txns == [] and segs[1].txns == [ig.AbortedTxn(21, 3, 8, 9)]
    assert_clean(str(tmp_path / "t-0"))


def test_txn_index_bad_version_byte(part):
    seg = part[0]
    data = bytearray(ig.encode_txn_index(seg.txns))
    data[0] = 0x03
    path = ig.write_file(seg.paths["txnindex"], bytes(data))
    assert_problem_for(path, path)


def test_txn_index_entry_below_base(part):
    """TransactionIndex.sanityCheck: every entry's lastOffset >= the segment's base offset."""
    seg = part[1]
    bogus = [ig.AbortedTxn(5, 0, seg.base_offset - 2, seg.base_offset - 1)] + seg.txns
    path = ig.write_file(seg.paths["txnindex"], ig.encode_txn_index(bogus))
    assert_problem_for(path, path)
    res = verify("--sanity-only", path)
    assert res.code == 1, res


def test_txn_index_first_offset_mismatch_in_a_file_named_without_an_offset(part, tmp_path):
    """A .txnindex named on the command line whose name holds no base offset (``foo.txnindex``
    beside ``foo.log``): an entry whose first offset is not the one the log's transaction
    began at is a problem (exit 1), as it is for a Kafka name; it was a traceback (the check
    compared the offset with the missing base)."""
    seg = next(s for s in part if s.txns)
    t = seg.txns[0]
    bogus = [ig.AbortedTxn(t.producer_id, t.first_offset + 1, t.last_offset,
                           t.last_stable_offset)] + seg.txns[1:]
    with open(seg.paths["log"], "rb") as f:
        ig.write_file(tmp_path / "foo.log", f.read())
    path = ig.write_file(tmp_path / "foo.txnindex", ig.encode_txn_index(bogus))
    _, mine = assert_problem_for(path, path)
    assert [p["kind"] for p in mine] == ["txn_first_offset_mismatch"], mine
    assert mine[0]["firstOffset"] == t.first_offset + 1, mine
    assert mine[0]["logFirstOffset"] == t.first_offset, mine


def test_library_verify_target(part, tmp_path):
    """verify_target, the one call the command makes per path: a report per index file of the
    partition, the problem on the file written wrong (the entry whose offset is not its batch's
    last offset, by construction) and on no other; an unknown name and an unreadable path are
    said as such, not checked."""
    from kafkalog_cli.log.verify import FileReport, TargetError, UnknownFile, verify_target
    directory = os.path.dirname(part[0].paths["log"])
    files = sorted(p for seg in part for k, p in seg.paths.items()
                   if k != "log" and os.path.exists(p))
    items = list(verify_target(directory))
    assert all(isinstance(i, FileReport) for i in items), items
    assert sorted(r.path for r in items) == files
    assert [r.path for r in items if r.problems or r.error] == []
    seg = part[1]
    bad = ig.write_file(seg.paths["index"], offset_corruption(seg, "lastoffset-mismatch"))
    e = seg.indexes.offset_entries[1]
    unknown = ig.write_file(tmp_path / "orders-0" / "abc.index", b"")
    items = list(verify_target(directory))
    assert [i.path for i in items if isinstance(i, UnknownFile)] == [unknown]
    reports = [i for i in items if isinstance(i, FileReport)]
    assert sorted(r.path for r in reports) == files
    failed = [r for r in reports if r.problems]
    assert [r.path for r in failed] == [bad]
    assert [(p.kind, p.fields["index_offset"], p.fields["log_offset"])
            for p in failed[0].problems] == [("offset_mismatch", e[0] - 1, e[0])]
    (missing,) = verify_target(str(tmp_path / "nope"))
    assert isinstance(missing, TargetError) and isinstance(missing.error, FileNotFoundError)


# -- usage -------------------------------------------------------------------------------------------

def test_missing_path(tmp_path):
    res = verify(str(tmp_path / "nope.index"))
    assert res.code == 2, res
    assert res.err.strip()


def test_missing_path_among_good_ones(part):
    res = verify(part[0].paths["index"], "/nonexistent/dir/00000000000000000000.index")
    assert res.code == 2, res


def test_no_arguments():
    res = verify()
    assert res.code == 2, res


def test_bad_option(part):
    res = verify("--no-such-option", part[0].paths["index"])
    assert res.code == 2, res


def test_bad_format(part):
    res = verify("--format", "xml", part[0].paths["index"])
    assert res.code == 2, res


# -- problems anywhere in a log directory ------------------------------------------------------------

def test_log_directory_with_one_bad_file(tmp_path):
    logdir = tmp_path / "logdir"
    make_partition(logdir / "orders-0", n_segments=2)
    segs = make_partition(logdir / "orders-1", n_segments=2)
    path = ig.write_file(segs[1].paths["timeindex"], time_corruption(segs[1], "timestamp-mismatch"))
    _, mine = assert_problem_for(path, str(logdir))
    _, probs = problems_json(str(logdir))
    assert all(same_file(p["file"], path) for p in probs), probs


def test_json_is_json_lines(part):
    seg = part[0]
    ig.write_file(seg.paths["index"], offset_corruption(seg, "lastoffset-mismatch"))
    res = verify("--format", "json", os.path.dirname(seg.paths["log"]))
    assert res.code == 1
    for line in res.lines:
        assert isinstance(json.loads(line), dict)


# -- other message formats and codecs ----------------------------------------------------------------

@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_clean_compressed_segments(tmp_path, codec):
    data, nxt = ig.busy_segment(0, n_batches=120, value_size=600, codec=codec, backwards_every=5,
                                txn_at=30)
    data2, _ = ig.busy_segment(nxt, n_batches=60, value_size=600, codec=codec, t0=T0 + 500000)
    segs = ig.write_partition(tmp_path / "t-0", [(0, data), (nxt, data2)])
    assert segs[0].indexes.offset_entries and len(segs[0].indexes.time_entries) > 1
    assert_clean(str(tmp_path / "t-0"))
    seg = segs[0]
    path = ig.write_file(seg.paths["timeindex"], time_corruption(seg, "timestamp-mismatch"))
    assert_problem_for(path, path)


def legacy_segment(magic, codec, base=0, n=60):
    w = kg.SegmentWriter(base)
    for i in range(n):
        recs = [kg.Rec(b"k%d" % i, kg.filler(i, repeat=25), T0 + 1000 * i + j * (-1) ** j)
                for j in range(3)]
        w.add_legacy(magic, recs, codec)
    return w.data(), w.next_offset


@pytest.mark.parametrize("magic,codec", [(0, "none"), (1, "none"), (1, "gzip"), (0, "gzip")])
def test_clean_legacy_segments(tmp_path, magic, codec):
    n = 60 if codec == "none" else 300
    data, nxt = legacy_segment(magic, codec, n=n)
    data2, _ = legacy_segment(magic, codec, base=nxt, n=n)
    segs = ig.write_partition(tmp_path / "t-0", [(0, data), (nxt, data2)])
    assert len(segs[0].indexes.offset_entries) >= 3
    if magic == 0:
        assert segs[0].indexes.time_entries == []
    assert_clean(str(tmp_path / "t-0"))
    res = kafkalog("dump", segs[1].paths["index"], segs[1].paths["timeindex"])
    assert res.code == 0, res
    want = (["Dumping %s" % segs[1].paths["index"]]
            + ["offset: %d position: %d" % e for e in segs[1].indexes.offset_entries]
            + ["Dumping %s" % segs[1].paths["timeindex"]]
            + ["timestamp: %d offset: %d" % e for e in segs[1].indexes.time_entries])
    if not segs[1].indexes.offset_entries:
        want[1:1] = ["%s is empty." % segs[1].paths["index"]]
    assert res.lines == want
    seg = segs[0]
    path = ig.write_file(seg.paths["index"], offset_corruption(seg, "not-increasing"))
    assert_problem_for(path, path)


# -- a live broker's active segment before its first index entry -------------------------------------

def live_active_partition(directory, active_log):
    """Segment 0 closed (trimmed indexes); the active segment as a live broker leaves it: its log
    ``active_log`` (less than index.interval.bytes, or empty right after a roll) and both indexes
    preallocated with no real entry yet (all zeros; no final time entry before roll/close)."""
    d0, n0 = ig.busy_segment(0, n_batches=20)
    if active_log is None:
        active_log, _ = ig.busy_segment(n0, n_batches=2)
    segs = ig.write_partition(directory, [(0, d0), (n0, active_log)])
    live = ig.build_indexes(active_log, final_time_entry=False)
    assert live.offset_entries == [] and live.time_entries == []
    ig.write_file(segs[1].paths["index"], ig.preallocated_offset_index(b""))
    ig.write_file(segs[1].paths["timeindex"], ig.preallocated_time_index(b""))
    return segs


def test_clean_live_active_segment_without_index_entries(tmp_path):
    live_active_partition(tmp_path / "t-0", None)
    assert_clean(str(tmp_path / "t-0"))


def test_clean_empty_active_segment_after_roll(tmp_path):
    live_active_partition(tmp_path / "t-0", b"")
    assert_clean(str(tmp_path / "t-0"))


def txn_batch(w, pid, n=2):
    w.add_v2([kg.Rec(b"t%d" % pid, kg.filler(pid, repeat=10), T0)] * n, producer_id=pid,
             producer_epoch=0, base_sequence=0, transactional=True)


def test_txn_index_concurrent_transactions_lso(tmp_path):
    """Interleaved transactions across two segments: the LSO written for an abort is the first
    offset of the earliest other open transaction (possibly in an earlier segment)."""
    w0 = kg.SegmentWriter(0)
    txn_batch(w0, 31)                      # 0-1: producer 31 opens
    w0.add_v2([kg.Rec(b"plain", b"x" * 50, T0)])
    txn_batch(w0, 32)                      # 3-4: producer 32 opens
    w0.add_control(kg.ABORT, 31, 0, 1)     # 5: abort 31, LSO = 3 (32 still open)
    txn_batch(w0, 33)                      # 6-7: producer 33 opens (stays open into segment 1)
    w1 = kg.SegmentWriter(w0.next_offset)
    w1.add_control(kg.ABORT, 32, 0, 1)     # 8: abort 32, LSO = 6 (33 open since segment 0)
    w1.add_control(kg.COMMIT, 33, 0, 1)    # 9: commit 33 (no entry)
    txn_batch(w1, 34)                      # 10-11
    w1.add_v2([kg.Rec(b"plain", b"x" * 50, T0)])
    w1.add_control(kg.ABORT, 34, 0, 1)     # 13: abort 34, LSO = 14
    segs = ig.write_partition(tmp_path / "t-0", [(0, w0.data()), (w0.next_offset, w1.data())])
    assert segs[0].txns == [ig.AbortedTxn(31, 0, 5, 3)]
    assert segs[1].txns == [ig.AbortedTxn(32, 3, 8, 6), ig.AbortedTxn(34, 10, 13, 14)]
    assert_clean(str(tmp_path / "t-0"))
    res = kafkalog("dump", segs[1].paths["txnindex"])
    assert res.lines[1:] == [ig.txn_line(t) for t in segs[1].txns]


def test_txn_index_transaction_with_data_in_two_segments(tmp_path):
    w0 = kg.SegmentWriter(0)
    w0.add_v2([kg.Rec(b"plain", b"x" * 50, T0)] * 3)   # 0-2
    txn_batch(w0, 32)                                  # 3-4: producer 32 opens
    w1 = kg.SegmentWriter(w0.next_offset)
    w1.add_v2([kg.Rec(b"plain", b"x" * 50, T0)] * 3)   # 5-7
    txn_batch(w1, 32)                                  # 8-9: more of the same transaction
    w1.add_control(kg.ABORT, 32, 0, 1)                 # 10
    segs = ig.write_partition(tmp_path / "t-0", [(0, w0.data()), (w0.next_offset, w1.data())])
    assert segs[1].txns == [ig.AbortedTxn(32, 3, 10, 11)]
    assert_clean(str(tmp_path / "t-0"))


def test_txn_index_entry_for_other_producers_marker(part):
    """An entry whose lastOffset is an ABORT marker, but of another producer."""
    seg = part[1]
    real = seg.txns[0]
    bogus = [real._replace(producer_id=real.producer_id + 1)]
    path = ig.write_file(seg.paths["txnindex"], ig.encode_txn_index(bogus))
    assert_problem_for(path, os.path.dirname(path))


def test_clean_log_append_time_partition(tmp_path):
    segs = ig.write_partition(tmp_path / "lat-0", [(0, kg.log_append_time_segment())])
    assert len(segs[0].indexes.time_entries) > 3
    assert_clean(str(tmp_path / "lat-0"))
