"""`kafkalog retain`: the broker's retention (UnifiedLog.deleteOldSegments), offline.

Partitions are written with kafka-python (kafkagen) and the broker-style index builder
(indexgen); expected fates come from the numbers the tests put in (timestamps, sizes, offsets)
and, for the randomised cases, from ``expected_fates`` below, an independent rendering of the
contract (UnifiedLog.deleteOldSegments: log start, size then time pass, each stopping at the
first segment that cannot go, bounded by the high watermark). Results on disk are read back with
kafka-python; nothing here imports kafkalog_cli except to run its click command in-process and
to call the library function that command calls per partition (``retain_partition``).
"""

import json
import os
import random
import shutil
import subprocess
import sys
import time

import pytest

import appendcheck as ac
import indexgen as ig
import kafkagen as kg
from dumpcheck import files_in, kafkalog

T0 = kg.T0
TOPIC = "orders"
HOUR = 3600 * 1000
DELETED = ".deleted"
DEFAULT_LAYOUT = [[T0 + 1000 * i, T0 + 1000 * i + 200, T0 + 1000 * i + 100] for i in range(5)]


# -- partitions --------------------------------------------------------------------------------------



def tree(directory, keep_lock=True):
    """{relative path: (bytes, mtime_ns)} of every file below ``directory``; without the log
    directory's .lock when not ``keep_lock`` (a run that locked it leaves it, as a broker does)."""
    out = {}
    for root, _, names in os.walk(directory):
        for n in names:
            p = os.path.join(root, n)
            if not keep_lock and root == directory and n == ".lock":
                continue
            with open(p, "rb") as f:
                out[os.path.relpath(p, directory)] = (f.read(), os.stat(p).st_mtime_ns)
    return out


def name(base, kind="log"):
    return "%s.%s" % (ig.segment_prefix(base), kind)


class Part:
    """A partition directory ``<tmp>/logs/<topic>-<n>`` of v2 (or legacy) segments of one-record
    batches: ``layout`` holds each segment's record timestamps."""

    def __init__(self, tmp_path, layout=None, partition=0, magic=2, first_offset=0,
                 preallocate_active=False, snapshots=False, logdir="logs"):
        self.layout = DEFAULT_LAYOUT if layout is None else layout
        self.logdir = str(tmp_path / logdir)
        self.partition = partition
        self.dir = os.path.join(self.logdir, "%s-%d" % (TOPIC, partition))
        segs, self.leo = ig.timed_segments(self.layout, first_offset, magic=magic)
        self.segs = ig.write_partition(self.dir, segs, preallocate_active=preallocate_active)
        self.bases = [s.base_offset for s in self.segs]
        self.sizes = [len(s.data) for s in self.segs]
        self.largest = [max(ts) if ts and magic > 0 else None for ts in self.layout]
        if snapshots:
            ig.write_snapshots(self.dir, self.bases + [self.leo])
        self.original = files_in(self.dir)

    def log(self, i):
        return os.path.join(self.dir, name(self.bases[i]))

    def upper(self, i):
        return self.bases[i + 1] if i + 1 < len(self.bases) else self.leo

    def checkpoint(self, kind, entries):
        ig.write_file(os.path.join(self.logdir, kind), ig.offset_checkpoint(entries))


# -- running -----------------------------------------------------------------------------------------

def retain(*args):
    res = kafkalog("retain", *[str(a) for a in args])
    assert "Traceback" not in res.err, res
    return res


def ok(res):
    assert res.code == 0, res
    return res


def dry_ok(res):
    """A dry run's result: exit 1 when it would delete a segment, 0 when not (as recover
    --dry-run exits 1 when it would change something)."""
    would = '"fate": "deleted"' in res.out or ": would be deleted (" in res.out
    assert res.code == (1 if would else 0), res
    return res


class Plan:
    def __init__(self, objs):
        assert objs and objs[0]["type"] == "partition", objs
        self.partition = objs[0]
        self.segments = [o for o in objs[1:] if o["type"] == "segment"]
        assert all(o["type"] in ("segment", "recoveryPoint", "note") for o in objs[1:]), objs

    @property
    def fates(self):
        return [s["fate"] for s in self.segments]

    def deleted_bases(self):
        return [s["baseOffset"] for s in self.segments if s["fate"] == "deleted"]

    def why(self, i):
        return self.segments[i]["why"]


def plans(*args):
    """The dry-run JSON plans (one per partition) for ``retain --dry-run --format json ARGS``."""
    res = dry_ok(retain("--dry-run", "--format", "json", *args))
    objs = [json.loads(line) for line in res.lines]
    assert objs[-1]["type"] == "summary", objs   # a run ends with its summary
    objs = objs[:-1]
    starts = [i for i, o in enumerate(objs) if o["type"] == "partition"] + [len(objs)]
    return [Plan(objs[a:b]) for a, b in zip(starts, starts[1:])]


def plan(part, *args):
    (p,) = plans(*args, part.dir)
    assert p.partition["directory"] == os.path.abspath(part.dir)
    assert [s["baseOffset"] for s in p.segments] == part.bases
    return p


def seg_line(part, i, fate):
    """retain's line for segment ``i`` of ``part`` (one-record batches), ``fate`` its
    "would be deleted (why)" or "kept (why)"."""
    b, nxt = part.bases[i], part.upper(i)
    return "%s: %s: offsets %d-%d, %d record%s, %d bytes" % (
        os.path.join(os.path.abspath(part.dir), name(b)), fate, b, nxt - 1, nxt - b,
        "" if nxt - b == 1 else "s", part.sizes[i])


def deleted_n(n, total):
    return ["deleted"] * n + ["kept"] * (total - n)


def live_bases(directory):
    return sorted(int(n[:20]) for n in os.listdir(directory) if n.endswith(".log") and len(n) == 24)


def check_contiguous(directory, log_end):
    """The remaining segments, read with kafka-python, hold every offset from the first
    segment's base to ``log_end``, each segment starting at its base."""
    bases = live_bases(directory)
    assert bases, os.listdir(directory)
    expect = bases[0]
    for b in bases:
        assert b == expect, "gap: segment %d after offset %d" % (b, expect - 1)
        with open(os.path.join(directory, name(b)), "rb") as f:
            for kb in kg.kafka_python_read(f.read()):
                assert kb.crc_ok
                for r in kb.records:
                    assert r.offset == expect, (b, r.offset, expect)
                    expect += 1
    assert expect == log_end, (expect, log_end)
    return bases


def check_consistent_after(part, log_end=None):
    """No gap, and the tools that check a partition find nothing to do."""
    check_contiguous(part.dir, part.leo if log_end is None else log_end)
    assert kafkalog("verify-index", part.dir).code == 0
    assert_recover_keeps_everything(part.dir)


def assert_recover_keeps_everything(directory):
    """``ac.assert_recover_keeps_everything``, once the producer snapshots a broker's LogLoader
    deletes after a retention are gone: the snapshots at or below the log start offset (here
    the first remaining segment's base: ProducerStateManager.truncateAndReload) and those at no
    segment's base but the newest above every base (removeStraySnapshots). ``recover`` sets
    exactly those aside (its dry run says so), and nothing else."""
    bases = live_bases(directory)
    snaps = sorted(int(n[:20]) for n in os.listdir(directory) if n.endswith(".snapshot"))
    strays = [o for o in snaps if o not in bases]
    if strays and strays[-1] > bases[-1]:
        strays.pop()
    gone = sorted(set(strays) | {o for o in snaps if o <= bases[0]})
    res = kafkalog("recover", "--dry-run", "--format", "json", directory)
    moved = sorted(os.path.basename(o["file"]) for o in map(json.loads, res.out.splitlines())
                   if o["type"] == "moved")
    assert moved == [name(o, "snapshot") for o in gone], (moved, gone)
    for o in gone:
        os.unlink(os.path.join(directory, name(o, "snapshot")))
    ac.assert_recover_keeps_everything(directory)


# -- an independent rendering of the contract (for randomised cases) ----------------------------------

def expected_fates(sizes, bases, next_offsets, largest, hw, *, log_start=None, retention_bytes=None,
                   retention_ms=None, now=0, roll_active=False):
    n = len(bases)
    log_end = next_offsets[-1]
    gone = 0
    fates = ["kept"] * n

    def run(pred):
        nonlocal gone
        i = gone
        while i < n:
            last = i == n - 1
            upper = log_end if last else bases[i + 1]
            if last and (not roll_active or next_offsets[i] == bases[i]):
                break
            if hw < upper or not pred(i, last):
                break
            fates[i] = "deleted"
            i += 1
        gone = i

    if log_start is not None:
        run(lambda i, last: (log_end if last else bases[i + 1]) <= log_start)
    if retention_bytes is not None and retention_bytes >= 0:
        diff = [sum(sizes[gone:]) - retention_bytes]

        def over(i, last):
            if diff[0] - sizes[i] >= 0:
                diff[0] -= sizes[i]
                return True
            return False
        run(over)
    if retention_ms is not None and retention_ms >= 0:
        run(lambda i, last: now - largest[i] > retention_ms)
    return fates


# == 1. each policy at its boundaries =================================================================

@pytest.mark.parametrize("delta,n", [(-1, 1), (0, 1), (1, 2)])
def test_retention_ms_boundary(tmp_path, delta, n):
    """now − largest > retention.ms (strict): exactly at the limit the segment stays."""
    part = Part(tmp_path)
    r = 10_000
    assert part.largest[1] == T0 + 1200
    now = part.largest[1] + r + delta
    p = plan(part, "--retention-ms", r, "--now", now)
    assert p.fates == deleted_n(n, 5)
    for i in range(n):
        assert p.why(i) == "retention ms %d" % r
    if n < 4:
        assert "too recent" in p.why(n) and str(part.largest[n]) in p.why(n), p.why(n)
        assert "time index" in p.why(n)
    # and the real run does what the plan said
    ok(retain("--retention-ms", r, "--now", now, "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == part.bases[n:]
    check_consistent_after(part)


@pytest.mark.parametrize("delta,n", [(-1, 1), (0, 1), (1, 0)])
def test_retention_bytes_boundary(tmp_path, delta, n):
    """diff = total − retention.bytes; a segment goes while diff − size ≥ 0."""
    part = Part(tmp_path)
    total = sum(part.sizes)
    limit = total - part.sizes[0] + delta
    p = plan(part, "--retention-bytes", limit)
    assert p.fates == deleted_n(n, 5)
    if n:
        assert p.why(0) == "retention bytes %d" % limit
    assert "needed to stay above retention bytes %d" % limit == p.why(n)
    ok(retain("--retention-bytes", limit, "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == part.bases[n:]
    remaining = sum(os.path.getsize(os.path.join(part.dir, name(b))) for b in live_bases(part.dir))
    assert remaining >= limit
    check_consistent_after(part)


@pytest.mark.parametrize("delta,n", [(-1, 3), (0, 3), (1, 2)])
def test_retention_bytes_boundary_later_segment(tmp_path, delta, n):
    part = Part(tmp_path)
    limit = sum(part.sizes[3:]) + delta
    assert plan(part, "--retention-bytes", limit).fates == deleted_n(n, 5)


def test_retention_bytes_zero_and_total(tmp_path):
    part = Part(tmp_path)
    total = sum(part.sizes)
    assert plan(part, "--retention-bytes", total).fates == deleted_n(0, 5)
    assert plan(part, "--retention-bytes", total + 1).fates == deleted_n(0, 5)
    p = plan(part, "--retention-bytes", 0)
    assert p.fates == deleted_n(4, 5)
    assert p.why(4) == "active segment (--roll-active lets it go)"
    assert plan(part, "--retention-bytes", 0, "--roll-active").fates == deleted_n(5, 5)
    # one byte more than nothing: the active segment is needed
    p = plan(part, "--retention-bytes", 1, "--roll-active")
    assert p.fates == deleted_n(4, 5)
    assert "needed to stay above retention bytes 1" in p.why(4)
    # -1: unlimited
    assert plan(part, "--retention-bytes", -1).fates == deleted_n(0, 5)


@pytest.mark.parametrize("start,n", [(2, 0), (3, 1), (4, 1), (5, 1), (6, 2), (7, 2), (12, 4)])
def test_log_start_offset_boundary(tmp_path, start, n):
    """A segment goes when the next segment's base ≤ the log start offset."""
    part = Part(tmp_path)
    assert part.bases == [0, 3, 6, 9, 12] and part.leo == 15
    p = plan(part, "--log-start-offset", start)
    assert p.fates == deleted_n(n, 5)
    for i in range(n):
        assert p.why(i) == "log start offset %d" % start
    if n < 4:
        assert p.why(n) == "holds offsets at or above the log start offset %d" % start
    # the new log start offset: the first kept segment's base, or the policy's offset when
    # higher, bounded by the high watermark (UnifiedLog.maybeIncrementLogStartOffset)
    assert p.partition["logStartOffset"] == max(part.bases[n] if n < 5 else part.leo,
                                                min(start, p.partition["highWatermark"]))


@pytest.mark.parametrize("start,roll,n", [(14, True, 4), (15, True, 5), (16, True, 5),
                                          (15, False, 4), (1000, False, 4)])
def test_log_start_offset_last_segment(tmp_path, start, roll, n):
    """The last segment: its upper bound is the log end offset, and it goes only when rolled."""
    part = Part(tmp_path)
    args = ["--log-start-offset", start] + (["--roll-active"] if roll else [])
    p = plan(part, *args)
    assert p.fates == deleted_n(n, 5)
    assert p.partition["rollFirst"] == (n == 5)
    if n == 4:
        assert p.why(4) == ("holds offsets at or above the log start offset %d" % start if roll
                            else "active segment (--roll-active lets it go)")


def test_policies_combined_in_broker_order(tmp_path):
    """Log start, then size on what is left, then time on what is left: each deletion is
    labelled by the pass that takes it."""
    layout = [[T0 + 1000 * i + j for j in range(3)] for i in range(8)]
    part = Part(tmp_path, layout)
    # log start takes segment 0; size (computed over segments 1..7) takes 1 and 2; time takes
    # 3 and 4 (5's newest is exactly at the limit)
    size_limit = sum(part.sizes[3:])
    r = 5_000
    now = part.largest[5] + r
    p = plan(part, "--log-start-offset", part.bases[1], "--retention-bytes", size_limit,
             "--retention-ms", r, "--now", now)
    assert p.fates == deleted_n(5, 8)
    assert p.why(0) == "log start offset %d" % part.bases[1]
    assert p.why(1) == p.why(2) == "retention bytes %d" % size_limit
    assert p.why(3) == p.why(4) == "retention ms %d" % r
    assert "too recent" in p.why(5)
    assert p.partition["logStartOffset"] == part.bases[5]
    # the size pass works on what the log start pass left: with the total of all segments it
    # would have taken segment 1 only
    p = plan(part, "--log-start-offset", part.bases[1], "--retention-bytes", size_limit)
    assert p.fates == deleted_n(3, 8)
    ok(retain("--log-start-offset", part.bases[1], "--retention-bytes", size_limit,
              "--retention-ms", r, "--now", now, "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == part.bases[5:]
    check_consistent_after(part)


def test_a_pass_that_stops_does_not_stop_the_next(tmp_path):
    """The size pass takes nothing (the limit is above the total) and the time pass still runs."""
    part = Part(tmp_path)
    p = plan(part, "--retention-bytes", 10 ** 9, "--retention-ms", 1, "--now", T0 + HOUR)
    assert p.fates == deleted_n(4, 5)
    assert all(p.why(i) == "retention ms 1" for i in range(4))


def test_unlimited_policy(tmp_path):
    """-1 is no limit, as in the broker's retention.ms/retention.bytes: nothing is deleted.
    (No policy at all is a usage error: tests/cli/test_exits_notes.py.)"""
    part = Part(tmp_path)
    before = tree(part.logdir)
    for args in (["--retention-ms", -1], ["--retention-ms", -1, "--retention-bytes", -1],
                 ["--retention-bytes", -1, "--now", T0 + 10 * HOUR]):
        p = plan(part, *args)
        assert p.fates == deleted_n(0, 5)
        res = ok(retain(*args, "--file-delete-delay-ms", 0, part.dir))
        assert "deleted (" not in res.out
    assert tree(part.logdir, keep_lock=False) == before


# -- the high watermark ------------------------------------------------------------------------------

def test_high_watermark_from_replication_checkpoint(tmp_path):
    part = Part(tmp_path)
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 1, 0), (TOPIC, 0, 6), ("x", 0, 0)])
    p = plan(part, "--retention-ms", 0, "--now", T0 + HOUR, "--roll-active")
    assert p.partition["highWatermark"] == 6
    assert p.partition["highWatermarkSource"] == "replication-offset-checkpoint"
    assert p.fates == deleted_n(2, 5)   # upper bounds 3 and 6 are ≤ 6; 9 is not
    assert p.why(2) == "above the high watermark 6 (replication-offset-checkpoint)"
    # the checkpoint wins over --high-watermark
    p = plan(part, "--retention-ms", 0, "--now", T0 + HOUR, "--high-watermark", 12)
    assert p.partition["highWatermark"] == 6 and p.fates == deleted_n(2, 5)
    # one below a boundary
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 0, 5)])
    p = plan(part, "--retention-ms", 0, "--now", T0 + HOUR, "--roll-active")
    assert p.fates == deleted_n(1, 5)
    assert p.why(1) == "above the high watermark 5 (replication-offset-checkpoint)"
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--roll-active",
              "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == part.bases[1:]
    check_consistent_after(part)


@pytest.mark.parametrize("hw,n", [(2, 0), (3, 1), (8, 2), (9, 3), (14, 4), (15, 5)])
def test_high_watermark_option(tmp_path, hw, n):
    part = Part(tmp_path)
    # a checkpoint without an entry for this partition: the option is used
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 1, 0)])
    p = plan(part, "--retention-bytes", 0, "--high-watermark", hw, "--roll-active")
    assert p.partition["highWatermark"] == hw
    assert p.partition["highWatermarkSource"] == "--high-watermark"
    assert p.fates == deleted_n(n, 5)
    if n < 5:
        assert p.why(n) == "above the high watermark %d (--high-watermark)" % hw


def test_high_watermark_absent_is_log_end_and_plan_says_so(tmp_path):
    part = Part(tmp_path)
    p = plan(part, "--retention-ms", 0, "--now", T0 + HOUR, "--roll-active")
    assert p.partition["highWatermark"] == part.leo
    src = p.partition["highWatermarkSource"]
    assert "log end offset" in src and "replication-offset-checkpoint" in src and "--high-watermark" in src
    assert p.fates == deleted_n(5, 5)
    res = dry_ok(retain("--dry-run", "--retention-ms", 0, "--now", T0 + HOUR, part.dir))
    assert res.lines[0] == ("%s: high watermark %d (%s), log end offset %d; offsets 0-11 (12 "
                            "records, 4 segments, %d bytes) would be deleted; new log start "
                            "offset would be 12" % (os.path.abspath(part.dir), part.leo, src,
                                                    part.leo, sum(part.sizes[:4])))


def test_high_watermark_clamped(tmp_path):
    part = Part(tmp_path, first_offset=100)
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 0, 10 ** 9)])
    p = plan(part, "--retention-ms", 0, "--now", T0 + HOUR, "--roll-active")
    assert p.partition["highWatermark"] == part.leo
    assert p.fates == deleted_n(5, 5)
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 0, 0)])
    p = plan(part, "--retention-ms", 0, "--now", T0 + HOUR, "--roll-active")
    assert p.partition["highWatermark"] == 100
    assert p.fates == deleted_n(0, 5)
    assert p.why(0) == "above the high watermark 100 (replication-offset-checkpoint)"


def test_log_dir_path_bounds_each_partition_by_its_own_entry(tmp_path):
    a = Part(tmp_path, partition=0)
    b = Part(tmp_path, partition=1)
    a.checkpoint("replication-offset-checkpoint", [(TOPIC, 0, 3), (TOPIC, 1, 9)])
    got = plans("--retention-ms", 0, "--now", T0 + HOUR, a.logdir)
    assert [g.partition["directory"] for g in got] == [os.path.abspath(a.dir), os.path.abspath(b.dir)]
    assert got[0].fates == deleted_n(1, 5) and got[1].fates == deleted_n(3, 5)
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 0, a.logdir))
    assert live_bases(a.dir) == a.bases[1:] and live_bases(b.dir) == b.bases[3:]


# -- timestamps --------------------------------------------------------------------------------------

def test_future_timestamps_hold_back_older_segments(tmp_path):
    now = T0 + 10 * HOUR
    layout = [[T0], [T0 + 1000, now + HOUR, T0 + 1001], [T0 + 2000], [T0 + 3000], [T0 + 4000]]
    part = Part(tmp_path, layout)
    p = plan(part, "--retention-ms", HOUR, "--now", now, "--roll-active")
    assert p.fates == deleted_n(1, 5)
    assert p.why(1).startswith("future timestamps (%d" % (now + HOUR)), p.why(1)
    assert "retention stops at the first kept segment" in p.why(2)
    assert "future" not in p.why(2)
    # a future timestamp in the first segment holds everything
    part2 = Part(tmp_path / "b", [[now + 1]] + layout[2:])
    p = plan(part2, "--retention-ms", HOUR, "--now", now, "--roll-active")
    assert p.fates == deleted_n(0, 4)
    assert "future timestamps" in p.why(0)
    # a timestamp equal to now is not in the future, only too recent
    part3 = Part(tmp_path / "c", [[T0], [now], [T0]])
    p = plan(part3, "--retention-ms", 0, "--now", now)
    assert p.fates == deleted_n(1, 3)
    assert "too recent" in p.why(1) and "future" not in p.why(1)


def largest_of(part, i, *args):
    p = plan(part, "--retention-ms", -1, "--now", T0 + HOUR, *args)
    s = p.segments[i]
    return s["largestTimestamp"], s["timestampSource"]


def test_largest_timestamp_from_time_index(tmp_path):
    part = Part(tmp_path)
    for i in range(5):
        assert largest_of(part, i) == (part.largest[i], "time index")
    # the time index's last entry is what counts, even when the batches say otherwise
    ti = os.path.join(part.dir, name(part.bases[1], "timeindex"))
    ig.write_file(ti, ig.encode_time_index([(part.largest[1] - 50, part.bases[1] + 1)], part.bases[1]))
    assert largest_of(part, 1) == (part.largest[1] - 50, "time index")
    r = 1000
    p = plan(part, "--retention-ms", r, "--now", part.largest[1] - 50 + r + 1)
    assert p.fates[:2] == ["deleted", "deleted"]


@pytest.mark.parametrize("variant", ["missing", "empty", "zeros", "out-of-order",
                                     "offset-below-base", "negative-timestamp"])
def test_unusable_time_index_falls_back_to_batches(tmp_path, variant):
    part = Part(tmp_path)
    b = part.bases[2]
    ti = os.path.join(part.dir, name(b, "timeindex"))
    if variant == "missing":
        os.unlink(ti)
    elif variant == "empty":
        ig.write_file(ti, b"")
    elif variant == "zeros":
        ig.write_file(ti, bytes(12 * 50))
    elif variant == "out-of-order":   # the sanity check: last timestamp below the first's
        ig.write_file(ti, ig.encode_time_index([(part.largest[2] + 5000, b + 1),
                                                (part.largest[2] - 5000, b + 2)], b))
    elif variant == "offset-below-base":
        ig.write_file(ti, ig.encode_time_index([(part.largest[2] + 5000, b - 1)], b))
    else:
        ig.write_file(ti, ig.encode_time_index([(-1, b + 1)], b))
    assert largest_of(part, 2) == (part.largest[2], "batches")
    # and the decision uses it, at the boundary
    r = 10_000
    assert plan(part, "--retention-ms", r, "--now", part.largest[2] + r).fates == deleted_n(2, 5)
    p = plan(part, "--retention-ms", r, "--now", part.largest[2] + r + 1)
    assert p.fates == deleted_n(3, 5)
    ok(retain("--retention-ms", r, "--now", part.largest[2] + r + 1, "--file-delete-delay-ms", 0,
              part.dir))
    assert live_bases(part.dir) == part.bases[3:]


def test_v1_segments_use_their_timestamps(tmp_path):
    part = Part(tmp_path, magic=1)
    assert largest_of(part, 0) == (part.largest[0], "time index")
    os.unlink(os.path.join(part.dir, name(part.bases[0], "timeindex")))
    assert largest_of(part, 0) == (part.largest[0], "batches")


def set_mtime_ms(path, ms):
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


@pytest.mark.parametrize("delta,n", [(-1, 1), (0, 1), (1, 2)])
@pytest.mark.parametrize("timeindex", ["empty", "missing"])
def test_v0_segments_fall_back_to_mtime(tmp_path, delta, n, timeindex):
    """v0 messages have no timestamps (-1) and an empty time index: the .log's mtime decides."""
    part = Part(tmp_path, magic=0)
    for i, b in enumerate(part.bases):
        assert part.original[name(b, "timeindex")] == b""
        if timeindex == "missing":
            os.unlink(os.path.join(part.dir, name(b, "timeindex")))
        set_mtime_ms(part.log(i), T0 + 1000 * i + 123)
    r = 60_000
    now = T0 + 1000 + 123 + r + delta
    p = plan(part, "--retention-ms", r, "--now", now)
    for i in range(5):
        assert p.segments[i]["largestTimestamp"] == T0 + 1000 * i + 123
        assert p.segments[i]["timestampSource"] == "file mtime"
    assert p.fates == deleted_n(n, 5)
    assert "file mtime" in p.why(n)


# -- rolling -----------------------------------------------------------------------------------------

def test_roll_active_when_everything_expired(tmp_path):
    part = Part(tmp_path, snapshots=True)
    now = T0 + HOUR
    p = plan(part, "--retention-ms", 1000, "--now", now, "--roll-active")
    assert p.fates == deleted_n(5, 5) and p.partition["rollFirst"] is True
    assert p.partition["logStartOffset"] == part.leo
    res = dry_ok(retain("--dry-run", "--retention-ms", 1000, "--now", now, "--roll-active", part.dir))
    assert "the active segment is rolled first" in res.lines[0]
    ok(retain("--retention-ms", 1000, "--now", now, "--roll-active", "--file-delete-delay-ms", 0,
              part.dir))
    left = files_in(part.dir)   # no hidden file left either (kafkalog's locks, intent)
    # the new, empty active segment at the log end offset stays; so does the snapshot at it
    assert left == {name(part.leo): b"", name(part.leo, "index"): b"",
                    name(part.leo, "timeindex"): b"", name(part.leo, "snapshot"):
                        part.original[name(part.leo, "snapshot")]}
    assert kafkalog("verify-index", part.dir).code == 0
    ac.assert_recover_keeps_everything(part.dir)
    # a second run: the empty active segment is never deleted
    (p,) = plans("--retention-ms", 0, "--now", now, "--roll-active", part.dir)
    assert p.fates == ["kept"] and p.why(0) == "active segment, empty"
    assert p.segments[0]["baseOffset"] == part.leo


def test_without_roll_active_the_active_segment_stays(tmp_path):
    part = Part(tmp_path)
    p = plan(part, "--retention-ms", 1000, "--now", T0 + HOUR)
    assert p.fates == deleted_n(4, 5) and p.partition["rollFirst"] is False
    assert p.why(4) == "active segment (--roll-active lets it go)"
    ok(retain("--retention-ms", 1000, "--now", T0 + HOUR, "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == [part.bases[4]]
    assert files_in(part.dir)[name(part.bases[4])] == part.original[name(part.bases[4])]
    check_consistent_after(part)


def test_roll_active_but_active_not_expired(tmp_path):
    part = Part(tmp_path)
    now = part.largest[4] + 1000
    p = plan(part, "--retention-ms", 1000, "--now", now, "--roll-active")
    assert p.fates == deleted_n(4, 5) and p.partition["rollFirst"] is False
    assert "too recent" in p.why(4)
    ok(retain("--retention-ms", 1000, "--now", now, "--roll-active", "--file-delete-delay-ms", 0,
              part.dir))
    assert live_bases(part.dir) == [part.bases[4]]


def test_roll_active_with_preallocated_active_indexes(tmp_path):
    """A broker leaves the active segment's indexes pre-allocated: the roll still works."""
    part = Part(tmp_path, preallocate_active=True)
    assert len(part.original[name(part.bases[4], "timeindex")]) == ig.TIME_INDEX_MAX_BYTES
    assert largest_of(part, 4) == (part.largest[4], "time index")
    ok(retain("--retention-ms", 1000, "--now", T0 + HOUR, "--roll-active",
              "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == [part.leo]
    ac.assert_recover_keeps_everything(part.dir)


def test_empty_active_segment_is_never_deleted(tmp_path):
    part = Part(tmp_path, DEFAULT_LAYOUT[:3] + [[]])
    assert part.original[name(part.bases[3])] == b""
    p = plan(part, "--retention-ms", 0, "--now", T0 + HOUR, "--roll-active")
    assert p.fates == deleted_n(3, 4) and p.partition["rollFirst"] is False
    assert p.why(3) == "active segment, empty"
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--roll-active", "--file-delete-delay-ms", 0,
              part.dir))
    assert sorted(n for n in files_in(part.dir) if not n.startswith(".")) == [
        name(part.bases[3], k) for k in ("index", "log", "timeindex")]
    ac.assert_recover_keeps_everything(part.dir)


def test_empty_partition_nothing_to_do(tmp_path):
    part = Part(tmp_path, [[]])
    before = tree(part.logdir)
    for args in (["--retention-ms", 0, "--now", T0], ["--retention-bytes", 0, "--roll-active"],
                 ["--log-start-offset", 100, "--roll-active"]):
        p = plan(part, *args)
        assert p.fates == ["kept"]
        assert p.partition["logEndOffset"] == 0 and p.partition["highWatermark"] == 0
        ok(retain(*args, part.dir))
    assert tree(part.logdir, keep_lock=False) == before


# == 2. what deleting does ============================================================================

def txn_partition(tmp_path):
    """A partition whose second segment holds an aborted transaction (so it has a .txnindex),
    with snapshots at every segment base, at the log end offset and at an offset inside the
    second segment (a restart's snapshot)."""
    segs, leo = ig.timed_segments(DEFAULT_LAYOUT[:1])
    w = kg.SegmentWriter(leo, partition_leader_epoch=1)
    w.add_v2([kg.Rec(b"a", b"x" * 40, T0 + 1500)])
    w.add_v2([kg.Rec(b"t", b"y" * 40, T0 + 1600)], producer_id=77, producer_epoch=0,
             base_sequence=0, transactional=True)
    w.add_control(kg.ABORT, 77, 0, 1, timestamp=T0 + 1700)
    segs.append((leo, w.data()))
    more, leo2 = ig.timed_segments([[T0 + 5000], [T0 + 6000, T0 + 6001]], first_offset=w.next_offset)
    segs += more
    d = str(tmp_path / "logs" / ("%s-0" % TOPIC))
    written = ig.write_partition(d, segs)
    assert "txnindex" in written[1].paths
    bases = [b for b, _ in segs]
    snaps = ig.write_snapshots(d, bases + [bases[1] + 1, leo2])
    return d, bases, leo2, snaps


def test_deleted_segments_renamed_together_and_kept_with_the_default_delay(tmp_path):
    d, bases, leo, snaps = txn_partition(tmp_path)
    before = files_in(d)
    r = 1000
    now = T0 + 1700 + r + 1   # segments 0 and 1 expired; 2 (T0 + 5000) not
    ok(retain("--retention-ms", r, "--now", now, d))
    after = files_in(d)
    gone = [n for n in before if int(n[:20]) < bases[2]]
    # every file of the two segments, with the snapshots at their base offsets, renamed
    # verbatim; the snapshot inside the second segment is no segment's: the broker leaves it
    # (UnifiedLog.deleteProducerSnapshots) for its next load to remove
    gone.remove(name(bases[1] + 1, "snapshot"))
    assert set(gone) == {name(bases[0], k) for k in ("log", "index", "timeindex", "snapshot")} | {
        name(bases[1], k) for k in ("log", "index", "timeindex", "txnindex", "snapshot")}
    for n in gone:
        assert n not in after, n
        assert after[n + DELETED] == before[n], n
    for n in before:
        if n not in gone:
            assert after[n] == before[n], n
    assert set(after) == {n for n in before if n not in gone} | {n + DELETED for n in gone}
    # a rerun with the default delay keeps them
    ok(retain("--retention-ms", r, "--now", now, d))
    assert files_in(d) == after
    # once the delay has passed (1 ms, measured from the rename), a later run removes them
    time.sleep(0.02)
    ok(retain("--file-delete-delay-ms", 1, d))
    assert files_in(d) == {n: v for n, v in before.items() if n not in gone}


def test_delete_delay_zero_removes_at_once(tmp_path):
    d, bases, leo, snaps = txn_partition(tmp_path)
    before = files_in(d)
    ok(retain("--retention-ms", 1000, "--now", T0 + 2701, "--file-delete-delay-ms", 0, d))
    # the snapshot inside the second segment is no deleted segment's: it stays
    assert files_in(d) == {n: v for n, v in before.items()
                           if int(n[:20]) >= bases[2] or n == name(bases[1] + 1, "snapshot")}
    check_contiguous(d, leo)
    assert kafkalog("verify-index", d).code == 0
    assert_recover_keeps_everything(d)


def test_delete_delay_not_yet_passed(tmp_path):
    part = Part(tmp_path)
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 3_600_000, part.dir))
    deleted = sorted(n for n in os.listdir(part.dir) if n.endswith(DELETED))
    assert len(deleted) == 4 * 3
    time.sleep(0.02)
    ok(retain("--file-delete-delay-ms", 3_600_000, part.dir))
    assert sorted(n for n in os.listdir(part.dir) if n.endswith(DELETED)) == deleted
    dry_ok(retain("--file-delete-delay-ms", 0, "--dry-run", part.dir))   # a dry run removes nothing
    assert sorted(n for n in os.listdir(part.dir) if n.endswith(DELETED)) == deleted
    ok(retain("--file-delete-delay-ms", 0, part.dir))
    assert not [n for n in os.listdir(part.dir) if n.endswith(DELETED)]
    check_consistent_after(part)


def test_snapshots_of_deleted_segments(tmp_path):
    """UnifiedLog.deleteProducerSnapshots: the snapshots named by a deleted segment's base offset
    go with it (renamed .deleted); others, even below the new log start, stay."""
    part = Part(tmp_path)
    # snapshots at bases, inside segments, at the log end offset
    offsets = sorted(set(part.bases + [1, 4, 7, part.leo]))
    ig.write_snapshots(part.dir, offsets)
    ok(retain("--log-start-offset", 7, "--file-delete-delay-ms", 60_000, part.dir))
    # segments 0 and 1 go (next bases 3, 6 ≤ 7); the new log start is 6
    assert part.bases[:3] == [0, 3, 6]
    snaps = sorted(n for n in os.listdir(part.dir) if ".snapshot" in n)
    assert snaps == sorted([name(o, "snapshot") + DELETED for o in offsets if o in (0, 3)]
                           + [name(o, "snapshot") for o in offsets if o not in (0, 3)])


def read_checkpoint(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0] == "0" and lines[-1] == "", lines
    n = int(lines[1])
    entries = [tuple(line.split(" ")) for line in lines[2:-1]]
    assert len(entries) == n and all(len(e) == 3 for e in entries), lines
    return {(t, int(p)): int(o) for t, p, o in entries}


def test_log_start_checkpoint_rewritten(tmp_path):
    part = Part(tmp_path)
    cp = os.path.join(part.logdir, "log-start-offset-checkpoint")
    part.checkpoint("log-start-offset-checkpoint", [(TOPIC, 3, 17), ("other", 0, 5), (TOPIC, 0, 1)])
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 0, part.dir))
    got = read_checkpoint(cp)
    assert got.pop((TOPIC, 3)) == 17 and got.pop(("other", 0)) == 5
    # the log start offset this partition is loaded with: max(entry, first segment's base)
    assert max(got.get((TOPIC, 0), -1), part.bases[4]) == part.bases[4]
    assert not [n for n in os.listdir(part.logdir) if "tmp" in n]


def test_log_start_checkpoint_entry_omitted_when_equal_to_first_base(tmp_path):
    """The entry is left out when the log start is the first remaining segment's base
    (LogManager.checkpointLogStartOffsetsInDir writes only a log start above it)."""
    part = Part(tmp_path)
    part.checkpoint("log-start-offset-checkpoint", [("other", 0, 5)])
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 0, part.dir))
    assert read_checkpoint(os.path.join(part.logdir, "log-start-offset-checkpoint")) == {
        ("other", 0): 5}


def test_log_start_checkpoint_never_moves_backwards(tmp_path):
    """An entry above the new first base (a DeleteRecords' log start) stays: the log start offset
    only grows (UnifiedLog.maybeIncrementLogStartOffset)."""
    part = Part(tmp_path)
    # log start 7, inside segment 2 (bases 0, 3, 6, 9, 12)
    part.checkpoint("log-start-offset-checkpoint", [(TOPIC, 0, 7)])
    ok(retain("--log-start-offset", 6, "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == part.bases[2:]
    got = read_checkpoint(os.path.join(part.logdir, "log-start-offset-checkpoint"))
    assert got.get((TOPIC, 0), part.bases[2]) >= 7, got


def test_log_start_offset_recorded_as_delete_records_records_it(tmp_path):
    """--log-start-offset is the log start a DeleteRecords sets: above the first kept segment's
    base it is the checkpoint's entry (the broker's, tests/kafka_oracle/test_kafka_retain.py), not that
    base."""
    part = Part(tmp_path)
    part.checkpoint("log-start-offset-checkpoint", [("other", 0, 5)])
    # bases 0, 3, 6, 9, 12: 7 is inside segment 2
    ok(retain("--log-start-offset", 7, "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == part.bases[2:]
    assert read_checkpoint(os.path.join(part.logdir, "log-start-offset-checkpoint")) == {
        ("other", 0): 5, (TOPIC, 0): 7}


def test_log_start_offset_inside_the_first_segment_moves_the_log_start(tmp_path):
    """Nothing is deleted, but the log start moves (the broker's DeleteRecords inside the first
    segment: the checkpoint entry, the leader epochs truncated there)."""
    part = Part(tmp_path)
    part.checkpoint("log-start-offset-checkpoint", [])
    ok(retain("--log-start-offset", 2, "--file-delete-delay-ms", 0, part.dir))
    assert live_bases(part.dir) == part.bases
    assert read_checkpoint(os.path.join(part.logdir, "log-start-offset-checkpoint")) == {
        (TOPIC, 0): 2}
    epochs = os.path.join(part.dir, "leader-epoch-checkpoint")
    if os.path.exists(epochs):
        lines = open(epochs).read().splitlines()
        assert all(int(line.split()[1]) >= 2 for line in lines[2:]), lines


def test_log_start_checkpoint_absent_or_nothing_deleted(tmp_path):
    part = Part(tmp_path)
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 0, part.dir))
    # no checkpoint created; the .lock retain made stays, as a broker leaves it
    assert sorted(os.listdir(part.logdir)) == [".lock", "%s-0" % TOPIC]
    part2 = Part(tmp_path / "b")
    part2.checkpoint("log-start-offset-checkpoint", [(TOPIC, 0, 1)])
    before = tree(part2.logdir)
    ok(retain("--retention-ms", 0, "--now", T0, part2.dir))
    assert tree(part2.logdir, keep_lock=False) == before


def test_remaining_offsets_have_no_gap_and_tools_agree(tmp_path):
    layout = [[T0 + 100 * i + j for j in range(1 + i % 3)] for i in range(12)]
    part = Part(tmp_path, layout, snapshots=True)
    ig.write_file(os.path.join(part.dir, "partition.metadata"), ig.partition_metadata(ig.topic_id(2)))
    part.original = files_in(part.dir)
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 0, part.leo)])
    part.checkpoint("log-start-offset-checkpoint", [])
    ok(retain("--retention-ms", 500, "--now", T0 + 1000, "--file-delete-delay-ms", 0, part.dir))
    bases = check_contiguous(part.dir, part.leo)
    assert bases == [b for b, ts in zip(part.bases, layout) if max(ts) >= T0 + 500]
    for n, data in files_in(part.dir).items():
        if not n.startswith("."):
            assert data == part.original[n], n
    check_consistent_after(part)


# == 3. dry run, output, lock, errors =================================================================

def test_dry_run_changes_nothing_and_explains_every_fate(tmp_path):
    part = Part(tmp_path, snapshots=True)
    part.checkpoint("log-start-offset-checkpoint", [(TOPIC, 0, 1)])
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 0, 12)])
    # a leftover .deleted file and an expired-timestamp layout
    ig.write_file(os.path.join(part.logdir, "%s-0" % TOPIC, name(900, "log") + DELETED), b"old")
    before = tree(part.logdir)
    args = ["--retention-ms", 1000, "--now", part.largest[3] + 1000, "--roll-active",
            "--file-delete-delay-ms", 0, part.dir]
    res = dry_ok(retain("--dry-run", *args))
    assert tree(part.logdir) == before   # no .lock created either
    d = os.path.abspath(part.dir)
    assert res.lines[0].startswith("%s: high watermark 12 (replication-offset-checkpoint)" % d)
    expect = [seg_line(part, i, "would be deleted (retention ms 1000)") for i in range(3)]
    assert res.lines[1:4] == expect
    assert res.lines[4].startswith("%s: kept (newest timestamp %d (from the time index) too recent"
                                   % (os.path.join(d, name(part.bases[3])), part.largest[3]))
    # the time pass stopped before the last segment: it is kept as the active segment
    assert res.lines[5] == seg_line(part, 4, "kept (active segment)")
    assert res.lines[6].startswith("1 partition: 3 segments (9 records, ")   # the summary
    assert len(res.lines) == 7
    # everything expired: the high watermark holds the last segment (the text says which)
    res = dry_ok(retain("--dry-run", "--retention-ms", 1000, "--now", T0 + HOUR, "--roll-active", part.dir))
    assert res.lines[1:-1] == [seg_line(part, i, "would be deleted (retention ms 1000)")
                               for i in range(4)] + [
        seg_line(part, 4, "kept (above the high watermark 12 (replication-offset-checkpoint))")]
    assert tree(part.logdir) == before
    # the real run does what the plan said
    res = ok(retain(*args))
    assert res.lines[1:4] == [line.replace("would be deleted", "deleted") for line in expect]
    assert live_bases(part.dir) == part.bases[3:]


def test_dry_run_why_for_segments_after_the_first_kept(tmp_path):
    part = Part(tmp_path)
    p = plan(part, "--retention-ms", 1000, "--now", part.largest[1] + 1000)
    assert p.fates == deleted_n(1, 5)
    assert "too recent" in p.why(1)
    for i in (2, 3):
        assert p.why(i) == "an older segment is kept, and retention stops at the first kept segment"
    assert p.why(4).startswith("active segment")


def test_json_output(tmp_path):
    part = Part(tmp_path)
    now = part.largest[2] + 1001
    for dry in (True, False):
        args = ["--format", "json", "--retention-ms", 1000, "--now", now, "--file-delete-delay-ms", 0]
        res = (dry_ok if dry else ok)(retain(*(["--dry-run"] if dry else []), *args, part.dir))
        objs = [json.loads(line) for line in res.lines]
        assert "log end offset" in objs[0].pop("highWatermarkSource")
        gone = sum(part.sizes[:3])
        assert objs[0] == {"type": "partition", "topic": TOPIC, "partition": 0,
                           "directory": os.path.abspath(part.dir),
                           "highWatermark": part.leo, "logEndOffset": part.leo,
                           "previousLogStartOffset": 0, "logStartOffset": part.bases[3],
                           "segmentsDeleted": 3, "recordsRemoved": part.bases[3],
                           "bytesRemoved": gone, "firstOffsetRemoved": 0,
                           "lastOffsetRemoved": part.bases[3] - 1, "rollFirst": False,
                           "deletedFilesRemoved": 0, "dryRun": dry}
        assert len(objs) == 7
        for i, (s, b) in enumerate(zip(objs[1:6], part.bases)):
            assert s["type"] == "segment" and (s["topic"], s["partition"]) == (TOPIC, 0)
            assert s["file"] == os.path.join(os.path.abspath(part.dir), name(b))
            assert s["baseOffset"] == b and s["nextOffset"] == part.upper(i)
            assert (s["firstOffset"], s["lastOffset"]) == (b, part.upper(i) - 1)
            assert s["records"] == part.upper(i) - b   # one-record batches
            assert s["sizeBytes"] == part.sizes[i]
            assert s["firstTimestamp"] == part.layout[i][0]
            assert s["largestTimestamp"] == part.largest[i]
            assert s["timestampSource"] == "time index"
            assert s["fate"] == ("deleted" if i < 3 else "kept")
            assert isinstance(s["why"], str) and s["why"] and s["dryRun"] is dry
        assert objs[6] == {"type": "summary", "command": "retain", "partitions": 1,
                           "segmentsDeleted": 3, "recordsRemoved": part.bases[3],
                           "bytesRemoved": gone, "deletedFilesRemoved": 0,
                           "logStartOffsets": [{"topic": TOPIC, "partition": 0,
                                                "logStartOffset": part.bases[3]}],
                           "dryRun": dry}
    assert live_bases(part.dir) == part.bases[3:]


class LockHolder:
    """A separate live process holding ``<log dir>/.lock`` with a POSIX lock (fcntl.lockf), as
    the JVM's FileChannel.tryLock does on Linux."""

    SCRIPT = ("import fcntl, os, sys\n"
              "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
              "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
              "print('locked', flush=True)\n"
              "sys.stdin.read()\n")

    def __init__(self, log_dir):
        self.path = os.path.join(log_dir, ".lock")

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, "-c", self.SCRIPT, self.path],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.p.stdout.readline() == b"locked\n"
        return self

    def __exit__(self, *exc):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def test_refuses_while_a_live_process_holds_the_lock(tmp_path):
    part = Part(tmp_path)
    args = ["--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 0, part.dir]
    with LockHolder(part.logdir) as holder:
        before = tree(part.logdir)
        res = retain(*args)
        assert res.code == 2, res
        assert ".lock" in res.err and str(holder.p.pid) in res.err, res
        assert tree(part.logdir) == before
        # a dry run only reads: it goes on, with a one-line warning naming the holder
        res = retain("--dry-run", *args)
        assert res.code == 1 and "would be deleted" in res.out, res
        assert len(res.err_lines) == 1 and "warning" in res.err, res
        assert ".lock" in res.err and str(holder.p.pid) in res.err, res
        assert tree(part.logdir) == before
    # the holder is gone; its .lock file stays (as after a broker crash) and means nothing
    assert os.path.exists(os.path.join(part.logdir, ".lock"))
    ok(retain(*args))
    assert live_bases(part.dir) == part.bases[4:]


@pytest.mark.parametrize("what", ["missing", "no-partitions"])
def test_bad_paths_exit_2(tmp_path, what):
    p = tmp_path / "logs"
    if what == "no-partitions":
        (p / "stuff").mkdir(parents=True)
    res = retain("--retention-ms", 0, str(p))
    assert res.code == 2, res
    assert res.err.strip()


def test_malformed_replication_checkpoint_exit_2(tmp_path):
    part = Part(tmp_path)
    ig.write_file(os.path.join(part.logdir, "replication-offset-checkpoint"),
                  ig.MALFORMED_OFFSET_CHECKPOINTS["count-too-high"])
    before = tree(part.logdir)
    res = retain("--retention-ms", 0, "--now", T0 + HOUR, part.dir)
    assert res.code == 2, res
    assert "replication-offset-checkpoint" in res.err
    assert tree(part.logdir, keep_lock=False) == before


# == randomised: the plan equals the contract's, and a real run does what the plan says ==============

def test_random_policies_against_the_contract(tmp_path):
    """Seeded random layouts (an empty active segment sometimes) and policies: the dry-run plan
    equals ``expected_fates``; the last plan of each layout is then carried out."""
    rng = random.Random(20241122)
    checked = 0
    for layout_no in range(6):
        nseg = rng.randint(1, 7)
        layout = []
        for i in range(nseg):
            k = rng.choice([0, 1, 1, 2, 3]) if i == nseg - 1 else rng.randint(1, 3)
            layout.append([T0 + 1000 * i + rng.choice([-3000, 0, 10, 500, 5000]) for _ in range(k)])
        part = Part(tmp_path / ("p%d" % layout_no), layout)
        nexts = [part.upper(i) for i in range(nseg)]
        total = sum(part.sizes)
        for _ in range(25):
            kw = {"roll_active": rng.random() < 0.5}
            args = ["--roll-active"] if kw["roll_active"] else []
            if rng.random() < 0.5:
                kw["log_start"] = rng.randint(0, part.leo + 1)
                args += ["--log-start-offset", kw["log_start"]]
            if rng.random() < 0.5:
                kw["retention_bytes"] = rng.choice([
                    -1, 0, total, rng.randint(0, total + 10),
                    total - sum(part.sizes[:rng.randint(0, nseg)]) + rng.choice([-1, 0, 1])])
                args += ["--retention-bytes", kw["retention_bytes"]]
            if rng.random() < 0.6:
                kw["retention_ms"] = rng.choice([-1, 0, 1000, 2500])
                kw["now"] = T0 + rng.randint(0, 12000)
                args += ["--retention-ms", kw["retention_ms"], "--now", kw["now"]]
            if not any(k in kw for k in ("log_start", "retention_bytes", "retention_ms")):
                kw["retention_bytes"] = -1  # no limit: a policy must be named
                args += ["--retention-bytes", -1]
            hw = part.leo
            if rng.random() < 0.4:
                hw = rng.randint(0, part.leo + 2)
                args += ["--high-watermark", hw]
            hw = min(max(hw, part.bases[0]), part.leo)
            want = expected_fates(part.sizes, part.bases, nexts, part.largest, hw, **kw)
            p = plan(part, *args)
            assert p.fates == want, (layout, args)
            assert p.partition["highWatermark"] == hw
            checked += 1
        # the last plan, for real
        ok(retain(*args, "--file-delete-delay-ms", 0, part.dir))
        kept = [b for b, f in zip(part.bases, want) if f == "kept"]
        assert live_bases(part.dir) == (kept or [part.leo])   # all gone: rolled first
        check_contiguous(part.dir, part.leo)
    assert checked == 150


# == situations that once went wrong ======================================================================

def test_live_segment_beside_old_deleted_files_is_kept(tmp_path):
    """A live segment with .deleted files of the same base beside it (the cleaner's replaceSegments
    leaves X.log.deleted next to the cleaned X.log for file.delete.delay.ms; a truncation followed
    by new appends does too) is not a half-deleted segment: it stays, and so do those files until
    their delay has passed."""
    part = Part(tmp_path)
    b = part.bases[1]
    old = {}
    for k in ("log", "index", "timeindex"):   # the replaced (pre-cleaning) segment's files
        old[name(b, k) + DELETED] = part.original[name(b, k)][:-3] if k == "log" else b""
        ig.write_file(os.path.join(part.dir, name(b, k) + DELETED), old[name(b, k) + DELETED])
    ok(retain("--retention-ms", 3_600_000, "--now", T0, part.dir))
    assert files_in(part.dir) == dict(part.original, **old)
    # and with a policy that deletes the segment before it, only that one goes
    ok(retain("--log-start-offset", b, "--file-delete-delay-ms", 0, part.dir))
    assert files_in(part.dir) == {n: v for n, v in part.original.items() if not n.startswith(name(0)[:20])}
    check_consistent_after(part)


def test_roll_active_on_a_damaged_active_segment(tmp_path):
    """--roll-active cannot roll a damaged active segment: exit 2, one message, nothing changed."""
    part = Part(tmp_path)
    with open(part.log(4), "ab") as f:
        f.write(b"garbage-tail-garbage")
    before = tree(part.logdir)
    res = retain("--retention-ms", 0, "--now", T0 + HOUR, "--roll-active", "--file-delete-delay-ms",
                 0, part.dir)
    assert res.code == 2, res
    assert len(res.err_lines) == 1 and part.log(4) in res.err, res
    assert tree(part.logdir, keep_lock=False) == before


def test_roll_failure_is_not_reported_as_deletions(tmp_path):
    part = Part(tmp_path)
    with open(part.log(4), "ab") as f:
        f.write(b"garbage-tail-garbage")
    res = retain("--retention-ms", 0, "--now", T0 + HOUR, "--roll-active", "--file-delete-delay-ms",
                 0, part.dir)
    assert res.code == 2
    assert not [line for line in res.lines if ": deleted (" in line], res.out


def test_active_segment_with_a_stale_time_index(tmp_path):
    """The active segment's time index lacks its final entry (a live or crashed broker leaves it so,
    and `kafkalog append` closes without it): its newest timestamp comes from the batches, as the
    broker's in-memory maximum would, so --roll-active does not delete records newer than
    retention-ms."""
    now = T0 + 10 * HOUR
    # the active segment: many batches (an index entry every 4096 bytes), the newest record at now
    layout = [[T0], [T0 + 1000 + i for i in range(58)] + [now]]
    segs, leo = ig.timed_segments(layout, value_size=200)
    d = str(tmp_path / "logs" / ("%s-0" % TOPIC))
    ig.write_partition(d, segs)
    base, data = segs[1]
    live = ig.build_indexes(data, final_time_entry=False)   # what a live broker has on disk
    assert live.time_entries and live.time_entries[-1][0] < now
    ig.write_file(os.path.join(d, name(base, "timeindex")),
                  ig.preallocated_time_index(ig.encode_time_index(live.time_entries, base)))
    (p,) = plans("--retention-ms", HOUR, "--now", now, "--roll-active", d)
    assert (p.segments[1]["largestTimestamp"], p.segments[1]["timestampSource"]) == (now, "batches")
    assert p.fates == ["deleted", "kept"]
    ok(retain("--retention-ms", HOUR, "--now", now, "--roll-active", "--file-delete-delay-ms", 0, d))
    assert live_bases(d) == [base]
    # once the newest record is old enough, it goes (rolled first)
    ok(retain("--retention-ms", HOUR, "--now", now + HOUR + 1, "--roll-active",
              "--file-delete-delay-ms", 0, d))
    assert live_bases(d) == [leo]


def test_library_retain_partition(tmp_path):
    """retain_partition, the one call the command makes per partition: a dry run plans and
    changes nothing; a real run deletes what the plan says (renamed to .deleted, then removed
    with no delay) and leaves a contiguous log from the new log start. Segment i's newest
    record is at T0 + 1000 i + 200: at T0 + 5000 with 2500 ms, segments 0-2 are too old and 3
    is not, so retention stops there."""
    from kafkalog_cli.log.retain import Policy, retain_partition
    part = Part(tmp_path)
    policy = Policy(retention_ms=2500, now=T0 + 5000)
    before = tree(part.dir)
    planned = retain_partition(part.dir, policy, dry_run=True)
    assert tree(part.dir) == before
    assert [s.base_offset for s in planned.segments] == part.bases
    assert [s.fate for s in planned.segments] == deleted_n(3, 5)
    assert planned.new_log_start == part.bases[3] and planned.log_end == part.leo
    done = retain_partition(part.dir, policy, delete_delay_ms=0)
    assert [s.fate for s in done.segments] == deleted_n(3, 5)
    assert live_bases(part.dir) == part.bases[3:]
    assert not [n for n in os.listdir(part.dir) if n.endswith(DELETED)]
    check_contiguous(part.dir, part.leo)


# -- leader epochs and producer snapshots of deleted segments --------------------------------------------

def test_leader_epochs_truncated_from_the_new_log_start(tmp_path):
    """LeaderEpochFileCache.truncateFromStart at the new log start offset: entries starting at
    or below it go, the newest of them moved up to it (UnifiedLog.maybeIncrementLogStartOffset)."""
    part = Part(tmp_path)
    assert part.bases[:4] == [0, 3, 6, 9]
    path = os.path.join(part.dir, "leader-epoch-checkpoint")
    ig.write_file(path, ig.leader_epoch_checkpoint([(0, 0), (2, 4), (3, 5), (7, 8)]))
    # segments 0 and 1 go; the log start offset (a DeleteRecords') is 7
    ok(retain("--log-start-offset", 7, part.dir))
    with open(path, encoding="utf-8") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(3, 7), (7, 8)])
    # a start exactly at an entry's offset keeps it; nothing else changes
    ok(retain("--log-start-offset", 9, part.dir))   # segment 2 goes: the log starts at 9
    with open(path, encoding="utf-8") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(7, 9)])
    # a dry run changes nothing
    dry_ok(retain("--log-start-offset", 100, "--dry-run", part.dir))
    with open(path, encoding="utf-8") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(7, 9)])


def test_leader_epochs_after_roll_active_and_log_start_checkpoint(tmp_path):
    """Every segment expired: the active one is rolled first (the roll's producer snapshot at
    the log end offset) and the epochs start at the log end offset; a log-start-offset-checkpoint
    entry above the first kept base is the log start the cache is truncated at."""
    part = Part(tmp_path)
    path = os.path.join(part.dir, "leader-epoch-checkpoint")
    ig.write_file(path, ig.leader_epoch_checkpoint([(0, 0), (1, 2)]))
    ok(retain("--retention-ms", 1000, "--now", T0 + HOUR, "--roll-active",
              "--file-delete-delay-ms", 0, part.dir))
    with open(path, encoding="utf-8") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(1, part.leo)])
    with open(os.path.join(part.dir, name(part.leo, "snapshot")), "rb") as f:
        assert f.read() == ig.encode_snapshot([])
    other = Part(tmp_path, logdir="logs2")
    other.checkpoint("log-start-offset-checkpoint", [(TOPIC, 0, 4)])
    path = os.path.join(other.dir, "leader-epoch-checkpoint")
    ig.write_file(path, ig.leader_epoch_checkpoint([(0, 0), (1, 2), (2, 5)]))
    ok(retain("--log-start-offset", 4, other.dir))   # segment 0 goes; the checkpoint says 4
    with open(path, encoding="utf-8") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(1, 4), (2, 5)])


def test_producer_state_unreadable_at_roll_is_one_line(tmp_path):
    """Rolling the active segment away needs the producer state (its snapshot): a control batch
    of a producer that is no end transaction marker (a type 5 key) makes the broker's loading
    fail; retain says so in one line (exit 2), no traceback, and deletes nothing."""
    d = str(tmp_path / "logs" / ("%s-0" % TOPIC))
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k", b"v", T0)])
    w.add_control(5, 77, 0, 1, timestamp=T0 + 1)
    ig.write_partition(d, [(0, w.data())])
    before = files_in(d)
    res = retain("--retention-ms", 1000, "--now", T0 + HOUR, "--roll-active", d)
    assert res.code == 2, res
    assert len(res.err.strip().splitlines()) == 1, res.err
    assert "end transaction marker" in res.err, res.err
    assert {n: v for n, v in files_in(d).items() if n in before} == before


# -- the recovery point raised to the new log start offset ------------------------------------------------

RECOVERY_POINTS = "recovery-point-offset-checkpoint"


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def checkpoint_bytes(entries):
    return ig.offset_checkpoint(entries).encode()


def test_recovery_point_below_the_new_log_start_is_raised(tmp_path):
    """UnifiedLog.updateLogStartOffset (from maybeIncrementLogStartOffset, when retention's
    deleteSegments moves the log start up): a recovery point below the new log start offset is
    raised to it. The file keeps its format and every other line, in its order."""
    part = Part(tmp_path)
    assert part.bases == [0, 3, 6, 9, 12]
    entries = [("other", 1, 4), (TOPIC, 0, 2), (TOPIC, 1, 0)]
    part.checkpoint(RECOVERY_POINTS, entries)
    cp = os.path.join(part.logdir, RECOVERY_POINTS)
    res = ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 0,
                    part.dir))
    assert live_bases(part.dir) == [12]
    assert read_bytes(cp) == checkpoint_bytes([("other", 1, 4), (TOPIC, 0, 12), (TOPIC, 1, 0)])
    assert res.lines[-2] == "%s: %s-0: recovery point raised to the log start offset 12 (was 2)" % (
        os.path.join(os.path.abspath(part.logdir), RECOVERY_POINTS), TOPIC)
    assert not [n for n in os.listdir(part.logdir) if "tmp" in n]
    check_consistent_after(part)


def test_recovery_point_raised_to_the_log_start_the_epochs_are_truncated_at(tmp_path):
    """A log start offset inside a segment (--log-start-offset, a DeleteRecords'; or the
    log-start-offset-checkpoint's entry when higher) is the one the broker raises the recovery
    point to, as it truncates the leader epochs there (one offset, logStartOffset, for both)."""
    part = Part(tmp_path)
    part.checkpoint(RECOVERY_POINTS, [(TOPIC, 0, 1)])
    epochs = os.path.join(part.dir, "leader-epoch-checkpoint")
    ig.write_file(epochs, ig.leader_epoch_checkpoint([(0, 0), (2, 4), (3, 5)]))
    ok(retain("--log-start-offset", 7, part.dir))   # segments 0 and 1 go
    assert live_bases(part.dir) == part.bases[2:]
    assert read_checkpoint(os.path.join(part.logdir, RECOVERY_POINTS)) == {(TOPIC, 0): 7}
    assert read_bytes(epochs) == ig.leader_epoch_checkpoint([(3, 7)]).encode()
    # the log-start-offset-checkpoint says 10, above the first kept base 9
    other = Part(tmp_path, logdir="logs2")
    other.checkpoint(RECOVERY_POINTS, [(TOPIC, 0, 1)])
    other.checkpoint("log-start-offset-checkpoint", [(TOPIC, 0, 10)])
    ok(retain("--log-start-offset", 9, other.dir))
    assert live_bases(other.dir) == other.bases[3:]
    assert read_checkpoint(os.path.join(other.logdir, RECOVERY_POINTS)) == {(TOPIC, 0): 10}


def test_recovery_point_at_or_above_the_new_log_start_is_untouched(tmp_path):
    """Only a recovery point below the log start moves; in the same run, a partition whose
    recovery point is at or above it keeps its line, and the file's other lines stay."""
    parts = [Part(tmp_path, partition=n) for n in range(3)]
    entries = [(TOPIC, 0, 14), (TOPIC, 1, 12), (TOPIC, 2, 3), ("other", 0, 1)]
    parts[0].checkpoint(RECOVERY_POINTS, entries)
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, "--file-delete-delay-ms", 0,
              parts[0].logdir))
    for p in parts:
        assert live_bases(p.dir) == [12]
    assert read_bytes(os.path.join(parts[0].logdir, RECOVERY_POINTS)) == checkpoint_bytes(
        [(TOPIC, 0, 14), (TOPIC, 1, 12), (TOPIC, 2, 12), ("other", 0, 1)])
    # nothing deleted: nothing raised, the file not even rewritten
    part = Part(tmp_path, logdir="logs2")
    part.checkpoint(RECOVERY_POINTS, [(TOPIC, 0, 0)])
    part.checkpoint("log-start-offset-checkpoint", [(TOPIC, 0, 2)])
    before = tree(part.logdir)
    ok(retain("--retention-ms", 0, "--now", T0, part.dir))
    assert tree(part.logdir, keep_lock=False) == before


def test_recovery_point_missing_line_or_file_stays_missing(tmp_path):
    """A missing entry is read as 0 by LogManager.loadLog, and LogLoader then recovers from the
    first segment, as it would from an entry at the log start: nothing is added, no file
    created. The replication-offset-checkpoint (the high watermark) is never written: retention
    stops below it."""
    part = Part(tmp_path)
    part.checkpoint(RECOVERY_POINTS, [("other", 0, 1)])
    part.checkpoint("replication-offset-checkpoint", [(TOPIC, 0, part.leo), ("other", 0, 0)])
    before = {n: read_bytes(os.path.join(part.logdir, n))
              for n in (RECOVERY_POINTS, "replication-offset-checkpoint")}
    res = ok(retain("--retention-ms", 0, "--now", T0 + HOUR, part.dir))
    assert live_bases(part.dir) == [12]
    assert {n: read_bytes(os.path.join(part.logdir, n)) for n in before} == before
    assert "recovery point" not in res.out
    bare = Part(tmp_path, logdir="logs2")
    ok(retain("--retention-ms", 0, "--now", T0 + HOUR, bare.dir))
    assert not os.path.exists(os.path.join(bare.logdir, RECOVERY_POINTS))


def test_recovery_point_dry_run_reports_and_changes_nothing(tmp_path):
    part = Part(tmp_path)
    part.checkpoint(RECOVERY_POINTS, [("other", 3, 3), (TOPIC, 0, 4)])
    before = tree(part.logdir)
    cp = os.path.join(os.path.abspath(part.logdir), RECOVERY_POINTS)
    args = ["--retention-ms", 1000, "--now", part.largest[2] + 1001, part.dir]
    res = dry_ok(retain("--dry-run", *args))
    assert tree(part.logdir) == before
    assert res.lines[-2] == ("%s: %s-0: recovery point would be raised to the log start offset 9 "
                             "(was 4)" % (cp, TOPIC))
    res = dry_ok(retain("--dry-run", "--format", "json", *args))
    assert tree(part.logdir) == before
    assert json.loads(res.lines[-2]) == {"type": "recoveryPoint", "topic": TOPIC, "partition": 0,
                                         "file": cp, "old": 4, "new": 9, "dryRun": True}
    res = ok(retain("--format", "json", *args))
    assert json.loads(res.lines[-2]) == {"type": "recoveryPoint", "topic": TOPIC, "partition": 0,
                                         "file": cp, "old": 4, "new": 9, "dryRun": False}
    assert read_checkpoint(cp) == {("other", 3): 3, (TOPIC, 0): 9}


def test_recovery_point_unreadable_checkpoint_is_left_and_said(tmp_path):
    """An unreadable recovery-point-offset-checkpoint is read by the broker as empty
    (LogManager.loadLogs): retention goes on, the file is not written over, a note says so."""
    part = Part(tmp_path)
    cp = os.path.join(part.logdir, RECOVERY_POINTS)
    ig.write_file(cp, b"0\n2\n%s 0 1\n" % TOPIC.encode())
    res = ok(retain("--retention-ms", 0, "--now", T0 + HOUR, part.dir))
    assert live_bases(part.dir) == [12]
    assert read_bytes(cp) == b"0\n2\n%s 0 1\n" % TOPIC.encode()
    assert "not read" in res.lines[-2] and RECOVERY_POINTS in res.lines[-2], res.lines


@pytest.mark.slow
def test_recovery_point_and_epochs_at_every_crash_point(tmp_path, monkeypatch):
    """A crash before any file operation (rename, replace, unlink, fsync), then a rerun: the
    log directory (segments, leader-epoch-checkpoint, the offset checkpoints) equals an
    uninterrupted run's, with the log start offset inside a segment (the intent carries it).
    With `kafkalog recover` between the crash and the rerun, the checkpoints, the epochs and
    the live segments equal an uninterrupted run's followed by recover (what recover itself
    sets aside, in its quarantine, differs with the moment it runs)."""
    src = Part(tmp_path / "src")
    ig.write_file(os.path.join(src.dir, "leader-epoch-checkpoint"),
                  ig.leader_epoch_checkpoint([(0, 0), (2, 4), (3, 8)]))
    src.checkpoint(RECOVERY_POINTS, [("other", 0, 5), (TOPIC, 0, 2)])
    src.checkpoint("log-start-offset-checkpoint", [("other", 0, 5)])
    # segments 0 and 1 go (next bases 3, 6); the log start offset 7 is inside segment 2
    args = ["retain", "--log-start-offset", "7", "--file-delete-delay-ms", "0"]
    calls = ("rename", "replace", "unlink", "fsync")

    def copy(label):
        dst = str(tmp_path / label)
        shutil.copytree(src.logdir, dst)
        return dst

    def state(logdir):
        return tree(logdir, keep_lock=False)

    def recovered(logdir):
        """After recover: the checkpoints, the epochs and the live segments' files."""
        return {n: v for n, v in state(logdir).items()
                if "quarantine" not in n and not n.endswith((DELETED, ".snapshot"))}

    ref = copy("ref")
    assert ac.cli_crashing_at(args + [os.path.join(ref, "%s-0" % TOPIC)], None, monkeypatch,
                              calls) is False
    expected = {k: v[0] for k, v in state(ref).items()}
    assert read_checkpoint(os.path.join(ref, RECOVERY_POINTS)) == {("other", 0): 5, (TOPIC, 0): 7}
    with open(os.path.join(ref, "%s-0" % TOPIC, "leader-epoch-checkpoint"), encoding="utf-8") as f:
        assert f.read() == ig.leader_epoch_checkpoint([(2, 7), (3, 8)])
    assert kafkalog("recover", os.path.join(ref, "%s-0" % TOPIC)).code in (0, 1)   # 1: repaired (the recovery point)
    expected_recovered = {n: v[0] for n, v in recovered(ref).items()}
    k = 1
    while True:
        d = copy("k%03d" % k)
        part = os.path.join(d, "%s-0" % TOPIC)
        if not ac.cli_crashing_at(args + [part], k, monkeypatch, calls):
            break
        r = copy("r%03d" % k)
        assert ac.cli_crashing_at(args + [os.path.join(r, "%s-0" % TOPIC)], k, monkeypatch, calls)
        assert ac.cli_crashing_at(args + [part], None, monkeypatch, calls) is False
        got = {n: v[0] for n, v in state(d).items()}
        assert got == expected, (k, sorted(n for n in set(got) | set(expected)
                                           if got.get(n) != expected.get(n)))
        # crashed, recovered, rerun; then recover again, as the reference was
        assert kafkalog("recover", os.path.join(r, "%s-0" % TOPIC)).code in (0, 1)
        assert ac.cli_crashing_at(args + [os.path.join(r, "%s-0" % TOPIC)], None, monkeypatch,
                                  calls) is False
        assert kafkalog("recover", os.path.join(r, "%s-0" % TOPIC)).code in (0, 1)
        got = {n: v[0] for n, v in recovered(r).items()}
        assert got == expected_recovered, (k, sorted(
            n for n in set(got) | set(expected_recovered) if got.get(n) != expected_recovered.get(n)))
        shutil.rmtree(d)
        shutil.rmtree(r)
        k += 1
    assert k > 10, k


def test_producers_of_deleted_segments_are_kept_in_a_snapshot_at_the_log_end(tmp_path):
    """Retention deletes the segments holding producers 200 and 201 (a committed and an aborted
    transaction): a broker keeps them in memory until they expire, and so does the snapshot
    retain takes at the log end offset before deleting anything; a load afterwards (recover)
    still has them, with the values the broker's rules give from the whole log."""
    import appendcheck as ac
    import crashcheck as cc
    log_dir = str(tmp_path / "logs")
    part, leo = cc.write_seed(log_dir)
    expected = ac.producers_at(ac.log_batches(part), leo)
    assert {100, 200, 201} <= set(expected)
    now = cc.T0 + 23_003 + 10_000 + 1
    ok(retain("--retention-ms", 10_000, "--now", now, "--file-delete-delay-ms", 0, part))
    assert min(int(n[:20]) for n in os.listdir(part) if n.endswith(".log")) > 0
    snap = os.path.join(part, "%020d.snapshot" % leo)
    with open(snap, "rb") as f:
        assert cc.snapshot_entries(f.read()) == expected
    assert ac.kafkalog_in("recover", part).code in (0, 1)
    with open(snap, "rb") as f:
        assert cc.snapshot_entries(f.read()) == expected


def test_log_start_offset_recorded_where_the_log_directory_had_no_checkpoint(tmp_path):
    """A log directory without log-start-offset-checkpoint: a --log-start-offset above the
    first kept segment's base creates it with the partition's entry (the broker writes the
    file for every log directory, LogManager.checkpointLogStartOffsetsInDir), so that a load
    starts the log there, not at the segment's base; without one needed, no file."""
    logs = tmp_path / "logs"
    part = logs / "t-0"
    w = kg.SegmentWriter(0)
    for i in range(3):
        w.add_v2([kg.Rec(b"k", b"v%d" % i, kg.T0 + i)])
    kg.write_segment(str(part), 0, *w.chunks)
    w2 = kg.SegmentWriter(3)
    for i in range(3):
        w2.add_v2([kg.Rec(b"k", b"v%d" % i, kg.T0 + i)])
    kg.write_segment(str(part), 3, *w2.chunks)
    checkpoint = logs / "log-start-offset-checkpoint"
    ok(retain("--log-start-offset", 3, "--file-delete-delay-ms", 0, part))
    assert not checkpoint.exists()  # the log starts at the first segment's base
    ok(retain("--log-start-offset", 5, "--file-delete-delay-ms", 0, part))
    assert checkpoint.read_text() == "0\n1\nt 0 5\n"
