"""`kafkalog verify-index` and a partition's leader-epoch-checkpoint (LeaderEpochFileCache): a
file the broker's cache could not have written is invalid data; v2 batches whose
partitionLeaderEpoch the cache lacks for their offsets, or that go back, are problems; entries
at or past the log end offset, which the broker drops when it loads the log, are a note.

The logs are written by kafka-python (kafkagen) with the broker's indexes (indexgen); every
leader-epoch-checkpoint is written here by hand, as text."""

import json
import os

import pytest

import indexgen as ig
import kafkagen as kg
from dumpcheck import kafkalog

CHECKPOINT = "leader-epoch-checkpoint"


def build(directory, layout, legacy=()):
    """Write a partition: ``layout`` lists its segments, each a list of (partition leader
    epoch, number of records) v2 batches with consecutive offsets from 0; ``legacy``: the
    number of v1 messages written first, in the first segment. Returns the log end offset."""
    segments = []
    offset = 0
    for i, batches in enumerate(layout):
        w = kg.SegmentWriter(offset)
        if i == 0 and legacy:
            w.add_legacy(1, [kg.Rec(b"old-%d" % j, b"v1 value", kg.T0 + j)
                             for j in range(legacy)])
        for epoch, n in batches:
            first = w.next_offset
            w.add_v2([kg.Rec(b"k-%d" % (first + j), b"value %d" % (first + j),
                             kg.T0 + first + j) for j in range(n)],
                     partition_leader_epoch=epoch)
        segments.append((offset, w.data()))
        offset = w.next_offset
    ig.write_partition(str(directory), segments)
    return offset


def write_checkpoint(directory, text):
    mode = "wb" if isinstance(text, bytes) else "w"
    with open(os.path.join(str(directory), CHECKPOINT), mode) as f:
        f.write(text)
    return os.path.join(str(directory), CHECKPOINT)


def verify(*args):
    res = kafkalog("verify-index", *args)
    assert "Traceback" not in res.err + res.out, res.err
    return res


def verify_json(*args):
    """(exit code, problems, notes, file lines) of ``verify-index --format json ARGS``."""
    res = verify("--format", "json", *args)
    objs = [json.loads(line) for line in res.lines]
    by_type = {t: [o for o in objs if o["type"] == t] for t in ("problem", "note", "file")}
    assert objs[-1]["type"] == "summary" and objs[-1]["command"] == "verify-index", objs
    assert objs[-1]["problems"] == len(by_type["problem"]), objs
    return res.code, by_type["problem"], by_type["note"], by_type["file"]


def epoch_file_lines(files):
    return [f for f in files if f["kind"] == CHECKPOINT]


@pytest.fixture
def part(tmp_path):
    return tmp_path / "orders-0"


# -- a cache the broker would have written ---------------------------------------------------------

def test_consistent_cache_is_clean(part):
    build(part, [[(0, 3), (0, 2)], [(2, 4), (5, 1)]])
    write_checkpoint(part, "0\n3\n0 0\n2 5\n5 9\n")
    res = verify(str(part))
    assert res.code == 0 and res.err == "", res
    code, problems, notes, files = verify_json(str(part))
    assert (code, problems, notes) == (0, [], [])
    # the checkpoint was read and checked: its own line, after the segments' files
    assert epoch_file_lines(files) == [{"type": "file", "file": os.path.join(str(part), CHECKPOINT),
                                        "kind": CHECKPOINT, "entries": 3, "problems": 0}]
    assert files[-1]["kind"] == CHECKPOINT


def test_legacy_batches_and_batches_without_an_epoch_are_not_judged(part):
    """v0/v1 messages carry no partitionLeaderEpoch, nor a v2 batch written with -1; the v2
    batches with one are judged."""
    build(part, [[(-1, 2), (4, 3)]], legacy=3)  # v1 at 0-2, epoch -1 at 3-4, epoch 4 at 5-7
    write_checkpoint(part, "0\n1\n4 5\n")
    code, problems, notes, files = verify_json(str(part))
    assert (code, problems, notes) == (0, [], [])
    assert epoch_file_lines(files)[0]["entries"] == 1
    write_checkpoint(part, "0\n1\n3 5\n")
    code, problems, _, _ = verify_json(str(part))
    assert code == 1
    assert [(p["kind"], p["offset"], p["epoch"], p["cacheEpoch"]) for p in problems] == [
        ("leader_epoch_missing", 5, 4, 3)]


def test_no_cache_file_is_no_problem(part):
    """Without a leader-epoch-checkpoint the broker starts with an empty cache: nothing is
    judged (the same log with a file lacking its epochs is reported)."""
    build(part, [[(0, 2), (3, 2)], [(1, 2)]])
    code, problems, notes, files = verify_json(str(part))
    assert (code, problems, notes, epoch_file_lines(files)) == (0, [], [], [])
    assert verify(str(part)).err == ""
    write_checkpoint(part, "0\n1\n0 0\n")
    code, problems, _, _ = verify_json(str(part))
    assert code == 1
    assert {p["kind"] for p in problems} == {"leader_epoch_missing", "leader_epoch_backwards"}


# -- a file the cache could not have written -------------------------------------------------------

MALFORMED = {
    "garbage": ("this is not a checkpoint\n\x01\x02", 1),
    "bad-version": ("1\n1\n0 0\n", 1),
    "version-with-space": ("0 \n1\n0 0\n", 1),
    "non-numeric-count": ("0\nmany\n0 0\n", 2),
    "non-numeric-epoch": ("0\n2\n0 0\nzero 5\n", 4),
    "non-numeric-offset": ("0\n1\n0 five\n", 3),
    "three-fields": ("0\n1\n0 0 0\n", 3),
    "one-field": ("0\n1\n0\n", 3),
    "leading-space": ("0\n1\n 0 0\n", 3),
    "epoch-too-large": ("0\n1\n2147483648 0\n", 3),
    "negative-epoch": ("0\n1\n-1 0\n", 3),
    "negative-offset": ("0\n1\n0 -5\n", 3),
    "epochs-not-increasing": ("0\n3\n0 0\n4 5\n4 9\n", 5),
    "epochs-going-down": ("0\n2\n3 0\n2 5\n", 4),
    "offsets-not-increasing": ("0\n2\n0 5\n1 5\n", 4),
    "blank-line": ("0\n2\n0 0\n\n", 4),
    "not-utf8": (b"0\n1\n0 0\xff\n", 3),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_checkpoint_is_invalid_data(part, name):
    """One line naming the file and the line, exit 1, never a traceback."""
    build(part, [[(0, 3)], [(2, 3)]])
    text, line = MALFORMED[name]
    path = write_checkpoint(part, text)
    res = verify(str(part))
    assert res.code == 1, res
    assert res.err.count("\n") == 1, res.err
    assert res.err.startswith(path + ": malformed_checkpoint: line %d: " % line), res.err
    code, problems, notes, files = verify_json(str(part))
    assert code == 1
    assert [(p["file"], p["kind"]) for p in problems] == [(path, "malformed_checkpoint")]
    assert epoch_file_lines(files)[0]["problems"] == 1


def test_count_mismatch(part):
    build(part, [[(0, 3), (2, 3)]])
    path = write_checkpoint(part, "0\n3\n0 0\n2 3\n")
    res = verify(str(part))
    assert res.code == 1, res
    assert res.err == ("%s: malformed_checkpoint: line 2: the count says 3 entries, the file "
                       "holds 2\n" % path)
    write_checkpoint(part, "0\n1\n0 0\n2 3\n")
    assert verify(str(part)).code == 1


def test_malformed_checkpoint_with_sanity_only(part):
    """The broker cannot load a malformed cache at start-up: --sanity-only reports it too,
    but judges no batch."""
    build(part, [[(0, 3), (2, 3)]])
    write_checkpoint(part, "0\n1\n0 0\n")  # lacks epoch 2: not judged by --sanity-only
    assert verify("--sanity-only", str(part)).code == 0
    write_checkpoint(part, "0\n1\nx y\n")
    res = verify("--sanity-only", str(part))
    assert res.code == 1 and "malformed_checkpoint: line 3:" in res.err, res


def test_unreadable_checkpoint_is_exit_2(part):
    """A leader-epoch-checkpoint that is no regular file is unreadable input."""
    build(part, [[(0, 3)]])
    os.mkdir(os.path.join(str(part), CHECKPOINT))
    res = verify(str(part))
    assert res.code == 2, res
    assert CHECKPOINT in res.err and res.err.count("\n") == 1, res.err


# -- the log against the cache ---------------------------------------------------------------------

def test_epoch_missing_from_cache(part):
    # epoch 0 at 0-4, epoch 3 at 5-7 and 8-9 (two batches), epoch 4 at 10
    build(part, [[(0, 5), (3, 3)], [(3, 2), (4, 1)]])
    path = write_checkpoint(part, "0\n2\n0 0\n4 10\n")
    res = verify(str(part))
    assert res.code == 1, res
    assert res.err.startswith(path + ": leader_epoch_missing: the 2 batches at offsets 5 to 9 "
                              "carry leader epoch 3, which the cache lacks"), res.err
    code, problems, _, _ = verify_json(str(part))
    assert code == 1
    # consecutive batches with one finding are one problem, across segments
    assert [(p["kind"], p["offset"], p["lastOffset"], p["batches"], p["epoch"],
             p["cacheEpoch"], p["cacheStartOffset"]) for p in problems] == [
        ("leader_epoch_missing", 5, 9, 2, 3, 0, 0)]


def test_batches_before_the_first_entry_of_no_later_epoch_are_a_note(part):
    """The broker's cache can start after batches of older epochs (a cache cleared by a v0/v1
    append, a partition loaded without a checkpoint): a note, exit 0."""
    build(part, [[(0, 5), (3, 3)]])
    path = write_checkpoint(part, "0\n1\n3 5\n")
    res = verify(str(part))
    assert res.code == 0, res
    assert res.err == "", res
    assert res.out.startswith(path + ": note: the batch at offsets 0 to 4 carries leader epoch "
                              "0, before the cache's first entry (epoch 3 at offset 5)"), res
    code, problems, notes, _ = verify_json(str(part))
    assert (code, problems) == (0, [])
    assert [(n["kind"], n["offset"], n["lastOffset"], n["epoch"], n["cacheEpoch"])
            for n in notes] == [("leader_epoch_before_cache", 0, 4, 0, 3)]
    # an empty cache covers none of them either
    write_checkpoint(part, "0\n0\n")
    code, problems, notes, _ = verify_json(str(part))
    assert (code, problems) == (0, [])
    assert [(n["kind"], n["offset"], n["epoch"], n["cacheEpoch"]) for n in notes] == [
        ("leader_epoch_before_cache", 0, 0, None), ("leader_epoch_before_cache", 5, 3, None)]


def test_later_epoch_before_the_first_entry(part):
    """Epoch 4 before the cache's first entry, epoch 3: the cache lacks it, and the log goes
    back from 4 to 3."""
    build(part, [[(4, 5), (3, 3)]])
    write_checkpoint(part, "0\n1\n3 5\n")
    code, problems, _, _ = verify_json(str(part))
    assert code == 1
    assert [(p["kind"], p["offset"], p["epoch"]) for p in problems] == [
        ("leader_epoch_missing", 0, 4), ("leader_epoch_backwards", 5, 3)]
    assert problems[0]["cacheEpoch"] is None
    assert "its first entry starts at offset 5" in problems[0]["message"]


def test_cache_gives_a_later_epoch(part):
    """The cache says epoch 5 starts at 5 but the batches there carry epoch 3."""
    build(part, [[(0, 5), (3, 3)]])
    write_checkpoint(part, "0\n2\n0 0\n5 5\n")
    code, problems, _, _ = verify_json(str(part))
    assert code == 1
    assert [(p["kind"], p["offset"], p["epoch"], p["cacheEpoch"]) for p in problems] == [
        ("leader_epoch_mismatch", 5, 3, 5)]


def test_epoch_starting_late_in_the_cache(part):
    """Epoch 2's first batch is at 3, the cache starts it at 6: the batch at 3 lacks it."""
    build(part, [[(0, 3), (2, 3), (2, 3)]])
    write_checkpoint(part, "0\n2\n0 0\n2 6\n")
    code, problems, _, _ = verify_json(str(part))
    assert [(p["kind"], p["offset"], p["lastOffset"]) for p in problems] == [
        ("leader_epoch_missing", 3, 5)]


def test_epoch_going_backwards(part):
    # epoch 0 at 0-2, 2 at 3-5, then in the next segment 1 at 6-8 and 2 again at 9-10
    build(part, [[(0, 3), (2, 3)], [(1, 3), (2, 2)]])
    path = write_checkpoint(part, "0\n2\n0 0\n2 3\n")
    res = verify(str(part))
    assert res.code == 1, res
    assert res.err == ("%s: leader_epoch_backwards: the batch at offsets 6 to 8 carries leader "
                       "epoch 1, below epoch 2 of the batch at offset 3 before: a partition's "
                       "epochs only increase\n" % path)
    code, problems, _, _ = verify_json(str(part))
    assert [(p["kind"], p["offset"], p["epoch"], p["previousEpoch"], p["previousOffset"])
            for p in problems] == [("leader_epoch_backwards", 6, 1, 2, 3)]


# -- entries past the log end, the log start offset ------------------------------------------------

def test_cache_entry_past_log_end_is_a_note(part):
    """Entries at or past the log end offset (10) are dropped by the broker when it loads the
    log (LogLoader: LeaderEpochFileCache.truncateFromEnd): a note, exit 0."""
    end = build(part, [[(0, 4)], [(2, 6)]])
    assert end == 10
    path = write_checkpoint(part, "0\n4\n0 0\n2 4\n3 10\n7 25\n")
    res = verify(str(part))
    assert res.code == 0, res
    assert res.err == "", res
    assert res.out.splitlines() == [
        "%s: note: epoch %d starts at offset %d, at or past the log end offset 10: the broker "
        "drops the entry when it loads the log (LogLoader: LeaderEpochFileCache.truncateFromEnd)"
        % (path, e, o) for e, o in ((3, 10), (7, 25))]
    code, problems, notes, files = verify_json(str(part))
    assert (code, problems) == (0, [])
    assert [(n["kind"], n["epoch"], n["offset"], n["logEndOffset"]) for n in notes] == [
        ("leader_epoch_past_end", 3, 10, 10), ("leader_epoch_past_end", 7, 25, 10)]
    assert epoch_file_lines(files)[0]["problems"] == 0


def test_empty_active_segment_is_the_log_end(part):
    """An empty last segment: the log end offset is its base offset."""
    build(part, [[(0, 4)], []])
    write_checkpoint(part, "0\n2\n0 0\n1 4\n")
    code, problems, notes, _ = verify_json(str(part))
    assert (code, problems) == (0, [])
    assert [(n["kind"], n["offset"], n["logEndOffset"]) for n in notes] == [
        ("leader_epoch_past_end", 4, 4)]


def test_batches_below_the_log_start_offset_are_not_judged(tmp_path):
    """After a DeleteRecords the cache starts at the log start offset
    (LeaderEpochFileCache.truncateFromStart); the batches below it, still in the first
    segment, are not judged."""
    part = tmp_path / "orders-0"
    build(part, [[(1, 5), (2, 5)]])
    write_checkpoint(part, "0\n1\n2 5\n")
    code, problems, notes, _ = verify_json(str(part))
    assert code == 0
    assert [(n["kind"], n["offset"]) for n in notes] == [("leader_epoch_before_cache", 0)]
    ig.write_file(tmp_path / "log-start-offset-checkpoint",
                  ig.offset_checkpoint([("orders", 0, 5), ("other", 0, 0)]))
    code, problems, notes, _ = verify_json(str(part))
    assert (code, problems, notes) == (0, [], [])
    # a log start offset in the middle of a batch: the batch is judged from there
    ig.write_file(tmp_path / "log-start-offset-checkpoint",
                  ig.offset_checkpoint([("orders", 0, 7)]))
    write_checkpoint(part, "0\n1\n2 7\n")
    code, problems, notes, _ = verify_json(str(part))
    assert (code, problems, notes) == (0, [], [])
    write_checkpoint(part, "0\n1\n1 7\n")
    code, problems, _, _ = verify_json(str(part))
    assert [(p["kind"], p["offset"], p["epoch"]) for p in problems] == [
        ("leader_epoch_missing", 7, 2)]


# -- what a path stands for ------------------------------------------------------------------------

def test_a_named_log_file_is_checked_against_its_partitions_cache(part):
    build(part, [[(0, 3)], [(3, 3)]])
    path = write_checkpoint(part, "0\n1\n0 0\n")
    second = os.path.join(str(part), "%020d.log" % 3)
    res = verify(second)
    assert res.code == 1, res
    assert res.err.startswith(path + ": leader_epoch_missing: the batch at offsets 3 to 5"), res
    first = os.path.join(str(part), "%020d.log" % 0)
    assert verify(first).code == 0
    # an index named alone is checked alone
    assert verify(os.path.join(str(part), "%020d.index" % 3)).code == 0


def test_log_directory_reports_each_partition_after_its_segments(tmp_path):
    logdir = tmp_path / "logdir"
    build(logdir / "orders-0", [[(0, 3), (1, 3)]])
    write_checkpoint(logdir / "orders-0", "0\n1\n0 0\n")
    build(logdir / "orders-1", [[(0, 3), (1, 3)]])
    write_checkpoint(logdir / "orders-1", "0\n2\n0 0\n1 3\n")
    code, problems, _, files = verify_json(str(logdir))
    assert code == 1
    assert [(os.path.basename(os.path.dirname(p["file"])), p["kind"]) for p in problems] == [
        ("orders-0", "leader_epoch_missing")]
    order = [(os.path.basename(os.path.dirname(f["file"])), f["kind"]) for f in files]
    assert order.index(("orders-0", CHECKPOINT)) < order.index(("orders-1", "index"))
    assert order[-1] == ("orders-1", CHECKPOINT)


def test_checkpoint_of_a_partition_without_segments(tmp_path):
    """A malformed cache is reported even when the partition holds no segment to check."""
    part = tmp_path / "orders-0"
    build(part, [[(0, 2)]])
    for n in os.listdir(str(part)):
        if n.endswith(".log"):
            os.remove(os.path.join(str(part), n))
    os.remove(os.path.join(str(part), "%020d.timeindex" % 0))
    path = write_checkpoint(part, "garbage\n")
    res = verify(str(part))
    assert res.code == 1
    assert (path + ": malformed_checkpoint: line 1:") in res.err, res.err


def test_batches_are_not_decompressed(part):
    """The check reads batch headers only: a gzip batch whose compressed bytes are garbage
    (its CRC made right) is judged by its header's epoch like any other."""
    w = kg.SegmentWriter(0)
    w.add_v2([kg.Rec(b"k-%d" % j, b"value", kg.T0 + j) for j in range(3)],
             partition_leader_epoch=0)
    bad = bytearray(kg.v2_batch([kg.Rec(b"k-%d" % j, kg.filler(j) * 4, kg.T0 + j)
                                 for j in range(3, 6)], 3, "gzip", partition_leader_epoch=2))
    bad[61:] = bytes(b ^ 0x5A for b in bad[61:])  # the records' compressed bytes
    kg.fix_v2_crc(bad)
    w.add(bytes(bad), 6)
    kg.write_segment(str(part), 0, w.data())
    assert kafkalog("dump", "--deep-iteration", str(part)).code == 1  # the records are garbage
    write_checkpoint(part, "0\n1\n0 0\n")
    code, problems, _, _ = verify_json(str(part))
    assert code == 1
    assert [(p["kind"], p["offset"], p["lastOffset"], p["epoch"]) for p in problems] == [
        ("leader_epoch_missing", 3, 5, 2)]
    write_checkpoint(part, "0\n2\n0 0\n2 3\n")
    code, problems, _, _ = verify_json(str(part))
    assert (code, problems) == (0, [])
