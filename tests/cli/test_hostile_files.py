"""Hostile directory contents: names that are not Kafka's, files that are not regular files,
names that are not UTF-8, unreadable partition directories, and index files large enough to
expose work that grows faster than the input.

Every command runs as a real process (``python -m kafkalog_cli``), with a timeout and, where a
reader could read without end, an address-space limit (RLIMIT_AS), so that a hang or an
unbounded read fails the test instead of the machine.
"""

import json
import os
import resource
import struct
import subprocess
import sys

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import REPO

# Devices, FIFOs, hostile names and encodings, huge files, one subprocess per case: left out of
# the quick suite (pytest -m "not slow").
pytestmark = pytest.mark.slow

T0 = kg.T0
# Enough for the interpreter and its imports, far from what reading /dev/zero would take.
ADDRESS_SPACE = 1_500_000_000


class Run:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    @property
    def out_text(self):
        return self.out.decode("utf-8")

    @property
    def err_lines(self):
        return self.err.decode("utf-8", "replace").splitlines()

    @property
    def out_lines(self):
        return self.out_text.splitlines()

    def __repr__(self):
        return "Run(code=%r, out=%r, err=%r)" % (self.code, self.out[-3000:], self.err[-3000:])


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run(*args, timeout=60, env=None, cwd=None, preexec=_limit_memory):
    """``python -m kafkalog_cli ARGS`` with a timeout and a memory limit; never a traceback."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *[os.fsencode(a) for a in args]],
                       cwd=cwd or REPO, capture_output=True, timeout=timeout, env=full_env,
                       preexec_fn=preexec)
    res = Run(p.returncode, p.stdout, p.stderr)
    assert b"Traceback" not in p.stderr and b"Traceback" not in p.stdout, res
    assert res.code in (0, 1, 2), res
    return res


def partition(directory, n_segments=2, n_batches=12):
    """A partition of ``n_segments`` segments with the broker's indexes, a producer snapshot,
    leader-epoch-checkpoint and partition.metadata. Returns indexgen's SegmentFiles."""
    segments = []
    base = 0
    for i in range(n_segments):
        data, nxt = ig.busy_segment(base, n_batches=n_batches, t0=T0 + 100000 * i, seed=i)
        segments.append((base, data))
        base = nxt
    out = ig.write_partition(directory, segments)
    ig.write_snapshots(directory, [base])
    ig.write_file(os.path.join(str(directory), "leader-epoch-checkpoint"),
                  ig.leader_epoch_checkpoint([(1, 0)]))
    ig.write_file(os.path.join(str(directory), "partition.metadata"),
                  ig.partition_metadata(ig.topic_id(1)))
    return out


def batch_lines(res):
    return [line for line in res.out_lines if line.startswith("baseOffset: ")]


def expected_batch_count(segs):
    return sum(len(kg.kafka_python_read(s.data, deep=False)) for s in segs)


def json_lines(res):
    return [json.loads(line) for line in res.out_lines]


def escaped(name):
    """How a file name must be printed: bytes that are not UTF-8 as \\xNN, control characters
    escaped (written here independently of kafkalog_cli.log.files.printable_name)."""
    raw = os.fsencode(name)
    out = []
    text = raw.decode("utf-8", "surrogateescape")
    for ch in text:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append("\\x%02x" % (o - 0xDC00))
        elif o < 0x20 or o == 0x7F or 0x80 <= o < 0xA0:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return "".join(out)


# -- 1, 2: names that are not Kafka's, beside real segments ---------------------------------------

# A Kafka suffix without Kafka's name: never a segment, index or snapshot of the partition.
NOT_KAFKA_NAMES = [
    "abc.log",
    b"\xff.index",
    "\u0660\u0661\u0662.log",            # Arabic-Indic digits: str.isdigit() says yes
    "-00000000000000000001.log",
    "-000..1.log",
    "00000000000000000000.log.log",
    "00000000000000000000.index.index",
    "00000000000000000000.log.swap.log",
    "00000000000000000000.snapshot.timeindex",
    "x00000000000000000000.timeindex",
    "\uff10\uff10.txnindex",             # fullwidth digits
    "00000000000000000000.deleted",
    "00000000000000000007.log\n.log",
]


def _write(directory, name, data):
    path = os.path.join(os.fsencode(str(directory)), os.fsencode(name))
    with open(path, "wb") as f:
        f.write(data)
    return os.fsdecode(path)


@pytest.mark.parametrize("name", NOT_KAFKA_NAMES, ids=repr)
def test_dump_names_an_unknown_name_and_dumps_the_rest(tmp_path, name):
    part = tmp_path / "t-0"
    segs = partition(part)
    # the bytes of a real segment, so that reading it as one would show
    path = _write(part, name, segs[0].data)
    res = run("dump", part)
    assert res.code == 0, res
    assert "Ignoring unknown file %s" % escaped(path) in res.err_lines, res
    assert len(batch_lines(res)) == expected_batch_count(segs), res
    dumped = [line[len("Dumping "):] for line in res.out_lines if line.startswith("Dumping ")]
    assert escaped(path) not in dumped
    assert len(dumped) == len(set(dumped))


@pytest.mark.parametrize("name", [n for n in NOT_KAFKA_NAMES if n != "00000000000000000000.deleted"],
                         ids=repr)  # (verify-index names the unknown files with a suffix it checks)
def test_verify_index_names_an_unknown_name_and_checks_the_rest(tmp_path, name):
    part = tmp_path / "t-0"
    segs = partition(part)
    path = _write(part, name, segs[0].data if os.fsencode(name).endswith(b"log") else bytes(24))
    res = run("verify-index", part)
    assert res.code == 0, res
    # a note: on stdout, stderr left empty for cron
    assert "Ignoring unknown file %s" % escaped(path) in res.out_text.splitlines(), res
    assert res.err == b"", res
    res = run("verify-index", "--format", "json", part)
    assert res.code == 0, res
    files = [o["file"] for o in json_lines(res) if o["type"] == "file"]
    # the segments' indexes, then the partition's leader-epoch-checkpoint (checked against them)
    expected = [p for s in segs for k, p in s.paths.items() if k != "log"]
    expected.append(str(part / "leader-epoch-checkpoint"))
    assert sorted(files) == sorted(expected), res


def test_log_log_is_not_segment_zero(tmp_path):
    """``00000000000000000000.log.log`` beside segment 0's indexes and no ``.log``: the indexes
    have no log (each reported once), and the ``.log.log`` is an unknown file."""
    part = tmp_path / "orders-1"
    segs = partition(part, n_segments=1)
    log = segs[0].paths["log"]
    os.rename(log, log + ".log")
    res = run("verify-index", "--format", "json", part)
    problems = [o for o in json_lines(res) if o["type"] == "problem"]
    assert res.code == 1, res
    assert sorted((p["file"], p["kind"]) for p in problems) == sorted(
        (p, "missing_log") for k, p in segs[0].paths.items() if k != "log"), res
    res = run("dump", part)
    assert "Ignoring unknown file %s" % (log + ".log") in res.err_lines, res
    assert batch_lines(res) == [], res


def test_named_explicitly_a_file_is_read_by_its_suffix(tmp_path):
    """A file named on the command line is read as its suffix says, whatever its name
    (``--base-offset`` exists for segments whose name is not their offset)."""
    data, _ = ig.busy_segment(0, n_batches=5)
    path = _write(tmp_path, "00000000000000000000.log.log", data)
    res = run("dump", path)
    assert res.code == 0, res
    assert len(batch_lines(res)) == len(kg.kafka_python_read(data, deep=False))
    other = _write(tmp_path, "copy-of-segment.log", data)
    res = run("dump", "--base-offset", "0", other)
    assert res.code == 0, res
    assert len(batch_lines(res)) == len(kg.kafka_python_read(data, deep=False))


def test_kafka_names_with_lifecycle_suffixes_are_still_read(tmp_path):
    """The strict naming keeps every name Kafka gives, lifecycle suffixes included."""
    part = tmp_path / "t-0"
    segs = partition(part)
    for kind in ("log", "index", "timeindex"):
        os.rename(segs[0].paths[kind], segs[0].paths[kind] + ".deleted")
    res = run("dump", part)
    assert res.code == 0, res
    assert not any(line.startswith("Ignoring") for line in res.err_lines), res
    assert len(batch_lines(res)) == expected_batch_count(segs)


# -- 3: only regular files are read ------------------------------------------------------------------

# Every kind a reader opens, by the name it has in a partition (or log) directory.
AUX_NAMES = {"index": "00000000000000000000.index", "timeindex": "00000000000000000000.timeindex",
             "txnindex": "00000000000000000000.txnindex",
             "snapshot": "00000000000000000072.snapshot",  # the log end of partition()
             "partition.metadata": "partition.metadata",
             "leader-epoch-checkpoint": "leader-epoch-checkpoint"}
OFFSET_CHECKPOINTS = ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                      "replication-offset-checkpoint", "cleaner-offset-checkpoint"]


def log_dir_with(tmp_path, replace=(), fifo=()):
    """A log directory: partition t-0 (two segments, a txnindex, snapshot, checkpoints), the
    offset checkpoints; each name in ``replace`` (name -> target) made a symlink to ``target``
    instead, each name in ``fifo`` a FIFO. Returns (log dir, t-0 dir, segments)."""
    logdir = tmp_path / "logdir"
    part = logdir / "t-0"
    segs = partition(part)
    for name in OFFSET_CHECKPOINTS:
        ig.write_file(logdir / name, ig.offset_checkpoint([("t", 0, 10)]))
    if not any(os.path.exists(p) for p in [segs[0].paths.get("txnindex", "")]):
        ig.write_file(part / AUX_NAMES["txnindex"], ig.encode_txn_index([]))
    assert os.path.exists(part / AUX_NAMES["snapshot"]), os.listdir(part)
    for name, target in dict(replace).items():
        where = logdir if name in OFFSET_CHECKPOINTS else part
        if os.path.lexists(where / name):
            os.remove(where / name)
        os.symlink(target, where / name)
    for name in fifo:
        if os.path.lexists(part / name):
            os.remove(part / name)
        os.mkfifo(part / name)
    return logdir, part, segs


DEVICE_CASES = [(name, dev) for name in sorted(AUX_NAMES.values()) + OFFSET_CHECKPOINTS
                for dev in ("/dev/zero", "/dev/urandom")]


@pytest.mark.parametrize("name,device", DEVICE_CASES)
def test_a_device_as_any_file_kind_is_one_line_and_exit_2(tmp_path, name, device):
    """/dev/zero symlinked as an index, a snapshot, a checkpoint: refused at once (it has no
    end: read whole, it exhausts memory), named on one line; every other file still read."""
    logdir, part, segs = log_dir_with(tmp_path, replace={name: device})
    where = logdir if name in OFFSET_CHECKPOINTS else part
    path = str(where / name)
    for target in (logdir, where, path):
        res = run("dump", target, timeout=60)
        assert res.code == 2, (target, res)
        mine = [line for line in res.err_lines if path in line]
        assert mine == ["kafkalog: %s: not a regular file (a character device)" % path], res
        if target != path:
            assert len(batch_lines(res)) == expected_batch_count(segs), res
        else:
            assert res.out == b"", res


@pytest.mark.parametrize("name", ["00000000000000000000.index", "00000000000000000000.timeindex",
                                  "00000000000000000000.txnindex"])
def test_verify_index_refuses_a_device_index(tmp_path, name):
    logdir, part, segs = log_dir_with(tmp_path, replace={name: "/dev/zero"})
    path = str(part / name)
    for target in (logdir, part, path):
        res = run("verify-index", "--format", "json", target)
        assert res.code == 2, res
        assert ["kafkalog: %s: not a regular file (a character device)" % path] == [
            line for line in res.err_lines if path in line], res
        if target != path:
            checked = {o["file"] for o in json_lines(res) if o["type"] == "file"}
            # the other indexes are still checked
            assert str(part / "00000000000000000000.log")[:-4] + ".index" in checked or \
                name.endswith(".index"), res
            assert segs[1].paths["index"] in checked, res


@pytest.mark.parametrize("name", ["00000000000000000000.log", "00000000000000000000.index",
                                  "00000000000000000099.log"])
def test_a_fifo_is_refused_without_blocking(tmp_path, name):
    """A FIFO with no writer: opening it for reading would block for ever."""
    logdir, part, segs = log_dir_with(tmp_path, fifo=[name])
    path = str(part / name)
    line = "kafkalog: %s: not a regular file (a FIFO)" % path
    for args in (["dump", path], ["dump", "--max-bytes", "100", path], ["dump", part],
                 ["dump", "--deep-iteration", "--format", "json", logdir]):
        res = run(*args, timeout=60)
        assert res.code == 2, (args, res)
        # one line about the FIFO itself (an index of its segment says why it goes unchecked)
        assert [e for e in res.err_lines if e.startswith("kafkalog: %s:" % path)] == [line], \
            (args, res)
    if name.endswith(".log"):
        res = run("verify-index", path, timeout=60)
        assert res.code == 2, res
        assert res.err_lines == [line], res


def test_a_directory_named_as_a_segment_is_refused(tmp_path):
    logdir, part, segs = log_dir_with(tmp_path)
    os.mkdir(part / "00000000000000000099.log")
    path = str(part / "00000000000000000099.log")
    res = run("dump", part)
    assert res.code == 2, res
    assert [e for e in res.err_lines if path in e] == [
        "kafkalog: %s: not a regular file (a directory)" % path], res
    assert len(batch_lines(res)) == expected_batch_count(segs), res


def test_checkpoints_are_read_to_their_size_only(tmp_path):
    """A checkpoint is small: one far larger than any real one is refused before it is read."""
    logdir, part, segs = log_dir_with(tmp_path)
    big = logdir / "replication-offset-checkpoint"
    with open(big, "wb") as f:
        f.truncate(3 * 1024 ** 3)  # sparse: costs no disk
    res = run("dump", big, timeout=60)
    assert res.code == 1, res
    assert len(res.err_lines) == 1 and str(big) in res.err_lines[0], res


# -- 4: names that are not UTF-8, or hold control characters -------------------------------------

ENCODINGS = [{"PYTHONIOENCODING": "utf-8"}, {"LC_ALL": "C"}, {"PYTHONIOENCODING": "ascii"},
             {"LC_ALL": "C", "PYTHONIOENCODING": "ascii"}]
HOSTILE_DIR = b"m\xff\x1b[31m\n-0"  # not UTF-8, an escape sequence, a newline


def hostile_partition(tmp_path):
    """A partition in a directory whose name is not UTF-8 and holds control characters, with a
    corrupt offset index (so that problems naming it are printed) and a corrupt snapshot."""
    part = os.path.join(os.fsencode(str(tmp_path)), HOSTILE_DIR)
    segs = partition(os.fsdecode(part))
    index = segs[0].paths["index"]
    entries = ig.decode_offset_index(open(index, "rb").read(), 0)
    bad = ig.replace_entry(entries, 0, (entries[0][0] + 1, entries[0][1]))
    ig.write_file(index, ig.encode_offset_index(bad, 0))
    snapshot = os.path.join(os.fsdecode(part), "%020d.snapshot" % 72)
    ig.write_file(snapshot, ig.bad_snapshot_crc(open(snapshot, "rb").read()))
    return os.fsdecode(part), segs


@pytest.mark.parametrize("env", ENCODINGS, ids=lambda e: ",".join("%s=%s" % kv for kv in e.items()))
def test_hostile_names_are_printed_escaped(tmp_path, env):
    part, segs = hostile_partition(tmp_path)
    shown = escaped(part)
    assert "\n" not in shown and "\x1b" not in shown
    cases = [["dump", part], ["dump", "--deep-iteration", "--format", "messages", part],
             ["dump", "--format", "json", part], ["dump", segs[0].paths["index"]],
             ["dump", "--format", "json", segs[0].paths["index"]],
             ["dump", os.path.join(part, "missing.log")], ["dump", "--from-offset", "3", part],
             ["verify-index", part], ["verify-index", "--format", "json", part],
             ["verify-index", segs[0].paths["index"]]]
    for args in cases:
        res = run(*args, env=env)
        assert res.code == (0 if "--from-offset" in args else 2 if "missing.log" in args[-1]
                            else 1), (args, res)
        # never the raw bytes of the name; each line whole
        assert HOSTILE_DIR not in res.out + res.err, (args, res)
        assert b"\x1b" not in res.out + res.err, (args, res)
        text = res.out.decode("utf-8") + res.err.decode("utf-8", "replace")
        if "--format" in args and "json" in args:
            objs = json_lines(res)
            named = [o["file"] for o in objs if "file" in o]
            assert named and all(n.startswith(os.path.join(shown, "")) for n in named), (args, res)
        else:
            assert shown in text, (args, res)
        for line in res.err_lines:
            assert line.startswith(("kafkalog: ", "Mismatches in :", "  Index offset",
                                    "Dumping ")) or shown in line, (args, line)


@pytest.mark.parametrize("env", ENCODINGS[:2], ids=lambda e: ",".join("%s=%s" % kv for kv in e.items()))
def test_hostile_unknown_file_name_is_printed_escaped(tmp_path, env):
    part = tmp_path / "t-0"
    segs = partition(part)
    path = _write(part, b"\xfe\xff\r\x07.log", segs[0].data)
    for args in (["dump", part], ["verify-index", part], ["dump", path]):
        res = run(*args, env=env)
        assert b"\xfe\xff" not in res.err and b"\r" not in res.err, (args, res)
        # verify-index's notes are on stdout (a healthy run leaves stderr empty)
        lines = res.out_lines if args[0] == "verify-index" else res.err_lines
        assert any(escaped(path) in line for line in lines), (args, res)


# -- 6: a partition directory that cannot be read --------------------------------------------------

def _unreadable_log_dir(base):
    """A log directory of three partitions, the middle one unreadable (mode 000)."""
    logdir = os.path.join(base, "logdir")
    segs = {}
    for name in ("a-0", "b-0", "c-0"):
        segs[name] = partition(os.path.join(logdir, name), n_segments=1)
    for root, dirs, names in os.walk(base):
        os.chmod(root, 0o755)
        for n in names:
            os.chmod(os.path.join(root, n), 0o644)
    os.chmod(os.path.join(logdir, "b-0"), 0)
    return logdir, segs


def _drop_dac_override():
    """Run in the child before exec: drop the capabilities that let root read whatever the mode
    says (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from the bounding set, so that the command,
    still uid 0, meets a mode-000 directory as anyone would."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
    _limit_memory()


def unprivileged(*args, **kw):
    """``run`` where a file mode denies reading: as is when not root, else with root's
    override dropped; skipped with a reason when neither can be had."""
    if os.geteuid() != 0:
        return run(*args, **kw)
    try:
        return run(*args, preexec=_drop_dac_override, **kw)
    except subprocess.SubprocessError as e:
        pytest.skip("running as root and cannot drop CAP_DAC_OVERRIDE (%s): modes do not "
                    "stop root" % e)


@pytest.mark.parametrize("command", [["dump"], ["verify-index"], ["recover", "--dry-run"]])
def test_an_unreadable_partition_is_named_and_the_others_processed(tmp_path, command):
    logdir, segs = _unreadable_log_dir(str(tmp_path))
    res = unprivileged(*command, logdir)
    assert res.code == 2, res
    bad = os.path.join(logdir, "b-0")
    assert "kafkalog: %s: Permission denied" % bad in res.err_lines, res
    # the partition is named, not the log directory
    assert not any(line.startswith("kafkalog: %s: " % logdir) for line in res.err_lines), res
    if command == ["dump"]:
        assert len(batch_lines(res)) == sum(expected_batch_count(s) for n, s in segs.items()
                                            if n != "b-0"), res
    elif command == ["verify-index"]:
        res = unprivileged("verify-index", "--format", "json", logdir)
        checked = {o["file"] for o in json_lines(res) if o["type"] == "file"}
        assert checked == {p for n in ("a-0", "c-0") for s in segs[n]
                           for k, p in s.paths.items() if k != "log"} | {
            os.path.join(logdir, n, "leader-epoch-checkpoint") for n in ("a-0", "c-0")}, res
    else:
        for name in ("a-0", "c-0"):
            assert os.path.join(logdir, name) in res.out_text + "\n".join(res.err_lines), res


@pytest.mark.parametrize("command", [["dump"], ["verify-index"], ["recover", "--dry-run"]])
@pytest.mark.parametrize("entry", ["loop", "dangling"])
def test_a_partition_entry_that_cannot_be_followed(tmp_path, command, entry):
    """Root too: a partition entry that is a symlink loop or a dangling symlink is named, the
    other partitions are processed, exit 2."""
    logdir = tmp_path / "logdir"
    segs = {n: partition(logdir / n, n_segments=1) for n in ("a-0", "c-0")}
    bad = logdir / "b-0"
    os.symlink("b-0" if entry == "loop" else "nowhere-0", bad)
    res = run(*command, logdir)
    assert res.code == 2, res
    reason = "Too many levels of symbolic links" if entry == "loop" else "No such file or directory"
    assert "kafkalog: %s: %s" % (bad, reason) in res.err_lines, res
    if command == ["dump"]:
        assert len(batch_lines(res)) == sum(expected_batch_count(s) for s in segs.values()), res


@pytest.mark.parametrize("command", [["dump"], ["verify-index"], ["recover", "--dry-run"],
                                     ["retain", "--dry-run", "--retention-ms", "1"]])
def test_an_unreadable_file_named_explicitly_is_one_line(tmp_path, command):
    """Not click's four-line usage error: our one line naming the file, exit 2."""
    logdir, segs = _unreadable_log_dir(str(tmp_path))
    log = segs["a-0"][0].paths["log"]
    os.chmod(log, 0)
    res = unprivileged(*command, log)
    assert res.code == 2, res
    assert not any(line.startswith(("Usage:", "Error:")) for line in res.err_lines), res
    if command[0] in ("dump", "verify-index"):
        assert res.err_lines == ["kafkalog: %s: Permission denied" % log], res


# -- 5: a time index is checked in one pass over the log -------------------------------------------

def _per_batch_time_index(directory, n_batches):
    """A segment of ``n_batches`` batches, a CORRECT time index with an entry for every batch
    and an empty offset index: DumpLogSegments' check scans the log from its start for each
    entry (entries x batches)."""
    os.makedirs(directory)
    data, _ = ig.busy_segment(0, n_batches=n_batches, records_per_batch=2, value_size=20)
    entries = ig.build_indexes(data, interval=0).time_entries
    assert len(entries) == n_batches - 1
    prefix = os.path.join(str(directory), ig.segment_prefix(0))
    ig.write_file(prefix + ".log", data)
    ig.write_file(prefix + ".index", b"")
    ig.write_file(prefix + ".timeindex", ig.encode_time_index(entries, 0))
    return prefix, len(entries)


def test_a_large_time_index_is_checked_in_one_pass(tmp_path):
    """4000 batches, 3999 time index entries: rescanning the log per entry took 34-41 s; one
    pass takes well under one. The timeout (15 s) leaves room for a loaded machine and none
    for the quadratic scan."""
    prefix, n = _per_batch_time_index(tmp_path / "t-0", 4000)
    res = run("verify-index", "--format", "json", tmp_path / "t-0", timeout=15)
    assert res.code == 0, res
    files = {o["file"]: o for o in json_lines(res) if o["type"] == "file"}
    assert files[prefix + ".timeindex"]["entries"] == n and \
        files[prefix + ".timeindex"]["problems"] == 0, res
    res = run("dump", "--verify-index-only", prefix + ".timeindex", timeout=15)
    assert res.code == 0, res
    assert res.err == b"", res


def test_a_time_index_far_longer_than_its_log(tmp_path):
    """200,000 entries over a 64-batch log, every one past the log's end: each found missing,
    in time linear in the entries (a rescan of the log per entry took 11-30 s over 8 batches,
    and grows with the batches; one pass here takes a few seconds, most of it printing)."""
    part = tmp_path / "legacy-0"
    os.makedirs(part)
    data, end = ig.busy_segment(0, n_batches=64, records_per_batch=2, value_size=20)
    prefix = os.path.join(str(part), ig.segment_prefix(0))
    ig.write_file(prefix + ".log", data)
    ig.write_file(prefix + ".index", b"")
    entries = [(T0 + 10 * i, end + i) for i in range(200000)]
    ig.write_file(prefix + ".timeindex", ig.encode_time_index(entries, 0))
    res = run("verify-index", "--format", "json", part, timeout=60)  # the rescan: 90-240 s
    assert res.code == 1, res
    problems = [o for o in json_lines(res) if o["type"] == "problem"]
    assert [(p["kind"], p["indexOffset"], p["logOffset"]) for p in problems] == [
        ("offset_not_found", off, -1) for _, off in entries]


def _random_log(rnd):
    """v2 batches whose offsets may go backwards (the base offset is outside the CRC: such a
    log reads as valid) and whose timestamps go anywhere."""
    w = kg.SegmentWriter(0)
    for i in range(rnd.randrange(1, 40)):
        recs = [kg.Rec(b"k", b"v" * rnd.randrange(1, 50), T0 + rnd.randrange(-5000, 5000))
                for _ in range(rnd.randrange(1, 4))]
        gap = rnd.choice([0, 0, 0, 3, -2, -7]) if i else 0
        if w.next_offset + gap < 0:
            gap = 0
        w.add_v2(recs, gap=gap)
    return w.data()


@pytest.mark.parametrize("seed", range(40))
def test_time_index_findings_match_dump_log_segments(tmp_path, seed):
    """The one-pass check finds what DumpLogSegments' rescan per entry finds (indexgen's
    reading of its rules over kafka-python's batches), logs whose offsets go backwards
    included."""
    import random
    from dumpcheck import kafkalog
    rnd = random.Random(seed)
    data = _random_log(rnd)
    batches = ig.read_log(data)
    part = tmp_path / "t-0"
    os.makedirs(part)
    prefix = os.path.join(str(part), ig.segment_prefix(0))
    ig.write_file(prefix + ".log", data)
    # an offset index of increasing offsets, positions at batch starts
    starts = sorted(rnd.sample([b.position for b in batches], rnd.randrange(0, len(batches) + 1)))
    offsets = sorted(rnd.sample(range(1, 200), len(starts)))
    oentries = list(zip(offsets, starts))
    ig.write_file(prefix + ".index", ig.encode_offset_index(oentries, 0))
    candidates = [b.last_offset for b in batches] + [b.base_offset for b in batches] + [
        rnd.randrange(1, 200) for _ in range(5)]
    tentries = []
    for _ in range(rnd.randrange(1, 60)):
        b = rnd.choice(batches)
        ts = b.record_max_timestamp if rnd.random() < 0.6 else T0 + rnd.randrange(-6000, 6000)
        tentries.append((ts, rnd.choice(candidates)))
    tentries = [e for e in tentries if e[1] != 0]  # offset 0 ends the entries (the zero tail)
    if not tentries:
        tentries = [(T0, batches[-1].last_offset or 1)]
    ig.write_file(prefix + ".timeindex", ig.encode_time_index(tentries, 0))
    expected = ig.kafka_time_index_errors(tentries, oentries, batches, 0)
    res = kafkalog("verify-index", "--format", "json", prefix + ".timeindex")
    problems = [json.loads(line) for line in res.out.splitlines()]
    problems = [p for p in problems if p["type"] == "problem"]
    found = ig.TimeIndexErrors(
        [(p["indexTimestamp"], p["logTimestamp"]) for p in problems
         if p["kind"] == "timestamp_mismatch"],
        [(p["indexTimestamp"], p["previousTimestamp"]) for p in problems
         if p["kind"] == "timestamp_out_of_order"],
        [(p["indexOffset"], p["logOffset"]) for p in problems
         if p["kind"] == "offset_not_found"])
    assert found == expected, (tentries, oentries, [(b.position, b.last_offset) for b in batches])


def run_counting_reads(*args, timeout=120):
    """(``kafkalog ARGS`` result, bytes the process read through read calls: /proc's rchar,
    taken as it exits). Work counted, not timed."""
    if not os.path.exists("/proc/self/io"):
        pytest.skip("no /proc/self/io to count the bytes read")
    code = ("import atexit, sys\n"
            "def rchar():\n"
            "    for line in open('/proc/self/io'):\n"
            "        if line.startswith('rchar:'):\n"
            "            sys.stderr.write('\\nRCHAR %s\\n' % line.split()[1])\n"
            "atexit.register(rchar)\n"
            "sys.argv = ['kafkalog'] + sys.argv[1:]\n"
            "from kafkalog_cli.cli.main import main\n"
            "main()\n")
    p = subprocess.run([sys.executable, "-c", code, *[os.fsencode(a) for a in args]], cwd=REPO,
                       capture_output=True, timeout=timeout, preexec_fn=_limit_memory)
    err = p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    head, _, count = err.rpartition("\nRCHAR ")
    return Run(p.returncode, p.stdout, head.encode()), int(count)


def test_an_offset_index_in_random_order_is_checked_in_one_pass(tmp_path):
    """Entries in offset order whose positions jump about the log (offsets of a log need not
    grow with positions: the base offset is outside the CRC): the log is read once, not a
    window around every entry."""
    one, _ = ig.busy_segment(0, n_batches=1, records_per_batch=3, value_size=300)
    n = 8 * 1024 * 1024 // len(one)
    import random
    bases = [10 * i for i in range(n)]
    random.Random(1).shuffle(bases)
    part = tmp_path / "t-0"
    os.makedirs(part)
    prefix = os.path.join(str(part), ig.segment_prefix(0))
    with open(prefix + ".log", "wb") as f:
        for b in bases:
            f.write(struct.pack(">q", b) + one[8:])
    entries = sorted((b + 2, i * len(one)) for i, b in enumerate(bases))
    ig.write_file(prefix + ".index", ig.encode_offset_index(entries, 0))
    log_size = os.path.getsize(prefix + ".log")
    res, read = run_counting_reads("verify-index", "--format", "json", part)
    assert res.code == 0, res
    reports = [o for o in json_lines(res) if o["type"] == "file" and o["kind"] == "index"]
    assert [(o["kind"], o["entries"], o["problems"]) for o in reports] == [
        ("index", len(entries), 0)], res   # (and a note on the missing .timeindex)
    # the log once, the index, the interpreter's own files; a 64 KiB window per entry would be
    # n * 64 KiB (more than 500 MB)
    assert read < 2 * log_size + 64 * 1024 * 1024, (read, log_size)


@pytest.mark.parametrize("env", ENCODINGS, ids=lambda e: ",".join("%s=%s" % kv for kv in e.items()))
def test_no_command_raises_an_encoding_error(tmp_path, env):
    """Whatever a command prints about a path that is not UTF-8 (or not ASCII, in an ASCII
    locale) is written, escaped at worst: never a UnicodeEncodeError in the middle of a report."""
    logdir = os.path.join(os.fsencode(str(tmp_path)), b"l\xff\xe9g")
    partition(os.fsdecode(os.path.join(logdir, b"t\xfe-0")), n_segments=1)
    for args in (["retain", "--dry-run", "--retention-ms", "1", os.fsdecode(logdir)],
                 ["recover", "--dry-run", os.fsdecode(logdir)],
                 ["dump", os.fsdecode(logdir)], ["verify-index", os.fsdecode(logdir)]):
        res = run(*args, env=env)
        assert b"UnicodeEncodeError" not in res.err, (args, res)
        assert res.code in (0, 1), (args, res)


def _limit_memory_to_600mb():
    resource.setrlimit(resource.RLIMIT_AS, (600_000_000, 600_000_000))


@pytest.mark.parametrize("size", [3 * 1024 ** 3, 700 * 1024 ** 2])
def test_huge_auxiliary_files_are_one_line_each(tmp_path, size):
    """Sparse files (no disk used) as an index, a transaction index and a snapshot: larger
    than any Kafka reads (2 GiB), each is refused before it is read; smaller but more than the
    memory left (an RLIMIT_AS of 600 MB here), each is one line too. Never a MemoryError."""
    logdir, part, segs = log_dir_with(tmp_path)
    names = ["00000000000000000000.index", AUX_NAMES["snapshot"]]
    if size > 2 ** 31:
        # (a smaller one of zeros is valid: tens of millions of entries, each printed)
        names.append("00000000000000000000.txnindex")
    for name in names:
        with open(part / name, "wb") as f:
            f.truncate(size)
    for args in (["dump", part], ["verify-index", part]):
        res = run(*args, timeout=120, preexec=_limit_memory_to_600mb)
        assert b"MemoryError" not in res.err, (args, res)
        for name in names:
            mine = [line for line in res.err_lines
                    if line.startswith(("kafkalog: %s:" % (part / name), "%s:" % (part / name)))]
            assert len(mine) <= 1, (args, name, res)
            if args[0] == "verify-index" and name.endswith(".snapshot"):
                continue  # verify-index reads no snapshot
            if name.endswith(".index") and size < 2 ** 31:
                continue  # read in pieces, its real entries only: no memory to run out of
            assert len(mine) == 1, (args, name, res)
            assert ("more than the 2147483647" if size > 2 ** 31 else
                    "too large to read into the memory available") in mine[0], (args, res)


def test_findings_by_the_million_are_one_line_when_memory_runs_out(tmp_path):
    """An 80 MB transaction index of zeros: 2.4 million entries, each an aborted transaction
    without its ABORT marker. Holding every finding takes more than the memory left (600 MB of
    address space here): one line, exit 2, not a MemoryError traceback."""
    logdir, part, segs = log_dir_with(tmp_path)
    path = part / "00000000000000000000.txnindex"
    ig.write_file(path, bytes(34 * 2_400_000))
    res = run("verify-index", path, timeout=120, preexec=_limit_memory_to_600mb)
    assert b"MemoryError" not in res.err, res
    if res.code == 2:
        assert res.err_lines == ["kafkalog: %s: too many findings to hold in the memory "
                                 "available" % path], res
    else:
        assert res.code == 1 and len(res.err_lines) == 2_400_000, res


def test_a_partition_of_thousands_of_segments_is_listed_once(tmp_path):
    """3000 segments: the directory is listed once, not once per segment to find which one is
    active (that took verify-index 3 minutes), so the run stays short. Each index holds one
    zero slot: a zero tail, noted for every sealed segment and not for the active one."""
    part = tmp_path / "t-0"
    os.makedirs(part)
    n = 3000
    for i in range(n):
        prefix = os.path.join(str(part), ig.segment_prefix(10 * i))
        ig.write_file(prefix + ".log", b"")
        ig.write_file(prefix + ".index", bytes(8))
        ig.write_file(prefix + ".timeindex", bytes(12))
    res = run("verify-index", "--format", "json", part, timeout=60)
    assert res.code == 0, res
    notes = [o["file"] for o in json_lines(res) if o["type"] == "note"]
    last = os.path.join(str(part), ig.segment_prefix(10 * (n - 1)))
    assert len(notes) == 2 * (n - 1) and last + ".index" not in notes, res
    res = run("dump", "--format", "json", part, timeout=60)
    assert res.code == 0, res
    assert len([line for line in res.err_lines if "zero-filled slots" in line]) == 2 * (n - 1)
