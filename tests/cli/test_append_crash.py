"""Crash test for `kafkalog append`: SIGKILL at seeded random moments during a long
``python -m kafkalog_cli append --flush-messages 200`` fed from a file of unique records. After
each kill, before anything else: every index entry points at a whole batch of the log (as a
broker loading the directory without recovery would need), producer snapshots and the
leader-epoch-checkpoint are whole. Then ``kafkalog recover`` and, read by kafka-python: the
partition is valid (verify-index exits 0, whole valid batches, consecutive offsets), the new
records are a prefix of the input in order, every record reported as flushed before the kill is
present exactly once; then a rerun appends the next records and its offsets continue the
partition's. A second test kills runs of transactional and idempotent JSON lines: the producer
snapshots and .txnindex entries a kill leaves are those the broker's rules give from the log
as it is, and after `recover` the .txnindex lists every abort."""

import collections
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time

import pytest

import appendcheck as ac
import indexgen as ig
import kafkagen as kg

# Randomized SIGKILL runs, about a minute: left out of the quick suite (pytest -m "not slow").
pytestmark = pytest.mark.slow

KILLS = 25   # the 50 random kills of the acceptance are in test_crash_state
FLUSH = 200
SEED = int(os.environ.get("KAFKALOG_CRASH_SEED", "20241105"))


def record_line(i):
    return b"rec-%07d-" % i + b"payload-" * 12


def make_input(path, n):
    with open(path, "wb") as f:
        for i in range(n):
            f.write(record_line(i) + b"\n")


def seed_partition(directory):
    """A kafka-python partition (two segments, preallocated active indexes) to append to."""
    segments, base = [], 0
    for i in range(2):
        data, nxt = ig.busy_segment(base, n_batches=12, t0=kg.T0 + 100000 * i, seed=i)
        segments.append((base, data))
        base = nxt
    ig.write_partition(directory, segments, preallocate_active=True)
    return base


class Run:
    """A background ``append`` whose stdout lines are collected as they come."""

    def __init__(self, directory, input_path, args):
        self.f = open(input_path, "rb")
        self.p = subprocess.Popen(
            [sys.executable, "-m", "kafkalog_cli", "append", str(directory), "--format", "json",
             "--flush-messages", str(FLUSH), *[str(a) for a in args]],
            cwd=ac.REPO, stdin=self.f, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.chunks = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.err = b""

    def _read(self):
        for line in iter(self.p.stdout.readline, b""):
            self.chunks.append(line)

    def finish(self, kill_after=None):
        """Kill after ``kill_after`` seconds (None: let it end). True if it was killed alive."""
        killed = False
        if kill_after is not None:
            try:
                self.p.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                self.p.kill()
                killed = True
        self.p.wait(timeout=300)
        self.t.join(timeout=30)
        self.err = self.p.stderr.read()
        self.p.stderr.close()
        self.p.stdout.close()
        self.f.close()
        return killed

    def objects(self):
        """Complete JSON lines printed (a line cut by the kill is not a report)."""
        out = []
        for c in self.chunks:
            if not c.endswith(b"\n"):
                continue
            out.append(json.loads(c))
        return out

    def flushed(self):
        return [o["lastOffset"] for o in self.objects() if o.get("type") == "flushed"]


def quick_check(directory, first_offset, values_from=0):
    """Whole valid batches, consecutive offsets from ``first_offset``, names = first offsets
    (an empty last segment named by the end offset); verify-index exits 0. Returns (the values
    of the records at offsets >= ``values_from``, in offset order; the end offset). Batches
    wholly before ``values_from`` are read by their headers only (all v2, no gaps)."""
    values = []
    expected = first_offset
    segs = ac.segment_paths(directory)
    assert segs, "no segments"
    for i, (base, path) in enumerate(segs):
        with open(path, "rb") as f:
            data = f.read()
        kbs = kg.kafka_python_read(data, deep=False)
        assert sum(kb.size for kb in kbs) == len(data), "%s: bytes after the last batch" % path
        if not kbs:
            assert i == len(segs) - 1 and base == expected, (path, expected)
            continue
        for j, kb in enumerate(kbs):
            b = kb.batch
            assert kb.crc_ok, "%s: CRC at %d" % (path, kb.position)
            if j == 0:
                assert b.base_offset == base, (path, b.base_offset)
            if b.last_offset < values_from:
                assert b.base_offset == expected, (path, b.base_offset, expected)
                expected = b.last_offset + 1
                continue
            for r in b:
                assert r.offset == expected, (path, r.offset, expected)
                expected += 1
                if r.offset >= values_from:
                    values.append(r.value)
    res = ac.verify_index(directory)
    assert res.code == 0, res
    return values, expected


def check_side_files(directory, start, epoch):
    """What a kill leaves beside the segments is whole: every producer snapshot is a valid empty
    one (the input has no producers; written atomically), and the leader-epoch-checkpoint, if
    written yet, is the one entry the run assigned: ``epoch`` from its first offset (the epoch
    of the log's last batch: 1 on the seeded partition, whose busy_segment batches carry 1 and
    which has no checkpoint; 0 on a new one)."""
    for n in sorted(os.listdir(directory)):
        if n.endswith(".snapshot"):
            with open(os.path.join(str(directory), n), "rb") as f:
                assert f.read() == ig.encode_snapshot([]), n
    path = os.path.join(str(directory), "leader-epoch-checkpoint")
    if os.path.exists(path):
        with open(path) as f:
            assert f.read() == ig.leader_epoch_checkpoint([(epoch, start)])


def recover(directory):
    res = ac.kafkalog_in("recover", str(directory))
    assert res.code in (0, 1), res
    return res.code


def options(rnd):
    args = []
    codec = rnd.choice(["none", "none", "lz4", "gzip", "zstd"])
    args += ["--codec", codec]
    br = rnd.choice([None, 5, 20, 100])
    if br:
        args += ["--batch-records", br]
    sb = rnd.choice([None, None, 200000, 1000000])
    if sb:
        args += ["--segment-bytes", sb]
    if rnd.random() < 0.3:
        args += ["--index-interval-bytes", rnd.choice([0, 1000])]
    return args, (br or 10**9)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """(input file, number of records, seconds a full run takes)."""
    base = tmp_path_factory.mktemp("crash-input")
    n = 60000
    path = base / "records.txt"
    make_input(path, n)
    d = base / "logs" / "calib-0"
    t = time.monotonic()
    run = Run(d, path, ["--codec", "none"])
    run.finish()
    dur = time.monotonic() - t
    assert run.p.returncode == 0, run.err
    values, _ = quick_check(d, 0)
    assert values == [record_line(i) for i in range(n)]
    target = 0.9   # seconds: long enough for kills at many stages, short enough for 50 runs
    if not 0.6 <= dur <= 1.2:
        n = min(400000, max(5000, int(n * target / dur)))
        path = base / ("records-%d.txt" % n)
        make_input(path, n)
        d = base / "logs" / "calib2-0"
        t = time.monotonic()
        run = Run(d, path, ["--codec", "none"])
        run.finish()
        dur = time.monotonic() - t
        assert run.p.returncode == 0, run.err
    return path, n, dur


def test_sigkill_during_append(tmp_path, calibrated):
    input_path, n, dur = calibrated
    rnd = random.Random(SEED)
    seed_dir = tmp_path / "seed" / "crash-0"
    seed_leo = seed_partition(seed_dir)
    seed_values = quick_check(seed_dir, 0)[0]
    kills = 0
    iterations = 0
    reports_seen = 0
    with_data = 0
    repaired = 0
    started = time.monotonic()
    failures = []
    while kills < KILLS:
        iterations += 1
        assert iterations <= 3 * KILLS, "too few kills landed while the append ran"
        d = tmp_path / ("logs%d" % iterations) / "crash-0"
        if rnd.random() < 0.4:
            shutil.copytree(seed_dir, d)
            start, old_values = seed_leo, list(seed_values)
        else:
            start, old_values = 0, []
        args, batch_records = options(rnd)
        delay = rnd.uniform(0.0, dur * 0.95)
        run = Run(d, input_path, args)
        killed = run.finish(kill_after=delay)
        kills += killed
        flushed = run.flushed()
        if not killed:
            assert run.p.returncode == 0, run.err
        ctx = "iteration %d, args %r, kill after %.3fs" % (iterations, args, delay)

        if not os.path.isdir(d) or not ac.segment_paths(d):
            # killed before the first segment existed: nothing can have been reported
            assert not flushed, ctx
            k = 0
        else:
            # what a broker loading the directory as the kill left it would find: index
            # entries of whole batches only, never one past the log
            ac.assert_indexes_within_log(d)
            check_side_files(d, start, 1 if start else 0)
            repaired += recover(d) == 1
            values, end = quick_check(d, 0)
            assert values[:len(old_values)] == old_values, ctx
            new = values[len(old_values):]
            k = len(new)
            with_data += killed and k > 0
            assert end == start + k
            # the new records are the input's first k records, in order, each once
            assert new == [record_line(i) for i in range(k)], ctx
            if flushed:
                reports_seen += 1
                assert flushed == sorted(flushed), ctx
                assert max(flushed) <= start + k - 1, (
                    "%s: offset %d reported flushed, partition ends at %d"
                    % (ctx, max(flushed), start + k - 1))
                assert min(flushed) >= start, ctx
                # reports come as flushes happen: at most about two flush intervals written
                # beyond the last report (unflushed batch + one not yet reported)
                slack = 2 * (FLUSH + min(batch_records, 400)) + 400
                assert start + k - 1 - max(flushed) <= slack or not killed, (
                    "%s: %d records written past the last flush report %d"
                    % (ctx, start + k - 1 - max(flushed), max(flushed)))
            elif killed and k > 4 * FLUSH + 2 * min(batch_records, 400) + 400:
                failures.append("%s: %d records written and no flush report seen" % (ctx, k))
        # rerun: the next records after what is there; offsets continue
        more = [record_line(i) for i in range(k, k + 150)]
        res = ac.append(d, "--format", "json", "--flush-messages", str(FLUSH),
                        input=ac.lines_input(more))
        assert res.code == 0, (ctx, res)
        last = ac.appended_obj(res)
        assert (last["firstOffset"], last["lastOffset"]) == (start + k, start + k + 149), ctx
        values, end = quick_check(d, 0, values_from=start + k)
        assert end == start + k + 150, ctx
        assert values == more, ctx
        shutil.rmtree(d.parent)
    elapsed = time.monotonic() - started
    assert not failures, failures
    assert reports_seen >= KILLS // 4, "flush reports seen in only %d runs" % reports_seen
    print("crash test: %d kills in %d runs (%d after records were written, flush reports seen "
          "in %d, %d repaired by recover), %.1fs, run length %.2fs for %d records"
          % (kills, iterations, with_data, reports_seen, repaired, elapsed, dur, n))


# -- transactions: the side files a kill leaves ------------------------------------------------------

TXN_KILLS = 20


def make_txn_input(path, n):
    """JSON lines: a transactional producer (7) committing or aborting every 40 of its records,
    an idempotent one (8), plain records, all with current timestamps (no producer expires)."""
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out.append({"value": "t-%07d-" % i + "x" * 60, "producerId": 7, "producerEpoch": 0,
                        "transactional": True, "timestamp": now})
            if i % 120 == 117:
                out.append({"control": "abort" if i % 240 == 117 else "commit", "producerId": 7,
                            "producerEpoch": 0, "coordinatorEpoch": 1, "timestamp": now})
        elif kind == 1:
            out.append({"value": "i-%07d-" % i + "y" * 60, "producerId": 8, "producerEpoch": 0,
                        "timestamp": now})
        else:
            out.append({"value": "p-%07d-" % i + "z" * 60, "timestamp": now})
    with open(path, "wb") as f:
        f.write(ac.jsonl_input(out))


def snapshot_entries(path):
    """A producer snapshot's entries, read here from its layout (version, CRC-32C, count,
    46-byte entries)."""
    with open(path, "rb") as f:
        data = f.read()
    version, _, count = struct.unpack_from(">hIi", data, 0)
    assert version == 1 and ig.snapshot_crc(data)[0] == ig.snapshot_crc(data)[1], path
    return {e[0]: ig.SnapshotEntry(*e) for e in
            (struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range(count))}


def check_txn_side_files(directory, complete=False):
    """Before any recovery: each producer snapshot holds the producers the broker's rules give
    at its offset from the log as it is; each segment's .txnindex lists the aborts whose
    marker it holds (the last one of the log may miss its entry: a kill between the marker
    and its entry), never one more. Returns how many of each it compared."""
    batches = ac.log_batches(directory)
    seen = collections.Counter()
    for n in sorted(os.listdir(directory)):
        if n.endswith(".snapshot"):
            seen["snapshots"] += 1
            offset = int(n[:20])
            assert snapshot_entries(os.path.join(str(directory), n)) == ac.producers_at(
                batches, offset), n
    expected = ac.expected_txn_index(directory)
    last_base = max(expected)
    for base, entries in expected.items():
        path = os.path.join(str(directory), "%020d.txnindex" % base)
        got = []
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            assert len(data) % ig.TXN_ENTRY == 0, path
            got = [ig.AbortedTxn(*struct.unpack_from(">hqqqq", data, ig.TXN_ENTRY * i)[1:])
                   for i in range(len(data) // ig.TXN_ENTRY)]
        assert got == entries or (not complete and base == last_base and got == entries[:-1]), (
            path, got, entries)
        seen["aborts"] += len(got)
    return seen


def test_sigkill_during_transactional_append(tmp_path):
    rnd = random.Random(SEED + 1)
    n = 20000
    input_path = tmp_path / "txn.jsonl"
    make_txn_input(input_path, n)
    d0 = tmp_path / "ref" / "txn-0"
    t = time.monotonic()
    run = Run(d0, input_path, ["--input-format", "jsonl", "--segment-bytes", "60000"])
    run.finish()
    dur = time.monotonic() - t
    assert run.p.returncode == 0, run.err
    check_txn_side_files(d0)
    kills = iterations = 0
    checked = collections.Counter()
    while kills < TXN_KILLS:
        iterations += 1
        assert iterations <= 3 * TXN_KILLS, "too few kills landed"
        d = tmp_path / ("k%d" % iterations) / "txn-0"
        args = ["--input-format", "jsonl", "--segment-bytes", rnd.choice(["30000", "60000"]),
                "--batch-records", rnd.choice(["5", "50", "1000"])]
        run = Run(d, input_path, args)
        kills += run.finish(kill_after=rnd.uniform(0.0, dur * 0.95))
        if not os.path.isdir(d) or not ac.segment_paths(d):
            continue
        ac.assert_indexes_within_log(d)
        checked += check_txn_side_files(d)
        recover(d)
        quick_check(d, 0)
        after = check_txn_side_files(d, complete=True)
        # recover's snapshot at the log end offset (none for an empty log: a snapshot at the
        # log start offset is one ProducerStateManager.truncateAndReload removes)
        assert after["snapshots"] >= 1 or ac.next_offset(d) == 0, os.listdir(d)
        shutil.rmtree(d.parent)
    # the kills landed after snapshots and aborted transactions were written
    assert checked["snapshots"] >= TXN_KILLS and checked["aborts"] >= TXN_KILLS, checked
