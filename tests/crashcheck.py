"""Crash tests of the mutating commands, one harness for all four (append, roll, retain, recover).

A command runs as a real process and is SIGKILLed, either just before its k-th file operation
(``tests/killshim.py``: every k in turn) or at a random moment. Then, as an operator would:
``kafkalog recover``, the command once more (append: the input lines not yet in the log), and
``recover``. The log directory must then equal, file for file and byte for byte, what the
uninterrupted command followed by ``recover`` leaves: every segment's .log, .index, .timeindex
and .txnindex, the producer snapshots, leader-epoch-checkpoint, partition.metadata, and the log
directory's checkpoint files and clean-shutdown marker. The only things left out are the
quarantine folders, where recover keeps what it set aside (their own tests check that nothing
is lost), and kafkalog's lock files.

The partition the runs start from is written here from Kafka's published layouts (kafkagen,
indexgen: not by kafkalog): three segments with plain, idempotent and transactional batches, a
committed and an aborted transaction, two leader epochs, producer snapshots at the segment
bases computed by the broker's rules (appendcheck.producers_at), and a second partition whose
checkpoint lines must stay as they are.
"""

import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import appendcheck as ac
import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO

TOPIC = "crash"
PARTITION = TOPIC + "-0"
# Two hours ago, to the hour: the producers are not expired (a broker drops a producer from a
# snapshot it loads when its last write is older than producer.id.expiration.ms, one day)
T0 = (int(time.time()) // 3600 - 2) * 3600 * 1000
EPOCH2_AT = 30   # the offset from which the batches carry partition leader epoch 2
MARKER = ".kafka_cleanshutdown"
LOCK_FILES = (".lock", ".kafkalog-append.lock")   # held while a run lasts; a kill leaves them


# -- the partition the runs start from -------------------------------------------------------------

def _value(i, size=300):
    return (b"value-%06d-" % i) * (size // 13)


def seed_segments():
    """[(base offset, .log bytes)] of three segments: plain batches, producer 100 idempotent,
    producer 200 a committed transaction, producer 201 an aborted one (with a .txnindex entry),
    partition leader epoch 0 then 2 from offset EPOCH2_AT."""
    segments = []
    offset, seq100, i = 0, 0, 0
    for s in range(3):
        w = kg.SegmentWriter(offset)
        for j in range(12):
            epoch = 2 if w.next_offset >= EPOCH2_AT else 0
            ts = T0 + 1000 * i
            recs = [kg.Rec(b"k%d" % i, _value(i), ts), kg.Rec(b"k%d" % i, _value(i + 1), ts + 3)]
            if j % 4 == 1:
                w.add_v2(recs, producer_id=100, producer_epoch=0, base_sequence=seq100,
                         partition_leader_epoch=epoch)
                seq100 += len(recs)
            elif s == 0 and j == 6:
                w.add_v2(recs, producer_id=200, producer_epoch=0, base_sequence=0,
                         transactional=True, partition_leader_epoch=epoch)
            elif s == 0 and j == 8:
                w.add_control(kg.COMMIT, 200, 0, 5, timestamp=ts, partition_leader_epoch=epoch)
            elif s == 1 and j == 3:
                w.add_v2(recs, producer_id=201, producer_epoch=3, base_sequence=0,
                         transactional=True, partition_leader_epoch=epoch)
            elif s == 1 and j == 9:
                w.add_control(kg.ABORT, 201, 3, 5, timestamp=ts, partition_leader_epoch=epoch)
            else:
                w.add_v2(recs, partition_leader_epoch=epoch)
            i += 1
        segments.append((offset, w.data()))
        offset = w.next_offset
    return segments, offset, seq100


def write_seed(log_dir, clean_shutdown=False, open_transaction=False):
    """The seed log directory (see the module's text); returns the partition directory and its
    log end offset. ``open_transaction``: the active segment ends with a transactional batch of
    producer 203 that no marker ends yet."""
    d = os.path.join(log_dir, PARTITION)
    segments, leo, _ = seed_segments()
    if open_transaction:
        w = kg.SegmentWriter(leo)
        w.add_v2([kg.Rec(b"t", b"open", T0 + 40000)], producer_id=203, producer_epoch=0,
                 base_sequence=0, transactional=True, partition_leader_epoch=2)
        segments[-1] = (segments[-1][0], segments[-1][1] + w.data())
        leo = w.next_offset
    ig.write_partition(d, segments, preallocate_active=True)
    batches = ac.log_batches(d)
    for base, _ in segments[1:]:
        entries = sorted(ac.producers_at(batches, base).values())
        ig.write_file(os.path.join(d, ig.segment_prefix(base) + ".snapshot"),
                      ig.encode_snapshot(entries))
    ig.write_file(os.path.join(d, "leader-epoch-checkpoint"),
                  ig.leader_epoch_checkpoint([(0, 0), (2, EPOCH2_AT)]))
    ig.write_file(os.path.join(d, "partition.metadata"), ig.partition_metadata(ig.topic_id(7)))
    other = os.path.join(log_dir, "other-0")
    w = kg.SegmentWriter(0)
    for j in range(3):
        w.add_v2([kg.Rec(b"o", b"other-%d" % j, T0 + j)])
    ig.write_partition(other, [(0, w.data())])
    ig.write_file(os.path.join(log_dir, "recovery-point-offset-checkpoint"),
                  ig.offset_checkpoint([("other", 0, 3), (TOPIC, 0, segments[1][0])]))
    ig.write_file(os.path.join(log_dir, "replication-offset-checkpoint"),
                  ig.offset_checkpoint([(TOPIC, 0, leo), ("other", 0, 3)]))
    ig.write_file(os.path.join(log_dir, "log-start-offset-checkpoint"),
                  ig.offset_checkpoint([("other", 0, 0)]))
    if clean_shutdown:
        ig.write_file(os.path.join(log_dir, MARKER), '{"version":0,"brokerEpoch":7}')
    return d, leo


# -- the state compared ----------------------------------------------------------------------------

def _files(directory):
    out = {}
    for n in sorted(os.listdir(directory)):
        p = os.path.join(directory, n)
        if os.path.isfile(p) and n not in LOCK_FILES:
            with open(p, "rb") as f:
                out[n] = f.read()
    return out


def log_dir_state(log_dir):
    """{path relative to the log directory: bytes} of every regular file of the log directory
    and of its partitions (quarantine folders and lock files left out)."""
    out = {n: v for n, v in _files(log_dir).items()}
    for n in sorted(os.listdir(log_dir)):
        p = os.path.join(log_dir, n)
        if os.path.isdir(p):
            out.update({"%s/%s" % (n, m): v for m, v in _files(p).items()})
    return out


def snapshot_entries(data, name=""):
    """A producer snapshot's entries, read here from its layout (version, CRC-32C, count,
    46-byte entries): {producer id: SnapshotEntry}."""
    version, _, count = struct.unpack_from(">hIi", data, 0)
    assert version == 1 and ig.snapshot_crc(data)[0] == ig.snapshot_crc(data)[1], name
    return {e[0]: ig.SnapshotEntry(*e) for e in
            (struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range(count))}


def stray_snapshots_explained(partition, got, want):
    """The producer snapshots in ``got`` but not in ``want`` that a broker keeps too: one
    written by `recover` at the log end offset of the moment, inside what later became a longer
    segment. ProducerStateManager.removeStraySnapshots keeps the newest snapshot that is not at
    a segment base when it lies beyond the last base, and the next load takes one at the new log
    end offset, so after the kill, recover and the rerun, one such snapshot can stay until the
    next load. It is accepted only inside the last segment, and only when it holds exactly the
    producers the broker's rules give at its offset (appendcheck.producers_at). Returns the
    names accepted."""
    prefix = os.path.basename(partition) + "/"
    bases = sorted(int(n[len(prefix):len(prefix) + 20]) for n in got
                   if n.startswith(prefix) and n.endswith(".log"))
    extra = [n for n in got if n.startswith(prefix) and n.endswith(".snapshot")
             and n not in want]
    accepted = []
    batches = ac.log_batches(partition)
    for n in extra:
        offset = int(n[len(prefix):len(prefix) + 20])
        if len(extra) == 1 and bases and offset > bases[-1]:
            expected = ac.producers_at(batches, offset)
            if snapshot_entries(got[n], n) == expected:
                accepted.append(n)
    return accepted


def describe_difference(got, want):
    """One line per file that differs (missing, extra, or its first differing byte)."""
    lines = []
    for n in sorted(set(got) | set(want)):
        a, b = got.get(n), want.get(n)
        if a == b:
            continue
        if a is None:
            lines.append("%s: missing (%d bytes expected)" % (n, len(b)))
        elif b is None:
            lines.append("%s: not expected (%d bytes)" % (n, len(a)))
        else:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            lines.append("%s: %d bytes, expected %d; first difference at byte %d%s" % (
                n, len(a), len(b), at,
                (": %r vs %r" % (a, b)) if len(a) < 200 and len(b) < 200 else ""))
    return lines


# -- runs ------------------------------------------------------------------------------------------

# `python -c KILL_AT_STEP N ARGS...`: `kafkalog recover ARGS` SIGKILLed just before its N-th
# file-system step (a change to the directory or an fsync; counted from 1).
KILL_AT_STEP = r"""
import os, runpy, signal, sys
limit = int(sys.argv[1])
count = 0


def wrap(fname):
    orig = getattr(os, fname)

    def step(*args, **kwargs):
        global count
        count += 1
        if count == limit:
            os.kill(os.getpid(), signal.SIGKILL)
        return orig(*args, **kwargs)
    setattr(os, fname, step)


# every call that changes the directory, and every fsync (a kill before an fsync is a kill
# right after the writes or the truncation it makes durable; for SIGKILL the page cache
# survives, so that is the state to recover from)
for fname in ("replace", "rename", "renames", "fsync", "fdatasync", "unlink", "remove",
              "rmdir", "mkdir", "link", "symlink", "truncate", "ftruncate", "utime"):
    if hasattr(os, fname):
        wrap(fname)
# the rename that never replaces calls renameat2 through ctypes, not through os
import kafkalog_cli.log.indexbuild as _ib
if _ib._renameat2 is not None:
    _orig_renameat2 = _ib._renameat2

    def _renameat2(*args):
        global count
        count += 1
        if count == limit:
            os.kill(os.getpid(), signal.SIGKILL)
        return _orig_renameat2(*args)
    _ib._renameat2 = _renameat2
sys.argv = ["kafkalog", "recover"] + sys.argv[2:]
runpy.run_module("kafkalog_cli", run_name="__main__", alter_sys=True)
"""


def kafkalog_killed_at(step, args, stdin_path=None, timeout=120):
    """``kafkalog ARGS`` as a process SIGKILLed before its ``step``-th file operation (0:
    never). Returns (killed, stdout bytes, stderr text)."""
    with open(stdin_path or os.devnull, "rb") as f:
        p = subprocess.run([sys.executable, ac.KILLSHIM, str(step), *[str(a) for a in args]],
                           cwd=REPO, stdin=f, capture_output=True, timeout=timeout)
    err = p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    if p.returncode == -signal.SIGKILL:
        return True, p.stdout, err
    return False, p.stdout, err


def count_steps(args, stdin_path=None):
    """The number of file operations of an uninterrupted run (which must exit 0 or 1)."""
    killed, out, err = kafkalog_killed_at(0, args, stdin_path)
    assert not killed
    line = [x for x in err.splitlines() if x.startswith("killshim: ")]
    assert line, err
    return int(line[-1].split()[1])


def kafkalog_killed_after(delay, args, stdin_path=None):
    """``python -m kafkalog_cli ARGS`` SIGKILLed ``delay`` seconds after it started, if it is
    still running. Returns (killed, stdout bytes)."""
    with open(stdin_path or os.devnull, "rb") as f:
        p = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", *[str(a) for a in args]],
                             cwd=REPO, stdin=f, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        try:
            out, _ = p.communicate(timeout=delay)
            return False, out
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            out, _ = p.communicate(timeout=60)
            return True, out


def kafkalog_killed_after_step(step, delay, args, stdin_path=None):
    """``kafkalog ARGS`` SIGKILLed ``delay`` seconds after its ``step``-th file operation
    returned (told through a pipe), if it is still running then. Returns (killed, stdout)."""
    r, w = os.pipe()
    env = dict(os.environ, KILLSHIM_NOTIFY_FD=str(w))
    with open(stdin_path or os.devnull, "rb") as f:
        p = subprocess.Popen([sys.executable, ac.KILLSHIM, "after:%d" % step,
                              *[str(a) for a in args]], cwd=REPO, stdin=f, env=env,
                             pass_fds=(w,), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    os.close(w)
    try:
        told = os.read(r, 1)   # b"" when it ended first
    finally:
        os.close(r)
    if told:
        time.sleep(delay)
    killed = p.poll() is None
    if killed:
        p.send_signal(signal.SIGKILL)
    out, _ = p.communicate(timeout=120)
    killed = killed and p.returncode == -signal.SIGKILL
    return killed, out


def quarantine_runs(partition):
    q = os.path.join(partition, QUARANTINE)
    return sorted(os.listdir(q)) if os.path.isdir(q) else []


def quarantine_problems(partition, runs_before, before):
    """What is wrong with the quarantine after a recover that followed a kill: a file in a run
    folder that its manifest does not list, or a run of that recover that `quarantine restore`
    (newest first, on a copy) does not turn back into ``before`` (the partition's files as the
    kill left them)."""
    problems = []
    for run in quarantine_runs(partition):
        folder = os.path.join(partition, QUARANTINE, run)
        manifest = os.path.join(folder, "manifest.json")
        listed = set()
        if os.path.exists(manifest):  # a run killed before its first entry has none
            with open(manifest) as f:
                listed = {e["saved_as"] for e in json.load(f)["entries"] if e.get("saved_as")}
        for root, _, names in os.walk(folder):
            for n in names:
                rel = os.path.relpath(os.path.join(root, n), folder)
                if rel not in listed and rel != "manifest.json" \
                        and not rel.endswith(".kafkalog-tmp") and rel != "restored.json":
                    problems.append("quarantine %s/%s listed by no manifest" % (run, rel))
    new = [r for r in quarantine_runs(partition) if r not in runs_before]
    if not new:
        return problems
    log_dir = os.path.dirname(partition)
    copy = log_dir + "-restored"
    shutil.copytree(log_dir, copy, symlinks=True)
    try:
        part = os.path.join(copy, os.path.basename(partition))
        for run in reversed(new):
            res = ac.kafkalog_in("quarantine", "restore", part, run)
            if res.code != 0:
                problems.append("quarantine restore %s: exit %d: %s" % (run, res.code, res.err))
                return problems
        # what the killed command left at one of kafkalog's temporary names is not data (a
        # copy of what it was writing, the real file intact): recover removes it (README)
        after = _files(part)
        before = {n: v for n, v in before.items() if not n.endswith(".kafkalog-tmp")}
        if after != before:
            problems.append("quarantine restore of %s did not give back the partition as the "
                            "kill left it: %s" % (", ".join(new), ", ".join(sorted(
                                n for n in set(after) | set(before)
                                if after.get(n) != before.get(n)))))
    finally:
        shutil.rmtree(copy)
    return problems


def recover(partition):
    res = ac.kafkalog_in("recover", partition)
    assert res.code in (0, 1), res
    return res


QUARANTINE = "kafkalog-quarantine"


class Campaign:
    """One command's crash campaign over copies of a seed log directory.

    ``args(partition)``: the command's arguments; ``stdin``: a file for its standard input;
    ``resume(partition, stdout)``: what the operator runs after the kill and `recover` to finish
    the job (stdout: what the killed run printed); ``finished_by_recover(files)``: whether,
    given the partition's files as the kill left them, `recover` alone must finish the job (no
    resume then: the state after that one `recover` must equal the uninterrupted run's, and a
    second `recover` must change nothing)."""

    def __init__(self, tmp_path, seed_log_dir, args, resume, stdin=None, check_killed=None,
                 finished_by_recover=None):
        self.tmp = str(tmp_path)
        self.seed = seed_log_dir
        self.args = args
        self.resume = resume
        self.stdin = stdin
        self.check_killed = check_killed
        self.finished_by_recover = finished_by_recover
        self.clean_shutdown = os.path.exists(os.path.join(seed_log_dir, MARKER))
        ref_dir = self.copy("reference")
        killed, out, err = kafkalog_killed_at(0, self.args(self.partition(ref_dir)), self.stdin)
        assert not killed
        self.stats = {"steps": 0, "random_kills": 0, "random_finished": 0, "changed_by_kill": 0}
        recover(self.partition(ref_dir))
        self.want = log_dir_state(ref_dir)
        self.seed_state = log_dir_state(self.seed)
        assert self.want != self.seed_state, "the command changed nothing"
        self.failures = []

    @staticmethod
    def partition(log_dir):
        return os.path.join(log_dir, PARTITION)

    def copy(self, label, i=0):
        dst = os.path.join(self.tmp, "%s-%04d" % (label, i), "logs")
        shutil.copytree(self.seed, dst)
        return dst

    def settle(self, log_dir, label, out):
        """After a kill: recover, resume, recover; record a failure when the state differs."""
        part = self.partition(log_dir)
        if log_dir_state(log_dir) != self.seed_state:
            self.stats["changed_by_kill"] += 1
        killed_state = _files(part)
        runs_before = set(quarantine_runs(part))
        recover(part)
        self.failures += ["%s: %s" % (label, p) for p in
                          quarantine_problems(part, runs_before, killed_state)]
        if self.check_killed is not None:
            self.check_killed(part, out)
        if self.finished_by_recover is not None and self.finished_by_recover(killed_state):
            self.stats["finished_by_recover"] = self.stats.get("finished_by_recover", 0) + 1
            first = log_dir_state(log_dir)
            recover(part)
            if log_dir_state(log_dir) != first:
                self.failures.append("%s: a second recover changed %s" % (label, "; ".join(
                    describe_difference(log_dir_state(log_dir), first))))
        else:
            self.resume(part, out)
            recover(part)
        got = log_dir_state(log_dir)
        if MARKER in self.want and MARKER not in got:
            # a kill is an unclean shutdown: the marker, lifted before the first change, stays
            # away (the broker then recovers from the recovery point, as recover just did)
            self.stats["marker_gone"] = self.stats.get("marker_gone", 0) + 1
            got[MARKER] = self.want[MARKER]
        for n in stray_snapshots_explained(part, got, self.want):
            self.stats["stray_snapshot_kept"] = self.stats.get("stray_snapshot_kept", 0) + 1
            del got[n]
        if got != self.want and self.clean_shutdown:
            self.accept_recovered_indexes(got)
        if got != self.want:
            self.failures.append("%s: %s" % (label, "; ".join(describe_difference(got, self.want))))
        else:
            shutil.rmtree(os.path.dirname(log_dir))

    def accept_recovered_indexes(self, got):
        """With the clean-shutdown marker, the uninterrupted run's load trusts the segments
        (LogLoader recovers none), while the killed run's recover rebuilt every one from the
        recovery point: where the two differ only in such a segment's .index or .timeindex,
        the killed run's must be exactly what LogSegment.recover builds from that same .log
        (indexgen's independent builder), and it is then taken as equal."""
        for n in sorted(set(got) | set(self.want)):
            if got.get(n) == self.want.get(n) or not n.endswith((".index", ".timeindex")):
                continue
            log = n.rsplit(".", 1)[0] + ".log"
            if n not in got or n not in self.want or got.get(log) != self.want.get(log):
                return
            base = int(os.path.basename(n)[:20])
            idx = ig.build_indexes(got[log])
            rebuilt = (ig.encode_offset_index(idx.offset_entries, base) if n.endswith(".index")
                       else ig.encode_time_index(idx.time_entries, base))
            if got[n] != rebuilt:
                return
            got[n] = self.want[n]
            self.stats["index_rebuilt_by_recover"] = self.stats.get(
                "index_rebuilt_by_recover", 0) + 1

    def every_step(self):
        """Killed before each file operation in turn (the killed runs two at a time, while
        the previous ones are settled)."""
        probe = self.copy("count")
        steps = count_steps(self.args(self.partition(probe)), self.stdin)
        shutil.rmtree(os.path.dirname(probe))
        assert steps >= 5, "only %d file operations: the shim does not see the run" % steps
        self.stats["steps"] = steps

        def killed_run(k):
            d = self.copy("step", k)
            return d, kafkalog_killed_at(k, self.args(self.partition(d)), self.stdin)

        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = [pool.submit(killed_run, k) for k in range(1, steps + 2)]
            for k, run in enumerate(runs, 1):
                d, (killed, out, err) = run.result()
                if k == steps + 1:   # one step too far: the run ends on its own
                    assert not killed, "more file operations than counted: %d" % steps
                    continue
                assert killed, "step %d of %d: the run ended first (%s)" % (k, steps, err)
                self.settle(d, "killed before step %d of %d" % (k, steps), out)

    def random_kills(self, kills=50, seed=20261126):
        """``kills`` SIGKILLs at random moments of the part of the run that changes files: after
        a file operation drawn at random (uniformly over the run's operations), a random delay
        of up to a few ms more, whatever the process is doing then (reading, encoding, between
        two writes). A kill that comes after the run has ended does not count."""
        probe = self.copy("count")
        steps = count_steps(self.args(self.partition(probe)), self.stdin)
        shutil.rmtree(os.path.dirname(probe))
        rng = random.Random(seed)

        def killed_run(i, step, delay):
            d = self.copy("random", i)
            return d, kafkalog_killed_after_step(step, delay, self.args(self.partition(d)),
                                                 self.stdin)

        i = 0
        with ThreadPoolExecutor(max_workers=2) as pool:
            while self.stats["random_kills"] < kills:
                # a bound on attempts, not on time (a loaded machine is slower, not wrong):
                # a kill lands unless the run ended within a few ms of its drawn step
                assert i < 10 * kills, (
                    "%d kills in %d attempts: %r" % (self.stats["random_kills"], i, self.stats))
                batch = []
                for _ in range(kills - self.stats["random_kills"]):
                    step, delay = rng.randint(1, steps), rng.uniform(0, 0.004)
                    batch.append((step, delay, pool.submit(killed_run, i, step, delay)))
                    i += 1
                for step, delay, run in batch:
                    d, (killed, out) = run.result()
                    if not killed:
                        self.stats["random_finished"] += 1
                        shutil.rmtree(os.path.dirname(d))
                        continue
                    self.stats["random_kills"] += 1
                    self.settle(d, "killed %.1f ms after step %d of %d" % (delay * 1000, step,
                                                                           steps), out)
        self.stats["steps"] = steps


def json_objects(out):
    """The complete JSON lines of a killed run's stdout."""
    objs = []
    for line in out.split(b"\n")[:-1]:
        try:
            objs.append(json.loads(line))
        except ValueError:
            pass
    return objs
