"""Rolling: `kafkalog append`'s broker-like roll conditions (LogSegment.shouldRoll: segment bytes,
segment ms, offset index full, time index full, relative offset overflow) and `kafkalog roll`
(seal the active segment, start an empty one named by the next offset; --if-bytes, --if-older).

Oracles: kafka-python's parse of every segment, ``appendcheck.simulate`` (the broker's roll and
index rules replayed over the batches kafka-python reads) and ``indexgen.build_indexes`` for
sealed segments (LogSegment.recover's rule with the final time-index entry, which equals the
live rule plus the entry appended at roll when the segment was written by one run).
"""

import os
import random

import pytest

import appendcheck as ac
import indexgen as ig
import kafkagen as kg
from appendcheck import append, assert_clean_exit2, check_partition, ok, roll

T0 = kg.T0


def part_dir(tmp_path, name="orders-0"):
    return tmp_path / "logs" / name


def names(directory, ext="log"):
    return sorted(n for n in os.listdir(directory) if n.endswith("." + ext))


def batch_size_of_one(tmp_path, value):
    """The size of a one-record v2 batch (null key, no headers) as append writes it, measured by
    kafka-python."""
    d = tmp_path / "probe" / "probe-0"
    ok(append(d, "--batch-records", "1", input=ac.lines_input([value, value])))
    segs, _ = check_partition(d)
    sizes = {kb.size for kb in segs[0].kbs}
    assert len(sizes) == 1, sizes
    return sizes.pop()


def check_against_simulation(d, cfg, first_offset=0):
    segs, recs = check_partition(d, first_offset=first_offset)
    sim = ac.simulate(ac.all_batches(segs), cfg)
    ac.assert_layout(d, sim, sib=cfg.segment_index_bytes)
    for s, e in zip(segs, sim):
        if e.sealed:
            ac.assert_sealed_like_indexgen(s, interval=cfg.interval)
    return segs, recs, sim


# -- segment bytes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("delta,per_segment", [(0, 3), (-1, 2), (1, 3), (+999, 3)])
def test_segment_bytes_boundary(tmp_path, delta, per_segment):
    """Roll when size + batch > segment.bytes: exactly filling the segment is allowed."""
    value = "x" * 100
    size = batch_size_of_one(tmp_path, value)
    seg_bytes = 3 * size + delta
    if delta == 999:
        per_segment = (3 * size + 999) // size
    d = part_dir(tmp_path)
    ok(append(d, "--batch-records", "1", "--segment-bytes", seg_bytes,
              input=ac.lines_input([value] * 10)))
    segs, recs, sim = check_against_simulation(d, ac.Config(segment_bytes=seg_bytes))
    bases = list(range(0, 10, per_segment))
    assert [s.base for s in segs] == bases
    for s in segs[:-1]:
        assert len(s.data) == per_segment * size
        assert len(s.data) <= seg_bytes
    assert len(recs) == 10


def test_segment_bytes_multi_record_batches(tmp_path):
    """Sealed segments get the final time-index entry (the segment's max timestamp, which the
    last index entry usually does not hold yet)."""
    d = part_dir(tmp_path)
    objs = [{"value": "%04d" % i + "m" * (50 + (i * 13) % 200), "timestamp": T0 + 10 * i}
            for i in range(300)]
    cfg = ac.Config(segment_bytes=5000, interval=1000)
    ok(append(d, "--input-format", "jsonl", "--batch-records", "5", *cfg.args(),
              input=ac.jsonl_input(objs)))
    segs, recs, sim = check_against_simulation(d, cfg)
    assert len(segs) >= 5
    assert [r.value for r in recs] == [o["value"].encode() for o in objs]
    with_final = 0
    for s in segs[:-1]:
        assert len(s.data) <= 5000
        idx = ac.segment_indexes(s, sealed=True)
        live = ig.build_indexes(s.data, interval=1000, final_time_entry=False)
        assert idx.offset_entries == live.offset_entries
        if idx.time_entries == live.time_entries + [(s.batches[-1].max_timestamp,
                                                     s.batches[-1].last_offset)]:
            with_final += 1
    assert with_final >= 3


def test_segment_bytes_across_runs(tmp_path):
    """A new run sees the active segment's size on disk."""
    value = "y" * 100
    size = batch_size_of_one(tmp_path, value)
    d = part_dir(tmp_path)
    for _ in range(5):
        ok(append(d, "--batch-records", "1", "--segment-bytes", 3 * size,
                  input=ac.lines_input([value] * 2)))
    segs, recs = check_partition(d)
    assert [s.base for s in segs] == [0, 3, 6, 9]
    assert [len(s.data) for s in segs] == [3 * size] * 3 + [size]


# -- segment ms --------------------------------------------------------------------------------------

def test_segment_ms_single_record_batches(tmp_path):
    d = part_dir(tmp_path)
    tss = [T0, T0 + 400, T0 + 1000, T0 + 1001, T0 + 1500, T0 + 900, T0 + 2001, T0 + 2002, T0 + 2003]
    objs = [{"value": "v%d" % i, "timestamp": t} for i, t in enumerate(tss)]
    cfg = ac.Config(segment_ms=1000)
    ok(append(d, "--input-format", "jsonl", "--batch-records", "1", *cfg.args(),
              input=ac.jsonl_input(objs)))
    segs, recs, _ = check_against_simulation(d, cfg)
    # T0+1000 - T0 = 1000 is not > 1000; T0+1001 rolls; the new segment's T0 is T0+1001;
    # T0+900 goes back in time (no roll); T0+2001 - (T0+1001) = 1000 no; T0+2002 rolls
    assert [s.base for s in segs] == [0, 3, 7]


def test_segment_ms_uses_batch_max_timestamp(tmp_path):
    d = part_dir(tmp_path)
    tss = [T0, T0 + 2000, T0 + 10,          # batch 1: max T0+2000 (the segment's T0)
           T0 + 2500, T0 + 100, T0 + 3000,  # batch 2: max T0+3000: 1000, no roll
           T0 + 3001, T0 + 50, T0 + 60]     # batch 3: max T0+3001: 1001 > 1000, roll
    objs = [{"value": "v%d" % i, "timestamp": t} for i, t in enumerate(tss)]
    cfg = ac.Config(segment_ms=1000)
    ok(append(d, "--input-format", "jsonl", "--batch-records", "3", *cfg.args(),
              input=ac.jsonl_input(objs)))
    segs, _, _ = check_against_simulation(d, cfg)
    assert [s.base for s in segs] == [0, 6]


def test_segment_ms_across_runs(tmp_path):
    """The segment's first-batch timestamp comes from disk in a later run (LogSegment's
    rollingBasedTimestamp, read back from the first batch)."""
    d = part_dir(tmp_path)
    ok(append(d, "--input-format", "jsonl",
              input=ac.jsonl_input([{"value": "a", "timestamp": T0}])))
    ok(append(d, "--input-format", "jsonl", "--segment-ms", "1000",
              input=ac.jsonl_input([{"value": "b", "timestamp": T0 + 1000}])))
    assert names(d) == ["00000000000000000000.log"]
    ok(append(d, "--input-format", "jsonl", "--segment-ms", "1000",
              input=ac.jsonl_input([{"value": "c", "timestamp": T0 + 1001}])))
    segs, recs = check_partition(d)
    assert [s.base for s in segs] == [0, 2]
    ac.assert_sealed_like_indexgen(segs[0])


def test_segment_ms_not_for_empty_segment(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, "--input-format", "jsonl", input=ac.jsonl_input([{"value": "a", "timestamp": T0}])))
    ok(roll(d))
    ok(append(d, "--input-format", "jsonl", "--segment-ms", "1",
              input=ac.jsonl_input([{"value": "b", "timestamp": T0 + 100000}])))
    segs, _ = check_partition(d)
    assert [s.base for s in segs] == [0, 1]


# -- index full --------------------------------------------------------------------------------------

@pytest.mark.parametrize("sib", [64, 100, 50])
def test_offset_index_full(tmp_path, sib):
    """Constant timestamps keep the time index at one entry; the offset index fills at
    floor(sib / 8) entries and the segment rolls before the next batch."""
    d = part_dir(tmp_path)
    objs = [{"value": "o%03d" % i + "z" * 60, "timestamp": T0} for i in range(60)]
    cfg = ac.Config(segment_index_bytes=sib, interval=0)
    ok(append(d, "--input-format", "jsonl", "--batch-records", "1", *cfg.args(),
              input=ac.jsonl_input(objs)))
    segs, recs, sim = check_against_simulation(d, cfg)
    per = sib // 8 + 1    # the first batch of a segment makes no entry
    assert [s.base for s in segs] == list(range(0, 60, per))
    for s in segs[:-1]:
        idx = ac.segment_indexes(s, sib, sealed=True)
        assert len(idx.offset_entries) == sib // 8
        assert os.path.getsize(s.prefix("index")) == 8 * (sib // 8)
        assert len(idx.time_entries) == 1


@pytest.mark.parametrize("sib", [64, 100, 50])
def test_time_index_full(tmp_path, sib):
    """Growing timestamps: a time entry with every offset entry; the time index is full at
    floor(sib / 12) - 1 entries (one slot kept for the entry appended at roll)."""
    d = part_dir(tmp_path)
    objs = [{"value": "t%03d" % i + "z" * 60, "timestamp": T0 + 10 * i} for i in range(60)]
    cfg = ac.Config(segment_index_bytes=sib, interval=0)
    ok(append(d, "--input-format", "jsonl", "--batch-records", "1", *cfg.args(),
              input=ac.jsonl_input(objs)))
    segs, recs, sim = check_against_simulation(d, cfg)
    limit = sib // 12 - 1
    per = limit + 1
    assert [s.base for s in segs] == list(range(0, 60, per))
    for s in segs[:-1]:
        idx = ac.segment_indexes(s, sib, sealed=True)
        assert len(idx.time_entries) == limit
        assert os.path.getsize(s.prefix("timeindex")) == 12 * limit


# -- relative offset overflow ------------------------------------------------------------------------

def far_partition(d, gap):
    """A partition whose only segment is named 0 and holds one batch at offset ``gap``."""
    w = kg.SegmentWriter(gap)
    w.add_v2([kg.Rec(None, b"far", T0)])
    ig.write_partition(d, [(0, w.data())])


@pytest.mark.parametrize("batch_records,new_base", [(1, 2**31), (4, 2**31 - 1)])
def test_relative_offset_overflow(tmp_path, batch_records, new_base):
    d = part_dir(tmp_path)
    start = 2**31 - 10
    far_partition(d, start)
    ok(append(d, "--batch-records", batch_records, "--format", "json",
              input=ac.lines_input(["o%d" % i for i in range(20)])))
    segs, recs = check_partition(d, first_offset=None, unnamed=(0,))
    assert [s.base for s in segs] == [0, new_base]
    assert [r.offset for r in recs] == list(range(start, start + 21))
    # nothing in the first segment beyond a relative offset of 2^31 - 1
    assert segs[0].batches[-1].last_offset - 0 <= ac.INT32_MAX
    assert segs[1].batches[0].base_offset == new_base


# -- many configurations against the simulation -------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_random_configurations_match_simulation(tmp_path, seed):
    rnd = random.Random(seed)
    cfg = ac.Config(segment_bytes=rnd.choice([3000, 5000, 9000, 40000]),
                    segment_ms=rnd.choice([None, 500, 2000]),
                    segment_index_bytes=rnd.choice([40, 64, 100, 256, 4096]),
                    interval=rnd.choice([0, 300, 1000, 4096]))
    codec = rnd.choice(kg.V2_CODECS)
    objs = []
    ts = T0
    for i in range(rnd.randint(200, 500)):
        ts += rnd.choice([0, 1, 7, 60, 300])
        t = ts - rnd.choice([0, 0, 0, 400])
        o = {"value": "r%05d-" % i + "abc" * rnd.randint(0, 80), "timestamp": t}
        if rnd.random() < 0.3:
            o["key"] = "k%d" % rnd.randint(0, 9)
        if rnd.random() < 0.1:
            o["headers"] = {"h": "x" * rnd.randint(0, 20)}
        objs.append(o)
    args = ["--input-format", "jsonl", "--codec", codec, "--batch-records",
            rnd.choice([1, 2, 5, 10]), "--batch-bytes", 1500, *cfg.args()]
    d = part_dir(tmp_path)
    ok(append(d, *args, input=ac.jsonl_input(objs)))
    segs, recs, _ = check_against_simulation(d, cfg)
    assert [r.value for r in recs] == [o["value"].encode() for o in objs]
    assert [r.timestamp for r in recs] == [o["timestamp"] for o in objs]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_random_multi_run_matches_simulation(tmp_path, seed):
    """Several runs on one partition: after each, the segments from the previously active one
    on are what the broker's rules make of the new batches, the run resuming the active segment
    as a restarted broker would or as if it had never stopped (the contract allows both)."""
    rnd = random.Random(1000 + seed)
    cfg = ac.Config(segment_bytes=rnd.choice([4000, 8000, 20000]),
                    segment_ms=rnd.choice([None, 300, 1500]),
                    segment_index_bytes=rnd.choice([40, 64, 100, 1000]),
                    interval=rnd.choice([0, 200, 800, 4096]))
    d = part_dir(tmp_path)
    ts = T0
    i = 0
    models_ok = set(ac.RESUME_MODELS)
    for run in range(rnd.randint(4, 8)):
        before = ac.read_partition(d) if os.path.isdir(d) else []
        before_idx = ac.segment_indexes(before[-1], cfg.segment_index_bytes) if before else None
        objs = []
        for _ in range(rnd.randint(1, 60)):
            ts += rnd.choice([0, 3, 50, 200])
            objs.append({"value": "r%05d-" % i + "abc" * rnd.randint(0, 60),
                         "timestamp": ts - rnd.choice([0, 0, 250])})
            i += 1
        args = ["--input-format", "jsonl", "--batch-records", rnd.choice([1, 3, 8]),
                "--codec", rnd.choice(["none", "lz4"]), *cfg.args()]
        ok(append(d, *args, input=ac.jsonl_input(objs)))
        segs, recs = check_partition(d)
        if not before:
            sim = ac.simulate(ac.all_batches(segs), cfg)
            ac.assert_layout(d, sim, sib=cfg.segment_index_bytes)
            continue
        old_last = before[-1]
        new_batches = [b for s in segs if s.base >= old_last.base for b in s.batches
                       if b.base_offset >= ac.next_offset_of(before)]
        errors = {}
        for model in sorted(models_ok):
            start = ac.resumed_segment(old_last, *model, sib=cfg.segment_index_bytes,
                                       indexes=before_idx)
            sim = ac.simulate(new_batches, cfg, start=start)
            err = ac.layout_matches(d, sim, sib=cfg.segment_index_bytes, skip=len(before) - 1)
            if err:
                errors[model] = err
        assert len(errors) < len(models_ok), (run, errors)
        models_ok -= set(errors)   # one way of resuming for the whole partition's life


# -- kafkalog roll -----------------------------------------------------------------------------------

def test_roll_seals_and_starts_next_segment(tmp_path):
    d = part_dir(tmp_path)
    vals = ["%04d" % i + "r" * 500 for i in range(200)]
    ok(append(d, "--batch-records", "2", input=ac.lines_input(vals)))
    res = roll(d)
    assert res.code == 0, res
    assert "Traceback" not in res.err
    segs, recs = check_partition(d)
    assert [s.base for s in segs] == [0, 200]
    assert segs[1].data == b""
    ac.assert_sealed_like_indexgen(segs[0])
    # the active segment has no real entries
    assert ac.segment_indexes(segs[1]) == ig.Indexes([], [])
    # appending goes into the new segment; the sealed one is untouched
    sealed = ac.file_bytes(d)
    ok(append(d, input=ac.lines_input(["after-roll"])))
    segs, recs = check_partition(d)
    assert [s.base for s in segs] == [0, 200]
    assert [r.value for r in recs if r.offset >= 200] == [b"after-roll"]
    now = ac.file_bytes(d)
    for n in ("00000000000000000000.log", "00000000000000000000.index",
              "00000000000000000000.timeindex"):
        assert now[n] == sealed[n], n


def test_roll_final_time_entry_non_monotonic(tmp_path):
    """The segment's max timestamp is not in its last batch: the final entry names the batch
    that reached it (offsetOfMaxTimestamp)."""
    d = part_dir(tmp_path)
    objs = [{"value": "w" * 300, "timestamp": T0 + 1000 * i - (12000 if i > 40 else 0)}
            for i in range(50)]
    ok(append(d, "--input-format", "jsonl", "--batch-records", "1", input=ac.jsonl_input(objs)))
    ok(roll(d))
    segs, _ = check_partition(d)
    ac.assert_sealed_like_indexgen(segs[0])
    idx = ac.segment_indexes(segs[0], sealed=True)
    assert idx.time_entries[-1] == (T0 + 1000 * 40, 40)


def test_roll_empty_active_is_noop(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["a", "b"])))
    ok(roll(d))
    before = ac.file_bytes(d)
    res = roll(d)
    assert res.code == 0, res
    assert ac.file_bytes(d) == before
    assert names(d) == ["00000000000000000000.log", "00000000000000000002.log"]


def test_roll_on_a_new_empty_partition_is_noop(tmp_path):
    d = part_dir(tmp_path)
    os.makedirs(d)
    (d / "00000000000000000000.log").write_bytes(b"")
    res = roll(d)
    assert res.code == 0, res
    assert names(d) == ["00000000000000000000.log"]


def test_roll_if_bytes(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["abc"] * 10)))
    size = os.path.getsize(d / "00000000000000000000.log")
    ok(roll(d, "--if-bytes", size + 1))
    assert names(d) == ["00000000000000000000.log"]
    ok(roll(d, "--if-bytes", size))
    assert names(d) == ["00000000000000000000.log", "00000000000000000010.log"]
    segs, _ = check_partition(d)
    ac.assert_sealed_like_indexgen(segs[0])


def test_roll_if_older(tmp_path):
    d = part_dir(tmp_path)
    t = ac.now_ms() - 60000
    objs = [{"value": "old", "timestamp": t}, {"value": "new", "timestamp": ac.now_ms()}]
    ok(append(d, "--input-format", "jsonl", "--batch-records", "1", input=ac.jsonl_input(objs)))
    ok(roll(d, "--if-older", 120000))
    assert names(d) == ["00000000000000000000.log"]
    ok(roll(d, "--if-older", 30000))
    assert names(d) == ["00000000000000000000.log", "00000000000000000002.log"]
    check_partition(d)


def test_roll_if_older_uses_first_batch(tmp_path):
    """The first batch is recent, a later one is old: not rolled (the first batch counts)."""
    d = part_dir(tmp_path)
    objs = [{"value": "recent", "timestamp": ac.now_ms()},
            {"value": "ancient", "timestamp": ac.now_ms() - 10**9}]
    ok(append(d, "--input-format", "jsonl", "--batch-records", "1", input=ac.jsonl_input(objs)))
    ok(roll(d, "--if-older", 60000))
    assert names(d) == ["00000000000000000000.log"]


def test_roll_kafka_python_partition_with_preallocated_indexes(tmp_path):
    d = part_dir(tmp_path)
    segments, base = [], 0
    for i in range(2):
        data, nxt = ig.busy_segment(base, n_batches=30, t0=T0 + 100000 * i, txn_at=2 + i, seed=i,
                                    backwards_every=5)
        segments.append((base, data))
        base = nxt
    segs = ig.write_partition(d, segments, preallocate_active=True)
    before = ac.file_bytes(d)
    ok(roll(d))
    after = ac.file_bytes(d)
    for path in segs[0].paths.values():
        n = os.path.basename(path)
        assert after[n] == before[n], n
    active = segs[1]
    # trimmed to the real entries (indexgen's, which hold the final entry already)
    assert after[os.path.basename(active.paths["index"])] == ig.encode_offset_index(
        active.indexes.offset_entries, active.base_offset)
    assert after[os.path.basename(active.paths["timeindex"])] == ig.encode_time_index(
        active.indexes.time_entries, active.base_offset)
    assert after[os.path.basename(active.paths["log"])] == active.data
    assert "%020d.log" % base in after and after["%020d.log" % base] == b""
    check_partition(d)


def test_roll_trims_index_of_small_segment_index_bytes(tmp_path):
    d = part_dir(tmp_path)
    cfg = ac.Config(segment_index_bytes=1024, interval=0)
    ok(append(d, "--batch-records", "1", *cfg.args(),
              input=ac.lines_input(["i%d" % i + "u" * 50 for i in range(20)])))
    ok(roll(d))
    segs, _ = check_partition(d)
    ac.assert_sealed_like_indexgen(segs[0], interval=0)


def test_roll_legacy_magic0_has_empty_time_index(tmp_path):
    d = part_dir(tmp_path)
    cfg = ac.Config(interval=100)
    ok(append(d, "--magic", "0", "--batch-records", "1", *cfg.args(),
              input=ac.lines_input(["m%d" % i + "o" * 60 for i in range(30)])))
    ok(roll(d))
    segs, _ = check_partition(d)
    ac.assert_sealed_like_indexgen(segs[0], interval=100)
    assert os.path.getsize(segs[0].prefix("timeindex")) == 0
    assert os.path.getsize(segs[0].prefix("index")) > 0


def test_roll_missing_dir(tmp_path):
    # click's argument check: a usage error (exit 2, "Error: ..." naming the path)
    res = roll(tmp_path / "nope-0")
    assert res.code == 2, res
    assert "nope-0" in res.err_lines[-1], res.err
    assert not os.path.exists(tmp_path / "nope-0")


def test_roll_dir_without_segments(tmp_path):
    d = part_dir(tmp_path)
    os.makedirs(d)
    res = roll(d)
    # nothing to seal: "Does nothing (exit 0) when the active segment is empty"
    assert res.code == 0, res
    assert "not rolled" in res.out, res


def test_roll_refused_while_broker_holds_lock(tmp_path):
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["a"])))
    before = ac.file_bytes(d)
    with ac.lock_held(d.parent):
        res = roll(d)
        assert_clean_exit2(res)
    assert ac.file_bytes(d) == before


def test_append_after_roll_by_append_then_roll_command(tmp_path):
    """Rolls made by append and by roll mix: names are always the next offset."""
    d = part_dir(tmp_path)
    value = "s" * 100
    size = batch_size_of_one(tmp_path, value)
    ok(append(d, "--batch-records", "1", "--segment-bytes", 2 * size,
              input=ac.lines_input([value] * 5)))
    ok(roll(d))
    ok(append(d, "--batch-records", "1", "--segment-bytes", 2 * size,
              input=ac.lines_input([value] * 3)))
    segs, recs = check_partition(d)
    assert [s.base for s in segs] == [0, 2, 4, 5, 7]
    for s in segs[:-1]:
        ac.assert_sealed_like_indexgen(s)


def test_roll_partition_from_python(tmp_path):
    """``roll_partition`` used directly: what it refuses and why, what it seals and opens,
    checked on the files with kafka-python."""
    from kafkalog_cli.log.append import roll_partition
    d = part_dir(tmp_path)
    ok(append(d, "--input-format", "jsonl",
              input=ac.jsonl_input([{"value": "v%d" % i, "timestamp": T0 + i} for i in range(3)])))
    before = ac.file_bytes(d)
    res = roll_partition(str(d), if_bytes=10 ** 6)
    assert not res.rolled and res.sealed is None and "fewer than 1000000" in res.reason
    # the first batch's max timestamp is T0 + 2: not older than 1000 ms at T0 + 1002
    res = roll_partition(str(d), if_older=1000, now=T0 + 1002)
    assert not res.rolled and "not older than 1000 ms" in res.reason
    assert res.active.name == "00000000000000000000.log"
    assert ac.file_bytes(d) == before
    res = roll_partition(str(d), if_bytes=10, if_older=1000, now=T0 + 1003)
    assert res.rolled and res.reason is None
    assert (res.sealed.name, res.active.name) == ("00000000000000000000.log",
                                                  "00000000000000000003.log")
    assert os.path.getsize(res.active.log_path) == 0
    segs, recs = check_partition(d)
    assert [s.base for s in segs] == [0, 3] and [r.offset for r in recs] == [0, 1, 2]
    ac.assert_sealed_like_indexgen(segs[0])
    res = roll_partition(str(d))
    assert not res.rolled and res.reason == "the active segment is empty"
    assert names(d) == ["00000000000000000000.log", "00000000000000000003.log"]


# -- the producer snapshot a roll takes (UnifiedLog.roll: ProducerStateManager.takeSnapshot) -----------

def _snapshot_lines(d, offset):
    from dumpcheck import dump
    path = os.path.join(str(d), "%020d.snapshot" % offset)
    assert os.path.exists(path), path
    res = dump(path)
    assert res.code == 0, res
    return sorted(res.lines[1:])


def test_roll_takes_a_snapshot_of_the_producers_in_the_log(tmp_path):
    """`kafkalog roll` of a kafka-python partition without snapshots: the producer state is
    replayed from the log (an aborted transaction's producer and an idempotent one) and written
    at the new segment's base offset; an empty partition state is an empty snapshot."""
    d = part_dir(tmp_path)
    w = kg.SegmentWriter(0, partition_leader_epoch=1)
    w.add_v2([kg.Rec(b"k", b"v", T0)])
    w.add_v2([kg.Rec(b"t", b"x", T0 + 5), kg.Rec(b"t", b"y", T0 + 7)], producer_id=70,
             producer_epoch=2, base_sequence=0, transactional=True)
    w.add_v2([kg.Rec(b"i", b"z", T0 + 8)], producer_id=71, producer_epoch=0, base_sequence=41)
    w.add_control(kg.ABORT, 70, 2, 6, timestamp=T0 + 9)
    w.add_v2([kg.Rec(b"t", b"w", T0 + 10)], producer_id=70, producer_epoch=2, base_sequence=2,
             transactional=True)
    ig.write_partition(d, [(0, w.data())])
    ok(roll(d))
    leo = w.next_offset
    assert names(d, "snapshot") == ["%020d.snapshot" % leo]
    # ProducerStateEntry after the replay, by the broker's rules: producer 70's last batch
    # (offset 5, sequences 2-2), its marker's coordinator epoch 6, the open transaction at 5
    want = sorted([ig.snapshot_line(ig.SnapshotEntry(70, 2, 2, 5, 0, T0 + 10, 6, 5)),
                   ig.snapshot_line(ig.SnapshotEntry(71, 0, 41, 3, 0, T0 + 8, -1, -1))])
    assert _snapshot_lines(d, leo) == want
    # a second roll after more plain data starts from that snapshot, loaded as the broker
    # loads one (ProducerStateManager.loadFromSnapshot): producer 71, whose last timestamp is
    # older than producer.id.expiration.ms (a day) and which has no open transaction, is
    # dropped; 70 stays for its open transaction
    ok(append(d, input=ac.lines_input(["more"])))
    ok(roll(d))
    assert _snapshot_lines(d, leo + 1) == want[:1]
    assert "producerId: 70 " in want[0]
    # a partition without producers: empty snapshots
    e = part_dir(tmp_path, "plain-0")
    ok(append(e, "--segment-bytes", "100", "--batch-records", "1",
              input=ac.lines_input(["a" * 80, "b" * 80])))
    assert names(e, "snapshot") == ["00000000000000000001.snapshot"]
    assert _snapshot_lines(e, 1) == []
    with open(os.path.join(str(e), "00000000000000000001.snapshot"), "rb") as f:
        assert f.read() == ig.encode_snapshot([])


def test_roll_keeps_a_snapshot_already_there(tmp_path):
    """A snapshot at the new base offset (a roll a crash interrupted after writing it) is
    kept, not written again (ProducerStateManager.takeSnapshot: not a new offset)."""
    d = part_dir(tmp_path)
    ok(append(d, input=ac.lines_input(["a", "b"])))
    entry = ig.SnapshotEntry(5, 0, 3, 0, 0, T0, -1, -1)
    ig.write_file(os.path.join(str(d), "00000000000000000002.snapshot"), ig.encode_snapshot([entry]))
    ok(roll(d))
    assert _snapshot_lines(d, 2) == [ig.snapshot_line(entry)]


# -- a roll killed before any file operation -----------------------------------------------------------

_CALLS = ("write", "rename", "replace", "unlink", "fsync", "link")


def _roll_crashing_at(d, k, monkeypatch):
    """`kafkalog roll` in-process, the k-th call of _CALLS (and of the no-replace rename)
    raising a crash (k None: never). True when it crashed."""
    return ac.cli_crashing_at(["roll", str(d)], k, monkeypatch, _CALLS)


def _partition_files(d):
    from dumpcheck import files_in
    return {n: v for n, v in files_in(str(d)).items() if not n.startswith(".")}


def test_roll_crashed_at_every_file_operation(tmp_path, monkeypatch):
    """A roll of a partition with an open transaction, crashed before each of its writes,
    renames, removals and fsyncs in turn; then `recover` and `roll` again: the partition's
    files are those of an uninterrupted roll followed by `recover` (sealed segment, new empty
    one, the producer snapshot at its base, the indexes)."""
    import shutil
    src = tmp_path / "src" / "logs" / "crash-0"
    segments, base = [], 0
    for i in range(2):
        data, nxt = ig.busy_segment(base, n_batches=20, t0=T0 + 100000 * i, txn_at=3 + 10 * i,
                                    seed=i)
        segments.append((base, data))
        base = nxt
    ig.write_partition(src, segments, preallocate_active=True)
    w = kg.SegmentWriter(base)
    w.add_v2([kg.Rec(b"t", b"open", T0 + 300000)], producer_id=900, producer_epoch=0,
             base_sequence=0, transactional=True)
    with open(src / ("%020d.log" % segments[-1][0]), "ab") as f:
        f.write(w.data())
    # the partition as a broker leaves it after loading it (its producer snapshots written), so
    # that a recover after a crash adds none the uninterrupted run lacks
    assert ac.kafkalog_in("recover", str(src)).code in (0, 1)

    def copy(label):
        dst = tmp_path / label / "logs"
        shutil.copytree(src.parent, dst)
        return dst / "crash-0"

    ref = copy("ref")
    assert _roll_crashing_at(ref, None, monkeypatch) is False
    ok(roll(ref))  # as the crashed runs do: a second roll (of an empty segment: nothing)
    assert ac.kafkalog_in("recover", str(ref)).code in (0, 1)
    want = _partition_files(ref)
    # the roll's snapshot holds what the broker's rules give at the new base: the open
    # transaction of producer 900, the aborted ones' producers
    expected = ac.producers_at(ac.log_batches(ref), w.next_offset)
    assert 900 in expected and len(expected) == 3
    assert _snapshot_lines(ref, w.next_offset) == sorted(ig.snapshot_line(e)
                                                         for e in expected.values())
    k, bad = 1, []
    while True:
        d = copy("k%03d" % k)
        if not _roll_crashing_at(d, k, monkeypatch):
            break
        assert ac.kafkalog_in("recover", str(d)).code in (0, 1)
        ok(roll(d))
        assert ac.kafkalog_in("recover", str(d)).code in (0, 1)
        got = _partition_files(d)
        if got != want:
            bad.append((k, sorted(n for n in set(got) | set(want) if got.get(n) != want.get(n))))
        shutil.rmtree(d.parent.parent)
        k += 1
    assert k > 10, k
    assert not bad, bad
