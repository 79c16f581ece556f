"""`kafkalog scan`'s per-segment summary (log/summary.py) and `kafkalog dump` read through the
same record iterator: a segment is invalid for one exactly when it is for the other, on
segments written by kafka-python and damaged in many ways."""

import os
import random

import pytest

import kafkagen as kg
from dumpcheck import dump
from kafkagen import Rec


def _segment():
    w = kg.SegmentWriter()
    recs = [Rec(b"k%d" % i, kg.filler(i), kg.T0 + i * 1000) for i in range(40)]
    w.add_v2(recs[:10], "gzip")
    w.add_v2(recs[10:20], "none", producer_id=7, producer_epoch=0, base_sequence=0,
             transactional=True)
    w.add_control(kg.COMMIT, 7, 0, 3)
    w.add_v2(recs[20:30], "lz4")
    w.add_v2(recs[30:], "zstd")
    return bytearray(w.data())


def _damaged(seed):
    rng = random.Random(seed)
    data = _segment()
    for _ in range(rng.randint(1, 3)):
        p = rng.randrange(len(data))
        kind = rng.random()
        if kind < 0.6:
            data[p] ^= 1 << rng.randrange(8)
        elif kind < 0.8:
            data = data[:p]
        else:
            data[p:p] = rng.randbytes(rng.randint(1, 50))
    return bytes(data)


def _summary_invalid(path):
    from kafkalog_cli.log.summary import summarize_segment
    s = summarize_segment(path)
    return s, bool(s["invalid_batches"] or s["invalid_bytes"])


@pytest.mark.parametrize("seed", range(40))
def test_scan_and_dump_agree_on_damaged_segments(tmp_path, seed):
    path = kg.write_segment(str(tmp_path / "t-0"), 0, _damaged(seed))
    summary, invalid = _summary_invalid(path)
    res = dump("--deep-iteration", path)
    assert res.code in (0, 1), res
    assert invalid == (res.code == 1), (summary, res)


def test_scan_counts_offsets_that_go_back(tmp_path):
    w = kg.SegmentWriter()
    first = w.add_v2([Rec(b"a", b"1"), Rec(b"b", b"2")])
    second = bytearray(w.add_v2([Rec(b"c", b"3")]))
    kg.set_v2_header(second, base_offset=1)  # outside the CRC: the batch stays valid
    path = kg.write_segment(str(tmp_path / "t-0"), 0, first, bytes(second))
    summary, invalid = _summary_invalid(path)
    assert invalid and summary["invalid_batches"] == 1
    assert summary["problems"] == ["batch at %d: last offset 1 does not follow offset 1: 1 batch, "
                                   "%d bytes (offset 1) out of place; no later batch of the "
                                   "segment follows offset 1" % (len(first), len(second))]
    assert (summary["records"], summary["last_offset"]) == (2, 1)
    assert dump(path).code == 1


def test_scan_of_a_clean_segment(tmp_path):
    data = bytes(_segment())
    path = kg.write_segment(str(tmp_path / "t-0"), 0, data)
    summary, invalid = _summary_invalid(path)
    batches = kg.kafka_python_read(data)
    assert not invalid
    assert summary["batches"] == len(batches)
    assert summary["records"] == sum(len(b.records) for b in batches)
    assert (summary["first_offset"], summary["last_offset"]) == (0, 40)
    assert summary["bytes"] == os.path.getsize(path)


def test_scan_of_a_legacy_wrapper_that_inflates_past_the_bound(tmp_path):
    from kafkalog_cli.log.summary import summarize_segment
    data = kg.legacy_entries(1, [Rec(b"k%d" % i, kg.filler(i)) for i in range(5)], codec="gzip")
    path = kg.write_segment(str(tmp_path / "t-0"), 0, data)
    summary = summarize_segment(path, max_message_size=1)  # its records are not decoded
    assert (summary["batches"], summary["invalid_batches"], summary["records"]) == (1, 0, 0)
    assert dump("--deep-iteration", "--max-message-size", "1", path).code == 0


# -- a segment scanned in slices (the Spark scan's tasks): merge_slices --------------------------

def _in_slices(path, cuts):
    """The slices' summaries of ``path`` cut at ``cuts`` (batch starts), put together, or None
    when they do not join (the scan then reads the segment again whole)."""
    from kafkalog_cli.log.summary import merge_slices, summarize_slice
    bounds = [0] + sorted(cuts) + [os.path.getsize(path)]
    return merge_slices([summarize_slice(path, a, b) for a, b in zip(bounds, bounds[1:])])


def _cut_sets(data, rng):
    """Sets of 1 to 3 cuts at batch starts of ``data`` (as an .index gives them)."""
    starts = [kb.position for kb in kg.kafka_python_read(bytes(data), deep=False)][1:]
    return [sorted(rng.sample(starts, min(k, len(starts)))) for k in (1, 2, 3)]


@pytest.mark.parametrize("seed", range(40))
def test_slices_join_into_the_whole_segment_or_not_at_all(tmp_path, seed):
    """A damaged segment scanned in slices: the slices join only into what the reading of the
    whole segment gives (they do not where anything is invalid); an undamaged one's always
    join."""
    from kafkalog_cli.log.summary import summarize_segment
    rng = random.Random(seed)
    clean = kg.write_segment(str(tmp_path / "c-0"), 0, bytes(_segment()))
    damaged = kg.write_segment(str(tmp_path / "d-0"), 0, _damaged(seed))
    for cuts in _cut_sets(_segment(), rng):
        assert _in_slices(clean, cuts) == summarize_segment(clean), cuts
        merged = _in_slices(damaged, cuts)
        whole = summarize_segment(damaged)
        assert merged is None or merged == whole, cuts
        if whole["invalid_batches"] or whole["invalid_bytes"]:
            assert merged is None, cuts


def test_slices_do_not_join_across_offsets_that_go_back(tmp_path):
    """Offsets going back across a cut, in batches each valid and in order within its slice:
    only the reading of the whole segment sees them, so the slices do not join."""
    from kafkalog_cli.log.summary import summarize_segment
    w = kg.SegmentWriter()
    first = w.add_v2([Rec(b"a", b"1"), Rec(b"b", b"2")])
    second = bytearray(w.add_v2([Rec(b"c", b"3")]))
    third = w.add_v2([Rec(b"d", b"4")])
    kg.set_v2_header(second, base_offset=1)  # outside the CRC: the batch stays valid
    path = kg.write_segment(str(tmp_path / "t-0"), 0, first, bytes(second), third)
    assert _in_slices(path, [len(first)]) is None
    assert summarize_segment(path)["invalid_batches"] == 1
    assert _in_slices(path, [len(first) + len(second)]) is None  # bad in its own slice
