"""`kafkalog recover` killed (SIGKILL) mid-run: a rerun always completes, the result equals an
uninterrupted run's, and no byte is lost.

The partition: three segments of ~8 MB (the middle one with a flipped bit in a middle batch and
a garbage tail, so the third is set aside), a .swap to complete (a compacted copy of the first
segment) and .deleted files. An uninterrupted run is checked against the independently computed
result (kafkagen/indexgen).

* ``test_recover_survives_sigkill``: at least 50 times (up to 100 within a time budget), a fresh
  copy is recovered by ``python -m kafkalog_cli recover`` killed after a seeded random delay,
  stratified over the time an uninterrupted run takes (every other kill over the part of it
  that changes files), then recovered again to completion (every fourth time the rerun is
  killed too, and a third run finishes).
* ``test_recover_killed_before_every_step``: deterministic crash points on a smaller copy of the
  same partition: killed just before its 1st, 2nd, ... call of os.replace/rename/fsync/unlink/
  mkdir/..., until a run gets through.

Runs in the default ``pytest`` run (no marker deselects it); about 45 s on an idle machine.
"""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import indexgen as ig
import kafkagen as kg
from crashcheck import KILL_AT_STEP
from dumpcheck import REPO, files_in, kafkalog

# SIGKILL runs, at random and at every crash point: left out of the quick suite
# (pytest -m "not slow").
pytestmark = pytest.mark.slow

QUARANTINE = "kafkalog-quarantine"
KILLS = 50
SEED = 20241025
BUDGET_S = 35           # kills beyond the first KILLS stop once the loop has run this long
T0 = kg.T0


def name(base, kind):
    return "%s.%s" % (ig.segment_prefix(base), kind)


def big_segment(base, seed, txn_at):
    # ~8.6 MB: 1000 batches of 10 records of ~800 bytes
    return ig.busy_segment(base, n_batches=1000, records_per_batch=10, value_size=800,
                           t0=T0 + 10_000_000 * seed, txn_at=txn_at, seed=seed)


def compacted(data):
    entries = kg.split_entries(data)
    batches = ig.read_log(data)
    return b"".join(e for i, (e, b) in enumerate(zip(entries, batches))
                    if i % 2 == 0 or b.is_transactional or i == len(entries) - 1)


class Big:
    """The original partition and everything recovery must do to it."""

    def __init__(self, directory, segment=big_segment):
        self.dir = directory
        base_a = 1000
        a, base_b = segment(base_a, 0, 4)
        b, base_c = segment(base_b, 1, 7)
        c, leo = segment(base_c, 2, 9)
        segs = ig.write_partition(directory, [(base_a, a), (base_b, b), (base_c, c)])
        # the middle segment: a flipped bit in a middle batch, and a garbage tail
        entries = kg.split_entries(b)
        k = len(entries) // 2
        self.prefix = sum(len(e) for e in entries[:k])
        bad = kg.garbage_tail(kg.flip_bit(b, self.prefix + len(entries[k]) // 2, bit=5),
                              n=100_000, seed=3)
        ig.write_file(segs[1].paths["log"], bad)
        for off in (base_b, base_c, leo):
            ig.write_file(os.path.join(directory, name(off, "snapshot")), ig.encode_snapshot([]))
        ig.write_file(os.path.join(directory, "partition.metadata"),
                      ig.partition_metadata(ig.topic_id(9)))
        # leftovers: a swap of the first segment (the cleaner crashed before finishing it), and
        # files of an older segment waiting for deletion
        self.swap = compacted(a)
        ig.write_file(os.path.join(directory, name(base_a, "log.swap")), self.swap)
        old, _ = ig.busy_segment(0, n_batches=200)
        ig.write_file(os.path.join(directory, name(0, "log.deleted")), old)
        ig.write_file(os.path.join(directory, name(0, "index.deleted")), ig.encode_offset_index(
            ig.build_indexes(old).offset_entries, 0))
        ig.write_file(os.path.join(directory, name(0, "snapshot.deleted")), ig.encode_snapshot([]))

        self.original = files_in(directory)
        self.bad_log = name(base_b, "log")
        self.bad = bad
        self.kept = {name(base_a, "log"): self.swap, name(base_b, "log"): bad[:self.prefix]}
        new_leo = ig.read_log(bad[:self.prefix])[-1].last_offset + 1
        self.moved = ([name(base_a, k) for k in ("log", "index", "timeindex", "txnindex")]
                      + [name(base_c, k) for k in ("log", "index", "timeindex", "txnindex")]
                      + [name(o, "snapshot") for o in (base_b, base_c, leo) if o > new_leo]
                      + [name(0, "log.deleted"), name(0, "index.deleted"),
                         name(0, "snapshot.deleted")])
        for n in self.moved:
            assert n in self.original, n
        self.bases = (base_a, base_b)




def quarantine_union(directory):
    """[(folder, name, bytes)] of every file the manifests of the quarantine's run folders list
    (by the name it was set aside under); asserts that every file in a run folder is listed
    (the manifest entry is written before the file is moved there) and that ``quarantine
    list`` reads every run."""
    out = []
    q = os.path.join(directory, QUARANTINE)
    if not os.path.isdir(q):
        return out
    for sub in sorted(os.listdir(q)):
        run = os.path.join(q, sub)
        manifest = os.path.join(run, "manifest.json")
        entries = json.load(open(manifest))["entries"] if os.path.exists(manifest) else []
        listed = {e["saved_as"] for e in entries if e.get("saved_as")}
        for root, _, names in os.walk(run):
            for n in sorted(names):
                rel = os.path.relpath(os.path.join(root, n), run)
                if rel == "manifest.json" or rel.endswith(".kafkalog-tmp"):
                    continue
                assert rel in listed, "%s/%s: in the quarantine, listed by no manifest" % (
                    sub, rel)
                with open(os.path.join(root, n), "rb") as f:
                    out.append((sub, n, f.read()))
    listing = kafkalog("quarantine", "list", directory)
    assert listing.code == 0, listing
    return out


def check_nothing_lost(big, directory):
    """Every byte recover set aside or cut is in a file the quarantine's manifests list."""
    found = quarantine_union(directory)
    have = {}
    for _, n, data in found:
        have.setdefault(n, []).append(data)
    for n in big.moved:
        assert any(d == big.original[n] for d in have.get(n, [])), \
            "%s: not in quarantine verbatim (%s)" % (n, sorted(have))
    prefix = big.bad_log + ".cut-"
    pattern = re.compile(re.escape(prefix) + r"(\d+)-(\d+)$")
    pieces = sorted((int(m.group(1)), int(m.group(2)), data)
                    for m, data in ((pattern.match(n), data) for _, n, data in found) if m)
    assert pieces, sorted(have)
    covered = big.prefix
    for s, e, data in pieces:
        assert data == big.bad[s:e], "%s%d-%d: not the original bytes" % (prefix, s, e)
        if s <= covered:
            covered = max(covered, e)
    assert covered >= len(big.bad), "cut bytes [%d, %d) not all in quarantine" % (
        big.prefix, len(big.bad))


def first_change(directory, proc, limit=60.0):
    """Return once recover running as ``proc`` has made its first change in ``directory`` (its
    quarantine directory exists), or has ended."""
    q = os.path.join(directory, QUARANTINE)
    deadline = time.monotonic() + limit
    while not os.path.exists(q) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)


def run_subprocess(directory):
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "recover", directory], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    return p, time.monotonic() - t


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("crash") / "orig" / "logdir" / "big-0")
    return Big(d)


def fresh_copy(big, root, i):
    dst = os.path.join(root, "run-%02d" % i, "logdir", "big-0")
    shutil.copytree(big.dir, dst)
    return dst


def test_recover_survives_sigkill(big, tmp_path):
    # -- the uninterrupted run: checked against the independent expectation, and timed
    times = []
    ref = None
    for i in range(3):
        d = fresh_copy(big, str(tmp_path / "ref"), i)
        p, t = run_subprocess(d)
        assert p.returncode == 1, p
        times.append(t)
        state = files_in(d)
        if ref is None:
            ref = state
            for n, data in big.kept.items():
                assert state[n] == data, n
            for base in big.bases:
                idx = ig.build_indexes(state[name(base, "log")])
                assert state[name(base, "index")] == ig.encode_offset_index(idx.offset_entries, base)
                assert state[name(base, "timeindex")] == ig.encode_time_index(idx.time_entries, base)
            for n in big.moved:   # the first segment's names are taken by the swap's
                assert n not in state or n.startswith(ig.segment_prefix(big.bases[0])), n
            check_nothing_lost(big, d)
            assert kafkalog("verify-index", d).code == 0
        else:
            assert state == ref
        shutil.rmtree(os.path.dirname(os.path.dirname(d)))
    full = sorted(times)[1]

    # the part of a run before it changes anything (interpreter start, imports, planning): a
    # dry run of the same partition
    d = fresh_copy(big, str(tmp_path / "ref"), 9)
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "recover", "--dry-run", d],
                       cwd=REPO, capture_output=True, timeout=300)
    before_changes = time.monotonic() - t
    assert p.returncode == 1, p
    shutil.rmtree(os.path.dirname(os.path.dirname(d)))

    # -- kill it at random moments, then finish the job. Delays stratified (seeded): every
    # other kill over [0, 1.1 x an uninterrupted run] from the start; the others, once recover
    # has made its first change, over the rest of an uninterrupted run (the part that changes
    # files, however loaded the machine). At least KILLS kills; more while the loop has run
    # less than BUDGET_S.
    rng = random.Random(SEED)
    whole, changing = (0.0, full * 1.1), (min(before_changes * 0.9, full * 0.8), full * 1.02)
    spans = [whole if i % 2 == 0 else changing for i in range(2 * KILLS)]
    started = time.monotonic()
    stats = {"killed_while_running": 0, "finished_before_kill": 0, "partial_state": 0,
             "killed_twice": 0}
    partial_kinds = set()
    done = 0
    for i, (lo, hi) in enumerate(spans):
        if done >= KILLS and time.monotonic() - started > BUDGET_S:
            break
        d = fresh_copy(big, str(tmp_path / "kill"), i)
        delay = lo + (hi - lo) * (i // 2 + rng.random()) / KILLS
        proc = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "recover", d], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i % 2:
            # a kill while files change, whatever the machine's load: wait for recover's first
            # change (its quarantine directory), then a random part of the changing stretch
            delay = rng.uniform(0, max(full - before_changes, 0.01))
            first_change(d, proc)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            stats["killed_while_running"] += 1
        else:
            stats["finished_before_kill"] += 1
        proc.wait(timeout=60)
        interrupted = files_in(d)
        if interrupted != big.original and interrupted != ref:
            stats["partial_state"] += 1
            partial_kinds.add(tuple(sorted((n, len(v)) for n, v in interrupted.items())))
        if i % 4 == 3:
            # the rerun is killed too, before a third run finishes the job
            proc = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "recover", d],
                                    cwd=REPO, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(lo + (hi - lo) * rng.random())
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                stats["killed_twice"] += 1
            proc.wait(timeout=60)
        res = kafkalog("recover", d)
        assert "Traceback" not in res.err, res
        assert res.code in (0, 1), (i, delay, res)
        assert files_in(d) == ref, "kill %d after %.3fs: final state differs" % (i, delay)
        check_nothing_lost(big, d)
        again = kafkalog("recover", "--dry-run", d)
        assert again.code == 0, (i, delay, again)
        shutil.rmtree(os.path.dirname(os.path.dirname(d)))
        done += 1
    stats["distinct_partial_states"] = len(partial_kinds)
    print("uninterrupted run %.3fs, dry run %.3fs; %d kills: %r"
          % (full, before_changes, done, stats))
    assert done >= KILLS, "only %d kills fit the time budget (uninterrupted run %.2fs)" % (
        done, full)
    # the kills really hit running recoveries (timing depends on the machine's load)
    assert stats["killed_while_running"] >= done // 4, stats
    assert stats["partial_state"] >= 5, stats


# -- a kill before every file-system step --------------------------------------------------------

def checkpoint_of(partition):
    """The log directory's recovery-point-offset-checkpoint (None: there is none): after a run,
    the partition's log end offset."""
    path = os.path.join(os.path.dirname(partition), "recovery-point-offset-checkpoint")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def medium(tmp_path_factory):
    """The same partition as ``big``, with ~80 KB segments (so a run is all start-up)."""
    d = str(tmp_path_factory.mktemp("steps") / "orig" / "logdir" / "m-0")
    return Big(d, segment=medium_segment)


def medium_segment(base, seed, txn_at):
    return ig.busy_segment(base, n_batches=80, t0=T0 + 10_000_000 * seed, txn_at=txn_at,
                           seed=seed)


def test_recover_killed_before_every_step(medium, tmp_path):
    """Deterministic crash points: the run is killed just before its 1st, 2nd, ... call that
    changes the directory or flushes data (os.replace, os.rename, os.fsync, os.unlink,
    os.mkdir...), until a run gets through; after each kill a rerun must reach the
    uninterrupted run's state (the recovery-point checkpoint too) with nothing lost."""
    d = fresh_copy(medium, str(tmp_path / "ref"), 0)
    assert kafkalog("recover", d).code == 1
    ref = files_in(d)
    ref_checkpoint = checkpoint_of(d)
    assert ref_checkpoint is not None
    check_nothing_lost(medium, d)
    failures = []
    step = 0
    while True:
        step += 1
        assert step < 500, "the run never got through"
        d = fresh_copy(medium, str(tmp_path / "kill"), step)
        p = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(step), d], cwd=REPO,
                           capture_output=True, text=True, timeout=120)
        if p.returncode != -signal.SIGKILL:
            assert p.returncode == 1, p
            assert files_in(d) == ref
            assert checkpoint_of(d) == ref_checkpoint
            break
        leftover = sorted(set(files_in(d)) - set(ref) - set(medium.original))
        res = kafkalog("recover", d)
        assert "Traceback" not in res.err, res
        final = files_in(d)
        if res.code not in (0, 1) or final != ref or checkpoint_of(d) != ref_checkpoint:
            failures.append("killed before step %d: rerun exit %d; files that should not be "
                            "there: %s; missing: %s; differing: %s; left by the kill: %s" % (
                                step, res.code, sorted(set(final) - set(ref)),
                                sorted(set(ref) - set(final)),
                                sorted(n for n in set(ref) & set(final) if ref[n] != final[n]),
                                leftover))
            continue
        check_nothing_lost(medium, d)
        shutil.rmtree(os.path.dirname(os.path.dirname(d)))
    print("%d steps" % (step - 1))
    assert step > 10, "only %d steps: the fault injection does not see the run" % step
    assert not failures, "\n".join(failures)
