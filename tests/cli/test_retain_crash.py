"""`kafkalog retain` interrupted: after a rerun the partition is consistent and equals an
uninterrupted run's result.

* SIGKILL at random moments (seeded): ``python -m kafkalog_cli retain --retention-ms ...
  --file-delete-delay-ms 0`` on a partition of 40 small segments (32 of them expired), killed
  after a delay spread over an uninterrupted run, or shortly after its first change to the
  directory is seen; then rerun to completion (every other time first with the default delay,
  which leaves the .deleted files to inspect; every fifth time the rerun is killed too).
* Every crash point, deterministically: the command run in-process with the k-th rename /
  replace / unlink / fsync raising (a crash just before that call), for every k, then a dry run
  (which must change nothing) and a rerun; also with a snapshot inside a deleted segment, with a
  log-start-offset-checkpoint, and with --roll-active.

Runs in the default ``pytest`` run; the SIGKILL loop takes ~10-30 s, the rest ~10 s.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

import appendcheck as ac
import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO, files_in, kafkalog

# SIGKILL runs, at random and at every crash point: left out of the quick suite
# (pytest -m "not slow").
pytestmark = pytest.mark.slow

T0 = kg.T0
TOPIC = "orders"
DELETED = ".deleted"
KILLS = 30   # the 50 random kills of the acceptance are in test_crash_state
SEED = 20241122
BUDGET_S = 50


def name(base, kind="log"):
    return "%s.%s" % (ig.segment_prefix(base), kind)




def base_of(n):
    return int(n[:20]) if n[:20].isdigit() else None


def kafka_files(directory):
    """The partition's Kafka files (kafkalog's hidden lock files left out)."""
    return {n: v for n, v in files_in(directory).items() if not n.startswith(".")}


def build(directory, n_segments, expired, mid_snapshot=False):
    """``n_segments`` segments of three one-record batches (every seventh also an aborted
    transaction, so that it has a .txnindex); segment i's newest timestamp is T0 + 1000 i + 2.
    Snapshots at every base and at the log end offset (and, with ``mid_snapshot``, inside the
    first segment). Returns (bases, log end offset, now, retention ms) such that exactly the
    first ``expired`` segments are older than the retention."""
    segs = []
    base = 0
    for i in range(n_segments):
        w = kg.SegmentWriter(base, partition_leader_epoch=1)
        for j in range(3):
            w.add_v2([kg.Rec(b"k-%d-%d" % (i, j), b"v" * 40, T0 + 1000 * i + j)])
        if i % 7 == 3:
            w.add_v2([kg.Rec(b"t", b"x" * 20, T0 + 1000 * i)], producer_id=500 + i, producer_epoch=0,
                     base_sequence=0, transactional=True)
            w.add_control(kg.ABORT, 500 + i, 0, 1, timestamp=T0 + 1000 * i + 1)
        segs.append((base, w.data()))
        base = w.next_offset
    ig.write_partition(directory, segs)
    bases = [b for b, _ in segs]
    ig.write_snapshots(directory, bases + [base] + ([1] if mid_snapshot else []))
    ig.write_file(os.path.join(directory, "partition.metadata"), ig.partition_metadata(ig.topic_id(4)))
    retention = 10_000
    now = T0 + 1000 * (expired - 1) + 2 + retention + 1
    return bases, base, now, retention


def check_segments_whole(directory, original):
    """No half-deleted segment: every live .log has its .index and .timeindex (and its
    .txnindex when it had one), all verbatim, and no .deleted file shares its base offset;
    every segment with a .deleted file has no live file left."""
    live = kafka_files(directory)
    bases = {base_of(n) for n in live if n.endswith(".log")}
    for b in bases:
        for kind in ("index", "timeindex", "txnindex"):
            n = name(b, kind)
            assert n in live or (kind == "txnindex" and n not in original), "%s: missing" % n
        assert not [n for n in live if n.endswith(DELETED) and base_of(n) == b], b
    for n in live:
        if n.endswith(DELETED):
            b = base_of(n)
            assert not [m for m in live if base_of(m) == b and not m.endswith(DELETED)
                        and not m.endswith(".snapshot")], n
            assert live[n] == original[n[:-len(DELETED)]], n
        elif n in original:
            assert live[n] == original[n], n
        else:   # only the segment --roll-active creates, empty
            assert live[n] == b"" and base_of(n) in bases, n


def check_contiguous(directory, log_end):
    bases = sorted(int(n[:20]) for n in os.listdir(directory) if n.endswith(".log"))
    expect = bases[0]
    for b in bases:
        assert b == expect, "gap before segment %d (expected %d)" % (b, expect)
        with open(os.path.join(directory, name(b)), "rb") as f:
            for kb in kg.kafka_python_read(f.read()):
                assert kb.crc_ok
                assert kb.batch.base_offset == expect, (b, kb.batch.base_offset, expect)
                expect = kb.batch.last_offset + 1
    assert expect == log_end, (expect, log_end)


# == SIGKILL ============================================================================================

class Forty:
    def __init__(self, root):
        self.dir = os.path.join(root, "logs", "%s-0" % TOPIC)
        self.bases, self.leo, self.now, self.retention = build(self.dir, 40, 32)
        self.original = kafka_files(self.dir)
        self.args = ["--retention-ms", str(self.retention), "--now", str(self.now)]
        self.kept = {n: v for n, v in self.original.items()
                     if base_of(n) is None or base_of(n) >= self.bases[32]}
        assert len(self.original) - len(self.kept) > 32 * 4


@pytest.fixture(scope="module")
def forty(tmp_path_factory):
    return Forty(str(tmp_path_factory.mktemp("retain-crash") / "orig"))


def fresh_copy(src, root, i):
    dst = os.path.join(root, "run-%02d" % i, "logs", "%s-0" % TOPIC)
    shutil.copytree(src.dir, dst)
    return dst


def start(directory, args, delay_ms="0"):
    return subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "retain", *args,
                             "--file-delete-delay-ms", delay_ms, directory], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def first_change(proc, directory, n_files, limit_s):
    """Wait until the running process has changed the directory's Kafka files (a .deleted name,
    or fewer files; its hidden intent file comes first), or has ended; True when a change was
    seen while it ran."""
    end = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < end:
        names = [n for n in os.listdir(directory) if not n.startswith(".")]
        if len(names) != n_files or any(n.endswith(DELETED) for n in names):
            return True
    return False


def test_retain_survives_sigkill(forty, tmp_path):
    # the uninterrupted run, checked against the expectation and timed
    times = []
    for i in range(3):
        d = fresh_copy(forty, str(tmp_path / "ref"), i)
        t = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "retain", *forty.args,
                            "--file-delete-delay-ms", "0", d], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
        times.append(time.monotonic() - t)
        assert p.returncode == 0, p
        assert files_in(d) == forty.kept   # and no hidden file left (lock, intent)
        if i == 0:
            check_contiguous(d, forty.leo)
            assert kafkalog("verify-index", d).code == 0
            ac.assert_recover_keeps_everything(d)
        shutil.rmtree(os.path.dirname(os.path.dirname(d)))
    full = sorted(times)[1]
    ref = forty.kept
    n_files = len(forty.original)

    rng = random.Random(SEED)
    started = time.monotonic()
    stats = {"killed_while_running": 0, "finished_before_kill": 0, "partial_state": 0,
             "killed_twice": 0, "triggered": 0}
    partial = set()
    done = 0
    i = -1
    while done < KILLS or (stats["partial_state"] < 8 and done < 2 * KILLS):
        i += 1
        if time.monotonic() - started > BUDGET_S:
            break
        d = fresh_copy(forty, str(tmp_path / "kill"), i)
        proc = start(d, forty.args)
        if i % 2 == 0:
            # a delay spread (stratified) over 1.1 x an uninterrupted run
            delay = full * 1.1 * ((i // 2) % (KILLS // 2) + rng.random()) / (KILLS // 2)
            time.sleep(delay)
        else:
            # shortly after the first change is seen: the part of the run that renames/removes
            # (the renames and removals take some 5-20 ms after the first change)
            delay = rng.choice([0, rng.uniform(0, 0.001), rng.uniform(0, 0.004),
                                rng.uniform(0, 0.015)])
            if first_change(proc, d, n_files, 30):
                stats["triggered"] += 1
                if delay:
                    time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            stats["killed_while_running"] += 1
        else:
            stats["finished_before_kill"] += 1
        proc.wait(timeout=60)
        state = kafka_files(d)
        if state != forty.original and state != ref:
            stats["partial_state"] += 1
            partial.add(tuple(sorted(state)))
        if i % 5 == 4:
            proc = start(d, forty.args)
            time.sleep(rng.uniform(0, full))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                stats["killed_twice"] += 1
            proc.wait(timeout=60)
        if i % 2 == 1:
            # a rerun with the default delay: the deletions are finished, the .deleted files stay
            res = kafkalog("retain", *forty.args, d)
            assert res.code == 0 and "Traceback" not in res.err, (i, res)
            check_segments_whole(d, forty.original)
            assert {n: v for n, v in kafka_files(d).items() if not n.endswith(DELETED)} == ref, i
        res = kafkalog("retain", *forty.args, "--file-delete-delay-ms", "0", d)
        assert res.code == 0 and "Traceback" not in res.err, (i, res)
        final = files_in(d)   # hidden files too: no intent or temporary file is left behind
        assert final == ref, "kill %d: differs from an uninterrupted run: %s" % (
            i, sorted(set(final) ^ set(ref)))
        check_segments_whole(d, forty.original)
        check_contiguous(d, forty.leo)
        ac.assert_recover_keeps_everything(d)
        shutil.rmtree(os.path.dirname(os.path.dirname(d)))
        done += 1
    stats["distinct_partial_states"] = len(partial)
    print("uninterrupted run %.3fs; %d kills: %r" % (full, done, stats))
    assert done >= KILLS, "only %d kills fit the time budget" % done
    assert stats["killed_while_running"] >= done // 2, stats
    assert stats["partial_state"] >= 6, stats


# == every crash point, in-process =========================================================================

CALLS = ("rename", "replace", "unlink", "fsync")


def run_crashing_at(directory, args, k, monkeypatch):
    """Run retain in-process, the k-th of the calls in CALLS raising a crash (k None: never).
    True when it crashed, False when it finished first."""
    return ac.cli_crashing_at(["retain", *args, directory], k, monkeypatch, CALLS)


def log_dir_state(directory):
    """The partition's files, and the log directory's log-start-offset-checkpoint and
    recovery-point-offset-checkpoint (each None when absent)."""
    texts = []
    for n in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint"):
        cp = os.path.join(os.path.dirname(directory), n)
        checkpoint = None
        if os.path.exists(cp):
            with open(cp, encoding="utf-8") as f:
                checkpoint = f.read()
        texts.append(checkpoint)
    return files_in(directory), tuple(texts)


def crash_everywhere(tmp_path, monkeypatch, args, n_segments=6, expired=4, mid_snapshot=False,
                     checkpoint=None, preallocate_active=False):
    """For every crash point k: a fresh copy crashed at k, then rerun to completion; returns the
    reference (uninterrupted) state and the list of (k, state) that differ from it."""
    orig = str(tmp_path / "orig" / "logs" / ("%s-0" % TOPIC))
    bases, leo, now, retention = build(orig, n_segments, expired, mid_snapshot=mid_snapshot)
    if preallocate_active:
        segs = [(b, files_in(orig)[name(b)]) for b in bases]
        ig.write_partition(orig, segs[-1:], preallocate_active=True)
    if checkpoint is not None:
        ig.write_file(os.path.join(os.path.dirname(orig), "log-start-offset-checkpoint"),
                      ig.offset_checkpoint(checkpoint))
    original = files_in(orig)
    args = ["--retention-ms", str(retention), "--now", str(now)] + list(args)

    def copy(label):
        dst = str(tmp_path / label / "logs")
        shutil.copytree(os.path.dirname(orig), dst)
        return os.path.join(dst, "%s-0" % TOPIC)

    d = copy("ref")
    assert run_crashing_at(d, args, None, monkeypatch) is False
    ref = log_dir_state(d)
    check_contiguous(d, leo)
    bad = []
    k = 1
    while True:
        d = copy("k%03d" % k)
        crashed = run_crashing_at(d, args, k, monkeypatch)
        if not crashed:
            break
        # a dry run of the interrupted state changes nothing (an intent file included)
        interrupted = log_dir_state(d)
        # (exit 1 when it would delete, as recover --dry-run exits 1 when it would repair)
        res = kafkalog("retain", "--dry-run", *args, d)
        assert res.code in (0, 1) and "Traceback" not in res.err, res
        assert log_dir_state(d) == interrupted
        assert run_crashing_at(d, args, None, monkeypatch) is False
        state = log_dir_state(d)
        check_contiguous(d, leo)
        if state != ref:
            bad.append((k, sorted(set(state[0]) ^ set(ref[0])), state[1] != ref[1]))
        else:
            check_segments_whole(d, original)
        shutil.rmtree(os.path.dirname(os.path.dirname(d)))
        k += 1
    assert k > 10, "too few crash points: %d" % k
    return ref, bad, d


@pytest.mark.parametrize("delay", ["0", "60000"])
def test_every_crash_point(tmp_path, monkeypatch, delay):
    ref, bad, last = crash_everywhere(tmp_path, monkeypatch, ["--file-delete-delay-ms", delay])
    assert not bad, bad
    if delay == "0":
        ac.assert_recover_keeps_everything(last)
    else:   # the .deleted files, for recover to finish deleting
        assert kafkalog("recover", "--dry-run", last).code == 1


def test_every_crash_point_snapshot_inside_a_deleted_segment(tmp_path, monkeypatch):
    """A snapshot below the new log start that is no deleted segment's base (a restart's)
    stays, as the broker leaves it, whatever the crash point."""
    ref, bad, _ = crash_everywhere(tmp_path, monkeypatch, ["--file-delete-delay-ms", "0"],
                                   mid_snapshot=True)
    assert not bad, bad


def test_every_crash_point_log_start_checkpoint(tmp_path, monkeypatch):
    ref, bad, _ = crash_everywhere(tmp_path, monkeypatch, ["--file-delete-delay-ms", "0"],
                                   checkpoint=[(TOPIC, 0, 1), ("other", 2, 9)])
    assert not bad, bad


@pytest.mark.parametrize("preallocate", [False, True])
def test_every_crash_point_roll_active(tmp_path, monkeypatch, preallocate):
    ref, bad, _ = crash_everywhere(tmp_path, monkeypatch, ["--roll-active", "--file-delete-delay-ms", "0"],
                                   expired=6, preallocate_active=preallocate)
    assert not bad, bad
