"""A segment that another process truncates while we read it.

A broker (or an operator) may cut a ``.log`` short while ``dump`` is reading it. Reading a
memory-mapped file past its new end kills the process with SIGBUS; the reader must instead stop
with a one-line error naming the file (exit 2), or finish if it had already read everything.

Every run is a real process (``python -m kafkalog_cli dump``) on a segment of a few hundred MiB
built from one batch written by kafka-python (kafkagen), repeated with rewritten base offsets
(bytes 0-7, outside the CRC). The test reads the dump's output and truncates the file once a
given share of it has been printed (or after a given delay), then checks the exit status (never
a signal), stderr (no traceback, one line) and the child's peak resident size.
"""

import os
import random
import shutil
import struct
import subprocess
import sys
import time

import pytest

import kafkagen as kg

# Files changing under a reader, with real delays: left out of the quick suite
# (pytest -m "not slow").
pytestmark = pytest.mark.slow

SEGMENT_MIB = 256
RECORDS_PER_BATCH = 16
# The reader keeps a bounded window of the file in memory: its peak resident size must stay far
# below the file's size (an interpreter with its imports takes ~30 MB of it).
RSS_LIMIT = 160 * 1000 * 1000
TIMEOUT = 120
NAME = "00000000000000000000.log"
ERROR = "changed size while being read"


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    """(path, size) of a valid segment of SEGMENT_MIB MiB of identical batches but for their
    base offsets."""
    rng = random.Random(10)
    records = [kg.Rec(b"key-%d" % i, bytes(rng.randrange(32, 127) for _ in range(1000)), kg.T0 + i)
               for i in range(RECORDS_PER_BATCH)]
    batch = kg.v2_batch(records)
    per_chunk = (16 << 20) // len(batch)
    chunk = bytearray(batch * per_chunk)
    path = tmp_path_factory.mktemp("changing") / "master.log"
    offset = 0
    with open(path, "wb") as f:
        for _ in range((SEGMENT_MIB << 20) // len(chunk)):
            for i in range(per_chunk):
                struct.pack_into(">q", chunk, i * len(batch), offset)
                offset += RECORDS_PER_BATCH
            f.write(chunk)
    return str(path), os.path.getsize(path), offset


# ``python -m kafkalog_cli`` that also writes its peak resident size (VmHWM, which starts afresh
# at execve, unlike ru_maxrss) to the file named by its first argument.
CLI = r"""
import runpy, sys
hwm_path = sys.argv.pop(1)
sys.argv[0] = "kafkalog"
try:
    runpy.run_module("kafkalog_cli", run_name="__main__", alter_sys=True)
    rc = 0
except SystemExit as e:
    rc = e.code
with open("/proc/self/status") as f:
    hwm = [line.split()[1] for line in f if line.startswith("VmHWM:")][0]
with open(hwm_path, "w") as f:
    f.write(hwm)
sys.exit(rc)
"""


def _dump(path, args, cut_after_bytes=None, cut_after_seconds=None, cut_to=0):
    """Run ``dump ARGS PATH``, truncating PATH to ``cut_to`` bytes once ``cut_after_bytes`` of
    output were read or ``cut_after_seconds`` passed. Returns (exit status, stdout bytes read,
    stderr text, peak RSS in bytes, whether the cut was made before the dump ended)."""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc")
    err_path = path + ".stderr"
    hwm_path = path + ".hwm"
    if os.path.exists(hwm_path):
        os.remove(hwm_path)
    with open(err_path, "wb") as err:
        p = subprocess.Popen([sys.executable, "-c", CLI, hwm_path, "dump", *args, path],
                             stdout=subprocess.PIPE, stderr=err, cwd=os.path.dirname(path))
    fd = p.stdout.fileno()
    if cut_after_seconds is not None:
        os.set_blocking(fd, False)
    start = time.monotonic()
    read = 0
    cut = False
    while True:
        if not cut and (
                (cut_after_bytes is not None and read >= cut_after_bytes)
                or (cut_after_seconds is not None
                    and time.monotonic() - start >= cut_after_seconds)):
            os.truncate(path, cut_to)
            cut = True
            os.set_blocking(fd, True)
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            time.sleep(0.002)
            continue
        if not chunk:
            break
        read += len(chunk)
        assert time.monotonic() - start < TIMEOUT, "dump did not finish"
    p.stdout.close()
    code = p.wait(timeout=TIMEOUT)
    with open(err_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    peak = None
    if code >= 0:
        with open(hwm_path) as f:
            peak = int(f.read()) * 1024
    return code, read, err, peak, cut


def _check(code, err, rss, path, size):
    assert code >= 0, "killed by signal %d (stderr: %r)" % (-code, err[-2000:])
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    assert rss < min(RSS_LIMIT, size), "peak RSS %d bytes" % rss  # VmHWM of the child
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and path in lines[0] and ERROR in lines[0], err[-2000:]


@pytest.fixture(scope="module")
def full_output(master):
    """The size of a complete deep dump of the untouched segment (which must be clean)."""
    src, size, next_offset = master
    work = os.path.join(os.path.dirname(src), "full", NAME)
    os.makedirs(os.path.dirname(work), exist_ok=True)
    shutil.copyfile(src, work)
    code, read, err, rss, _ = _dump(work, ["--deep-iteration"])
    assert code == 0 and err == "", (code, err)
    assert rss < RSS_LIMIT, rss
    os.remove(work)
    return read


# (share of the full output printed before the cut, size the file is cut to)
BY_OUTPUT = [(0.02, 7), (0.1, 0), (0.25, 100), (0.4, 1 << 20), (0.55, 3), (0.7, "half"),
             (0.85, 17)]


@pytest.mark.parametrize("share,cut_to", BY_OUTPUT)
def test_truncated_during_a_deep_dump(master, full_output, tmp_path, share, cut_to):
    """The file is cut while the dump is well under way: the dump stops with one line naming
    the file, exit 2; never SIGBUS, never a traceback, memory bounded."""
    src, size, _ = master
    path = str(tmp_path / NAME)
    shutil.copyfile(src, path)
    cut_to = size // 2 if cut_to == "half" else cut_to
    code, read, err, rss, cut = _dump(path, ["--deep-iteration"],
                                      cut_after_bytes=int(full_output * share), cut_to=cut_to)
    assert cut
    _check(code, err, rss, path, size)
    if share <= 0.4:
        # the reader keeps at most a window of a few MiB ahead of what it has printed: it cannot
        # have read the whole file yet, so it must have met the short read
        assert code == 2, (code, err)
        assert read < full_output


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.25, 0.5, 0.8])
@pytest.mark.parametrize("args", [["--deep-iteration"], []], ids=["deep", "batches"])
def test_truncated_after_a_delay(master, tmp_path, delay, args):
    """The same, cut after a delay (the batch-level dump reads through its own fast path):
    whatever the moment, exit 0, 1 or 2 and never a signal."""
    src, size, _ = master
    path = str(tmp_path / NAME)
    shutil.copyfile(src, path)
    code, read, err, rss, _ = _dump(path, args, cut_after_seconds=delay, cut_to=5)
    _check(code, err, rss, path, size)


def test_truncated_during_a_batch_dump(master, tmp_path):
    """The batch-level dump (no record iteration) meets the cut too."""
    src, size, next_offset = master
    path = str(tmp_path / NAME)
    shutil.copyfile(src, path)
    code, read, err, rss, cut = _dump(path, [], cut_after_bytes=1 << 20, cut_to=11)
    assert cut
    _check(code, err, rss, path, size)
    assert code == 2, (code, err)


def test_a_fifo_as_the_log(tmp_path):
    """A FIFO named as a segment: opening it to read would block for ever. Every command that
    reads a .log refuses it at once: one line naming it, exit 2."""
    part = tmp_path / "topic-0"
    part.mkdir()
    fifo = str(part / NAME)
    os.mkfifo(fifo)
    for args in (["dump"], ["dump", "--deep-iteration"], ["verify-index"],
                 ["recover", "--dry-run"]):
        p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *args, fifo],
                           capture_output=True, timeout=60, cwd=str(tmp_path))
        err = p.stderr.decode("utf-8", "replace")
        assert p.returncode == 2, (args, p)
        assert "Traceback" not in err, err
        assert err.splitlines() == ["kafkalog: %s: not a regular file (a FIFO)" % fifo], (args, err)


# -- reading in windows: batches that cross a window's end, or exceed a window ----------------

def test_large_segment_read_in_windows_matches_kafka_python(tmp_path):
    """The reader loads the file a window at a time (64 KiB after a jump, doubling to 16 MiB)
    and lets go of what lies 32 MiB behind: a segment of ~90 MiB with batches from a few bytes
    to 20 MiB (larger than a window), in every codec (some inflating to 6-18 MiB), must read
    exactly as kafka-python reads it, deep and batch by batch."""
    from dumpcheck import check_kafka_dump, dump
    rng = random.Random(90)
    text = b"".join(b"%06d lorem ipsum dolor sit amet " % i for i in range(40000))
    chunks = []
    offset = 0
    sizes = [10, 300, 5000, 70000, 400000, 1 << 20]
    # large batches: one larger than the largest window, and one per codec whose records
    # inflate past a few MiB (inflated into a growing mapping rather than joined)
    large = [("none", 20), ("zstd", 18), ("lz4", 6), ("gzip", 6), ("snappy", 6)]
    while sum(map(len, chunks)) < 90 << 20 or large:
        codec = rng.choice(kg.V2_CODECS)
        n = rng.choice([1, 2, 5, 20])
        size = rng.choice(sizes)
        if len(chunks) % 13 == 5 and large:
            codec, n = large.pop(0)
            size = 1 << 20
        records = []
        for i in range(n):
            if codec == "none":
                value = rng.randbytes(size)
            else:
                start = rng.randrange(len(text) - min(size, len(text) - 1))
                value = (text[start:] + text)[:size]
            records.append(kg.Rec(b"k%d" % i, value, kg.T0 + offset + i))
        chunks.append(kg.v2_batch(records, base_offset=offset, codec=codec,
                                  expect_compressed=False))
        offset += n
    data = b"".join(chunks) + rng.randbytes(37)
    path = tmp_path / NAME
    path.write_bytes(data)
    assert len(data) > 80 << 20 and max(map(len, chunks)) > 16 << 20
    res = dump("--deep-iteration", path)
    assert res.code == 1, res  # the 37 bytes at the end
    check_kafka_dump(res, str(path), data, deep=True)
    res = dump(path)
    check_kafka_dump(res, str(path), data)


def test_resynchronising_over_long_bad_stretches(tmp_path):
    """--skip-invalid looks for the next valid batch through stretches of garbage, of zeros and
    of 0xff bytes longer than a search step (4 MiB) and than a window: every batch written is
    found at its position, and each bad stretch is reported once, whole."""
    from dumpcheck import dump, pairs
    rng = random.Random(7)
    parts = []  # (kind, bytes)
    offset = 0
    layout = ["batches", ("garbage", 9 << 20), "batches", ("zeros", 11 << 20), "batches",
              ("ff", 6 << 20), "batches", ("garbage", 3 << 20), "batches"]
    for item in layout:
        if item == "batches":
            for _ in range(rng.randrange(3, 8)):
                n = rng.choice([1, 3, 10])
                records = [kg.Rec(b"k", rng.randbytes(rng.choice([10, 5000, 300000])), kg.T0)
                           for _ in range(n)]
                parts.append(("batch", offset, kg.v2_batch(records, base_offset=offset)))
                offset += n
        else:
            kind, n = item
            # garbage whose first byte keeps it from being read as a batch (a size field of -1)
            # (0xff bytes: no position in them could start an entry, so the search for one
            # runs through many steps without a candidate)
            body = {"garbage": b"\xff" + rng.randbytes(n - 1), "zeros": bytes(n),
                    "ff": b"\xff" * n}[kind]
            parts.append((kind, None, body))
    data = b"".join(p[2] for p in parts)
    path = tmp_path / NAME
    path.write_bytes(data)
    res = dump("--skip-invalid", path)
    assert res.code == 1, res
    expected = []
    pos = 0
    for kind, base, body in parts:
        if kind == "batch":
            expected.append(("batch", pos, base))
        else:
            expected.append(("skipped", pos, len(body)))
        pos += len(body)
    seen = []
    for line in res.lines[2:]:
        if line.startswith("Skipped"):
            words = line.split()
            seen.append(("skipped", int(words[6]), int(words[1])))
        else:
            p = dict(pairs(line))
            seen.append(("batch", int(p["position"]), int(p["baseOffset"])))
    assert seen == expected


# -- verify-index, the Python API and scan's reader; files replaced (renamed over) -------------
#
# A second process changes the file once the reader holds it open (seen in /proc/<pid>/fd):
# truncated (retention, recovery), or replaced by a rename over its name (a copy put in place,
# the log cleaner's swap: a new inode with other bytes). Readers of one file finish on the
# bytes of the file they opened (the open file keeps them) unless it was truncated: then one
# line naming it, exit 2. verify-index combines the .log with its indexes, read by name after
# it: there a replaced log is noticed, one line naming it, exit 2, rather than findings that
# compare one file's indexes with another's log.

INDEX_INTERVAL = 4096  # log.index.interval.bytes


def _indexes(next_offset, batch_size):
    """The .index and .timeindex LogSegment.recover writes for the master segment (identical
    batches of RECORDS_PER_BATCH records of timestamps T0..T0+15, batch_size bytes each,
    larger than the index interval: an offset entry at every batch but the first, and one time
    entry, for the first batch's max timestamp)."""
    assert batch_size > INDEX_INTERVAL
    batches = next_offset // RECORDS_PER_BATCH
    index = b"".join(struct.pack(">ii", i * RECORDS_PER_BATCH + RECORDS_PER_BATCH - 1,
                                 i * batch_size) for i in range(1, batches))
    timeindex = struct.pack(">qi", kg.T0 + RECORDS_PER_BATCH - 1, RECORDS_PER_BATCH - 1)
    return index, timeindex


@pytest.fixture(scope="module")
def indexed(master, tmp_path_factory):
    """(log, .index bytes, .timeindex bytes) of the master segment, its indexes as the broker
    builds them (checked once: verify-index finds nothing wrong with them)."""
    src, size, next_offset = master
    index, timeindex = _indexes(next_offset, size // (next_offset // RECORDS_PER_BATCH))
    d = tmp_path_factory.mktemp("indexed") / "topic-0"
    d.mkdir()
    log = d / NAME
    shutil.copyfile(src, log)
    (d / "00000000000000000000.index").write_bytes(index)
    (d / "00000000000000000000.timeindex").write_bytes(timeindex)
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", "verify-index", str(d)],
                       capture_output=True, timeout=TIMEOUT)
    assert p.returncode == 0 and p.stderr == b"", p
    os.remove(log)
    return index, timeindex


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """Another valid segment at base 0 with its indexes (as a cleaner's output would be): its
    directory, holding its .log, .index and .timeindex."""
    import indexgen as ig
    w = kg.SegmentWriter(0)
    for i in range(300):
        w.add_v2([kg.Rec(b"other-%d" % i, b"o" * 2000, kg.T0 + 5000 + i)], codec="gzip")
    d = tmp_path_factory.mktemp("other")
    ig.write_partition(str(d), [(0, w.data())])
    return str(d)


def _partition_copy(master, indexed, tmp_path):
    src, size, _ = master
    d = tmp_path / "topic-0"
    d.mkdir()
    shutil.copyfile(src, d / NAME)
    (d / "00000000000000000000.index").write_bytes(indexed[0])
    (d / "00000000000000000000.timeindex").write_bytes(indexed[1])
    return str(d)


def _wait_open(p, path):
    """Wait until process ``p`` holds ``path`` open; False when it ended first."""
    target = os.path.realpath(path)
    fds = "/proc/%d/fd" % p.pid
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            links = [os.readlink(os.path.join(fds, fd)) for fd in os.listdir(fds)]
        except OSError:
            links = []  # an fd closed while listed: look again
        if target in links:
            return True
        if p.poll() is not None:
            return False
        time.sleep(0.0005)
    raise AssertionError("%s never opened" % path)


def _replace(src_dir, dst_dir, kinds=("log", "index", "timeindex")):
    """Rename the segment files of ``src_dir`` over those of ``dst_dir`` as the broker swaps
    a segment in (LogSegment.changeFileSuffixes: the .log first), by a second process."""
    for kind in kinds:
        name = "00000000000000000000." + kind
        shutil.copyfile(os.path.join(src_dir, name), os.path.join(dst_dir, name + ".new"))
    subprocess.run(["sh", "-c", " && ".join(
        'mv -f "%s/00000000000000000000.%s.new" "%s/00000000000000000000.%s"'
        % (dst_dir, kind, dst_dir, kind) for kind in kinds)], check=True, timeout=60)


def _run_changing(args, path, change):
    """Run ``kafkalog ARGS`` with output to a file, apply ``change`` once it holds ``path``
    open; (exit status, stdout bytes, stderr text, whether the change came first)."""
    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc")
    # (outside the directory read, where the reader would meet them)
    out_path = os.path.join(os.path.dirname(os.path.dirname(path)), "run.out")
    err_path = out_path[:-4] + ".err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        p = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", *args], stdout=out,
                             stderr=err, cwd=os.path.dirname(path))
        opened = _wait_open(p, path)
        if opened:
            # a moment for the reader to take the size of what it opened: a file cut between
            # its open and its fstat is, rightly, read as the shorter file it then is
            time.sleep(0.005)
            change()
        code = p.wait(timeout=TIMEOUT)
    with open(err_path, "rb") as f:
        err_text = f.read().decode("utf-8", "replace")
    with open(out_path, "rb") as f:
        out_bytes = f.read()
    os.remove(out_path)
    return code, out_bytes, err_text, opened


def _one_line(code, err, path, what):
    assert code == 2, (code, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalog: %s: %s" % (path, what)), err


@pytest.mark.parametrize("cut_to", [0, 7, 1 << 20, "half"])
def test_verify_index_log_truncated(master, indexed, tmp_path, cut_to):
    """The .log cut while verify-index checks its indexes against it: one line naming the log,
    exit 2, never findings about indexes compared with half a log."""
    d = _partition_copy(master, indexed, tmp_path)
    log = os.path.join(d, NAME)
    size = master[1]
    cut = size // 2 if cut_to == "half" else cut_to
    code, out, err, opened = _run_changing(["verify-index", d], log,
                                           lambda: os.truncate(log, cut))
    assert opened
    _one_line(code, err, log, ERROR)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_verify_index_log_replaced(master, indexed, other, tmp_path, fmt):
    """Another segment renamed over the .log and its indexes while verify-index reads them:
    the indexes read by name may be the new file's, the log it opened the old one; it says the
    log was replaced (one line naming it, exit 2) rather than report their disagreement."""
    d = _partition_copy(master, indexed, tmp_path)
    log = os.path.join(d, NAME)
    code, out, err, opened = _run_changing(["verify-index", "--format", fmt, d], log,
                                           lambda: _replace(other, d))
    assert opened
    _one_line(code, err, log, "replaced while being read")
    assert b'"problem"' not in out, out[:2000]


def test_verify_index_log_renamed_away(master, indexed, tmp_path):
    """The segment renamed to .deleted (retention) while verify-index reads it: its name no
    longer holds it; one line naming it, exit 2."""
    d = _partition_copy(master, indexed, tmp_path)
    log = os.path.join(d, NAME)

    def delete():
        subprocess.run(["sh", "-c", 'for f in "%s"/00000000000000000000.*; do '
                        'mv "$f" "$f.deleted"; done' % d], check=True, timeout=60)
    code, out, err, opened = _run_changing(["verify-index", d], log, delete)
    assert opened
    _one_line(code, err, log, "replaced while being read")


def test_dump_log_replaced_finishes_on_the_file_opened(master, other, tmp_path):
    """Another segment renamed over the .log while dump reads it: the dump goes on reading the
    file it opened (its inode keeps its bytes) to its end, every batch of it, exit 0."""
    src, size, next_offset = master
    path = str(tmp_path / NAME)
    shutil.copyfile(src, path)
    code, out, err, opened = _run_changing(["dump", path], path,
                                           lambda: _replace(other, str(tmp_path), ("log",)))
    assert opened
    assert code == 0 and err == "", (code, err[-2000:])
    lines = out.decode().splitlines()
    assert len(lines) == 2 + next_offset // RECORDS_PER_BATCH
    assert "lastOffset: %d " % (next_offset - 1) in lines[-1], lines[-1]
    with open(path, "rb") as f:
        assert f.read(4096) != open(src, "rb").read(4096)  # the name holds the other file now


def _api_partition(tmp_path, n_batches=400):
    """A partition of one segment of n_batches batches of 16 records (~16 KiB each), written
    by kafka-python; (directory, log path, the bytes)."""
    rng = random.Random(3)
    d = tmp_path / "api-0"
    d.mkdir()
    w = kg.SegmentWriter(0)
    for _ in range(n_batches):
        w.add_v2([kg.Rec(b"k%d" % w.next_offset, rng.randbytes(1000), kg.T0)
                  for _ in range(RECORDS_PER_BATCH)])
    data = w.data()
    path = w.write(str(d))
    return str(d), path, data


def test_python_api_log_truncated(tmp_path):
    """Partition.records() over a segment another process cuts after the first records were
    given: FileChangedError (exit code 2) naming the file, not a short or mixed read."""
    from kafkalog_cli.errors import KafkalogError
    from kafkalog_cli.log.partition import Partition
    d, path, _ = _api_partition(tmp_path)
    records = Partition(d).records()
    for _ in range(10):
        next(records)
    subprocess.run(["truncate", "-s", "100", path], check=True, timeout=60)
    with pytest.raises(KafkalogError) as info:
        for _ in records:
            pass
    assert isinstance(info.value, OSError) and info.value.exit_code == 2
    assert info.value.filename == path and ERROR in str(info.value)


def test_python_api_log_replaced(tmp_path):
    """Partition.records() over a segment another process renames another file over: the
    records are those of the file opened, all of them (kafka-python reads the same bytes)."""
    from kafkalog_cli.log.partition import Partition
    d, path, data = _api_partition(tmp_path)
    records = Partition(d).records()
    got = [next(records) for _ in range(10)]
    (tmp_path / "new.log").write_bytes(data[:len(data) // 3])
    subprocess.run(["mv", "-f", str(tmp_path / "new.log"), path], check=True, timeout=60)
    got.extend(records)
    expected = [(r.offset, r.key, r.value) for b in kg.kafka_python_read(data) for r in b.records]
    assert [(r.offset, r.key, r.value) for r in got] == expected


SUMMARIZE = r"""
import sys
from kafkalog_cli.cli.errors import error_text, exit_code
from kafkalog_cli.log.summary import summarize_segment
try:
    summarize_segment(sys.argv[1])
except Exception as e:
    print("kafkalog: " + error_text(e), file=sys.stderr)
    sys.exit(exit_code(e))
"""


def test_scan_segment_reader_log_truncated(master, tmp_path):
    """`kafkalog scan`'s per-segment work (log.summary.summarize_segment, what each Spark task
    runs) over a segment cut while it reads: FileChangedError naming the file."""
    src, size, _ = master
    path = str(tmp_path / NAME)
    shutil.copyfile(src, path)
    p = subprocess.Popen([sys.executable, "-c", SUMMARIZE, path], stderr=subprocess.PIPE,
                         cwd=str(tmp_path))
    assert _wait_open(p, path)
    time.sleep(0.005)  # as in _run_changing
    os.truncate(path, 3)
    err = p.communicate(timeout=TIMEOUT)[1].decode()
    _one_line(p.returncode, err, path, ERROR)


def _wait_open_anywhere(p, path):
    """Wait until some process (a Spark worker: not a child of ``p``) holds ``path`` open;
    False when ``p`` ended first."""
    target = os.path.realpath(path)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            fds = "/proc/%s/fd" % pid
            try:
                if any(os.readlink(os.path.join(fds, fd)) == target for fd in os.listdir(fds)):
                    return True
            except OSError:
                continue
        if p.poll() is not None:
            return False
        time.sleep(0.001)
    raise AssertionError("%s never opened" % path)


def test_scan_log_truncated(master, tmp_path):
    """`kafkalog scan` (a local Spark) over a partition whose segment is cut while a Spark task
    reads it: one kafkalog line naming the file, exit 2, no worker traceback."""
    pytest.importorskip("pyspark")
    src, size, _ = master
    d = tmp_path / "topic-0"
    d.mkdir()
    path = str(d / NAME)
    shutil.copyfile(src, path)
    p = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", "scan", "--master", "local[1]",
                          "--spark-conf", "spark.ui.enabled=false", str(d)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path))
    try:
        assert _wait_open_anywhere(p, path)
        time.sleep(0.005)  # as in _run_changing
        os.truncate(path, 3)
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
    err = err.decode("utf-8", "replace")
    assert p.returncode == 2, (p.returncode, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    ours = [line for line in err.splitlines() if line.startswith("kafkalog:")]
    assert ours == [line for line in ours if ERROR in line and path in line] and len(ours) == 1, err


@pytest.mark.parametrize("args", [["dump", "--index-sanity-check"], ["verify-index",
                                                                     "--sanity-only"]],
                         ids=["dump", "verify-index"])
def test_index_truncated_while_read(tmp_path, args):
    """An index's real entries are read in pieces of the size it had at open: one cut during
    that read (a 256 MiB .index of real entries, slow enough to read to be cut midway) is a
    short read, said (one line naming it, exit 2), not taken for a shorter index. (A zero
    tail is not read at all: only the real entries and the last slot are.)"""
    import array
    d = tmp_path / "topic-0"
    d.mkdir()
    path = str(d / "00000000000000000000.index")
    n = (256 << 20) // 8
    entries = array.array("i", [0]) * (2 * n)
    entries[0::2] = array.array("i", range(1, n + 1))   # relative offsets, rising
    entries[1::2] = array.array("i", range(0, 2 * n, 2))  # positions, rising
    if sys.byteorder == "little":
        entries.byteswap()
    with open(path, "wb") as f:
        f.write(entries.tobytes())
    code, out, err, opened = _run_changing([*args, path], path,
                                           lambda: os.truncate(path, 8 << 20))
    assert opened
    _one_line(code, err, path, ERROR)
