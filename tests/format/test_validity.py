"""The validity rule of kafkalog_cli/format/validity.py, called directly and as the readers apply
it: the Python API (Partition.records with include_control) refuses the control records that
`kafkalog dump` refuses, with the same sentence, and recover cuts there."""

import os
import struct

import pytest

import schemaenc
from dumpcheck import dump, kafkalog
from kafkagen import ATTR_CONTROL, COMMIT, Rec, control_batch, fix_v2_crc, v2_batch, write_segment
from kafkalog_cli import InvalidDataError, Partition
from kafkalog_cli.format import records, validity


def _kraft_version_batch(base_offset, cut):
    """A KRaft control batch of one KRaftVersionRecord whose value loses its last ``cut``
    bytes (0: whole)."""
    value = schemaenc.encode(schemaenc.all_specs()["KRaftVersionRecord"], 0,
                             {"Version": 0, "KRaftVersion": 1})
    batch = bytearray(v2_batch([Rec(struct.pack(">hh", 0, 5), value[:len(value) - cut])],
                               base_offset=base_offset))
    batch[22] |= ATTR_CONTROL
    return bytes(fix_v2_crc(batch))


# control batches at offset 2, malformed in each way the rule names, and the error it gives
MALFORMED = {
    "key_version": (lambda: control_batch(COMMIT, 2, 7, 0, 5, key_version=-1),
                    "invalid control record key version -1"),
    "marker_version": (lambda: control_batch(COMMIT, 2, 7, 0, 5, marker_version=-1),
                       "invalid end transaction marker version -1"),
    "kraft_value": (lambda: _kraft_version_batch(2, 2), None),
}


def _partition(tmp_path, control):
    """A partition of data records 0-1, the control batch ``control`` (offset 2), and data
    record 3; the path of its segment."""
    part = tmp_path / "events-0"
    first = v2_batch([Rec(b"k0", b"v0"), Rec(b"k1", b"v1")], base_offset=0)
    last = v2_batch([Rec(b"k3", b"v3")], base_offset=3)
    return str(part), write_segment(str(part), 0, first, control, last)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_records_refuse_the_control_record_dump_refuses(tmp_path, case):
    make, error = MALFORMED[case]
    part, path = _partition(tmp_path, make())
    res = dump("--deep-iteration", path)
    assert res.code == 1, res
    [said] = [line for line in res.err_lines if "control record at offset 2: " in line]
    sentence = said.split("%s: " % path, 1)[1]
    if error is not None:
        assert sentence == "control record at offset 2: %s" % error, said

    given = []
    with pytest.raises(InvalidDataError) as raised:
        for record in Partition(part).records(include_control=True):
            given.append(record.offset)
    assert given == [0, 1]  # the records before the control batch; none of it
    position = len(v2_batch([Rec(b"k0", b"v0"), Rec(b"k1", b"v1")], base_offset=0))
    assert str(raised.value) == "%s: the batch at position %d: %s" % (path, position, sentence)

    # without control records the data records are all there is to read
    assert [r.offset for r in Partition(part).records()] == [0, 1, 3]

    # recover cuts the log at the same batch (LogSegment.recover's rule is the same)
    kafkalog("recover", part)
    assert os.path.getsize(path) == position


@pytest.mark.parametrize("control", [lambda: control_batch(COMMIT, 2, 7, 0, 5),
                                     lambda: _kraft_version_batch(2, 0)],
                         ids=["end_marker", "kraft_version"])
def test_well_formed_control_records_are_read(tmp_path, control):
    part, path = _partition(tmp_path, control())
    assert dump("--deep-iteration", path).code == 0
    got = [(r.offset, r.is_control) for r in Partition(part).records(include_control=True)]
    assert got == [(0, False), (1, False), (2, True), (3, False)]


def _batch(data):
    return records.read_batch(data, 0, len(data), data[16])


def test_batch_problem_says_the_first_thing_wrong():
    good = v2_batch([Rec(None, b"x")] * 3, base_offset=100)  # offsets 100-102
    batch = _batch(good)
    assert validity.batch_problem(batch, 100, None) is None
    assert validity.batch_problem(batch, 100, 99) is None
    assert (validity.batch_problem(batch, 100, 102)
            == "last offset 102 does not follow offset 102")
    assert (validity.batch_problem(batch, 103, None)
            == "last offset 102 does not fit a segment based at 103")
    assert (validity.batch_problem(batch, 102 - validity.MAX_RELATIVE_OFFSET - 1, None)
            == "last offset 102 does not fit a segment based at %d"
            % (102 - validity.MAX_RELATIVE_OFFSET - 1))
    assert validity.batch_problem(batch, 102 - validity.MAX_RELATIVE_OFFSET, None) is None
    assert validity.batch_problem(batch, None, None) is None  # reach not checked
    # both out of order and out of reach: the order is said
    assert (validity.batch_problem(batch, 103, 102)
            == "last offset 102 does not follow offset 102")

    magic = bytearray(good)
    magic[16] = 3  # outside the CRC
    assert validity.batch_problem(_batch(magic), 100, None) == "unknown magic 3"

    damaged = bytearray(good)
    damaged[-1] ^= 1
    bad = _batch(damaged)
    assert (validity.batch_problem(bad, 103, 102)
            == "CRC mismatch (stored %d, computed %d)" % (bad.crc, bad.computed_crc))


def test_control_problem_names_the_first_malformed_record():
    recs = records.Records()
    recs.offsets, recs.keys, recs.values = ([5, 6, 7], [struct.pack(">hh", 0, COMMIT), b"\x00",
                                                        struct.pack(">hh", -1, COMMIT)],
                                            [struct.pack(">hi", 0, 1), None, None])
    assert validity.control_record_error(recs.keys[0], recs.values[0]) is None
    assert (validity.control_problem(recs)
            == "control record at offset 6: control record key is shorter than 4 bytes")


def test_transactions_say_a_malformed_marker_once(tmp_path):
    """The transactions of a partition read the reader's events: its control-record problem
    is the marker's own Note, not a second one."""
    from kafkalog_cli.log.read import Note
    from kafkalog_cli.log.transactions import PartitionSummary, partition_transactions
    part, path = _partition(tmp_path, control_batch(COMMIT, 2, 7, 0, 5, marker_version=-1))
    items = list(partition_transactions(part))
    notes = [i.message for i in items if isinstance(i, Note) and i.counted]
    assert notes == ["%s: the control batch at offset 2: invalid end transaction marker "
                     "version -1" % path]
    [summary] = [i for i in items if isinstance(i, PartitionSummary)]
    assert summary.problems == 1


def _order(base, batches):
    """(what OffsetOrder.check says of each (first, last) batch of 10 bytes, the stretches it
    gives, as (position, batches, size, low, high, resume, late), the one still open at the
    end included)."""
    order = validity.OffsetOrder(base)
    whys, stretches = [], []
    for i, (first, last) in enumerate(batches):
        why, stretch = order.check(i * 10, 10, first, last)
        whys.append(why)
        if stretch is not None:
            stretches.append(stretch)
    stretch = order.finish()
    if stretch is not None:
        stretches.append(stretch)
    return whys, [(s.position, s.batches, s.size, s.low, s.high, s.resume, s.late)
                  for s in stretches]


def test_offset_order_gives_one_stretch_for_offsets_that_go_back():
    whys, stretches = _order(0, [(0, 0), (1, 1), (2, 2), (1, 1), (2, 2), (3, 3), (4, 4)])
    assert whys == [None, None, None, "last offset 1 does not follow offset 2",
                    "last offset 2 does not follow offset 2", None, None]
    assert stretches == [(30, 2, 20, 1, 2, 50, False)]


def test_offset_order_names_one_batch_above_the_batches_after_it():
    # a flipped bit: offset 3 became 131; 4 follows 2, so the batch at 30 alone is out of place
    whys, stretches = _order(0, [(0, 0), (1, 1), (2, 2), (131, 131), (4, 4), (5, 5)])
    assert whys == [None] * 6  # found once the batch after it is read
    assert stretches == [(30, 1, 10, 131, 131, 40, True)]
    # the segment's first batch: the one after it follows the base offset
    whys, stretches = _order(0, [(16, 18), (3, 6), (7, 9)])
    assert stretches == [(0, 1, 10, 16, 18, 10, True)]
    # a batch overlapping the one before it does not make that one out of place
    whys, stretches = _order(0, [(0, 1), (1, 1), (2, 2)])
    assert stretches == [(10, 1, 10, 1, 1, 20, False)]


def test_offset_order_stretch_to_the_end_and_out_of_reach():
    whys, stretches = _order(0, [(0, 0), (1, 1), (0, 0), (1, 1)])
    assert stretches == [(20, 2, 20, 0, 1, None, False)]
    order = validity.OffsetOrder(0)
    order.check(0, 10, 0, 0)
    order.check(10, 10, 1, 1)
    order.check(20, 10, 0, 1)
    assert order.finish().text() == ("last offset 1 does not follow offset 1: 1 batch, 10 bytes "
                                     "(offsets 0-1) out of place; no later batch of the segment "
                                     "follows offset 1")
    far = validity.MAX_RELATIVE_OFFSET + 1
    whys, stretches = _order(0, [(0, 0), (far, far), (far + 1, far + 1), (1, 1)])
    assert whys[1] == "last offset %d does not fit a segment based at 0" % far
    assert stretches == [(10, 2, 20, far, far + 1, 30, False)]
