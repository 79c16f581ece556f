"""`kafkalog recover` follows LogLoader's rules for a whole log directory: the clean-shutdown
marker, the recovery point (recovery-point-offset-checkpoint), LogSegment.sanityCheck below it,
--full, the offset overflow split (LocalLog.splitOverflowedSegment), a directory caught
mid-deletion.

Partitions are written by kafka-python (tests/kafkagen.py) with broker-equivalent indexes
(tests/indexgen.py); every expectation (bytes kept, indexes, checkpoint lines) is computed here
from those, and every run is a real process (``python -m kafkalog_cli recover``).
"""

import hashlib
import json
import os
import signal
import subprocess
import sys

import pytest

import crashcheck
from crashcheck import KILL_AT_STEP
import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO, files_in
from test_recover import expected_snapshot_at, write_leader_epochs

QUARANTINE = "kafkalog-quarantine"
CHECKPOINT = "recovery-point-offset-checkpoint"
MARKER = ".kafka_cleanshutdown"
T0 = kg.T0


def recover(*args):
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "recover"] + [str(a) for a in args],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr, p
    return p


def name(base, kind):
    return "%s.%s" % (ig.segment_prefix(base), kind)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def leo_of(base, data):
    batches = ig.read_log(data)
    return batches[-1].last_offset + 1 if batches else base


class Part:
    """Three busy segments in ``<logdir>/<topic>-<n>``, broker-built indexes,
    leader-epoch-checkpoint and producer snapshot at the log end offset; ``data[i]`` the bytes
    of segment i's .log, ``bases``, ``leo``."""

    def __init__(self, logdir, topic="t", number=0, n_batches=(30, 30, 30)):
        self.logdir = str(logdir)
        self.dir = os.path.join(self.logdir, "%s-%d" % (topic, number))
        segments = []
        base = 0
        for i, n in enumerate(n_batches):
            data, nxt = ig.busy_segment(base, n_batches=n, t0=T0 + 100000 * i, seed=i,
                                        txn_at=3 + i)
            segments.append((base, data))
            base = nxt
        self.segs = ig.write_partition(self.dir, segments)
        write_leader_epochs(self.dir, segments)   # the broker's leader-epoch-checkpoint
        # and the producer snapshot its last recovery wrote at the log end offset
        ig.write_file(os.path.join(self.dir, name(base, "snapshot")),
                      expected_snapshot_at(segments, 0, base))
        self.bases = [b for b, _ in segments]
        self.data = [d for _, d in segments]
        self.leo = base

    def path(self, i, kind):
        return os.path.join(self.dir, name(self.bases[i], kind))

    def garbage_tail(self, i):
        """Segment i's .log with a garbage tail: a recovery of it cuts the tail."""
        ig.write_file(self.path(i, "log"), kg.garbage_tail(self.data[i], n=500, seed=i))

    def empty_indexes(self, i):
        """Segment i's .index and .timeindex empty (what a kill leaves when the entries were
        still in memory): sane for the broker's start-up check, wrong for its recovery."""
        ig.write_file(self.path(i, "index"), b"")
        ig.write_file(self.path(i, "timeindex"), b"")

    def assert_indexes_rebuilt(self, i):
        idx = ig.build_indexes(self.data[i])
        assert read(self.path(i, "index")) == ig.encode_offset_index(idx.offset_entries,
                                                                     self.bases[i])
        assert read(self.path(i, "timeindex")) == ig.encode_time_index(idx.time_entries,
                                                                       self.bases[i])

    def checkpoint(self, entries):
        ig.write_file(os.path.join(self.logdir, CHECKPOINT), ig.offset_checkpoint(entries))

    def checkpoint_text(self):
        with open(os.path.join(self.logdir, CHECKPOINT), encoding="utf-8") as f:
            return f.read()


def segment_lines(p, part):
    return [line for line in p.stdout.splitlines() if line.startswith(part.dir + "/")
            and ".log: " in line]


# -- the recovery point --------------------------------------------------------------------------

def test_recovery_point_in_the_middle_of_a_segment(tmp_path):
    """Recovery point inside segment 1: segments 1 and 2 are recovered, their (empty, so
    sane) indexes rebuilt; segment 0 is below it: not read, its garbage tail kept (the broker
    trusts what is below its recovery point). The checkpoint is written back at the log end
    offset, the other partitions' lines kept in their order."""
    part = Part(tmp_path / "logdir")
    part.garbage_tail(0)
    part.empty_indexes(1)
    part.empty_indexes(2)
    seg0 = read(part.path(0, "log"))
    middle = part.bases[1] + 7
    part.checkpoint([("other", 3, 17), ("t", 0, middle), ("another", 0, 5)])
    p = recover(part.dir)
    assert p.returncode == 1, p
    assert read(part.path(0, "log")) == seg0
    part.assert_indexes_rebuilt(1)
    part.assert_indexes_rebuilt(2)
    assert part.checkpoint_text() == ig.offset_checkpoint(
        [("other", 3, 17), ("t", 0, part.leo), ("another", 0, 5)])
    lines = segment_lines(p, part)
    assert "below the recovery point %d: sane, kept" % middle in lines[0], p.stdout
    assert "from the recovery point %d" % middle in lines[1], p.stdout
    assert "offsets %d-%d" % (part.bases[1], part.bases[2] - 1) in lines[1], p.stdout
    # the second run: the recovery point is the log end offset; nothing to do
    again = recover(part.dir)
    assert again.returncode == 0, again


def test_recovery_point_at_a_segment_boundary(tmp_path):
    """At segment 1's base offset, segment 0 is not recovered; one offset lower, it is."""
    part = Part(tmp_path / "a" / "logdir")
    part.garbage_tail(0)
    seg0 = read(part.path(0, "log"))
    part.checkpoint([("t", 0, part.bases[1])])
    p = recover(part.dir)
    assert p.returncode == 0, p        # nothing to change from segment 1 on
    assert read(part.path(0, "log")) == seg0
    assert part.checkpoint_text() == ig.offset_checkpoint([("t", 0, part.leo)])

    part = Part(tmp_path / "b" / "logdir")
    part.garbage_tail(0)
    part.checkpoint([("t", 0, part.bases[1] - 1)])
    p = recover(part.dir)
    assert p.returncode == 1, p
    # a cut in the unflushed range: the later segments set aside, the log ends there
    assert read(part.path(0, "log")) == part.data[0]
    assert not os.path.exists(part.path(1, "log"))
    assert part.checkpoint_text() == ig.offset_checkpoint([("t", 0, part.bases[1])])


def test_recovery_point_past_the_log_end(tmp_path):
    """Past the log end offset: the last segment is the one holding it (largest base at or
    below); it is recovered, and the checkpoint comes back down to the log end offset."""
    part = Part(tmp_path / "logdir")
    part.garbage_tail(1)
    part.empty_indexes(2)
    seg1 = read(part.path(1, "log"))
    part.checkpoint([("t", 0, part.leo + 1000)])
    p = recover(part.dir)
    assert p.returncode == 1, p
    assert read(part.path(1, "log")) == seg1
    part.assert_indexes_rebuilt(2)
    assert part.checkpoint_text() == ig.offset_checkpoint([("t", 0, part.leo)])


def test_missing_checkpoint_file(tmp_path):
    """No checkpoint file: recovery point 0, every segment recovered; the file is created."""
    part = Part(tmp_path / "logdir")
    part.garbage_tail(2)
    part.empty_indexes(0)
    p = recover(part.dir)
    assert p.returncode == 1, p
    part.assert_indexes_rebuilt(0)
    assert read(part.path(2, "log")) == part.data[2]
    assert part.checkpoint_text() == ig.offset_checkpoint([("t", 0, part.leo)])
    assert "none recorded" in segment_lines(p, part)[0], p.stdout


def test_partition_missing_from_the_checkpoint_is_added_at_the_end(tmp_path):
    part = Part(tmp_path / "logdir")
    part.checkpoint([("z", 1, 4), ("a", 0, 9)])
    p = recover(part.dir)
    assert p.returncode == 0, p     # the indexes are the broker's: nothing to change
    assert part.checkpoint_text() == ig.offset_checkpoint(
        [("z", 1, 4), ("a", 0, 9), ("t", 0, part.leo)])


def test_dry_run_writes_no_checkpoint_and_speaks_in_the_conditional(tmp_path):
    part = Part(tmp_path / "logdir")
    part.garbage_tail(2)
    before = files_in(part.dir)
    p = recover("--dry-run", part.dir)
    assert p.returncode == 1, p
    assert files_in(part.dir) == before
    assert not os.path.exists(os.path.join(part.logdir, CHECKPOINT))
    assert "would be set to the log end offset %d" % part.bases[2] in p.stdout or \
        "would be set to the log end offset %d" % part.leo in p.stdout, p.stdout
    last = segment_lines(p, part)[2]
    assert "would keep" in last and "would be cut: no whole batch, 500 bytes" in last, p.stdout


def test_full_recovers_every_segment(tmp_path):
    """Recovery point at the log end: segment 0's garbage tail is below it and kept; --full
    recovers it anyway (the later segments then set aside, as after any cut)."""
    part = Part(tmp_path / "logdir")
    part.garbage_tail(0)
    part.checkpoint([("t", 0, part.leo)])
    seg0 = read(part.path(0, "log"))
    assert recover(part.dir).returncode == 0
    assert read(part.path(0, "log")) == seg0
    p = recover("--full", part.dir)
    assert p.returncode == 1, p
    assert read(part.path(0, "log")) == part.data[0]
    assert not os.path.exists(part.path(1, "log")) and not os.path.exists(part.path(2, "log"))
    assert "%s: --full: kept offsets 0-%d" % (part.path(0, "log"), part.bases[1] - 1) \
        in p.stdout, p.stdout
    assert part.checkpoint_text() == ig.offset_checkpoint([("t", 0, part.bases[1])])


def test_killed_append_empty_index_is_rebuilt(tmp_path):
    """A killed append: the active segment has KBs of log and an EMPTY .index (the entries
    were in the writer's memory when it was killed); no clean-shutdown marker: rebuilt."""
    part = Part(tmp_path / "logdir", n_batches=(30, 30, 300))
    assert len(part.data[2]) > 200_000
    part.empty_indexes(2)
    p = recover(part.dir)
    assert p.returncode == 1, p
    part.assert_indexes_rebuilt(2)


# -- the clean-shutdown marker --------------------------------------------------------------------

def test_clean_shutdown_marker_skips_recovery_and_is_kept(tmp_path):
    """With the marker, no segment is recovered (the garbage tail of segment 0 and the empty
    indexes of the active one stay); the marker stays; the recovery point becomes the log end
    offset, as the broker sets it after a clean shutdown."""
    part = Part(tmp_path / "logdir")
    part.garbage_tail(2)
    part.empty_indexes(1)
    marker = os.path.join(part.logdir, MARKER)
    ig.write_file(marker, b'{"version":0,"brokerEpoch":42}')
    before = files_in(part.dir)
    p = recover(part.dir)
    assert p.returncode == 0, p
    assert files_in(part.dir) == before
    assert read(marker) == b'{"version":0,"brokerEpoch":42}'
    assert part.checkpoint_text() == ig.offset_checkpoint([("t", 0, part.leo)])
    assert all("clean shutdown: not recovered" in line for line in segment_lines(p, part))
    # --full recovers every segment regardless
    p = recover("--full", part.dir)
    assert p.returncode == 1, p
    assert read(part.path(2, "log")) == part.data[2]
    part.assert_indexes_rebuilt(1)
    assert read(marker) == b'{"version":0,"brokerEpoch":42}'   # every partition finished


def test_clean_shutdown_sanity_check_still_recovers_a_segment_without_index(tmp_path):
    """Even after a clean shutdown, a segment without .index is recovered (sanityCheck's
    NoSuchFileException); a later segment stays (loadSegmentFiles deletes nothing after it); a
    missing .timeindex is created empty, not rebuilt. The marker is removed while the partition
    changes, then written back."""
    part = Part(tmp_path / "logdir")
    os.unlink(part.path(0, "index"))
    part.garbage_tail(0)
    os.unlink(part.path(1, "timeindex"))
    marker = os.path.join(part.logdir, MARKER)
    ig.write_file(marker, b"")
    dry = recover("--dry-run", part.dir)
    assert dry.returncode == 1, dry
    assert "marker: would be removed while partitions change, then written back" in dry.stdout
    p = recover(part.dir)
    assert p.returncode == 1, p
    assert "marker: removed while partitions changed, then written back" in p.stdout, p.stdout
    assert read(part.path(0, "log")) == part.data[0]
    part.assert_indexes_rebuilt(0)
    assert read(part.path(1, "timeindex")) == b""
    assert read(part.path(2, "log")) == part.data[2]
    assert os.path.exists(marker)
    assert "no offset index: recovered" in segment_lines(p, part)[0], p.stdout


def test_txnindex_entry_below_base_sends_the_segment_to_recovery(tmp_path):
    part = Part(tmp_path / "logdir")
    part.checkpoint([("t", 0, part.leo)])
    bad = ig.encode_txn_index([ig.AbortedTxn(7001, 0, part.bases[1] - 5, 0)])
    ig.write_file(part.path(1, "txnindex"), bad)
    p = recover(part.dir)
    assert p.returncode == 1, p
    assert read(part.path(1, "txnindex")) == ig.encode_txn_index(part.segs[1].txns)
    assert "transaction index entry below the base offset" in segment_lines(p, part)[1]


def test_a_failed_partition_leaves_no_marker(tmp_path):
    """A run that changed one partition and failed on another does not write the marker back:
    the broker recovers the directory in full."""
    good = Part(tmp_path / "logdir", topic="a")
    os.unlink(good.path(0, "index"))
    bad = Part(tmp_path / "logdir", topic="b")
    os.unlink(bad.path(0, "index"))
    # the segment to cut is a symlink: recover refuses the partition
    real = os.path.join(str(tmp_path), "elsewhere.log")
    ig.write_file(real, kg.garbage_tail(bad.data[0], n=50))
    os.unlink(bad.path(0, "log"))
    os.symlink(real, bad.path(0, "log"))
    marker = os.path.join(good.logdir, MARKER)
    ig.write_file(marker, b"")
    p = recover(good.logdir)
    assert p.returncode == 2, p
    good.assert_indexes_rebuilt(0)
    assert not os.path.exists(marker)


def killed_at(step, directory):
    p = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(step), directory], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    return p.returncode == -signal.SIGKILL, p


@pytest.mark.slow   # a run killed before each of its file-system steps
def test_marker_never_outlives_an_unfinished_change(tmp_path):
    """Killed before each file-system step of a run that changes a partition of a cleanly shut
    down directory: whenever the marker is there after the kill, the partition is either as it
    was or as the uninterrupted run leaves it (a broker trusting the marker finds nothing
    half-done); a rerun then reaches the uninterrupted run's state, or, once the marker is
    gone, the state a run without the marker reaches (the recovery the broker would do)."""
    def build(root, marker=True):
        part = Part(os.path.join(root, "logdir"))
        os.unlink(part.path(1, "index"))
        part.garbage_tail(1)
        if marker:
            ig.write_file(os.path.join(part.logdir, MARKER), b"")
        return part

    ref = build(str(tmp_path / "ref"))
    original = files_in(ref.dir)
    assert recover(ref.dir).returncode == 1
    final = files_in(ref.dir)
    assert os.path.exists(os.path.join(ref.logdir, MARKER))
    unclean = build(str(tmp_path / "unclean"), marker=False)
    assert recover(unclean.dir).returncode == 1
    final_unclean = files_in(unclean.dir)
    assert final_unclean != final   # segment 2 set aside after the cut of segment 1
    step = 0
    while True:
        step += 1
        assert step < 200
        part = build(str(tmp_path / ("k%d" % step)))
        killed, p = killed_at(step, part.dir)
        if not killed:
            assert p.returncode == 1, p
            break
        has_marker = os.path.exists(os.path.join(part.logdir, MARKER))
        if has_marker:
            assert files_in(part.dir) in (original, final), "killed before step %d" % step
        assert recover(part.dir).returncode in (0, 1)
        assert files_in(part.dir) in ((final,) if has_marker else (final, final_unclean)), \
            "killed before step %d" % step
    assert step > 5


# -- the offset overflow split -------------------------------------------------------------------

def overflowing_segment():
    """A segment based at 0 whose batches jump past 2^31 twice: (bytes, [(base, start, end)]
    of the segments the broker's split makes, [batch base offsets])."""
    w = kg.SegmentWriter(0, partition_leader_epoch=1)
    starts = []
    for i in range(40):
        gap = 2**31 + 5 if i in (15, 30) else 0
        if gap:
            starts.append((w.next_offset + gap, len(w.data())))
        recs = [kg.Rec(b"k%d" % i, kg.filler(i) * 20, T0 + i * 1000)]
        w.add_v2(recs, gap=gap)
    data = w.data()
    bounds = [(0, 0)] + starts
    pieces = [(b, s, e) for (b, s), e in zip(bounds, [s for _, s in starts] + [len(data)])]
    return data, pieces, w.next_offset


def test_offset_overflow_is_split_not_cut(tmp_path):
    data, pieces, leo = overflowing_segment()
    d = os.path.join(str(tmp_path), "logdir", "o-0")
    os.makedirs(d)
    ig.write_file(os.path.join(d, name(0, "log")), data)   # (no index could hold its offsets)
    dry = recover("--dry-run", d)
    assert dry.returncode == 1, dry
    assert "would be split" in dry.stdout, dry.stdout
    assert read(os.path.join(d, name(0, "log"))) == data
    p = recover(d)
    assert p.returncode == 1, p
    files = files_in(d)
    for base, start, end in pieces:
        assert files[name(base, "log")] == data[start:end], base
        idx = ig.build_indexes(data[start:end])
        assert files[name(base, "index")] == ig.encode_offset_index(idx.offset_entries, base)
        assert files[name(base, "timeindex")] == ig.encode_time_index(idx.time_entries, base)
    assert sorted(n for n in files if n.endswith(".log")) == [name(b, "log") for b, _, _ in
                                                              pieces]
    # the original segment is kept in the quarantine, verbatim; the manifest lists it and
    # every file written where there was none: the new segments, their indexes and snapshots
    (run,) = os.listdir(os.path.join(d, QUARANTINE))
    assert os.listdir(os.path.join(d, QUARANTINE, run)) == sorted(["manifest.json",
                                                                   name(0, "log")])
    assert read(os.path.join(d, QUARANTINE, run, name(0, "log"))) == data
    with open(os.path.join(d, QUARANTINE, run, "manifest.json"), encoding="utf-8") as f:
        entries = json.load(f)["entries"]
    assert [(e["what"], e["file"]) for e in entries if e["what"] != "written"] == [
        ("moved", name(0, "log"))]
    written = {e["file"]: e for e in entries if e["what"] == "written"}
    for base, start, end in pieces:
        assert written[name(base, "log")]["size"] == end - start
        assert written[name(base, "log")]["sha256"] == hashlib.sha256(data[start:end]).hexdigest()
        assert name(base, "index") in written
    with open(os.path.join(str(tmp_path), "logdir", CHECKPOINT), encoding="utf-8") as f:
        assert f.read() == ig.offset_checkpoint([("o", 0, leo)])
    assert recover(d).returncode == 0
    # and a restore undoes the split: the original segment back, the new ones set aside
    r = subprocess.run([sys.executable, "-m", "kafkalog_cli", "quarantine", "restore", d, run],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r
    files = files_in(d)
    assert sorted(n for n in files if n.endswith(".log")) == [name(0, "log")]
    assert files[name(0, "log")] == data


@pytest.mark.slow   # a run killed before each of its file-system steps
def test_offset_overflow_split_survives_a_kill_at_every_step(tmp_path):
    data, pieces, _ = overflowing_segment()

    def build(root):
        d = os.path.join(root, "logdir", "o-0")
        os.makedirs(d)
        ig.write_file(os.path.join(d, name(0, "log")), data)
        return d

    ref = build(str(tmp_path / "ref"))
    assert recover(ref).returncode == 1
    final = files_in(ref)
    step = 0
    while True:
        step += 1
        assert step < 200
        d = build(str(tmp_path / ("k%d" % step)))
        killed, p = killed_at(step, d)
        if not killed:
            assert p.returncode == 1, p
            break
        killed_state = crashcheck._files(d)
        runs_before = crashcheck.quarantine_runs(d)
        res = recover(d)
        assert res.returncode in (0, 1), (step, res)
        assert files_in(d) == final, "killed before step %d" % step
        # what any run set aside is listed, and restoring the settling run gives the killed
        # state back
        problems = crashcheck.quarantine_problems(d, runs_before, killed_state)
        assert not problems, (step, problems)
    assert step > 5


# -- a directory caught mid-deletion -------------------------------------------------------------

def test_mid_deletion_leftovers_are_finished_into_quarantine(tmp_path):
    """LogLoader deletes every *.deleted file but *.checkpoint.deleted: .index.deleted and
    .timeindex.deleted without their .log.deleted, a .log.deleted alone, a .snapshot.deleted;
    recover moves each, verbatim, to the quarantine; the empty active segment stays."""
    d = os.path.join(str(tmp_path), "logdir", "t-0")
    data, nxt = ig.busy_segment(100, n_batches=20)
    ig.write_partition(d, [(100, data), (nxt, b"")])
    old, _ = ig.busy_segment(0, n_batches=10)
    leftovers = {
        name(0, "index.deleted"): ig.encode_offset_index(ig.build_indexes(old).offset_entries, 0),
        name(0, "timeindex.deleted"): ig.encode_time_index(ig.build_indexes(old).time_entries, 0),
        name(50, "log.deleted"): old,
        name(50, "snapshot.deleted"): ig.encode_snapshot([]),
    }
    for n, content in leftovers.items():
        ig.write_file(os.path.join(d, n), content)
    kept = "leader-epoch-checkpoint.checkpoint.deleted"
    ig.write_file(os.path.join(d, kept), b"0\n0\n")
    p = recover(d)
    assert p.returncode == 1, p
    files = files_in(d)
    assert not set(leftovers) & set(files)
    assert files[kept] == b"0\n0\n"
    assert files[name(nxt, "log")] == b""
    saved = {}
    for root, _, found in os.walk(os.path.join(d, QUARANTINE)):
        for n in found:
            saved[n] = read(os.path.join(root, n))
    for n, content in leftovers.items():
        assert saved[n] == content, n
    assert recover(d).returncode == 0


def test_unreadable_checkpoint_recovers_everything_and_is_not_written_over(tmp_path):
    """A checkpoint LogManager cannot read counts as empty (every segment recovered); recover
    does not write over what it could not read, and says so."""
    part = Part(tmp_path / "logdir")
    part.garbage_tail(0)
    path = os.path.join(part.logdir, CHECKPOINT)
    ig.write_file(path, b"1\n1\nt 0 999999\n")
    p = recover(part.dir)
    assert p.returncode == 1, p
    assert read(part.path(0, "log")) == part.data[0]
    assert read(path) == b"1\n1\nt 0 999999\n"
    assert "not read" in p.stdout and "not written" in p.stdout, p.stdout


# -- transactions through the segments that are not recovered -------------------------------------

def txn_partition(directory, snapshot=None):
    """Three segments: producer 9000's transaction opens in segment 0 and is aborted in segment
    2, producer 9001's opens in segment 2 before that ABORT (so the entry's last stable offset
    is 9001's first offset). ``snapshot``: None, or the entries of a producer snapshot at
    segment 2's base offset. Returns (Part-like bases, the .txnindex segment 2 must have)."""
    w0 = kg.SegmentWriter(0, partition_leader_epoch=1)
    for i in range(10):
        w0.add_v2([kg.Rec(b"a%d" % i, kg.filler(i) * 10, T0 + i)])
    txn_first = w0.next_offset
    w0.add_v2([kg.Rec(b"t", b"v", T0 + 20)], producer_id=9000, producer_epoch=0,
              base_sequence=0, transactional=True)
    w1 = kg.SegmentWriter(w0.next_offset, partition_leader_epoch=1)
    for i in range(10):
        w1.add_v2([kg.Rec(b"b%d" % i, kg.filler(i) * 10, T0 + 100 + i)])
    w2 = kg.SegmentWriter(w1.next_offset, partition_leader_epoch=1)
    other_first = w2.next_offset
    w2.add_v2([kg.Rec(b"u", b"v", T0 + 200)], producer_id=9001, producer_epoch=0,
              base_sequence=0, transactional=True)
    w2.add_control(kg.ABORT, 9000, 0, 3, timestamp=T0 + 201)
    for i in range(5):
        w2.add_v2([kg.Rec(b"c%d" % i, kg.filler(i) * 10, T0 + 300 + i)])
    segments = [(0, w0.data()), (w1.base_offset, w1.data()), (w2.base_offset, w2.data())]
    ig.write_partition(directory, segments, txnindex=False)   # no .txnindex: recovery writes it
    write_leader_epochs(directory, segments)
    batches = [b for _, d in segments for b in ig.read_log(d)]
    want = ig.aborted_txns(batches)
    assert want == [ig.AbortedTxn(9000, txn_first, w2.next_offset - 6, other_first)]
    if snapshot is not None:
        ig.write_file(os.path.join(directory, name(w2.base_offset, "snapshot")),
                      ig.encode_snapshot(snapshot))
    return [b for b, _ in segments], w2.next_offset, txn_first, ig.encode_txn_index(want)


def test_transactions_below_the_recovery_point_are_followed(tmp_path):
    """The recovery point in segment 2: segments 0 and 1 are not recovered, but the aborted
    transaction segment 2 ends started in segment 0: its .txnindex entry has the first offset
    the broker's producer state has (read from the segments' batches without a snapshot)."""
    d = os.path.join(str(tmp_path), "logdir", "t-0")
    bases, leo, _, want = txn_partition(d)
    ig.write_file(os.path.join(str(tmp_path), "logdir", CHECKPOINT),
                  ig.offset_checkpoint([("t", 0, bases[2] + 1)]))
    p = recover(d)
    assert p.returncode == 1, p
    assert read(os.path.join(d, name(bases[2], "txnindex"))) == want


def test_transactions_below_the_recovery_point_come_from_the_snapshot(tmp_path):
    """With a producer snapshot at segment 2's base, the producer state comes from it (as
    ProducerStateManager loads its latest snapshot): the same entry when it says 9000's
    transaction is open; none when it says no transaction is open (the snapshot is trusted)."""
    d = os.path.join(str(tmp_path), "a", "logdir", "t-0")
    open_txn = [ig.SnapshotEntry(9000, 0, 0, 10, 0, T0 + 20, -1, 10)]
    bases, _, txn_first, want = txn_partition(d, snapshot=open_txn)
    assert txn_first == 10
    ig.write_file(os.path.join(str(tmp_path), "a", "logdir", CHECKPOINT),
                  ig.offset_checkpoint([("t", 0, bases[2] + 1)]))
    assert recover(d).returncode == 1
    assert read(os.path.join(d, name(bases[2], "txnindex"))) == want

    d = os.path.join(str(tmp_path), "b", "logdir", "t-0")
    bases, leo, _, _ = txn_partition(d, snapshot=[])
    ig.write_file(os.path.join(str(tmp_path), "b", "logdir", CHECKPOINT),
                  ig.offset_checkpoint([("t", 0, bases[2] + 1)]))
    p = recover(d)
    assert p.returncode == 1, p     # the snapshot at the log end offset written
    assert not os.path.exists(os.path.join(d, name(bases[2], "txnindex")))
    segments = [(b, read(os.path.join(d, name(b, "log")))) for b in bases]
    assert read(os.path.join(d, name(leo, "snapshot"))) == expected_snapshot_at(
        segments, bases[2], leo)


def test_json_report_names_the_rules(tmp_path):
    part = Part(tmp_path / "logdir")
    part.empty_indexes(2)
    part.checkpoint([("t", 0, part.bases[1] + 3)])
    p = recover("--format", "json", "--dry-run", part.dir)
    assert p.returncode == 1, p
    objs = [json.loads(line) for line in p.stdout.splitlines()]
    (partition,) = [o for o in objs if o["type"] == "partition"]
    assert partition["recoveryPoint"] == part.bases[1] + 3
    assert partition["cleanShutdown"] is False and partition["logEndOffset"] == part.leo
    segments = [o for o in objs if o["type"] == "segment"]
    assert [o["rule"] for o in segments] == ["below-recovery-point", "recovery-point",
                                             "recovery-point"]
    assert [o["recovered"] for o in segments] == [False, True, True]
    assert segments[1]["indexesReplaced"] == []
    assert segments[2]["indexesReplaced"] == ["index", "timeindex"]
    assert (segments[2]["firstOffset"], segments[2]["nextOffset"]) == (part.bases[2], part.leo)
    assert segments[2]["records"] == part.leo - part.bases[2]
    (point,) = [o for o in objs if o["type"] == "recoveryPoint"]
    assert (point["topic"], point["partition"], point["old"], point["new"]) == (
        "t", 0, part.bases[1] + 3, part.leo)


# -- leader epochs (LeaderEpochFileCache) ---------------------------------------------------------

def epoch_partition(directory, file_entries):
    """Two segments of epoch 1, then one whose batches go to epoch 2 at E2 and epoch 3 at E3,
    with a flipped bit in the first epoch-3 batch's CRC (recovery cuts it and all after it).
    ``file_entries(E2, E3)``: the leader-epoch-checkpoint written. Returns (E2, E3, bases)."""
    segments = []
    base = 0
    for i in range(2):
        data, nxt = ig.busy_segment(base, n_batches=20, t0=T0 + 100000 * i, seed=i)
        segments.append((base, data))
        base = nxt
    w = kg.SegmentWriter(base, partition_leader_epoch=1)
    marks = {}
    for i in range(30):
        if i in (10, 20):
            w.partition_leader_epoch = 2 if i == 10 else 3
            marks[w.partition_leader_epoch] = (w.next_offset, len(w.data()))
        w.add_v2([kg.Rec(b"k%d" % i, kg.filler(i) * 10, T0 + 300000 + i)])
    data = w.data()
    e3_offset, e3_pos = marks[3]
    segments.append((base, kg.flip_bit(data, e3_pos + 18)))   # in its stored CRC
    ig.write_partition(directory, segments)
    ig.write_file(os.path.join(directory, "leader-epoch-checkpoint"),
                  ig.leader_epoch_checkpoint(file_entries(marks[2][0], e3_offset)))
    return marks[2][0], e3_offset, [b for b, _ in segments]


def test_leader_epochs_past_the_new_log_end_are_truncated(tmp_path):
    d = os.path.join(str(tmp_path), "logdir", "t-0")
    e2, e3, bases = epoch_partition(d, lambda e2, e3: [(1, 0), (2, e2), (3, e3)])
    p = recover(d)
    assert p.returncode == 1, p
    # the log now ends at E3: epoch 3 started at or past it, so it goes
    assert read(os.path.join(d, "leader-epoch-checkpoint")) == \
        ig.leader_epoch_checkpoint([(1, 0), (2, e2)]).encode()
    saved = [os.path.join(r, n) for r, _, ns in os.walk(os.path.join(d, QUARANTINE))
             for n in ns if n == "leader-epoch-checkpoint"]
    assert [read(s) for s in saved] == [ig.leader_epoch_checkpoint(
        [(1, 0), (2, e2), (3, e3)]).encode()]
    assert "leader-epoch-checkpoint: rewritten" in p.stdout, p.stdout
    assert recover(d).returncode == 0


def test_leader_epochs_of_recovered_batches_are_assigned(tmp_path):
    """The file knows only epoch 1: the recovered batches of epoch 2 start it (epoch 3's
    batches are cut, so it is not added)."""
    d = os.path.join(str(tmp_path), "logdir", "t-0")
    e2, _, bases = epoch_partition(d, lambda e2, e3: [(1, 0)])
    dry = recover("--dry-run", d)
    assert dry.returncode == 1 and "would be rewritten" in dry.stdout, dry
    p = recover(d)
    assert p.returncode == 1, p
    assert read(os.path.join(d, "leader-epoch-checkpoint")) == \
        ig.leader_epoch_checkpoint([(1, 0), (2, e2)]).encode()


# -- producer snapshots (ProducerStateManager) ----------------------------------------------------

def test_snapshots_above_the_log_end_are_set_aside_and_one_written_at_it(tmp_path):
    """A snapshot above the log end offset (the log was cut below it by a crash) goes to
    quarantine; the snapshot at the log end offset, missing, is written from the latest one
    below it and the batches after (here: from segment 1's, empty, and segment 1's and 2's
    batches, each with its aborted transaction)."""
    part = Part(tmp_path / "logdir")
    part.checkpoint([("t", 0, part.leo)])
    os.unlink(os.path.join(part.dir, name(part.leo, "snapshot")))
    ig.write_file(os.path.join(part.dir, name(part.bases[1], "snapshot")), ig.encode_snapshot([]))
    stray = ig.encode_snapshot([ig.SnapshotEntry(77, 0, 5, part.leo + 40, 0, T0, -1, -1)])
    ig.write_file(os.path.join(part.dir, name(part.leo + 50, "snapshot")), stray)
    p = recover(part.dir)
    assert p.returncode == 1, p
    files = files_in(part.dir)
    assert name(part.leo + 50, "snapshot") not in files
    assert files[name(part.leo, "snapshot")] == expected_snapshot_at(
        list(zip(part.bases, part.data)), part.bases[1], part.leo)
    saved = [read(os.path.join(r, n)) for r, _, ns in os.walk(os.path.join(part.dir, QUARANTINE))
             for n in ns if n == name(part.leo + 50, "snapshot")]
    assert saved == [stray]
    assert "%s: written (producer state at the log end offset %d" % (
        os.path.join(part.dir, name(part.leo, "snapshot")), part.leo) in p.stdout, p.stdout
    assert recover(part.dir).returncode == 0


def test_clean_shutdown_without_snapshots_writes_an_empty_one(tmp_path):
    """UnifiedLog.rebuildProducerState after a clean shutdown with no snapshot at all: no scan,
    an empty snapshot at the log end offset (though the log has producers)."""
    part = Part(tmp_path / "logdir")
    os.unlink(os.path.join(part.dir, name(part.leo, "snapshot")))
    ig.write_file(os.path.join(part.logdir, MARKER), b"")
    p = recover(part.dir)
    assert p.returncode == 1, p
    assert read(os.path.join(part.dir, name(part.leo, "snapshot"))) == ig.encode_snapshot([])
    assert os.path.exists(os.path.join(part.logdir, MARKER))


def test_unreadable_snapshot_is_set_aside_and_rebuilt(tmp_path):
    """A snapshot at the log end offset that cannot be read (its CRC fails) is set aside, as
    ProducerStateManager deletes it, and written again from the older one and the log (the
    older one's producers, idle since T0 with no open transaction, have expired: dropped as
    loadFromSnapshot drops them)."""
    part = Part(tmp_path / "logdir")
    part.checkpoint([("t", 0, part.leo)])
    good = read(os.path.join(part.dir, name(part.leo, "snapshot")))
    bad = ig.bad_snapshot_crc(good)
    ig.write_file(os.path.join(part.dir, name(part.leo, "snapshot")), bad)
    ig.write_file(os.path.join(part.dir, name(part.bases[2], "snapshot")),
                  expected_snapshot_at(list(zip(part.bases, part.data)), 0, part.bases[2]))
    p = recover(part.dir)
    assert p.returncode == 1, p
    assert kg.T0 < 1_800_000_000_000
    assert read(os.path.join(part.dir, name(part.leo, "snapshot"))) == expected_snapshot_at(
        list(zip(part.bases, part.data)), part.bases[2], part.leo) != good
    saved = [read(os.path.join(r, n)) for r, _, ns in os.walk(os.path.join(part.dir, QUARANTINE))
             for n in ns if n == name(part.leo, "snapshot")]
    assert saved == [bad]


def quarantined(part, n):
    return [read(os.path.join(r, f)) for r, _, fs in os.walk(os.path.join(part.dir, QUARANTINE))
            for f in fs if f == n]


def test_no_snapshot_rebuilds_from_the_start_with_snapshots_at_the_last_two_bases(tmp_path):
    """No snapshot, an unclean shutdown: UnifiedLog.rebuildProducerState replays every segment
    from the log start offset and takes a snapshot on reaching the base offset of each of the
    last two segments, and one at the log end offset; each holds the state of the batches
    below its offset."""
    part = Part(tmp_path / "logdir")
    part.checkpoint([("t", 0, part.leo)])
    os.unlink(os.path.join(part.dir, name(part.leo, "snapshot")))
    p = recover(part.dir)
    assert p.returncode == 1, p
    logs = list(zip(part.bases, part.data))
    snaps = sorted(n for n in os.listdir(part.dir) if n.endswith(".snapshot"))
    assert snaps == [name(o, "snapshot") for o in (part.bases[1], part.bases[2], part.leo)]
    for off in (part.bases[1], part.bases[2], part.leo):
        assert read(os.path.join(part.dir, name(off, "snapshot"))) == \
            expected_snapshot_at(logs, 0, off), off
    assert recover(part.dir).returncode == 0


def test_stray_snapshot_below_the_log_end_is_set_aside(tmp_path):
    """ProducerStateManager.removeStraySnapshots after loading: a snapshot at no segment's
    base offset (a restart's, inside segment 1) is deleted (here set aside), the newest one
    above every base (at the log end offset) is kept; the state is then loaded from the one at
    the log end offset, nothing to replay."""
    part = Part(tmp_path / "logdir")
    part.checkpoint([("t", 0, part.leo)])
    inside = part.bases[1] + 3
    stray = expected_snapshot_at(list(zip(part.bases, part.data)), 0, inside)
    ig.write_file(os.path.join(part.dir, name(inside, "snapshot")), stray)
    at_leo = read(os.path.join(part.dir, name(part.leo, "snapshot")))
    p = recover(part.dir)
    assert p.returncode == 1, p
    snaps = sorted(n for n in os.listdir(part.dir) if n.endswith(".snapshot"))
    assert snaps == [name(part.leo, "snapshot")]
    assert read(os.path.join(part.dir, name(part.leo, "snapshot"))) == at_leo
    assert quarantined(part, name(inside, "snapshot")) == [stray]
    assert recover(part.dir).returncode == 0


def test_snapshots_at_or_below_the_log_start_offset_are_set_aside(tmp_path):
    """ProducerStateManager.truncateAndReload deletes the snapshots at or below the log start
    offset (log-start-offset-checkpoint, here inside segment 1, above the first base): the one
    at segment 1's base goes; the one at segment 2's base is kept (above it), the state is
    loaded from the one at the log end offset."""
    part = Part(tmp_path / "logdir")
    part.checkpoint([("t", 0, part.leo)])
    logs = list(zip(part.bases, part.data))
    for b in part.bases[1:]:
        ig.write_file(os.path.join(part.dir, name(b, "snapshot")),
                      expected_snapshot_at(logs, 0, b))
    ig.write_file(os.path.join(part.logdir, "log-start-offset-checkpoint"),
                  ig.offset_checkpoint([("t", 0, part.bases[1] + 2)]))
    p = recover(part.dir)
    assert p.returncode == 1, p
    snaps = sorted(n for n in os.listdir(part.dir) if n.endswith(".snapshot"))
    assert snaps == [name(part.bases[2], "snapshot"), name(part.leo, "snapshot")]
    assert quarantined(part, name(part.bases[1], "snapshot")) == [
        expected_snapshot_at(logs, 0, part.bases[1])]
    assert recover(part.dir).returncode == 0


# -- the log end offset below the log start offset (LogLoader.recoverLog) -------------------------

def log_start_reset_partition(root):
    part = Part(os.path.join(root, "logdir"))
    ig.write_file(os.path.join(part.dir, name(part.bases[2], "snapshot")), ig.encode_snapshot([]))
    start = part.leo + 100
    ig.write_file(os.path.join(part.logdir, "log-start-offset-checkpoint"),
                  ig.offset_checkpoint([("t", 0, start)]))
    return part, start


def test_log_end_below_the_log_start_offset_replaces_the_log_by_an_empty_segment(tmp_path):
    """The log ends below the log start offset of log-start-offset-checkpoint (the segments a
    crash lost held what the checkpoint counted): LogLoader deletes every segment (set aside
    here), clears the leader epoch cache, starts the producer state afresh at the log start
    offset (no snapshot left) and creates an empty segment there; the recovery point follows."""
    part, start = log_start_reset_partition(str(tmp_path))
    before = files_in(part.dir)
    p = recover(part.dir)
    assert p.returncode == 1, p
    files = files_in(part.dir)
    assert sorted(files) == sorted(["leader-epoch-checkpoint"]
                                   + [name(start, k) for k in ("log", "index", "timeindex")])
    assert all(files[name(start, k)] == b"" for k in ("log", "index", "timeindex"))
    assert files["leader-epoch-checkpoint"] == ig.leader_epoch_checkpoint([]).encode()
    gone = [n for n in before if n[:20].isdigit()]
    assert gone and all(quarantined(part, n) == [before[n]] for n in gone), gone
    assert "t 0 %d" % start in part.checkpoint_text().splitlines()
    assert "%s: written (an empty segment at the log start offset %d" % (
        os.path.join(part.dir, name(start, "log")), start) in p.stdout, p.stdout
    again = files_in(part.dir)
    assert recover(part.dir).returncode == 0
    assert files_in(part.dir) == again


@pytest.mark.slow   # a run killed before each of its file-system steps
def test_log_start_reset_killed_at_every_step_then_rerun(tmp_path):
    ref, start = log_start_reset_partition(str(tmp_path / "ref"))
    assert recover(ref.dir).returncode == 1
    want = files_in(ref.dir)
    step = 1
    while True:
        part, _ = log_start_reset_partition(str(tmp_path / ("k%d" % step)))
        killed, p = killed_at(step, part.dir)
        if not killed:
            break
        assert recover(part.dir).returncode in (0, 1)
        assert files_in(part.dir) == want, step
        step += 1
    assert step > 5


def test_an_empty_last_segment_is_the_log_end(tmp_path):
    """An empty last segment's base offset is the log end offset (LogSegment.readNextOffset),
    not the offset after the previous segment's last batch: the recovery point and the producer
    snapshot go there, and a second run finds nothing to change."""
    part = Part(tmp_path / "logdir")
    end = part.leo + 100   # an empty segment past a gap in the offsets, as compaction leaves
    for kind in ("log", "index", "timeindex"):
        ig.write_file(os.path.join(part.dir, name(end, kind)), b"")
    assert recover("--full", part.dir).returncode == 1
    assert part.checkpoint_text() == ig.offset_checkpoint([("t", 0, end)])
    snapshots = sorted(n for n in os.listdir(part.dir) if n.endswith(".snapshot"))
    assert name(end, "snapshot") in snapshots
    assert all(int(n.split(".")[0]) <= end for n in snapshots), snapshots
    before = files_in(part.dir)
    p = recover("--full", part.dir)
    assert p.returncode == 0, p.stdout
    assert files_in(part.dir) == before


# -- a leader-epoch-checkpoint the broker cannot load -----------------------------------------------

# Files LeaderEpochFileCache's constructor cannot load (CheckpointFile: IOException, the log
# directory goes offline; assign: IllegalArgumentException for a negative entry), and one whose
# entries do not increase (no cache wrote it).
UNLOADABLE = {
    "malformed-line": b"0\n2\n0 0\nzz 30\n",
    "version": b"1\n2\n0 0\n2 30\n",
    "count": b"0\n3\n0 0\n2 30\n",
    "decreasing": b"0\n2\n2 30\n0 0\n",
    "negative": b"0\n1\n-1 0\n",
    "not-text": b"\xff\xfe\x00garbage",
}


def epochs_assigned(part_dir):
    """The entries LeaderEpochFileCache.assign makes when every v2 batch of the partition is
    observed in offset order (LogSegment.recover: a batch of a higher epoch starts it at its
    base offset), the batches read with kafka-python."""
    entries = []
    for base, path in sorted((int(n[:20]), os.path.join(part_dir, n))
                             for n in os.listdir(part_dir) if n.endswith(".log")):
        for kb in kg.kafka_python_read(read(path), deep=False):
            epoch = kb.batch.leader_epoch
            if epoch >= 0 and (not entries or epoch > entries[-1][0]):
                entries.append((epoch, kb.batch.base_offset))
    return entries


def kafkalog(*args):
    return subprocess.run([sys.executable, "-m", "kafkalog_cli"] + [str(a) for a in args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("garbled", sorted(UNLOADABLE))
def test_a_checkpoint_the_broker_cannot_load_is_set_aside_and_rebuilt(tmp_path, garbled):
    """The file is moved to quarantine, whole, and the checkpoint rebuilt from every segment's
    batches, those below the recovery point too (epoch 0 starts in the first segment, which
    recover does not read otherwise); verify-index then exits 0 and a second run has nothing
    to do."""
    import crashcheck as cc
    part, _ = cc.write_seed(str(tmp_path / "logs"))
    want = epochs_assigned(part)
    assert [e for e, _ in want] == [0, 2] and want[0] == (0, 0)
    path = os.path.join(part, "leader-epoch-checkpoint")
    ig.write_file(path, UNLOADABLE[garbled])
    p = recover("--format", "json", part)
    assert p.returncode == 1, p
    said = [json.loads(line) for line in p.stdout.splitlines()]
    assert [o["type"] for o in said if o.get("file") == path] == ["moved", "leaderEpochs"], said
    assert read(path) == ig.leader_epoch_checkpoint(want).encode()
    runs = os.listdir(os.path.join(part, QUARANTINE))
    assert len(runs) == 1
    run = os.path.join(part, QUARANTINE, runs[0])
    assert read(os.path.join(run, "leader-epoch-checkpoint")) == UNLOADABLE[garbled]
    manifest = json.loads(read(os.path.join(run, "manifest.json")))
    assert [(e["what"], e["saved_as"]) for e in manifest["entries"]
            if e["file"] == "leader-epoch-checkpoint"] == [("moved", "leader-epoch-checkpoint")]
    v = kafkalog("verify-index", part)
    assert v.returncode == 0, v
    before = files_in(part)
    p = recover(part)
    assert p.returncode == 0, p
    assert files_in(part) == before


def test_a_checkpoint_the_broker_cannot_load_dry_run(tmp_path):
    """--dry-run says what would be moved and written, and changes nothing."""
    import crashcheck as cc
    part, _ = cc.write_seed(str(tmp_path / "logs"))
    path = os.path.join(part, "leader-epoch-checkpoint")
    ig.write_file(path, UNLOADABLE["malformed-line"])
    before = files_in(part)
    p = recover("--dry-run", part)
    assert "%s: would be moved to quarantine" % path in p.stdout, p.stdout
    assert "%s: would be rewritten" % path in p.stdout, p.stdout
    assert files_in(part) == before


def test_an_unloadable_checkpoint_of_a_log_reset_to_its_start_is_cleared(tmp_path):
    """Every segment below the log start offset (LogLoader deletes them all): the unloadable
    file is set aside and an empty checkpoint written, as the broker's cleared cache."""
    import crashcheck as cc
    log_dir = str(tmp_path / "logs")
    part, leo = cc.write_seed(log_dir)
    ig.write_file(os.path.join(log_dir, "log-start-offset-checkpoint"),
                  ig.offset_checkpoint([("other", 0, 0), (cc.TOPIC, 0, leo + 10)]))
    path = os.path.join(part, "leader-epoch-checkpoint")
    ig.write_file(path, UNLOADABLE["count"])
    assert recover(log_dir).returncode == 1
    assert read(path) == ig.leader_epoch_checkpoint([]).encode()
    runs = os.listdir(os.path.join(part, QUARANTINE))
    assert read(os.path.join(part, QUARANTINE, runs[0], "leader-epoch-checkpoint")) == \
        UNLOADABLE["count"]


@pytest.mark.slow   # a run killed before each of its file operations
def test_an_unloadable_checkpoint_rebuilt_by_a_run_killed_before_every_file_operation(tmp_path):
    """Killed before each file operation, then recover run again: the partition ends as one
    uninterrupted run leaves it. The recovery point is past the first segment, whose batches
    start epoch 0: a run that left the partition without a checkpoint (moved away, the new
    one not yet written) would have the rerun rebuild from the recovered segments only."""
    import crashcheck as cc
    seed = str(tmp_path / "seed" / "logs")
    part, _ = cc.write_seed(seed)
    ig.write_file(os.path.join(part, "leader-epoch-checkpoint"), UNLOADABLE["malformed-line"])
    c = cc.Campaign(tmp_path, seed, lambda part: ["recover", part], lambda part, out: None)
    assert c.want["%s/leader-epoch-checkpoint" % cc.PARTITION] == \
        ig.leader_epoch_checkpoint(epochs_assigned(part)).encode()
    c.every_step()
    print(c.stats)
    assert not c.failures, "\n".join(c.failures)
