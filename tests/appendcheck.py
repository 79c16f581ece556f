"""Helpers for the append / roll tests: run the CLI with stdin, read a partition directory with
kafka-python, decode index files, and compute the expected segment layout and index entries with
an independent simulation of the broker's append path (LogSegment.append, LogSegment.shouldRoll,
UnifiedLog.roll).

Expected values come from ``kafkagen`` (kafka-python's parse) and ``indexgen``; nothing here
imports ``kafkalog_cli`` except to run its click command in-process.
"""

import base64
import contextlib
import hashlib
import json
import os
import pathlib
import re
import struct
import subprocess
import sys
import time
from typing import List, NamedTuple, Optional

from click.testing import CliRunner

import indexgen as ig
from dumpcheck import REPO, Result
from kafkagen import kafka_python_read

INT32_MAX = 2**31 - 1
DEFAULT_SEGMENT_INDEX_BYTES = 10485760
DEFAULT_INTERVAL = 4096
SEGMENT_RE = re.compile(r"^(\d{20})\.log$")


# -- running -----------------------------------------------------------------------------------------

def _to_bytes(data):
    if data is None:
        return b""
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)


def kafkalog_in(*args, input=None):
    """``kafkalog ARGS`` in-process with ``input`` (bytes/str) on stdin; an uncaught exception
    fails the test (a crash is never an acceptable outcome)."""
    from kafkalog_cli.cli.main import cli
    r = CliRunner().invoke(cli, [str(a) for a in args], input=_to_bytes(input),
                           catch_exceptions=True)
    exc = r.exception
    if isinstance(exc, SystemExit):
        exc = None
    if exc is not None:
        raise AssertionError("kafkalog %s raised %r" % (args[0] if args else "", exc)) from exc
    res = Result(r.exit_code, r.stdout_bytes.decode("utf-8"), r.stderr_bytes.decode("utf-8"))
    assert "Traceback" not in res.err, res
    return res


def kafkalog_sub(*args, input=None, timeout=120, env=None):
    """``python -m kafkalog_cli ARGS`` as a real process."""
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *[str(a) for a in args]],
                       input=_to_bytes(input), cwd=REPO, capture_output=True, timeout=timeout,
                       env=env)
    res = Result(p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8"))
    assert "Traceback" not in res.err, res
    return res


def append(directory, *args, input=None, subprocess_run=False):
    fn = kafkalog_sub if subprocess_run else kafkalog_in
    return fn("append", str(directory), *args, input=input)


def roll(directory, *args):
    return kafkalog_in("roll", str(directory), *args)


def verify_index(directory):
    res = kafkalog_in("verify-index", str(directory))
    return res


def assert_verify_clean(directory):
    res = verify_index(directory)
    assert res.code == 0, res
    return res


def assert_clean_exit2(res, stdout_allowed=False):
    """Exit 2, one non-empty line on stderr, no traceback."""
    assert res.code == 2, res
    assert "Traceback" not in res.err, res
    assert len(res.err_lines) == 1, res.err
    assert res.err_lines[0].strip(), res.err
    if not stdout_allowed:
        assert res.out == "", res


def ok(res):
    assert res.code == 0, res
    return res


# -- input builders -----------------------------------------------------------------------------------

def lines_input(values):
    """``values`` (bytes or str, no newlines) as one line each."""
    return b"".join(_to_bytes(v) + b"\n" for v in values)


def jv(x):
    """A JSON value for bytes/str/None: str when valid UTF-8 (and not looking binary), else
    {"base64": ...}."""
    if x is None:
        return None
    if isinstance(x, str):
        return x
    try:
        return x.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(x).decode("ascii")}


def b64obj(x):
    return {"base64": base64.b64encode(x).decode("ascii")}


def jsonl_input(objs):
    return b"".join(json.dumps(o, ensure_ascii=False).encode("utf-8") + b"\n" for o in objs)


def now_ms():
    return int(time.time() * 1000)


# -- output ------------------------------------------------------------------------------------------

def json_lines(res):
    return [json.loads(line) for line in res.lines if line.strip()]


def appended_obj(res):
    objs = json_lines(res)
    assert objs, res
    last = objs[-1]
    assert last.get("type") == "summary", objs
    return last


def assert_text_range(res, first, last):
    """The final stdout line names the offset range written."""
    lines = [line for line in res.lines if line.strip()]
    assert lines, res
    nums = [int(n) for n in re.findall(r"\d+", lines[-1])]
    assert first in nums and last in nums, (lines[-1], first, last)


# -- the partition as kafka-python reads it -------------------------------------------------------------

class Seg(NamedTuple):
    base: int
    path: str
    data: bytes
    kbs: list        # kafkagen.KBatch
    batches: list    # indexgen.LogBatch

    @property
    def records(self):
        return [r for kb in self.kbs for r in kb.records]

    def prefix(self, kind):
        return os.path.join(os.path.dirname(self.path), "%020d.%s" % (self.base, kind))


def segment_paths(directory):
    out = []
    for n in os.listdir(directory):
        m = SEGMENT_RE.match(n)
        if m and os.path.isfile(os.path.join(directory, n)):
            out.append((int(m.group(1)), os.path.join(str(directory), n)))
    return sorted(out)


def read_partition(directory) -> List[Seg]:
    segs = []
    for base, path in segment_paths(directory):
        with open(path, "rb") as f:
            data = f.read()
        kbs = kafka_python_read(data, deep=True)
        segs.append(Seg(base, path, data, kbs, ig.read_log(data)))
    return segs


class PRec(NamedTuple):
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list
    timestamp: Optional[int]
    batch: object


def all_records(segs):
    return [PRec(r.offset, r.key, r.value, [tuple(h) for h in r.headers],
                r.timestamp, kb.batch)
            for s in segs for kb in s.kbs for r in kb.records]


def check_partition(directory, first_offset=0, verify=True, unnamed=(), gaps=False):
    """Structural checks of a whole partition through kafka-python: every segment is a whole
    number of valid batches, a non-empty segment's first offset is its name, offsets are
    consecutive over the partition starting at ``first_offset`` (None: anywhere; segments
    whose base is in ``unnamed`` may start later than their name; ``gaps``: offsets only
    increase), an empty
    segment can only be the last one and is named by the log end offset; verify-index passes.
    Returns (segments, records)."""
    segs = read_partition(directory)
    assert segs, "no segments in %s" % directory
    expected = first_offset
    for i, s in enumerate(segs):
        for kb in s.kbs:
            assert kb.crc_ok, "%s: bad CRC at position %d" % (s.path, kb.position)
        assert sum(kb.size for kb in s.kbs) == len(s.data), "%s: trailing bytes" % s.path
        if not s.kbs:
            assert i == len(segs) - 1, "%s: empty segment that is not the last one" % s.path
            if expected is not None:
                assert s.base == expected, (s.path, expected)
            continue
        first = s.batches[0].base_offset
        if s.base in unnamed:
            assert first >= s.base, s.path
        else:
            assert first == s.base, "%s starts at offset %d" % (s.path, first)
        for b in s.batches:
            offs = [o for o, _ in b.records]
            if gaps:
                assert offs == sorted(set(offs)) and (expected is None or not offs
                                                      or offs[0] >= expected), s.path
            elif expected is not None:
                assert offs == list(range(expected, expected + len(offs))), (
                    "%s: offsets %r, expected from %d" % (s.path, offs[:5], expected))
            expected = offs[-1] + 1 if offs else expected
            if b.magic >= 2 and offs:
                assert b.base_offset == offs[0] and b.last_offset == offs[-1]
    if verify:
        assert_verify_clean(directory)
    return segs, all_records(segs)


def next_offset(directory):
    segs = read_partition(directory)
    last = segs[-1]
    return last.batches[-1].last_offset + 1 if last.batches else last.base


# -- index files -------------------------------------------------------------------------------------

def _max_bytes(kind, sib):
    return (sib // 8) * 8 if kind == "index" else (sib // 12) * 12


def read_index(path, base, kind, sib=DEFAULT_SEGMENT_INDEX_BYTES, sealed=False):
    """Entries of an ``.index`` (kind "index": (offset, position)) or ``.timeindex`` ("timeindex":
    (timestamp, offset)) file. A sealed segment's file must be trimmed to its entries; an active
    one may also be preallocated to its maximum size with zeros after the entries, or missing."""
    if not os.path.exists(path):
        assert not sealed, "%s missing" % path
        return []
    with open(path, "rb") as f:
        data = f.read()
    size = 8 if kind == "index" else 12
    assert len(data) % size == 0, "%s: %d bytes, not a whole number of entries" % (path, len(data))
    n = len(data) // size
    entries = []
    for i in range(n):
        chunk = data[i * size:(i + 1) * size]
        if not any(chunk):
            rest = data[i * size:]
            assert not any(rest), "%s: non-zero bytes after an all-zero slot" % path
            assert not sealed, "%s: sealed segment's index not trimmed (%d bytes, %d entries)" % (
                path, len(data), i)
            assert len(data) == _max_bytes(kind, sib), (
                "%s: %d bytes: neither trimmed to %d entries nor preallocated to %d" % (
                    path, len(data), i, _max_bytes(kind, sib)))
            break
        if kind == "index":
            rel, pos = struct.unpack(">ii", chunk)
            entries.append((base + rel, pos))
        else:
            ts, rel = struct.unpack(">qi", chunk)
            entries.append((ts, base + rel))
    return entries


def segment_indexes(seg, sib=DEFAULT_SEGMENT_INDEX_BYTES, sealed=False):
    return ig.Indexes(read_index(seg.prefix("index"), seg.base, "index", sib, sealed),
                      read_index(seg.prefix("timeindex"), seg.base, "timeindex", sib, sealed))


# -- the broker's append path, simulated (LogSegment.append, shouldRoll, UnifiedLog.roll) ------------------

class Config(NamedTuple):
    segment_bytes: int = 1073741824
    segment_ms: Optional[int] = None
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    interval: int = DEFAULT_INTERVAL

    def args(self):
        out = ["--segment-bytes", self.segment_bytes, "--segment-index-bytes",
               self.segment_index_bytes, "--index-interval-bytes", self.interval]
        if self.segment_ms is not None:
            out += ["--segment-ms", self.segment_ms]
        return out


class SimSeg:
    def __init__(self, base):
        self.base = base
        self.batches = []          # indexgen.LogBatch, positions as in the source segment
        self.positions = []
        self.size = 0
        self.t0 = None             # max timestamp of the segment's first batch
        self.offset_entries = []
        self.time_entries = []
        self.max_ts, self.offset_of_max = -1, -1
        self.bytes_since = 0
        self.sealed = False

    def last_time_ts(self):
        return self.time_entries[-1][0] if self.time_entries else -1

    def should_roll(self, b, cfg):
        if self.size == 0:
            return False
        if self.size + b.size > cfg.segment_bytes:
            return True
        if cfg.segment_ms is not None and self.t0 is not None and self.t0 >= 0:
            if b.max_timestamp - self.t0 > cfg.segment_ms:
                return True
        if len(self.offset_entries) >= cfg.segment_index_bytes // 8:
            return True
        if len(self.time_entries) >= cfg.segment_index_bytes // 12 - 1:
            return True
        if b.last_offset - self.base > INT32_MAX:
            return True
        return False

    def append(self, b, interval):
        pos = self.size
        if pos == 0:
            self.t0 = b.max_timestamp
        self.batches.append(b)
        self.positions.append(pos)
        self.size += b.size
        if b.max_timestamp > self.max_ts:
            self.max_ts, self.offset_of_max = b.max_timestamp, b.last_offset
        if self.bytes_since > interval:
            self.offset_entries.append((b.last_offset, pos))
            if self.max_ts > self.last_time_ts():
                self.time_entries.append((self.max_ts, self.offset_of_max))
            self.bytes_since = 0
        self.bytes_since += b.size

    def seal(self):
        if self.max_ts > self.last_time_ts():
            self.time_entries.append((self.max_ts, self.offset_of_max))
        self.sealed = True


def simulate(batches, cfg: Config, start: Optional[SimSeg] = None) -> List[SimSeg]:
    """Segments a broker-like appender makes of ``batches`` (indexgen.LogBatch, one append call
    each) from an empty partition (``start`` None) or continuing the active segment ``start``."""
    segs = [start] if start is not None else []
    for b in batches:
        if not segs:
            segs.append(SimSeg(b.base_offset))
        cur = segs[-1]
        if cur.should_roll(b, cfg):
            cur.seal()
            cur = SimSeg(b.base_offset)
            segs.append(cur)
        cur.append(b, cfg.interval)
    return segs


def resumed_segment(seg: Seg, interval_model="reset", max_model="scan",
                    sib=DEFAULT_SEGMENT_INDEX_BYTES, indexes=None):
    """A SimSeg for an existing active segment as a new append run opens it: its index entries as
    on disk, t0 from its first batch on disk. ``interval_model``: ``bytes_since`` is 0 ("reset":
    counted from where the run opened the segment, as a restarted broker) or the bytes after the
    last index entry ("continue": as if the segment had been written by one run).
    ``max_model``: the max timestamp so far is the segment's real max ("scan") or the last
    time-index entry ("timeindex", as a broker's LogSegment loads it). ``indexes``: the
    segment's index entries when the run started (default: read them now)."""
    s = SimSeg(seg.base)
    idx = indexes if indexes is not None else segment_indexes(seg, sib)
    s.offset_entries = list(idx.offset_entries)
    s.time_entries = list(idx.time_entries)
    s.batches = list(seg.batches)
    s.positions = [b.position for b in seg.batches]
    s.size = len(seg.data)
    s.t0 = seg.batches[0].max_timestamp if seg.batches else None
    if max_model == "scan":
        for b in seg.batches:
            if b.max_timestamp > s.max_ts:
                s.max_ts, s.offset_of_max = b.max_timestamp, b.last_offset
    elif s.time_entries:
        s.max_ts, s.offset_of_max = s.time_entries[-1]
    else:
        s.max_ts, s.offset_of_max = -1, seg.base
    if interval_model == "reset":
        s.bytes_since = 0
    else:
        last_pos = s.offset_entries[-1][1] if s.offset_entries else 0
        s.bytes_since = s.size - last_pos
    return s


RESUME_MODELS = [(i, m) for i in ("reset", "continue") for m in ("scan", "timeindex")]


def layout_matches(directory, sim, sib=DEFAULT_SEGMENT_INDEX_BYTES, skip=0):
    try:
        assert_layout(directory, sim, sib=sib, skip=skip)
    except AssertionError as e:
        return str(e)
    return None


def all_batches(segs):
    return [b for s in segs for b in s.batches]


def assert_layout(directory, sim: List[SimSeg], sib=DEFAULT_SEGMENT_INDEX_BYTES, skip=0):
    """The partition's segments (from the ``skip``-th on) are exactly the simulated ones: names,
    batches (offsets and positions), index entries (sealed: trimmed files holding the final
    time entry; active: the live entries, file trimmed or preallocated)."""
    segs = read_partition(directory)[skip:]
    got = [s.base for s in segs]
    want = [s.base for s in sim]
    # an appender may leave an empty active segment after a roll it made at the very end; the
    # simulation never does (it rolls only before a batch)
    assert got == want, "segments %r, expected %r" % (got, want)
    for s, e in zip(segs, sim):
        assert [(b.base_offset, b.last_offset, b.position) for b in s.batches] == [
            (b.base_offset, b.last_offset, p) for b, p in zip(e.batches, e.positions)], s.path
        idx = segment_indexes(s, sib, sealed=e.sealed)
        assert idx.offset_entries == e.offset_entries, "%s: offset index" % s.path
        assert idx.time_entries == e.time_entries, "%s: time index" % s.path


def assert_sealed_like_indexgen(seg: Seg, interval=DEFAULT_INTERVAL):
    """A sealed segment written by one run: its trimmed index files are byte for byte what
    indexgen (LogSegment.recover's rule, final time entry included) builds from its bytes."""
    exp = ig.build_indexes(seg.data, interval=interval, final_time_entry=True)
    with open(seg.prefix("index"), "rb") as f:
        assert f.read() == ig.encode_offset_index(exp.offset_entries, seg.base), seg.path
    with open(seg.prefix("timeindex"), "rb") as f:
        assert f.read() == ig.encode_time_index(exp.time_entries, seg.base), seg.path


# -- a process holding the log directory's .lock the way a JVM does ---------------------------------------

_HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
sys.stdout.write("locked\n"); sys.stdout.flush()
sys.stdin.read()
"""


@contextlib.contextmanager
def lock_held(log_dir):
    """A separate live process holds ``log_dir/.lock`` with a POSIX (fcntl) lock."""
    os.makedirs(log_dir, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, os.path.join(str(log_dir), ".lock")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"locked\n"
        yield p
    finally:
        p.stdin.close()
        p.wait(timeout=10)


def tree_hash(root):
    """Every path under ``root`` with its kind and content hash (links by their target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = pathlib.Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_file():
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[rel] = ("dir",)
    return out


def file_bytes(directory):
    """name -> bytes of the regular files directly in ``directory``."""
    out = {}
    for n in sorted(os.listdir(directory)):
        p = os.path.join(str(directory), n)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out[n] = f.read()
    return out


def next_offset_of(segs):
    last = segs[-1]
    return last.batches[-1].last_offset + 1 if last.batches else last.base


def assert_indexes_within_log(directory, sib=DEFAULT_SEGMENT_INDEX_BYTES):
    """What a broker loading ``directory`` as it is (no recovery) would find in each segment's
    ``.index`` and ``.timeindex``: every offset entry is (the last offset of a whole batch with a
    valid CRC, that batch's position), every time entry is (a whole batch's max timestamp, its
    last offset), both strictly increasing. Returns {base: (offset entries, time entries, the
    segment's whole batches as kafka-python reads their headers)}."""
    out = {}
    for base, path in segment_paths(directory):
        with open(path, "rb") as f:
            data = f.read()
        whole = [kb for kb in kafka_python_read(data, deep=False) if kb.crc_ok]
        by_position = {kb.position: kb.batch.last_offset for kb in whole}
        by_last = {kb.batch.last_offset: kb.batch.max_timestamp for kb in whole}
        idx = read_index(os.path.join(str(directory), "%020d.index" % base), base, "index", sib)
        tidx = read_index(os.path.join(str(directory), "%020d.timeindex" % base), base,
                          "timeindex", sib)
        for offset, position in idx:
            assert by_position.get(position) == offset, (
                "%s: offset index entry (%d, %d) is not a whole batch's (last offset, position)"
                % (path, offset, position))
        for ts, offset in tidx:
            assert by_last.get(offset) == ts, (
                "%s: time index entry (%d, %d) is not a whole batch's (max timestamp, last offset)"
                % (path, ts, offset))
        assert [o for o, _ in idx] == sorted(set(o for o, _ in idx)), path
        assert [t for t, _ in tidx] == sorted(set(t for t, _ in tidx)), path
        out[base] = (idx, tidx, whole)
    return out


def assert_recover_keeps_everything(directory):
    """``kafkalog recover --dry-run`` would cut nothing and set no segment aside: what it may
    still do to a partition a tool wrote is what LogLoader does to any after an unclean
    shutdown (write the recovery point at the log end offset; rebuild the active segment's
    indexes, whose last time entry a broker keeps in memory). Returns its JSON objects."""
    res = kafkalog_in("recover", "--dry-run", "--format", "json", str(directory))
    assert res.code in (0, 1), res
    objs = json_lines(res)
    segments = [o for o in objs if o["type"] == "segment"]
    assert segments, res
    active = max(o["baseOffset"] for o in segments)
    for o in segments:
        assert o["bytesCut"] == 0 and not o["setAside"], o
        if o["baseOffset"] != active:
            assert not o.get("indexesReplaced") and not o.get("indexesCreated"), o
    bases = sorted(o["baseOffset"] for o in segments)
    for o in objs:
        if o["type"] == "moved":
            n = os.path.basename(o["file"])
            assert SEGMENT_RE.match(n) is None, o
            if n.endswith(".snapshot") and (int(n[:20]) <= bases[0] or int(n[:20]) not in bases):
                continue  # the broker's LogLoader deletes it too: at or below the log start
                # offset (ProducerStateManager.truncateAndReload) or a stray (removeStraySnapshots)
            assert n.startswith("%020d." % active), o
    assert objs[-1]["type"] == "summary" and objs[-1]["bytesCut"] == 0 and objs[-1]["bytesSetAside"] == 0, objs[-1]
    return objs


# -- producer state and transaction index, by the broker's rules (ProducerStateManager) -------------

def log_batches(d):
    """indexgen.LogBatch of every segment, in offset order, with the v2 header fields the
    models need (kafka-python's reading)."""
    out = []
    for s in read_partition(d):
        for kb, lb in zip(s.kbs, s.batches):
            b = kb.batch
            coord = None
            if b.is_control_batch and kb.records:
                coord = struct.unpack(">hi", kb.records[0].value)[1]
            out.append((lb, b.base_sequence, b.leader_epoch, coord,
                        kb.records[0].timestamp if b.is_control_batch else None))
    return out


def producers_at(batches, end):
    """ProducerStateManager's entries after replaying the batches below ``end``: per producer
    id, a SnapshotEntry (ProducerStateEntry.addBatch / update: a new epoch clears the batch
    metadata; a marker ends the transaction and sets the coordinator epoch and timestamp)."""
    state = {}
    for lb, base_seq, _, coord, marker_ts in batches:
        if lb.base_offset >= end or lb.producer_id < 0:
            continue
        e = state.get(lb.producer_id) or dict(epoch=-1, seq=-1, last=-1, delta=0, ts=-1,
                                              coord=-1, txn=-1)
        if lb.producer_epoch != e["epoch"]:
            e.update(epoch=lb.producer_epoch, seq=-1, last=-1, delta=0)
        if lb.is_control:
            e.update(coord=coord, txn=-1, ts=marker_ts)
        else:
            delta = lb.last_offset - lb.base_offset
            e.update(seq=(base_seq + delta) % (INT32_MAX + 1), last=lb.last_offset, delta=delta,
                     ts=lb.max_timestamp)
            if lb.is_transactional and e["txn"] < 0:
                e["txn"] = lb.base_offset
        state[lb.producer_id] = e
    return {pid: ig.SnapshotEntry(pid, e["epoch"], e["seq"], e["last"], e["delta"], e["ts"],
                                  e["coord"], e["txn"]) for pid, e in state.items()}


def expected_txn_index(d):
    """{segment base: the AbortedTxn entries of the aborts whose marker it holds}."""
    open_txns = {}
    return {s.base: ig.aborted_txns(s.batches, open_txns) for s in read_partition(d)}


KILLSHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killshim.py")


# The k-th kill point is file operation k for the first KILL_EVERY_FROM, then every
# KILL_STRIDE-th (a subprocess a kill point: every point of a long run would take minutes).
KILL_EVERY_FROM = 12
KILL_STRIDE = int(os.environ.get("KAFKALOG_KILL_STRIDE", "3"))


def kill_step(k):
    """The file operation (killshim's STEP) the k-th kill point stops before."""
    return k if k <= KILL_EVERY_FROM else KILL_EVERY_FROM + (k - KILL_EVERY_FROM) * KILL_STRIDE


def cli_crashing_at(args, k, monkeypatch=None, calls=None):
    """Run `kafkalog ARGS` in a process of its own that is SIGKILLed at its k-th kill point
    (``kill_step``: just before that file operation, as tests/killshim.py counts them: every
    open for writing, write, rename, unlink, fsync...; k None: never). A real kill: no cleanup
    of the command runs, as after a power cut or an OOM kill. True when it was killed, False
    when it finished first (exit status 0 asserted). ``monkeypatch`` and ``calls`` are not
    used (the kill points are killshim's)."""
    proc = subprocess.run([sys.executable, KILLSHIM, "0" if k is None else str(kill_step(k)),
                           *map(str, args)], capture_output=True, timeout=300)
    if proc.returncode == -9:
        return True
    assert proc.returncode == 0, (args, k, proc.returncode, proc.stderr.decode()[-2000:])
    return False
