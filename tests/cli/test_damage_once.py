"""A stretch of batches whose offsets are out of place is said once by every command that reads
a segment (dump in each format, describe, transactions, scan): where it starts, how many
batches and bytes it holds, and where the offsets resume, rather than one line per later
batch. The base offset lies outside a v2 batch's CRC, so a flipped byte there leaves the batch
"valid" with its offsets moved."""

import json
import os

import pytest

import kafkagen as kg
from dumpcheck import dump, kafkalog

BATCHES = 250
DAMAGED = 5  # the batch whose base offset changes
AFTER = 100  # where the offsets go back, in the "back" case


def _segment(tmp_path, case):
    """A partition directory holding one segment of BATCHES one-record v2 batches (offsets
    0, 1, ...), damaged as ``case`` says; returns (directory, segment path, batch positions,
    batch sizes)."""
    chunks = []
    for i in range(BATCHES):
        offset = i
        if case == "back" and i >= AFTER:
            offset = i - 50  # batches AFTER..AFTER+49 repeat offsets 50-99
        chunks.append(kg.v2_batch([kg.Rec(b"k%d" % i, b"v%d" % i, kg.T0)], offset))
    data = bytearray(b"".join(chunks))
    positions = [sum(len(c) for c in chunks[:i]) for i in range(BATCHES)]
    if case == "beyond-reach":
        data[positions[DAMAGED] + 2] ^= 0xFF  # a high byte of the base offset
    elif case == "within-reach":
        data[positions[DAMAGED] + 7] ^= 0x80  # offset 5 becomes 133
    directory = tmp_path / "t-0"
    path = kg.write_segment(str(directory), 0, bytes(data))
    return str(directory), path, positions, [len(c) for c in chunks]


def _expected(case, path, positions, sizes):
    """The one sentence for the damage of ``case``."""
    at, size = positions[DAMAGED], sizes[DAMAGED]
    if case == "beyond-reach":
        last = DAMAGED + (0xFF << 40)
        return ("the batch at position %d: last offset %d does not fit a segment based at 0: "
                "1 batch, %d bytes (offset %d) out of place; offsets resume at position %d"
                % (at, last, size, last, positions[DAMAGED + 1]))
    if case == "within-reach":
        return ("the batch at position %d: offset 133 above those of the batch after it "
                "(offset 6): 1 batch, %d bytes (offset 133) out of place; offsets resume at "
                "position %d" % (at, size, positions[DAMAGED + 1]))
    return ("the batch at position %d: last offset 50 does not follow offset 99: 50 batches, "
            "%d bytes (offsets 50-99) out of place; offsets resume at position %d"
            % (positions[AFTER], sum(sizes[AFTER:AFTER + 50]), positions[AFTER + 50]))


CASES = ["beyond-reach", "within-reach", "back"]
DUMPS = [(), ("--deep-iteration",), ("--format", "json"), ("--format", "messages"),
         ("--format", "json", "--deep-iteration")]


@pytest.mark.parametrize("options", DUMPS, ids=lambda o: " ".join(o) or "kafka")
@pytest.mark.parametrize("case", CASES)
def test_dump_says_the_damage_once(tmp_path, implementation, case, options):
    directory, path, positions, sizes = _segment(tmp_path, case)
    res = dump(*options, path)
    assert res.code == 1, res
    # (--deep-iteration adds Kafka's own "Non-consecutive offsets" summary on stderr)
    said = [x for x in res.err_lines if x.startswith("kafkalog: ")]
    assert said == ["kafkalog: %s: %s" % (path, _expected(case, path, positions, sizes))], res.err
    # every batch is still printed, as Kafka's tool prints it
    if options[:1] != ("--format",):
        assert len([x for x in res.lines if x.startswith("baseOffset: ")]) == BATCHES, res.out


@pytest.mark.parametrize("crc", [(), ("--crc",)], ids=["headers", "crc"])
@pytest.mark.parametrize("case", CASES)
def test_describe_says_the_damage_once(tmp_path, case, crc):
    directory, path, positions, sizes = _segment(tmp_path, case)
    res = kafkalog("describe", "--format", "json", *crc, directory)
    assert res.code == 1, res
    problems = [o for o in map(json.loads, res.out.splitlines()) if o["type"] == "problem"]
    expected = _expected(case, path, positions, sizes).replace("the batch at", "batch at")
    assert [(p["kind"], p["message"]) for p in problems] == [("offset_order", expected)], res.out
    (problem,) = problems
    first = AFTER if case == "back" else DAMAGED
    count = 50 if case == "back" else 1
    assert (problem["position"], problem["batches"], problem["sizeBytes"],
            problem["resumePosition"]) == (positions[first], count,
                                           sum(sizes[first:first + count]),
                                           positions[first + count])
    text = kafkalog("describe", *crc, directory)
    assert text.code == 1, text
    assert [x for x in text.out.splitlines() if "offset_order" in x] == [
        "%s: offset_order: %s" % (os.path.abspath(path), expected)], text.out


@pytest.mark.parametrize("case", CASES)
def test_transactions_and_scan_say_the_damage_once(tmp_path, case):
    directory, path, positions, sizes = _segment(tmp_path, case)
    expected = _expected(case, path, positions, sizes)
    res = kafkalog("transactions", directory)
    assert [x for x in res.err_lines if "out of place" in x or "does not" in x] == [
        "kafkalog: %s: %s" % (os.path.abspath(path), expected)], res.err
    res = kafkalog("scan", directory)
    assert res.code == 1, res
    assert [x for x in res.err_lines if "out of place" in x or "does not" in x] == [
        "kafkalog: t-0: 00000000000000000000.log: %s"
        % expected.replace("the batch at position", "batch at")], res.err


def test_offsets_that_go_back_to_the_end_say_so(tmp_path, implementation):
    """Offsets that go back and never climb past the batches before them again: the segment
    ends in the stretch."""
    w = kg.SegmentWriter()
    for i in range(20):
        w.add_v2([kg.Rec(b"k", b"v", kg.T0)])
    w.add_v2([kg.Rec(b"k", b"v", kg.T0)], gap=-15)
    for i in range(9):
        w.add_v2([kg.Rec(b"k", b"v", kg.T0)])
    data = w.data()
    entries = kg.split_entries(data)
    path = kg.write_segment(str(tmp_path / "t-0"), 0, data)
    res = dump(path)
    assert res.code == 1, res
    assert res.err_lines == [
        "kafkalog: %s: the batch at position %d: last offset 5 does not follow offset 19: "
        "10 batches, %d bytes (offsets 5-14) out of place; no later batch of the segment "
        "follows offset 19" % (path, sum(map(len, entries[:20])), sum(map(len, entries[20:])))
    ], res.err
