"""A broker's own in-between states are normal, not damage.

A live broker removes a segment in two steps (LocalLog.deleteSegmentFiles): it renames each of
the segment's files to ``.deleted`` (LogSegment.changeFileSuffixes: the .log, then the .index,
.timeindex and .txnindex) and, file.delete.delay.ms later, deletes them
(LogSegment.deleteIfExists: the .log first, then the indexes). The log cleaner and a segment
split rename ``.cleaned`` files to ``.swap`` and ``.swap`` files to their live names the same
way, and LogLoader removes or completes what a crash leaves of them. A directory copied or
read at any moment may therefore hold any prefix of those renames and deletions, and an empty
active segment (a 0-byte .log with pre-allocated or empty indexes) just after a roll.

``dump`` and ``verify-index`` must read such a directory with exit 0, saying on stderr (or in
verify's JSON, as a note) why an index without its log is left unchecked. The directories are
built here from real segments (kafkagen: kafka-python's encoder; indexgen: the broker's index
rules), then renamed and deleted in the broker's order. Every run is a real process.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

import indexgen as ig
import kafkagen as kg

ORDER = ("log", "index", "timeindex", "txnindex")  # changeFileSuffixes and deleteIfExists order
PID = 7


def _segment(base, n):
    """A segment of ``n`` batches of a few KiB (so that the indexes get entries) holding an
    aborted transaction (so that it has a .txnindex)."""
    w = kg.SegmentWriter(base)
    for i in range(n):
        w.add_v2([kg.Rec(b"k%d" % i, b"v" * 3000, kg.T0 + w.next_offset)])
        if i == 2:
            w.add_v2([kg.Rec(b"t", b"x" * 100, kg.T0 + w.next_offset)], producer_id=PID,
                     producer_epoch=0, base_sequence=0, transactional=True)
            w.add_control(kg.ABORT, PID, 0, 0)
    return w


@pytest.fixture
def partition(tmp_path):
    """A partition of two sealed segments (0 and 20, each with .index, .timeindex, .txnindex)
    and an active segment at 40; returns (directory, {base: {kind: path}})."""
    d = tmp_path / "topic-0"
    first = _segment(0, 15)
    second = _segment(first.next_offset, 15)
    active = _segment(second.next_offset, 4)
    files = ig.write_partition(str(d), [(0, first.data()), (first.next_offset, second.data()),
                                        (second.next_offset, active.data())],
                               preallocate_active=True)
    assert all("txnindex" in f.paths for f in files)
    return str(d), {f.base_offset: dict(f.paths) for f in files}


def _run(*args, cwd):
    p = subprocess.run([sys.executable, "-m", "kafkalog_cli", *args], capture_output=True,
                       timeout=120, cwd=cwd)
    err = p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    return p.returncode, p.stdout.decode("utf-8", "replace"), err


def _rename(paths, suffix, count=len(ORDER)):
    """The first ``count`` files of a segment renamed with ``suffix``, in the broker's order."""
    for kind in ORDER[:count]:
        os.rename(paths[kind], paths[kind] + suffix)


def _delete(paths, suffix, count):
    """The first ``count`` renamed files of a segment deleted, in the broker's order."""
    for kind in ORDER[:count]:
        os.remove(paths[kind] + suffix)


def _copy(paths, suffix, kinds):
    for kind in kinds:
        shutil.copyfile(paths[kind], paths[kind] + suffix)


def _check(directory, orphans):
    """dump (batches and records) and verify-index (text and JSON) of ``directory`` exit 0;
    each index in ``orphans`` (whose log is gone as the broker leaves it) is named in a note
    (dump's on stderr; verify-index's on stdout, its stderr left empty for cron), and in
    verify's JSON as a broker_state note, not a problem."""
    cwd = os.path.dirname(directory)
    for args in (["dump"], ["dump", "--deep-iteration"], ["dump", "--format", "json"],
                 ["verify-index"]):
        code, out, err = _run(*args, directory, cwd=cwd)
        assert code == 0, (args, code, err[-3000:])
        notes = err
        if args == ["verify-index"]:
            assert err == "", (args, err)
            notes = out
        for path in orphans:
            assert any(line.startswith("kafkalog: %s: no log file" % path)
                       or line.startswith("%s: note: no log file" % path)
                       for line in notes.splitlines()), (args, path, notes)
    code, out, err = _run("verify-index", "--format", "json", directory, cwd=cwd)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert not [o for o in lines if o["type"] == "problem"], lines
    notes = {o["file"] for o in lines if o["type"] == "note" and o["kind"] == "broker_state"}
    assert notes == set(orphans), (notes, orphans)


@pytest.mark.parametrize("deleted", [1, 2, 3])
def test_segment_half_deleted(partition, deleted):
    """Every file of segment 0 renamed to .deleted, then the first ``deleted`` of them removed
    (the .log first): the indexes left behind are noted, not reported as damage."""
    d, segs = partition
    _rename(segs[0], ".deleted")
    _delete(segs[0], ".deleted", deleted)
    orphans = [segs[0][k] + ".deleted" for k in ORDER[deleted:] if k in ("index", "timeindex")]
    _check(d, orphans)


@pytest.mark.parametrize("renamed", [1, 2, 3])
def test_segment_half_renamed(partition, renamed):
    """Segment 20 caught while its files are renamed to .deleted: the .log (and maybe some
    indexes) renamed, the rest under their live names beside a .log.deleted."""
    d, segs = partition
    base = sorted(segs)[1]
    _rename(segs[base], ".deleted", renamed)
    orphans = [segs[base][k] for k in ORDER[renamed:] if k in ("index", "timeindex")]
    _check(d, orphans)


def test_deleted_log_alone(partition):
    """Only the .log.deleted of a segment left (its indexes gone first): a segment on its way
    out needs no .txnindex for the aborted transaction it holds."""
    d, segs = partition
    _rename(segs[0], ".deleted")
    for kind in ORDER[1:]:
        os.remove(segs[0][kind] + ".deleted")
    _check(d, [])


def test_deleted_producer_snapshot(partition):
    """A producer snapshot renamed .deleted with its segment (UnifiedLog deletes it with the
    segment, as ProducerStateManager.removeAndMarkSnapshotForDeletion does)."""
    d, segs = partition
    snap = os.path.join(d, "%020d.snapshot.deleted" % sorted(segs)[1])
    ig.write_file(snap, ig.encode_snapshot([]))
    _check(d, [])


@pytest.mark.parametrize("suffix,kinds", [
    (".cleaned", ("index", "timeindex")),        # the cleaner's output, its .log removed first
    (".cleaned", ("log", "index")),
    (".swap", ("index", "timeindex", "txnindex")),  # LogLoader deletes index swap files
    (".swap", ("log", "index", "timeindex", "txnindex")),
])
def test_cleaned_and_swap_leftovers(partition, suffix, kinds):
    """Leftovers of the log cleaner or of a segment split (.cleaned, .swap files beside the
    segment they replace), in any subset LogLoader may meet."""
    d, segs = partition
    base = sorted(segs)[1]
    _copy(segs[base], suffix, kinds)
    orphans = ([segs[base][k] + suffix for k in kinds if k in ("index", "timeindex")]
               if "log" not in kinds else [])
    _check(d, orphans)


@pytest.mark.parametrize("indexes", ["preallocated", "empty", "none"])
def test_empty_active_segment(partition, indexes):
    """A roll just made: the new active segment's .log is empty, its indexes pre-allocated
    (as a live broker leaves them), empty (as a clean shutdown trims them) or not created yet
    (LazyIndex)."""
    d, segs = partition
    base = 10 ** 6
    prefix = os.path.join(d, "%020d" % base)
    ig.write_file(prefix + ".log", b"")
    if indexes == "preallocated":
        ig.write_file(prefix + ".index", ig.preallocated_offset_index(b""))
        ig.write_file(prefix + ".timeindex", ig.preallocated_time_index(b""))
    elif indexes == "empty":
        ig.write_file(prefix + ".index", b"")
        ig.write_file(prefix + ".timeindex", b"")
    # the segment before it is sealed: its indexes trimmed, as a roll does
    last = sorted(segs)[-1]
    for kind in ("index", "timeindex"):
        with open(segs[last][kind], "rb") as f:
            data = f.read()
        size = 8 if kind == "index" else 12
        real = len(data.rstrip(b"\0"))
        ig.write_file(segs[last][kind], data[:-(-real // size) * size])
    _check(d, [])


def test_mid_deletion_index_named_alone(partition):
    """An orphaned .index.deleted named on the command line: its entries are dumped, and
    the missing log is said, exit 0."""
    d, segs = partition
    _rename(segs[0], ".deleted")
    _delete(segs[0], ".deleted", 1)
    path = segs[0]["index"] + ".deleted"
    for args in (["dump"], ["verify-index"]):
        code, out, err = _run(*args, path, cwd=d)
        assert code == 0, (args, err)
        said = out if args == ["verify-index"] else err   # verify-index's notes: stdout
        assert "no log file %020d.log.deleted beside it" % 0 in said, (out, err)


def test_orphan_live_index_is_still_damage(partition):
    """A live .index whose segment has no .log under any name is no broker state (LogLoader
    deletes it as orphaned): still reported, exit 1."""
    d, segs = partition
    os.remove(segs[0]["log"])
    for args in (["dump"], ["verify-index"]):
        code, out, err = _run(*args, d, cwd=os.path.dirname(d))
        assert code == 1, (args, code, err)
        assert "no log file %020d.log beside it" % 0 in err, err


# -- the broker finishing a deletion while we read ---------------------------------------------

def _big_deleted_partition(tmp_path):
    """A partition whose segment 0 (~64 MiB of kafka-python batches, base offsets rewritten)
    is being deleted: .log.deleted, .index.deleted, .timeindex.deleted; and a live segment
    after it. Returns (directory, [the .deleted paths in deleteIfExists order])."""
    import random
    import struct
    rng = random.Random(5)
    batch = kg.v2_batch([kg.Rec(b"k%d" % i, bytes(rng.randrange(32, 127) for _ in range(1000)),
                                kg.T0 + i) for i in range(16)])
    per = (8 << 20) // len(batch)
    chunk = bytearray(batch * per)
    d = tmp_path / "topic-0"
    d.mkdir()
    offset = 0
    data = bytearray()
    for _ in range(8):
        for i in range(per):
            struct.pack_into(">q", chunk, i * len(batch), offset)
            offset += 16
        data += chunk
    live = _segment(offset, 3)
    files = ig.write_partition(str(d), [(0, bytes(data)), (offset, live.data())])
    paths = files[0].paths
    _rename(paths, ".deleted", 3)
    return str(d), [paths[k] + ".deleted" for k in ORDER[:3]]


def _wait_open(p, path):
    target = os.path.realpath(path)
    fds = "/proc/%d/fd" % p.pid
    while p.poll() is None:
        try:
            if any(os.readlink(os.path.join(fds, fd)) == target for fd in os.listdir(fds)):
                return True
        except OSError:
            pass
    return False


@pytest.mark.slow
@pytest.mark.parametrize("args", [["dump", "--deep-iteration"], ["verify-index"]],
                         ids=["dump", "verify-index"])
def test_deletion_finished_while_reading(tmp_path, args):
    """The broker removes the .deleted files of a segment (LogSegment.deleteIfExists: the
    .log first) while dump or verify-index reads its .log.deleted: the log is read to its end
    from the file opened, the indexes gone by then are noted, exit 0."""
    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc")
    d, deleted = _big_deleted_partition(tmp_path)
    with open(tmp_path / "run.err", "wb") as err:
        p = subprocess.Popen([sys.executable, "-m", "kafkalog_cli", *args, d],
                             stdout=subprocess.DEVNULL, stderr=err, cwd=str(tmp_path))
        assert _wait_open(p, deleted[0]), "the .log.deleted was never opened"
        subprocess.run(["rm", "-f", *deleted], check=True, timeout=60)
        code = p.wait(timeout=120)
    err = (tmp_path / "run.err").read_text()
    assert "Traceback" not in err, err
    assert code == 0, (code, err)
    for line in err.splitlines():
        if "is a deleted segment" in line:   # dump's note on the .log.deleted it reads
            assert args[0] == "dump" and deleted[0] in line, err
            continue
        assert any(path in line for path in deleted[1:]) and "removed before" in line, err
    if args[0] == "dump":
        # the indexes come after the log, read for seconds: both were gone by then
        for path in deleted[1:]:
            assert "kafkalog: %s: removed before it could be read" % path in err, err
