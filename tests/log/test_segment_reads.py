"""Segment's reads and renames, called on real segment files (kafkagen's batches, indexgen's
broker-built indexes): the batch chain walk, the entry at a position, readNextOffset,
largestTimestamp, hasOverflow, sanityCheck, the recovery scan and changeFileSuffixes."""

import os

import indexgen as ig
import kafkagen as kg
from kafkalog_cli.format.records import Batch
from kafkalog_cli.format.scan import InvalidBytes
from kafkalog_cli.log.producer_state import ProducerState
from kafkalog_cli.log.segment import Segment

T0 = kg.T0
BASE = 100


def one_record_batches(base, timestamps):
    """(.log bytes, next offset) of one-record v2 batches from ``base``, one per timestamp."""
    w = kg.SegmentWriter(base, partition_leader_epoch=1)
    for i, ts in enumerate(timestamps):
        w.add_v2([kg.Rec(b"k%d" % i, b"v" * 40, ts)])
    return w.data(), w.next_offset


def partition(tmp_path, data, base=BASE):
    """The segment at ``base`` holding ``data``, with the indexes the broker writes for it."""
    ig.write_partition(tmp_path, [(base, data)])
    return Segment(str(tmp_path), base)


def positions(data):
    return [b.position for b in ig.read_log(data)]


def test_batches_walk_the_chain_to_the_first_bytes_that_hold_none(tmp_path):
    data, _ = one_record_batches(BASE, [T0 + i for i in range(4)])
    starts = positions(data)
    # a batch whose CRC does not match is on the chain; bytes that hold no batch end it
    damaged = kg.flip_bit(data, starts[1] + 70) + kg.garbage_tail(b"", 50)
    seg = partition(tmp_path, damaged)
    walked = [(b.position, b.base_offset, b.last_offset) for b in seg.batches()]
    assert walked == [(p, BASE + i, BASE + i) for i, p in enumerate(starts)]
    with seg.open() as log:
        assert [b.base_offset for b in seg.batches(starts[2], log)] == [BASE + 2, BASE + 3]
        assert [b.position for b in seg.batches(starts[2] + 1, log)] == []


def test_batch_at_reads_the_entry_starting_there(tmp_path):
    data, _ = one_record_batches(BASE, [T0 + i for i in range(3)])
    starts = positions(data)
    seg = partition(tmp_path, data)
    at = seg.batch_at(starts[2])
    assert isinstance(at, Batch) and at.base_offset == BASE + 2 and at.position == starts[2]
    with seg.open() as log:
        assert seg.batch_at(starts[1], log).last_offset == BASE + 1
        assert isinstance(seg.batch_at(starts[1] + 3, log), InvalidBytes)
        assert seg.batch_at(len(data), log) is None
        assert seg.batch_at(-1, log) is None


def test_next_offset_reads_from_the_last_index_entry(tmp_path):
    data, end = ig.busy_segment(BASE, n_batches=30)
    entries = ig.build_indexes(data).offset_entries
    assert len(entries) >= 2
    seg = partition(tmp_path / "a", data)
    assert seg.next_offset() == end
    # bytes that hold no batch before the last indexed position: the chain from the start ends
    # there, LogSegment.readNextOffset's read from the index entry does not
    broken = bytearray(data)
    broken[entries[0][1]:entries[0][1] + 12] = bytes(12)
    seg = Segment(str(tmp_path / "a"), BASE)
    ig.write_file(seg.log_path, bytes(broken))
    assert seg.next_offset() == end
    # without an index: from the start, up to the damage
    os.unlink(seg.index_path)
    first_damaged = next(b for b in ig.read_log(data) if b.position == entries[0][1])
    assert seg.next_offset() == first_damaged.base_offset
    # an entry leading to no batch past its offset: from the start
    ig.write_file(seg.log_path, data)
    ig.write_file(seg.index_path, ig.encode_offset_index([(end + 50, entries[0][1])], BASE))
    assert seg.next_offset() == end
    ig.write_file(seg.index_path, ig.encode_offset_index([(entries[0][0], entries[0][1] + 3)],
                                                         BASE))
    assert seg.next_offset() == end
    # no batch: the base offset
    empty = partition(tmp_path / "b", b"")
    assert empty.next_offset() == BASE


def test_largest_timestamp_time_index_then_batches_then_mtime(tmp_path):
    data, _ = one_record_batches(BASE, [T0 + 5, T0 + 900, T0 + 40])
    seg = partition(tmp_path / "a", data)
    assert seg.largest_timestamp() == (T0 + 900, "time index")
    # the time index's last entry stands, whatever the batches say
    ig.write_file(seg.time_index_path, ig.encode_time_index([(T0 + 700, BASE + 1)], BASE))
    assert seg.largest_timestamp() == (T0 + 700, "time index")
    assert seg.largest_timestamp(T0 + 800) == (T0 + 700, "time index")
    # a time index failing its sanity check, or none: the batches'
    ig.write_file(seg.time_index_path, ig.encode_time_index([(T0 + 700, BASE - 1)], BASE))
    assert seg.largest_timestamp() == (T0 + 900, "batches")
    os.unlink(seg.time_index_path)
    assert seg.largest_timestamp() == (T0 + 900, "batches")
    assert seg.largest_timestamp(T0 + 33) == (T0 + 33, "batches")
    # no timestamp at all: the .log's modification time
    empty = partition(tmp_path / "b", b"")
    os.utime(empty.log_path, (1_600_000_000.25, 1_600_000_000.25))
    assert empty.largest_timestamp() == (1_600_000_000_250, "file mtime")
    assert seg.largest_timestamp(-1) == (int(os.path.getmtime(seg.log_path) * 1000),
                                          "file mtime")


def test_overflows_past_32_bit_relative_offsets(tmp_path):
    w = kg.SegmentWriter(BASE, partition_leader_epoch=1)
    w.add_v2([kg.Rec(b"a", b"x", T0)])
    w.add_v2([kg.Rec(b"b", b"x", T0)], gap=2 ** 31 - 2)  # last offset BASE + 2**31 - 1: fits
    fits = partition(tmp_path / "a", w.data())
    assert not fits.overflows()
    batches = list(fits.batches())
    assert [fits.overflows(b) for b in batches] == [False, False]
    w.add_v2([kg.Rec(b"c", b"x", T0)])  # last offset BASE + 2**31: one past
    over = partition(tmp_path / "b", w.data())
    assert over.overflows()
    assert [over.overflows(b) for b in over.batches()] == [False, False, True]
    # relative to a later base, it fits
    assert not Segment(str(tmp_path / "b"), BASE + 1).overflows(list(over.batches())[2])
    assert not partition(tmp_path / "c", b"").overflows()


def test_sanity_problems_missing_index_or_txnindex_below_base(tmp_path):
    data, _ = one_record_batches(BASE, [T0, T0 + 1])
    seg = partition(tmp_path, data)
    assert seg.sanity_problems() == []
    # the offset and time indexes' own sanity is not LogSegment.sanityCheck's business
    ig.write_file(seg.time_index_path, ig.encode_time_index([(T0, BASE - 5)], BASE))
    assert seg.sanity_problems() == []
    ig.write_file(seg.txn_index_path, ig.encode_txn_index(
        [ig.AbortedTxn(7, BASE + 1, BASE + 1, BASE + 2), ig.AbortedTxn(8, BASE - 10, BASE - 3, 0)]))
    problems = seg.sanity_problems()
    assert len(problems) == 1 and "below the base offset %d" % BASE in problems[0]
    os.unlink(seg.txn_index_path)
    os.unlink(seg.index_path)
    assert seg.sanity_problems() == ["%s: no offset index" % seg.index_path]


def test_recover_scan_keeps_the_valid_prefix(tmp_path):
    data, end = one_record_batches(BASE, [T0 + i for i in range(5)])
    starts = positions(data)
    seg = partition(tmp_path, kg.flip_bit(data, starts[3] + 70))
    scan = seg.recover_scan(None, ProducerState())
    assert (scan.valid_end, scan.first_bad, scan.bad_offset) == (starts[3], starts[3], BASE + 3)
    assert scan.reason.startswith("CRC mismatch")
    assert (scan.first_offset, scan.next_offset, scan.records) == (BASE, BASE + 3, 3)
    assert not scan.overflow
    whole = partition(tmp_path / "whole", data)
    scan = whole.recover_scan(None, ProducerState(), interval=1)
    assert (scan.first_bad, scan.valid_end, scan.next_offset) == (None, len(data), end)
    assert len(scan.builder.offset_entries) == 4  # an entry for every batch after the first


def test_change_suffix_renames_the_indexes_then_the_log(tmp_path):
    data, _ = one_record_batches(BASE, [T0, T0 + 1])
    seg = partition(tmp_path, data)
    assert not os.path.exists(seg.txn_index_path)  # no aborted transaction: none written
    stem = ig.segment_prefix(BASE)
    # a .log.deleted of the same base (the log cleaner's) is never replaced
    ig.write_file(os.path.join(str(tmp_path), stem + ".log.deleted"), b"cleaner's")
    done = seg.change_suffix(".deleted")
    assert done == [stem + ".index", stem + ".timeindex", stem + ".log"]
    assert sorted(os.listdir(tmp_path)) == sorted([
        stem + ".index.deleted", stem + ".timeindex.deleted", stem + ".log.deleted",
        stem + ".log.2.deleted"])
    with open(os.path.join(str(tmp_path), stem + ".log.2.deleted"), "rb") as f:
        assert f.read() == data
    # and back: a .swap segment swapped into place takes no suffix
    swap = Segment(str(tmp_path), BASE, ".deleted")
    assert swap.change_suffix("") == [stem + ".index.deleted", stem + ".timeindex.deleted",
                                      stem + ".log.deleted"]
    assert sorted(os.listdir(tmp_path)) == sorted([
        stem + ".index", stem + ".timeindex", stem + ".log", stem + ".log.2.deleted"])
