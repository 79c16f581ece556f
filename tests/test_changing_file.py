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
